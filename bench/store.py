"""Benchmark the live table log (loopback only, bounded in time).

    python bench/store.py [--tables 32] [--duration 10] [--long 10000]
                          [--phases http,versus,length,void,memory,get] [--limits off|high]
                          [--baseline DIR [--runs 3]]

1. HTTP: ``python -m service serve`` (2 workers × 8 threads) on a private
   redis-server; ``--tables`` client threads, each with its own table and
   keep-alive connection, append valid events for ``--duration`` seconds.
   Prints append throughput and latency p50/p99 (ms).
2. In-process, through :class:`service.store.table_store.TableStore` on the same
   redis-server: the median cost of one append on a table whose log has 10
   records and on one whose log has ``--long`` records, and their ratio
   (the hot path keeps the state beside the log, so it must not grow).
3. In-process: the median cost of a refused void (a later event depends on
   it) on a 4,000-event log, against an append on a log as long, interleaved;
   a refused void reads the target's round, not the log.
4. ``replay``: a retry of an old event (its ``Idempotency-Key``) on a table of 6,000 keyed
   events: the median cost of replaying events at the start, the middle and the end of the log,
   each the last ones before a snapshot (the most a replay folds), alike: a replay reads the
   snapshot before its event and the records since, never the log from the start.
5. ``MEMORY USAGE`` of every key of a table with 500 events appended without
   an ``Idempotency-Key`` and of one with a key on each (and 2,000 of each:
   Redis packs a hash of up to 512 fields, a larger one costs more per field).

6. ``versus``: on one ``serve`` (as in 1), the same client (``--tables``
   keep-alive threads) alternates blocks of table appends (one table per
   thread) and blocks of ``POST /v1/hands/ting`` (``--rounds`` of each,
   ``--duration`` seconds in all); prints both throughputs, their ratio and the
   p50/p99 of each.
7. ``get``: ``GET /v1/tables/{id}`` of a table with 200 ended rounds, in-process
   through the Flask app (test client) and through :meth:`TableStore.get`:
   the median server-side cost in µs.

``--baseline DIR`` (``versus``): DIR's ``service`` package (another tree, e.g. a
``git worktree`` of an earlier commit) is the "before": the phase runs on each
side in turn, ``--runs`` times, on the same Redis, then prints each side's medians.

``--limits high`` starts ``serve`` (phases 1 and 5) with every rate limit on at
1,000,000 a minute (or an hour), so that the limiter's Redis round trips are on
every append as with the defaults, yet nothing is refused (``off``, the
default: no limits at all).  Phase 5 then also prints the Redis commands per
append that the clients sent (``INFO commandstats`` deltas over the append
blocks, without the commands run inside scripts).

Each prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.loopback import PLAYERS, Client, cycle, free_port, percentile, start_service, stop_service  # noqa: E402

HIGH_LIMITS = {var: "1000000" for var in ("TABLES_PER_HOUR", "CLIENT_EVENTS_PER_MINUTE", "CLIENT_VOIDS_PER_MINUTE",
                                         "CLIENT_READS_PER_MINUTE", "TABLE_EVENTS_PER_MINUTE",
                                         "TABLE_VOIDS_PER_MINUTE", "TABLE_READS_PER_MINUTE")}
"""Every rate limit on, none refusing a benchmark (``--limits high``)."""
# the commands a client sends (not those a script runs): INFO commandstats counts both
TOP_LEVEL = ("evalsha", "eval", "ping", "multi", "exec")


def create_tables(port: int, tables: int) -> list[tuple[str, str]]:
    """``tables`` new tables through the API: their ``(id, write token)``."""
    setup = Client(port)
    ids = []
    for _ in range(tables):
        status, _, body = setup.request("POST", "/v1/tables", {"players": PLAYERS})
        assert status == 201, body
        ids.append((body["id"], body["token"]))
    setup.close()
    return ids


def http_phase(port: int, tables: int, duration: float) -> dict:
    ids = create_tables(port, tables)
    latencies: list[list[float]] = [[] for _ in range(tables)]
    errors = [0] * tables
    stop_at = time.monotonic() + duration

    def run(i: int) -> None:
        tid, token = ids[i]
        c = Client(port)
        auth = {"Authorization": "Bearer " + token}
        events = cycle()
        while time.monotonic() < stop_at:
            ev = next(events)
            t0 = time.perf_counter()
            status, _, _ = c.request("POST", f"/v1/tables/{tid}/events", ev, auth)
            latencies[i].append((time.perf_counter() - t0) * 1000)
            if status != 201:
                errors[i] += 1
        c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(tables)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    flat = [x for lat in latencies for x in lat]
    return {"op": "append_http", "tables": tables, "appends": len(flat),
            "appends_per_s": round(len(flat) / elapsed, 1), "p50_ms": round(percentile(flat, 50), 2),
            "p99_ms": round(percentile(flat, 99), 2), "errors": sum(errors)}


TING_HANDS = ["1112345678999m", "2344567p345789s", "1112223334445m", "123345m999p66p22p",
              "1133557799s224p", "2345678m234p789p", "1112223334567s", "123456789p1122m"]


def _top_level_calls(redis_url: str | None) -> int:
    if redis_url is None:
        return 0
    import redis

    stats = redis.Redis.from_url(redis_url).info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k.split("_", 1)[1] in TOP_LEVEL)


def versus_phase(port: int, tables: int, duration: float, rounds: int = 3, redis_url: str | None = None) -> dict:
    """Appends against ``POST /v1/hands/ting``: the same threads and connections, alternating blocks."""
    ids = create_tables(port, tables)
    clients = [Client(port) for _ in range(tables)]
    streams = [cycle() for _ in range(tables)]
    lat: dict[str, list[float]] = {"append": [], "ting": []}
    busy: dict[str, float] = {"append": 0.0, "ting": 0.0}
    calls = {"append": 0, "ting": 0}
    errors = {"append": 0, "ting": 0}
    lock = threading.Lock()

    def block(kind: str, seconds: float) -> None:
        stop_at = time.monotonic() + seconds

        def run(i: int) -> None:
            tid, token = ids[i]
            c, mine, bad = clients[i], [], 0
            auth = {"Authorization": "Bearer " + token}
            n = i
            while time.monotonic() < stop_at:
                t0 = time.perf_counter()
                if kind == "append":
                    status, _, _ = c.request("POST", f"/v1/tables/{tid}/events", next(streams[i]), auth)
                    ok = status == 201
                else:
                    status, _, _ = c.request("POST", "/v1/hands/ting", {"hand": {"tiles": TING_HANDS[n % 8]}})
                    ok = status == 200
                    n += 1
                mine.append((time.perf_counter() - t0) * 1000)
                bad += not ok
            with lock:
                lat[kind].extend(mine)
                errors[kind] += bad

        threads = [threading.Thread(target=run, args=(i,)) for i in range(tables)]
        c0 = _top_level_calls(redis_url)
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        busy[kind] += time.monotonic() - t0
        calls[kind] += _top_level_calls(redis_url) - c0

    block("ting", 1.0)  # warm-up of both (not counted)
    block("append", 1.0)
    lat = {"append": [], "ting": []}
    busy = {"append": 0.0, "ting": 0.0}
    calls = {"append": 0, "ting": 0}
    for _ in range(rounds):
        block("append", duration / (2 * rounds))
        block("ting", duration / (2 * rounds))
    for c in clients:
        c.close()
    return _versus_result("threads", tables, lat, busy, calls, errors)


def _versus_result(client: str, tables: int, lat: dict, busy: dict, calls: dict, errors: dict) -> dict:
    """The versus phase's JSON line from each kind's latencies (ms), busy seconds and Redis calls."""
    rate = {k: len(v) / busy[k] for k, v in lat.items()}
    return {"op": "append_vs_ting", "client": client, "tables": tables,
            "appends_per_s": round(rate["append"], 1), "ting_per_s": round(rate["ting"], 1),
            "ratio": round(rate["append"] / rate["ting"], 3),
            "append_p50_ms": round(percentile(lat["append"], 50), 2),
            "append_p99_ms": round(percentile(lat["append"], 99), 2),
            "ting_p50_ms": round(percentile(lat["ting"], 50), 2),
            "ting_p99_ms": round(percentile(lat["ting"], 99), 2),
            "redis_commands_per_append": round(calls["append"] / max(1, len(lat["append"])), 2),
            "errors": errors}


def _raw(method: str, path: str, body: dict, headers: dict | None = None) -> bytes:
    data = json.dumps(body).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{head}"
            f"Content-Length: {len(data)}\r\n\r\n").encode() + data


def versus_phase_asyncio(port: int, tables: int, duration: float, rounds: int = 3,
                         redis_url: str | None = None) -> dict:
    """:func:`versus_phase` with ``bench/load_ting.py``'s load generator: one asyncio loop, raw
    keep-alive sockets, requests written as bytes (``--client asyncio``).  The thread-per-table
    client costs ~190 µs of CPU per request on the cores the service shares; this one less."""
    from bench.load_ting import read_response

    ids = create_tables(port, tables)
    streams = [cycle() for _ in range(tables)]
    lat: dict[str, list[float]] = {"append": [], "ting": []}
    busy = {"append": 0.0, "ting": 0.0}
    calls = {"append": 0, "ting": 0}
    errors = {"append": 0, "ting": 0}
    tings = [_raw("POST", "/v1/hands/ting", {"hand": {"tiles": h}}) for h in TING_HANDS]

    async def run() -> None:
        conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(tables)]

        async def block(kind: str, seconds: float, keep: bool) -> None:
            stop_at = time.monotonic() + seconds

            async def one(i: int) -> None:
                reader, writer = conns[i]
                tid, token = ids[i]
                auth = {"Authorization": "Bearer " + token}
                n = i
                while time.monotonic() < stop_at:
                    raw = (_raw("POST", f"/v1/tables/{tid}/events", next(streams[i]), auth) if kind == "append"
                           else tings[n % len(tings)])
                    n += 1
                    t0 = time.perf_counter()
                    writer.write(raw)
                    status, _ = await read_response(reader)
                    if keep:
                        lat[kind].append((time.perf_counter() - t0) * 1000)
                        errors[kind] += status != (201 if kind == "append" else 200)

            c0, t0 = _top_level_calls(redis_url), time.monotonic()
            await asyncio.gather(*(one(i) for i in range(tables)))
            if keep:
                busy[kind] += time.monotonic() - t0
                calls[kind] += _top_level_calls(redis_url) - c0

        await block("ting", 1.0, False)  # warm-up of both (not counted)
        await block("append", 1.0, False)
        for _ in range(rounds):
            await block("append", duration / (2 * rounds), True)
            await block("ting", duration / (2 * rounds), True)
        for _, writer in conns:
            writer.close()

    asyncio.run(run())
    return _versus_result("asyncio", tables, lat, busy, calls, errors)


def get_phase(redis_url: str, rounds: int = 200, samples: int = 300) -> dict:
    """The server-side cost of ``GET /v1/tables/{id}`` of a table with ``rounds`` ended rounds."""
    import redis

    from service.api import create_app
    from service.config import NO_LIMITS
    from service.store.table_store import Access, TableStore

    store = TableStore(redis.Redis.from_url(redis_url))
    created = store.create(PLAYERS, "xuezhan")
    tid = created.id
    events = cycle()
    for _ in range(rounds * 4):
        store.append(tid, next(events))
    app = create_app({"REDIS_URL": redis_url, **{var: 0 for var in NO_LIMITS}})
    web = app.test_client()
    auth = {"Authorization": "Bearer " + created.read_token}
    assert web.get(f"/v1/tables/{tid}", headers=auth).status_code == 200
    via_app, via_store = [], []
    access = Access(created.read_token, write=False)
    for _ in range(samples):
        t0 = time.perf_counter()
        resp = web.get(f"/v1/tables/{tid}", headers=auth)
        via_app.append((time.perf_counter() - t0) * 1e6)
        assert resp.status_code == 200
        t0 = time.perf_counter()
        store.get(tid, access)
        via_store.append((time.perf_counter() - t0) * 1e6)
    return {"op": "get_table", "ended_rounds": rounds, "app_us": round(statistics.median(via_app), 1),
            "store_us": round(statistics.median(via_store), 1),
            "response_bytes": len(resp.data)}


def length_phase(redis_url: str, long: int, samples: int = 400) -> dict:
    import redis

    from service.store.table_store import TableStore

    store = TableStore(redis.Redis.from_url(redis_url))

    def fill(n: int) -> tuple[str, object]:
        tid = store.create(PLAYERS, "xuezhan").id
        events = cycle()
        for _ in range(n):
            store.append(tid, next(events))
        return tid, events

    def cost(tid: str, events) -> list[float]:
        out = []
        for _ in range(samples):
            ev = next(events)
            t0 = time.perf_counter()
            store.append(tid, ev)
            out.append((time.perf_counter() - t0) * 1e6)
        return out

    short_t = fill(10)
    long_t = fill(long)
    # interleave the two measurements so background load hits both alike
    a, b = [], []
    for _ in range(5):
        a += cost(*short_t)[: samples // 5]
        b += cost(*long_t)[: samples // 5]
    m_short, m_long = statistics.median(a), statistics.median(b)
    return {"op": "append_vs_length", "short_len": 10, "long_len": long,
            "short_us": round(m_short, 1), "long_us": round(m_long, 1), "ratio": round(m_long / m_short, 3)}


def replay_phase(redis_url: str, length: int = 6000, samples: int = 200) -> dict:
    """A retry of an old event (its ``Idempotency-Key`` replayed) on a table of ``length`` keyed events:
    the median cost of replaying the key of the first events, of the middle ones and of the last ones,
    interleaved; a replay reads a snapshot and the records after it, so the three must be alike."""
    import redis

    from service.store import keys
    from service.store.table_store import TableStore, fingerprint

    store = TableStore(redis.Redis.from_url(redis_url))
    tid = store.create(PLAYERS, "xuezhan").id
    events, sent = cycle(), []
    path = f"/v1/tables/{tid}/events"
    for i in range(length):
        ev = next(events)
        store.append(tid, ev, idempotency_key=f"k{i}", fp=fingerprint("POST", path, ev))
        sent.append(ev)
    every = keys.SNAPSHOT_EVERY  # (a replay folds the records since the snapshot before it: the same worst case
    #  everywhere, the last 10 of a snapshot's interval, at the start, the middle and the end of the log)
    where = {name: range(start + every - 11, start + every - 1)
             for name, start in (("first", 0), ("middle", length // 2 // every * every),
                                 ("last", (length - every) // every * every))}
    costs: dict[str, list[float]] = {name: [] for name in where}
    for _ in range(samples // 10):
        for name, seqs in where.items():
            for i in seqs:
                t0 = time.perf_counter()
                written = store.append(tid, sent[i], idempotency_key=f"k{i}", fp=fingerprint("POST", path, sent[i]))
                costs[name].append((time.perf_counter() - t0) * 1e6)
                assert written.replayed and written.seq == i + 1, written
    med = {name: statistics.median(v) for name, v in costs.items()}
    return {"op": "idempotent_replay", "length": length, **{f"{k}_us": round(v, 1) for k, v in med.items()},
            "last_over_first": round(med["last"] / med["first"], 3)}


def void_phase(redis_url: str, length: int = 4000, samples: int = 200) -> dict:
    import redis

    from service.store.errors import Conflict
    from service.store.table_store import TableStore

    store = TableStore(redis.Redis.from_url(redis_url))

    def fill() -> tuple[str, Iterator[dict]]:
        tid = store.create(PLAYERS, "xuezhan").id
        events = cycle()
        for _ in range(length // 4 * 4 - 4):  # whole rounds
            store.append(tid, next(events))
        return tid, events

    refused, _ = fill()
    store.append(refused, {"type": "round_start"})
    kong = store.append(refused, {"type": "kong", "seat": 2, "kind": "direct", "tile": "3s", "from": 0}).seq
    store.append(refused, {"type": "hu", "from": 2, "tile": "9p", "after_kong": True,
                           "winners": [{"seat": 3, "fan": 1}]})  # 杠上炮: depends on the kong
    appended, events = fill()
    voids, appends = [], []
    for _ in range(samples):
        t0 = time.perf_counter()
        try:
            store.void(refused, kong)
        except Conflict:
            pass
        voids.append((time.perf_counter() - t0) * 1e6)
        ev = next(events)
        t0 = time.perf_counter()
        store.append(appended, ev)
        appends.append((time.perf_counter() - t0) * 1e6)
    m_void, m_append = statistics.median(voids), statistics.median(appends)
    return {"op": "refused_void_vs_append", "log_len": kong + 1, "refused_void_us": round(m_void, 1),
            "append_us": round(m_append, 1), "ratio": round(m_void / m_append, 3)}


def memory_phase(redis_url: str) -> dict:
    import uuid

    import redis

    from service.store.table_store import TableStore

    client = redis.Redis.from_url(redis_url)
    store = TableStore(client)
    out: dict = {"op": "memory"}
    for n in (500, 2000):
        for keyed in (False, True):
            tid = store.create(PLAYERS, "xuezhan").id
            events = cycle()
            for _ in range(n):
                store.append(tid, next(events), idempotency_key=str(uuid.uuid4()) if keyed else None, fp="bench")
            names = [k.decode() if isinstance(k, bytes) else k for k in client.keys("{t:" + tid + "}*")]
            usage = {k.rsplit(":", 1)[1]: client.memory_usage(k, samples=0) for k in names}
            out[f"{n}_{'keyed' if keyed else 'unkeyed'}"] = {"total": sum(usage.values()), **usage}
        out[f"{n}_ratio"] = round(out[f"{n}_keyed"]["total"] / out[f"{n}_unkeyed"]["total"], 3)
    return out


def versus_medians(results: dict[str, list[dict]]) -> dict:
    """The medians of each side's versus runs (``--baseline``): appends ÷ ting, both rates, append p99."""
    out: dict = {"op": "append_vs_ting_medians", "runs": {side: len(rs) for side, rs in results.items()}}
    for side, rs in results.items():
        out[side] = {key: round(statistics.median(r[key] for r in rs), 3) if rs else None
                     for key in ("ratio", "appends_per_s", "ting_per_s", "append_p99_ms", "ting_p99_ms",
                                 "redis_commands_per_append")}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=32)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--long", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3, help="versus: alternating blocks of each")
    ap.add_argument("--replay-length", type=int, default=6000, help="replay: keyed events of the table (6,000)")
    ap.add_argument("--limits", choices=("off", "high"), default="off",
                    help="serve without rate limits, or with all of them at 1,000,000 (counted, never refusing)")
    ap.add_argument("--client", choices=("threads", "asyncio"), default="threads",
                    help="versus: a thread and http.client connection per table, or one asyncio loop "
                         "writing raw requests (bench/load_ting.py's load generator)")
    ap.add_argument("--phases", default="http,versus,length,replay,void,memory,get",
                    help="which phases, comma-separated")
    ap.add_argument("--baseline", metavar="DIR", help="versus: also serve DIR's service package (the 'before'), "
                                                      "alternating with this tree's, --runs times each")
    ap.add_argument("--runs", type=int, default=3, help="versus with --baseline: runs per side (default 3)")
    args = ap.parse_args()
    phases = set(args.phases.split(","))
    env = HIGH_LIMITS if args.limits == "high" else None

    from service.store.embedded import EmbeddedRedis

    with EmbeddedRedis(tempfile.mkdtemp(prefix="bench-redis-")) as server:
        if "http" in phases:
            port = free_port()
            proc = start_service(port, server.url, extra_env=env)
            try:
                print(json.dumps(http_phase(port, args.tables, args.duration)), flush=True)
            finally:
                stop_service(proc)
        if "versus" in phases:
            sides = [("after", None), ("before", args.baseline)] if args.baseline else [("after", None)]
            results: dict[str, list[dict]] = {side: [] for side, _ in sides}
            for _ in range(args.runs if args.baseline else 1):
                for side, root in sides:
                    port = free_port()
                    proc = start_service(port, server.url, extra_env=env, root=root)
                    try:
                        phase = versus_phase_asyncio if args.client == "asyncio" else versus_phase
                        result = phase(port, args.tables, args.duration, args.rounds, server.url)
                        result = {**result, "limits": args.limits, **({"side": side} if args.baseline else {})}
                        results[side].append(result)
                        print(json.dumps(result), flush=True)
                    finally:
                        stop_service(proc)
            if args.baseline:
                print(json.dumps(versus_medians(results)), flush=True)
        if "length" in phases:
            print(json.dumps(length_phase(server.url, args.long)), flush=True)
        if "replay" in phases:
            print(json.dumps(replay_phase(server.url, args.replay_length)), flush=True)
        if "void" in phases:
            print(json.dumps(void_phase(server.url)), flush=True)
        if "memory" in phases:
            print(json.dumps(memory_phase(server.url)), flush=True)
        if "get" in phases:
            print(json.dumps(get_phase(server.url)), flush=True)


if __name__ == "__main__":
    main()
