"""Load test of the live table stream: thousands of subscribers while tables are written.

One run, loopback only, bounded (about two minutes with the defaults):

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

Then (``--phases opens``) what opening a long table's stream costs, on a table
of ``--records`` records (20,000, appended in-process through the store):

5. ``stream_open``: a stream opened at ``?after=0``, at the middle record and
   at the last but one (``after=19999``: one record to send), ``--opens`` times
   each, read up to its first record: the time from the request to it, and the
   CPU the workers spent meanwhile (``/proc/<pid>/task/*/schedstat``, in ns);
   the target is 5 ms of CPU plus the records sent;
6. ``never_reading_streams``: ``--never-reading`` clients (64) open its stream
   at ``?after=0`` with a 4 KiB receive buffer and never read, held ``--hold``
   seconds: each worker's resident memory before and at its peak (target: 50
   MB more at most), and meanwhile the latency of ordinary requests (``POST
   /v1/hands/ting``, one after another, each on a new connection; target: p99
   50 ms at most).

Prints one JSON object per phase and a summary line with the targets::

    .venv/bin/python bench/stream.py                     # 500 tables x 4, 200 events/s, 20 s; then the opens
    .venv/bin/python bench/stream.py --tables 50 --duration 5   # quicker
    .venv/bin/python bench/stream.py --phases opens      # the opens of a 20,000-record table alone
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing as mp
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.load_ting import drive, summarize  # noqa: E402  (drive: in ting_process)
from tests.loopback import (  # noqa: E402
    Client,
    cpu_seconds,
    cycle,
    free_port,
    percentile,
    raise_fd_limit,
    rss_kib,
    start_service,
    stop_service,
    worker_pids,
)

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
                elif frame.startswith(b"event: "):  # (resync, deleted: the stream ends; -1 marks it)
                    received.append((index, table_id, -1, now))
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
        tasks: list[asyncio.Future[None]] = []
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


# -- phase "delivery": subscribers of many tables while they are written ----------------------------
def delivery_phase(args, port: int, proc, r, out) -> None:
    client = Client(port)
    # followed tables; tables written to without subscribers: (id, token, read token) each
    tables: list[tuple[str, str, str]] = []
    quiet: list[tuple[str, str, str]] = []
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
    t201 = {(t, seq): at for t, seq, at in acked}
    latencies = []
    streams: dict = {}
    ended = {index for index, _, seq, _ in received if seq == -1}  # streams the service ended (resync)
    received = [r for r in received if r[2] != -1]
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
         "streams_ended_by_the_service": len(ended),
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


# -- phase "opens": what opening a long table's stream costs ---------------------------------------
def worker_cpu_ns(master_pid: int) -> int:
    """CPU time so far (ns) of a gunicorn master's workers, every thread: ``/proc/<pid>/task/*/schedstat``
    (nanoseconds, where ``/proc/<pid>/stat`` counts 10 ms ticks)."""
    total = 0
    for pid in worker_pids(master_pid):
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                    total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def worker_rss(master_pid: int) -> dict[int, int]:
    """Resident memory (KiB) of each worker of a gunicorn master."""
    out = {}
    for pid in worker_pids(master_pid):
        try:
            with open(f"/proc/{pid}/status") as f:
                out[pid] = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return out


def idle_cpu_ns_per_s(master_pid: int, seconds: float = 1.0) -> float:
    """The workers' CPU per second with nothing asked of them (each stream hub polls its pub/sub
    connection: a few ms a second)."""
    before = worker_cpu_ns(master_pid)
    time.sleep(seconds)
    return (worker_cpu_ns(master_pid) - before) / seconds


def settle(master_pid: int, idle_ns_per_s: float, seconds: float = 0.5, timeout: float = 15.0) -> None:
    """Wait until the workers spend no more than their idle CPU (and 3 ms) in ``seconds``: what an
    earlier open left to do is done."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = worker_cpu_ns(master_pid)
        time.sleep(seconds)
        if worker_cpu_ns(master_pid) - before < idle_ns_per_s * seconds + 3_000_000:
            return


def stream_request(table_id: str, token: str, after: int) -> bytes:
    return (f"GET /v1/tables/{table_id}/stream?after={after} HTTP/1.1\r\nHost: bench\r\n"
            f"Accept: text/event-stream\r\nAuthorization: Bearer {token}\r\n\r\n").encode()


def first_record(port: int, table_id: str, token: str, after: int, master_pid: int) -> tuple[float, int, int]:
    """Open a stream at ``after`` and read until its first record: (seconds from the request, the workers'
    CPU ns meanwhile, bytes read by then); the connection is closed then."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        cpu = worker_cpu_ns(master_pid)
        started = time.monotonic()
        sock.sendall(stream_request(table_id, token, after))
        data = b""
        while b"\nevent: record\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                raise RuntimeError(f"the stream ended before a record: {data[:300]!r}")
            data += chunk
        return time.monotonic() - started, worker_cpu_ns(master_pid) - cpu, len(data)


def probe_requests(port: int, stop: threading.Event, latencies: list, errors: list) -> None:
    """Ordinary requests one after another, each on a new connection, until ``stop``."""
    body = json.dumps({"hand": {"tiles": "1112345678999m"}})
    while not stop.is_set():
        started = time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.request("POST", "/v1/hands/ting", body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                errors.append(response.status)
        except (OSError, http.client.HTTPException) as exc:
            errors.append(type(exc).__name__)
        finally:
            conn.close()
        latencies.append(time.monotonic() - started)
        time.sleep(0.01)


def opens_phase(args, port: int, proc, r, out) -> None:
    """A table of ``--records`` records: the CPU and time to the first record of opening its stream from
    the start, the middle and the last record; then ``--never-reading`` streams of it from the start that
    never read, held ``--hold`` seconds: each worker's resident memory before and at its peak, and an
    ordinary request's latency meanwhile."""
    from service.store.table_store import TableStore

    store = TableStore(r)
    table = store.create(["东", "南", "西", "北"], "xuezhan")
    events = cycle()
    for _ in range(args.records):
        store.append(table.id, next(events))
    out({"phase": "opens_setup", "records": args.records, "workers": args.workers, "cpus": os.cpu_count()})
    first_record(port, table.id, table.read_token, args.records - 1, proc.pid)  # (the code paths, warm)
    time.sleep(1.0)
    idle = idle_cpu_ns_per_s(proc.pid)
    for after in (0, args.records // 2, args.records - 1):
        seconds, cpu_ns, sizes = [], [], []
        for _ in range(args.opens):
            settle(proc.pid, idle)
            took, cpu, size = first_record(port, table.id, table.read_token, after, proc.pid)
            seconds.append(took)
            cpu_ns.append(cpu)
            sizes.append(size)
        out({"phase": "stream_open", "records": args.records, "after": after, "opens": args.opens,
             "first_record_ms_p50": round(percentile(seconds, 50) * 1000, 2),
             "first_record_ms_max": round(max(seconds) * 1000, 2),
             # the workers' CPU from the request to the first record read (all workers: the idle one adds
             # its heartbeat), and what had been read by then (at after=0, more than the first record)
             "worker_cpu_ms_p50": round(percentile(cpu_ns, 50) / 1e6, 2),
             "worker_cpu_ms_max": round(max(cpu_ns) / 1e6, 2),
             "bytes_read_p50": int(percentile(sizes, 50)), "idle_worker_cpu_ms_per_s": round(idle / 1e6, 2),
             "target_cpu_ms": 5})

    settle(proc.pid, idle)
    before = worker_rss(proc.pid)
    latencies: list[float] = []
    errors: list = []
    stop = threading.Event()
    probe = threading.Thread(target=probe_requests, args=(port, stop, latencies, errors), daemon=True)
    probe.start()
    stalled = []
    for _ in range(args.never_reading):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # (before connecting: the window)
        sock.settimeout(10)
        sock.connect(("127.0.0.1", port))
        sock.sendall(stream_request(table.id, table.read_token, 0))
        stalled.append(sock)  # and never read
    peak = dict(before)
    held_until = time.monotonic() + args.hold
    while time.monotonic() < held_until:
        for pid, kib in worker_rss(proc.pid).items():
            peak[pid] = max(peak.get(pid, 0), kib)
        time.sleep(0.25)
    stop.set()
    probe.join(timeout=30)
    for sock in stalled:
        sock.close()
    out({"phase": "never_reading_streams", "records": args.records, "streams": args.never_reading,
         "held_s": args.hold,
         "workers": [{"pid": pid, "rss_kib_before": before.get(pid), "rss_kib_peak": peak[pid],
                      "growth_kib": peak[pid] - before.get(pid, peak[pid])} for pid in sorted(peak)],
         "target_growth_kib": 50 * 1024,
         "probe": {"requests": len(latencies), "errors": len(errors),
                   "p50_ms": round(percentile(latencies, 50) * 1000, 1),
                   "p99_ms": round(percentile(latencies, 99) * 1000, 1),
                   "max_ms": round(max(latencies) * 1000, 1) if latencies else None},
         "target_p99_ms": 50})


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
    parser.add_argument("--phases", default="delivery,opens",
                        help="delivery (the subscribers of many tables), opens (a long table's stream opens)")
    parser.add_argument("--records", type=int, default=20_000, help="records of the opens phase's table (20,000)")
    parser.add_argument("--opens", type=int, default=5, help="opens measured at each position (5)")
    parser.add_argument("--never-reading", type=int, default=64, help="never-reading streams held (64)")
    parser.add_argument("--hold", type=float, default=10.0,
                        help="seconds the never-reading streams are held while the probe runs (10)")
    args = parser.parse_args(argv)
    raise_fd_limit()
    import redis

    from service.store.embedded import EmbeddedRedis

    out = lambda obj: print(json.dumps(obj), flush=True)  # noqa: E731
    phases = {name.strip() for name in args.phases.split(",") if name.strip()}
    with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(tmp) as server:
        port = free_port()
        proc = start_service(port, server.url, workers=args.workers, log_path=os.path.join(tmp, "serve.log"),
                             extra_env={"LOG_LEVEL": "WARNING",
                                        # (the opens phase holds --never-reading streams of one table)
                                        "STREAM_MAX_PER_TABLE": str(max(32, args.never_reading))})
        r = redis.Redis.from_url(server.url)
        try:
            if "delivery" in phases:
                delivery_phase(args, port, proc, r, out)
            if "opens" in phases:
                opens_phase(args, port, proc, r, out)
        finally:
            stop_service(proc)
            r.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
