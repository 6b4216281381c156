"""Running a WSGI app under gunicorn with ``gevent`` workers, programmatically.

Used by ``python -m service serve`` and by the benchmarks (``bench/load_ting.py``
serves a bare WSGI app with exactly the same settings; ``bench/serving_models.py``
swaps the worker class to compare serving models).

Why gevent (the serving model, chosen by measurement)
----------------------------------------------------
The service has two kinds of traffic: short CPU-bound requests (ting, score,
settle, table writes: ~0.25 ms of Python each) and, with the live table stream,
thousands of mostly idle long-lived responses. ``bench/serving_models.py``
measured three models with the same app, settings and load (README,
"Serving model", has the figures and the command):

* ``gthread`` (the previous worker): a thread per connection while a request is
  read or served. 8 threads in all, so 8 slow clients (or 8 streams) stop the
  service: with 200 idle/trickling connections 5 of 6 probes failed (the one
  answered took 3.2 s), and a probe behind 500 held responses never returned.
  It can never hold thousands of streams.
* ``uvicorn`` workers (uvloop + httptools) with the WSGI app behind a2wsgi and
  a shim that buffers whole bodies: slow clients cost nothing and a native
  asyncio response holds ~2 KiB. But every request crosses from the event loop
  to a thread and back (its bare-app throughput fell to 60 % of gthread's in
  the quiet run, the service's to 92 %); uvicorn has no deadline for headers
  (idle and header-trickling connections stayed open through the whole 30 s);
  and the stream would have to be a separate native ASGI app beside Flask
  (auth, problems, OpenAPI written twice).
* ``gevent`` (this module): a greenlet per connection, the app monkey-patched
  (redis-py, locks and sleeps cooperate). The service ran 21 % more requests/s
  than gthread at a 23 % lower p99 in the quiet run, and its workers spend
  less CPU per bare request in every run; slow clients and idle connections
  cost ~7-9 KiB each and never a thread, so the probes kept answering in a few
  ms; a held response costs ~5 KiB, and the stream is an ordinary Flask view
  (a generator parked on a per-subscriber mailbox, see
  :mod:`service.api.stream`).

On an oversubscribed machine (other processes wanting the same cores) gevent's
requests/s fall behind gthread's: a gevent worker is one thread, a gthread
worker several, and the kernel shares CPU time per thread, so the gthread
workers simply get more of it (their CPU time per request is not lower). The
benchmark prints the workers' CPU time per request beside the throughput for
that reason.

What the worker adds to gunicorn's (see :class:`ServiceWorker`): a deadline for
a whole request (``REQUEST_TIMEOUT``, default 10 s: 408 problem+json, then the
connection closes), bodies read whole before the app runs (so a malformed
chunked body is a 400 problem logged as a warning, never a 500), gunicorn's own
errors as problem+json, a send timeout (30 s) for clients that stop reading,
and new connections spread over the workers.
"""

from __future__ import annotations

import gc
import glob
import io
import json
import mmap
import os
import resource
import shutil
import socket
import tempfile
import time
from contextlib import contextmanager
from functools import partial
from typing import Any, Callable, Iterator

import gevent
from gevent import socket as gsocket
from gevent.server import StreamServer
from gunicorn import http as gunicorn_http
from gunicorn import util as gunicorn_util
from gunicorn.app.base import BaseApplication
from gunicorn.http import wsgi as gunicorn_wsgi

# (imports gevent; patching happens in the workers only)
from gunicorn.workers.ggevent import GeventWorker

from .config import Settings

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
WORKER_CLASS = "service.serving.ServiceWorker"


class Shares:
    """How many connections each worker holds, in memory the master and its workers share.

    The master makes it before any worker is forked (an anonymous shared
    ``mmap``: per slot a signed 64-bit count, -1 for a free slot, and the
    time in ms of the worker's last beat) and gives each new worker a free slot
    (:func:`_pre_fork`); a worker writes only its own slot: its count every
    time it opens or closes a connection, and a beat every ``BEAT`` seconds
    while its event loop runs. The master frees the slot of a worker that
    exited (:func:`_child_exit`). A worker reads the others' counts to decide
    whether to accept a new connection (see :class:`_BalancedServer`). A slot
    whose beat is older than ``FRESH_MS`` does not count: a worker still
    starting, or stuck in a long request, or dead and not yet reaped, takes no
    connection now, so none is left to it. Nothing is locked: a count read a
    moment late only makes one accept less even.

    >>> shares = Shares(slots=3)
    >>> a, b = shares.claim(taken=set()), shares.claim(taken={0})
    >>> (a, b), shares.least(now_ms=1000)  # claimed, not beating yet: neither counts
    ((0, 1), None)
    >>> shares.publish(a, 5, now_ms=1000); shares.publish(b, 2, now_ms=1000); shares.least(now_ms=1100)
    2
    >>> shares.least(now_ms=1000 + Shares.FRESH_MS + 1)  # both silent since: neither counts
    >>> shares.free(b); shares.least(now_ms=1100), shares.claim(taken={0})
    (5, 1)
    >>> shares.claim(taken={0, 1, 2}) is None  # no slot left: that worker just accepts
    True
    """

    BEAT = 0.1
    FRESH_MS = 300

    def __init__(self, slots: int = 64) -> None:
        self._mem = mmap.mmap(-1, 16 * slots)  # MAP_SHARED: the forked workers see the same pages
        self._cells = memoryview(self._mem).cast("q")  # [count, beat] per slot
        self.slots = slots
        for slot in range(slots):
            self.free(slot)

    def claim(self, taken: set[int]) -> int | None:
        """A free slot, not in ``taken`` (the live workers' slots), count 0 and no beat yet; None when full."""
        for slot in range(self.slots):
            if slot not in taken:
                self._cells[2 * slot], self._cells[2 * slot + 1] = 0, 0
                return slot
        return None

    def publish(self, slot: int, connections: int, now_ms: int) -> None:
        self._cells[2 * slot], self._cells[2 * slot + 1] = connections, now_ms

    def free(self, slot: int) -> None:
        self._cells[2 * slot] = -1

    def least(self, now_ms: int) -> int | None:
        """The fewest connections a live worker that beat lately holds; None when there is none."""
        cells, fresh = self._cells, now_ms - self.FRESH_MS
        return min((cells[i] for i in range(0, 2 * self.slots, 2) if cells[i] >= 0 and cells[i + 1] >= fresh),
                   default=None)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)  # CLOCK_MONOTONIC: the same clock in every process


def _pre_fork(server: Any, worker: Any) -> None:
    """gunicorn hook (master): give the worker about to be forked a slot of the shared counts."""
    shares = getattr(server.app, "shares", None)
    if shares is None:
        return
    taken = {w.share_slot for w in server.WORKERS.values() if getattr(w, "share_slot", None) is not None}
    for slot in range(shares.slots):  # a slot no live worker holds is free (a missed exit)
        if slot not in taken:
            shares.free(slot)
    worker.share_slot = shares.claim(taken)


def _child_exit(server: Any, worker: Any) -> None:
    """gunicorn hook (master): free an exited worker's slot; drop its live metrics (multiprocess mode)."""
    shares, slot = getattr(server.app, "shares", None), getattr(worker, "share_slot", None)
    if shares is not None and slot is not None:
        shares.free(slot)
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


def gunicorn_options(settings: Settings) -> dict[str, Any]:
    return {
        "bind": [f"{settings.host}:{settings.port}"],
        "workers": settings.workers,
        "threads": settings.threads,
        "worker_class": WORKER_CLASS,
        "worker_connections": settings.max_connections,
        "timeout": settings.timeout,
        "graceful_timeout": 10,
        "keepalive": settings.keepalive,
        "backlog": 2048,
        "loglevel": settings.log_level.lower(),
        "accesslog": None,  # the app writes one JSON line per request itself
        "errorlog": "-",
        "proc_name": "mahjong-service",
        "limit_request_line": 8190,  # longer query strings reach the app (and its 422s)
        "limit_request_fields": 100,
        "limit_request_field_size": 8190,
        "pre_fork": _pre_fork,
        "child_exit": _child_exit,
        "control_socket_disable": True,  # no shared ~/.gunicorn socket between instances
    }


class RequestTimeout(Exception):
    """A request did not arrive whole (line, headers and body) within ``REQUEST_TIMEOUT``."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the request did not arrive whole within {seconds:g} s")


def _raise_fd_limit(wanted: int) -> None:
    """Let this process hold ``wanted`` sockets (as far as the hard limit allows)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


class ServiceWorker(GeventWorker):
    """gunicorn's ``gevent`` worker with a deadline per request, buffered bodies and problem+json.

    Per connection (one greenlet each):

    * a new connection's request, and on a kept-alive connection the next
      request once its first byte arrived, must arrive *whole* (request line,
      headers and body) within ``REQUEST_TIMEOUT`` seconds; otherwise the
      answer is 408 problem+json and the connection is closed;
    * a kept-alive connection on which nothing arrives for ``KEEPALIVE``
      seconds is closed without an answer;
    * the body is read completely (up to ``MAX_BODY_BYTES``) *before* the
      application runs, so the app never waits on a socket and a malformed
      chunked body is gunicorn's own 400 (logged as one warning), not an
      exception inside the app. A body over the limit is not read: the app
      answers 413 and the connection closes;
    * gunicorn's own answers (request line or headers over the limits, a
      malformed request, 408) are RFC 9457 problems like every other error.

    New connections are spread over the workers (:class:`_BalancedServer`):
    every worker is woken for a new connection and the first to accept it gets
    it, so a burst of keep-alive connections lands mostly on whichever worker is
    free at that moment, and stays there.  Measured with ``bench/store.py``'s 32
    keep-alive clients: 24 on one worker and 8 on the other, whose clients then
    waited 19 ms per append against 5.8 ms (and 32 of 32 on one worker before
    any spreading).  So each worker publishes how many connections it holds
    (:class:`Shares`), and one holding more than the least loaded worker leaves
    a new connection to that worker.
    """

    request_timeout: float = 10.0
    max_body: int = 64 * 1024
    connections = 0  # connections this worker holds (open, idle or streaming)
    share_slot: int | None = None  # this worker's slot in the master's Shares (set before the fork)
    shares: Shares | None = None  # the master's per-worker connection counts

    def init_process(self) -> None:
        settings = getattr(self.app, "settings", None)
        if settings is not None:
            self.request_timeout = float(settings.request_timeout)
            self.max_body = int(settings.max_body_bytes)
        gunicorn_util.write_error = write_problem  # in this worker process only
        gunicorn_wsgi.Response = OneSendResponse  # likewise: what gunicorn_wsgi.create makes
        _raise_fd_limit(self.worker_connections + 256)
        self.server_class = type("BalancedServer", (_BalancedServer,), {"worker": self})
        self.shares = getattr(self.app, "shares", None)  # beats start with the event loop (run)
        self.log.info("requests must arrive whole within %g s (REQUEST_TIMEOUT); idle keep-alive %g s; "
                      "up to %d connections per worker", self.request_timeout, self.cfg.keepalive,
                      self.worker_connections)
        super().init_process()

    def count_connection(self, change: int) -> None:
        """A connection was opened (+1) or closed (-1): count it and publish the count."""
        self.connections += change
        if self.shares is not None and self.share_slot is not None:
            self.shares.publish(self.share_slot, self.connections, _now_ms())

    def leaves_to_sibling(self) -> bool:
        """Whether another live worker, beating lately, holds fewer connections than this one."""
        if self.shares is None or self.share_slot is None:
            return False
        least = self.shares.least(_now_ms())
        return least is not None and self.connections > least

    # -- one connection -------------------------------------------------------------
    def run(self) -> None:
        gevent.spawn(self._when_stopping)
        super().run()

    def _when_stopping(self) -> None:
        """Beat while the worker runs (:class:`Shares`); once it stops, free its slot and run the app's
        ``worker_stop`` hooks (streams end, so it can exit)."""
        while self.alive:
            if self.shares is not None and self.share_slot is not None:
                self.shares.publish(self.share_slot, self.connections, _now_ms())  # the beat
            gevent.sleep(Shares.BEAT)
        if self.shares is not None and self.share_slot is not None:
            self.shares.free(self.share_slot)  # accepts no more: the others stop leaving connections to it
            self.share_slot = None
        hooks = getattr(self.wsgi, "extensions", {}).get("worker_stop", [])
        for hook in list(hooks):
            try:
                hook()
            except Exception:  # pragma: no cover - a hook must not keep the worker alive
                self.log.exception("worker stop hook failed")

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        req = None
        linger = False  # the client may still be sending: drain a little before closing
        try:
            client.setblocking(1)
            # a client that accepts no byte of a response for this long is dropped
            # (a stalled stream subscriber); reads have their own deadlines below
            client.settimeout(max(SEND_TIMEOUT, self.request_timeout + 1))
            parser = gunicorn_http.get_parser(self.cfg, client, addr)
            name = listener.getsockname()
            fresh = True
            while self.alive or fresh:
                if not fresh and not _buffered(parser):
                    # kept alive: wait for the next request's first byte
                    try:
                        gsocket.wait_read(client.fileno(), timeout=self.cfg.keepalive or 0.001)
                    except gsocket.timeout:
                        break
                fresh = False
                req = None
                with gevent.Timeout(self.request_timeout, RequestTimeout(self.request_timeout)):
                    req = next(parser)
                    self._buffer_body(req, client)
                linger = req.must_close  # a body over the limit, left unread
                if not self.handle_request(name, req, client, addr):
                    break
        except (gunicorn_http.errors.NoMoreData, StopIteration) as exc:
            self.log.debug("Closing connection: %r", exc)
        except OSError as exc:
            self.log.debug("Socket error: %r", exc)
        except RequestTimeout as exc:
            linger = True
            self.log.warning("Request timeout from ip=%s: %s", addr[0] if addr else "", exc)
            try:
                write_problem(client, 408, "Request Timeout", str(exc))
            except OSError:
                pass
        except Exception as exc:  # gunicorn's parse errors: problem+json, logged as a warning
            linger = True
            self.handle_error(req, client, addr, exc)
        finally:
            if linger:
                _linger(client)
            gunicorn_util.close(client)
            self.count_connection(-1)

    def _buffer_body(self, req: Any, client: Any) -> None:
        """Read the whole body now (the request deadline is running), up to the limit."""
        if req.body is None:
            return
        declared = next((v for k, v in req.headers if k == "CONTENT-LENGTH"), None)
        if declared is not None and int(declared) > self.max_body:
            # not read: the app answers 413 from the declared length; then close
            req.body = io.BytesIO()
            req.must_close = True
            return
        if declared is not None and int(declared) == 0:
            return
        if req._expected_100_continue:
            client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            req._expected_100_continue = False
        data = req.body.read(self.max_body + 1)
        if len(data) > self.max_body:  # chunked and over the limit: the app says 413
            req.must_close = True
        req.body = io.BytesIO(data)

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> bool:
        """Serve one request; False when the connection must close."""
        try:
            return bool(super(GeventWorker, self).handle_request(listener_name, req, sock, addr))
        except StopIteration:
            return False


class _Sends:
    """Stands in for a socket while a response writes its head and first bytes: keeps what is sent."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.parts.append(data)


class OneSendResponse(gunicorn_wsgi.Response):
    """gunicorn's HTTP/1.1 response, its head sent together with the first body bytes.

    gunicorn sends the head and then each body chunk with a ``send`` of its
    own, and nearly every answer here is one chunk: two sends where one does.
    On loopback a send costs the worker ~20 µs of CPU (the kernel delivers the
    segment in the sender's time), about 7 % of an append's. The head still
    leaves exactly when gunicorn would send it (with the first body bytes, or
    at the end for an empty body); only the copy into one buffer is new, so it
    is skipped for a first chunk over ``COALESCE_MAX`` bytes.
    """

    COALESCE_MAX = 64 * 1024

    def write(self, arg: bytes) -> None:
        if self.headers_sent or not isinstance(arg, bytes) or len(arg) > self.COALESCE_MAX:
            super().write(arg)
            return
        sock, held = self.sock, _Sends()
        self.sock = held
        try:
            super().write(arg)  # the head (and the body bytes, framed as gunicorn frames them) into held
        finally:
            self.sock = sock
        gunicorn_util.write(sock, b"".join(held.parts))


class _BalancedServer(StreamServer):
    """gevent's StreamServer for :class:`ServiceWorker` (made by gunicorn through ``server_class``).

    It takes one connection per wake-up, and none while another worker holds
    fewer connections (:meth:`ServiceWorker.leaves_to_sibling`): every worker
    is woken for a new connection, so the least loaded one takes it. It looks
    again every ``RETRY`` seconds and takes the connection itself once it has
    left it for ``MAX_LEAVE`` seconds in a row (the other worker may be in the
    middle of a long request); a look more than ``5 * RETRY`` after the last
    one starts a new wait (the connection left before was taken).
    """

    worker: "ServiceWorker"
    RETRY = 0.001
    MAX_LEAVE = 0.02
    _leaving_since = 0.0
    _last_look = float("-inf")

    def __init__(self, listener: Any, application: Any = None, spawn: Any = "default", log: Any = None,
                 handler_class: Any = None, environ: Any = None, **ssl_args: Any) -> None:
        super().__init__(listener, handle=partial(self.worker.handle, listener), spawn=spawn, **ssl_args)
        self.max_accept = 1  # one connection per wake-up: the other workers get a chance

    def _do_read(self) -> None:
        if self.worker.leaves_to_sibling():
            now = time.monotonic()
            if now - self._last_look > 5 * self.RETRY:
                self._leaving_since = now
            self._last_look = now
            if now - self._leaving_since < self.MAX_LEAVE:
                self.stop_accepting()  # look again in a moment (the listener stays level-triggered)
                self._timer = self.loop.timer(self.RETRY)
                self._timer.start(self._start_accepting_if_started)
                return
        self._last_look = float("-inf")
        super()._do_read()

    def do_handle(self, *args: Any) -> None:
        self.worker.count_connection(+1)  # the connection's greenlet counts it down when it ends
        try:
            super().do_handle(*args)
        except BaseException:  # not spawned (the socket is closed): nothing will count it down
            self.worker.count_connection(-1)
            raise


SEND_TIMEOUT = 30.0
LINGER_SECONDS = 2.0
LINGER_BYTES = 1 << 20


def _buffered(parser: Any) -> bool:
    """Whether the parser already holds bytes of the next request (pipelined)."""
    buf = parser.unreader.buf
    buf.seek(0, io.SEEK_END)
    return buf.tell() > 0


def _linger(client: Any) -> None:
    """Close gracefully on a client that may still be sending (RFC 9112 §9.6).

    Closing a socket with unread input makes the kernel send a reset, which can
    destroy the answer (a 413, a 408) before the client has read it; so stop
    writing, then read and drop what still comes, for a bounded time and amount.
    """
    try:
        client.shutdown(socket.SHUT_WR)
        with gevent.Timeout(LINGER_SECONDS, False):
            drained = 0
            while drained < LINGER_BYTES:
                chunk = client.recv(65536)
                if not chunk:
                    break
                drained += len(chunk)
    except OSError:
        pass


def write_problem(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's ``util.write_error``, writing ``application/problem+json``."""
    from .api.problems import PROBLEM_BASE

    code = "_".join(reason.lower().split()) or "bad_request"
    body = json.dumps({"type": PROBLEM_BASE + code, "title": reason, "status": status_int,
                       "detail": str(mesg) or reason, "code": code}).encode()
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
            f"Content-Type: application/problem+json\r\nContent-Length: {len(body)}\r\n\r\n")
    gunicorn_util.write_nonblock(sock, head.encode("latin1") + body)


class GunicornApp(BaseApplication):
    """A gunicorn application whose WSGI app comes from ``loader()`` (called in each worker)."""

    def __init__(self, loader: Callable[[], Any], options: dict[str, Any],
                 settings: Settings | None = None) -> None:
        self._loader = loader
        self._options = options
        self.settings = settings
        self.shares = Shares()  # before any worker is forked, so that all of them share it
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        app = self._loader()
        # Everything loaded so far (the shape tables, the app) lives as long as the
        # worker: move it out of the cyclic GC's reach, or every full collection
        # walks it (~20 ms here, straight into the tail latency).
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
    try:
        yield path
    finally:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(path, ignore_errors=True)


def run(loader: Callable[[], Any], settings: Settings, **overrides: Any) -> None:
    """Run gunicorn until it is stopped (SIGINT/SIGTERM); raises SystemExit at the end.

    ``overrides`` replace gunicorn options (the benchmarks use it to compare
    worker classes).
    """
    GunicornApp(loader, gunicorn_options(settings) | overrides, settings).run()
