"""Every error → an RFC 9457 ``application/problem+json`` response, in one place.

:func:`problem_response` is the single error handler of the application
(registered for :class:`Exception`, so HTTP errors, rule errors, the API's own
errors and bugs all pass through it).  A problem has

* ``type``: a stable URI ``https://mahjong.example/problems/<code>``;
* ``title``: a short summary of the type; ``status``; ``detail``: this occurrence;
* ``code``: the stable id (the last segment of ``type``; for rule errors the
  core's ``RuleError.code``);
* ``instance``: the request path; ``request_id``: the ``X-Request-ID``;
* ``errors`` (field path → messages) for input that breaks the schema;
* ``event`` (0-based index) for an event that cannot happen.

A 500 never says more than "internal error": the exception is logged with the
request id, not returned.

>>> problem_body(MalformedJSON("line 1"), "/v1/hands/ting", "abc")["type"]
'https://mahjong.example/problems/malformed_json'
"""

from __future__ import annotations

import json
import logging
from typing import Any, Mapping

from flask import Flask, Response, current_app, g, has_request_context, request
from werkzeug.exceptions import HTTPException

import redis.exceptions

from ..store import tables as store_errors
from ..rules.errors import (
    EventError, HandError, NotationError, RuleError, RulesetError, WinError,
)

PROBLEM_BASE = "https://mahjong.example/problems/"
PROBLEM_JSON = "application/problem+json"

log = logging.getLogger("service.api")


class ApiProblem(Exception):
    """An error of the HTTP layer itself, with its status, code and title."""

    status = 500
    code = "internal_error"
    title = "Internal server error"

    def __init__(
        self,
        detail: str | None = None,
        *,
        errors: Mapping[str, list[str]] | None = None,
        headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail or self.title)
        self.detail = detail or self.title
        self.errors = dict(errors) if errors else None
        self.headers = dict(headers or {})
        self.extra = extra


class MalformedJSON(ApiProblem):
    status, code, title = 400, "malformed_json", "Malformed JSON"


class UnsupportedMediaType(ApiProblem):
    status, code, title = 415, "unsupported_media_type", "Unsupported media type"


class InvalidInput(ApiProblem):
    """Valid JSON that does not match the request schema (``errors`` say where)."""

    status, code, title = 422, "invalid_input", "Invalid input"


class NotReady(ApiProblem):
    status, code, title = 503, "not_ready", "Service not ready"


class FieldRuleError(Exception):
    """A :class:`RuleError` raised while loading one request field (``path``)."""

    def __init__(self, error: RuleError, path: str) -> None:
        super().__init__(str(error))
        self.error = error
        self.path = path


# titles of the HTTP errors werkzeug raises, keyed by status
_HTTP_CODES = {
    400: ("bad_request", "Bad request"),
    404: ("not_found", "Not found"),
    405: ("method_not_allowed", "Method not allowed"),
    406: ("not_acceptable", "Not acceptable"),
    408: ("request_timeout", "Request timeout"),
    411: ("length_required", "Length required"),
    413: ("payload_too_large", "Payload too large"),
    414: ("uri_too_long", "URI too long"),
    415: ("unsupported_media_type", "Unsupported media type"),
    429: ("too_many_requests", "Too many requests"),
    431: ("request_header_fields_too_large", "Request header fields too large"),
    500: ("internal_error", "Internal server error"),
    501: ("not_implemented", "Not implemented"),
    503: ("service_unavailable", "Service unavailable"),
}

# rule errors: the title of the first matching class (most specific first)
_RULE_TITLES: tuple[tuple[type, str], ...] = (
    (EventError, "Event cannot happen"),
    (NotationError, "Invalid tile notation"),
    (HandError, "Invalid hand"),
    (WinError, "Invalid win"),
    (RulesetError, "Invalid ruleset"),
    (RuleError, "Rule violation"),
)

_DETAILS = {
    404: "no such resource: {path}",
    405: "method {method} is not allowed on {path}",
}


def _rule_problem(error: RuleError) -> tuple[int, str, str, str, dict[str, Any]]:
    title = next(t for cls, t in _RULE_TITLES if isinstance(error, cls))
    extra: dict[str, Any] = {}
    if isinstance(error, EventError):
        extra["event"] = error.event
    return 422, error.code, title, str(error), extra


def problem_body(exc: BaseException, path: str, request_id: str | None) -> dict[str, Any]:
    """The problem object for ``exc`` (without headers)."""
    return _describe(exc, path, "GET", request_id)[0]


def _describe(
    exc: BaseException, path: str, method: str, request_id: str | None
) -> tuple[dict[str, Any], int, dict[str, str]]:
    headers: dict[str, str] = {}
    errors: dict[str, list[str]] | None = None
    extra: dict[str, Any] = {}
    if isinstance(exc, ApiProblem):
        status, code, title, detail = exc.status, exc.code, exc.title, exc.detail
        errors, extra, headers = exc.errors, dict(exc.extra), dict(exc.headers)
    elif isinstance(exc, store_errors.StoreError):
        status, title, headers, extra = _store_problem(exc)
        code, detail = exc.code, exc.message
    elif isinstance(exc, redis.exceptions.RedisError):
        # unreachable, loading, read-only, out of memory, MISCONF...: the store cannot
        # take the request now, which says nothing about the request itself
        status, code, title = 503, "store_unavailable", "Tables store unavailable"
        detail = "the tables store (Redis) cannot serve requests right now; retry shortly"
        headers = {"Retry-After": "2"}
    elif isinstance(exc, FieldRuleError):
        status, code, title, detail, extra = _rule_problem(exc.error)
        errors = {exc.path: [str(exc.error)]}
    elif isinstance(exc, RuleError):
        status, code, title, detail, extra = _rule_problem(exc)
    elif isinstance(exc, HTTPException) and exc.code and exc.code >= 400:
        status = exc.code
        code, title = _HTTP_CODES.get(status, (_slug(exc.name), exc.name))
        template = _DETAILS.get(status)
        detail = template.format(path=path, method=method) if template else _http_detail(exc)
        if status >= 500:
            detail = title
        headers = {
            k: v for k, v in exc.get_headers() if k.lower() not in ("content-type", "content-length")
        }
    else:
        status, code, title, detail = 500, "internal_error", "Internal server error", (
            "the server failed to handle the request; quote the request id when reporting it"
        )
    body: dict[str, Any] = {
        "type": PROBLEM_BASE + code,
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
        "instance": path,
    }
    if request_id:
        body["request_id"] = request_id
    if errors:
        body["errors"] = errors
    body.update(extra)
    return body, status, headers


_STORE_STATUS: tuple[tuple[type, int, str], ...] = (
    (store_errors.TableNotFound, 404, "Table not found"),
    (store_errors.EventNotFound, 404, "Event not found"),
    (store_errors.Unauthorized, 401, "Unauthorized"),
    (store_errors.Forbidden, 403, "Forbidden"),
    (store_errors.PreconditionFailed, 412, "Precondition failed"),
    (store_errors.IdempotencyMismatch, 422, "Idempotency-Key reused"),
    (store_errors.Conflict, 409, "Conflict"),
    (store_errors.Busy, 503, "Busy"),
    (store_errors.StoreFull, 507, "Insufficient storage"),
)


def _store_problem(exc: "store_errors.StoreError") -> tuple[int, str, dict[str, str], dict[str, Any]]:
    status, title = next(((s, t) for cls, s, t in _STORE_STATUS if isinstance(exc, cls)), (500, "Store error"))
    headers: dict[str, str] = {}
    extra: dict[str, Any] = {}
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="tables"'
    if status == 503:
        headers["Retry-After"] = "1"
    if "current" in exc.context:
        extra["version"] = exc.context["current"]
        headers["ETag"] = f'"{exc.context["current"]}"'
    if "event" in exc.context:
        extra["event"] = exc.context["event"]
    return status, title, headers, extra


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name.lower()).strip("_") or "error"


def _http_detail(exc: HTTPException) -> str:
    if exc.code == 413:
        limit = current_app.config.get("MAX_CONTENT_LENGTH") if current_app else None
        return f"the request body is larger than {limit} bytes" if limit else "the request body is too large"
    text = exc.description or exc.name
    return " ".join(str(text).split())


def problem_response(exc: BaseException) -> Response:
    """The application's one error handler."""
    if isinstance(exc, HTTPException) and (exc.code is None or exc.code < 400):
        return exc  # type: ignore[return-value]  # redirects and the like pass through
    path = request.path if has_request_context() else ""
    method = request.method if has_request_context() else "GET"
    request_id = g.get("request_id") if has_request_context() else None
    body, status, headers = _describe(exc, path, method, request_id)
    if isinstance(exc, redis.exceptions.RedisError) or isinstance(exc, store_errors.StoreError) and status >= 500:
        # the store cannot take the request now (down, full, busy): an operational state, not a bug
        log.warning("tables store unavailable (%s: %s) on %s %s (request %s)",
                    type(exc).__name__, exc, method, path, request_id)
    elif status >= 500 and not isinstance(exc, ApiProblem):
        original = getattr(exc, "original_exception", None) or exc
        log.error(
            "unhandled error %s on %s %s (request %s)",
            type(original).__name__, method, path, request_id,
            exc_info=(type(original), original, original.__traceback__),
        )
    return make_problem(body, status, headers)


def make_problem(body: Mapping[str, Any], status: int, headers: Mapping[str, str] | None = None) -> Response:
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    response = Response(text, status=status, mimetype=PROBLEM_JSON)
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def register(app: Flask) -> None:
    """Install :func:`problem_response` for every exception."""
    app.register_error_handler(Exception, problem_response)
