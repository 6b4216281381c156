"""gevent against gthread workers: latency (p50, p99) and CPU per request, real gunicorn, the real service.

Starts one redis-server (the embedded one's settings) and the service twice on loopback ports, both with
``--workers`` workers, INFO logs (an access line per request, to /dev/null) and every rate limit on (set high
enough that none refuses):

* ``gevent``: ``python -m service serve`` as shipped (``service.serving.ServiceWorker``, a greenlet a
  connection);
* ``gthread``: the same ``serve`` with gunicorn's ``gthread`` worker (``--threads`` threads a worker; the same
  app, behind the same :class:`~service.serving.WholeBody`, whose body deadline needs gevent and so does not
  bound a slow body there).

Then, in ``--rounds`` rounds alternating the two servers, each load at each concurrency for ``--duration``
seconds (after a short warm-up): ``POST /v1/hands/ting`` (stateless) and ``POST /v1/tables/{id}/events`` (a
table append, one table a connection), with 8 and 32 keep-alive connections (asyncio, raw sockets:
``bench/load_ting.py``'s load generator).  One JSON line per (worker, load, connections): requests/s, p50 and
p99 (ms, over every round's requests), errors, and the workers' CPU per request (user + system from /proc, µs);
then one line per (load, connections) with gthread ÷ gevent.

    .venv/bin/python bench/workers.py                        # 3 rounds of 5 s per cell
    .venv/bin/python bench/workers.py --rounds 1 --duration 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.load_ting import HANDS, read_response  # noqa: E402
from bench.store import HIGH_LIMITS, create_tables  # noqa: E402
from tests.loopback import Client, cpu_seconds, cycle, free_port, percentile, wait_workers_up  # noqa: E402
from tests.served import stop_process  # noqa: E402

WORKERS = ("gevent", "gthread")
LOADS = ("ting", "append")


def raw(method: str, path: str, body: dict, headers: dict | None = None) -> bytes:
    data = json.dumps(body).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{head}"
            f"Content-Length: {len(data)}\r\n\r\n").encode() + data


def serve_gthread(port: int, workers: int, threads: int) -> int:
    from service.__main__ import serve
    from service.config import load_settings

    settings = load_settings().with_overrides(host="127.0.0.1", port=port, workers=workers)
    return serve(settings, worker_class="gthread", threads=threads)


def start(kind: str, port: int, redis_url: str, workers: int, threads: int) -> subprocess.Popen:
    env = {**os.environ, "REDIS_URL": redis_url, "LOG_LEVEL": "INFO", **HIGH_LIMITS, "PYTHONPATH": str(ROOT)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    if kind == "gevent":
        cmd = [sys.executable, "-m", "service", "serve", "--host", "127.0.0.1", "--port", str(port),
               "--workers", str(workers)]
    else:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--serve-gthread", "--port", str(port),
               "--workers", str(workers), "--threads", str(threads)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 30
    c = Client(port, timeout=2)
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{kind} exited with {proc.returncode}")
        try:
            if c.request("GET", "/readyz")[0] == 200:
                c.close()
                wait_workers_up(proc.pid, workers, deadline - time.monotonic())
                return proc
        except OSError:
            pass
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.1)
    stop_process(proc, timeout=20)
    raise RuntimeError(f"{kind} did not become ready")


async def drive(port: int, load: str, connections: int, warmup: float, duration: float,
                tables: list[tuple[str, str]], streams: list) -> tuple[list[float], int, int]:
    """(latencies in ms, errors, requests sent in all) of ``connections`` connections running ``load``."""
    tings = [raw("POST", "/v1/hands/ting", {"hand": {"tiles": h}}) for h in HANDS]
    latencies: list[float] = []
    errors = sent = 0
    start_at = time.perf_counter()
    measure_from, stop_at = start_at + warmup, start_at + warmup + duration

    async def one(i: int) -> None:
        nonlocal errors, sent
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        tid, token = tables[i]
        auth = {"Authorization": "Bearer " + token}
        n = i
        try:
            while True:
                t0 = time.perf_counter()
                if t0 >= stop_at:
                    return
                if load == "append":
                    request, ok = raw("POST", f"/v1/tables/{tid}/events", next(streams[i]), auth), 201
                else:
                    request, ok = tings[n % len(tings)], 200
                n += 1
                writer.write(request)
                status, _ = await read_response(reader)
                sent += 1
                if t0 >= measure_from:
                    latencies.append((time.perf_counter() - t0) * 1000)
                    errors += status != ok
        except (OSError, asyncio.IncompleteReadError):
            errors += 1
        finally:
            writer.close()

    await asyncio.gather(*(one(i) for i in range(connections)))
    return latencies, errors, sent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0, help="measured seconds a cell a round")
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=16, help="gthread: threads a worker (default 16)")
    parser.add_argument("--connections", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--serve-gthread", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_gthread:
        return serve_gthread(args.port, args.workers, args.threads)

    from service.store.embedded import EmbeddedRedis

    most = max(args.connections)
    cells: dict[tuple, dict[str, Any]] = {(w, load, n): {"lat": [], "errors": 0, "sent": 0, "cpu": 0.0, "seconds": 0.0}
             for w in WORKERS for load in LOADS for n in args.connections}
    with tempfile.TemporaryDirectory(prefix="workers-redis-") as data:
        redis = EmbeddedRedis(Path(data)).start()
        servers: dict[str, tuple[subprocess.Popen, int]] = {}
        try:
            for kind in WORKERS:
                port = free_port()
                servers[kind] = (start(kind, port, redis.url, args.workers, args.threads), port)
            tables = {kind: create_tables(port, most) for kind, (_, port) in servers.items()}
            streams = {kind: [cycle() for _ in range(most)] for kind in WORKERS}
            for r in range(args.rounds):
                for kind in (WORKERS if r % 2 == 0 else WORKERS[::-1]):
                    proc, port = servers[kind]
                    for load in LOADS:
                        for n in args.connections:
                            cell = cells[kind, load, n]
                            cpu0 = cpu_seconds(proc.pid)
                            lat, errors, sent = asyncio.run(drive(port, load, n, args.warmup, args.duration,
                                                                  tables[kind], streams[kind]))
                            cell["cpu"] += cpu_seconds(proc.pid) - cpu0
                            cell["lat"] += lat
                            cell["errors"] += errors
                            cell["sent"] += sent
                            cell["seconds"] += args.duration
        finally:
            for proc, _ in servers.values():
                stop_process(proc, timeout=20)
            redis.stop()
    out = {}
    for (kind, load, n), cell in cells.items():
        lat = cell["lat"]
        out[kind, load, n] = line = {
            "worker": kind, "load": load, "connections": n, "rps": round(len(lat) / cell["seconds"], 1),
            "p50_ms": round(percentile(lat, 50), 2), "p99_ms": round(percentile(lat, 99), 2),
            "errors": cell["errors"], "cpu_us_per_request": round(cell["cpu"] / max(1, cell["sent"]) * 1e6, 1)}
        print(json.dumps(line), flush=True)
    for load in LOADS:
        for n in args.connections:
            a, b = out["gevent", load, n], out["gthread", load, n]
            print(json.dumps({"ratio": f"gthread/gevent {load} {n}",
                              "rps": round(b["rps"] / a["rps"], 3) if a["rps"] else None,
                              "p50": round(b["p50_ms"] / a["p50_ms"], 3) if a["p50_ms"] else None,
                              "p99": round(b["p99_ms"] / a["p99_ms"], 3) if a["p99_ms"] else None,
                              "cpu_per_request": round(b["cpu_us_per_request"] / a["cpu_us_per_request"], 3)
                              if a["cpu_us_per_request"] else None}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
