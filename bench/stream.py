"""Load test of the live table stream: thousands of subscribers while tables are written.

One run, loopback only, bounded (about a minute with the defaults):

1. a private ``redis-server`` (AOF, ``appendfsync always``) and ``python -m
   service serve`` on it (``--workers``), ``--tables`` tables created;
2. ``POST /v1/hands/ting`` on ``--connections`` keep-alive connections for
   ``--ting`` seconds with **no** subscriber: alone, then while a writer posts
   ``--rate`` events per second to another ``--tables`` tables (the baselines);
3. ``--per-table`` subscribers per table connect (``GET …/stream``, the read
   token) and sit idle: the workers' RSS before and after, per subscriber; what
   Redis holds for them (pub/sub connections, subscriptions per channel, memory);
   the ting load again, with them idle;
4. for ``--duration`` seconds a writer posts valid events at ``--rate`` per
   second in all (round-robin over the followed tables) while the ting load runs again:
   the delivery latency of every record, from the moment the writer read its
   201 to the moment a subscriber read its frame (p50/p90/p99/max; negative
   when the frame came first), every record checked delivered exactly once and
   in order to each subscriber of its table, and the ting throughput with the
   subscribers as a ratio of the baselines (the writes cost CPU of their own:
   the ratio against ting-while-writing isolates what the subscribers cost).

The subscribers, the writer and the ting load run in three processes (so that
one client loop does not delay another) and share ``time.monotonic()``.
Prints one JSON object per phase and a summary line with the targets::

    .venv/bin/python bench/stream.py                     # 500 tables x 4, 200 events/s, 20 s
    .venv/bin/python bench/stream.py --tables 50 --duration 5   # quicker
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.loopback import (  # noqa: E402
    Client, cpu_seconds, free_port, raise_fd_limit, rss_kib, start_service, stop_service,
)
from bench.load_ting import drive, summarize  # noqa: E402  (drive: in ting_process)

SEATS = [0, 0, 1, 2, 0, 3, 1, 0]
TILES = ["1m", "2m", "3m", "4m", "5m", "6m", "7m", "8m"]


def table_events():
    """An endless valid log: rounds of round_start, eight concealed kongs, round_end."""
    while True:
        yield {"type": "round_start"}
        for seat, tile in zip(SEATS, TILES):
            yield {"type": "kong", "seat": seat, "kind": "concealed", "tile": tile}
        yield {"type": "round_end"}








def pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return round(s[min(len(s) - 1, int(p * len(s)))] * 1000, 2)


# -- subscribers (own process) --------------------------------------------------------------------
async def _subscriber(index: int, port: int, table_id: str, token: str, received: list, ready: asyncio.Event,
                      opened: list, stop: asyncio.Event) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /v1/tables/{table_id}/stream HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n"
                 f"Authorization: Bearer {token}\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n", 1)[0]:
        raise RuntimeError(f"stream refused: {head[:200]!r}")
    opened.append(1)
    if len(opened) - 1 == opened[0]:
        ready.set()
    buf = b""
    try:
        while not stop.is_set():
            size_line = await reader.readline()  # chunked transfer coding
            if not size_line:
                return
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                return
            chunk = await reader.readexactly(size + 2)
            now = time.monotonic()
            buf += chunk[:-2]
            *frames, buf = buf.split(b"\n\n")
            for frame in frames:
                if frame.startswith(b"id: "):
                    seq = int(frame[4:frame.index(b"\n")])
                    received.append((index, table_id, seq, now))
    except (asyncio.IncompleteReadError, ConnectionError):
        return
    finally:
        writer.close()


def subscribers_process(port: int, tables: list, per_table: int, conn) -> None:
    raise_fd_limit()

    async def main() -> None:
        received: list = []
        ready, stop = asyncio.Event(), asyncio.Event()
        opened = [len(tables) * per_table]  # [expected, then one item per opened stream]
        tasks = []
        for table_id, _, read_token in tables:
            for _ in range(per_table):
                tasks.append(asyncio.ensure_future(_subscriber(len(tasks), port, table_id, read_token, received,
                                                               ready, opened, stop)))
                await asyncio.sleep(0)
        await asyncio.wait_for(ready.wait(), 120)
        conn.send(("ready", len(opened) - 1))
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, conn.recv)  # "stop"
        stop.set()
        for t in tasks:
            t.cancel()
        conn.send(("received", received))

    asyncio.run(main())


# -- writer (own process) -------------------------------------------------------------------------
def writer_process(port: int, tables: list, rate: float, duration: float, conn) -> None:
    async def main() -> None:
        gens = {t[0]: table_events() for t in tables}
        acked: list = []
        errors = 0
        order = [t for t in tables]
        # a table belongs to one lane (its events go out in order); lanes write concurrently
        lanes = max(d for d in range(1, 17) if len(tables) % d == 0)
        interval = lanes / rate
        start = time.monotonic() + 0.2

        async def lane(n: int) -> None:
            nonlocal errors
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            i = n
            t_next = start + n / rate
            while True:
                now = time.monotonic()
                if now >= start + duration:
                    break
                if t_next > now:
                    await asyncio.sleep(t_next - now)
                t_next += interval
                table_id, token, _ = order[i % len(order)]
                i += lanes
                body = json.dumps(next(gens[table_id])).encode()
                writer.write((f"POST /v1/tables/{table_id}/events HTTP/1.1\r\nHost: bench\r\n"
                              f"Content-Type: application/json\r\nAuthorization: Bearer {token}\r\n"
                              f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                payload = await reader.readexactly(length)
                t_201 = time.monotonic()
                if b" 201 " in head.split(b"\r\n", 1)[0]:
                    acked.append((table_id, json.loads(payload)["seq"], t_201))
                else:
                    errors += 1
            writer.close()

        await asyncio.gather(*(lane(n) for n in range(lanes)))
        conn.send((acked, errors))

    asyncio.run(main())


def ting_process(port: int, connections: int, duration: float, conn) -> None:
    lat, err = asyncio.run(drive(port, connections, 0.5, duration))
    conn.send(summarize(lat, err, duration))


def run_in_process(target, *args):
    parent, child = mp.Pipe()
    proc = mp.get_context("fork").Process(target=target, args=(*args, child))
    proc.start()
    return proc, parent


# -- main -----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=500)
    parser.add_argument("--per-table", type=int, default=4)
    parser.add_argument("--rate", type=float, default=200.0, help="events per second, all tables (200)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of writing (20)")
    parser.add_argument("--ting", type=float, default=10.0, help="seconds of each ting measurement (10)")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    raise_fd_limit()
    import redis

    from service.store.embedded import EmbeddedRedis

    out = lambda obj: print(json.dumps(obj), flush=True)  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(tmp) as server:
        port = free_port()
        proc = start_service(port, server.url, workers=args.workers,
                             log_path=os.path.join(tmp, "serve.log"), extra_env={"LOG_LEVEL": "WARNING"})
        r = redis.Redis.from_url(server.url)
        try:
            client = Client(port)
            tables, quiet = [], []  # followed tables; tables written to without subscribers
            for group in (tables, quiet):
                for _ in range(args.tables):
                    status, _, body = client.request("POST", "/v1/tables", {"players": ["东", "南", "西", "北"]})
                    assert status == 201, body
                    group.append((body["id"], body["token"], body["read_token"]))
            client.close()
            out({"phase": "setup", "tables": args.tables, "per_table": args.per_table, "workers": args.workers,
                 "cpus": os.cpu_count(), "rate": args.rate, "duration_s": args.duration})

            def ting_during(seconds: float) -> dict:
                before = cpu_seconds(proc.pid)
                ting, ting_conn = run_in_process(ting_process, port, args.connections, seconds)
                result = ting_conn.recv()
                ting.join(timeout=30)
                # the workers' CPU time per ting request (whatever else they did meanwhile included):
                # unlike requests/s it does not depend on the CPU share other processes left them
                result["worker_cpu_ms_per_s"] = round((cpu_seconds(proc.pid) - before) / (seconds + 0.5) * 1000, 1)
                result["worker_cpu_us_per_ting"] = round((cpu_seconds(proc.pid) - before) / max(1, result["requests"])
                                                         * 1e6 * seconds / (seconds + 0.5), 1)
                return result

            baseline = ting_during(args.ting)
            out({"phase": "ting_alone", "connections": args.connections, **baseline})

            writer, writer_conn = run_in_process(writer_process, port, quiet, args.rate, args.ting + 1)
            writes_only = ting_during(args.ting)
            quiet_acked, _ = writer_conn.recv()
            writer.join(timeout=30)
            out({"phase": "ting_while_writing_without_subscribers", "connections": args.connections,
                 "events_per_s": round(len(quiet_acked) / (args.ting + 1), 1), **writes_only})

            rss0, redis0 = rss_kib(proc.pid), r.info("memory")["used_memory"]
            subs, subs_conn = run_in_process(subscribers_process, port, tables, args.per_table)
            kind, opened = subs_conn.recv()
            time.sleep(2.0)
            rss1, redis1 = rss_kib(proc.pid), r.info("memory")["used_memory"]
            pubsub_clients = [c for c in r.client_list() if int(c.get("sub", 0)) + int(c.get("ssub", 0)) > 0]
            per_channel = [n for _, n in r.pubsub_numsub(*[f"{{t:{t[0]}}}:events" for t in tables[:20]])]
            out({"phase": "idle_subscribers", "subscribers": opened,
                 "service_rss_kib_before": rss0, "service_rss_kib_after": rss1,
                 "service_kib_per_subscriber": round((rss1 - rss0) / opened, 2),
                 "redis_pubsub_connections": len(pubsub_clients),
                 "redis_subscriptions_per_channel_sample": sorted(set(per_channel)),
                 # (used_memory also moves with client buffers and allocator noise)
                 "redis_used_memory_delta_bytes": redis1 - redis0})
            idle_subs = ting_during(args.ting)
            out({"phase": "ting_with_idle_subscribers", "connections": args.connections, **idle_subs})

            writer, writer_conn = run_in_process(writer_process, port, tables, args.rate, args.duration)
            with_subs = ting_during(min(args.ting, args.duration))
            acked, write_errors = writer_conn.recv()
            time.sleep(1.0)  # the last frames
            subs_conn.send("stop")
            _, received = subs_conn.recv()
            for p in (writer, subs):
                p.join(timeout=30)
        finally:
            stop_service(proc)
            r.close()

    t201 = {(t, seq): at for t, seq, at in acked}
    latencies = []
    streams: dict = {}
    for index, table_id, seq, at in received:
        streams.setdefault((index, table_id), []).append(seq)
        if (table_id, seq) in t201:
            latencies.append(at - t201[(table_id, seq)])
    acked_per_table: dict = {}
    for table_id, seq, _ in acked:
        acked_per_table[table_id] = max(acked_per_table.get(table_id, 0), seq)
    # every subscriber of a table got each of its acknowledged records once, in order
    missing = duplicates = out_of_order = 0
    for index in range(len(tables) * args.per_table):
        table_id = tables[index // args.per_table][0]
        got = streams.get((index, table_id), [])
        n = acked_per_table.get(table_id, 0)
        missing += len(set(range(1, n + 1)) - set(got))
        duplicates += len(got) - len(set(got))
        out_of_order += sum(1 for a, b in zip(got, got[1:]) if b <= a)
    out({"phase": "delivery", "events_acked": len(acked), "write_errors": write_errors,
         "events_per_s": round(len(acked) / args.duration, 1), "frames_received": len(received),
         "frames_expected": len(acked) * args.per_table, "missing": missing, "duplicates": duplicates,
         "out_of_order": out_of_order,
         "latency_ms_p50": pct(latencies, 0.50), "latency_ms_p90": pct(latencies, 0.90),
         "latency_ms_p99": pct(latencies, 0.99), "latency_ms_max": pct(latencies, 1.0),
         "received_before_201": sum(1 for x in latencies if x < 0)})
    out({"phase": "ting_while_writing_with_subscribers", "connections": args.connections, **with_subs})

    def ratio(a: dict, b: dict) -> float | None:
        return round(a["rps"] / b["rps"], 3) if b["rps"] else None

    out({"summary": True,
         "delivery_p50_ms": pct(latencies, 0.50), "target_p50_ms": 20,
         "delivery_p99_ms": pct(latencies, 0.99), "target_p99_ms": 250,
         # ting requests/s with 2,000 subscribers over without: idle; while 200 events/s are
         # written and delivered, against the same writes without subscribers; and against ting alone
         "ting_ratio_idle_subscribers": ratio(idle_subs, baseline),
         "ting_ratio_writing_subscribers_vs_writing": ratio(with_subs, writes_only),
         "ting_ratio_writing_subscribers_vs_alone": ratio(with_subs, baseline), "target_ratio": 0.8,
         "worker_cpu_us_per_ting_alone": baseline["worker_cpu_us_per_ting"],
         "worker_cpu_us_per_ting_idle_subscribers": idle_subs["worker_cpu_us_per_ting"],
         "service_kib_per_idle_subscriber": round((rss1 - rss0) / opened, 2), "target_kib": 50,
         "missing": missing, "duplicates": duplicates, "out_of_order": out_of_order})
    return 0


if __name__ == "__main__":
    sys.exit(main())
