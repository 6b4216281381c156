"""In-process cost of ``POST /v1/hands/ting``: the service's WSGI app against the bare app.

No server and no sockets: both WSGI callables are called directly with the
environ a server would build, so what is measured is the application alone
(Flask, the JSON body parser, marshmallow, the core, the response, the
request id, access log and metrics hooks).  The app is built as ``serve``
builds it, in a process monkey-patched by gevent as serve's workers are
(``--no-gevent``: not patched): ``configure_logging("INFO")`` (the JSON access line is formatted and
written, to ``/dev/null``), ``PROMETHEUS_MULTIPROC_DIR`` set (metrics written to
the per-process files, as under gunicorn) and ``REDIS_URL`` pointing at a
private redis-server (so the tables store and its rate limits are installed,
as in ``serve``; the hand endpoints never touch them).

Three apps: ``service`` (as served: the hot path of
:mod:`service.api.hotpath` answers these requests), ``service_flask_path``
(the same with ``HOT_PATH = False``: Flask answers, as it does every request
the hot path leaves to it) and ``bare``.

Prints JSON lines: CPU µs per request of each app (this process's CPU time,
steadier than wall-clock time on a shared machine; the median of ``--rounds``
alternating blocks of ``--requests`` requests, so drifting load hits both
alike) and the ratios; with ``--profile``, a cProfile of ``--requests``
requests through Flask's path: the cumulative µs per request of each component (profiled,
so inflated by the profiler: read them as shares) and the top functions by own
time.  Bounded, loopback only::

    .venv/bin/python bench/http_inprocess.py                  # ~20 s
    .venv/bin/python bench/http_inprocess.py --profile         # + the breakdown
"""

from __future__ import annotations

import sys

if "--no-gevent" not in sys.argv:  # as in serve's workers: before anything else is imported
    from gevent import monkey

    monkey.patch_all()

import argparse
import cProfile
import gc
import io
import json
import logging
import os
import pstats
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.load_ting import HANDS, PATH, bare_app  # noqa: E402

# (label, file suffix, function name): where the per-request time goes.  The
# cumulative time of each is reported; they nest (Flask's dispatch holds the view).
COMPONENTS = (
    ("whole request (Flask.wsgi_app)", "flask/app.py", "wsgi_app"),
    ("request id / start (observe._begin)", "api/observe.py", "_begin"),
    ("  (gevent's locks: acquire)", "gevent/_semaphore.py", "acquire"),
    ("access log, metrics, id header (observe._finish)", "api/observe.py", "_finish"),
    ("  metrics (prometheus inc/observe)", "prometheus_client/metrics.py", "inc"),
    ("  metrics histogram observe", "prometheus_client/metrics.py", "observe"),
    ("  access log (logger.info → handler)", "logging/__init__.py", "_log"),
    ("view with its decorators (full_dispatch → view)", "flask/app.py", "dispatch_request"),
    ("  webargs parse (body read + JSON + schema)", "webargs/core.py", "parse"),
    ("    JSON body decode (parse_json_body)", "api/smorest.py", "parse_json_body"),
    ("    marshmallow load", "marshmallow/schema.py", "load"),
    ("  rules core ting()", "rules/ting.py", "ting"),
    ("  response body (schemas.dump_ting)", "api/schemas.py", "dump_ting"),
    ("  jsonify", "flask/json/__init__.py", "jsonify"),
    ("  flask-smorest response wrapper", "flask_smorest/response.py", "wrapper"),
    ("request context push/pop", "flask/ctx.py", "push"),
    ("request context pop", "flask/ctx.py", "pop"),
    ("finalize_request (make_response + after hooks)", "flask/app.py", "finalize_request"),
    ("Response.__call__ (headers to WSGI)", "werkzeug/wrappers/response.py", "__call__"),
)


def environ_for(i: int) -> tuple[dict, bytes]:
    body = json.dumps({"hand": {"tiles": HANDS[i % len(HANDS)]}}).encode()
    base = {
        "REQUEST_METHOD": "POST", "SCRIPT_NAME": "", "PATH_INFO": PATH, "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1", "REMOTE_PORT": "40000", "RAW_URI": PATH,
        "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body)),
        "HTTP_HOST": "127.0.0.1:8000", "HTTP_CONNECTION": "keep-alive",
        "wsgi.version": (1, 0), "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr,
        "wsgi.multithread": False, "wsgi.multiprocess": True, "wsgi.run_once": False,
        "wsgi.input_terminated": True,  # as gunicorn says (the body is whole: serve's worker read it)
    }
    return base, body


def call(app, environs: list[tuple[dict, bytes]], n: int) -> list[bytes]:
    out = []
    status_line = []

    def start_response(status, headers, exc_info=None):
        status_line.append(status)

    for i in range(n):
        base, body = environs[i % len(environs)]
        environ = dict(base)
        environ["wsgi.input"] = io.BytesIO(body)
        result = app(environ, start_response)
        try:
            out.append(b"".join(result))
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
    bad = [s for s in status_line if not s.startswith("200")]
    if bad:
        raise SystemExit(f"unexpected statuses: {bad[:3]}")
    return out


def per_request_us(app, environs, n: int) -> tuple[float, float]:
    """(CPU µs, wall-clock µs) per request: this process's CPU time is the steadier
    figure on a shared machine (it does not count the time other processes had the core)."""
    c0, t0 = time.process_time(), time.perf_counter()
    call(app, environs, n)
    return (time.process_time() - c0) / n * 1e6, (time.perf_counter() - t0) / n * 1e6


def build_service(redis_url: str, hot_path: bool = True):
    from service.api.app import create_app
    from service.api.observe import configure_logging
    from service.config import load_settings

    configure_logging("INFO")
    devnull = open(os.devnull, "w")
    for handler in logging.getLogger("service").handlers:
        if getattr(handler, "_service_json", False):
            handler.setStream(devnull)
    settings = load_settings().with_overrides(redis_url=redis_url)
    return create_app({"HOT_PATH": hot_path}, settings=settings)


def profile(app, environs, n: int, top: int) -> None:
    prof = cProfile.Profile()
    prof.enable()
    call(app, environs, n)
    prof.disable()
    stats = pstats.Stats(prof)
    rows = stats.stats  # type: ignore[attr-defined]
    for label, suffix, name in COMPONENTS:
        cum = sum(v[3] for (file, _, func), v in rows.items() if func == name and file.endswith(suffix))
        print(json.dumps({"component": label, "profiled_us_per_request": round(cum / n * 1e6, 1)}), flush=True)
    own = sorted(rows.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    for (file, line, func), (cc, nc, tt, ct, _) in own:
        where = "/".join(Path(file).parts[-2:]) if file != "~" else "builtin"
        print(json.dumps({"function": f"{where}:{line}({func})", "calls_per_request": round(nc / n, 2),
                          "own_us_per_request": round(tt / n * 1e6, 2),
                          "cum_us_per_request": round(ct / n * 1e6, 2)}, ensure_ascii=False), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per block (default 2000)")
    parser.add_argument("--rounds", type=int, default=7, help="alternating blocks per app (default 7)")
    parser.add_argument("--profile", action="store_true", help="also print a cProfile breakdown")
    parser.add_argument("--no-gevent", action="store_true",
                        help="do not monkey-patch with gevent (serve's workers do)")
    parser.add_argument("--top", type=int, default=30, help="functions listed by own time (default 30)")
    args = parser.parse_args(argv)

    metrics = tempfile.mkdtemp(prefix="mahjong-bench-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics  # before prometheus_client is imported
    from service.store.embedded import EmbeddedRedis

    with tempfile.TemporaryDirectory() as data, EmbeddedRedis(data) as redis_server:
        app = build_service(redis_server.url)
        apps = {"service": app, "service_flask_path": build_service(redis_server.url, hot_path=False),
                "bare": bare_app}
        environs = [environ_for(i) for i in range(len(HANDS))]
        answers = {name: [json.loads(b) for b in call(a, environs, len(HANDS))] for name, a in apps.items()}
        if not answers["service"] == answers["service_flask_path"] == answers["bare"]:
            raise SystemExit("the service and the bare app disagree")
        for a in apps.values():
            call(a, environs, 500)  # warm-up
        gc.collect()
        gc.freeze()  # as serve's workers do once the app is loaded (service/serving.py)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in apps}
        for _ in range(args.rounds):
            for name, a in apps.items():
                samples[name].append(per_request_us(a, environs, args.requests))
        cpu = {}
        for target, values in samples.items():
            cpu[target] = statistics.median(c for c, _ in values)
            print(json.dumps({"target": target, "cpu_us_per_request": round(cpu[target], 1),
                              "cpu_us_min": round(min(c for c, _ in values), 1),
                              "wall_us_per_request": round(statistics.median(w for _, w in values), 1),
                              "requests": args.requests * args.rounds}))
        print(json.dumps({"ratio": "bare/service CPU per request (in-process throughput ratio)",
                          "value": round(cpu["bare"] / cpu["service"], 3),
                          "without_the_hot_path": round(cpu["bare"] / cpu["service_flask_path"], 3),
                          "load_average_1m": round(os.getloadavg()[0], 2)}), flush=True)
        if args.profile:  # Flask's path: the hot path's is the bare app's plus a few calls
            profile(apps["service_flask_path"], environs, args.requests, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
