"""Does hiredis pay on the table path?  Appends through TableStore with each redis-py reply parser.

redis-py reads Redis's replies with its pure-Python RESP parser, or with
hiredis's C parser when the ``hiredis`` package is installed.  This runs
:meth:`service.store.tables.TableStore.append` (the table path: a state read
and the append script) against a private redis-server (the embedded one,
``appendfsync always``) through two clients that differ only in their
``parser_class``, in alternating blocks, and prints per parser the CPU time
of this process per append (what a parser can change: the wall-clock time is
mostly Redis's fsync) and the wall-clock median, and a table read
(:meth:`TableStore.get` of a table with ``--rounds`` ended rounds) likewise.
Needs ``hiredis`` installed for the second parser.  Loopback only, bounded::

    .venv/bin/python bench/redis_parser.py              # ~30 s
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.store import PLAYERS, cycle  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=300, help="appends per block (default 300)")
    parser.add_argument("--blocks", type=int, default=6, help="alternating blocks per parser (default 6)")
    parser.add_argument("--rounds", type=int, default=50, help="ended rounds of the table read (default 50)")
    args = parser.parse_args(argv)

    import redis
    from redis._parsers import _HiredisParser, _RESP2Parser
    from redis.utils import HIREDIS_AVAILABLE

    from service.store.embedded import EmbeddedRedis
    from service.store.tables import TableStore

    if not HIREDIS_AVAILABLE:
        raise SystemExit("hiredis is not installed: pip install hiredis")
    parsers = {"python": _RESP2Parser, "hiredis": _HiredisParser}
    with tempfile.TemporaryDirectory() as data, EmbeddedRedis(data) as server:
        stores = {name: TableStore(redis.Redis.from_url(server.url, parser_class=cls))
                  for name, cls in parsers.items()}
        tables = {}
        for name, store in stores.items():
            tid = store.create(PLAYERS, "xuezhan").id
            events = cycle()
            for _ in range(args.rounds * 4):  # rounds of four events
                store.append(tid, next(events))
            tables[name] = (tid, events)
        cpu: dict[str, list[float]] = {n: [] for n in parsers}
        wall: dict[str, list[float]] = {n: [] for n in parsers}
        read_cpu: dict[str, list[float]] = {n: [] for n in parsers}
        for _ in range(args.blocks):
            for name, store in stores.items():
                tid, events = tables[name]
                c0 = time.process_time()
                for _ in range(args.appends):
                    t0 = time.perf_counter()
                    store.append(tid, next(events))
                    wall[name].append(time.perf_counter() - t0)
                cpu[name].append((time.process_time() - c0) / args.appends)
                c0 = time.process_time()
                for _ in range(args.appends):
                    store.get(tid)
                read_cpu[name].append((time.process_time() - c0) / args.appends)
        for name in parsers:
            print(json.dumps({
                "parser": name, "append_cpu_us": round(statistics.median(cpu[name]) * 1e6, 1),
                "append_wall_p50_us": round(statistics.median(wall[name]) * 1e6, 1),
                "table_read_cpu_us": round(statistics.median(read_cpu[name]) * 1e6, 1),
                "appends": args.appends * args.blocks,
            }), flush=True)
        print(json.dumps({"ratio": "hiredis/python", "append_cpu": round(
            statistics.median(cpu["hiredis"]) / statistics.median(cpu["python"]), 3), "table_read_cpu": round(
            statistics.median(read_cpu["hiredis"]) / statistics.median(read_cpu["python"]), 3),
            "load_average_1m": round(os.getloadavg()[0], 2)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
