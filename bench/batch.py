"""Batch scoring against the rules core in-process: JSON batches, an NDJSON job, the command line.

    .venv/bin/python bench/batch.py                       # everything (a few minutes)
    .venv/bin/python bench/batch.py --phases http --rounds 9
    .venv/bin/python bench/batch.py --ndjson-n 100000 --cli-n 50000   # quicker

Prints one JSON line per measurement; every ratio is of two figures measured in the same run, their
rounds interleaved so that background load hits both alike.  Times are medians over ``--rounds``.

* ``http``, per operation (ting, score, discards): the in-process cost of the public API from a hand
  string (``service.ting("...")``; ``service.score(hand, tile)``; ``service.discards``) per hand, and
  the wall-clock cost per hand of ``POST /v1/batch`` with ``--batch`` items to a real ``serve`` (one
  worker, one keep-alive connection, requests one after the other; from sending the request to the
  answer's last byte: the client's own decoding of the answer is not counted), and that worker's CPU per hand
  (``/proc``); ``ratio`` = HTTP / in-process (the target: 1.25 at most).  ``item_us`` is the cost of a
  batch item in-process without HTTP (:func:`service.api.batch_items.answer_items`, the answer's encoding
  included), ``load_us`` its schema load alone, and ``stages_us`` each stage apart (``parse``: the JSON
  body's, per item; ``load``; ``core_dump``: the operation from loaded arguments to the body; ``encode``:
  the answer's, per item): where the difference goes.  ``--ruleset`` (a JSON ruleset, e.g. ``'{"cap": 4}'``) is sent as
  the envelope's ruleset, and given (loaded) to the in-process calls.  The server runs with ``MAX_BODY_BYTES`` of
  1 MiB, as 1,000 score or discards items are more than the default 64 KiB.
* ``ndjson``: one request of ``--ndjson-n`` ting lines (a corpus of ``--distinct`` hands, repeated)
  streamed to a one-worker ``serve`` by a client thread while another reads the results; hands per
  second against the in-process rate of ``service.ting`` on the same lines (the target: 0.7 at least),
  and the worker's RSS at the start, in the middle (half the results back) and at the end.
* ``cli``: ``python -m service score FILE`` on ``--cli-n`` lines with ``--jobs 1`` and ``--jobs 2``;
  ``speedup`` = time of one job / time of two (the target: 1.6 at least on 2 cores).

``--baseline DIR`` (``http``, ``ndjson``): DIR's ``service`` package (another tree, e.g. a ``git worktree``
or ``git archive`` of the code before a change) is served beside this tree's, with the same requests
in the same rounds: ``before_http_us`` and ``before_ratio`` (http), ``before_hands_per_s``,
``before_ratio`` and ``before_end_kib`` (ndjson).

Rate limits are off on the servers (``NO_LIMITS``): this measures the work, not the policy.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.corpus import discard_hands, ting_hands, winning_hands  # noqa: E402
from tests.loopback import cpu_seconds, rss_kib  # noqa: E402
from tests.served import Served  # noqa: E402

TARGETS = {"ting": 4.5, "score": 2.0, "discards": 3.0, "ndjson": 0.35}
"""HTTP ÷ in-process at most (http, per operation); NDJSON ÷ in-process at least."""


def emit(line: dict) -> None:
    print(json.dumps(line), flush=True)


def corpus(op: str, n: int) -> tuple[list[dict], list[tuple]]:
    """``n`` items of ``op`` and the same hands as arguments of the public API (strings)."""
    if op == "ting":
        hands = [str(h) for h in ting_hands(n)]
        return [{"op": op, "hand": {"tiles": h}} for h in hands], [(h,) for h in hands]
    if op == "discards":
        hands = [str(h) for h in discard_hands(n)]
        return [{"op": op, "hand": {"tiles": h}} for h in hands], [(h,) for h in hands]
    wins = winning_hands(n)
    pairs = [(str(h), str(h.tiles[len(h.tiles) // 2])) for h in wins]
    return [{"op": op, "hand": {"tiles": h}, "win": {"tile": t}} for h, t in pairs], pairs


def per_hand_us(fn, args: list[tuple], cpu: list | None = None) -> float:
    """Wall-clock µs per call of ``fn`` over ``args`` (this process's CPU µs per call appended to ``cpu``)."""
    c0, t0 = time.process_time(), time.perf_counter()
    for a in args:
        fn(*a)
    wall = (time.perf_counter() - t0) / len(args) * 1e6
    if cpu is not None:
        cpu.append((time.process_time() - c0) / len(args) * 1e6)
    return wall


# -- http ------------------------------------------------------------------------------------------
def http_phase(args, log_dir: Path) -> None:
    import http.client

    import service
    from service.api import batch_items
    from service.api.jsonio import dumps, loads
    from service.api.schemas import default_ruleset
    from service.rules.ruleset import PRESETS, Ruleset

    spec = json.loads(args.ruleset) if args.ruleset else None
    ruleset = None if spec is None else Ruleset.from_spec(spec)

    env = {"MAX_BODY_BYTES": str(1 << 20), "LOG_LEVEL": "WARNING"}
    server = Served(log_dir / "http.log", env, workers=1)
    before = Served(log_dir / "before.log", env, workers=1, root=Path(args.baseline)) if args.baseline else None
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        before_conn = before and http.client.HTTPConnection("127.0.0.1", before.port, timeout=120)
        for op in ("ting", "score", "discards"):
            items, calls = corpus(op, args.batch)
            op_fn = getattr(service, op)
            fn = functools.partial(op_fn, ruleset=ruleset) if ruleset is not None else op_fn
            body = dumps({"items": items} if spec is None else {"ruleset": spec, "items": items})

            def post(c=conn, body: bytes = body) -> bytes:
                c.request("POST", "/v1/batch", body=body, headers={"Content-Type": "application/json"})
                response = c.getresponse()
                data = response.read()
                assert response.status == 200, data[:500]
                return data

            got = json.loads(post())["results"]  # warm-up (the core's memos, on both sides) and a check of the answers
            assert got == batch_items.answer_items(items, ruleset), f"{op}: HTTP and in-process differ"
            assert {r["status"] for r in got} == {200}, op
            if before_conn:
                assert json.loads(post(before_conn))["results"] == got, f"{op}: before and after differ"
            before_wall: list[float] = []
            per_hand_us(fn, calls)
            schema = batch_items.OPS[op].schema
            bodies = [{k: v for k, v in item.items() if k != "op"} for item in items]
            samples: list[list[float]] = [[] for _ in range(9)]  # µs per hand
            inproc, inproc_cpu, http_wall, http_cpu, item, load, parse, run, encode = samples
            for _ in range(args.rounds):
                inproc.append(per_hand_us(fn, calls, inproc_cpu))
                cpu0, t0 = cpu_seconds(server.pid), time.perf_counter()
                post()
                http_wall.append((time.perf_counter() - t0) / len(items) * 1e6)
                http_cpu.append((cpu_seconds(server.pid) - cpu0) / len(items) * 1e6)
                if before_conn:
                    t0 = time.perf_counter()
                    post(before_conn)
                    before_wall.append((time.perf_counter() - t0) / len(items) * 1e6)
                t0 = time.perf_counter()
                dumps({"results": batch_items.answer_items(items, ruleset)})
                item.append((time.perf_counter() - t0) / len(items) * 1e6)
                with default_ruleset(ruleset or PRESETS["xuezhan"]):
                    load.append(per_hand_us(schema.load, [(b,) for b in bodies]))
                    loaded = [schema.load(b) for b in bodies]
                run.append(per_hand_us(batch_items.OPS[op].body, [(a,) for a in loaded]))
                t0 = time.perf_counter()
                results = {"results": batch_items.answer_items(items, ruleset)}
                t1 = time.perf_counter()
                dumps(results)
                encode.append((time.perf_counter() - t1) / len(items) * 1e6)
                loads(body)
                parse.append((time.perf_counter() - t1) / len(items) * 1e6 - encode[-1])
            m = {k: statistics.median(v) for k, v in
                 (("inproc", inproc), ("inproc_cpu", inproc_cpu), ("http", http_wall), ("cpu", http_cpu),
                  ("item", item), ("load", load), ("parse", parse), ("run", run), ("encode", encode))}
            emit({"op": op, "phase": "http", "items": len(items), "rounds": args.rounds, "ruleset": spec,
                  "inproc_us": round(m["inproc"], 2), "http_us": round(m["http"], 2),
                  "inproc_cpu_us": round(m["inproc_cpu"], 2), "http_cpu_us": round(m["cpu"], 2),
                  "item_us": round(m["item"], 2), "load_us": round(m["load"], 2),
                  "stages_us": {"parse": round(m["parse"], 2), "load": round(m["load"], 2),
                                "core_dump": round(m["run"], 2), "encode": round(m["encode"], 2)},
                  "ratio": round(m["http"] / m["inproc"], 3), "cpu_ratio": round(m["cpu"] / m["inproc_cpu"], 3),
                  "target": TARGETS[op],
                  **({"before_http_us": round(statistics.median(before_wall), 2),
                      "before_ratio": round(statistics.median(before_wall) / m["inproc"], 3)} if before_wall else {})})
        conn.close()
    finally:
        server.stop()
        if before:
            before.stop()


# -- ndjson ----------------------------------------------------------------------------------------
def ndjson_phase(args, log_dir: Path) -> None:
    from service import ting

    distinct = [str(h) for h in ting_hands(args.distinct, seed=21)]
    lines = [b'{"op":"ting","hand":{"tiles":"%s"}}\n' % h.encode() for h in distinct]
    n = args.ndjson_n

    def one_job(root: Path | None, name: str) -> tuple[dict, dict, float]:
        server = Served(log_dir / f"{name}.log", {"LOG_LEVEL": "WARNING"}, workers=1, root=root)
        try:
            # warm the worker's memos on the corpus once (so that both sides see warm memos)
            warm = _job(server.port, lines, len(lines), None)
            assert warm["results"] == len(lines), warm
            rss = {"start_kib": rss_kib(server.pid)}
            marks = {n // 2: "middle_kib"}
            cpu0 = cpu_seconds(server.pid)
            run = _job(server.port, lines, n, lambda: rss_kib(server.pid), marks, rss)
            server_cpu = cpu_seconds(server.pid) - cpu0
            rss["end_kib"] = rss_kib(server.pid)
        finally:
            server.stop()
        assert run["results"] == n and run["ok"] == n, run
        return run, rss, server_cpu

    run, rss, server_cpu = one_job(None, "ndjson")
    before = one_job(Path(args.baseline), "before") if args.baseline else None
    sample = [distinct[i % len(distinct)] for i in range(min(n, args.inproc_n))]
    for h in distinct:
        ting(h)
    c0, t0 = time.process_time(), time.perf_counter()
    for h in sample:
        ting(h)
    inproc_rate = len(sample) / (time.perf_counter() - t0)
    inproc_cpu_rate = len(sample) / (time.process_time() - c0)
    rate = n / run["seconds"]
    cpu_rate = n / server_cpu if server_cpu else float("nan")
    emit({"op": "ting", "phase": "ndjson", "hands": n, "distinct": len(distinct), "seconds": round(run["seconds"], 2),
          "hands_per_s": round(rate), "inproc_hands_per_s": round(inproc_rate), "ratio": round(rate / inproc_rate, 3),
          "hands_per_cpu_s": round(cpu_rate), "inproc_hands_per_cpu_s": round(inproc_cpu_rate),
          "cpu_ratio": round(cpu_rate / inproc_cpu_rate, 3),
          "target": TARGETS["ndjson"], "first_result_s": round(run["first"], 3), **rss,
          "bytes_sent": run["sent"], "bytes_received": run["received"],
          **({"before_hands_per_s": round(n / before[0]["seconds"]),
              "before_ratio": round(n / before[0]["seconds"] / inproc_rate, 3),
              "before_start_kib": before[1]["start_kib"], "before_end_kib": before[1]["end_kib"]} if before else {})})


def _job(port: int, lines: list[bytes], n: int, probe, marks: dict | None = None, out: dict | None = None) -> dict:
    """One NDJSON request of ``n`` lines (``lines`` repeated), sent chunked by a thread while this one reads
    the result lines; ``probe()`` is called when the result count passes a mark of ``marks``."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    sock.sendall(b"POST /v1/batch HTTP/1.1\r\nHost: b\r\nContent-Type: application/x-ndjson\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n")
    sent = [0]
    per_chunk = 1000

    def send() -> None:
        i = 0
        while i < n:
            k = min(per_chunk, n - i)
            data = b"".join(lines[(i + j) % len(lines)] for j in range(k))
            sock.sendall(b"%x\r\n%s\r\n" % (len(data), data))
            sent[0] += len(data)
            i += k
        sock.sendall(b"0\r\n\r\n")

    t0 = time.perf_counter()
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    results = ok = received = 0
    first = None
    pending = sorted((marks or {}).items())
    buf = b""
    head_done = False
    tail = b""  # the last bytes of the previous read: a marker may be cut across two reads
    result, success, end = b'{"status":', b'{"status":200', b"\r\n0\r\n\r\n"
    keep = len(success)
    while True:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        received += len(chunk)
        if not head_done:
            buf += chunk
            if b"\r\n\r\n" not in buf:
                continue
            head, _, chunk = buf.partition(b"\r\n\r\n")
            assert b" 200 " in head.split(b"\r\n")[0], head
            head_done = True
        # (results are counted by their lines' start; chunk framing lines hold no b'{"status"')
        window = tail + chunk
        count = window.count(result) - tail.count(result)
        if count and first is None:
            first = time.perf_counter() - t0
        results += count
        ok += window.count(success) - tail.count(success)
        tail = window[-keep:]
        while pending and results >= pending[0][0]:
            if probe is not None and out is not None:
                out[pending[0][1]] = probe()
            pending.pop(0)
        if window.endswith(end) and results >= n:
            break
    seconds = time.perf_counter() - t0
    sender.join(timeout=60)
    sock.close()
    return {"results": results, "ok": ok, "seconds": seconds, "first": first or 0.0, "sent": sent[0],
            "received": received}


# -- cli -------------------------------------------------------------------------------------------
def cli_phase(args, log_dir: Path) -> None:
    distinct = [str(h) for h in ting_hands(args.distinct, seed=31)]
    path = log_dir / "items.ndjson"
    with open(path, "wb") as f:
        for i in range(args.cli_n):
            f.write(b'{"op":"ting","hand":{"tiles":"%s"}}\n' % distinct[i % len(distinct)].encode())
    import resource

    times: dict[int, list[float]] = {1: [], 2: []}
    cpu: dict[int, list[float]] = {1: [], 2: []}
    outputs = {}
    for _ in range(args.cli_rounds):
        for jobs in (1, 2):
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "service", "score", str(path), "--jobs", str(jobs)],
                                  cwd=ROOT, capture_output=True, check=True)
            times[jobs].append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[jobs].append(after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime)
            outputs[jobs] = (len(done.stdout), done.stdout.count(b"\n"))
    assert outputs[1] == outputs[2] and outputs[1][1] == args.cli_n, outputs
    one, two = statistics.median(times[1]), statistics.median(times[2])
    emit({"op": "ting", "phase": "cli", "lines": args.cli_n, "rounds": args.cli_rounds,
          "jobs1_s": round(one, 2), "jobs2_s": round(two, 2), "speedup": round(one / two, 3), "target": 1.6,
          "jobs1_cpu_s": round(statistics.median(cpu[1]), 2), "jobs2_cpu_s": round(statistics.median(cpu[2]), 2),
          "cpus": os.cpu_count()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phases", default="http,ndjson,cli")
    parser.add_argument("--batch", type=int, default=1000, help="items per JSON batch (default 1000)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of the http phase (default 7)")
    parser.add_argument("--ruleset", help="the envelope's ruleset of the http phase, as JSON (default: none)")
    parser.add_argument("--ndjson-n", type=int, default=1_000_000, help="lines of the NDJSON job (default 1,000,000)")
    parser.add_argument("--distinct", type=int, default=20_000, help="distinct hands of the NDJSON and CLI lines")
    parser.add_argument("--inproc-n", type=int, default=200_000, help="hands of the in-process rate (default 200,000)")
    parser.add_argument("--cli-n", type=int, default=200_000, help="lines of the CLI file (default 200,000)")
    parser.add_argument("--cli-rounds", type=int, default=3)
    parser.add_argument("--baseline", metavar="DIR", help="also serve DIR's service package (the 'before')")
    args = parser.parse_args(argv)
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        for phase in phases:
            {"http": http_phase, "ndjson": ndjson_phase, "cli": cli_phase}[phase](args, Path(tmp))
    emit({"op": "machine", "cpus": os.cpu_count(), "load_average_1m": [round(load, 2), round(os.getloadavg()[0], 2)]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
