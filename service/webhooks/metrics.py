"""The webhooks' figures in ``/metrics`` (prometheus-client's documented API).

* ``mahjong_webhook_deliveries_total{status}``: a counter of the dispatchers' delivery attempts by the
  status each left its delivery in (``delivered``, ``retrying``: it failed and is tried again, ``dead``: it
  was dead-lettered).  Counted by the dispatchers inside ``serve``'s workers (aggregated over them in
  multiprocess mode); a ``python -m service webhooks`` process has no ``/metrics`` of its own.
* The outboxes, as the last sweep found them (every ``WEBHOOK_SWEEP_SECONDS``, by whichever dispatcher
  swept last; :data:`~service.store.keys.WEBHOOKS_OUTBOXES`), read from Redis at each scrape by
  :class:`OutboxFigures`, a custom collector: ``mahjong_webhook_outboxes`` (outboxes holding entries),
  ``mahjong_webhook_outbox_entries`` (their entries in all), ``mahjong_webhook_outbox_longest_entries``
  (the longest one's; an outbox keeps about :data:`~service.store.keys.OUTBOX_MAX_ENTRIES`),
  ``mahjong_webhook_outbox_oldest_age_seconds`` (the age of the oldest entry now; 0: none),
  ``mahjong_webhook_outbox_sweep_age_seconds`` (how old those figures are) and, read live,
  ``mahjong_webhook_due_tables`` (the tables the dispatchers have to visit, now or later).  Nothing is
  shown for them when Redis does not answer, or before the first sweep.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import redis
from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..store import keys, redis_client

log = logging.getLogger("service.webhooks")

DELIVERIES = Counter("mahjong_webhook_deliveries",
                     "Webhook delivery attempts by the status each left its delivery in (delivered, retrying, dead).",
                     ["status"])
STATUSES = ("delivered", "retrying", "dead")


def counted(status: str) -> None:
    """Count one attempt that left its delivery ``status``."""
    DELIVERIES.labels(status).inc()


class OutboxFigures(Collector):
    """A collector of the outboxes' figures (see the module doc), read from ``client`` at each scrape."""

    def __init__(self, client: redis_client.Client) -> None:
        self.r = client

    def describe(self) -> list:
        return []  # (read at each scrape: nothing to read when it is registered)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        def read(r: redis.Redis) -> list:
            with r.pipeline(transaction=False) as p:
                p.hgetall(keys.WEBHOOKS_OUTBOXES)
                p.zcard(keys.WEBHOOKS_DUE)
                return p.execute()

        try:
            swept, due = redis_client.on_node(self.r, keys.WEBHOOKS_DUE, read)
        except redis.exceptions.RedisError as exc:
            log.debug("webhooks: no outbox figures for /metrics (%s)", exc)
            return
        yield GaugeMetricFamily("mahjong_webhook_due_tables",
                                "Tables with webhook work (to visit now or later).", value=due)
        if not swept:
            return
        found = {k.decode(): int(v) for k, v in swept.items()}
        now = time.time() * 1000
        for name, what, value in (
                ("outboxes", "Outboxes holding webhook notifications (at the last sweep).", found["outboxes"]),
                ("outbox_entries", "Webhook notifications in the outboxes (at the last sweep).", found["entries"]),
                ("outbox_longest_entries", "Entries of the longest outbox (at the last sweep).", found["longest"]),
                ("outbox_oldest_age_seconds", "Age of the oldest outbox entry (its time at the last sweep); 0: none.",
                 max(0.0, (now - found["oldest"]) / 1000) if found["oldest"] else 0.0),
                ("outbox_sweep_age_seconds", "Seconds since the sweep that found the outbox figures.",
                 max(0.0, (now - found["at"]) / 1000))):
            yield GaugeMetricFamily(f"mahjong_webhook_{name}", what, value=value)
