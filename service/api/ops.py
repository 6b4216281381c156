"""``/healthz`` (liveness), ``/readyz`` (readiness), ``/metrics`` (Prometheus), and ``/problems/{code}``
(the page a problem's ``type`` names: :mod:`.problem_types`).

Readiness runs every check in ``app.extensions["readiness_checks"]``: a list
of callables taking no argument that raise (or return ``False``) when the
dependency they check is not usable, and may return a string saying what is
degraded while it still serves (a cluster with a primary down): then
``/readyz`` is 200 with ``"status": "degraded"`` and that check's text, and the
gauge ``mahjong_degraded{check}`` is 1.  Store code registers into it with
:func:`register_readiness_check`.

``/metrics`` shows, beside the metrics of the process (or of every worker), the
figures of the custom collectors in ``app.extensions[METRICS_COLLECTORS]``
(read at each scrape: the webhooks' outboxes, :mod:`service.webhooks.metrics`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from flask import Flask, current_app, jsonify

from . import problem_types, rate_limits
from . import schemas as s
from .observe import metrics_response
from .problems import NotReady
from .smorest import Blueprint

blp = Blueprint("ops", __name__, description="Health, readiness, metrics, and the pages of the problems' codes.")
log = logging.getLogger("service.api")

ReadinessCheck = Callable[[], object]
METRICS_COLLECTORS = "metrics_collectors"
"""``app.extensions`` key of the custom collectors ``/metrics`` shows too."""


def register_readiness_check(app: Flask, check: ReadinessCheck, name: str | None = None) -> None:
    """Add ``check`` to the app's readiness checks (``name`` defaults to its ``__name__``)."""
    if name is not None:
        check.__dict__.setdefault("readiness_name", name)
    app.extensions.setdefault("readiness_checks", []).append(check)


def _name(check: ReadinessCheck) -> str:
    return getattr(check, "readiness_name", None) or getattr(check, "__name__", None) or repr(check)


PUBLIC: list = []  # no credentials, ever


@blp.route("/healthz", methods=["GET"])
@blp.response(200, s.HealthResponse)
@blp.doc(operationId="healthz", security=PUBLIC)
@rate_limits.unlimited("a probe of the process: answers from memory")
def healthz():
    """Liveness: the process answers."""
    return jsonify({"status": "ok"})


@blp.route("/readyz", methods=["GET"])
@blp.response(200, s.HealthResponse)
@blp.problems((503, "a readiness check failed (`not_ready`, with `checks`)"))
@blp.doc(operationId="readyz", security=PUBLIC)
@rate_limits.unlimited("a probe (the orchestrator's): one small Redis check")
def readyz():
    """Readiness: every registered check passes (503 otherwise)."""
    results: dict[str, str] = {}
    ok, degraded = True, False
    for check in current_app.extensions.get("readiness_checks", []):
        name = _name(check)
        try:
            answer = check()
            passed = answer is not False
            if isinstance(answer, str):
                results[name], degraded = f"degraded: {answer}", True
            else:
                results[name] = "ok" if passed else "failed"
        except Exception as exc:  # a failing dependency: its class, and its reason when it gives one
            log.warning("readiness check %s failed: %s: %s", name, type(exc).__name__, exc)
            passed = False
            reason = str(exc) if exc.__class__.__name__ == "NotReady" else ""
            results[name] = f"failed: {type(exc).__name__}" + (f": {reason}" if reason else "")
        _degraded_gauge().labels(name).set(1 if results[name].startswith("degraded") else 0)
        ok = ok and passed
    if not ok:
        raise NotReady("a readiness check failed", checks=results)
    return jsonify({"status": "degraded" if degraded else "ok", "checks": results})


_DEGRADED = None


def _degraded_gauge():
    global _DEGRADED
    if _DEGRADED is None:
        from prometheus_client import Gauge

        _DEGRADED = Gauge("mahjong_degraded", "1 while a readiness check reports a degraded dependency "
                          "(a cluster primary down) that still serves.", ["check"], multiprocess_mode="max")
    return _DEGRADED


@blp.route("/metrics", methods=["GET"])
@blp.response(200, {"type": "string"}, content_type="text/plain",
              description="Prometheus text exposition")
@blp.doc(operationId="metrics", security=PUBLIC)
@rate_limits.unlimited("the scraper's: answers from the process's counters")
def metrics():
    """Prometheus metrics (aggregated over workers in multiprocess mode)."""
    return metrics_response(current_app.extensions.get(METRICS_COLLECTORS, ()))


@blp.route("/problems/<code>", methods=["GET"])
@blp.response(200, problem_types.ProblemTypeSchema,
              description="The code described: HTML by default, JSON with `Accept: application/json`")
@blp.problems((404, "no problem has this code (`not_found`)"))
@blp.doc(operationId="getProblemType", security=PUBLIC,
         responses={200: {"content": {"text/html": {"schema": {"type": "string"}}}}})
@rate_limits.unlimited("a page of the registries of codes, made once and answered from memory")
def problem_type(code):
    """What a problem's `code` means, and the statuses it comes with: the page its `type` names.

    A problem's `type` is `{PUBLIC_URL or the request's origin}/problems/{code}`. HTML unless the request
    prefers JSON (`Accept: application/json`).
    """
    return problem_types.page(code)
