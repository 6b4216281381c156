"""Running the WSGI app under gunicorn with ``gevent`` workers, programmatically.

Used by ``python -m service serve`` and by the benchmarks (``bench/load_ting.py``
serves a bare WSGI app with exactly the same settings).

The serving model
-----------------
The service has two kinds of traffic: short CPU-bound requests (ting, score,
settle, table writes) and, with the live table stream, thousands of mostly idle
long-lived responses.  gunicorn's ``gevent`` worker gives each connection a
greenlet (the app monkey-patched: redis-py, locks and sleeps cooperate), so
slow clients and idle streams cost a few KiB each and never a thread, and the
stream is an ordinary Flask view (a generator parked on a per-subscriber
mailbox, see :mod:`service.api.stream`).  Each connection yields after each
request, so that kept-alive connections are served in turn (the tail: see
:meth:`ServiceWorker.handle_request`).  ``docs/performance.md`` has the
figures.  New connections are spread over the workers by the kernel: each
worker listens on its own socket (gunicorn's ``reuse_port``).

What gunicorn's own settings already bound, and the one mechanism added
-----------------------------------------------------------------------
* A request's line and headers must arrive within ``KEEPALIVE`` seconds (the
  gevent worker's deadline around reading them, which is also how long an idle
  kept-alive connection stays open); a connection that trickles its head is
  closed then.  Line and header sizes are gunicorn's ``limit_request_*``.
* gunicorn reads a body only as the app asks for it, with no deadline, and
  sends a response with no deadline either.  So :class:`WholeBody` (a WSGI
  middleware) reads the body whole, within ``REQUEST_TIMEOUT`` seconds and up to
  ``MAX_BODY_BYTES`` (a JSON batch: ``MAX_BATCH_BYTES``), before the app runs: a body that trickles gets 408
  problem+json, a malformed chunked body 400 and one over the limit 413, both
  at once (:class:`StrictChunkedReader`: a wrong or oversized chunk-size line
  is told as soon as the line is whole), and the app never waits on a socket;
  the connection then ends (:func:`give_up`).  Only a body that a slow sender
  could still complete waits for the deadline.  It also gives the connection's
  socket a send timeout (:data:`SEND_TIMEOUT`): a client that stops reading (a
  stalled stream subscriber) is dropped then.  This is the smallest mechanism
  that holds the slow-client attacks of the hostile review (header, body and
  read tricklers) while other clients are answered; gunicorn has no setting for
  either deadline.
  ``bench/hostile.py`` runs those attacks: without the body's deadline the body
  tricklers are never cut off, without the send timeout the never-reading
  streams are not; with both, every one is (at ``REQUEST_TIMEOUT``, and
  :data:`SEND_TIMEOUT` after its socket filled up).  The figures are in
  docs/performance.md.
* A streamed body (``application/x-ndjson``: a batch job, :mod:`service.api.batch`) is the one
  exception: it has no overall size or deadline, so :class:`WholeBody` does not read it but hands it
  to the app behind a :class:`DeadlineReader`: each read the app makes (``read1``: what has arrived, up
  to 64 KiB) must be served within ``REQUEST_TIMEOUT`` seconds, else it raises a 408 (a broken chunked
  body: a 400) that the app answers as the job's last line, and the connection is closed after the
  response.  Each read also yields to the worker's other greenlets, so a long job neither starves other
  clients nor the worker's heartbeat.
* gunicorn's own answers (a malformed request line or header, an unsupported
  transfer coding, a head over the limits) are RFC 9457 problems like every
  other error (:meth:`ServiceWorker.handle_error`).  Each override of
  :class:`ServiceWorker` says which tested behaviour or measured attack needs it.
"""

from __future__ import annotations

import gc
import glob
import io
import os
import shutil
import socket
import tempfile
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import gevent
from gunicorn.app.base import BaseApplication
from gunicorn.http import errors as http_errors
from gunicorn.http.body import Body, ChunkedReader, LengthReader

# (imports gevent; patching happens in the workers only)
from gunicorn.workers.ggevent import GeventWorker
from werkzeug.exceptions import BadRequest
from werkzeug.exceptions import RequestTimeout as BodyTimeout
from werkzeug.wsgi import get_current_url

from .config import TURN_SECONDS, Settings

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
WORKER_CLASS = "service.serving.ServiceWorker"
SEND_TIMEOUT = 30.0
"""Seconds a client may accept no byte of a response before it is dropped."""
LINGER_SECONDS, LINGER_BYTES = 1.0, 1 << 20
"""How long, and how much, the server reads and drops after answering a request it refused."""


def gunicorn_options(settings: Settings) -> dict[str, Any]:
    return {
        "bind": [f"{settings.host}:{settings.port}"],
        "reuse_port": True,  # a listening socket per worker: the kernel spreads new connections over them
        "workers": settings.workers,
        "worker_class": WORKER_CLASS,
        "worker_connections": settings.max_connections,
        "timeout": settings.timeout,
        "graceful_timeout": 10,
        "keepalive": settings.keepalive,
        "backlog": 2048,
        "loglevel": settings.log_level.lower(),
        "accesslog": None,  # the app writes one JSON line per request itself
        "errorlog": "-",
        "logconfig_dict": log_config(settings.log_level),  # gunicorn's own messages as JSON lines too
        "post_fork": _listening,
        "proc_name": "mahjong-service",
        "limit_request_line": 8190,  # longer query strings reach the app (and its 422s)
        "limit_request_fields": 100,
        "limit_request_field_size": 8190,
        "child_exit": _child_exit,
        "control_socket_disable": True,  # no shared ~/.gunicorn socket between instances
    }


def log_config(level: str) -> dict[str, Any]:
    """gunicorn's ``logconfig_dict`` (a :func:`logging.config.dictConfig`): its own messages (logger
    ``gunicorn.error``), and what any other library logs at ``WARNING`` or above, as JSON lines on stderr
    like the service's (:class:`service.logs.JsonFormatter`).

    >>> log_config("INFO")["loggers"]["gunicorn.error"]["handlers"]
    ['json']
    """
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "service.logs.JsonFormatter"}},
        "handlers": {"json": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}},
        "root": {"level": "WARNING", "handlers": ["json"]},
        "loggers": {
            "gunicorn.error": {"level": level, "handlers": ["json"], "propagate": False, "qualname": "gunicorn.error"},
            "gunicorn.access": {"level": "INFO", "handlers": ["json"], "propagate": False,
                                "qualname": "gunicorn.access"},
        },
    }


def _listening(server: Any, worker: Any) -> None:
    """gunicorn hook (``post_fork``): each worker says where it listens.  With ``reuse_port`` every worker
    opens its own socket after the fork, so gunicorn's own "Listening at:" line (the master's, before
    the workers) names no address."""
    server.log.info("Listening at: %s (worker %s)", ",".join(str(s) for s in worker.sockets), worker.pid)


def _child_exit(server: Any, worker: Any) -> None:
    """gunicorn hook (master): drop an exited worker's live metrics (multiprocess mode)."""
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


class RequestTimeout(Exception):
    """A request's body did not arrive whole within ``REQUEST_TIMEOUT``."""


class BodyTooLarge(http_errors.ParseException):
    """The chunk-size lines of a body announced more bytes than the body limit (``MAX_BODY_BYTES``)."""

    def __init__(self, size: int, limit: int) -> None:
        self.size, self.limit = size, limit

    def __str__(self) -> str:
        return f"the body's chunks announce {self.size} bytes; a request body may have {self.limit} at most"


class StrictChunkedReader(ChunkedReader):
    """gunicorn's chunked body reader, which also tells a wrong chunk-size line as soon as the line is whole.

    gunicorn's own reader looks for a line's CRLF until the line is over ``limit_request_field_size``
    bytes, and takes any size: a chunk-size line ended by a bare LF (``5e`` LF) or a size of 2^80 left
    it waiting for bytes that a valid body would have to send next, so such a request was answered 408
    at the ``REQUEST_TIMEOUT`` deadline.  This reader reads a size line up to its first LF (the line is
    whole then, or over the limit) and refuses one whose LF is not part of a CRLF (gunicorn's
    :class:`~gunicorn.http.errors.InvalidChunkSize`: 400), and, given ``max_body``, sizes that add up
    to more (:class:`BodyTooLarge`: 413, as a ``Content-Length`` over the limit is: the framing is valid,
    the body is only larger than the service takes, and a client meeting it must send less, not other
    bytes).  The rest (the size's digits, extensions, trailers, each chunk's CRLF) is gunicorn's own
    :meth:`~gunicorn.http.body.ChunkedReader.parse_chunk_size`, called on the whole line.  gunicorn has
    no setting for either check; :meth:`ServiceWorker.handle_request` puts this reader in place of
    gunicorn's before anything of the body is read.
    """

    parser: Any  # gunicorn's ChunkedReader's: the chunks' generator (None once the body has ended)
    buf: io.BytesIO  # and what it has parsed that is not read yet

    def __init__(self, req: Any, unreader: Any, max_body: int | None, arriving: bool = False) -> None:
        super().__init__(req, unreader)
        self.max_body, self.announced, self.arriving = max_body, 0, arriving

    def read(self, size: int) -> bytes:
        """gunicorn's read; for a streamed body (``arriving``) what has arrived, at most ``size`` bytes: the
        next piece of a chunk once one is there, instead of waiting until ``size`` bytes have come (see
        :class:`ArrivingLengthReader`)."""
        if not self.arriving or size <= 0:
            return super().read(size)
        while self.parser and not self.buf.tell():
            try:
                self.buf.write(next(self.parser))
            except StopIteration:
                self.parser = None
        data = self.buf.getvalue()
        self.buf = io.BytesIO(data[size:])
        self.buf.seek(0, io.SEEK_END)
        return data[:size]

    def parse_chunk_size(self, unreader: Any, data: bytes | None = None) -> tuple[int, Any]:
        buf = bytearray(data or b"")
        while (end := buf.find(b"\n")) < 0 and len(buf) <= self.limit_chunk_size_line:
            self.read_into(unreader, buf)  # (NoMoreData when the client closed before the line's end)
        if end >= 0 and buf[end - 1:end] != b"\r":  # a bare LF
            raise http_errors.InvalidChunkSize(bytes(buf[:min(end + 1, 40)]))
        size, rest = super().parse_chunk_size(unreader, bytes(buf))
        self.announced += size
        if self.max_body is not None and self.announced > self.max_body:
            raise BodyTooLarge(self.announced, self.max_body)
        return size, rest


class ArrivingLengthReader(LengthReader):
    """gunicorn's reader of a body of known length, for a streamed body: a read gives what has arrived (one
    receive of the connection, at most ``size`` bytes and never past the body's end) instead of waiting
    until ``size`` bytes have come, so that an NDJSON job's lines are answered as they arrive: a client
    sending a line at a time gets each line's result before it sends the next (with gunicorn's reader, its
    lines waited for the next 64 KiB, or a 408)."""

    def read(self, size: int) -> bytes:
        size = min(self.length, size)
        if size <= 0:
            return b""
        data = self.unreader.read()
        if len(data) > size:
            self.unreader.unread(data[size:])
            data = data[:size]
        self.length -= len(data)
        return data


STREAMED_TYPES = frozenset({"application/x-ndjson"})
"""Media types whose bodies stream to the app (:class:`DeadlineReader`) instead of being read whole."""


def is_streamed(content_type: str | None) -> bool:
    """Whether a body of this ``Content-Type`` streams to the app (no overall size or deadline)."""
    return (content_type or "").split(";", 1)[0].strip().lower() in STREAMED_TYPES
_CUT: weakref.WeakSet[Any] = weakref.WeakSet()
"""Request bodies given up (:func:`give_up`): their connections are not reused."""
_REQUESTS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
"""gunicorn's request of each body being served (:meth:`ServiceWorker.handle_request`), for :func:`give_up`."""


def give_up(body: Any) -> None:
    """Nothing more is read of this request body (``wsgi.input``): where the connection's next request
    would start is unknown, so the answer says ``Connection: close`` (gunicorn's public
    ``Message.force_close``), and once it is sent the worker drops what the client still sends for a
    moment and closes the connection (:meth:`ServiceWorker.handle_request`): closing on unread bytes
    would reset the connection, and the client could lose the answer with it."""
    _CUT.add(body)
    req = _REQUESTS.get(body)
    if req is not None:
        req.force_close()


class DeadlineReader:
    """``wsgi.input`` of a streamed body: each read within ``timeout`` seconds, then the worker's other
    greenlets get their turn.

    A read that does not complete in time raises werkzeug's ``RequestTimeout`` (408), a malformed
    chunked body or a broken connection its ``BadRequest`` (400); the body is then given up (no read
    after that returns data) and its connection is closed once the response is sent
    (:meth:`ServiceWorker.handle_request`).  An app that does not read such a body (a 415, a 401) leaves
    gunicorn to drop it before the connection's next request, within ``KEEPALIVE`` as for any body.
    """

    def __init__(self, raw: Any, timeout: float) -> None:
        self.raw, self.timeout = raw, timeout
        self.cut = False

    def read(self, size: int | None = -1) -> bytes:
        return self._call(self.raw.read, size)

    def read1(self, size: int = -1) -> bytes:
        """What has arrived of the body, at most ``size`` bytes, waiting only for its first byte (``b""``: the
        body's end); as :meth:`io.BufferedIOBase.read1`.  The body's reader is the service's own
        (:meth:`ServiceWorker.handle_request` gives a streamed body one that returns what has arrived)."""
        return self._call(self.raw.reader.read, size if size and size > 0 else 65536)

    def readline(self, size: int | None = -1) -> bytes:
        return self._call(self.raw.readline, size)

    def __iter__(self) -> Iterator[bytes]:
        while line := self.readline():
            yield line

    def _call(self, fn: Callable[[Any], bytes], size: Any) -> bytes:
        if self.cut:
            return b""
        try:
            with gevent.Timeout(self.timeout, RequestTimeout):
                data = fn(size)
        except RequestTimeout:
            self._give_up()
            raise BodyTimeout(f"a part of the request body did not arrive within {self.timeout:g} s") from None
        except (http_errors.ParseException, OSError) as exc:  # (NoMoreData is an OSError: the client left)
            self._give_up()
            raise BadRequest(f"the request body is malformed or was cut: {exc}") from None
        gevent.sleep(TURN_SECONDS)  # (the worker's other requests' turn: the job's reads pace it)
        return data

    def _give_up(self) -> None:
        self.cut = True
        give_up(self.raw)


def problem_bytes(status: int, reason: str, detail: str, base: str = "") -> tuple[str, list[tuple[str, str]], bytes]:
    """A problem+json answer of the HTTP server itself: its status line, headers and body; its ``type`` is
    ``{base}/problems/{code}`` (``base``: ``PUBLIC_URL``, else where the request came in)."""
    from .api import jsonio
    from .api.problems import PROBLEM_JSON, problem_type

    code = "_".join(reason.lower().split()) or "bad_request"
    body = jsonio.dumps({"type": problem_type(code, base), "title": reason, "status": status, "detail": detail,
                         "code": code})
    return f"{status} {reason}", [("Content-Type", PROBLEM_JSON), ("Content-Length", str(len(body)))], body


BATCH_PATH = "/v1/batch"


def body_limit(path: str, max_body: int, max_batch: int) -> int:
    """The largest body a request to ``path`` may have: ``MAX_BATCH_BYTES`` for a JSON batch (its own limit),
    ``MAX_BODY_BYTES`` for everything else.

    >>> body_limit("/v1/batch", 65536, 1 << 20), body_limit("/v1/hands/ting", 65536, 1 << 20)
    (1048576, 65536)
    """
    return max_batch if path == BATCH_PATH else max_body


class WholeBody:
    """WSGI middleware: the request body read whole (within a deadline, up to a size) before the app runs.

    The body of a request under ``max_body`` bytes is read within ``timeout``
    seconds and handed to the app as ``wsgi.input`` (the app never waits on the
    socket); one that does not arrive whole in time is answered 408, one whose
    chunked framing is broken 400 and one announcing a chunk over ``max_body`` 413
    (both at once, :class:`StrictChunkedReader`).  A body declared larger than
    ``max_body`` is not read: the app answers 413 from its ``Content-Length``.
    After a refusal the connection ends (:func:`give_up`).
    The connection's socket (``gunicorn.socket``) gets a send timeout.
    """

    def __init__(self, app: Callable, timeout: float, max_body: int, max_batch: int | None = None,
                 public_url: str | None = None) -> None:
        self.app, self.timeout, self.max_body, self.public_url = app, timeout, max_body, public_url
        self.max_batch = max_body if max_batch is None else max_batch

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        sock = environ.get("gunicorn.socket")
        if sock is not None:
            sock.settimeout(SEND_TIMEOUT)
        if is_streamed(environ.get("CONTENT_TYPE")):
            environ["wsgi.input"] = DeadlineReader(environ["wsgi.input"], self.timeout)
            return self.app(environ, start_response)
        declared = environ.get("CONTENT_LENGTH") or ""
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        limit = body_limit(environ.get("PATH_INFO", ""), self.max_body, self.max_batch)
        if (declared not in ("", "0") or chunked) and not (declared.isdigit() and int(declared) > limit):
            try:
                with gevent.Timeout(self.timeout, RequestTimeout):
                    data = environ["wsgi.input"].read(limit + 1)
            except RequestTimeout:
                return self._refuse(environ, start_response, 408, "Request Timeout",
                                    f"the request did not arrive whole within {self.timeout:g} s")
            except BodyTooLarge as exc:
                if limit == self.max_batch and environ.get("PATH_INFO") == BATCH_PATH:
                    return self._refuse(environ, start_response, 413, "Payload Too Large",
                                        f"{exc} (MAX_BATCH_BYTES): send a larger job as application/x-ndjson, one "
                                        "item a line, which has no overall limit")
                return self._refuse(environ, start_response, 413, "Payload Too Large", str(exc))
            except (http_errors.ParseException, http_errors.NoMoreData) as exc:
                return self._refuse(environ, start_response, 400, "Bad Request",
                                    f"the request body is malformed: {exc}")
            environ["wsgi.input"] = io.BytesIO(data)
        return self.app(environ, start_response)

    def _refuse(self, environ: dict, start_response: Callable, status: int, reason: str, detail: str) -> list[bytes]:
        """Answer a body that was not read whole; nothing more is read of it (the connection ends)."""
        give_up(environ["wsgi.input"])
        base = self.public_url or get_current_url(environ, root_only=True)
        line, headers, body = problem_bytes(status, reason, detail, base)
        start_response(line, headers)
        return [body]


# gunicorn's parse errors whose answer is not 400
_HTTP_ERRORS: tuple[tuple[type, int, str], ...] = (
    (http_errors.LimitRequestLine, 414, "URI Too Long"),
    (http_errors.LimitRequestHeaders, 431, "Request Header Fields Too Large"),
    (http_errors.ExpectationFailed, 417, "Expectation Failed"),
    (http_errors.ForbiddenProxyRequest, 403, "Forbidden"),
)


class ServiceWorker(GeventWorker):
    """gunicorn's ``gevent`` worker, answering its own errors as problem+json.

    Each override is here for a behaviour the tests check or an attack ``bench/hostile.py`` measures,
    which none of gunicorn's settings gives (each says which).  What the slow-client attacks need is
    not here but in :class:`WholeBody` (the body's deadline, the send timeout): with ``handle``
    removed, 50, 200 and 1,000 header tricklers are still closed at ``KEEPALIVE`` by gunicorn's own
    deadline around reading a head.  ``handle_quit`` is not overridden: on SIGINT/SIGQUIT (a quick
    stop) gunicorn's worker exits a moment later, its streams with it, as fast as with an override
    running the ``worker_stop`` hooks.
    """

    # A behaviour (tests/test_serving.py, the gunicorn-level errors): every refusal of gunicorn's parser
    # (a malformed request line or header, an unsupported transfer coding, a head over the limits) is an
    # RFC 9457 problem like every other error of the service.  gunicorn writes its own text/html page,
    # and no setting changes it.
    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        if (not isinstance(exc, (http_errors.ParseException, OSError))
                or isinstance(exc, http_errors.ConfigurationProblem)):
            super().handle_error(req, client, addr, exc)  # the app's own failure: gunicorn's 500
            return
        status, reason = next(((s, r) for cls, s, r in _HTTP_ERRORS if isinstance(exc, cls)), (400, "Bad Request"))
        self.log.warning("Invalid request from ip=%s: %s", (addr or ("",))[0], exc)
        self._answer(client, status, reason, str(exc) or reason)

    def _origin(self, client: Any) -> str:
        """Where problems' ``type`` URLs start: ``PUBLIC_URL``, else the address the connection came in on
        (the request itself could not be read)."""
        settings = getattr(self.app, "settings", None)
        if settings is not None and settings.public_url:
            return settings.public_url
        try:
            host, port = client.getsockname()[:2]
        except (OSError, TypeError, ValueError):
            return ""
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def _answer(self, client: Any, status: int, reason: str, detail: str) -> None:
        """Write a problem+json answer of the server itself, then stop writing and drop what the client
        still sends for a moment (closing on unread input would reset the connection, and the answer
        with it: RFC 9112 §9.6); the caller closes the connection."""
        line, headers, body = problem_bytes(status, reason, detail, self._origin(client))
        head = f"HTTP/1.1 {line}\r\nConnection: close\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
        try:
            client.sendall(head.encode("latin1") + body)
        except OSError:
            return
        ServiceWorker._linger(client)

    @staticmethod
    def _linger(client: Any) -> None:
        """Stop writing, and drop what the client still sends for a moment before it is closed."""
        try:
            client.shutdown(socket.SHUT_WR)
            with gevent.Timeout(LINGER_SECONDS, False):
                drained = 0
                while drained < LINGER_BYTES and (chunk := client.recv(65536)):
                    drained += len(chunk)
        except OSError:
            pass

    # A behaviour (tests/test_serving.py, the gunicorn-level errors): a TLS handshake on the plain port is a
    # 400 at once.  gunicorn reads its bytes as the start of a request line that never ends, and closes the
    # connection at KEEPALIVE without an answer; no setting tells it.  (The slow-client attacks do not need
    # this override: bench/hostile.py measures the same cut-offs without it.)
    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        first = b""
        with gevent.Timeout(self.cfg.keepalive or 1, False):  # (the head's own deadline, as gunicorn's)
            try:
                first = client.recv(1, socket.MSG_PEEK)
            except OSError:
                pass
        if first == b"\x16":  # a TLS handshake on the plain port: no request line will ever come
            self._answer(client, 400, "Bad Request", "this port speaks plain HTTP, not TLS")
            client.close()
            return

        if not first:  # closed, or nothing sent within the head's deadline
            client.close()
            return
        super().handle(listener, client, addr)

    # Six things around gunicorn's own handling of a request, none of which a gunicorn setting gives:
    # * a behaviour (the gunicorn-level errors): an HTTP version other than 1.0 and 1.1 is a 505 problem
    #   (gunicorn answers HTTP/1.2 as "HTTP/1.2 200");
    # * a behaviour (the framing tests): a wrong or oversized chunk-size line is a 400 / 413 at once
    #   (StrictChunkedReader in place of gunicorn's reader);
    # * an attack (bench/hostile.py, never-reading streams): a client dropped after SEND_TIMEOUT ends its
    #   connection with an INFO line; gunicorn logs a socket timeout as an ERROR with its traceback (200
    #   never-reading streams: 400 ERROR lines without this);
    # * a behaviour (tests/test_serving.py, the 413 of a chunked body over the limit, which failed without
    #   it): the connection of a body given up ends with Connection: close and a lingering close; closing
    #   at once on the client's unread bytes resets the connection, and the client loses the answer;
    # * a behaviour (tests/test_batch_served.py, a sender of one line at a time): a streamed body's reads give
    #   what has arrived (ArrivingLengthReader, StrictChunkedReader with ``arriving``), so that each NDJSON
    #   line is answered when it arrives; gunicorn's readers wait for the whole size asked (a 408 instead);
    # * the tail (tests/test_serving.py, connections take turns; bench/workers.py): after each request the
    #   connection's greenlet gives up the worker (:data:`~service.config.TURN_SECONDS`) before it reads the
    #   next one, so every connection with a request waiting is served in turn.  Without it a greenlet whose
    #   client has already sent its next request never waits (gevent reads eagerly) and keeps the worker
    #   while other connections starve:
    #   ting at 32 connections had a p50 of 0.6 ms and a p99 of 212 ms (two workers), and on one worker one
    #   connection was served 59 times in 3 s while another was served 308 times; with it, each alike.
    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> bool:
        if req.version not in ((1, 0), (1, 1)):
            self._answer(sock, 505, "HTTP Version Not Supported",
                         f"HTTP/{req.version[0]}.{req.version[1]} is not served here: use HTTP/1.1")
            raise StopIteration  # (gunicorn's way to end the connection)
        reader = type(getattr(req.body, "reader", None))
        if reader is ChunkedReader:  # (nothing of the body is read yet)
            streamed = is_streamed(next((v for h, v in req.headers if h == "CONTENT-TYPE"), None))
            settings = getattr(self.app, "settings", None)
            max_body = None if streamed or settings is None else body_limit(
                req.path, int(settings.max_body_bytes), int(settings.max_batch_bytes))
            req.body = Body(StrictChunkedReader(req, req.unreader, max_body, arriving=streamed))
        elif reader is LengthReader and is_streamed(next((v for h, v in req.headers if h == "CONTENT-TYPE"), None)):
            req.body = Body(ArrivingLengthReader(req.unreader, req.body.reader.length))
        _REQUESTS[req.body] = req
        try:
            keep = super().handle_request(listener_name, req, sock, addr)
        except TimeoutError:  # the client accepted nothing for SEND_TIMEOUT seconds
            self.log.info("dropped a client that stopped reading (%s)", (addr or ("",))[0])
            raise StopIteration from None
        except StopIteration:
            if req.body in _CUT:
                self._linger(sock)
            raise
        if req.body in _CUT:  # a body given up (give_up): where the next request would start is unknown
            self._linger(sock)
            raise StopIteration
        gevent.sleep(TURN_SECONDS)  # (the connection's turn ends here: see above)
        return keep

    # A behaviour (tests/test_stream.py, a reload ends the streams at once): on SIGTERM (a stop, a reload's
    # old worker) the app's worker_stop hooks end the live streams, so that the worker exits at once.
    # gunicorn's graceful stop waits for every open connection up to graceful_timeout, and a stream never
    # ends by itself; a shorter graceful_timeout would cut ordinary requests short as well.
    def handle_exit(self, sig: int, frame: Any) -> None:
        super().handle_exit(sig, frame)
        gevent.spawn(self._stop_app)

    def _stop_app(self) -> None:
        app = getattr(self.wsgi, "app", self.wsgi)
        for hook in list(getattr(app, "extensions", {}).get("worker_stop", [])):
            try:
                hook()
            except Exception:  # pragma: no cover - a hook must not keep the worker alive
                self.log.exception("worker stop hook failed")


class GunicornApp(BaseApplication):
    """A gunicorn application whose WSGI app comes from ``loader()`` (called in each worker)."""

    def __init__(self, loader: Callable[[], Any], options: dict[str, Any],
                 settings: Settings | None = None) -> None:
        self._loader = loader
        self._options = options
        self.settings = settings
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        app = self._loader()
        if self.settings is not None:
            app = WholeBody(app, float(self.settings.request_timeout), int(self.settings.max_body_bytes),
                            int(self.settings.max_batch_bytes), self.settings.public_url)
        # Everything loaded so far (the shape tables, the app) lives as long as the
        # worker: move it out of the cyclic GC's reach, or every full collection
        # walks it, straight into the tail latency (docs/performance.md).
        gc.collect()
        gc.freeze()
        return app


@contextmanager
def metrics_dir() -> Iterator[str]:
    """``PROMETHEUS_MULTIPROC_DIR`` for the workers: the operator's (emptied) or a fresh one.

    Must be entered before :mod:`prometheus_client` is imported in this process.
    """
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        os.makedirs(given, exist_ok=True)
        for stale in glob.glob(os.path.join(given, "*.db")):
            os.unlink(stale)
        yield given
        return
    path = tempfile.mkdtemp(prefix="mahjong-metrics-")
    os.environ[MULTIPROC_ENV] = path
    creator = os.getpid()
    try:
        yield path
    finally:
        # A forked worker leaves through here too (its SystemExit climbs the arbiter's
        # stack it inherited): only the process that made the directory removes it.
        if os.getpid() == creator:
            os.environ.pop(MULTIPROC_ENV, None)
            shutil.rmtree(path, ignore_errors=True)


def dispatcher_options(settings: Settings) -> Any:
    """The webhook dispatcher's options from the ``WEBHOOK_*`` settings."""
    from .webhooks.dispatcher import DispatcherOptions

    return DispatcherOptions(timeout=float(settings.webhook_timeout), retry_for=float(settings.webhook_retry_seconds),
                             backoff_ms=settings.webhook_backoff_ms, concurrency=settings.webhook_concurrency,
                             sweep_every=float(settings.webhook_sweep_seconds),
                             allow_private=settings.webhook_allow_private)


def start_webhooks(app: Any, settings: Settings) -> Any:
    """The webhook dispatcher of this worker (``serve`` runs one in each worker unless ``WEBHOOK_DISPATCHER``
    is off): greenlets beside the requests, off their path; stopped with the worker (``worker_stop``).
    None when the app has no webhooks (no ``API_KEYS``, no Redis, ``WEBHOOKS`` off)."""
    registry = app.extensions.get("webhooks")
    if registry is None or not settings.webhook_dispatcher:
        return None
    from .webhooks.dispatcher import Dispatcher

    dispatcher = Dispatcher(app.extensions["redis"], registry, dispatcher_options(settings)).start()
    app.extensions["webhook_dispatcher"] = dispatcher
    app.extensions.setdefault("worker_stop", []).append(dispatcher.stop)
    return dispatcher


def run(loader: Callable[[], Any], settings: Settings, **overrides: Any) -> None:
    """Run gunicorn until it is stopped (SIGINT/SIGTERM); raises SystemExit at the end.

    ``overrides`` replace gunicorn options (the benchmarks use them).
    """
    GunicornApp(loader, gunicorn_options(settings) | overrides, settings).run()
