"""``GET /v1/tables/{id}/stream``: a table's log, live, as Server-Sent Events.

How a record travels: the store's APPEND script publishes it on the table's
channel (``{t:<id>}:events``, same slot as the table; PUBLISH on a plain Redis,
SPUBLISH on a cluster) in the same atomic call that appends it.  Each worker
process keeps **one** Redis pub/sub connection (:class:`StreamHub`), subscribed
to the channels of the tables its clients follow; a listener turns each message
into one SSE frame and hands it to every local subscriber of that table.  A
subscriber is a greenlet of the gevent worker (see :mod:`service.serving`)
parked on its own small mailbox, never a thread.

No gap, no duplicate: a subscriber is registered and its channel subscription
confirmed by Redis *before* the log is read, records are sent in seq order,
anything at or below the last seq sent is dropped, and a seq further ahead
than the next one is filled from the log first.  After the pub/sub connection
was lost (a Redis restart), every subscriber re-reads the log from its last
seq once the channel is subscribed again.

Many subscribers: a worker holds at most ``STREAM_MAX_PER_TABLE`` streams of one
table (32); one more is refused with 429 ``too_many_streams`` and ``Retry-After``, so
that a read token shown to a room (or leaked) cannot take every connection of a
worker (``MAX_CONNECTIONS``) for itself.

Slow subscribers: each mailbox holds at most ``STREAM_BUFFER`` frames.  The
listener never waits for a subscriber; one whose mailbox is full is marked
behind, gets ``event: resync`` and is closed (the client resumes with
``Last-Event-ID``); a socket that accepts nothing for 30 s is closed by the
worker.  So neither the writer nor the other subscribers ever wait on it.

Readings (API.md is silent):

* ``Last-Event-ID`` wins over ``?after=`` (a browser's EventSource reconnects
  to the same URL with the header); both must be integers >= 0 (else 422).  A
  seq beyond the table's version sends nothing until the log passes it.
* A token in the query string (``token``, ``access_token``) is refused with a
  400 problem, even beside a valid header: URLs end up in logs.
* The stream opens with ``retry: 3000`` and a comment; a comment line is sent
  every ``STREAM_HEARTBEAT`` seconds (15) whatever else is sent.
* ``data`` of a record is one JSON line: the record as ``GET …/events`` lists
  it (``voided`` as of when it is sent) plus ``version`` and ``balances`` after
  it (and ``coins`` when the table has stakes); missed records replayed from
  the log carry the balances after each of them, folded from the log.
* ``event: deleted`` (``data: {"id": …}``), ``event: resync`` (``data:
  {"after": last seq sent}``); both end the stream.  A worker that stops ends
  its streams without an event; clients reconnect with ``Last-Event-ID``.
* A table that expired (``TABLE_TTL`` after its last write) is deleted as far
  as its followers are concerned: it answers 404 like a deleted one, so its
  streams get ``event: deleted`` too.  Expiry publishes nothing, so each
  worker's hub looks: ``STREAM_HEARTBEAT`` seconds after its last look it
  reads, one table after another, whether each table it streams still exists
  (one small read per followed table, not per subscriber, and never many at
  once).  Only the streams already open when the sweep began end: a table
  made again under the same id meanwhile keeps its new streams.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import deque
from functools import partial
from socket import SO_SNDBUF, SOL_SOCKET
from typing import Any, Callable, Iterator

import redis
from flask import Response, current_app, request

from ..store import keys
from ..store.tables import TableNotFound
from .problems import ApiProblem, InvalidInput
from .smorest import Blueprint
from .tables import _NO_TABLE, _NO_TOKEN, READ, _table_id, _token, store

log = logging.getLogger("service.stream")

RETRY_MS = 3000
SUBSCRIBE_TIMEOUT = 5.0
SEND_BUFFER = 32 * 1024  # kernel send buffer of a stream socket: a stalled client holds little
_SEQ = re.compile(r"^[0-9]{1,10}$")

blp = Blueprint("stream", __name__, url_prefix="/v1/tables",
                description="The live table log as Server-Sent Events.")


# -- what travels to a subscriber ---------------------------------------------------------------
class Frame:
    """One record, as the SSE bytes every local subscriber of its table sends."""

    __slots__ = ("seq", "data")

    def __init__(self, seq: int, data: bytes) -> None:
        self.seq, self.data = seq, data


def record_frame(item: dict) -> Frame:
    body = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
    return Frame(item["seq"], f"id: {item['seq']}\nevent: record\ndata: {body}\n\n".encode())


def parse_message(data: bytes) -> "Frame | str":
    """A channel message: a record's frame, or ``DELETED``."""
    if data == keys.DELETED.encode():
        return DELETED
    return record_frame(json.loads(data))


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

    def __init__(self, make_pubsub: Callable[[], Any], *, sharded: bool = False, buffer: int = 64,
                 poll: float = 0.05, per_channel: int | None = None,
                 gone: Callable[[str], bool] | None = None, check_every: float = 15.0) -> None:
        self._make_pubsub = make_pubsub
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
                self._dispatch(channel, parse_message(message["data"]))
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


def make_hub(client: redis.Redis, *, sharded: bool, buffer: int, per_channel: int | None = None,
             gone: Callable[[str], bool] | None = None, check_every: float = 15.0) -> StreamHub:
    """A hub whose pub/sub connections are made like ``client``'s, without retries or read timeout
    (``gone`` and ``check_every``: see :class:`StreamHub`)."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    more = dict(per_channel=per_channel, gone=gone, check_every=check_every)
    pool = getattr(client, "connection_pool", None)
    if pool is None:  # a cluster client: its own ClusterPubSub (connections per shard)
        return StreamHub(client.pubsub, sharded=sharded, buffer=buffer, **more)
    kwargs = dict(pool.connection_kwargs)
    kwargs.update(socket_timeout=5, socket_connect_timeout=2, retry=Retry(NoBackoff(), 0),
                  health_check_interval=10)

    def make_pubsub():
        return redis.Redis(connection_pool=redis.ConnectionPool(**kwargs)).pubsub()

    return StreamHub(make_pubsub, sharded=sharded, buffer=buffer, **more)


_HUB_LOCK = threading.Lock()


def hub() -> StreamHub:
    """This process's hub (made on the first stream; the worker closes it when it stops)."""
    app = current_app
    found = app.extensions.get("stream_hub")
    if found is None:
        with _HUB_LOCK:
            found = app.extensions.get("stream_hub")
            if found is None:
                s = store()
                found = make_hub(s.r, sharded=s.sharded_pubsub, buffer=app.config.get("STREAM_BUFFER", 64),
                                 per_channel=app.config.get("STREAM_MAX_PER_TABLE", 32),
                                 gone=lambda table_id: s.stream_position(table_id) is None,
                                 check_every=float(app.config.get("STREAM_HEARTBEAT", 15)))
                app.extensions["stream_hub"] = found
                app.extensions.setdefault("worker_stop", []).append(found.close)
    return found


# -- the endpoint -------------------------------------------------------------------------------
class StreamUnavailable(ApiProblem):
    status, code, title = 503, "stream_unavailable", "Stream unavailable"


class TokenInQuery(ApiProblem):
    status, code, title = 400, "token_in_query", "Token in the query string"


class TooManyStreams(ApiProblem):
    status, code, title = 429, "too_many_streams", "Too many streams of this table"


def _after() -> int | None:
    """Where to resume: ``Last-Event-ID`` (wins) or ``?after=``; None: from now on."""
    for name, raw in (("Last-Event-ID", request.headers.get("Last-Event-ID")), ("after", request.args.get("after"))):
        if raw is None:
            continue
        raw = raw.strip()
        if not _SEQ.match(raw):
            raise InvalidInput(f"{name} must be a seq (an integer >= 0)", errors={name: ["an integer >= 0"]})
        return int(raw)
    return None


def _frames(s: Any, h: StreamHub, table_id: str, sub: Subscription, last: int, first: list[dict],
            heartbeat: float) -> Iterator[bytes]:
    """The stream: what was missed, then live records, comments, and the end.

    Runs after the view has returned (no request or app context): ``s`` is the
    store, ``h`` the hub.
    """

    def from_log(after: int) -> tuple[list[bytes], int] | None:
        got = s.stream_records(table_id, after)
        if got is None:
            return None
        items, _ = got
        return [record_frame(it).data for it in items], (items[-1]["seq"] if items else after)

    deleted = f"event: deleted\ndata: {json.dumps({'id': table_id}, separators=(',', ':'))}\n\n".encode()
    try:
        out = [f"retry: {RETRY_MS}\n: table {table_id}\n\n".encode()]
        for item in first:
            out.append(record_frame(item).data)
            last = item["seq"]
        yield b"".join(out)
        next_beat = time.monotonic() + heartbeat
        recheck = False
        while True:
            now = time.monotonic()
            items = sub.take(max(0.0, min(next_beat - now, 1.0 if recheck else heartbeat)))
            if sub.behind:
                yield f"event: resync\ndata: {json.dumps({'after': last})}\n\n".encode()
                return
            out = []
            for item in items:
                if item is CLOSE:
                    if out:
                        yield b"".join(out)
                    return
                if item is DELETED:
                    out.append(deleted)
                    yield b"".join(out)
                    return
                if item is CHECK or (isinstance(item, Frame) and item.seq > last + 1):
                    recheck = True  # (re)subscribed, or a gap: the log has what was missed
                    continue
                if item.seq == last + 1:
                    out.append(item.data)
                    last = item.seq
            if recheck:
                try:
                    got = from_log(last)
                except redis.RedisError as exc:  # try again in a second
                    log.warning("stream of table %s could not read the log (%s)", table_id, exc)
                else:
                    recheck = False
                    if got is None:
                        out.append(deleted)
                        yield b"".join(out)
                        return
                    out.extend(got[0])
                    last = got[1]
            if time.monotonic() >= next_beat:
                out.append(b": keep-alive\n\n")
                next_beat = time.monotonic() + heartbeat
            if out:
                yield b"".join(out)
    finally:
        h.unsubscribe(sub)


STREAM_DOC = {
    "operationId": "streamTable",
    "tags": ["tables"],
    "security": READ,
    "parameters": [
        {"in": "query", "name": "after", "required": False, "schema": {"type": "integer", "minimum": 0},
         "description": "resume after this seq: the records after it are sent first, from the log"},
        {"in": "header", "name": "Last-Event-ID", "required": False,
         "schema": {"type": "string", "pattern": "^[0-9]{1,10}$"},
         "description": "what an EventSource sends when it reconnects: like `after`, and it wins over it"},
    ],
    "responses": {
        "200": {
            "description": (
                "An endless `text/event-stream`. It opens with `retry: 3000`; then each record "
                "appended to the table's log (after `Last-Event-ID` / `after`: the missed ones first) as "
                "`id: <seq>`, `event: record`, `data: <JSON>`: the record as `GET /v1/tables/{table_id}/events` "
                "lists it plus `version` and `balances` after it (and `coins` with stakes: the table's "
                "bankrolls after it; a `buy_in` record's own coins bought then travel as `amount`). A comment line "
                "(`: keep-alive`) every 15 s at most. `event: deleted` when the table is deleted (or expired: about "
                "`STREAM_HEARTBEAT` seconds after its expiry at most), `event: resync` "
                "when this client fell behind (reconnect with `Last-Event-ID`); both end the stream. "
                "Any instance of the service delivers what any instance recorded."),
            "content": {"text/event-stream": {
                "schema": {"type": "string"},
                "example": 'retry: 3000\n: table 0ee068f610c4be29\n\nid: 2\nevent: record\ndata: {"seq":2,'
                           '"type":"kong","seat":2,"kind":"concealed","tile":"7s","round":1,'
                           '"at":"2026-11-30T17:28:24.511Z","voided":false,"version":2,'
                           '"balances":[-12,-12,36,-12]}\n\n: keep-alive\n\n',
            }},
        },
    },
}


@blp.route("/<table_id>/stream", methods=["GET"])
@blp.problems((400, "a token in the query string (`token_in_query`): tokens go in the Authorization header"),
              _NO_TOKEN, _NO_TABLE, (422, "`after` or `Last-Event-ID` is not a seq (`invalid_input`)"),
              (429, "the table has `STREAM_MAX_PER_TABLE` open streams on this instance already "
                    "(`too_many_streams`); retry after `Retry-After`"),
              (503, "the tables store (Redis) or its live stream is unavailable (`store_unavailable`, "
                    "`stream_unavailable`); retry after `Retry-After`"))
@blp.doc(**STREAM_DOC)
def stream_table(table_id):
    """Follow a table live (Server-Sent Events): every record as it is appended."""
    if {"token", "access_token"} & set(request.args):
        raise TokenInQuery("a table token goes in 'Authorization: Bearer <token>', never in the URL")
    s = store()
    tid = _table_id(table_id)
    after = _after()
    s.authorize(tid, _token(), write=False)  # 401 / 403 / 404 as for reads
    h = hub()
    try:
        sub = h.subscribe(tid)
    except TimeoutError:
        raise StreamUnavailable("the live stream is not available right now; retry",
                                headers={"Retry-After": "3"}) from None
    except TooManySubscribers:
        raise TooManyStreams(f"this table has {h.per_channel} open streams here already; retry later",
                             headers={"Retry-After": "30"}) from None
    try:
        if after is None:
            last = s.stream_position(tid)
            first: list[dict] = []
            if last is None:
                raise TableNotFound(f"no table {tid!r}")
        else:
            got = s.stream_records(tid, after)
            if got is None:
                raise TableNotFound(f"no table {tid!r}")
            first, last = got[0], after
    except BaseException:
        h.unsubscribe(sub)
        raise
    sock = request.environ.get("gunicorn.socket")
    if sock is not None:
        try:
            sock.setsockopt(SOL_SOCKET, SO_SNDBUF, SEND_BUFFER)
        except OSError:  # pragma: no cover - not a TCP socket
            pass
    heartbeat = float(current_app.config.get("STREAM_HEARTBEAT", 15))
    response = Response(_frames(s, h, tid, sub, last, first, heartbeat), mimetype="text/event-stream")
    # The generator's own ``finally`` runs only once it has started: a HEAD (whose body is
    # never iterated) or a client gone before the first frame would leave the subscriber
    # in the hub for good.  Closing the response unsubscribes in every case (idempotent).
    response.call_on_close(partial(h.unsubscribe, sub))
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response


