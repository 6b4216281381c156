"""In-process CPU cost of a table append through the app, beside a ting (loopback only, bounded).

    python bench/store_inprocess.py [--rounds 5] [--appends 400] [--tings 2000] [--limits off|high] [--profile]

The app is built as ``serve`` builds it (see ``bench/http_inprocess.py``: a
process monkey-patched by gevent, JSON access log written to ``/dev/null``, the
GC frozen after the warm-up) on a private redis-server (``appendfsync
always``), without rate limits (``--limits high``: every limit on, at
1,000,000 a minute or an hour, so that the limiter's Redis calls are counted
but nothing is refused).  ``POST /v1/tables/{id}/events`` (valid rounds
on one table, with its write token) and ``POST /v1/hands/ting`` (the hot path)
are called with the environ gunicorn builds, in ``--rounds`` alternating
blocks; prints the median CPU µs per request of each (this process's CPU
time: the Redis server's is not counted) and their ratio, the same appends
through Flask's path (an app with ``HOT_PATH = False``, on a table of its own,
in the same alternating blocks: ``append_flask_path_cpu_us``), and the Redis round
trips and commands of one append (counted in redis-py: a pipeline is one round
trip of several commands).  ``--profile`` adds
a cProfile of the appends, by own time.
"""

from __future__ import annotations

import sys

from gevent import monkey  # as in serve's workers: before anything else is imported

monkey.patch_all()

import argparse  # noqa: E402
import cProfile  # noqa: E402
import gc  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.http_inprocess import build_service, call, environ_for  # noqa: E402
from bench.store import HIGH_LIMITS, PLAYERS, cycle  # noqa: E402


def count_redis(run) -> tuple[int, int]:
    """(round trips, commands) that ``run()`` sends to Redis through redis-py (its ``send_packed_command``
    writes one request, a pipeline's commands in one; its serializers pack one command each)."""
    from redis.connection import AbstractConnection, HiredisRespSerializer, PythonRespSerializer

    counts = [0, 0]
    send = AbstractConnection.send_packed_command
    packs = {cls: cls.pack for cls in (HiredisRespSerializer, PythonRespSerializer)}

    def counted_send(self, *a, **k):
        counts[0] += 1
        return send(self, *a, **k)

    def counted(pack):
        def counted_pack(self, *a, **k):
            counts[1] += 1
            return pack(self, *a, **k)
        return counted_pack

    AbstractConnection.send_packed_command = counted_send
    for cls, pack in packs.items():
        cls.pack = counted(pack)
    try:
        run()
    finally:
        AbstractConnection.send_packed_command = send
        for cls, pack in packs.items():
            cls.pack = pack
    return counts[0], counts[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--appends", type=int, default=400)
    ap.add_argument("--tings", type=int, default=2000)
    ap.add_argument("--limits", choices=("off", "high"), default="off")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args(argv)

    from service.config import NO_LIMITS
    from service.store.embedded import EmbeddedRedis

    os.environ.update(NO_LIMITS if args.limits == "off" else HIGH_LIMITS)
    with EmbeddedRedis(tempfile.mkdtemp(prefix="bench-redis-")) as server:
        app = build_service(server.url)
        flask_path = build_service(server.url, hot_path=False)
        tables = {a: a.extensions["tables"].create(PLAYERS, "xuezhan") for a in (app, flask_path)}
        events = {a: cycle() for a in (app, flask_path)}
        statuses: list[str] = []

        def start_response(status, headers, exc_info=None):
            statuses.append(status)

        def appends(n: int, app=app) -> float:
            table = tables[app]
            path = f"/v1/tables/{table.id}/events"
            c0 = time.process_time()
            for _ in range(n):
                body = json.dumps(next(events[app])).encode()
                environ, _ = environ_for(0)
                environ.update(PATH_INFO=path, RAW_URI=path, CONTENT_LENGTH=str(len(body)),
                               HTTP_AUTHORIZATION="Bearer " + table.token)
                environ["wsgi.input"] = io.BytesIO(body)
                result = app(environ, start_response)
                b"".join(result)
                getattr(result, "close", lambda: None)()
            spent = (time.process_time() - c0) / n * 1e6
            bad = [s for s in statuses if not s.startswith("201")]
            if bad:
                raise SystemExit(f"unexpected statuses: {bad[:3]}")
            statuses.clear()
            return spent

        tings_env = [environ_for(i) for i in range(8)]

        def tings(n: int) -> float:
            c0 = time.process_time()
            call(app, tings_env, n)
            return (time.process_time() - c0) / n * 1e6

        appends(200)
        appends(200, flask_path)
        tings(500)
        trips, commands = count_redis(lambda: appends(100))
        gc.collect()
        gc.freeze()
        a, f, t = [], [], []
        for _ in range(args.rounds):
            a.append(appends(args.appends))
            f.append(appends(args.appends, flask_path))
            t.append(tings(args.tings))
        ma, mf, mt = statistics.median(a), statistics.median(f), statistics.median(t)
        print(json.dumps({"op": "append_inprocess", "append_cpu_us": round(ma, 1), "ting_cpu_us": round(mt, 1),
                          "ting_over_append": round(mt / ma, 3), "append_flask_path_cpu_us": round(mf, 1),
                          "hot_over_flask_path": round(ma / mf, 3), "limits": args.limits,
                          "round_trips_per_append": trips / 100, "commands_per_append": commands / 100,
                          "load_average_1m": os.getloadavg()[0]}),
              flush=True)
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            appends(args.appends)
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
