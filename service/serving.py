"""Running a WSGI app under gunicorn (``gthread`` workers), programmatically.

Used by ``python -m service serve`` and by ``bench/load_ting.py`` (which
serves a bare WSGI app with exactly the same settings).
"""

from __future__ import annotations

import gc
import glob
import json
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from gunicorn import util as gunicorn_util
from gunicorn.app.base import BaseApplication
from gunicorn.workers.gthread import ThreadWorker

from .config import Settings

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def _child_exit(server: Any, worker: Any) -> None:
    """gunicorn hook: drop a dead worker's live metrics (multiprocess mode)."""
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


def gunicorn_options(settings: Settings) -> dict[str, Any]:
    return {
        "bind": [f"{settings.host}:{settings.port}"],
        "workers": settings.workers,
        "threads": settings.threads,
        "worker_class": "service.serving.ProblemThreadWorker",
        "timeout": settings.timeout,
        "graceful_timeout": 10,
        "keepalive": settings.keepalive,
        "loglevel": settings.log_level.lower(),
        "accesslog": None,  # the app writes one JSON line per request itself
        "errorlog": "-",
        "proc_name": "mahjong-service",
        "limit_request_line": 8190,  # longer query strings reach the app (and its 422s)
        "limit_request_fields": 100,
        "limit_request_field_size": 8190,
        "child_exit": _child_exit,
        "control_socket_disable": True,  # no shared ~/.gunicorn socket between instances
    }


class ProblemThreadWorker(ThreadWorker):
    """gunicorn's ``gthread`` worker whose own HTTP errors are problem+json too.

    gunicorn answers a request it cannot parse (a request line or headers over
    the limits, a malformed request line) itself, before the app sees it, with
    an HTML page; this worker makes that answer an RFC 9457 problem like every
    other error of the service.
    """

    def init_process(self) -> None:
        gunicorn_util.write_error = write_problem  # in this worker process only
        super().init_process()

    def accept(self, listener: Any) -> None:
        """Accept a new connection, leaving it to a less busy sibling if there is one.

        Every worker is woken for a new connection and the first to call
        ``accept`` gets it, so a burst of keep-alive connections can all land on
        one worker while the others idle (seen: 32 of 32, halving throughput).
        A worker that already has a connection per thread waits a little first,
        longer the more it has, so the least busy worker tends to win.
        """
        extra = self.nr_conns - self.cfg.threads
        if extra >= 0:
            time.sleep(min(0.005, 0.0005 * (extra + 1)))
        super().accept(listener)


def write_problem(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's ``util.write_error``, writing ``application/problem+json``."""
    from .api.problems import PROBLEM_BASE

    code = "_".join(reason.lower().split()) or "bad_request"
    body = json.dumps({"type": PROBLEM_BASE + code, "title": reason, "status": status_int,
                       "detail": str(mesg) or reason, "code": code}).encode()
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
            f"Content-Type: application/problem+json\r\nContent-Length: {len(body)}\r\n\r\n")
    gunicorn_util.write_nonblock(sock, head.encode("latin1") + body)


class GunicornApp(BaseApplication):
    """A gunicorn application whose WSGI app comes from ``loader()`` (called in each worker)."""

    def __init__(self, loader: Callable[[], Any], options: dict[str, Any]) -> None:
        self._loader = loader
        self._options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        app = self._loader()
        # Everything loaded so far (the shape tables, the app) lives as long as the
        # worker: move it out of the cyclic GC's reach, or every full collection
        # walks it (~20 ms here, straight into the tail latency).
        gc.collect()
        gc.freeze()
        return app


@contextmanager
def metrics_dir() -> Iterator[str]:
    """``PROMETHEUS_MULTIPROC_DIR`` for the workers: the operator's (emptied) or a fresh one.

    Must be entered before :mod:`prometheus_client` is imported in this process.
    """
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        os.makedirs(given, exist_ok=True)
        for stale in glob.glob(os.path.join(given, "*.db")):
            os.unlink(stale)
        yield given
        return
    path = tempfile.mkdtemp(prefix="mahjong-metrics-")
    os.environ[MULTIPROC_ENV] = path
    try:
        yield path
    finally:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(path, ignore_errors=True)


def run(loader: Callable[[], Any], settings: Settings) -> None:
    """Run gunicorn until it is stopped (SIGINT/SIGTERM); raises SystemExit at the end."""
    GunicornApp(loader, gunicorn_options(settings)).run()
