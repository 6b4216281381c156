"""``/healthz`` (liveness), ``/readyz`` (readiness), ``/metrics`` (Prometheus).

Readiness runs every check in ``app.extensions["readiness_checks"]``: a list
of callables taking no argument that raise (or return ``False``) when the
dependency they check is not usable.  Store code registers into it with
:func:`register_readiness_check`.
"""

from __future__ import annotations

import logging
from typing import Callable

from flask import Flask, current_app, jsonify

from . import schemas as s
from .observe import metrics_response
from .problems import NotReady
from .smorest import Blueprint

blp = Blueprint("ops", __name__, description="Health, readiness and metrics.")
log = logging.getLogger("service.api")

ReadinessCheck = Callable[[], object]


def register_readiness_check(app: Flask, check: ReadinessCheck, name: str | None = None) -> None:
    """Add ``check`` to the app's readiness checks (``name`` defaults to its ``__name__``)."""
    if name is not None:
        check.__dict__.setdefault("readiness_name", name)  # type: ignore[union-attr]
    app.extensions.setdefault("readiness_checks", []).append(check)


def _name(check: ReadinessCheck) -> str:
    return getattr(check, "readiness_name", None) or getattr(check, "__name__", None) or repr(check)


PUBLIC: list = []  # no credentials, ever


@blp.route("/healthz", methods=["GET"])
@blp.response(200, s.HealthResponse)
@blp.doc(operationId="healthz", security=PUBLIC)
def healthz():
    """Liveness: the process answers."""
    return jsonify({"status": "ok"})


@blp.route("/readyz", methods=["GET"])
@blp.response(200, s.HealthResponse)
@blp.problems((503, "a readiness check failed (`not_ready`, with `checks`)"))
@blp.doc(operationId="readyz", security=PUBLIC)
def readyz():
    """Readiness: every registered check passes (503 otherwise)."""
    results: dict[str, str] = {}
    ok = True
    for check in current_app.extensions.get("readiness_checks", []):
        name = _name(check)
        try:
            passed = check() is not False
            results[name] = "ok" if passed else "failed"
        except Exception as exc:  # a failing dependency, reported by class only
            log.warning("readiness check %s failed: %s", name, type(exc).__name__)
            passed = False
            results[name] = f"failed: {type(exc).__name__}"
        ok = ok and passed
    if not ok:
        raise NotReady("a readiness check failed", checks=results)
    return jsonify({"status": "ok", "checks": results})


@blp.route("/metrics", methods=["GET"])
@blp.response(200, {"type": "string"}, content_type="text/plain",
              description="Prometheus text exposition")
@blp.doc(operationId="metrics", security=PUBLIC)
def metrics():
    """Prometheus metrics (aggregated over workers in multiprocess mode)."""
    return metrics_response()
