"""The ladder: what each layer of the service adds to a ``POST /v1/hands/ting``, in µs of one process's CPU.

Each rung is a WSGI app, the one before it plus one piece, called in process (no server, no socket) with
the same requests (``bench/load_ting.py``'s hands):

1. ``bare``: the bare WSGI app of ``bench/load_ting.py`` (json in, ``service.ting``, json out);
2. ``flask``: the same work in a Flask view of the service's Flask class (orjson), nothing else;
3. ``schemas``: the service's app without Redis, with its request-id, metrics and access-log hooks taken off:
   flask-smorest, webargs, the marshmallow schemas, the problems;
4. ``limiter``: the same app with a Redis and every rate limit on (a ting is not limited: this rung says
   what the limits cost a request that nothing limits);
5. ``metrics``: with the request id and the Prometheus metrics (multiprocess files, as ``serve`` has them),
   the access log off;
6. ``log``: with the access log (its JSON line written, to ``/dev/null``);
7. ``service``: ``create_app()`` as ``serve`` loads it, behind :class:`service.serving.WholeBody`.

The rungs run interleaved: each round times a batch of requests on every rung, in a shuffled order, so
that the machine's drift hits all alike; a rung's figure is the median of its rounds (with p10–p90), a
piece's is the median of its rung less the one before *in the same round*.  One JSON line per rung, then
one with the ratios (``bare ÷ service``: what share of the service's time the bare app's work is).

    .venv/bin/python bench/ladder.py                      # 30 rounds of 2,000 requests a rung
    .venv/bin/python bench/ladder.py --rounds 5 --requests 200
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="ladder-metrics-"))  # (as serve)

from bench.load_ting import HANDS, PATH, bare_app  # noqa: E402

RUNGS = ("bare", "flask", "schemas", "limiter", "metrics", "log", "service")


def environ_for(i: int) -> dict:
    body = json.dumps({"hand": {"tiles": HANDS[i % len(HANDS)]}}).encode()
    return {"REQUEST_METHOD": "POST", "PATH_INFO": PATH, "SCRIPT_NAME": "", "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1", "HTTP_HOST": "127.0.0.1:8000", "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)), "wsgi.url_scheme": "http", "wsgi.version": (1, 0),
            "wsgi.errors": sys.stderr, "wsgi.multithread": False, "wsgi.multiprocess": True,
            "wsgi.run_once": False, "body": body}


def call(app, template: dict) -> bytes:
    environ = dict(template)
    environ["wsgi.input"] = io.BytesIO(environ.pop("body"))
    status = []
    out = app(environ, lambda s, h, exc_info=None: status.append(s))
    try:
        data = b"".join(out)
    finally:
        close = getattr(out, "close", None)
        if close is not None:
            close()
    if not status or not status[0].startswith("200"):
        raise SystemExit(f"the rung answered {status}: {data[:200]!r}")
    return data


# -- the rungs ------------------------------------------------------------------------------------
def flask_app():
    from flask import Response, request

    from service import parse_hand, ting
    from service.api.app import ServiceFlask
    from service.api.jsonio import dumps

    app = ServiceFlask("ladder")

    @app.post(PATH)
    def view():  # (the bare app's work and answer)
        data = request.get_json()
        hand = data["hand"]
        result = ting(parse_hand(hand["tiles"], hand.get("melds", ()), hand.get("void")),
                      ruleset=data.get("ruleset"), visible=data.get("visible"))
        return Response(dumps({
            "ting": result.ting, "huazhu": result.huazhu,
            "waits": [{"tile": str(w.tile), "fan": w.fan, "points": w.points,
                       "patterns": [p.as_dict() for p in w.patterns], "remaining": w.remaining}
                      for w in result.waits],
            "dajiao": None if result.dajiao is None else {"fan": result.dajiao.fan, "points": result.dajiao.points},
        }), mimetype="application/json")

    return app


def service_app(redis_url: str | None, limits_on: bool, observed: bool):
    from service.api import observe
    from service.api.app import create_app
    from service.config import NO_LIMITS

    config: dict[str, object] = {"REDIS_URL": redis_url or ""}
    if not limits_on:
        config.update({k: 0 for k in NO_LIMITS})
    app = create_app(config)
    if not observed:
        app.before_request_funcs[None].remove(observe.begin_request)
        app.after_request_funcs[None].remove(observe.finish_request)
    return app


def build(redis_url: str) -> dict:
    from service.api import observe
    from service.config import load_settings
    from service.logs import configure_logging
    from service.serving import WholeBody

    devnull = open(os.devnull, "w")
    stderr, sys.stderr = sys.stderr, devnull
    try:
        configure_logging("INFO")  # (the handler writes to /dev/null)
    finally:
        sys.stderr = stderr
    access = observe.access_log

    def quiet(app):
        def run(environ, start_response):
            access.disabled = True
            try:
                return app(environ, start_response)
            finally:
                access.disabled = False
        return run

    s = load_settings()
    full = service_app(redis_url, limits_on=True, observed=True)
    return {
        "bare": bare_app,
        "flask": flask_app(),
        "schemas": service_app(None, limits_on=False, observed=False),
        "limiter": service_app(redis_url, limits_on=True, observed=False),
        "metrics": quiet(service_app(redis_url, limits_on=True, observed=True)),
        "log": service_app(redis_url, limits_on=True, observed=True),
        "service": WholeBody(full, float(s.request_timeout), int(s.max_body_bytes), int(s.max_batch_bytes)),
    }


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--requests", type=int, default=2000, help="requests a rung a round")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    from service.store.embedded import EmbeddedRedis

    with tempfile.TemporaryDirectory(prefix="ladder-redis-") as data:
        server = EmbeddedRedis(Path(data)).start()
        try:
            apps = build(server.url)
            templates = [environ_for(i) for i in range(len(HANDS))]
            answers = {name: [json.loads(call(app, t)) for t in templates] for name, app in apps.items()}
            for name, got in answers.items():
                if got != answers["service"]:
                    raise SystemExit(f"{name} answers otherwise than the service")
            rng = random.Random(args.seed)
            per_round: dict[str, list[float]] = {name: [] for name in RUNGS}
            for name in RUNGS:  # warm-up
                for i in range(200):
                    call(apps[name], templates[i % len(templates)])
            for _ in range(args.rounds):
                order = list(RUNGS)
                rng.shuffle(order)
                for name in order:
                    app = apps[name]
                    t0 = time.process_time_ns()
                    for i in range(args.requests):
                        call(app, templates[i % len(templates)])
                    per_round[name].append((time.process_time_ns() - t0) / args.requests / 1000)
        finally:
            server.stop()
    previous = None
    for name in RUNGS:
        values = per_round[name]
        line = {"rung": name, "us_median": round(statistics.median(values), 1),
                "us_p10": round(pct(values, 0.1), 1), "us_p90": round(pct(values, 0.9), 1)}
        if previous is not None:
            piece = [a - b for a, b in zip(values, per_round[previous])]
            line.update({"piece_us_median": round(statistics.median(piece), 1),
                         "piece_us_p10": round(pct(piece, 0.1), 1), "piece_us_p90": round(pct(piece, 0.9), 1)})
        print(json.dumps(line), flush=True)
        previous = name
    bare, service = statistics.median(per_round["bare"]), statistics.median(per_round["service"])
    print(json.dumps({"rounds": args.rounds, "requests": args.requests,
                      "bare_over_service": round(bare / service, 3),
                      "extra_us": round(service - bare, 1)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
