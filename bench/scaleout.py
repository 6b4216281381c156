"""Figures of the highly available topologies (loopback only, bounded in time).

    python bench/scaleout.py [--tables 32] [--duration 8] [--rounds 3] [--phases http,inproc,failover]

1. ``http``: one ``python -m service serve`` (2 workers x 8 threads) on each of
   a single redis-server, a 3-primary Redis Cluster (3 replicas), the same
   cluster with ``REDIS_MIN_REPLICAS=1``, and a 3-primary cluster without
   replicas (what the cluster client itself costs: here the replicas share
   the machine's cores and disk with everything else), all running at once; ``--tables``
   client threads (a table and a keep-alive connection each) append valid
   events for ``--duration`` seconds, one service after the other (each
   first in turn), for ``--rounds`` rounds.  Per topology: the median over rounds of events/s,
   p50 and p99 (ms), and the ratio of its events/s to the single server's
   measured in the same round (median of the rounds' ratios).
2. ``inproc``: the median cost of one append through :class:`TableStore` in
   this process (no HTTP), on each of the three, interleaved.
3. ``failover``: a service appending to a table of one primary, that
   primary killed with SIGKILL: the time to the promotion, and from the
   kill to the first acknowledged write (an attempt sent after the kill).
   On the cluster (one replica per primary, ``REDIS_MIN_REPLICAS=0``), on a
   cluster with two replicas per primary and ``REDIS_MIN_REPLICAS=1`` (the
   promoted primary still has a replica to confirm), and on Sentinel.

Each figure is one JSON line; a summary table ends the output.  Every
server, client and service shares the machine's cores: compare the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.store import http_phase
from tests.loopback import PLAYERS, Client, cycle, free_port, start_service, stop_service  # noqa: E402  # noqa: E402
from tests.topologies import Cluster, SentinelGroup  # noqa: E402


def http(urls: dict[str, tuple[str, dict]], tables: int, duration: float, rounds: int) -> list[dict]:
    procs, ports = {}, {}
    try:
        for name, (url, env) in urls.items():
            ports[name] = free_port()
            procs[name] = start_service(ports[name], url, workers=2, extra_env=env)
        runs: dict[str, list[dict]] = {name: [] for name in urls}
        names = list(urls)
        for i in range(rounds):
            for name in names[i % len(names):] + names[:i % len(names)]:  # each first in turn
                runs[name].append(http_phase(ports[name], tables, duration))
        out = []
        for name in urls:
            rs = runs[name]
            line = {"op": "append_http", "redis": name, "tables": tables, "rounds": rounds,
                    "events_per_s": round(statistics.median(r["appends_per_s"] for r in rs), 1),
                    "p50_ms": round(statistics.median(r["p50_ms"] for r in rs), 2),
                    "p99_ms": round(statistics.median(r["p99_ms"] for r in rs), 2),
                    "errors": sum(r["errors"] for r in rs),
                    "ratio_to_single": round(statistics.median(
                        r["appends_per_s"] / s["appends_per_s"] for r, s in zip(rs, runs["single"])), 3)}
            print(json.dumps(line), flush=True)
            out.append(line)
        return out
    finally:
        for proc in procs.values():
            stop_service(proc)


def inproc(urls: dict[str, tuple[str, dict]], samples: int = 1500) -> list[dict]:
    from service.store.redis_client import connect
    from service.store.table_store import TableStore

    stores = {name: TableStore(connect(url), min_replicas=int(env.get("REDIS_MIN_REPLICAS", 0)))
              for name, (url, env) in urls.items()}
    tables = {name: (s.create(PLAYERS, "xuezhan").id, cycle()) for name, s in stores.items()}
    cost: dict[str, list[float]] = {name: [] for name in urls}
    names = list(urls)
    for i in range(samples):
        for name in names[i % len(names):] + names[:i % len(names)]:  # each first in turn
            store = stores[name]
            tid, events = tables[name]
            ev = next(events)
            t0 = time.perf_counter()
            store.append(tid, ev)
            cost[name].append((time.perf_counter() - t0) * 1e6)
    single = statistics.median(cost["single"])
    out = []
    for name in urls:
        med = statistics.median(cost[name])
        line = {"op": "append_inproc", "redis": name, "samples": samples, "median_us": round(med),
                "ratio_to_single": round(med / single, 3)}
        print(json.dumps(line), flush=True)
        out.append(line)
    return out


def failover_time(name: str, group, url: str, min_replicas: int) -> dict:
    """A writer on one table of the primary about to die; SIGKILL it; when is the next write acknowledged?"""
    from service.store import keys

    port = free_port()
    proc = start_service(port, url, workers=1, extra_env={"REDIS_MIN_REPLICAS": str(min_replicas)})
    try:
        c = Client(port, timeout=5)
        status, _, t = c.request("POST", "/v1/tables", {"players": PLAYERS})
        assert status == 201, t
        auth = {"Authorization": "Bearer " + t["token"]}
        if isinstance(group, Cluster):
            victim = group.owner(keys.meta(t["id"]))
        else:
            victim = group.master()
        acked: list[tuple[float, float]] = []  # (sent, acknowledged)
        stop = threading.Event()

        def writer() -> None:
            events = cycle()
            w = Client(port, timeout=5)
            while not stop.is_set():
                body, key = next(events), uuid.uuid4().hex
                while not stop.is_set():
                    sent = time.monotonic()
                    try:
                        status, _, _ = w.request("POST", f"/v1/tables/{t['id']}/events", body,
                                                 {**auth, "Idempotency-Key": key})
                    except Exception:
                        status = None
                    if status == 201:
                        acked.append((sent, time.monotonic()))
                        break
                    time.sleep(0.01)
            w.close()

        th = threading.Thread(target=writer)
        th.start()
        time.sleep(1.0)
        killed = time.monotonic()
        victim.kill()
        if isinstance(group, Cluster):
            owner = lambda: group.owner(keys.meta(t["id"])).port  # noqa: E731
            deadline = time.monotonic() + 60
            while owner() == victim.port and time.monotonic() < deadline:
                time.sleep(0.02)
        else:
            group.wait_failover(victim.port)
        promoted = time.monotonic() - killed
        deadline = time.monotonic() + 30
        while not any(s > killed for s, _ in acked) and time.monotonic() < deadline:
            time.sleep(0.02)
        stop.set()
        th.join()
        first = min((a for s, a in acked if s > killed), default=None)
        victim.start()
        group.wait_healthy()
        line = {"op": "failover", "redis": name, "min_replicas": min_replicas, "promoted_s": round(promoted, 2),
                "first_write_after_kill_s": round(first - killed, 2) if first else None}
        print(json.dumps(line), flush=True)
        return line
    finally:
        stop_service(proc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=32)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--phases", default="http,inproc,failover", help="which phases, comma-separated")
    args = ap.parse_args()
    phases = set(args.phases.split(","))

    from service.store.embedded import EmbeddedRedis

    summary: list[dict] = []
    if phases & {"http", "inproc"}:
        with EmbeddedRedis(tempfile.mkdtemp(prefix="bench-redis-")) as server, Cluster() as cluster, \
                Cluster(replicas=0) as bare:
            urls = {"single": (server.url, {}), "cluster": (cluster.url, {}),
                    "cluster+min_replicas=1": (cluster.url, {"REDIS_MIN_REPLICAS": "1"}),
                    "cluster, no replicas": (bare.url, {})}
            if "http" in phases:
                summary += http(urls, args.tables, args.duration, args.rounds)
            if "inproc" in phases:
                summary += inproc(urls)
    if "failover" in phases:
        with Cluster() as cluster:
            summary.append(failover_time("cluster", cluster, cluster.url, 0))
        with Cluster(replicas=2) as cluster:
            summary.append(failover_time("cluster (2 replicas each)", cluster, cluster.url, 1))
        with SentinelGroup() as group:
            summary.append(failover_time("sentinel", group, group.url, 0))
    print("\nsummary (loopback, one machine shared by every process):")
    for line in summary:
        fields = {k: v for k, v in line.items() if k not in ("op", "redis")}
        print(f"  {line['op']:<14} {line['redis']:<26} " + "  ".join(f"{k}={v}" for k, v in fields.items()))


if __name__ == "__main__":
    main()
