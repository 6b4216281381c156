"""Which serving model? gthread vs gevent vs uvicorn (ASGI + WSGI bridge), measured in one run.

For each model the service (``python -m service serve``'s app, settings and
worker options, only the worker class swapped) and the bare WSGI app of
``bench/load_ting.py`` are started under gunicorn with ``--workers`` workers;
then, one model at a time:

* **ting load**: ``POST /v1/hands/ting`` on ``--connections`` keep-alive
  connections, in alternating rounds over every server of the run (so drifting
  background load hits all alike): requests/s, p50/p99, the ratio
  service/bare under the same model, and the workers' CPU time per request
  (user + system, from ``/proc``: unlike requests/s it does not depend on the
  share of the CPUs the workers got from other processes on the machine);
* **slow clients**: ``--slow`` connections held against the service for
  ``--slow-duration`` s (a third idle, a third trickling header lines, a third
  trickling a body, one byte a second each; a connection the server closes is
  reopened), while a probe sends a fresh-connection ting request every 0.2 s:
  probe latency (max) and failures, and how the server ended the slow
  connections (408 answers, silent closes);
* **memory per idle connection**: worker RSS before/after ``--idle`` connected
  sockets that send nothing, divided by their number;
* **held responses** (what an SSE stream is to a server: a response that stays
  open): ``--held`` requests to a bare endpoint that answers after 15 s (a
  sleep of the model's kind: a gevent sleep, a thread sleep, a native asyncio
  sleep for uvicorn), memory per held response and a probe's latency while they
  are open.

The three models:

``gthread``  gunicorn ``gthread`` (today's ``ProblemThreadWorker``, kept here as
             the baseline): ``--threads`` threads per worker;
``gevent``   :class:`service.serving.ServiceWorker` (gunicorn's gevent worker,
             monkey-patched, with per-request deadlines and buffered bodies);
``uvicorn``  ``uvicorn_worker.UvicornWorker`` (uvloop + httptools), the WSGI
             app behind ``a2wsgi`` (``--threads`` threads) with a shim that
             buffers the whole body (and answers 408 after REQUEST_TIMEOUT)
             before a thread sees it; held responses are native asyncio.

Needs, beyond the service's dependencies, ``pip install uvicorn uvicorn-worker
a2wsgi uvloop httptools`` (the uvicorn model is skipped without them).
Loopback only, bounded (about 4 minutes with the defaults)::

    .venv/bin/python bench/serving_models.py
    .venv/bin/python bench/serving_models.py --duration 4 --slow-duration 10 --models gthread,gevent
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.client import cpu_seconds, raise_fd_limit, rss_kib  # noqa: E402
from bench.load_ting import HANDS, bare_app, drive, free_port, one_request, request_bytes, summarize  # noqa: E402

MODELS = ("gthread", "gevent", "uvicorn")
HOLD_SECONDS = 15.0


# -- the models, as gunicorn option overrides ------------------------------------------------
def _gthread_worker():
    import time as _time

    from gunicorn import util as gunicorn_util
    from gunicorn.workers.gthread import ThreadWorker

    from service.serving import write_problem

    class GthreadBaseline(ThreadWorker):
        """The service's worker before this comparison (gthread, problem+json, accept balancing)."""

        def init_process(self) -> None:
            gunicorn_util.write_error = write_problem
            super().init_process()

        def accept(self, listener) -> None:
            extra = self.nr_conns - self.cfg.threads
            if extra >= 0:
                _time.sleep(min(0.005, 0.0005 * (extra + 1)))
            super().accept(listener)

    return GthreadBaseline


class BufferedASGI:
    """ASGI → WSGI through a2wsgi, the whole request body read (under a deadline) first."""

    def __init__(self, wsgi_app, threads: int, request_timeout: float, max_body: int) -> None:
        from a2wsgi import WSGIMiddleware

        self.bridge = WSGIMiddleware(wsgi_app, workers=threads)
        self.request_timeout, self.max_body = request_timeout, max_body

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.bridge(scope, receive, send)
        if scope["path"] == "/hold":  # what a native ASGI stream would do
            await asyncio.sleep(HOLD_SECONDS)
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/plain"), (b"content-length", b"2")]})
            await send({"type": "http.response.body", "body": b"ok"})
            return
        body = bytearray()
        try:
            async with asyncio.timeout(self.request_timeout):
                more = True
                while more and len(body) <= self.max_body:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return
                    body += message.get("body", b"")
                    more = message.get("more_body", False)
        except TimeoutError:
            problem = json.dumps({"status": 408, "title": "Request Timeout", "code": "request_timeout"}).encode()
            await send({"type": "http.response.start", "status": 408,
                        "headers": [(b"content-type", b"application/problem+json"), (b"connection", b"close"),
                                    (b"content-length", str(len(problem)).encode())]})
            await send({"type": "http.response.body", "body": problem})
            return
        done = False

        async def replay():
            nonlocal done
            if not done:
                done = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.bridge(scope, replay, send)


def _uvicorn_worker(threads: int, request_timeout: float, max_body: int):
    from uvicorn_worker import UvicornWorker

    class BufferedUvicornWorker(UvicornWorker):
        def load_wsgi(self) -> None:
            super().load_wsgi()
            self.wsgi = BufferedASGI(self.wsgi, threads, request_timeout, max_body)

    return BufferedUvicornWorker


def overrides(model: str, settings) -> dict:
    if model == "gthread":
        return {"worker_class": _gthread_worker()}
    if model == "uvicorn":
        return {"worker_class": _uvicorn_worker(settings.threads, settings.request_timeout,
                                                settings.max_body_bytes)}
    return {}  # gevent: the service's own default


def bare_with_hold(environ, start_response):
    """The bare ting app plus ``/hold``: a response that takes 15 s (a sleep of the model's kind)."""
    if environ.get("PATH_INFO") == "/hold":
        time.sleep(HOLD_SECONDS)  # under gevent, patched: a greenlet sleep
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
        return [b"ok"]
    return bare_app(environ, start_response)


def serve(target: str, model: str, port: int, workers: int, threads: int) -> int:
    from service import __main__ as cli
    from service import serving
    from service.config import load_settings

    settings = load_settings().with_overrides(host="127.0.0.1", port=port, workers=workers, threads=threads)
    extra = overrides(model, settings)
    if target == "flask":
        return cli.serve(settings, **extra)
    serving.run(lambda: bare_with_hold, settings, **extra)
    return 0


# -- processes ------------------------------------------------------------------------------------
def start(target: str, model: str, port: int, args, redis_url: str) -> subprocess.Popen:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--serve", target, "--model", model,
           "--port", str(port), "--workers", str(args.workers), "--threads", str(args.threads)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LOG_LEVEL": args.log_level, "REDIS_URL": redis_url,
           "TABLES_PER_HOUR": "0"}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{model}/{target} exited with {proc.returncode}")
        try:
            if asyncio.run(one_request(port, request_bytes(0)))[0] == 200:
                return proc
        except OSError:
            time.sleep(0.2)
    stop(proc)
    raise RuntimeError(f"{model}/{target} did not start")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()








# -- slow clients ---------------------------------------------------------------------------------
async def _status_of(reader: asyncio.StreamReader) -> str:
    """How the server ended a slow connection: its status code, or 'closed' (EOF, no answer)."""
    try:
        line = await reader.readline()
    except (OSError, asyncio.IncompleteReadError):
        return "reset"
    if not line:
        return "closed"
    parts = line.split()
    return parts[1].decode() if len(parts) > 1 else "garbage"


async def slow_clients(port: int, count: int, duration: float) -> dict:
    outcomes: Counter = Counter()
    stop_at = time.monotonic() + duration
    body = json.dumps({"hand": {"tiles": HANDS[0]}}).encode()

    async def one(kind: str) -> None:
        while time.monotonic() < stop_at:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                outcomes["connect_failed"] += 1
                await asyncio.sleep(0.5)
                continue
            ended = asyncio.ensure_future(_status_of(reader))
            try:
                if kind == "head":
                    writer.write(b"POST /v1/hands/ting HTTP/1.1\r\nHost: x\r\n")
                elif kind == "body":
                    writer.write(b"POST /v1/hands/ting HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: %d\r\n\r\n" % len(body))
                sent = 0
                while not ended.done() and time.monotonic() < stop_at:
                    await asyncio.wait([ended], timeout=1.0)
                    if ended.done():
                        break
                    if kind == "head":
                        writer.write(b"X-Slow: 1\r\n")
                    elif kind == "body" and sent < len(body) - 1:
                        writer.write(body[sent:sent + 1])
                        sent += 1
                if ended.done():
                    outcomes[f"{kind}:{ended.result()}"] += 1
                else:
                    outcomes[f"{kind}:open_at_end"] += 1
            except OSError:
                outcomes[f"{kind}:reset"] += 1
            finally:
                ended.cancel()
                writer.close()

    latencies: list[float] = []
    failures = 0

    async def probe() -> None:
        nonlocal failures
        await asyncio.sleep(1.0)  # let the slow connections settle in
        while time.monotonic() < stop_at:
            t0 = time.perf_counter()
            try:
                status, _ = await asyncio.wait_for(one_request(port, request_bytes(1)), 5.0)
                if status == 200:
                    latencies.append(time.perf_counter() - t0)
                else:
                    failures += 1
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
                failures += 1
            await asyncio.sleep(0.2)

    kinds = ["idle", "head", "body"]
    await asyncio.gather(probe(), *(one(kinds[i % 3]) for i in range(count)))
    latencies.sort()
    return {
        "slow_connections": count, "seconds": duration, "probes": len(latencies) + failures,
        "probe_failures": failures,
        "probe_p50_ms": round(latencies[len(latencies) // 2] * 1000, 1) if latencies else None,
        "probe_max_ms": round(latencies[-1] * 1000, 1) if latencies else None,
        "slow_outcomes": dict(sorted(outcomes.items())),
    }


# -- memory ---------------------------------------------------------------------------------------
async def idle_memory(port: int, master: int, count: int) -> dict:
    before = rss_kib(master)
    conns = []
    for _ in range(count):
        conns.append(await asyncio.open_connection("127.0.0.1", port))
    await asyncio.sleep(2.0)
    after = rss_kib(master)
    for _, writer in conns:
        writer.close()
    return {"idle_connections": count, "rss_before_kib": before, "rss_after_kib": after,
            "kib_per_idle_connection": round((after - before) / count, 2)}


async def held_memory(port: int, master: int, count: int) -> dict:
    """``count`` open /hold responses: memory per held response, and a probe while they are open."""
    before = rss_kib(master)
    writers = []
    for _ in range(count):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
        writers.append(writer)
    await asyncio.sleep(2.0)
    after = rss_kib(master)
    t0 = time.perf_counter()
    try:
        status, _ = await asyncio.wait_for(one_request(port, request_bytes(2)), HOLD_SECONDS)
        probe = round((time.perf_counter() - t0) * 1000, 1) if status == 200 else f"status {status}"
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
        probe = f"failed: {type(exc).__name__}"
    for writer in writers:
        writer.close()
    return {"held_responses": count, "kib_per_held_response": round((after - before) / count, 2),
            "probe_ms_while_held": probe}


# -- main -----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--duration", type=float, default=10.0, help="measured ting seconds per server (10)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--slow", type=int, default=200)
    parser.add_argument("--slow-duration", type=float, default=30.0)
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--held", type=int, default=500)
    parser.add_argument("--measures", default="ting,slow,idle,held", help="which measures (default: all)")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--serve", choices=("flask", "bare"), help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    raise_fd_limit()
    if args.serve:
        return serve(args.serve, args.model, args.port, args.workers, args.threads)

    models = [m for m in args.models.split(",") if m]
    if "uvicorn" in models:
        try:
            import a2wsgi, uvicorn_worker  # noqa: F401,E401
        except ImportError:
            print(json.dumps({"model": "uvicorn", "skipped": "pip install uvicorn uvicorn-worker a2wsgi"}))
            models.remove("uvicorn")
    from service.store.embedded import EmbeddedRedis
    import tempfile

    common = {"workers": args.workers, "threads": args.threads, "cpus": os.cpu_count()}
    procs: dict = {}
    with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(tmp) as redis_server:
        try:
            ports = {(m, t): free_port() for m in models for t in ("flask", "bare")}
            for (m, t), port in ports.items():
                procs[(m, t)] = start(t, m, port, args, redis_server.url)
            measures = set(args.measures.split(","))
            collected = {key: ([], 0) for key in ports}
            cpu = {key: [0.0, 0] for key in ports}  # worker CPU seconds, requests (warm-up included)
            for _ in range(args.rounds if "ting" in measures else 0):
                for key, port in ports.items():
                    totals: dict = {}
                    before = cpu_seconds(procs[key].pid)
                    lat, err = asyncio.run(drive(port, args.connections, args.warmup, args.duration / args.rounds,
                                                 totals))
                    cpu[key][0] += cpu_seconds(procs[key].pid) - before
                    cpu[key][1] += totals.get("requests", 0)
                    collected[key] = (collected[key][0] + lat, collected[key][1] + err)
            ting = {key: summarize(*collected[key], args.duration) for key in ports}
            for key in ting:  # what a request costs the server, whatever else ran on the machine
                ting[key]["cpu_us_per_request"] = round(cpu[key][0] / cpu[key][1] * 1e6, 1) if cpu[key][1] else None
            for m in models if "ting" in measures else ():
                flask, bare = ting[(m, "flask")], ting[(m, "bare")]
                print(json.dumps({"model": m, "measure": "ting", "connections": args.connections, **common,
                                  "service": flask, "bare": bare,
                                  "ratio_rps": round(flask["rps"] / bare["rps"], 3) if bare["rps"] else None}),
                      flush=True)
            for m in models:
                if "slow" in measures:
                    slow = asyncio.run(slow_clients(ports[(m, "flask")], args.slow, args.slow_duration))
                    print(json.dumps({"model": m, "measure": "slow_clients", **slow}), flush=True)
                    time.sleep(1)
                if "idle" in measures:
                    idle = asyncio.run(idle_memory(ports[(m, "flask")], procs[(m, "flask")].pid, args.idle))
                    print(json.dumps({"model": m, "measure": "idle_memory", **idle}), flush=True)
                    time.sleep(1)
                if "held" in measures:
                    held = asyncio.run(held_memory(ports[(m, "bare")], procs[(m, "bare")].pid, args.held))
                    print(json.dumps({"model": m, "measure": "held_responses", **held}), flush=True)
        finally:
            for proc in procs.values():
                stop(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
