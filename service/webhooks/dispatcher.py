"""The webhooks' dispatcher: visits the due tables and delivers their outboxes' entries, lane by lane.

How a notification travels from a write to a receiver, and what the delivery guarantees:
:mod:`service.webhooks.outbox`.

Fair lanes
----------
A dispatcher runs at most ``concurrency`` lane jobs at once (``WEBHOOK_CONCURRENCY``), and shares them out
so that nobody's slow receivers hold everybody's deliveries:

* one API key's lane jobs at most half of them (:meth:`DispatcherOptions.key_cap`), one webhook's a quarter
  (:meth:`DispatcherOptions.hook_cap`): another key's deliveries always find the other half;
* a job is *slow* while its webhook is (its last attempt here took :data:`SLOW_MS` or more, or timed out, or
  one of its attempts has been running that long): a slow job starts only while the key's slow jobs are fewer
  than half its share and all the slow jobs fewer than half of ``concurrency``
  (:meth:`DispatcherOptions.slow_cap`), so that the receivers that answer keep room, the key's own other
  webhooks included, however many keys have slow ones (once their first attempts, started before they were
  seen to be slow, have ended: ``WEBHOOK_TIMEOUT`` at most);
* a table refused for want of room waits in line (:data:`WAITING_KEPT`), and is visited as soon as a job
  that frees room for it ends; while tables wait, a lane job yields after ``slice`` seconds (at its next
  delivery), so that the tables of a webhook at its cap take turns, and no job lingers (:data:`LINGER_MS`).

Idle
----
A dispatcher with nothing due blocks (``BLPOP``) on :data:`~service.store.keys.WEBHOOKS_WAKE`, which a hint
pushes when it makes a table due sooner (the store's after a write, a lane job's retry: ``HINT``), until the
next visit due in the due set (at least ``poll``: a table due already that could not be visited) or at most
``idle`` seconds: it sends about one command a second when there is nothing to do, and starts on a write's
notification as soon as its hint is written.  (``idle`` must stay under the client's socket timeout: 2 s.)
"""

from __future__ import annotations

import logging
import os
import random
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
import redis
from redis.typing import EncodableT, FieldT

from ..config import Settings
from ..store import codec, keys, redis_client
from ..store.lru import Lru
from . import metrics
from .delivery import Attempt, Sender
from .outbox import MARGIN_MS, Lane, id_parts, message_body, next_id
from .registry import Registry, Webhook, delivery_record, now_ms

log = logging.getLogger("service.webhooks")
# the lanes' order and the retries' jitter: its own generator, so a host process's global random state is
# neither used nor moved
_JITTER = random.Random()

VISIT_LEASE_MS = 5_000
VISIT_EVERY = 0.1
"""A dispatcher visits a table at most this often (seconds)."""
HOOKS_FOR = 1.0
"""Seconds a dispatcher uses an owner's webhooks as it read them (a change or a deletion reaches its
deliveries within that time: a lane job reads them again before each delivery)."""
LINGER_MS = 500
"""A lane job that has delivered everything waits this long (XREAD BLOCK) for the table's next entry,
when the dispatcher has room to spare (else it ends: other tables may be waiting)."""
DEFER_MS = 1_000
"""A lane another dispatcher holds (or that waits for room): the table is visited again this much later (a
table waiting for room here is visited as soon as a job ends that frees it)."""
BATCH = 20
"""Outbox entries a lane job reads at a time."""
MAX_PER_JOB = 200
"""Deliveries one lane job makes before it lets the table be visited again (fairness)."""
BACKOFF_CAP_MS = 3_600_000
VISITS_KEPT = 10_000
"""Tables whose last visit a dispatcher remembers (for :data:`VISIT_EVERY`; a table forgotten is visited at once)."""
OWNERS_KEPT = 1000
"""API keys whose webhooks a dispatcher keeps a copy of (for :data:`HOOKS_FOR`)."""
SLOW_MS = 1_000
"""An attempt this long (or one that timed out) makes its webhook *slow* (see the module doc)."""
SLOW_KEPT = 10_000
"""Webhooks whose last attempt's speed a dispatcher remembers."""
WAITING_KEPT = 1000
"""Tables a dispatcher keeps in line for room (the oldest go first; one forgotten waits for its next visit)."""
NOTE_EVERY = 1.0
"""A lane job records a run of successes (the webhook's status, its deliveries log) at most this often."""


@dataclass(eq=False)
class _Job:
    """A lane job, as a dispatcher counts it: its key and webhook, and since when (monotonic) its attempt in
    flight has been running (None: none)."""

    owner: str
    hook: str
    attempting: float | None = None


@dataclass
class _Census:
    """The lane jobs of a dispatcher, counted: in all, per webhook, per key; the slow webhooks, the slow jobs in
    all and per key."""

    total: int
    slow_hooks: set[str]
    per_hook: dict[str, int] = field(default_factory=dict)
    per_key: dict[str, int] = field(default_factory=dict)
    slow_per_key: dict[str, int] = field(default_factory=dict)
    slow: int = 0


@dataclass
class DispatcherOptions:
    """How a dispatcher delivers (the ``WEBHOOK_*`` settings: :func:`service.serving.dispatcher_options`; their
    defaults are the settings')."""

    timeout: float = float(Settings.webhook_timeout)            # seconds an attempt may take
    retry_for: float = float(Settings.webhook_retry_seconds)    # seconds of failures before a dead letter
    backoff_ms: int = Settings.webhook_backoff_ms               # the first retry's delay (doubling, at most an hour)
    concurrency: int = Settings.webhook_concurrency             # lane jobs at once
    per_key: int = 0                                            # lane jobs of one API key at once (0: key_cap())
    per_webhook: int = 0                                        # lane jobs of one webhook at once (0: hook_cap())
    poll: float = 0.05                                          # seconds before looking again at tables due now
    idle: float = 1.5                                           # seconds at most blocked waiting for work
    slice: float = 2.0                                          # seconds a lane job runs before it yields (tables
                                                                # waiting)
    sweep_every: float = float(Settings.webhook_sweep_seconds)  # seconds between sweeps of the outboxes
    allow_private: bool = False
    lane_lease_ms: int = field(default=0)

    def lease_ms(self) -> int:
        return self.lane_lease_ms or max(15_000, int(self.timeout * 1000) + 5_000)

    def key_cap(self) -> int:
        """Lane jobs of one API key at once: ``per_key``, else half of ``concurrency`` (at least 1)."""
        return self.per_key or max(1, self.concurrency // 2)

    def hook_cap(self) -> int:
        """Lane jobs of one webhook at once: ``per_webhook``, else a quarter of ``concurrency`` (at least 1)."""
        return self.per_webhook or max(1, self.concurrency // 4)

    def slow_cap(self) -> int:
        """Lane jobs of slow webhooks at once, in all: half of ``concurrency`` (at least 1)."""
        return max(1, self.concurrency // 2)


class Dispatcher:
    """Delivers the outboxes' notifications (see the module doc); :meth:`start` runs it in threads
    (greenlets under gevent) until :meth:`stop`.  Any number may run at once, in any processes."""

    def __init__(self, client: redis_client.Client, registry: Registry, options: DispatcherOptions | None = None,
                 *, name: str | None = None) -> None:
        self.r = client
        self.registry = registry
        self.options = options or DispatcherOptions()
        self.name = name or f"dispatcher-{os.getpid()}-{secrets.token_hex(3)}"
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._jobs: set[_Job] = set()  # the lane jobs running (or reserved)
        self._slow: Lru[str, bool] = Lru(SLOW_KEPT)  # webhook id -> its last attempt here was slow
        # table id -> (owner, webhook id, when it was refused (monotonic)), the most recently refused last
        self._waiting: OrderedDict[str, tuple[str, str, float]] = OrderedDict()
        self._renew = client.register_script(keys.RENEW)
        self._release = client.register_script(keys.RELEASE)
        self._advance = client.register_script(keys.ADVANCE)
        self._trim = client.register_script(keys.TRIM)
        self._hint = client.register_script(keys.HINT)
        self.delivered = 0  # 2xx deliveries made (for the tests and the benchmark)
        self._visited: Lru[str, float] = Lru(VISITS_KEPT)  # table id -> when (monotonic) this dispatcher visited it
        self._hooks: Lru[str, tuple[float, Any]] = Lru(OWNERS_KEPT)  # owner -> (when read, its webhooks)

    # -- running ------------------------------------------------------------------------------
    def start(self) -> Dispatcher:
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
            return len(self._jobs)

    def run_forever(self) -> None:
        self.start()
        while not self._stop.wait(1.0):
            pass

    def _poll_loop(self) -> None:
        while not self._stop.is_set():
            try:
                if not self.poll_once():
                    self.wait_for_work()
            except redis.exceptions.RedisError as exc:
                log.warning("webhooks: the due tables could not be read (%s)", exc)
                self._stop.wait(1.0)
            except Exception:  # noqa: BLE001 - a bug: keep delivering the others
                log.exception("webhooks: a visit failed")
                self._stop.wait(self.options.poll)

    def wait_for_work(self) -> None:
        """Block until a hint's wake-up, the next visit the due set holds, or ``idle`` seconds (at least
        ``poll``: a table due now that could not be visited is looked at again that much later)."""
        first = self.r.zrange(keys.WEBHOOKS_DUE, 0, 0, withscores=True)
        wait = self.options.idle
        if first:
            wait = min(wait, max(self.options.poll, (float(first[0][1]) - now_ms()) / 1000))  # (its score)
        self.r.blpop([keys.WEBHOOKS_WAKE], timeout=wait)

    def _sweep_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sweep()
            except redis.exceptions.RedisError as exc:
                log.warning("webhooks: the outbox sweep failed (%s); next one in %g s", exc, self.options.sweep_every)
            except Exception:  # noqa: BLE001
                log.exception("webhooks: the outbox sweep failed")
            self._stop.wait(self.options.sweep_every)

    # -- finding work -------------------------------------------------------------------------
    def sweep(self) -> int:
        """Hint every outbox that holds entries (those a crash left without their hint among them), and
        write the outboxes' figures (:data:`~service.store.keys.WEBHOOKS_OUTBOXES`); the number hinted."""
        hinted = 0
        figures = {"outboxes": 0, "entries": 0, "longest": 0, "oldest": 0}
        for node in redis_client.primaries(self.r):
            for pattern in (keys.OUTBOX_PATTERN, keys.CLUB_OUTBOX_PATTERN):  # (the tables', the clubs')
                batch: list[str] = []
                for key in node.scan_iter(match=pattern, count=500, _type="STREAM"):
                    batch.append(key.decode())
                    if len(batch) == 200:
                        hinted += self._hint_nonempty(node, batch, figures)
                        batch = []
                hinted += self._hint_nonempty(node, batch, figures)
        row: dict[FieldT, EncodableT] = dict(figures.items())  # (redis-py's mapping: of its own key type)
        row["at"] = now_ms()
        self.r.hset(keys.WEBHOOKS_OUTBOXES, mapping=row)
        return hinted

    def _hint_nonempty(self, node: redis.Redis, outboxes: list[str], figures: dict[str, int]) -> int:
        if not outboxes:
            return 0
        with node.pipeline(transaction=False) as p:
            for key in outboxes:
                p.xlen(key)
                p.xrange(key, "-", "+", count=1)
            found = p.execute()
        lengths, heads = found[0::2], found[1::2]
        ids = [keys.box_of_outbox(k) for k, n in zip(outboxes, lengths) if n]
        for n, head in zip(lengths, heads):
            if n and head:
                first = id_parts(head[0][0])[0]
                figures["oldest"] = first if not figures["oldest"] else min(figures["oldest"], first)
        figures["outboxes"] += len(ids)
        figures["entries"] += sum(lengths)
        figures["longest"] = max(figures["longest"], *lengths)
        if ids:
            self._hint(keys=[keys.WEBHOOKS_DUE, keys.WEBHOOKS_WAKE],
                       args=keys.args(tables=ids, at=now_ms(), lt=True, wake=True))
        return len(ids)

    def poll_once(self) -> int:
        """Visit the due tables whose visit lease this dispatcher gets (none visited here in the last
        :data:`VISIT_EVERY` seconds: a table written all the time is due all the time, and its lane jobs
        follow its new entries themselves); how many it visited."""
        due = [m.decode() for m in self.r.zrangebyscore(keys.WEBHOOKS_DUE, "-inf", now_ms(), start=0, num=100)]
        _JITTER.shuffle(due)
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
            self._release(keys=[key], args=keys.args(token=token))
        except redis.exceptions.RedisError:  # it expires by itself
            pass

    def _tail(self, table_id: str) -> str | None:
        out = keys.outbox(table_id)
        last = self.r.xrevrange(out, "+", "-", count=1)
        return last[0][0].decode() if last else None

    def _due_at(self, table_id: str, at: int, *, earlier_only: bool = True) -> None:
        """Visit the table at ``at`` (ms; ``earlier_only``: unless it is due earlier already), waking a
        dispatcher that waits for work when that is before its wait would end."""
        self._hint(keys=[keys.WEBHOOKS_DUE, keys.WEBHOOKS_WAKE], args=keys.args(
            tables=[table_id], at=at, lt=earlier_only or None,
            wake=at <= now_ms() + self.options.idle * 1000 or None))

    def _hooks_of(self, owner: str) -> tuple[list[Webhook], int, set[str]]:
        """:meth:`Registry.hooks_of`, read again when the copy here is older than :data:`HOOKS_FOR` (the
        trim's bound is the Redis time of the read it uses, so a webhook registered since keeps its entries)."""
        found = self._hooks.get(owner)
        if found is None or time.monotonic() - found[0] > HOOKS_FOR:
            found = (time.monotonic(), self.registry.hooks_of(owner))
            self._hooks.put(owner, found)
        return found[1]

    def _hook_now(self, hook: Webhook) -> Webhook | None:
        """The webhook as this dispatcher's copy of its owner's has it now (at most :data:`HOOKS_FOR` old), or
        None: it was deleted."""
        return next((h for h in self._hooks_of(hook.owner)[0] if h.id == hook.id), None)

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
            for hook, _, lane_token, _, job in starts:
                self._release_lease(keys.lease(table_id, hook.id), lane_token)
                self._done(job)
            raise
        finally:
            self._release_lease(lease, token)
        for hook, failing, lane_token, taken, job in starts:  # (after the score is set: a job's own rescheduling
            # wins)
            threading.Thread(target=self._lane_job, args=(table_id, hook, lane_token, failing, taken, job),
                             daemon=True, name=f"webhooks-lane-{table_id}-{hook.id}").start()
        if self._tail(table_id) != tail:  # written while this visit ran: its hint may have been overwritten
            self._due_at(table_id, now_ms())
        return 1

    def _visit(self, table_id: str, token: str) -> tuple[str | None, int | None, list]:
        """Read the table's webhooks and lanes, reserve the lane jobs to start, trim: (the outbox's last
        entry id, when to visit again for the lanes waiting, [(webhook, failing, lane lease token, when taken,
        its :class:`_Job`)])."""
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
            self._trim(keys=[keys.lease(table_id), out, lanes_key, state], args=keys.args(token=token))
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
                if not hook.enabled or not hook.sees(table_id):
                    continue  # (what it would be given later is written later: nothing to keep for it)
                lane = Lane.load(lanes.get(hook.id), hook.created_ms)
                keep = min(keep, id_parts(next_id(lane.cursor)))
                if tail is None or id_parts(tail) <= id_parts(lane.cursor):
                    continue  # nothing for it
                if lane.at > now:
                    next_at = lane.at if next_at is None else min(next_at, lane.at)
                    continue
                reserved = self._reserve(table_id, hook)
                if reserved is not None:
                    starts.append((hook, hook.id in failing, *reserved))
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
                              args=keys.args(token=token, keep=f"{keep[0]}-{keep[1]}", gone=gone or None))
        except BaseException:
            for hook, _, lane_token, _, job in starts:
                self._release_lease(keys.lease(table_id, hook.id), lane_token)
                self._done(job)
            raise
        if left and next_at is None and not starts:  # kept for the margin (or a webhook this visit did not
            next_at = now + int(HOOKS_FOR * 1000) + 100  # know yet): look again once the copy is fresh
        return tail, next_at, starts

    # -- a lane job ---------------------------------------------------------------------------
    def _census(self) -> _Census:
        """The lane jobs running, counted (under ``self._lock``; one pass over them)."""
        now = time.monotonic()
        slow = {j.hook for j in self._jobs if self._slow.get(j.hook)
                or (j.attempting is not None and now - j.attempting >= SLOW_MS / 1000)}
        census = _Census(len(self._jobs), slow)
        for j in self._jobs:
            census.per_hook[j.hook] = census.per_hook.get(j.hook, 0) + 1
            census.per_key[j.owner] = census.per_key.get(j.owner, 0) + 1
            if j.hook in slow:
                census.slow_per_key[j.owner] = census.slow_per_key.get(j.owner, 0) + 1
                census.slow += 1
        return census

    def _has_room(self, owner: str, hook_id: str, census: _Census | None = None) -> bool:
        """Room for a lane job of this webhook (under ``self._lock``; ``census``: the jobs counted already): see
        the module doc."""
        opts = self.options
        c = census or self._census()
        if c.total >= opts.concurrency or c.per_hook.get(hook_id, 0) >= opts.hook_cap() \
                or c.per_key.get(owner, 0) >= opts.key_cap():
            return False
        if hook_id not in c.slow_hooks and not self._slow.get(hook_id):
            return True
        return c.slow_per_key.get(owner, 0) < max(1, opts.key_cap() // 2) and c.slow < opts.slow_cap()

    def _reserve(self, table_id: str, hook: Webhook) -> tuple[str, float, _Job] | None:
        """Room for a lane job and its lease: (its token, when it was taken, the job), or None: no room (the
        table waits in line for it), or another dispatcher holds the lane."""
        with self._lock:
            if self._stop.is_set():
                return None
            if not self._has_room(hook.owner, hook.id):
                self._waiting[table_id] = (hook.owner, hook.id, time.monotonic())
                self._waiting.move_to_end(table_id)
                while len(self._waiting) > WAITING_KEPT:
                    self._waiting.popitem(last=False)
                return None
            self._waiting.pop(table_id, None)
            job = _Job(hook.owner, hook.id)
            self._jobs.add(job)
        taken = time.monotonic()
        token = None
        try:
            token = self._lease(keys.lease(table_id, hook.id), self.options.lease_ms())
        finally:
            if token is None:
                self._done(job)
        return None if token is None else (token, taken, job)

    def _in_line(self) -> bool:
        """Whether a table waits for room (one refused within :data:`DEFER_MS`: an older one is visited again
        anyway, here or by another dispatcher)."""
        with self._lock:
            if not self._waiting:
                return False
            newest = next(reversed(self._waiting.values()))
            return time.monotonic() - newest[2] < DEFER_MS / 1000

    def _spare(self) -> bool:
        """Room for lane jobs to linger: no table waits for room, and at most half the dispatcher's jobs are in
        use."""
        with self._lock:
            busy = len(self._jobs) * 2 > self.options.concurrency
        return not busy and not self._in_line()

    def _done(self, job: _Job) -> None:
        with self._lock:
            self._jobs.discard(job)

    def _next_in_line(self) -> str | None:
        """The first table waiting for room that there is room for now (taken out of the line), or None."""
        with self._lock:
            census = self._census() if self._waiting else None
            for table_id, (owner, hook_id, _) in self._waiting.items():
                if self._has_room(owner, hook_id, census):
                    del self._waiting[table_id]
                    return table_id
        return None

    def _lane_job(self, table_id: str, hook: Webhook, token: str, failing: bool, taken: float, job: _Job) -> None:
        lease = keys.lease(table_id, hook.id)
        lane = None
        outcome = "end"
        try:
            lane, outcome = self._deliver_lane(table_id, hook, token, failing, taken, job)
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
                self._done(job)
            try:
                waiting = self._next_in_line()
                if waiting is not None:  # (its turn: the room this job leaves is what it waited for)
                    self._due_at(waiting, now_ms())
            except redis.exceptions.RedisError:  # (it is visited again after DEFER_MS anyway)
                pass

    def _store_lane(self, table_id: str, hook: Webhook, token: str, lane: Lane) -> int:
        lease, lanes_key, out = keys.lease(table_id, hook.id), keys.lanes(table_id), keys.outbox(table_id)
        return int(self._advance(keys=[lease, lanes_key, out],
                                 args=keys.args(token=token, hook=hook.id, lane=lane.stored().decode())))

    def _judge(self, hook: Webhook, result: Attempt) -> None:
        """Remember whether the webhook is slow (see the module doc)."""
        self._slow.put(hook.id, result.ms >= SLOW_MS or (result.error or "").startswith("timeout"))

    def _deliver_lane(self, table_id: str, hook: Webhook, token: str, failing: bool, taken: float,
                      job: _Job) -> tuple[Lane, str]:
        """Deliver the lane's entries in order; (the lane as left, ``end`` | ``backoff`` | ``more`` | ``lost``).

        Each delivery moves the cursor (ADVANCE) before the next one is sent.  The lease is renewed
        before an attempt that could outlast it.  Before each delivery the webhook is read again (this
        dispatcher's copy, :data:`HOOKS_FOR`): deleted, the job ends (``lost``); disabled, it ends; with
        another URL, it ends to be started again on it; an entry it does not take (:meth:`Webhook.takes`)
        is passed over.  A run of successes is recorded (the webhook's status, its deliveries log) at most
        every :data:`NOTE_EVERY` (and when the job ends); a failure at once.
        """
        opts = self.options
        lease, lanes_key, out = keys.lease(table_id, hook.id), keys.lanes(table_id), keys.outbox(table_id)
        lane = Lane.load(self.r.hget(lanes_key, hook.id), hook.created_ms)
        if lane.at > now_ms():
            return lane, "backoff"
        renewed = taken  # (when the lease was taken (monotonic): the job may start a while later)
        renew_after = max(0.0, (opts.lease_ms() - opts.timeout * 1000 - 2000) / 1000)
        began = time.monotonic()
        unnoted: dict | None = None  # the last success, not recorded yet
        logged: list[tuple[str, str]] = []  # the successes not in the deliveries log yet
        noted = 0.0
        sender = Sender(hook.url, opts.allow_private)
        sent = 0
        moved = False  # the cursor moved past entries this webhook does not take: to be written
        disabled = False
        try:
            while not self._stop.is_set() and not disabled:
                after = "(" + lane.cursor
                entries = self.r.xrange(out, after, "+", count=BATCH)
                if not entries and sent < MAX_PER_JOB and self._spare():  # its next entry may be near
                    cursor = lane.cursor
                    read = self.r.xread({out: cursor}, count=BATCH, block=LINGER_MS)
                    entries = read[0][1] if read else []
                if not entries:
                    break
                for raw_id, fields in entries:
                    entry_id = raw_id.decode()
                    kind = fields[b"t"].decode()
                    now_hook = self._hook_now(hook)
                    if now_hook is None:
                        return lane, "lost"  # the webhook was deleted
                    if not now_hook.enabled:  # (its cursor stays: re-enabled, it is sent what is written from then on)
                        disabled = True
                        break
                    if now_hook.url != hook.url:
                        return lane, "more"  # (started again, on the new URL)
                    hook = now_hook
                    if fields[b"o"].decode() != hook.owner or not hook.takes(table_id, kind, id_parts(entry_id)[0]):
                        lane, moved = replace(lane, cursor=entry_id), True
                        continue
                    if moved:
                        if self._store_lane(table_id, hook, token, lane) != 1:
                            return lane, "lost"
                        moved = False
                    if sent >= MAX_PER_JOB or (sent and time.monotonic() - began >= opts.slice and self._in_line()):
                        return lane, "more"
                    if time.monotonic() - renewed >= renew_after:
                        argv = keys.args(token=token, ms=opts.lease_ms())
                        if not self._renew(keys=[lease], args=argv):
                            return lane, "lost"
                        renewed = time.monotonic()
                    data = orjson.loads(fields[b"d"])
                    body = message_body(kind, entry_id, fields[b"d"])
                    message_id = f"msg_{table_id}_{entry_id}"
                    attempts = lane.attempts + 1
                    job.attempting = time.monotonic()
                    try:
                        tried = self.registry.attempt(hook, message_id, body, kind, table_id, data.get("seq"),
                                                      attempts, opts.timeout, sender)
                    finally:
                        job.attempting = None
                    result, view = tried["result"], tried["view"]
                    self._judge(hook, result)
                    now = now_ms()
                    sent += 1

                    def record(status: str) -> tuple[str, str]:  # called within this iteration only
                        return message_id, delivery_record(message_id, kind, table_id, data.get("seq"),  # noqa: B023
                                                           entry_id, fields[b"d"], status, attempts, view)  # noqa: B023

                    if result.ok:
                        lane = Lane(entry_id)
                        self.delivered += 1
                        metrics.counted("delivered")
                        if self._store_lane(table_id, hook, token, lane) != 1:
                            return lane, "lost"
                        unnoted = view
                        logged.append(record("delivered"))
                        if failing or time.monotonic() - noted >= NOTE_EVERY:  # (back from failing: say so at once)
                            noted = time.monotonic()
                            done, unnoted, logged = self.registry.note(hook, view, "ok", deliveries=logged), None, []
                            if not done:
                                return lane, "lost"  # the webhook was deleted
                        failing = False
                        continue
                    since = lane.since or now
                    if failing or now - since >= opts.retry_for * 1000:
                        letter = {"id": message_id, "type": kind, "table": table_id, "seq": data.get("seq"),
                                  "attempts": attempts, "first_failure": codec.iso(since),
                                  "dead_at": codec.iso(now), "error": result.error, "status": result.status,
                                  "body": orjson.loads(body)}
                        lane = Lane(entry_id)  # (the next entry's budget starts at its own first failure)
                        failing = True
                        metrics.counted("dead")
                        if self._store_lane(table_id, hook, token, lane) != 1:
                            return lane, "lost"
                        done = self.registry.note(hook, view, "dead", letter, deliveries=[*logged, record("dead")])
                        unnoted, logged = None, []
                        if not done:
                            return lane, "lost"
                        log.warning("webhooks: %s dead-lettered %s after %d attempt(s) (%s)", hook.id, message_id,
                                    letter["attempts"], result.error)
                        continue
                    delay = min(opts.backoff_ms * 2 ** lane.attempts, BACKOFF_CAP_MS)
                    lane = replace(lane, attempts=attempts, since=since,
                                   at=now + int(delay * _JITTER.uniform(0.8, 1.2)))
                    metrics.counted("retrying")
                    self._store_lane(table_id, hook, token, lane)
                    self.registry.note(hook, view, "failed", deliveries=[*logged, record("retrying")])
                    unnoted, logged = None, []
                    return lane, "backoff"
            if moved:
                self._store_lane(table_id, hook, token, lane)
            return lane, "end"
        finally:
            sender.close()
            if logged:
                try:
                    self.registry.note(hook, unnoted, "ok", deliveries=logged)
                except redis.exceptions.RedisError:  # (only the status and the log lag)
                    pass
