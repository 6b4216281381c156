"""``python -m service serve`` in a subprocess for the tests, and a JSON request to it."""

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

import pytest

from service.config import NO_LIMITS

ROOT = Path(__file__).resolve().parent.parent
PLAYERS = ["东", "南", "西", "北"]


def request(port, method, path, body=None, headers=None, timeout=15):
    """(status, headers with lower-case names, parsed JSON body or None)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        payload = None if body is None else json.dumps(body).encode()
        hdrs = {"Content-Type": "application/json"} if body is not None else {}
        hdrs.update(headers or {})
        conn.request(method, path, body=payload, headers=hdrs)
        r = conn.getresponse()
        raw = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, json.loads(raw) if raw else None
    finally:
        conn.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def service_env(**overrides) -> dict:
    env = {**os.environ, **NO_LIMITS, "LOG_LEVEL": "WARNING", "PYTHONUNBUFFERED": "1"}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.pop("REDIS_URL", None)
    env.update({k: v for k, v in overrides.items() if v is not None})
    return env


class Service:
    """``python -m service serve`` in a subprocess, startable and stoppable on one port."""

    def __init__(self, port: int, env: dict, log: Path) -> None:
        self.port, self.env, self.log_path = port, env, log
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30) -> "Service":
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "service", "serve", "--host", "127.0.0.1", "--port", str(self.port),
             "--workers", "2"],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"the service exited early:\n{self.log_path.read_text(errors='replace')[-3000:]}")
            try:
                if request(self.port, "GET", "/readyz", timeout=1)[0] == 200:
                    return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                pytest.fail(f"the service was not ready in {timeout} s")
            time.sleep(0.1)

    def stop(self) -> int | None:
        """SIGTERM and wait; the exit status."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                return proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                pytest.fail("the service did not stop on SIGTERM within 30 s")
        return proc.returncode

    def request(self, *args, **kwargs):
        return request(self.port, *args, **kwargs)


def new_table(srv, ruleset="xuezhan") -> tuple[dict, dict]:
    status, headers, t = srv.request("POST", "/v1/tables", {"players": PLAYERS, "ruleset": ruleset})
    assert status == 201, t
    return t, {"Authorization": "Bearer " + t["token"]}


def append(srv, t, auth, event, **headers) -> dict:
    status, _, body = srv.request("POST", f"/v1/tables/{t['id']}/events", event, {**auth, **headers})
    assert status == 201, (event, body)
    return body


def redis_servers_on(data_dir: Path) -> list[int]:
    """PIDs of live redis-server processes working in ``data_dir`` (EmbeddedRedis runs it there).

    redis-server rewrites its command line, so it is found by name and working directory.
    """
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if comm.startswith("redis-server") and state != "Z" and Path(cwd) == data_dir:
            pids.append(int(entry.name))
    return pids
