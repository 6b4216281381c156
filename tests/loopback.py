"""Loopback helpers for the tests and the benchmarks: a keep-alive JSON client, a service process,
an endless valid stream of table events."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from service.store.embedded import free_port  # noqa: F401 - the tests' one free_port, imported from here too
from tests.served import Served

ROOT = Path(__file__).resolve().parent.parent


class Client:
    """One keep-alive HTTP/1.1 connection to 127.0.0.1:port; reconnects after errors."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.port, self.timeout = port, timeout
        self.conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body=None, headers: dict | None = None):
        """(status, headers, parsed JSON or None); raises OSError/HTTPException on a dropped connection."""
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        h = {"Content-Type": "application/json"} if body is not None else {}
        h.update(headers or {})
        data = None if body is None else json.dumps(body).encode()
        try:
            self.conn.request(method, path, body=data, headers=h)
            resp = self.conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException):
            self.close()
            raise
        if resp.getheader("Connection", "").lower() == "close":
            self.close()
        parsed = json.loads(raw) if raw and resp.getheader("Content-Type", "").find("json") >= 0 else None
        return resp.status, dict(resp.getheaders()), parsed

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def start_service(port: int, redis_url: str, workers: int = 2,
                  extra_env: dict | None = None, log_path: str | None = None,
                  root: str | Path | None = None) -> Served:
    """:class:`tests.served.Served` on ``port`` against ``redis_url`` (WARNING logs), ready once
    ``/readyz`` answers and every worker is up (:func:`wait_workers_up`).

    ``root``: the tree whose ``service`` package runs (default: this one; a benchmark's
    ``--baseline``)."""
    return Served(log_path or os.devnull, {"REDIS_URL": redis_url, "LOG_LEVEL": "WARNING", **(extra_env or {})},
                  workers, port=port, ready="/readyz", all_workers=True, root=root, timeout=30)


def stop_service(served: Served) -> None:
    served.stop(timeout=20)


def worker_pids(master_pid: int) -> list[int]:
    """The gunicorn workers (children of the master)."""
    try:
        out = subprocess.run(["pgrep", "-P", str(master_pid)], capture_output=True, text=True).stdout
    except FileNotFoundError:  # no pgrep: read /proc
        out = "\n".join(
            d for d in os.listdir("/proc") if d.isdigit() and _ppid(int(d)) == master_pid
        )
    return [int(x) for x in out.split()]


def wait_workers_up(master_pid: int, workers: int, seconds: float = 30.0) -> None:
    """Wait until the master has ``workers`` workers and each waits in its event loop (``epoll``,
    read from ``/proc/<pid>/wchan``) in three looks 50 ms apart: all have booted.

    ``/readyz`` answers as soon as one worker is up; the service leaves new connections to the
    workers that are up (a worker still loading the app takes none), so clients that connect
    and keep their connections before the last worker is up would all stay on the first ones.
    """
    deadline, settled = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        pids = worker_pids(master_pid)
        waiting = []
        for pid in pids:
            try:
                with open(f"/proc/{pid}/wchan") as f:
                    waiting.append(f.read().strip() == "do_epoll_wait")
            except OSError:
                waiting.append(False)
        settled = settled + 1 if len(pids) == workers and all(waiting) else 0
        if settled == 3:
            return
        time.sleep(0.05)
    raise RuntimeError(f"{workers} workers did not all start in {seconds:g} s")


def cpu_seconds(master_pid: int) -> float:
    """User + system CPU time so far of a gunicorn master's workers (from ``/proc``)."""
    total = 0
    for pid in worker_pids(master_pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def rss_kib(master_pid: int) -> int:
    """Resident memory (KiB) of a gunicorn master's workers, from ``/proc``."""
    total = 0
    for pid in worker_pids(master_pid):
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return total


def raise_fd_limit() -> None:
    """Let this process open as many files (sockets) as its hard limit allows."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))
    return s[k]


PLAYERS = ["东", "南", "西", "北"]


def cycle():
    """An endless valid stream: rounds of start, two kongs, end."""
    n = 0
    while True:
        t = n % 9 + 1
        yield {"type": "round_start"}
        yield {"type": "kong", "seat": n % 4, "kind": "concealed", "tile": f"{t}m"}
        yield {"type": "kong", "seat": (n + 1) % 4, "kind": "direct", "tile": f"{t}p", "from": (n + 2) % 4}
        yield {"type": "round_end"}
        n += 1
