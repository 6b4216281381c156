"""Benchmark webhooks (loopback only, bounded in time): appends with webhooks on vs off, delivery latency, and
the CPU of an idle dispatcher.

    python bench/webhooks.py [--tables 8] [--rounds 5] [--block 3] [--dispatchers 1] [--fsync always|everysec]
                             [--baseline DIR]
    python bench/webhooks.py --idle 20 [--rounds 3] [--baseline DIR]

On a private redis-server (AOF on, ``appendfsync always`` as ``serve``'s, or ``--fsync everysec``):

* one API key (``bench``) with one webhook to a receiver (a separate process:
  an HTTP/1.1 server on 127.0.0.1 that answers 200 and writes, for each delivery,
  the time it arrived less the notification's ``timestamp``, the moment its
  outbox entry was written);
* ``--dispatchers`` ``python -m service webhooks`` processes delivering;
* in this process, :class:`~service.store.table_store.TableStore` appends
  valid events (rounds of a start, 16 kongs and an end) to ``--tables`` tables
  the key created, one after another, in alternating blocks of ``--block``
  seconds: *off* (a store with ``webhooks=False``: no outbox entry, no hint)
  and *on* (the outbox entry in the script, the hint after it), ``--rounds`` of
  each.

Prints one JSON line per figure: the append rate off and on (events/s, the
median of the rounds' rates, and each round's), their ratio, and the delivery
latency p50/p99 (ms; the median over the rounds of each round's p50 and p99)
with the counts delivered and appended.

``--baseline DIR`` runs the dispatchers of another tree's service package (a
``git worktree`` or an export of an earlier commit: the "before"); the appends
are this tree's.

``--idle SECONDS`` measures something else: the CPU time (user + system, from
``/proc``) that ``python -m service serve`` (one gevent worker, the master
included) spends in ``SECONDS`` of doing nothing once it is up, with its
webhook dispatcher (``WEBHOOK_DISPATCHER``) on and off, and, with
``--baseline``, the baseline's with it on; one line, the medians over the
``--rounds`` (each mode once a round, in turn) and their ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.store import redis_client  # noqa: E402
from service.store.embedded import EmbeddedRedis, free_port  # noqa: E402
from service.store.table_store import Access, TableStore  # noqa: E402
from service.webhooks.registry import Registry  # noqa: E402

KEY = "bench-" + "k" * 40
KEYS = f"bench={KEY}"
PLAYERS = ["东", "南", "西", "北"]

RECEIVER = r'''
import json, sys, time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
out = open(sys.argv[2], "a", buffering=1)
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        now = time.time()
        at = datetime.fromisoformat(body["timestamp"].replace("Z", "+00:00")).timestamp()
        out.write(json.dumps([body["data"]["table"], body["data"]["seq"], (now - at) * 1000]) + "\n")
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''


def events():
    """Rounds of a start, 16 concealed kongs (4 a seat) and an end: valid forever."""
    tiles = [f"{n}{s}" for s in "mps" for n in range(1, 10)]
    while True:
        yield {"type": "round_start"}
        for seat in range(4):
            for i in range(4):
                yield {"type": "kong", "seat": seat, "kind": "concealed", "tile": tiles[seat * 4 + i]}
        yield {"type": "round_end"}


def wait_port(port: int, seconds: float = 20.0) -> None:
    import socket

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--block", type=float, default=3.0, help="seconds per block")
    ap.add_argument("--dispatchers", type=int, default=1)
    ap.add_argument("--no-dispatch", action="store_true",
                    help="start no dispatcher: the append rates alone (no delivery figures)")
    ap.add_argument("--fsync", choices=("always", "everysec"), default="always",
                    help="the redis-server's appendfsync (serve's embedded Redis: always)")
    ap.add_argument("--baseline", metavar="DIR", help="run the dispatchers (or, with --idle, a third serve) of DIR's "
                                                      "service package too: the 'before'")
    ap.add_argument("--idle", type=float, metavar="SECONDS",
                    help="measure the CPU of an idle serve (dispatcher on and off) over SECONDS instead")
    args = ap.parse_args()
    if args.idle:
        return idle_cpu(args)

    tmp = Path(tempfile.mkdtemp(prefix="bench-webhooks-"))
    server = EmbeddedRedis(tmp / "redis", port=free_port(), extra_args=["--appendfsync", args.fsync]).start()
    procs: list[subprocess.Popen] = []
    try:
        port = free_port()
        latencies = tmp / "latencies.jsonl"
        procs.append(subprocess.Popen([sys.executable, "-c", RECEIVER, str(port), str(latencies)]))
        wait_port(port)
        client = redis_client.connect(server.url)
        from service.config import hash_api_key

        registry = Registry(client, {"bench": hash_api_key(KEY)}, allow_private=True)
        registry.create("bench", f"http://127.0.0.1:{port}/hook", ["event.recorded", "round.ended"], None)
        env = {**os.environ, "REDIS_URL": server.url, "API_KEYS": KEYS, "WEBHOOK_ALLOW_PRIVATE": "1",
               "LOG_LEVEL": "WARNING"}
        tree = Path(args.baseline) if args.baseline else ROOT
        for _ in range(0 if args.no_dispatch else args.dispatchers):
            procs.append(subprocess.Popen([sys.executable, "-m", "service", "webhooks"], cwd=tree,
                                          env={**env, "PYTHONPATH": str(tree)},
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        stores = {"on": TableStore(client, webhooks=True), "off": TableStore(client, webhooks=False)}
        access = Access(None, True, "bench")
        tables = {mode: [s.create(PLAYERS, "xuezhan", owner="bench").id for _ in range(args.tables)]
                  for mode, s in stores.items()}
        streams = {mode: {t: events() for t in ids} for mode, ids in tables.items()}
        # warm up: the scripts loaded, the dispatchers up and delivering (one event per "on" table)
        for mode, store in stores.items():
            for t in tables[mode]:
                store.append(t, next(streams[mode][t]), access=access)
        deadline = time.monotonic() + (0 if args.no_dispatch else 60)
        while time.monotonic() < deadline and (not latencies.exists()
                                               or len(latencies.read_text().splitlines()) < args.tables):
            time.sleep(0.05)
        rates: dict[str, list[float]] = {"on": [], "off": []}
        p50s, p99s = [], []
        appended = delivered = 0
        for _ in range(args.rounds):
            for mode in ("off", "on"):
                store, ids = stores[mode], tables[mode]
                mark = latencies.stat().st_size if latencies.exists() else 0
                n, start = 0, time.perf_counter()
                while time.perf_counter() - start < args.block:
                    for t in ids:
                        store.append(t, next(streams[mode][t]), access=access)
                        n += 1
                rates[mode].append(n / (time.perf_counter() - start))
                if mode == "on" and not args.no_dispatch:
                    appended += n
                    want = n + n // 18  # (and a round.ended per 18 events)
                    deadline = time.monotonic() + 30
                    lines: list = []
                    while time.monotonic() < deadline:
                        with open(latencies) as f:
                            f.seek(mark)
                            lines = [json.loads(x) for x in f.read().splitlines() if x]
                        if len(lines) >= want - len(ids):  # (a round's end may fall in the next block)
                            break
                        time.sleep(0.05)
                    delivered += len(lines)
                    ms = [x[2] for x in lines]
                    p50s.append(percentile(ms, 50))
                    p99s.append(percentile(ms, 99))
        off, on = statistics.median(rates["off"]), statistics.median(rates["on"])
        print(json.dumps({"op": "append_webhooks_off", "events_per_s": round(off), "rounds":
                          [round(x) for x in rates["off"]], "tables": args.tables}))
        print(json.dumps({"op": "append_webhooks_on", "events_per_s": round(on), "rounds":
                          [round(x) for x in rates["on"]], "tables": args.tables}))
        print(json.dumps({"ratio": "on_vs_off", "value": round(on / off, 3), "appendfsync": args.fsync}))
        if args.no_dispatch:
            return 0
        print(json.dumps({"op": "delivery_latency", "p50_ms": round(statistics.median(p50s), 1),
                          "p99_ms": round(statistics.median(p99s), 1), "delivered": delivered,
                          "appended": appended, "dispatchers": args.dispatchers,
                          "code": "baseline" if args.baseline else "this tree"}))
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        server.stop()
    return 0


def cpu_seconds(root_pid: int) -> float:
    """The CPU time (user + system, s) of a process and its children so far (``/proc``: Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # (gone meanwhile)
            continue
        fields = text[text.rindex(")") + 2:].split()  # (after the command's name, which may hold spaces)
        pid, ppid = int(stat.parent.name), int(fields[1])
        if pid == root_pid or ppid == root_pid:
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def idle_cpu(args: argparse.Namespace) -> int:
    """``--idle``: an idle serve's CPU with its dispatcher on and off (and the baseline's on)."""
    import urllib.request

    tmp = Path(tempfile.mkdtemp(prefix="bench-webhooks-idle-"))
    server = EmbeddedRedis(tmp / "redis", port=free_port(), extra_args=["--appendfsync", args.fsync]).start()
    modes = {"on": (ROOT, "1"), "off": (ROOT, "0")}
    if args.baseline:
        modes["before_on"] = (Path(args.baseline), "1")
    spent: dict[str, list[float]] = {mode: [] for mode in modes}
    try:
        client = redis_client.connect(server.url)
        from service.config import hash_api_key

        Registry(client, {"bench": hash_api_key(KEY)}, allow_private=True).create(
            "bench", "http://127.0.0.1:9/hook", ["event.recorded"], None)  # (a webhook, never written to)
        for _ in range(args.rounds):
            for mode, (tree, dispatcher) in modes.items():
                port = free_port()
                env = {**os.environ, "REDIS_URL": server.url, "API_KEYS": KEYS, "WEBHOOK_ALLOW_PRIVATE": "1",
                       "WEBHOOK_DISPATCHER": dispatcher, "LOG_LEVEL": "WARNING", "PYTHONPATH": str(tree)}
                proc = subprocess.Popen([sys.executable, "-m", "service", "serve", "--host", "127.0.0.1", "--port",
                                         str(port), "--workers", "1"], cwd=tree, env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    deadline = time.monotonic() + 60
                    while True:
                        try:
                            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                                if r.status == 200:
                                    break
                        except OSError:
                            if time.monotonic() > deadline or proc.poll() is not None:
                                raise RuntimeError(f"serve ({mode}) did not start") from None
                            time.sleep(0.1)
                    time.sleep(3.0)  # (the worker's start-up work done: its first sweep, its imports)
                    before = cpu_seconds(proc.pid)
                    time.sleep(args.idle)
                    spent[mode].append(cpu_seconds(proc.pid) - before)
                finally:
                    proc.terminate()
                    try:
                        proc.wait(20)
                    except subprocess.TimeoutExpired:
                        proc.kill()
    finally:
        server.stop()
    medians = {mode: statistics.median(values) for mode, values in spent.items()}
    out = {"op": "idle_cpu", "seconds": args.idle, **{f"{mode}_cpu_s": round(v, 3) for mode, v in medians.items()},
           "rounds": {mode: [round(x, 3) for x in values] for mode, values in spent.items()},
           "on_vs_off": round(medians["on"] / medians["off"], 2) if medians["off"] else None}
    if args.baseline:
        out["before_vs_on"] = round(medians["before_on"] / medians["on"], 1) if medians["on"] else None
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
