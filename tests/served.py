"""A real ``python -m service serve`` in a subprocess (:class:`Served`), for the tests and benchmarks that
need sockets; a request to it; a client of a table's live stream."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from service.config import NO_LIMITS
from service.store import keys
from service.store.embedded import free_port

ROOT = Path(__file__).resolve().parent.parent


def request(port, method, path, body=None, headers=None, timeout=10):
    """(status, headers, body bytes) over a fresh connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        payload = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        hdrs = {"Content-Type": "application/json"} if body is not None else {}
        hdrs.update(headers or {})
        conn.request(method, path, body=payload, headers=hdrs)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def expire_table(client, table_id: str, ms: int = 50) -> None:
    """What ``TABLE_TTL`` does to an idle table, sooner: every key it has expires in ``ms``."""
    found = [key for key in keys.every(table_id) if client.exists(key)]
    assert found, f"no table {table_id}"
    for key in found:
        client.pexpire(key, ms)


def service_env(**overrides: str | None) -> dict[str, str]:
    """The environment of a served service: this process's, with every rate limit off, unbuffered
    output, INFO logs and neither an inherited ``REDIS_URL`` (unset: the embedded redis-server) nor a
    Prometheus directory; ``overrides`` on top (None removes a variable)."""
    env = {**os.environ, "LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1", **NO_LIMITS}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.pop("REDIS_URL", None)
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = str(value)
    return env


def stop_process(proc: subprocess.Popen, timeout: float = 30) -> int:
    """SIGTERM, wait ``timeout`` s, else SIGKILL (its process group when it leads one); the exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                proc.kill()
            proc.wait()
    return proc.returncode


class Served:
    """``python -m service serve`` in a subprocess on 127.0.0.1: the one way the tests (and the
    benchmarks) run the real server.

    ``env``: on top of :func:`service_env`.  ``port``: a free one unless given; ``stop()`` then
    ``start()`` restarts it on the same port.  It is ready once ``ready`` answers 200 (``/healthz``,
    or ``/readyz``: its Redis is reachable too) and, with ``all_workers``, every worker waits in its
    event loop.  ``root``: the tree whose ``service`` package runs (a benchmark's baseline).
    It exited early or was not ready in ``timeout`` s: RuntimeError with its log.
    """

    def __init__(self, log_path: str | Path, env: dict | None = None, workers: int = 2, *, port: int | None = None,
                 ready: str = "/healthz", all_workers: bool = False, root: str | Path | None = None,
                 timeout: float = 40, start: bool = True) -> None:
        self.port = port if port is not None else free_port()
        self.log_path = Path(log_path)
        self.env = service_env(**(env or {}))
        self.workers, self.ready, self.all_workers, self.timeout = workers, ready, all_workers, timeout
        self.root = Path(root) if root is not None else ROOT
        if root is not None:
            self.env["PYTHONPATH"] = str(self.root)
        self.proc: subprocess.Popen | None = None
        if start:
            self.start()

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float | None = None) -> Served:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "service", "serve", "--host", "127.0.0.1", "--port", str(self.port),
                 "--workers", str(self.workers)],
                cwd=self.root, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited early:\n{self.log_tail()}")
            try:
                if request(self.port, "GET", self.ready, timeout=1)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"serve was not ready in {timeout or self.timeout:g} s:\n{self.log_tail()}")
            time.sleep(0.1)
        if self.all_workers:
            from tests.loopback import wait_workers_up

            wait_workers_up(self.proc.pid, self.workers, deadline - time.monotonic())
        return self

    def request(self, method, path, body=None, headers=None, timeout=10):
        return request(self.port, method, path, body, headers, timeout)

    def log_lines(self) -> list[str]:
        return self.log_path.read_text(errors="replace").splitlines()

    def log_tail(self, chars: int = 5000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM and wait (then SIGKILL); the exit status (None: it was not running)."""
        return None if self.proc is None else stop_process(self.proc, timeout)

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class Stream:
    """A client of ``GET /v1/tables/{id}/stream``: the response, then its events one at a time."""

    def __init__(self, port: int, table_id: str, token: str | None, *, last_event_id=None, query: str = "",
                 timeout: float = 20.0, rcvbuf: int | None = None) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        if rcvbuf is not None:  # a small receive window: the server's writes block sooner
            self.conn.sock = socket.socket()
            self.conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.conn.sock.settimeout(timeout)
            self.conn.sock.connect(("127.0.0.1", port))
        headers = {"Accept": "text/event-stream"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        self.conn.request("GET", f"/v1/tables/{table_id}/stream{query}", headers=headers)
        self.response = self.conn.getresponse()
        self.status = self.response.status
        self.headers = {k.lower(): v for k, v in self.response.getheaders()}
        self.body = None if self.status == 200 else self.response.read()

    def next(self) -> dict | None:
        """The next event block: ``{"event", "id", "data", "retry", "comments"}``; None at the end."""
        block: dict = {"event": None, "id": None, "data": None, "retry": None, "comments": []}
        seen = False
        while True:
            raw = self.response.readline()
            if not raw:
                return block if seen else None
            line = raw.decode("utf-8").rstrip("\n")
            if line == "":
                if seen:
                    return block
                continue
            seen = True
            if line.startswith(":"):
                block["comments"].append(line[1:].strip())
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                block["data"] = value if block["data"] is None else block["data"] + "\n" + value
            elif name in ("event", "id", "retry"):
                block[name] = value

    def records(self, count: int) -> list[dict]:
        """The next ``count`` record events (comments skipped), as (id, data) checked and decoded."""
        out: list[dict] = []
        while len(out) < count:
            block = self.next()
            assert block is not None, f"the stream ended after {len(out)} of {count} records"
            if block["event"] is None and block["data"] is None:
                continue  # comments, retry
            assert block["event"] == "record", block
            data = json.loads(block["data"])
            assert block["id"] == str(data["seq"])
            out.append(data)
        return out

    def close(self) -> None:
        self.conn.close()
