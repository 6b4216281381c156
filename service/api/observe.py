"""Request ids, one structured access-log line per request, Prometheus metrics.

* ``X-Request-ID``: a client value matching ``^[A-Za-z0-9._-]{1,128}$`` is
  kept, anything else is ignored and a fresh id generated; the id is echoed
  on every response and put in every problem body.
* Access log: logger ``service.access``, one JSON object per request as the
  log message: ``method``, ``path``, ``status``, ``duration_ms``,
  ``request_id`` (never bodies, query strings or headers).
* Metrics: ``mahjong_http_requests_total{endpoint,method,status}`` and
  ``mahjong_http_request_duration_seconds{endpoint,method}``; ``endpoint`` is
  the URL rule (``<unmatched>`` for 404s, so paths cannot explode the label
  set).  Under several gunicorn workers set ``PROMETHEUS_MULTIPROC_DIR``
  (``serve`` does) and ``/metrics`` aggregates every worker's files.

>>> valid_request_id("abc-123.X_y"), valid_request_id("bad id"), valid_request_id("x" * 129)
(True, False, False)
"""

from __future__ import annotations

import functools
import logging
import os
import re
import time
from collections.abc import Iterable

from flask import Flask, Response, g, request

REQUEST_ID_HEADER = "X-Request-ID"
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
_REQUEST_ID_ENVIRON = "HTTP_X_REQUEST_ID"  # the header as the WSGI environ holds it

access_log = logging.getLogger("service.access")

# Metric objects are process-wide (prometheus-client registers them once).
from prometheus_client import (  # noqa: E402  (after the module docstring on purpose)
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.registry import Collector  # noqa: E402

REQUESTS = Counter(
    "mahjong_http_requests",
    "HTTP requests handled, by endpoint (URL rule), method and status.",
    ["endpoint", "method", "status"],
)
LATENCY = Histogram(
    "mahjong_http_request_duration_seconds",
    "Time from the start of request handling to the response, by endpoint and method.",
    ["endpoint", "method"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)


def valid_request_id(value: str | None) -> bool:
    if not value:
        return False
    return _REQUEST_ID.fullmatch(value) is not None


def request_id(environ: dict) -> str:
    """The request's ``X-Request-ID`` when valid, else a fresh id."""
    rid = environ.get(_REQUEST_ID_ENVIRON)
    return rid if rid is not None and _REQUEST_ID.fullmatch(rid) is not None else os.urandom(16).hex()


def begin_request() -> None:
    """The request id and the start time (the first before_request hook: :func:`install`)."""
    ctx_g = g._get_current_object()  # (one proxy lookup; this runs on every request)
    environ = request.environ
    ctx_g.start = time.perf_counter()
    ctx_g.request_id = request_id(environ)


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


@functools.cache
def _series(rule: str, method: str, status: int) -> tuple:
    """The labelled counter and histogram of a (rule, method, status), looked up once each.

    Keys are bounded: rules are the app's URL rules (or ``<unmatched>``), methods
    are :data:`_METHODS` or ``OTHER``, statuses are HTTP statuses.
    """
    return REQUESTS.labels(rule, method, str(status)), LATENCY.labels(rule, method)


def finish_request(response: Response) -> Response:
    """The request id header, the metrics and the access line (the last after_request hook)."""
    ctx_g = g._get_current_object()
    req = request._get_current_object()  # type: ignore[attr-defined]
    rid = getattr(ctx_g, "request_id", None) or os.urandom(16).hex()
    response.headers[REQUEST_ID_HEADER] = rid
    start = getattr(ctx_g, "start", None)
    elapsed = time.perf_counter() - start if start is not None else 0.0
    rule = req.url_rule.rule if req.url_rule is not None else "<unmatched>"
    record(rule, req.method, req.path, response.status_code, elapsed, rid)
    return response


def record(rule: str, method: str, path: str, status: int, elapsed: float, rid: str) -> None:
    """Count a request in the metrics and write its access-log line."""
    method = method if method in _METHODS else "OTHER"  # bounded label values
    try:
        counter, histogram = _series(rule, method, status)
        counter.inc()
        histogram.observe(elapsed)
    except Exception:  # pragma: no cover - metrics must never break a response
        logging.getLogger("service.api").exception("recording metrics failed")
    if access_log.isEnabledFor(logging.INFO):
        access_log.info("request", extra={"fields": {
            "event": "request",
            "method": method,
            "path": path[:512],
            "endpoint": rule,
            "status": status,
            "duration_ms": round(elapsed * 1000, 3),
            "request_id": rid,
        }})


def install(app: Flask) -> None:
    """Register the request-id / log / metrics hooks (first before, last after)."""
    app.before_request_funcs.setdefault(None, []).insert(0, begin_request)
    app.after_request(finish_request)


def metrics_response(collectors: Iterable[Collector] = ()) -> Response:
    """The Prometheus exposition of this process, or of every worker (multiprocess), and of ``collectors``
    (custom collectors of figures read at each scrape, the same in every worker: e.g. what Redis holds)."""
    extra = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        extra.register(collector)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        body = generate_latest(registry)
    else:
        body = generate_latest(REGISTRY)
    return Response(body + generate_latest(extra), content_type=CONTENT_TYPE_LATEST)
