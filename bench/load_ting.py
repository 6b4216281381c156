"""Load test of ``POST /v1/hands/ting``: the service against a bare WSGI app.

Spawns, one after the other, on free loopback ports and with the same gunicorn
settings (``serve``'s gevent workers, ``--workers``):

* ``flask``: ``python -m service serve`` (Flask, marshmallow, problem+json,
  request ids, access log, metrics: the real service);
* ``bare``: a WSGI function doing only ``json`` + :func:`service.ting` and the
  same response body (``python bench/load_ting.py --serve-bare``);

checks that both give the same answers, then drives each with
``--connections`` keep-alive connections (asyncio, raw sockets) for
``--duration`` measured seconds in total, in ``--rounds`` alternating rounds
(each after a short warm-up) so that background load hits both alike, and
prints one JSON line per target (requests/s, latency p50/p90/p99 in ms,
errors, and the workers' CPU time per request: user + system from ``/proc``,
warm-ups included, which unlike requests/s does not depend on the share of the
cores other processes left the workers) and one with the ratios and the load
average.  Loopback only; needs nothing beyond the service's own dependencies::

    .venv/bin/python bench/load_ting.py                # 32 connections, 10 s per target
    .venv/bin/python bench/load_ting.py --duration 3   # quicker

``--baseline DIR`` adds ``before``: DIR's ``service`` package (another tree, e.g.
a ``git worktree`` of an earlier commit) served the same way, in the same
alternation, so that a change's before and after come from one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.store.embedded import free_port  # noqa: E402
from tests.loopback import cpu_seconds  # noqa: E402

PATH = "/v1/hands/ting"
HANDS = [  # 13-size hands, most of them ting, a mix of wait counts
    "1112345678999m",
    "2344567p345789s",
    "1112223334445m",
    "123345m999p66p22p",
    "1133557799s224p",
    "2345678m234p789p",
    "1112223334567s",
    "123456789p1122m",
]


# -- the bare WSGI app ------------------------------------------------------------
def _pattern(p) -> dict:
    return p.as_dict()


def bare_app(environ, start_response):
    """json in, service.ting, json out: no framework, no validation layer."""
    from service import parse_hand, ting

    if environ.get("PATH_INFO") != PATH or environ.get("REQUEST_METHOD") != "POST":
        start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", "0")])
        return [b""]
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        data = json.loads(environ["wsgi.input"].read(length))
        hand = data["hand"]
        result = ting(
            parse_hand(hand["tiles"], hand.get("melds", ()), hand.get("void")),
            ruleset=data.get("ruleset"), visible=data.get("visible"),
        )
    except Exception as exc:  # noqa: BLE001 - a benchmark stub, not the service
        body = json.dumps({"error": str(exc)}).encode()
        start_response("422 Unprocessable Entity", [("Content-Type", "application/json"),
                                                    ("Content-Length", str(len(body)))])
        return [body]
    out = {
        "ting": result.ting,
        "huazhu": result.huazhu,
        "waits": [
            {"tile": str(w.tile), "fan": w.fan, "points": w.points,
             "patterns": [_pattern(p) for p in w.patterns], "remaining": w.remaining}
            for w in result.waits
        ],
        "dajiao": None if result.dajiao is None else {"fan": result.dajiao.fan, "points": result.dajiao.points},
    }
    body = json.dumps(out, ensure_ascii=False, separators=(",", ":")).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def serve_bare(port: int, workers: int) -> None:
    sys.path.insert(0, str(ROOT))
    from service.config import load_settings
    from service.serving import run

    settings = load_settings().with_overrides(host="127.0.0.1", port=port, workers=workers)
    run(lambda: bare_app, settings)


# -- servers ----------------------------------------------------------------------
def start(target: str, port: int, workers: int, log_level: str, baseline: str | None = None) -> subprocess.Popen:
    """Start ``flask`` (this tree's service), ``bare``, or ``before`` (``baseline``'s service)."""
    common = ["--port", str(port), "--workers", str(workers)]
    root = ROOT
    if target == "before":
        if baseline is None:
            raise ValueError("the target 'before' needs a baseline tree")
        root = Path(baseline)
    if target in ("flask", "before"):
        cmd = [sys.executable, "-m", "service", "serve", "--host", "127.0.0.1", *common]
    else:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--serve-bare", *common]
    env = {**os.environ, "LOG_LEVEL": log_level, "PYTHONPATH": str(root)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{target} server exited with {proc.returncode}")
        try:
            status, _ = asyncio.run(one_request(port, request_bytes(0)))
            if status == 200:
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{target} server did not start")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# -- the load generator ------------------------------------------------------------
def request_bytes(i: int) -> bytes:
    body = json.dumps({"hand": {"tiles": HANDS[i % len(HANDS)]}}).encode()
    head = (
        f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: keep-alive\r\n\r\n"
    ).encode()
    return head + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            length = int(value.strip())
    body = await reader.readexactly(length) if length else b""
    return status, body


async def one_request(port: int, raw: bytes) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        return await read_response(reader)
    finally:
        writer.close()


async def drive(port: int, connections: int, warmup: float, duration: float,
                totals: dict | None = None) -> tuple[list[float], int]:
    """Measured latencies and errors; ``totals["requests"]`` (if given) also counts the warm-up's."""
    requests = [request_bytes(i) for i in range(len(HANDS))]
    latencies: list[float] = []
    errors = 0
    start = time.perf_counter()
    measure_from = start + warmup
    stop_at = measure_from + duration

    async def client(n: int) -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        i = n
        try:
            while True:
                t0 = time.perf_counter()
                if t0 >= stop_at:
                    return
                writer.write(requests[i % len(requests)])
                i += 1
                await writer.drain()
                status, _ = await read_response(reader)
                t1 = time.perf_counter()
                if totals is not None:
                    totals["requests"] = totals.get("requests", 0) + 1
                if t0 >= measure_from:
                    if status == 200:
                        latencies.append(t1 - t0)
                    else:
                        errors += 1
        except (OSError, asyncio.IncompleteReadError):
            errors += 1
        finally:
            writer.close()

    await asyncio.gather(*(client(n) for n in range(connections)))
    return latencies, errors


def summarize(latencies: list[float], errors: int, duration: float) -> dict:
    latencies = sorted(latencies)

    def pct(p: float) -> float:
        if not latencies:
            return float("nan")
        return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000, 3)

    return {
        "requests": len(latencies),
        "errors": errors,
        "rps": round(len(latencies) / duration, 1),
        "p50_ms": pct(0.50),
        "p90_ms": pct(0.90),
        "p99_ms": pct(0.99),
        "max_ms": round(latencies[-1] * 1000, 3) if latencies else None,
    }


def check_same_answers(flask_port: int, bare_port: int) -> None:
    for i in range(len(HANDS)):
        a = json.loads(asyncio.run(one_request(flask_port, request_bytes(i)))[1])
        b = json.loads(asyncio.run(one_request(bare_port, request_bytes(i)))[1])
        if a != b:
            raise SystemExit(f"the two servers disagree on {HANDS[i]}: {a} != {b}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=10.0, help="measured seconds per target (default 10)")
    parser.add_argument("--warmup", type=float, default=0.5, help="unmeasured seconds before each round (default 0.5)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per target (default 5)")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--log-level", default="INFO", help="service LOG_LEVEL (INFO: one access line per request)")
    parser.add_argument("--baseline", metavar="DIR", help="also serve DIR's service package (the 'before') in the "
                                                          "same alternation")
    parser.add_argument("--serve-bare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_bare:
        serve_bare(args.port, args.workers)
        return 0

    common = {"connections": args.connections, "workers": args.workers,
              "duration_s": args.duration, "cpus": os.cpu_count()}
    targets = ("flask", "bare", "before") if args.baseline else ("flask", "bare")
    ports = {t: free_port() for t in targets}
    procs = {}
    results = {}
    try:
        for target in targets:
            procs[target] = start(target, ports[target], args.workers, args.log_level, args.baseline)
        check_same_answers(ports["flask"], ports["bare"])
        # One target at a time (they share the machine), alternating in short
        # rounds so that drifting background load affects both alike.
        collected: dict[str, tuple[list[float], int]] = {t: ([], 0) for t in ports}  # latencies, errors
        cpu = {t: [0.0, 0] for t in ports}  # worker CPU seconds, requests (warm-ups included)
        load_before = os.getloadavg()[0]
        for _ in range(args.rounds):
            for target in targets:
                totals: dict = {}
                before = cpu_seconds(procs[target].pid)
                lat, err = asyncio.run(
                    drive(ports[target], args.connections, args.warmup, args.duration / args.rounds, totals)
                )
                cpu[target][0] += cpu_seconds(procs[target].pid) - before
                cpu[target][1] += totals.get("requests", 0)
                collected[target] = (collected[target][0] + lat, collected[target][1] + err)
        for target in targets:
            stats = summarize(*collected[target], args.duration)
            stats["cpu_us_per_request"] = round(cpu[target][0] / cpu[target][1] * 1e6, 1) if cpu[target][1] else None
            results[target] = stats
            print(json.dumps({"target": target, **common, "rounds": args.rounds, **stats}), flush=True)
    finally:
        for proc in procs.values():
            stop(proc)
    flask, bare = results["flask"], results["bare"]
    print(json.dumps({
        "ratio": "flask/bare",
        "rps": round(flask["rps"] / bare["rps"], 3) if bare["rps"] else None,
        "p50": round(flask["p50_ms"] / bare["p50_ms"], 3) if bare["p50_ms"] else None,
        "p99": round(flask["p99_ms"] / bare["p99_ms"], 3) if bare["p99_ms"] else None,
        "cpu_bare_over_flask": round(bare["cpu_us_per_request"] / flask["cpu_us_per_request"], 3)
        if flask["cpu_us_per_request"] else None,
        "load_average_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        **({"before_rps_over_bare": round(results["before"]["rps"] / bare["rps"], 3) if bare["rps"] else None,
            "before_p99_ms": results["before"]["p99_ms"]} if args.baseline else {}),
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
