"""Every error → an RFC 9457 ``application/problem+json`` response, in one place.

:func:`register` installs one Flask error handler per exception family (Flask
picks the handler of the nearest class in the exception's MRO):

=================================  ======  ==========================================
family                             status  code
=================================  ======  ==========================================
:class:`ApiProblem`                its own its own (``malformed_json``, ``invalid_input``...)
store errors (``StoreError``)      404...  the store's (``table_not_found``, ...)
``redis.exceptions.RedisError``    503     ``store_unavailable`` (logged as one warning)
:class:`FieldRuleError`            422     the core's, with ``errors`` naming the field
``RuleError`` (the rules core)     422     the core's (``not_a_win``, ``bad_event``, ...)
werkzeug ``HTTPException``         its own ``not_found``, ``method_not_allowed``, ...
anything else (a bug)              500     ``internal_error`` (logged with its traceback)
=================================  ======  ==========================================

A problem has

* ``type``: ``{PUBLIC_URL or the request's origin}/problems/<code>`` (:func:`problem_type`), a page
  describing the code (:mod:`.problem_types`); relative (``/problems/<code>``) where there is no request
  and no ``PUBLIC_URL`` (``python -m service score``);
* ``title``: a short summary of the type; ``status``; ``detail``: this occurrence;
* ``code``: the stable id (the last segment of ``type``; for rule errors the
  core's ``RuleError.code``);
* ``instance``: the request path; ``request_id``: the ``X-Request-ID``;
* ``errors`` (field path → messages) for input that breaks the schema (an
  event's own members included);
* ``event`` for an event that cannot happen (its 0-based index in a settled
  round, or the seq it would have had in a table; for a refused void, the seq of
  the record that depends on the voided one);
* ``round`` with a 409 ``correction_conflict`` (the later round that would break; ``event``: its
  record's seq);
* ``version`` (the table's current version) with a 412 or a 409 ``table_full``.

A 500 never says more than "internal error": the exception is logged with the
request id, not returned.

>>> problem_body(MalformedJSON("line 1"), "/v1/hands/ting", "abc")["type"]
'/problems/malformed_json'
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import redis.exceptions
from flask import Flask, Response, current_app, g, has_app_context, has_request_context, request
from werkzeug.exceptions import HTTPException, TooManyRequests

from ..rules.errors import (
    EventError,
    HandError,
    NotationError,
    RuleError,
    RulesetError,
    WinError,
)
from ..store import errors as store_errors
from . import settings
from .jsonio import dumps

PROBLEMS_PATH = "/problems/"
"""Where the pages of the problems' codes are (``GET /problems/{code}``): a problem's ``type``."""
PROBLEM_JSON = "application/problem+json"


def problem_type(code: str, base: str | None = None) -> str:
    """A problem's ``type``: ``{base}/problems/{code}``, ``base`` being (unless given) the app's
    ``PUBLIC_URL``, else the request's origin (its root URL), else nothing (a relative reference).

    >>> problem_type("not_a_win", "https://mahjong.example")
    'https://mahjong.example/problems/not_a_win'
    """
    if base is None:
        base = settings.current().public_url if has_app_context() else None
        if not base and has_request_context():
            base = request.root_url
    return (base or "").rstrip("/") + PROBLEMS_PATH + code

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


class WithoutApiKeys(ApiProblem):
    """An operation that belongs to API keys (listing tables, webhooks) on a service run without them:
    404 as for a path the service does not have."""

    status, code, title = 404, "not_found", "Not found"


class NotReady(ApiProblem):
    status, code, title = 503, "not_ready", "Service not ready"


class FieldRuleError(Exception):
    """A :class:`RuleError` raised while loading one request field (``path``)."""

    def __init__(self, error: RuleError, path: str) -> None:
        super().__init__(str(error))
        self.error = error
        self.path = path


# titles of the HTTP errors werkzeug raises, keyed by status
HTTP_CODES = {
    400: ("bad_request", "Bad request"),
    404: ("not_found", "Not found"),
    405: ("method_not_allowed", "Method not allowed"),
    406: ("not_acceptable", "Not acceptable"),
    408: ("request_timeout", "Request timeout"),
    411: ("length_required", "Length required"),
    413: ("payload_too_large", "Payload too large"),
    414: ("uri_too_long", "URI too long"),
    415: ("unsupported_media_type", "Unsupported media type"),
    417: ("expectation_failed", "Expectation failed"),
    429: ("too_many_requests", "Too many requests"),
    431: ("request_header_fields_too_large", "Request header fields too large"),
    500: ("internal_error", "Internal server error"),
    501: ("not_implemented", "Not implemented"),
    503: ("service_unavailable", "Service unavailable"),
    505: ("http_version_not_supported", "HTTP version not supported"),
}

MEANINGS: dict[str, str] = {
    # the HTTP server and the request itself
    "bad_request": "the HTTP server could not read the request: a malformed request line or header, a "
                   "malformed chunked body, or a body cut short by its client",
    "malformed_json": "the body is not JSON: a syntax error, NaN or Infinity, a lone surrogate, bytes that are not "
                      "UTF-8, a byte-order mark, data after the document, or nesting deeper than 1024",
    "invalid_input": "valid JSON (or a header, or a query parameter) that does not match what the operation takes; "
                     "`errors` names each member at fault (a query parameter as `query.<name>`, a header by its "
                     "name), and nothing was done",
    "unsupported_media_type": "the body was not sent as `application/json` (or, for a batch, "
                              "`application/x-ndjson`)",
    "payload_too_large": "the body (or an NDJSON line) is larger than `MAX_BODY_BYTES`: send less",
    "request_timeout": "the request's body did not arrive whole within `REQUEST_TIMEOUT` seconds",
    "length_required": "the request needs a `Content-Length`",
    "uri_too_long": "the request line is longer than the server reads",
    "request_header_fields_too_large": "the request has too many headers, or one that is too long",
    "expectation_failed": "the request's `Expect` header names an expectation the server does not meet",
    "http_version_not_supported": "the request is not HTTP/1.0 or HTTP/1.1",
    "not_found": "no such path; or an operation that belongs to API keys (listing tables, webhooks) on a "
                 "service started without `API_KEYS`",
    "method_not_allowed": "the path exists but does not take this method",
    "not_acceptable": "the service cannot answer in a media type the request's `Accept` allows",
    "not_implemented": "the server does not implement what the request asks for",
    # credentials
    "unauthorized": "no table token, or not this table's (a wrong token and an unknown table are told apart by "
                    "nothing); send `Authorization: Bearer <token>` with the table's write or read token",
    "forbidden": "the table's read token on a write: only the write token (or the API key that created the "
                 "table) writes",
    "api_key_required": "the service runs with API keys: send `X-API-Key` (a table's token is enough for that "
                        "table's own operations)",
    "api_key_invalid": "the `X-API-Key` given is not a key of this service",
    "token_in_query": "a table's token in the stream's query string, where it would end up in logs: send it in "
                      "`Authorization` (a browser's `EventSource` cannot: read the stream with `fetch`)",
    # tables
    "table_not_found": "no such table, or it was deleted or expired (with API keys: not one the key created)",
    "event_not_found": "no record with this seq in the table's log",
    "round_not_found": "the table has no round with this number (yet): rounds are numbered from 1 as they start",
    "version_mismatch": "`If-Match` names another version than the table's (another phone wrote first): read the "
                        "table (`version` says where it is), decide again, and send the write with the new version",
    "idempotency_key_reused": "this `Idempotency-Key` was used before with another request (another body, or a "
                              "token rotation by another credential): make a new key for a new request",
    "idempotency_key_expired": "this `Idempotency-Key` created a table whose first response is no longer kept "
                               "(24 h): use the tokens that response gave",
    "tokens_rotated": "this `Idempotency-Key` created a table whose tokens have since been rotated: the first "
                      "response's tokens no longer work, so they are not sent again; use the tokens the rotation "
                      "answered",
    "table_deleted": "this `Idempotency-Key` created a table that has since been deleted",
    "table_full": "the table has `MAX_TABLE_EVENTS` records (`version` says how many): a void or a round's end still "
                  "fits; start a new table for more rounds",
    "table_finished": "the table was finished: it takes no more events or voids, and stays readable",
    "table_not_finished": "the table is still being played: only a finished table has a next table (finish it first)",
    "table_followed": "the finished table already has its next table (`next` names it): open that one, with the "
                      "same tokens",
    "already_voided": "the record named is already voided",
    "not_voidable": "the record named is a void itself (void the event again instead: it cannot be unvoided)",
    "too_many_streams": "this table has `STREAM_MAX_PER_TABLE` open streams on this instance: close one, or retry "
                        "after `Retry-After`",
    "stream_unavailable": "the live stream cannot be opened now (its subscription to Redis failed): retry",
    # clubs
    "club_not_found": "no such club (with API keys: not one the key created)",
    "player_not_found": "no player with this id in the club",
    "season_not_found": "no season with this id in the club (`current` names the season being played)",
    "name_taken": "the name or alias is already another player's in this club (names are compared without case)",
    "already_imported": "some evenings of this import were imported before: nothing was recorded (the same "
                        "file again is answered as a replay)",
    "player_not_in_club": "a player id named (a seat, or a merge's `into`) is not a player of this club",
    "player_seated_twice": "the table's seats name the same player twice",
    "merge_into_itself": "a player cannot be merged into itself",
    "players_met": "the two players sat at the same table: they are two people, and cannot be merged",
    "bad_rows": "rows of the CSV import cannot be read (`errors` names each by line and column): nothing was "
                "recorded",
    "empty_import": "the CSV import has no rows",
    # webhooks
    "delivery_not_found": "no delivery with this id in the webhook's deliveries log (it keeps the newest 500)",
    "webhook_not_found": "no webhook with this id among the API key's own",
    "webhook_url_refused": "the webhook URL is not `http(s)`, or resolves to a private, loopback or link-local "
                           "address (allowed only with `WEBHOOK_ALLOW_PRIVATE`)",
    "too_many_webhooks": "the API key has as many webhooks as it may: delete one first",
    # limits and the store
    "too_many_requests": "a rate limit refused the request (`limit` names which): retry after `Retry-After`",
    "store_unavailable": "the tables store (Redis) cannot serve requests right now (or none is configured): retry "
                         "after `Retry-After`; a write that got this answer may or may not have been recorded: retry "
                         "it with the same `Idempotency-Key` to find out",
    "busy": "too many writes to this table at once: retry after `Retry-After`",
    "not_replicated": "the write reached Redis but fewer replicas than `REDIS_MIN_REPLICAS` confirmed it in time: it "
                      "is not acknowledged; retry with the same `Idempotency-Key`",
    "store_evicting": "the tables store (Redis) may evict keys when full (its `maxmemory-policy` is not "
                      "`noeviction`), which would lose acknowledged writes: no write is taken until its operator "
                      "sets `noeviction`; reads still work",
    "store_full": "the tables store (Redis) is at its memory bound: nothing was written; deleting tables frees room",
    "not_ready": "`/readyz`: a readiness check failed (`checks` says which and why)",
    "service_unavailable": "the service cannot take the request now: retry after `Retry-After`",
    "internal_error": "the service failed to handle the request (a bug): quote the `request_id` when reporting it",
}
"""What each code of the HTTP layer (and of the store) means, for the page of its ``type``
(:mod:`.problem_types`); the rules core's codes carry their own (:class:`~service.rules.codes.Code`)."""

# rule errors: the title of the first matching class (most specific first)
_RULE_TITLES: tuple[tuple[type, str], ...] = (
    (EventError, "Event cannot happen"),
    (NotationError, "Invalid tile notation"),
    (HandError, "Invalid hand"),
    (WinError, "Invalid win"),
    (RulesetError, "Invalid ruleset"),
    (RuleError, "Rule violation"),
)

def rule_title(cls: type) -> str:
    """The title of the problems of a rules-core error class (of its nearest family)."""
    return next(t for family, t in _RULE_TITLES if issubclass(cls, family))


_DETAILS = {
    404: "no such resource: {path}",
    405: "method {method} is not allowed on {path}",
}

STORE_STATUS: tuple[tuple[type[store_errors.StoreError], int, str], ...] = (
    (store_errors.TableNotFound, 404, "Table not found"),
    (store_errors.EventNotFound, 404, "Event not found"),
    (store_errors.RoundNotFound, 404, "Round not found"),
    (store_errors.ClubNotFound, 404, "Club not found"),
    (store_errors.PlayerNotFound, 404, "Player not found"),
    (store_errors.SeasonNotFound, 404, "Season not found"),
    (store_errors.ClubInputError, 422, "Invalid input"),
    (store_errors.Unauthorized, 401, "Unauthorized"),
    (store_errors.Forbidden, 403, "Forbidden"),
    (store_errors.PreconditionFailed, 412, "Precondition failed"),
    (store_errors.IdempotencyMismatch, 422, "Idempotency-Key reused"),
    (store_errors.Conflict, 409, "Conflict"),
    (store_errors.RateLimited, 429, "Too many requests"),
    (store_errors.Busy, 503, "Busy"),
    (store_errors.StoreEvicting, 503, "Tables store may evict"),
    (store_errors.StoreFull, 507, "Insufficient storage"),
)


class Problem:
    """The parts of one problem response, built by the family's describer."""

    __slots__ = ("status", "code", "title", "detail", "errors", "extra", "headers")

    def __init__(self, status: int, code: str, title: str, detail: str, *,
                 errors: Mapping[str, list[str]] | None = None, extra: Mapping[str, Any] | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        self.status, self.code, self.title, self.detail = status, code, title, detail
        self.errors = dict(errors) if errors else None
        self.extra = dict(extra or {})
        self.headers = dict(headers or {})

    def body(self, path: str, request_id: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": problem_type(self.code), "title": self.title, "status": self.status,
            "detail": self.detail, "code": self.code, "instance": path,
        }
        if request_id:
            body["request_id"] = request_id
        if self.errors:
            body["errors"] = self.errors
        body.update(self.extra)
        return body


# -- one describer per family ------------------------------------------------------------
def describe_api_problem(exc: ApiProblem) -> Problem:
    return Problem(exc.status, exc.code, exc.title, exc.detail, errors=exc.errors, extra=exc.extra,
                   headers=exc.headers)


def describe_rule_error(exc: RuleError, path: str | None = None) -> Problem:
    """422 with the core's code; ``errors`` names the field (``path``, or the event's own member)."""
    title = next(t for cls, t in _RULE_TITLES if isinstance(exc, cls))
    extra: dict[str, Any] = {}
    field = exc.context.get("field")
    if isinstance(exc, EventError):
        extra["event"] = exc.event
        if field is not None and path is None:
            path = str(field)
        elif field is not None and field != "_schema":
            path = f"{path}.{field}"
    errors = {path: [getattr(exc, "reason", None) or str(exc)]} if path else None
    return Problem(422, exc.code, title, str(exc), errors=errors, extra=extra)


def describe_field_rule_error(exc: FieldRuleError) -> Problem:
    return describe_rule_error(exc.error, exc.path)


def describe_store_error(exc: store_errors.StoreError) -> Problem:
    status, title = next(((s, t) for cls, s, t in STORE_STATUS if isinstance(exc, cls)), (500, "Store error"))
    headers: dict[str, str] = {}
    extra: dict[str, Any] = {}
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="tables"'
    if status == 503:  # (an evicting Redis waits for its operator: no point in retrying at once)
        headers["Retry-After"] = "30" if isinstance(exc, store_errors.StoreEvicting) else "1"
    if isinstance(exc, store_errors.RateLimited):  # a table's own limit
        headers["Retry-After"] = str(exc.context["retry_after"])
        headers.update({"X-RateLimit-Limit": str(exc.context["amount"]), "X-RateLimit-Remaining": "0",
                        "X-RateLimit-Reset": str(int(time.time()) + exc.context["retry_after"])})
        extra["limit"] = exc.context["limit"]
    if "current" in exc.context:
        extra["version"] = exc.context["current"]
        headers["ETag"] = f'"{exc.context["current"]}"'
    if "event" in exc.context:
        extra["event"] = exc.context["event"]
    if "round" in exc.context:  # (correction_conflict: the later round that would break)
        extra["round"] = exc.context["round"]
    if "next" in exc.context:  # (table_followed: the table that follows)
        extra["next"] = exc.context["next"]
    return Problem(status, exc.code, title, exc.message, extra=extra, headers=headers,
                   errors=exc.context.get("errors"))


def describe_redis_error(exc: redis.exceptions.RedisError) -> Problem:
    # unreachable, loading, read-only, out of memory, MISCONF...: the store cannot
    # take the request now, which says nothing about the request itself
    return Problem(503, "store_unavailable", "Tables store unavailable",
                   "the tables store (Redis) cannot serve requests right now; retry shortly",
                   headers={"Retry-After": "2"})


def describe_http_exception(exc: HTTPException, path: str = "", method: str = "GET") -> Problem:
    if isinstance(exc, RateLimitExceeded):
        return describe_rate_limit(exc)
    status = exc.code or 500
    code, title = HTTP_CODES.get(status, (_slug(exc.name), exc.name))
    template = _DETAILS.get(status)
    detail = template.format(path=path, method=method) if template else _http_detail(exc)
    if status >= 500:
        detail = title
    headers = {k: v for k, v in exc.get_headers() if k.lower() not in ("content-type", "content-length")}
    return Problem(status, code, title, detail, headers=headers)


class RateLimitExceeded(TooManyRequests):
    """A rate limit refused the request (:mod:`.rate_limits`): 429, ``limit`` names it, ``rate`` says it
    ("60 per 1 hour"), ``rate_headers`` are its ``X-RateLimit-*`` and ``Retry-After``.  An HTTPException, as a
    body cut short is, so that an NDJSON job answers either as its last line."""

    def __init__(self, limit: str, rate: str, headers: Mapping[str, str]) -> None:
        super().__init__(description=f"rate limit {rate} ({limit}) reached")
        self.limit, self.rate, self.rate_headers = limit, rate, dict(headers)


def describe_rate_limit(exc: RateLimitExceeded) -> Problem:
    """429 from a client's (or a table's reads) limit: ``limit`` names the limit that refused."""
    return Problem(429, "too_many_requests", "Too many requests",
                   f"rate limit {exc.rate} ({exc.limit}) reached; retry after Retry-After",
                   extra={"limit": exc.limit}, headers=exc.rate_headers)


def describe_bug(exc: BaseException) -> Problem:
    return Problem(500, "internal_error", "Internal server error",
                   "the server failed to handle the request; quote the request id when reporting it")


def describe(exc: BaseException, path: str = "", method: str = "GET") -> Problem:
    """The problem for any exception (for callers outside a Flask error handler)."""
    if isinstance(exc, ApiProblem):
        return describe_api_problem(exc)
    if isinstance(exc, store_errors.StoreError):
        return describe_store_error(exc)
    if isinstance(exc, redis.exceptions.RedisError):
        return describe_redis_error(exc)
    if isinstance(exc, FieldRuleError):
        return describe_field_rule_error(exc)
    if isinstance(exc, RuleError):
        return describe_rule_error(exc)
    if isinstance(exc, HTTPException) and exc.code and exc.code >= 400:
        return describe_http_exception(exc, path, method)
    return describe_bug(exc)


def problem_body(exc: BaseException, path: str, request_id: str | None) -> dict[str, Any]:
    """The problem object for ``exc`` (without headers)."""
    return describe(exc, path).body(path, request_id)


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name.lower()).strip("_") or "error"


def _http_detail(exc: HTTPException) -> str:
    if exc.code == 413:
        limit = current_app.config.get("MAX_CONTENT_LENGTH") if current_app else None
        return f"the request body is larger than {limit} bytes" if limit else "the request body is too large"
    text = exc.description or exc.name
    return " ".join(str(text).split())


def _where() -> tuple[str, str, str | None]:
    if not has_request_context():
        return "", "GET", None
    return request.path, request.method, g.get("request_id")


def respond(problem: Problem) -> Response:
    path, _, request_id = _where()
    return make_problem(problem.body(path, request_id), problem.status, problem.headers)


def make_problem(body: Mapping[str, Any], status: int, headers: Mapping[str, str] | None = None) -> Response:
    response = Response(dumps(body), status=status, mimetype=PROBLEM_JSON)
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


# -- the handlers ---------------------------------------------------------------------------
def _on_http_exception(exc: HTTPException):
    if exc.code is None or exc.code < 400:
        return exc  # redirects and the like pass through
    path, method, request_id = _where()
    problem = describe_http_exception(exc, path, method)
    if problem.status >= 500:
        _log_bug(exc, method, path, request_id)
    return make_problem(problem.body(path, request_id), problem.status, problem.headers)


def _on_store_error(exc: store_errors.StoreError) -> Response:
    problem = describe_store_error(exc)
    if problem.status >= 500:  # the store cannot take the request now (full, busy): not a bug
        path, method, request_id = _where()
        log.warning("tables store unavailable (%s: %s) on %s %s (request %s)",
                    type(exc).__name__, exc, method, path, request_id)
    return respond(problem)


def _on_redis_error(exc: redis.exceptions.RedisError) -> Response:
    path, method, request_id = _where()
    log.warning("tables store unavailable (%s: %s) on %s %s (request %s)",
                type(exc).__name__, exc, method, path, request_id)
    return respond(describe_redis_error(exc))


def _on_bug(exc: Exception) -> Response:
    path, method, request_id = _where()
    _log_bug(exc, method, path, request_id)
    return respond(describe_bug(exc))


def _log_bug(exc: BaseException, method: str, path: str, request_id: str | None) -> None:
    original = getattr(exc, "original_exception", None) or exc
    log.error("unhandled error %s on %s %s (request %s)", type(original).__name__, method, path, request_id,
              exc_info=(type(original), original, original.__traceback__))


HANDLERS: tuple[tuple[type, Any], ...] = (
    (ApiProblem, lambda exc: respond(describe_api_problem(exc))),
    (store_errors.StoreError, _on_store_error),
    (redis.exceptions.RedisError, _on_redis_error),
    (FieldRuleError, lambda exc: respond(describe_field_rule_error(exc))),
    (RuleError, lambda exc: respond(describe_rule_error(exc))),
    (HTTPException, _on_http_exception),
    (Exception, _on_bug),
)


def register(app: Flask) -> None:
    """Install one handler per exception family (Flask dispatches on the class)."""
    for family, handler in HANDLERS:
        app.register_error_handler(family, handler)
