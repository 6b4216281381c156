"""A gevent worker's write scripts, pipelined on one kept connection to a plain Redis.

In ``serve`` every request is a greenlet, and under load a worker has many
appends waiting on Redis at once.  Through :class:`~.client.Scripts` each waits
on a connection of its own: a readiness ``poll``, a ``send``, a ``recv`` that
finds nothing yet, a wait in the hub and a second ``recv`` per call, and Redis
reads and answers each connection apart.  :class:`PipelinedScripts` sends the
calls of all greenlets on one connection instead (the way Redis's own
pipelining works, and what client libraries call auto-pipelining):

* a caller packs its ``EVALSHA`` (hiredis), queues it with a waiter and wakes
  the **writer** greenlet, which sends everything queued since it last ran in
  one ``send``: the calls made while it waited for its turn go together;
* the **reader** greenlet reads the answers as they come (with ``appendfsync
  always`` Redis answers all the calls of one event-loop turn after one
  ``fsync``, so one ``recv`` often brings many) and hands each to the next
  waiter in order: Redis answers a connection's commands in the order sent.

What :class:`~.client.Scripts` promises holds here too:

* the connection is checked out of the client's pool (made, authenticated and
  checked as the pool does it) and kept; when it fails it is disconnected and
  given back, and the next call makes another; a call finding it idle with
  something to read (the server closed it meanwhile, e.g. after its
  ``timeout``) makes another first, so a call is never sent on a connection
  that cannot answer it;
* an error answer (read whole: the connection is in step) is raised to its own
  caller only; ``NOSCRIPT`` (the script did not run) loads the script and sends
  that call once more, and **nothing else is ever sent twice**;
* a failure of the connection (closed, reset, an answer that does not parse,
  or the oldest call waiting longer than the client's ``socket_timeout``:
  seen by the reader within twice that, and by any new call at once) fails
  every call waiting on it with :class:`redis.exceptions.ConnectionError` or
  :class:`~redis.exceptions.TimeoutError`, as each had failed on its own
  connection: their outcome is unknown, and the API says so (503, retry with
  the same ``Idempotency-Key``);
* while a new connection is being made the other callers wait for it, and
  when it cannot be made they all get that error (not one more try each);
* an answer that says the server cannot serve this connection any more
  (``READONLY``: a demoted primary, as :class:`~.client.FollowPrimaryConnection`
  drops such a connection; or an error redis-py takes for a connection error,
  such as ``LOADING``) retires the connection: new calls go to a new one, the
  calls already sent get their answers, then it is closed.

A caller that stops waiting (a deadline raised in it) leaves its waiter in
the queue; the answer is read and dropped, so the connection stays in step,
and the reader, not the caller, decides when an answer is overdue.  A connection made in another process (before a fork) is never read
or written by this one: a new one is made.

It runs only where gevent has patched the process (``serve``'s workers:
:func:`usable`); anywhere else (threads, the CLI, the tests' Flask client)
:class:`~.client.Scripts` does the same work with a connection per caller.
"""

from __future__ import annotations

import copy
import logging
import os
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import redis
from redis._parsers.base import BaseParser

from .client import SOCKET_TIMEOUT, _read_only, socket_readable

log = logging.getLogger("service.store")

RECV_BYTES = 65536


def usable(client: Any) -> bool:
    """Whether ``client``'s scripts may be pipelined here: gevent has patched the process's sockets
    and threads, and ``client`` is a plain Redis over TCP or a Unix socket (not TLS, not Sentinel,
    not a cluster)."""
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover - gevent is a dependency of serve
        return False
    if not (monkey.is_module_patched("socket") and monkey.is_module_patched("threading")):
        return False
    pool = getattr(client, "connection_pool", None)
    if pool is None or type(pool) is not redis.ConnectionPool:  # (Sentinel's and others' pools)
        return False
    if str(pool.connection_kwargs.get("protocol") or 2) != "2":  # (RESP3 may push frames no call asked for)
        return False
    return not issubclass(pool.connection_class, redis.SSLConnection)


def _reply_error(message: str) -> Exception:
    """An error answer as redis-py raises it (``NOSCRIPT``: NoScriptError, ``READONLY``: ReadOnlyError...)."""
    return BaseParser.parse_error(message)


def _retires(answer: Any) -> bool:
    """An answer after which the connection is not used for new calls (see the module): a connection
    error, or ``READONLY`` as :class:`~.client.FollowPrimaryConnection` takes it."""
    return isinstance(answer, redis.exceptions.ConnectionError) or _read_only(answer)


class _Waiter:
    """One call's answer, set by the reader (or a failure); ``wait`` waits for it."""

    __slots__ = ("_event", "result", "sent")

    def __init__(self) -> None:
        from gevent.event import Event

        self.result: Any = None
        self.sent = time.monotonic()
        self._event = Event()

    def set(self, result: Any) -> None:
        self.result = result
        self._event.set()

    def wait(self) -> None:
        self._event.wait()


class _Pipe:
    """One kept connection with its writer and reader greenlets."""

    def __init__(self, client: redis.Redis) -> None:
        import gevent
        import hiredis
        from gevent.event import Event

        self.pool = client.connection_pool
        self.conn = self.pool.get_connection()  # made and checked as the pool does it
        try:
            self.conn.connect()
            self.sock = self.conn._sock
            self.sock.setblocking(False)  # sent and read through gevent's waits (below)
            self.timeout = self.conn.socket_timeout or SOCKET_TIMEOUT
            self.pid = os.getpid()
            self.parser = hiredis.Reader(protocolError=redis.exceptions.InvalidResponse,
                                         replyError=_reply_error)
            self.waiting: deque[_Waiter] = deque()
            self.outbox: list[bytes] = []
            self.failure: Exception | None = None  # set once: the connection is gone
            self.retired = False  # no new calls (see the module); closed when nothing is waiting
            hub = gevent.get_hub()
            self._hub = hub
            self._readable = hub.loop.io(self.sock.fileno(), 1)  # (its own watchers: closed before the socket)
            self._writable = hub.loop.io(self.sock.fileno(), 2)
            self._wake = Event()
            self._writer = gevent.spawn(self._guarded, self._write, "writing to")
            self._reader = gevent.spawn(self._guarded, self._read, "reading from")
        except BaseException:
            self.conn.disconnect()
            self.pool.release(self.conn)
            raise

    @property
    def open(self) -> bool:
        """Whether new calls may be sent on it."""
        return self.failure is None and not self.retired and self.pid == os.getpid()

    def overdue(self) -> float:
        """Seconds until the oldest waiting call is overdue (≤ 0: it is), or the timeout when none waits."""
        if not self.waiting:
            return self.timeout
        return self.waiting[0].sent + self.timeout - time.monotonic()

    def send(self, packed: bytes) -> _Waiter:
        """Queue one packed command; its answer comes to the waiter."""
        if self.failure is not None:
            raise copy.copy(self.failure)
        waiter = _Waiter()
        self.waiting.append(waiter)
        self.outbox.append(packed)
        self._wake.set()
        return waiter

    def answer(self, waiter: _Waiter) -> Any:
        """The waiter's answer (an error answer is returned, not raised), or raise the failure (a copy
        for each call: one shared exception would gather every failed call's traceback)."""
        waiter.wait()  # (the reader answers it, or fails it when the oldest call is overdue)
        result = waiter.result
        if isinstance(result, _Failed):
            raise copy.copy(result.error) from None
        return result

    def _guarded(self, loop, doing: str) -> None:
        """Run the writer's or the reader's loop: whatever error ends it fails the connection."""
        try:
            loop()
        except redis.exceptions.RedisError as exc:
            self.fail(exc)
        except OSError as exc:
            self.fail(redis.exceptions.ConnectionError(f"Error while {doing} socket: {exc.args}"))
        except Exception as exc:  # a bug: the calls fail (503), never wait for ever
            log.exception("the pipelined Redis connection failed")
            self.fail(redis.exceptions.ConnectionError(f"Error while {doing} socket: {exc!r}"))

    def _write(self) -> None:
        from gevent import Timeout

        sock = self.sock
        while self.failure is None:
            self._wake.wait()
            self._wake.clear()
            if self.pid != os.getpid():
                return
            data = b"".join(self.outbox)
            self.outbox.clear()
            view = memoryview(data)
            while view:
                try:
                    view = view[sock.send(view):]
                except BlockingIOError:
                    with Timeout(self.timeout, redis.exceptions.TimeoutError("Timeout writing to socket")):
                        self._hub.wait(self._writable)

    def _read(self) -> None:
        from gevent import Timeout

        sock, parser = self.sock, self.parser
        while self.failure is None:
            # the wait ends when the oldest call is overdue (its caller may have stopped waiting), and
            # at least every timeout when none waits (so a call sent meanwhile is looked at in time)
            left = self.overdue()
            if left <= 0:
                raise redis.exceptions.TimeoutError("Timeout reading from socket")
            with Timeout(left, False):
                self._hub.wait(self._readable)
            if self.pid != os.getpid():
                return  # (another process's connection: left alone)
            try:
                data = sock.recv(RECV_BYTES)
            except BlockingIOError:
                continue
            if not data:
                raise redis.exceptions.ConnectionError("Connection closed by server.")
            parser.feed(data)
            while (answer := parser.gets()) is not False:
                if not self.waiting:
                    raise redis.exceptions.InvalidResponse("an answer that no call waits for")
                if _retires(answer):
                    self.retired = True
                self.waiting.popleft().set(answer)
            if self.retired and not self.waiting:
                self.fail(redis.exceptions.ConnectionError("the connection was retired"))

    def fail(self, error: Exception) -> None:
        """The connection is gone: every waiting call fails with ``error``; it is given back to the pool."""
        if self.failure is not None:
            return
        if isinstance(error, redis.exceptions.InvalidResponse):  # (a protocol error: the connection's)
            error = redis.exceptions.ConnectionError(str(error))
        self.failure = error.with_traceback(None)
        failed = _Failed(error)
        while self.waiting:
            self.waiting.popleft().set(failed)
        self.outbox.clear()
        self._wake.set()  # the writer ends
        if self.pid == os.getpid():  # the socket is closed once no greenlet waits on it (as gevent's own)
            self._hub.cancel_waits_close_and_then([self._readable, self._writable],
                                                   redis.exceptions.ConnectionError, self._close)

    def _close(self) -> None:
        self.conn.disconnect()
        self.pool.release(self.conn)


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


class PipelinedScripts:
    """:class:`~.client.Scripts`' calls, pipelined on one kept connection (see the module)."""

    def __init__(self, client: redis.Redis) -> None:
        from gevent.lock import Semaphore

        self.client = client
        self._pipe: _Pipe | None = None
        self._making = Semaphore()
        self._attempts = 0  # connections tried, and how the last one failed (None: it did not)
        self._refused: Exception | None = None

    def _open_pipe(self) -> _Pipe:
        """The pipe new calls go on: the kept one while it is open (and, when no call waits on it, its
        socket has nothing to read: else the server closed it or sent what no call asked for), else a
        new one."""
        pipe = self._pipe
        if pipe is not None and pipe.open:
            if pipe.waiting:
                if pipe.overdue() > 0:
                    return pipe
                pipe.fail(redis.exceptions.TimeoutError("Timeout reading from socket"))
            elif not socket_readable(pipe.sock):
                return pipe
            else:
                pipe.fail(redis.exceptions.ConnectionError("Connection closed by server."))
        attempts = self._attempts
        with self._making:  # one new connection, however many callers find none
            pipe = self._pipe
            if pipe is not None and pipe.open:
                return pipe
            if self._attempts != attempts and self._refused is not None:
                raise copy.copy(self._refused)  # (tried while this caller waited: its answer, not another try)
            self._attempts += 1
            try:
                pipe = self._pipe = _Pipe(self.client)
            except Exception as exc:
                self._refused = exc.with_traceback(None)
                raise
            self._refused = None
            return pipe

    def close(self) -> None:
        """Fail the calls waiting, and close the kept connection (once no greenlet waits on it)."""
        import gevent

        if self._pipe is not None:
            self._pipe.fail(redis.exceptions.ConnectionError("the pipelined connection was closed"))
            gevent.sleep(0)

    def _calls(self, calls: Sequence[tuple[Any, Sequence, Sequence]], load: bool) -> list[Any]:
        """Each call's answer (an error answer as an exception object), sent together; with ``load``,
        calls answered ``NOSCRIPT`` load their scripts and are sent once more."""
        import hiredis

        pipe = self._open_pipe()
        packed = [hiredis.pack_command(("EVALSHA", script.sha, len(keys), *keys, *args))
                  for script, keys, args in calls]
        waiters = [pipe.send(p) for p in packed]
        answers = [pipe.answer(w) for w in waiters]
        missing = [i for i, a in enumerate(answers) if isinstance(a, redis.exceptions.NoScriptError)]
        if missing and load:  # load each on the same connection, just before its call is sent again
            pipe = self._open_pipe()
            again = []
            for i in missing:
                loaded = pipe.send(hiredis.pack_command(("SCRIPT", "LOAD", calls[i][0].script)))
                again.append((i, loaded, pipe.send(packed[i])))
            for i, loaded, waiter in again:
                pipe.answer(loaded)  # (an error: the call answers NOSCRIPT again, and that is raised)
                answers[i] = pipe.answer(waiter)
        return answers

    def __call__(self, script: Any, keys: Sequence, args: Sequence) -> Any:
        """The script's result; an error answer is raised (as redis-py raises it)."""
        (answer,) = self._calls([(script, keys, args)], load=True)
        if isinstance(answer, redis.exceptions.RedisError):
            raise answer
        return answer

    def many(self, calls: Sequence[tuple[Any, Sequence, Sequence]]) -> list[Any]:
        """Several calls sent together: each call's result, or the error it answered (``NOSCRIPT``
        included: that call did not run, and nothing is sent again), as :meth:`.client.Scripts.many`;
        an answer that is a connection error (``LOADING``...) is raised, as redis-py raises it."""
        answers = self._calls(calls, load=False)
        for answer in answers:
            if isinstance(answer, redis.exceptions.RedisError) and not isinstance(
                    answer, redis.exceptions.ResponseError):
                raise answer
        return answers
