"""The webhooks' outboxes: how a notification travels, what the delivery guarantees, a lane's state.

How a notification travels
--------------------------
1. **The outbox.**  At a table an API key created, the Lua script that makes
   a write (CREATE, APPEND, FINISH, DELETE: :mod:`service.store.keys`) also
   adds the write's notification to the table's outbox, a Redis stream in the
   table's slot (``{t:<id>}:outbox``): an acknowledged write always has its
   notification, a refused one never has, and on a Redis Cluster the script
   still touches its table's slot only.  Types: ``table.created``,
   ``event.recorded`` (``round.ended`` after it when the record ended a
   round), ``event.voided``, ``table.finished``, ``table.deleted``.  A
   club's ``season.updated`` travels the same way from the club's outbox
   (``{c:<id>}:outbox``, written by the club's script, :mod:`service.store.clubs`):
   wherever this page says "table", a dispatcher takes a *box*, a table's id or
   ``c:<club id>`` (:func:`~service.store.keys.box_tag`).
2. **The hint.**  After the script the store adds the table to
   :data:`~service.store.keys.WEBHOOKS_DUE` (a sorted set: table id → when to
   visit it, ``ZADD LT now``) and pushes :data:`~service.store.keys.WEBHOOKS_WAKE`
   (one element at most), which wakes a dispatcher waiting for work; on a Redis
   that is not a cluster an append's script does both itself, in the same round
   trip.  A crash between the script and the hint leaves an outbox without its
   hint: every dispatcher **sweeps** each primary's outboxes every
   ``WEBHOOK_SWEEP_SECONDS`` (60 s) and hints the ones holding entries, so such
   a notification waits at most that long.
3. **A visit.**  A dispatcher reads the due tables; with none due it blocks
   (``BLPOP`` on the wake-up list) until a hint, the next visit due, or 1.5 s
   (:mod:`~service.webhooks.dispatcher`).  It visits a table at most every 100 ms,
   takes its visit lease (``{t:<id>}:lease``, 5 s) and
   reads its outbox's ends and its **lanes** (``{t:<id>}:lanes``: per webhook,
   the last entry it was given or dead-lettered and where its retries stand) in
   one round trip, and the owner's webhooks (read again after 1 s).  It starts a
   lane job for each enabled webhook with entries to deliver whose retry is due
   and for which it has room (its fair lanes: :mod:`~service.webhooks.dispatcher`), trims
   the entries every webhook is done with, and sets when to visit the table
   again (the earliest retry), then releases the lease.
4. **A lane job** (one webhook, one table) holds the lane's lease
   (``{t:<id>}:lease:<hook>``) and delivers that webhook's entries of that table
   in order, one at a time, passing over those it does not take (its event
   types and tables, from when it took them: :mod:`~service.webhooks.registry`):
   a 2xx moves its cursor on (a script that checks the
   lease, so a dispatcher that lost it writes nothing); a failure (another
   status, a timeout, a refused target) schedules a retry of the same entry,
   exponentially later (``WEBHOOK_BACKOFF_MS`` doubling, at most an hour,
   ±20 %), and ends the job.  Past ``WEBHOOK_RETRY_SECONDS`` (a day) of
   failures the entry is **dead-lettered** (``{o:<name>}:dead:<hook>``, newest
   first, the last 1000 kept; counted on ``GET``) and the webhook is
   ``failing``: from then on each entry gets one attempt until a delivery
   succeeds (then ``ok`` again, and a whole budget per entry).  A lane job
   keeps its connection to the receiver alive, and when it has delivered
   everything and the dispatcher has room to spare it waits half a second
   (``XREAD BLOCK``) for the table's next entry.  Each attempt goes into the
   webhook's deliveries log (:mod:`~service.webhooks.registry`).

What it guarantees, and its bounds
----------------------------------
* **At least once, in seq order per table and webhook.**  A cursor moves only
  after a 2xx (or a dead letter), so a crash repeats a delivery, never skips
  one; one lane job at a time per (table, webhook) (its lease) keeps the order.
  Two dispatchers deliver an entry once in the normal case; after a lost lease
  (a dispatcher stalled or killed mid-attempt) the next holder may repeat the
  entry that was in flight.  A receiver deduplicates by ``webhook-id``
  (``msg_<table>_<outbox entry id>``: the same on every retry).
* **Isolation.**  The dispatcher is off the request path: an append costs the
  outbox entry (in its script) and the hint (one ``ZADD``); a slow or dead
  receiver only occupies its own lane jobs: each attempt has a deadline
  (``WEBHOOK_TIMEOUT``), a key and a webhook have at most their share of a
  dispatcher's lane jobs, a slow one less (:mod:`~service.webhooks.dispatcher`),
  and a table's other webhooks have lanes of their own.
* **Latency**: the wake-up after the write's hint, a visit, plus the receiver (a table
  written in a burst: its lingering lane job's, a few ms); after a
  crash between a write and its hint, at most the sweep period; after a
  dispatcher is killed, the lane lease's expiry (15 s or the attempt's
  timeout + 5 s) and a visit; after Redis restarts, as soon as it answers again
  (the outbox and the lanes are in the AOF like the tables).
* **Memory**: delivered (and dead-lettered) entries are trimmed at the next
  visit of their table; nothing a webhook may still be given is trimmed: the
  trim keeps everything after the lowest cursor of the table's webhooks, and
  everything of the last 10 s (:data:`MARGIN_MS`, measured by the owner's
  Redis clock when its webhooks were read: a webhook registered meanwhile gets
  the notifications written after its creation, and those of the second before
  it, :data:`CLOCK_SLACK_MS`: a cluster node's clock may be a little behind).  An outbox expires with its
  table (its TTL is the table's, at least 7 days: :func:`~service.store.keys.outbox_ttl`),
  so notifications that no dispatcher delivered within that time go with it;
  an outbox left empty by a deleted or expired table is removed.  A table an API
  key created has an outbox whether or not the key has webhooks (a script
  cannot read the key's slot): without webhooks its entries go at the next
  visit, 10 s after they were written.  **Bound**: an append keeps its outbox
  to about :data:`~service.store.keys.OUTBOX_MAX_ENTRIES` (10,000) entries
  (``XADD MAXLEN ~``): past it the oldest go, delivered or not, so a webhook that
  far behind at one table (its receiver down for long, no dispatcher running)
  loses them; ``/metrics`` shows the longest outbox
  (:mod:`~service.webhooks.metrics`).
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from ..store import codec

MARGIN_MS = 10_000
"""Entries younger than this (by the owner's Redis clock when its webhooks were read) are never trimmed."""
CLOCK_SLACK_MS = 1_000
"""A new webhook's lanes start this long before its registration (by the owner's Redis clock): an outbox entry's
id is the clock of its table's node, which on a cluster may be a little behind the owner's node's (a write
acknowledged after the registration is delivered; one made up to this long before it may be too).  Less than
:data:`MARGIN_MS`, so a visit that does not know the webhook yet keeps those entries."""


def id_parts(raw: bytes | str) -> tuple[int, int]:
    """A stream entry id as (ms, seq).

    >>> id_parts(b"1700000000000-3") < id_parts("1700000000000-12")
    True
    """
    text = raw.decode() if isinstance(raw, bytes) else raw
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def next_id(entry: str) -> str:
    """The smallest stream id after ``entry`` (what XTRIM MINID keeps from).

    >>> next_id("1700000000000-3")
    '1700000000000-4'
    """
    ms, seq = id_parts(entry)
    return f"{ms}-{seq + 1}"


def message_body(kind: str, entry: str, data: bytes | str) -> str:
    """A delivery's body: ``{"type", "timestamp", "data"}`` (the timestamp: when the outbox got it)."""
    data = data.decode() if isinstance(data, bytes) else data
    return (f'{{"type":{orjson.dumps(kind).decode()},"timestamp":"{codec.iso(id_parts(entry)[0])}",'
            f'"data":{data}}}')


@dataclass
class Lane:
    """Where one webhook's deliveries of one table stand: ``cursor``, the last outbox entry it was given
    (or dead-lettered); ``attempts`` at the next one; ``at`` (ms) when to try it again; ``since`` (ms)
    when the current run of failures began (0: none)."""

    cursor: str
    attempts: int = 0
    at: int = 0
    since: int = 0

    def stored(self) -> bytes:
        return orjson.dumps({"c": self.cursor, "n": self.attempts, "at": self.at, "since": self.since})

    @classmethod
    def load(cls, raw: bytes | str | None, created_ms: int) -> Lane:
        if raw is None:
            return cls(f"{created_ms - CLOCK_SLACK_MS}-0")
        d = orjson.loads(raw)
        return cls(d["c"], int(d["n"]), int(d["at"]), int(d["since"]))
