"""The slow-client attacks of the hostile review, one after another, against a real ``serve``.

    .venv/bin/python bench/hostile.py          # 50, 200 and 1,000 header tricklers, 200 body tricklers,
                                               # 200 never-reading streams of a 20,000-record table,
                                               # 36 never-reading NDJSON jobs, one NDJSON line streamer
    .venv/bin/python bench/hostile.py --headers 5 --bodies 5 --streams 3 --records 1000 --ndjson 3 \\
        --streamer-seconds 3 --keepalive 1 --request-timeout 2   # the smoke test's sizes (tests/test_bench_hostile.py)

One run, loopback only: a private ``redis-server`` and ``python -m service serve`` (``--workers``, 2)
on it; a table of ``--records`` records (appended in-process through the store) and a small one.
Then each attack in turn, on fresh connections:

* ``header_tricklers`` (once per ``--headers`` count): a request line and a ``Host`` header, then
  one more byte of header lines every ``--interval`` seconds (1), never the empty line that ends
  a head.  What bounds them: a head must arrive within ``KEEPALIVE`` seconds.
* ``body_tricklers``: a whole head (``POST /v1/hands/ting``, ``Content-Length``), then one byte of
  the body every ``--interval`` seconds.  What bounds them: ``REQUEST_TIMEOUT``, then a 408.
* ``never_reading_streams``: ``GET /v1/tables/{id}/stream?after=0`` of the long table with a 4 KiB
  receive buffer, and never a read.  What bounds them: a response of which the client accepts no
  byte for 30 s is dropped.  (``STREAM_MAX_PER_TABLE`` is raised to ``--streams`` for this run, so
  that one table takes them all: the bound per table is another defence.)
* ``never_reading_ndjson`` (``--ndjson``, 36): ``POST /v1/batch`` as ``application/x-ndjson``, a chunked
  body of ``--ndjson-bytes`` (64 KiB) of ``1`` lines (each answered by a 422 problem about 150 times
  its size) with a 4 KiB receive buffer, and never a read.  What bounds them: the answer is written
  in pieces and nothing more is read while a piece waits, so a job holds a piece, not the answer of
  its lines; then the send timeout, as for the streams.  ``worker_growth_mb`` (every attack's line has
  it) says what the attackers cost the workers' memory.
* ``ndjson_streamer`` (``--streamer-seconds``, 20; not an attacker that is cut off): one client sending
  ``1`` lines as fast as it can for that long and reading its answers; what the probe's requests meet
  meanwhile on the same workers.

Meanwhile a probe (its own process) makes ordinary requests one after another, each on a new
connection: ``POST /v1/hands/ting`` and ``GET /v1/tables/{id}`` of the small table in turn.

An attacker is *cut off* when the server has closed its side of the connection: read from
``/proc/net/tcp`` (the server's socket is neither ``ESTABLISHED`` nor ``CLOSE_WAIT``, or gone),
the one way to see it for a client that never reads.  An attack ends when every attacker is cut
off, or after ``--max-seconds`` (90).  For each attack one JSON line::

    {"attack", "attackers", "connected", "cut_off", "cut_off_s": {min, p50, max} (from each
     attacker's connection), "answers": {first status line or "none": count}, "408s",
     "probe": {"requests", "errors", "p50_ms", "p99_ms", "max_ms"}, "server_errors_logged",
     "worker_growth_mb": the most any worker's resident memory grew over its start}

(the streamer's line: ``{"attack", "seconds", "lines_sent", "results", "probe", "server_errors_logged",
"worker_growth_mb"}``).

``server_errors_logged`` counts the lines of the service's log with a traceback or at ERROR level
written during the attack.  The figures depend on the machine (the probe and the attackers share
its cores with the service): run it on a quiet one.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import select
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.loopback import (  # noqa: E402
    PLAYERS,
    cycle,
    free_port,
    percentile,
    raise_fd_limit,
    start_service,
    stop_service,
    worker_pids,
)

TING = json.dumps({"hand": {"tiles": "1112345678999m"}}).encode()
HEADER_LINES = b"X-Trickle: 1\r\n" * 10_000
OPEN_STATES = frozenset({"01", "08"})  # ESTABLISHED, CLOSE_WAIT: the server has not closed its side
RCVBUF = 4096
NDJSON_HEAD = (b"POST /v1/batch HTTP/1.1\r\nHost: hostile\r\nContent-Type: application/x-ndjson\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n")


def ndjson_chunk(size: int) -> bytes:
    """A chunk of ``1`` lines (``size`` bytes of them), framed."""
    data = b"1\n" * (size // 2)
    return b"%x\r\n%s\r\n" % (len(data), data)


class Memory:
    """The workers' resident memory, from ``/proc``: each one's at the start and its peak while sampled."""

    def __init__(self, master_pid: int) -> None:
        self.pids = worker_pids(master_pid)
        self.start = {pid: self.rss_kib(pid) for pid in self.pids}
        self.peak = dict(self.start)

    @staticmethod
    def rss_kib(pid: int) -> int:
        try:
            with open(f"/proc/{pid}/status") as f:
                return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            return 0

    def sample(self) -> None:
        for pid in self.pids:
            self.peak[pid] = max(self.peak[pid], self.rss_kib(pid))

    def growth_mb(self) -> float:
        return round(max((self.peak[p] - self.start[p] for p in self.pids), default=0) / 1024, 1)


# -- the probe (its own process) --------------------------------------------------------------------
def probe_process(port: int, table_id: str, read_token: str, stop, conn) -> None:
    import http.client

    latencies: list[float] = []
    errors: dict[str, int] = {}
    requests = [("POST", "/v1/hands/ting", TING, {"Content-Type": "application/json"}),
                ("GET", f"/v1/tables/{table_id}", None, {"Authorization": f"Bearer {read_token}"})]
    n = 0
    while not stop.is_set():
        method, path, body, headers = requests[n % 2]
        n += 1
        started = time.monotonic()
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            client.request(method, path, body=body, headers=headers)
            response = client.getresponse()
            response.read()
            if response.status != 200:
                errors[str(response.status)] = errors.get(str(response.status), 0) + 1
        except (OSError, http.client.HTTPException) as exc:
            errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
        finally:
            client.close()
        latencies.append(time.monotonic() - started)
        time.sleep(0.02)
    conn.send((latencies, errors))


# -- the attackers (this process: plain sockets, so that a stream is never read) ------------------
class Attacker:
    def __init__(self, port: int, first: bytes, trickle: bytes, rcvbuf: int | None = None) -> None:
        self.sock = socket.socket()
        if rcvbuf is not None:  # before connecting: the window the server sees
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(10)
        self.sock.connect(("127.0.0.1", port))
        self.sock.sendall(first)
        self.sock.setblocking(False)
        self.local_port = self.sock.getsockname()[1]
        self.started = time.monotonic()
        self.trickle, self.sent = trickle, 0
        self.cut_at: float | None = None
        self.answer = b""

    def send_one(self) -> None:
        if self.cut_at is None and self.sent < len(self.trickle):
            try:
                self.sock.send(self.trickle[self.sent:self.sent + 1])
                self.sent += 1
            except OSError:  # (closed: /proc says when)
                pass

    def cut(self, now: float, read_answer: bool) -> None:
        self.cut_at = now - self.started
        if read_answer:
            try:
                self.answer = self.sock.recv(200, socket.MSG_DONTWAIT)
            except OSError:
                self.answer = b""

    def close(self) -> None:
        self.sock.close()


def server_sides(port: int) -> dict[int, str]:
    """State (hex, as in ``/proc/net/tcp``) of each of the server's connections, by the client's port."""
    states: dict[int, str] = {}
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if int(fields[1].rsplit(":", 1)[1], 16) == port:
                        states[int(fields[2].rsplit(":", 1)[1], 16)] = fields[3]
        except OSError:
            pass
    return states


def log_errors(log_path: str) -> int:
    try:
        text = Path(log_path).read_text(errors="replace")
    except OSError:
        return 0
    return sum(1 for line in text.splitlines()
               if "Traceback" in line or "[ERROR]" in line or '"level":"ERROR"' in line)


def run_attack(name: str, port: int, count: int, make, args, probe_target: tuple[str, str], log_path: str,
               read_answers: bool, master_pid: int) -> dict:
    memory = Memory(master_pid)
    stop = mp.get_context("fork").Event()
    parent, child = mp.Pipe()
    probe = mp.get_context("fork").Process(target=probe_process, args=(port, *probe_target, stop, child))
    errors_before = log_errors(log_path)
    probe.start()
    attackers: list[Attacker] = []
    failed = 0
    for _ in range(count):
        try:
            attackers.append(make())
        except OSError:
            failed += 1
    started = next_trickle = time.monotonic()
    while True:
        now = time.monotonic()
        if now >= next_trickle:
            for attacker in attackers:
                attacker.send_one()
            next_trickle += args.interval
        states = server_sides(port)
        now = time.monotonic()
        for attacker in attackers:
            if attacker.cut_at is None and states.get(attacker.local_port) not in OPEN_STATES:
                attacker.cut(now, read_answers)
        memory.sample()
        if all(a.cut_at is not None for a in attackers) or now - started > args.max_seconds:
            break
        time.sleep(0.1)
    time.sleep(0.5)  # the probe a moment after the last cut-off
    stop.set()
    latencies, probe_errors = parent.recv()
    probe.join(timeout=30)
    for attacker in attackers:
        attacker.close()
    cut = sorted(a.cut_at for a in attackers if a.cut_at is not None)
    answers: dict[str, int] = {}
    for attacker in attackers:
        if attacker.cut_at is not None and read_answers:
            key = attacker.answer.split(b"\r\n", 1)[0].decode("latin-1") or "none"
            answers[key] = answers.get(key, 0) + 1
    return {
        "attack": name, "attackers": count, "connected": len(attackers), "connect_failures": failed,
        "cut_off": len(cut),
        "cut_off_s": {"min": round(cut[0], 2), "p50": round(percentile(cut, 50), 2), "max": round(cut[-1], 2)}
        if cut else None,
        "answers": answers if read_answers else None,
        "408s": sum(n for line, n in answers.items() if line.split(" ")[1:2] == ["408"]),
        "probe": probe_summary(latencies, probe_errors),
        "server_errors_logged": log_errors(log_path) - errors_before,
        "worker_growth_mb": memory.growth_mb(),
    }


def probe_summary(latencies: list[float], errors: dict) -> dict:
    return {"requests": len(latencies), "errors": errors,
            "p50_ms": round(percentile(latencies, 50) * 1000, 1), "p99_ms": round(percentile(latencies, 99) * 1000, 1),
            "max_ms": round(max(latencies) * 1000, 1) if latencies else None}


def run_streamer(port: int, seconds: float, probe_target: tuple[str, str], log_path: str, master_pid: int) -> dict:
    """One client sending ``1`` lines as fast as it can for ``seconds``, reading its answers; the probe meanwhile."""
    memory = Memory(master_pid)
    stop = mp.get_context("fork").Event()
    parent, child = mp.Pipe()
    probe = mp.get_context("fork").Process(target=probe_process, args=(port, *probe_target, stop, child))
    errors_before = log_errors(log_path)
    probe.start()
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(NDJSON_HEAD)
    sock.setblocking(False)
    chunk = ndjson_chunk(4096)
    sent = results = 0
    pending = b""
    started = time.monotonic()
    next_sample = started
    while (now := time.monotonic()) - started < seconds:
        readable, writable, _ = select.select([sock], [sock], [], 0.1)  # (waits: the client takes no core of its own)
        if writable:
            try:
                n = sock.send(pending or chunk)
                pending = (pending or chunk)[n:]
                if not pending:
                    sent += 2048
            except BlockingIOError:
                pass
        if readable:
            try:
                while data := sock.recv(1 << 20):
                    results += data.count(b'{"status":')
            except BlockingIOError:
                pass
        if now >= next_sample:
            memory.sample()
            next_sample = now + 0.1
    sock.close()
    time.sleep(0.5)
    stop.set()
    latencies, probe_errors = parent.recv()
    probe.join(timeout=30)
    return {"attack": "ndjson_streamer", "seconds": seconds, "lines_sent": sent, "results": results,
            "probe": probe_summary(latencies, probe_errors),
            "server_errors_logged": log_errors(log_path) - errors_before, "worker_growth_mb": memory.growth_mb()}


# -- main -----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--headers", default="50,200,1000", help="header tricklers, one attack per count")
    parser.add_argument("--bodies", type=int, default=200, help="body tricklers (200)")
    parser.add_argument("--streams", type=int, default=200, help="never-reading streams (200)")
    parser.add_argument("--records", type=int, default=20_000, help="records of the streamed table (20,000)")
    parser.add_argument("--ndjson", type=int, default=36, help="never-reading NDJSON jobs (36)")
    parser.add_argument("--ndjson-bytes", type=int, default=65536, help="bytes of 1 lines each job sends (65,536)")
    parser.add_argument("--streamer-seconds", type=float, default=20.0,
                        help="how long the NDJSON line streamer runs (20; 0: not run)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between a trickler's bytes (1)")
    parser.add_argument("--keepalive", type=int, default=5, help="the service's KEEPALIVE (its default, 5)")
    parser.add_argument("--request-timeout", type=int, default=10,
                        help="the service's REQUEST_TIMEOUT (its default, 10)")
    parser.add_argument("--max-seconds", type=float, default=90.0, help="longest an attack lasts (90)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    raise_fd_limit()
    import redis

    from service.store.embedded import EmbeddedRedis
    from service.store.table_store import TableStore

    out = lambda obj: print(json.dumps(obj), flush=True)  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(tmp) as server:
        r = redis.Redis.from_url(server.url)
        store = TableStore(r)
        long_table, small_table = store.create(PLAYERS, "xuezhan"), store.create(PLAYERS, "xuezhan")
        for table, records in ((long_table, args.records), (small_table, 8)):
            events = cycle()
            for _ in range(records):
                store.append(table.id, next(events))
        port, log_path = free_port(), os.path.join(tmp, "serve.log")
        proc = start_service(port, server.url, workers=args.workers, log_path=log_path, extra_env={
            "KEEPALIVE": str(args.keepalive), "REQUEST_TIMEOUT": str(args.request_timeout),
            "STREAM_MAX_PER_TABLE": str(max(32, args.streams))})
        try:
            out({"phase": "setup", "workers": args.workers, "cpus": os.cpu_count(), "keepalive": args.keepalive,
                 "request_timeout": args.request_timeout, "interval": args.interval, "records": args.records})
            probe_target = (small_table.id, small_table.read_token)
            head = b"POST /v1/hands/ting HTTP/1.1\r\nHost: hostile\r\n"
            body_head = head + b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(TING)
            stream = (f"GET /v1/tables/{long_table.id}/stream?after=0 HTTP/1.1\r\nHost: hostile\r\n"
                      f"Accept: text/event-stream\r\nAuthorization: Bearer {long_table.read_token}\r\n\r\n").encode()
            attacks = [*(("header_tricklers", int(n), lambda: Attacker(port, head, HEADER_LINES), True)
                         for n in args.headers.split(",") if n.strip()),
                       ("body_tricklers", args.bodies, lambda: Attacker(port, body_head + TING[:1], TING[1:-1]), True),
                       ("never_reading_streams", args.streams, lambda: Attacker(port, stream, b"", rcvbuf=RCVBUF),
                        False),
                       ("never_reading_ndjson", args.ndjson,
                        lambda: Attacker(port, NDJSON_HEAD + ndjson_chunk(args.ndjson_bytes), b"", rcvbuf=RCVBUF),
                        False)]
            for name, count, make, read_answers in attacks:
                if count > 0:
                    out(run_attack(name, port, count, make, args, probe_target, log_path, read_answers, proc.pid))
            if args.streamer_seconds > 0:
                out(run_streamer(port, args.streamer_seconds, probe_target, log_path, proc.pid))
        finally:
            stop_service(proc)
            r.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
