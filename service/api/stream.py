"""``GET /v1/tables/{id}/stream``: a table's log, live, as Server-Sent Events.

How a record travels: the store's APPEND script publishes it on the table's
channel in the same atomic call that appends it, and each worker's one pub/sub
connection (:mod:`service.store.streams`) hands it, as one SSE frame
(:func:`parse_message`), to every local subscriber of that table.  A subscriber
is a greenlet of the gevent worker parked on its own small mailbox, never a
thread.

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

Readings (where the contract is silent):

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
  {"after": last seq sent}``); both end the stream.  ``event: rotated``
  (``data: {"id": …}``) ends a stream whose token a rotation of the table's
  tokens made invalid (``POST …/tokens/rotate``: the table's channel says
  ``rotated`` and each stream re-checks its token; the token is checked again
  once the stream is subscribed, so a rotation between the first check and the
  subscription is not missed).  A worker that stops ends
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

import logging
import re
import select
import threading
import time
from collections.abc import Iterator
from functools import partial
from socket import MSG_PEEK, SO_SNDBUF, SOL_SOCKET
from typing import Any

import redis
from flask import Response, current_app, request

from ..store import codec, keys
from ..store.errors import Forbidden, TableNotFound, Unauthorized
from ..store.streams import CHECK, CLOSE, DELETED, StreamHub, Subscription, TooManySubscribers, make_hub
from ..store.table_store import Access, TableStore
from . import jsonio, rate_limits, settings
from .problems import ApiProblem, InvalidInput
from .smorest import Blueprint
from .table_views import NO_TABLE, NO_TOKEN, READ_OR_KEY, access, store, table_id_of

log = logging.getLogger("service.stream")

RETRY_MS = 3000
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
    return Frame(item["seq"], b"id: %d\nevent: record\ndata: %b\n\n" % (item["seq"], jsonio.dumps(item)))


class Notice:
    """A word about the table that is not a record, whose frame every subscriber sends as it is and goes on:
    the table was finished (``event: finished``), or has a next table (``event: next``)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


ROTATED = "rotated"  # the table's tokens were rotated: a stream re-checks its own


def parse_message(data: bytes) -> Frame | Notice | str:
    """A channel message as what subscribers send: a record's frame, the table's finish or next table, or
    :data:`ROTATED` (a rotation)."""
    if data == keys.ROTATED.encode():
        return ROTATED
    item = codec.loads(data)
    if "next" in item:
        return Notice(b"event: next\ndata: %b\n\n" % jsonio.dumps(item))
    if "seq" not in item:
        return Notice(b"event: finished\ndata: %b\n\n" % jsonio.dumps(item))
    return record_frame(item)


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
                given = settings.current(app)
                found = make_hub(s.r, parse_message, sharded=s.sharded_pubsub, buffer=given.stream_buffer,
                                 per_channel=given.stream_max_per_table,
                                 gone=lambda table_id: s.stream_position(table_id) is None,
                                 check_every=float(given.stream_heartbeat))
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


def _end_when_closed(sock: Any, sub: Subscription) -> None:
    """End the stream as soon as its client closes the connection, so that its slot (one of the
    table's ``STREAM_MAX_PER_TABLE``) is free at once, not at the next heartbeat's failed send.

    A stream's client sends nothing after its request, so the first readable moment of the socket is
    its end (``recv`` then reads nothing); anything else (bytes of another request) leaves the stream
    as it is.  (A thread: a greenlet in the gevent worker, where ``poll`` waits cooperatively.  Not
    ``select``: it refuses a descriptor past 1023, and a worker holding a thousand connections has
    such sockets.)
    """
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        poller.poll()
        if sock.recv(1, MSG_PEEK) == b"":
            sub.push(CLOSE)
    except (OSError, ValueError):  # the socket is gone already
        sub.push(CLOSE)


def _deleted(table_id: str) -> bytes:
    return b"event: deleted\ndata: %b\n\n" % jsonio.dumps({"id": table_id})


def _rotated(table_id: str) -> bytes:
    return b"event: rotated\ndata: %b\n\n" % jsonio.dumps({"id": table_id})


def _frames(s: TableStore, h: StreamHub, table_id: str, sub: Subscription, last: int, heartbeat: float,
            missed: Any = None, credential: Access | None = None) -> Iterator[bytes]:
    """The stream: what was missed (``missed``, a :class:`~service.store.table_store.StreamedLog`, sent a
    chunk at a time as the client reads), then live records, comments, and the end.

    Runs after the view has returned (no request or app context): ``s`` is the
    store, ``h`` the hub.
    """
    try:
        yield f"retry: {RETRY_MS}\n: table {table_id}\n\n".encode()
        if missed is not None:
            for chunk in missed:
                if chunk:
                    yield b"".join(record_frame(item).data for item in chunk)
                    last = chunk[-1]["seq"]
        next_beat = time.monotonic() + heartbeat
        recheck = False
        while True:
            now = time.monotonic()
            items = sub.take(max(0.0, min(next_beat - now, 1.0 if recheck else heartbeat)))
            if sub.behind:
                yield b"event: resync\ndata: %b\n\n" % jsonio.dumps({"after": last})
                return
            out: list[bytes] = []
            for item in items:
                if item is CLOSE:
                    if out:
                        yield b"".join(out)
                    return
                if item is DELETED:
                    out.append(_deleted(table_id))
                    yield b"".join(out)
                    return
                if isinstance(item, Notice):
                    out.append(item.data)
                    continue
                if item is ROTATED:  # still this table's token?
                    try:
                        s.authorize(table_id, credential)
                    except (Unauthorized, Forbidden, TableNotFound):
                        out.append(_rotated(table_id))
                        yield b"".join(out)
                        return
                    except redis.RedisError:  # cannot tell: end (the client reconnects, and is checked)
                        if out:
                            yield b"".join(out)
                        return
                    continue
                if item is CHECK or item.seq > last + 1:
                    recheck = True  # (re)subscribed, or a gap: the log has what was missed
                    continue
                if item.seq == last + 1:
                    out.append(item.data)
                    last = item.seq
            if out:
                yield b"".join(out)
                out = []
            if recheck:
                try:
                    missed = s.stream_records(table_id, last)
                    if missed is None:
                        yield _deleted(table_id)
                        return
                    recheck = False
                    for chunk in missed:
                        if chunk:
                            yield b"".join(record_frame(item).data for item in chunk)
                            last = chunk[-1]["seq"]
                except redis.RedisError as exc:  # try again in a second
                    recheck = True
                    log.warning("stream of table %s could not read the log (%s)", table_id, exc)
            if time.monotonic() >= next_beat:
                yield b": keep-alive\n\n"
                next_beat = time.monotonic() + heartbeat
    finally:
        h.unsubscribe(sub)


STREAM_DOC = {
    "operationId": "streamTable",
    "tags": ["tables"],
    "security": READ_OR_KEY,
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
                "`STREAM_HEARTBEAT` seconds after its expiry at most), `event: resync` when this client "
                "fell behind (reconnect with `Last-Event-ID`); both end the stream, and so does "
                "`event: rotated` when the table's tokens were rotated and this stream's token is an old one. "
                "`event: finished` (`data: {\"finished_at\"}`) when the table is finished and `event: next` "
                "(`data: {\"next\"}`) when a finished table gets its next table (`POST /v1/tables/{table_id}/next`): "
                "the stream goes on after either. "
                "Any instance of the service delivers what any instance recorded."),
            "content": {"text/event-stream": {
                # the frames' `data`, by their `event:` name (JSON Schema's contentSchema: what the text holds)
                "schema": {"type": "string", "contentMediaType": "text/event-stream",
                           "contentSchema": {"$ref": "#/components/schemas/StreamEvents"}},
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
              NO_TOKEN, NO_TABLE, (422, "`after` or `Last-Event-ID` is not a seq (`invalid_input`)"),
              (429, "the table has `STREAM_MAX_PER_TABLE` open streams on this instance already "
                    "(`too_many_streams`), or a read limit (`too_many_requests`); retry after `Retry-After`"),
              (503, "the tables store (Redis) or its live stream is unavailable (`store_unavailable`, "
                    "`stream_unavailable`); retry after `Retry-After`"))
@blp.doc(**STREAM_DOC)
@rate_limits.limited("client_reads_per_minute", "table_reads_per_minute")
def stream_table(table_id):
    """Follow a table live (Server-Sent Events): every record as it is appended."""
    if {"token", "access_token"} & set(request.args):
        raise TokenInQuery("a table token goes in 'Authorization: Bearer <token>', never in the URL")
    s = store()
    tid = table_id_of(table_id)
    after = _after()
    credential = access(write=False)
    s.authorize(tid, credential)  # 401 / 403 / 404 as for reads
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
        s.authorize(tid, credential)  # again, subscribed: a rotation from now on is heard
        if after is None:
            last, missed = s.stream_position(tid), None
            if last is None:
                raise TableNotFound(f"no table {tid!r}")
        else:
            last, missed = after, s.stream_records(tid, after)
            if missed is None:
                raise TableNotFound(f"no table {tid!r}")
    except BaseException:
        h.unsubscribe(sub)
        raise
    sock = request.environ.get("gunicorn.socket")
    if sock is not None:
        try:
            sock.setsockopt(SOL_SOCKET, SO_SNDBUF, SEND_BUFFER)
        except OSError:  # pragma: no cover - not a TCP socket
            pass
        threading.Thread(target=_end_when_closed, args=(sock, sub), daemon=True,
                         name="stream-close-watch").start()
    heartbeat = float(settings.current().stream_heartbeat)
    response = Response(_frames(s, h, tid, sub, last, heartbeat, missed, credential), mimetype="text/event-stream")
    # The generator's own ``finally`` runs only once it has started: a HEAD (whose body is
    # never iterated) or a client gone before the first frame would leave the subscriber
    # in the hub for good.  Closing the response unsubscribes in every case (idempotent).
    response.call_on_close(partial(h.unsubscribe, sub))
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response
