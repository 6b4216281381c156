"""A real ``python -m service serve`` in a subprocess, for the tests that need sockets."""

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

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


def wait_serving(proc: subprocess.Popen, port: int, log_path: Path, log_file, stop, seconds: float) -> None:
    """Wait until ``serve`` (``proc`` on ``port``) answers ``/healthz``; it exited (its log closed) or
    did not answer within ``seconds`` (then ``stop()``): RuntimeError with its log."""
    deadline = time.monotonic() + seconds
    while True:
        if proc.poll() is not None:
            log_file.close()
            raise RuntimeError(f"serve exited early:\n{log_path.read_text(errors='replace')}")
        try:
            if request(port, "GET", "/healthz", timeout=1)[0] == 200:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            stop()
            raise RuntimeError(f"serve did not start in {seconds:g} s:\n{log_path.read_text(errors='replace')}")
        time.sleep(0.1)


class Served:
    """``serve`` on a free port with ``env`` on top of this process's environment (``root``: the tree whose
    ``service`` package runs, default this one: a benchmark's ``--baseline``)."""

    def __init__(self, log_path: Path, env: dict | None = None, workers: int = 2, root: Path | None = None) -> None:
        self.port = free_port()
        self.log_path = log_path
        full = {**os.environ, "LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1", **NO_LIMITS, **(env or {})}
        full.pop("PROMETHEUS_MULTIPROC_DIR", None)
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "service", "serve", "--port", str(self.port), "--workers", str(workers)],
            cwd=root or ROOT, env=full, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        wait_serving(self.proc, self.port, log_path, self._log, self.stop, seconds=40)

    def request(self, method, path, body=None, headers=None, timeout=10):
        return request(self.port, method, path, body, headers, timeout)

    def log_lines(self) -> list[str]:
        return self.log_path.read_text(errors="replace").splitlines()

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


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
        out = []
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
