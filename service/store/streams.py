"""The live stream's Redis side: one pub/sub connection per process, multiplexed over its subscribers.

How a record travels: the store's APPEND script publishes it on the table's
channel (``{t:<id>}:events``, same slot as the table; PUBLISH on a plain Redis,
SPUBLISH on a cluster) in the same atomic call that appends it.  Each worker
process keeps **one** Redis pub/sub connection (:class:`StreamHub`), subscribed
to the channels of the tables its clients follow; a listener turns each message
into what subscribers send (``parse``, given by the HTTP layer: one SSE frame)
and hands it to every local subscriber of that table.  A subscriber waits on
its own small mailbox (:class:`Subscription`), a greenlet of the gevent
worker, never a thread.

A subscriber is registered and its channel subscription confirmed by Redis
before it reads the log; after the pub/sub connection was lost (a Redis
restart), every subscriber is told to re-read the log (:data:`CHECK`) once the
channel is subscribed again.  Each mailbox holds at most ``buffer`` items: the
listener never waits for a subscriber, and one whose mailbox is full is marked
``behind``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import redis

from . import keys

log = logging.getLogger("service.stream")

SUBSCRIBE_TIMEOUT = 5.0
DELETED = "deleted"  # the table was deleted
CHECK = "check"      # the channel was (re)subscribed: compare with the log
CLOSE = "close"      # the worker stops


class Subscription:
    """A subscriber's mailbox: the listener pushes (never blocking), the subscriber takes."""

    __slots__ = ("channel", "limit", "items", "wake", "behind")

    def __init__(self, channel: str, limit: int) -> None:
        self.channel, self.limit = channel, limit
        self.items: deque = deque()
        self.wake = threading.Event()
        self.behind = False

    def push(self, item: Any) -> None:
        if len(self.items) >= self.limit and item is not CLOSE:
            self.behind = True
        else:
            self.items.append(item)
        self.wake.set()

    def take(self, timeout: float) -> list:
        if not self.items and not self.behind:
            self.wake.wait(timeout)
        self.wake.clear()
        items = []
        while self.items:  # (popleft, not copy-then-clear: a push may come in between)
            items.append(self.items.popleft())
        return items


# -- one pub/sub connection per process ---------------------------------------------------------
class TooManySubscribers(Exception):
    """A channel already has its most subscribers in this process."""


class StreamHub:
    """The process's one Redis pub/sub connection, multiplexed over its subscribers.

    ``parse(data)`` turns a channel's message into what is handed to its subscribers
    (:data:`DELETED` for the message a deletion publishes).
    ``make_pubsub()`` returns a fresh :class:`redis.client.PubSub` (its client
    must not retry by itself: a lost connection has to surface here, since the
    messages published meanwhile are lost and every subscriber must re-read the
    log).  ``sharded`` selects SSUBSCRIBE (Redis Cluster) instead of SUBSCRIBE;
    ``per_channel`` bounds the subscribers of one channel (one more: :class:`TooManySubscribers`).
    Only the listener thread (a greenlet under gevent) touches the connection;
    subscribers queue their (un)subscriptions for it.

    ``gone(table_id)`` (optional) says whether a table no longer exists (it
    expired): a watcher thread asks it for every followed table ``check_every``
    seconds after its last sweep, one table after another, and ends the streams
    that were open before the table was asked about, as a deletion would
    (:data:`DELETED`).  A lost connection ends that sweep (the next one tries
    again); any other error skips that table.
    """

    def __init__(self, make_pubsub: Callable[[], Any], parse: Callable[[bytes], Any] = bytes, *,
                 sharded: bool = False, buffer: int = 64,
                 poll: float = 0.05, per_channel: int | None = None,
                 gone: Callable[[str], bool] | None = None, check_every: float = 15.0) -> None:
        self._make_pubsub, self._parse = make_pubsub, parse
        self.sharded, self.buffer, self.poll, self.per_channel = sharded, buffer, poll, per_channel
        self._gone, self.check_every = gone, check_every
        self._lock = threading.Lock()
        self._subs: dict[str, set[Subscription]] = {}
        self._stopped = threading.Event()  # set by close(): the watcher stops waiting
        self._watcher: threading.Thread | None = None
        self._ready: dict[str, threading.Event] = {}
        self._commands: deque = deque()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.connected = threading.Event()
        self.sweeps = 0  # sweeps of the watcher done (each reads every followed table once)

    # subscriber side
    def subscribe(self, table_id: str, timeout: float = SUBSCRIBE_TIMEOUT) -> Subscription:
        """Register a subscriber; returns once Redis confirmed the channel (else raises TimeoutError;
        :class:`TooManySubscribers` when the channel has ``per_channel`` already)."""
        channel = keys.channel(table_id)
        sub = Subscription(channel, self.buffer)
        with self._lock:
            if self._closed:
                raise TimeoutError("the stream hub is closed")
            if self.per_channel is not None and len(self._subs.get(channel, ())) >= self.per_channel:
                raise TooManySubscribers(channel)
            subs = self._subs.setdefault(channel, set())
            if not subs:
                self._ready[channel] = threading.Event()
                self._commands.append(channel)
            subs.add(sub)
            ready = self._ready[channel]
            self._start()
        if not ready.wait(timeout):
            self.unsubscribe(sub)
            raise TimeoutError("Redis did not confirm the subscription")
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            subs = self._subs.get(sub.channel)
            if subs is None:
                return
            subs.discard(sub)
            if not subs:
                del self._subs[sub.channel]
                self._ready.pop(sub.channel, None)
                self._commands.append(sub.channel)

    def close(self) -> None:
        """End every stream of this process (the worker stops)."""
        with self._lock:
            self._closed = True
            everyone = [s for subs in self._subs.values() for s in subs]
        self._stopped.set()
        for sub in everyone:
            sub.push(CLOSE)

    @property
    def subscribers(self) -> int:
        with self._lock:
            return sum(len(s) for s in self._subs.values())

    @property
    def watching(self) -> bool:
        """Whether the watcher (the thread that looks for followed tables gone) runs: from the first
        subscription of a hub made with ``gone`` until a while after :meth:`close`."""
        watcher = self._watcher
        return watcher is not None and watcher.is_alive()

    # listener side
    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="stream-hub", daemon=True)
            self._thread.start()
        if self._gone is not None and (self._watcher is None or not self._watcher.is_alive()):
            self._watcher = threading.Thread(target=self._watch, name="stream-hub-watch", daemon=True)
            self._watcher.start()

    def _watch(self) -> None:
        """``check_every`` seconds after each sweep: end the streams of the followed tables that are gone."""
        assert self._gone is not None
        while not self._stopped.wait(self.check_every):
            with self._lock:
                followed = [(channel, list(subs)) for channel, subs in self._subs.items()]
            failed: list[Exception] = []
            for channel, subs in followed:
                try:
                    gone = self._gone(keys.table_of_channel(channel))
                except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:  # Redis away: next sweep
                    failed.append(exc)
                    break
                except Exception as exc:  # noqa: BLE001 - this table's read failed: the others are still checked
                    failed.append(exc)
                    continue
                if gone:
                    for sub in subs:  # (not a stream opened since: the id may hold a new table by now)
                        sub.push(DELETED)
            self.sweeps += 1
            if failed:
                log.warning("stream hub: %d failed check(s) in a sweep of the %d tables it streams (last: %s; "
                            "a lost connection ends the sweep)", len(failed), len(followed), failed[-1])

    def _run(self) -> None:
        delay = 0.1
        while not self._closed:
            pubsub = None
            try:
                pubsub = self._make_pubsub()
                with self._lock:
                    # (re)subscribe everything wanted now; confirmations re-check the log
                    self._commands.clear()
                    self._commands.extend(self._subs)
                    for channel in self._subs:
                        if self._ready.get(channel) is None or self._ready[channel].is_set():
                            self._ready[channel] = threading.Event()
                self._listen(pubsub)
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                self.connected.clear()
                log.warning("stream pub/sub connection lost (%s); reconnecting", exc)
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
            except Exception:  # pragma: no cover - a bug: keep the streams alive anyway
                self.connected.clear()
                log.exception("stream hub listener failed; restarting it")
                time.sleep(1.0)
            else:
                delay = 0.1
            finally:
                if pubsub is not None:
                    try:
                        pubsub.close()
                    except Exception:  # pragma: no cover - best effort
                        pass

    def _listen(self, pubsub: Any) -> None:
        subscribe = pubsub.ssubscribe if self.sharded else pubsub.subscribe
        unsubscribe = pubsub.sunsubscribe if self.sharded else pubsub.unsubscribe
        confirmed_type = "ssubscribe" if self.sharded else "subscribe"
        message_type = "smessage" if self.sharded else "message"
        # (on a plain PubSub get_sharded_message is get_message; a ClusterPubSub reads every node)
        read = pubsub.get_sharded_message if self.sharded else pubsub.get_message
        subscribed: set[str] = set()
        while not self._closed:
            with self._lock:
                wanted = {c: c in self._subs for c in self._commands}
                self._commands.clear()
            add = [c for c, want in wanted.items() if want and c not in subscribed]
            drop = [c for c, want in wanted.items() if not want and c in subscribed]
            kept = [c for c, want in wanted.items() if want and c in subscribed]
            if kept:  # dropped and wanted again before this turn: still subscribed all along
                with self._lock:
                    for channel in kept:
                        if channel in self._ready:
                            self._ready[channel].set()
            if add:
                subscribe(*add)
                subscribed.update(add)
            if drop:
                unsubscribe(*drop)
                subscribed.difference_update(drop)
            message = read(timeout=self.poll)
            if not message:
                continue
            self.connected.set()
            kind = message["type"]
            channel = message["channel"].decode() if isinstance(message["channel"], bytes) else message["channel"]
            if kind == message_type:
                data = message["data"]
                self._dispatch(channel, DELETED if data == keys.DELETED.encode() else self._parse(data))
            elif kind == confirmed_type:
                with self._lock:
                    ready = self._ready.get(channel)
                    subs = list(self._subs.get(channel, ()))
                if ready is not None:
                    ready.set()
                for sub in subs:
                    sub.push(CHECK)

    def _dispatch(self, channel: str, item: Any) -> None:
        with self._lock:
            subs = list(self._subs.get(channel, ()))
        for sub in subs:
            sub.push(item)


def make_hub(client: Any, parse: Callable[[bytes], Any], *, sharded: bool, buffer: int, per_channel: int | None = None,
             gone: Callable[[str], bool] | None = None, check_every: float = 15.0) -> StreamHub:
    """A hub on ``client``'s pub/sub (its connections are made as the client's: no command is re-sent,
    so a lost connection surfaces; a cluster's is per shard), turning messages into items with
    ``parse`` (``gone`` and ``check_every``: see :class:`StreamHub`)."""
    return StreamHub(lambda: client.pubsub(), parse, sharded=sharded, buffer=buffer, per_channel=per_channel,
                     gone=gone, check_every=check_every)
