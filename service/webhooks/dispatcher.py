"""The webhooks' dispatcher: visits the due tables and delivers their outboxes' entries, lane by lane.

How a notification travels from a write to a receiver, and what the delivery guarantees:
:mod:`service.webhooks.outbox`.
"""

from __future__ import annotations

import logging
import os
import random
import secrets
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
import redis

from ..config import Settings
from ..store import codec, keys, redis_client
from ..store.lru import Lru
from .delivery import Sender
from .outbox import MARGIN_MS, Lane, id_parts, message_body, next_id
from .registry import Registry, Webhook, now_ms

log = logging.getLogger("service.webhooks")

VISIT_LEASE_MS = 5_000
VISIT_EVERY = 0.1
"""A dispatcher visits a table at most this often (seconds)."""
HOOKS_FOR = 1.0
"""Seconds a dispatcher uses an owner's webhooks as it read them (a deleted one may get a delivery more)."""
LINGER_MS = 500
"""A lane job that has delivered everything waits this long (XREAD BLOCK) for the table's next entry,
when the dispatcher has room to spare (else it ends: other tables may be waiting)."""
DEFER_MS = 1_000
"""A lane another dispatcher holds (or that waits for room): the table is visited again this much later."""
BATCH = 20
"""Outbox entries a lane job reads at a time."""
MAX_PER_JOB = 200
"""Deliveries one lane job makes before it lets the table be visited again (fairness)."""
BACKOFF_CAP_MS = 3_600_000
VISITS_KEPT = 10_000
"""Tables whose last visit a dispatcher remembers (for :data:`VISIT_EVERY`; a table forgotten is visited at once)."""
OWNERS_KEPT = 1000
"""API keys whose webhooks a dispatcher keeps a copy of (for :data:`HOOKS_FOR`)."""


@dataclass
class DispatcherOptions:
    """How a dispatcher delivers (the ``WEBHOOK_*`` settings: :func:`service.serving.dispatcher_options`; their
    defaults are the settings')."""

    timeout: float = float(Settings.webhook_timeout)            # seconds an attempt may take
    retry_for: float = float(Settings.webhook_retry_seconds)    # seconds of failures before a dead letter
    backoff_ms: int = Settings.webhook_backoff_ms               # the first retry's delay (doubling, at most an hour)
    concurrency: int = Settings.webhook_concurrency             # lane jobs at once
    per_webhook: int = 16                                       # lane jobs of one webhook at once
    poll: float = 0.05                                          # seconds between polls of the due tables
    sweep_every: float = float(Settings.webhook_sweep_seconds)  # seconds between sweeps of the outboxes
    allow_private: bool = False
    lane_lease_ms: int = field(default=0)

    def lease_ms(self) -> int:
        return self.lane_lease_ms or max(15_000, int(self.timeout * 1000) + 5_000)


class Dispatcher:
    """Delivers the outboxes' notifications (see the module doc); :meth:`start` runs it in threads
    (greenlets under gevent) until :meth:`stop`.  Any number may run at once, in any processes."""

    def __init__(self, client: "redis_client.Client", registry: Registry, options: DispatcherOptions | None = None,
                 *, name: str | None = None) -> None:
        self.r = client
        self.registry = registry
        self.options = options or DispatcherOptions()
        self.name = name or f"dispatcher-{os.getpid()}-{secrets.token_hex(3)}"
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._running = 0
        self._per_hook: dict[str, int] = {}
        self._renew = client.register_script(keys.RENEW)
        self._release = client.register_script(keys.RELEASE)
        self._advance = client.register_script(keys.ADVANCE)
        self._trim = client.register_script(keys.TRIM)
        self.delivered = 0  # 2xx deliveries made (for the tests and the benchmark)
        self._visited: Lru[str, float] = Lru(VISITS_KEPT)  # table id -> when (monotonic) this dispatcher visited it
        self._hooks: Lru[str, tuple[float, Any]] = Lru(OWNERS_KEPT)  # owner -> (when read, its webhooks)


    # -- running ------------------------------------------------------------------------------
    def start(self) -> "Dispatcher":
        for target, name in ((self._poll_loop, "webhooks-poll"), (self._sweep_loop, "webhooks-sweep")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        log.info("webhook dispatcher %s started", self.name)
        return self

    def stop(self, wait: float = 0.0) -> None:
        """Stop polling; lane jobs end after their attempt in flight (``wait``: seconds to wait for them)."""
        self._stop.set()
        deadline = time.monotonic() + wait
        while wait and self.busy and time.monotonic() < deadline:
            time.sleep(0.05)

    @property
    def busy(self) -> int:
        with self._lock:
            return self._running

    def run_forever(self) -> None:
        self.start()
        while not self._stop.wait(1.0):
            pass

    def _poll_loop(self) -> None:
        while not self._stop.is_set():
            try:
                visited = self.poll_once()
            except redis.exceptions.RedisError as exc:
                log.warning("webhooks: the due tables could not be read (%s)", exc)
                self._stop.wait(1.0)
                continue
            except Exception:  # noqa: BLE001 - a bug: keep delivering the others
                log.exception("webhooks: a visit failed")
                visited = 0
            if not visited:
                self._stop.wait(self.options.poll)

    def _sweep_loop(self) -> None:
        while not self._stop.wait(self.options.sweep_every):
            try:
                self.sweep()
            except redis.exceptions.RedisError as exc:
                log.warning("webhooks: the outbox sweep failed (%s); next one in %g s", exc, self.options.sweep_every)
            except Exception:  # noqa: BLE001
                log.exception("webhooks: the outbox sweep failed")

    # -- finding work -------------------------------------------------------------------------
    def sweep(self) -> int:
        """Hint every outbox that holds entries (those a crash left without their hint among them); the
        number hinted."""
        hinted = 0
        for node in redis_client.primaries(self.r):
            for pattern in (keys.OUTBOX_PATTERN, keys.CLUB_OUTBOX_PATTERN):  # (the tables', the clubs')
                batch: list[str] = []
                for key in node.scan_iter(match=pattern, count=500, _type="STREAM"):
                    batch.append(key.decode())
                    if len(batch) == 200:
                        hinted += self._hint_nonempty(node, batch)
                        batch = []
                hinted += self._hint_nonempty(node, batch)
        return hinted

    def _hint_nonempty(self, node: redis.Redis, outboxes: list[str]) -> int:
        if not outboxes:
            return 0
        with node.pipeline(transaction=False) as p:
            for key in outboxes:
                p.xlen(key)
            lengths = p.execute()
        ids = [keys.box_of_outbox(k) for k, n in zip(outboxes, lengths) if n]
        if ids:
            now = now_ms()
            self.r.zadd(keys.WEBHOOKS_DUE, {tid: now for tid in ids}, lt=True)
        return len(ids)

    def poll_once(self) -> int:
        """Visit the due tables whose visit lease this dispatcher gets (none visited here in the last
        :data:`VISIT_EVERY` seconds: a table written all the time is due all the time, and its lane jobs
        follow its new entries themselves); how many it visited."""
        due = [m.decode() for m in self.r.zrangebyscore(keys.WEBHOOKS_DUE, "-inf", now_ms(), start=0, num=100)]
        random.shuffle(due)
        visited = 0
        now = time.monotonic()
        for table_id in due:
            if self._stop.is_set():
                break
            last = self._visited.get(table_id)
            if last is not None and now - last < VISIT_EVERY:
                continue
            self._visited.put(table_id, now)
            visited += self.visit(table_id)
        return visited

    def _lease(self, key: str, ms: int) -> str | None:
        token = secrets.token_hex(8)
        return token if self.r.set(key, token, nx=True, px=ms) else None

    def _release_lease(self, key: str, token: str) -> None:
        try:
            self._release(keys=[key], args=keys.args(token=token), client=self.r)
        except redis.exceptions.RedisError:  # it expires by itself
            pass

    def _tail(self, table_id: str) -> str | None:
        out = keys.outbox(table_id)
        last = self.r.xrevrange(out, "+", "-", count=1)
        return last[0][0].decode() if last else None

    def _due_at(self, table_id: str, at: int, *, earlier_only: bool = True) -> None:
        self.r.zadd(keys.WEBHOOKS_DUE, {table_id: at}, lt=earlier_only)

    def _hooks_of(self, owner: str) -> tuple[list[Webhook], int, set[str]]:
        """:meth:`Registry.hooks_of`, read again when the copy here is older than :data:`HOOKS_FOR` (the
        trim's bound is the Redis time of the read it uses, so a webhook registered since keeps its entries)."""
        found = self._hooks.get(owner)
        if found is None or time.monotonic() - found[0] > HOOKS_FOR:
            found = (time.monotonic(), self.registry.hooks_of(owner))
            self._hooks.put(owner, found)
        return found[1]

    def visit(self, table_id: str) -> int:
        """Visit one table (see the module doc): 1 when this dispatcher held its lease, else 0."""
        lease = keys.lease(table_id)
        token = self._lease(lease, VISIT_LEASE_MS)
        if token is None:
            return 0
        starts: list = []
        try:
            tail, next_at, starts = self._visit(table_id, token)
            if starts:  # (their jobs reschedule the table when they end; this is for a job that dies)
                expiry = now_ms() + self.options.lease_ms()
                next_at = expiry if next_at is None else min(next_at, expiry)
            if next_at is None:
                self.r.zrem(keys.WEBHOOKS_DUE, table_id)
            else:
                self._due_at(table_id, next_at, earlier_only=False)
        except BaseException:
            for hook, _, lane_token, _ in starts:
                self._release_lease(keys.lease(table_id, hook.id), lane_token)
                self._done(hook)
            raise
        finally:
            self._release_lease(lease, token)
        for hook, failing, lane_token, taken in starts:  # (after the score is set: a job's own rescheduling wins)
            threading.Thread(target=self._lane_job, args=(table_id, hook, lane_token, failing, taken), daemon=True,
                             name=f"webhooks-lane-{table_id}-{hook.id}").start()
        if self._tail(table_id) != tail:  # written while this visit ran: its hint may have been overwritten
            self._due_at(table_id, now_ms())
        return 1

    def _visit(self, table_id: str, token: str) -> tuple[str | None, int | None, list]:
        """Read the table's webhooks and lanes, reserve the lane jobs to start, trim: (the outbox's last
        entry id, when to visit again for the lanes waiting, [(webhook, failing, lane lease token)])."""
        out, lanes_key, state = keys.outbox(table_id), keys.lanes(table_id), keys.alive(table_id)

        def read(r: redis.Redis) -> list:  # (one round trip: the keys share the table's slot)
            with r.pipeline(transaction=False) as p:
                p.xrange(out, "-", "+", count=1)
                p.xrevrange(out, "+", "-", count=1)
                p.hgetall(lanes_key)
                return p.execute()

        head, last, stored = redis_client.on_node(self.r, out, read)
        tail = last[0][0].decode() if last else None
        if not head:
            self._trim(keys=[keys.lease(table_id), out, lanes_key, state], args=keys.args(token=token), client=self.r)
            return tail, None, []
        owner = head[0][1][b"o"].decode()
        hooks, read_at, failing = self._hooks_of(owner)
        lanes = {k.decode(): v for k, v in stored.items()}
        now = now_ms()
        keep = id_parts(f"{read_at - MARGIN_MS}-0")
        next_at: int | None = None
        starts: list = []
        try:  # (a failure after a lane job was reserved gives it back: else its room in the dispatcher is lost)
            for hook in hooks:
                if not hook.sees(table_id):
                    continue
                lane = Lane.load(lanes.get(hook.id), hook.created_ms)
                keep = min(keep, id_parts(next_id(lane.cursor)))
                if tail is None or id_parts(tail) <= id_parts(lane.cursor):
                    continue  # nothing for it
                if lane.at > now:
                    next_at = lane.at if next_at is None else min(next_at, lane.at)
                    continue
                taken = time.monotonic()  # (the lease's expiry counts from before it is taken)
                if (lane_token := self._reserve(table_id, hook)) is not None:
                    starts.append((hook, hook.id in failing, lane_token, taken))
                else:
                    next_at = now + DEFER_MS if next_at is None else min(next_at, now + DEFER_MS)
            known = {h.id for h in hooks}
            gone = [hook_id for hook_id in lanes if hook_id not in known]
            if gone:  # (the copy may predate a webhook registered since, whose lane is then here: only a read
                # made after the lanes were says a webhook is gone)
                fresh = self.registry.hooks_of(owner)
                self._hooks.put(owner, (time.monotonic(), fresh))
                gone = [hook_id for hook_id in gone if hook_id not in {h.id for h in fresh[0]}]
            left = self._trim(keys=[keys.lease(table_id), out, lanes_key, state],
                              args=keys.args(token=token, keep=f"{keep[0]}-{keep[1]}", gone=gone or None),
                              client=self.r)
        except BaseException:
            for hook, _, lane_token, _ in starts:
                self._release_lease(keys.lease(table_id, hook.id), lane_token)
                self._done(hook)
            raise
        if left and next_at is None and not starts:  # kept for the margin (or a webhook this visit did not
            next_at = now + int(HOOKS_FOR * 1000) + 100  # know yet): look again once the copy is fresh
        return tail, next_at, starts

    # -- a lane job ---------------------------------------------------------------------------
    def _reserve(self, table_id: str, hook: Webhook) -> str | None:
        """Room for a lane job and its lease (its token), or None: no room, or another holds the lane."""
        with self._lock:
            if self._stop.is_set() or self._running >= self.options.concurrency \
                    or self._per_hook.get(hook.id, 0) >= self.options.per_webhook:
                return None
            self._running += 1
            self._per_hook[hook.id] = self._per_hook.get(hook.id, 0) + 1
        token = None
        try:
            token = self._lease(keys.lease(table_id, hook.id), self.options.lease_ms())
        finally:
            if token is None:
                self._done(hook)
        return token

    def _spare(self, hook: Webhook) -> bool:
        """Room for lane jobs to linger: at most half the dispatcher's, and of the webhook's, in use."""
        with self._lock:
            return self._running * 2 <= self.options.concurrency and \
                self._per_hook.get(hook.id, 0) * 2 <= self.options.per_webhook

    def _done(self, hook: Webhook) -> None:
        with self._lock:
            self._running -= 1
            left = self._per_hook.get(hook.id, 1) - 1
            if left:
                self._per_hook[hook.id] = left
            else:
                self._per_hook.pop(hook.id, None)

    def _lane_job(self, table_id: str, hook: Webhook, token: str, failing: bool, taken: float) -> None:
        lease = keys.lease(table_id, hook.id)
        lane = None
        outcome = "end"
        try:
            lane, outcome = self._deliver_lane(table_id, hook, token, failing, taken)
        except redis.exceptions.RedisError as exc:
            log.warning("webhooks: lane %s of table %s stopped (%s)", hook.id, table_id, exc)
            outcome = "retry"
        except Exception:  # noqa: BLE001 - a bug: the lane is tried again later
            log.exception("webhooks: lane %s of table %s failed", hook.id, table_id)
            outcome = "retry"
        finally:
            try:
                self._release_lease(lease, token)
                if outcome == "backoff" and lane is not None:
                    self._due_at(table_id, lane.at)
                elif outcome in ("more", "retry"):
                    self._due_at(table_id, now_ms() + (DEFER_MS if outcome == "retry" else 0))
                elif outcome == "end" and lane is not None:
                    tail = self._tail(table_id)
                    if tail is not None and id_parts(tail) > id_parts(lane.cursor):
                        self._due_at(table_id, now_ms())
            except redis.exceptions.RedisError as exc:  # the sweep hints the table again
                log.warning("webhooks: table %s could not be rescheduled (%s)", table_id, exc)
            finally:
                self._done(hook)

    def _store_lane(self, table_id: str, hook: Webhook, token: str, lane: Lane) -> int:
        lease, lanes_key, out = keys.lease(table_id, hook.id), keys.lanes(table_id), keys.outbox(table_id)
        return int(self._advance(keys=[lease, lanes_key, out],
                                 args=keys.args(token=token, hook=hook.id, lane=lane.stored().decode()), client=self.r))

    def _deliver_lane(self, table_id: str, hook: Webhook, token: str, failing: bool,
                      taken: float) -> tuple[Lane, str]:
        """Deliver the lane's entries in order; (the lane as left, ``end`` | ``backoff`` | ``more`` | ``lost``).

        Each delivery moves the cursor (ADVANCE) before the next one is sent.  The lease is renewed
        before an attempt that could outlast it, and a run of successes is recorded on the webhook's
        status at most once a second (and when the job ends); a failure is recorded at once.
        """
        opts = self.options
        lease, lanes_key, out = keys.lease(table_id, hook.id), keys.lanes(table_id), keys.outbox(table_id)
        lane = Lane.load(self.r.hget(lanes_key, hook.id), hook.created_ms)
        if lane.at > now_ms():
            return lane, "backoff"
        renewed = taken  # (when the lease was taken (monotonic): the job may start a while later)
        renew_after = max(0.0, (opts.lease_ms() - opts.timeout * 1000 - 2000) / 1000)
        unnoted: dict | None = None  # the last success, not recorded yet
        noted = 0.0
        sender = Sender(hook.url, opts.allow_private)
        sent = 0
        moved = False  # the cursor moved past entries this webhook does not take: to be written
        try:
            while not self._stop.is_set():
                after = "(" + lane.cursor
                entries = self.r.xrange(out, after, "+", count=BATCH)
                if not entries and sent < MAX_PER_JOB and self._spare(hook):  # its next entry may be near
                    cursor = lane.cursor
                    read = self.r.xread({out: cursor}, count=BATCH, block=LINGER_MS)
                    entries = read[0][1] if read else []
                if not entries:
                    break
                for raw_id, fields in entries:
                    entry_id = raw_id.decode()
                    kind = fields[b"t"].decode()
                    if kind not in hook.events or fields[b"o"].decode() != hook.owner:
                        lane, moved = replace(lane, cursor=entry_id), True
                        continue
                    if moved:
                        if self._store_lane(table_id, hook, token, lane) != 1:
                            return lane, "lost"
                        moved = False
                    if sent >= MAX_PER_JOB:
                        return lane, "more"
                    if time.monotonic() - renewed >= renew_after:
                        argv = keys.args(token=token, ms=opts.lease_ms())
                        if not self._renew(keys=[lease], args=argv, client=self.r):
                            return lane, "lost"
                        renewed = time.monotonic()
                    data = orjson.loads(fields[b"d"])
                    body = message_body(kind, entry_id, fields[b"d"])
                    message_id = f"msg_{table_id}_{entry_id}"
                    tried = self.registry.attempt(hook, message_id, body, kind, table_id, data.get("seq"),
                                                  lane.attempts + 1, opts.timeout, sender)
                    result, view = tried["result"], tried["view"]
                    now = now_ms()
                    sent += 1
                    if result.ok:
                        lane = Lane(entry_id)
                        self.delivered += 1
                        if self._store_lane(table_id, hook, token, lane) != 1:
                            return lane, "lost"
                        unnoted = view
                        if failing or time.monotonic() - noted >= 1.0:  # (back from failing: say so at once)
                            unnoted, noted = None, time.monotonic()
                            if not self.registry.note(hook, view, "ok"):
                                return lane, "lost"  # the webhook was deleted
                        failing = False
                        continue
                    since = lane.since or now
                    if failing or now - since >= opts.retry_for * 1000:
                        letter = {"id": message_id, "type": kind, "table": table_id, "seq": data.get("seq"),
                                  "attempts": lane.attempts + 1, "first_failure": codec.iso(since),
                                  "dead_at": codec.iso(now), "error": result.error, "status": result.status,
                                  "body": orjson.loads(body)}
                        lane = Lane(entry_id)  # (the next entry's budget starts at its own first failure)
                        failing = True
                        if self._store_lane(table_id, hook, token, lane) != 1:
                            return lane, "lost"
                        unnoted = None
                        if not self.registry.note(hook, view, "dead", letter):
                            return lane, "lost"
                        log.warning("webhooks: %s dead-lettered %s after %d attempt(s) (%s)", hook.id, message_id,
                                    letter["attempts"], result.error)
                        continue
                    delay = min(opts.backoff_ms * 2 ** lane.attempts, BACKOFF_CAP_MS)
                    lane = replace(lane, attempts=lane.attempts + 1, since=since,
                                   at=now + int(delay * random.uniform(0.8, 1.2)))
                    self._store_lane(table_id, hook, token, lane)
                    unnoted = None
                    self.registry.note(hook, view, "failed")
                    return lane, "backoff"
            if moved:
                self._store_lane(table_id, hook, token, lane)
            return lane, "end"
        finally:
            sender.close()
            if unnoted is not None:
                try:
                    self.registry.note(hook, unnoted, "ok")
                except redis.exceptions.RedisError:  # (only the status lags)
                    pass
