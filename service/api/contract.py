"""What every operation of the OpenAPI document says beside its bodies, added in one place.

An apispec plugin (:class:`ContractPlugin`, registered by the app factory) goes
over each operation as it is documented and adds:

* ``X-Request-ID`` to every response (the service echoes or makes one);
* ``X-RateLimit-Limit``, ``-Remaining``, ``-Reset`` to the answers of an operation
  that can be rate limited (it documents a 429), ``Retry-After`` to its 429;
* ``Idempotent-Replayed`` to the success of an operation that takes an
  ``Idempotency-Key``;
* to each problem response, the ``code``\\s it can carry, as ``x-problem-codes``: the
  codes its description names (in backticks) and those every such status may carry
  (:data:`STATUS_CODES`), from :func:`all_codes`, the service's every code.  The
  response's schema stays the one ``Problem`` (its ``code`` the enum ``ProblemCode``):
  a client generated with a generator's default options then has one problem type,
  named as the docs name it (openapi-python-client makes a class of its own, sharing
  nothing, for each response whose schema narrows ``Problem`` with ``allOf``).

and to each schema (:meth:`ContractPlugin.schema_helper`): a member that is not
``required`` carries no ``default`` keyword; its default is said in its
description instead.  A generator's default options take a ``default`` for "always
present" (openapi-typescript's ``defaultNonNullable``, on by default, makes such a
member required in the type), so the minimal bodies (``{"hand": {"tiles"}, "win":
{"tile"}}``) would not compile against types generated as they come; the service
fills the default in where the member is absent, which is what the description says.

>>> "store_full" in all_codes() and "not_a_win" in all_codes() and "too_many_requests" in all_codes()
True
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

from apispec import BasePlugin

from ..rules.codes import Code
from ..store import errors as store_errors

STATUS_CODES: dict[int, tuple[str, ...]] = {
    400: ("malformed_json", "bad_request"),
    401: ("unauthorized", "api_key_required", "api_key_invalid"),
    403: ("forbidden",),
    404: ("not_found", "table_not_found"),
    405: ("method_not_allowed",),
    412: ("version_mismatch",),
    413: ("payload_too_large",),
    415: ("unsupported_media_type",),
    422: ("invalid_input",),
    429: ("too_many_requests",),
    503: ("store_unavailable", "busy", "not_replicated", "not_ready"),
    507: ("store_full",),
}
"""Codes a problem of each status may carry whatever the operation."""

LIMITS = ("tables_per_hour", "client_events", "client_voids", "client_reads", "table_events", "table_voids",
          "table_reads", "client_batch_items", "client_webhook_calls", "client_webhook_sends")
"""What a 429 problem's ``limit`` names: each setting of :data:`service.config.LIMITS` as
:func:`service.api.rate_limits.limit_name` says it (``tests/test_api_limits.py`` checks that they agree)."""

PROBLEM_CODES = "x-problem-codes"
"""The extension of a problem response that lists the codes it may carry."""
_CODE = re.compile(r"`([a-z][a-z0-9_]*)`")
_HEADERS = {
    "RequestId": {"description": "the request's id: the client's X-Request-ID when valid, else a fresh one",
                  "schema": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,128}$"}},
    "RateLimitLimit": {"description": "the limit closest to refusing: its size", "schema": {"type": "integer"}},
    "RateLimitRemaining": {"description": "requests that limit lets through before it refuses",
                           "schema": {"type": "integer"}},
    "RateLimitReset": {"description": "when that limit's window ends (Unix time, seconds)",
                       "schema": {"type": "integer"}},
    "RetryAfter": {"description": "seconds to wait before retrying", "schema": {"type": "integer"}},
    "IdempotentReplayed": {"description": "`true` when this is the first answer to the same request under the "
                                          "same Idempotency-Key, replayed (nothing new was recorded)",
                           "schema": {"type": "string", "enum": ["true"]}},
}


@lru_cache(maxsize=1)
def all_codes() -> tuple[str, ...]:
    """Every ``code`` a problem of the service may carry, sorted."""
    from . import callers, problems, stream, table_views  # noqa: F401  (every ApiProblem class defined)

    found: set[str] = {str(c) for c in Code} | set(store_errors.CONFLICT_CODES) | set(store_errors.CLUB_INPUT_CODES)
    found |= {code for code, _ in problems.HTTP_CODES.values()}
    found |= {"store_unavailable", "internal_error", *(c for codes in STATUS_CODES.values() for c in codes)}

    def walk(cls: type[Exception]) -> None:
        for sub in cls.__subclasses__():
            code = vars(sub).get("code")  # a code of its own, not one inherited
            if isinstance(code, str):
                found.add(code)
            walk(sub)

    walk(problems.ApiProblem)
    walk(store_errors.StoreError)
    return tuple(sorted(found))


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/headers/{name}"}


class ContractPlugin(BasePlugin):
    """apispec plugin adding the headers and the problem codes of every operation (see the module)."""

    def init_spec(self, spec) -> None:
        super().init_spec(spec)
        for name, header in _HEADERS.items():
            spec.components.header(name, header)
        spec.components.schema("ProblemCode", component={
            "type": "string", "enum": list(all_codes()),
            "description": "every stable error id of the service (docs/api.md, docs/rules.md#codes)"})
        spec.components.schema("RateLimitName", component={
            "type": "string", "enum": list(LIMITS), "description": "the rate limit that refused (429)"})

    def schema_helper(self, name, definition, **kwargs) -> None:
        """An optional member's ``default`` moves to its description (see the module): the definition
        as the marshmallow plugin (before this one) converted it, changed in place."""
        required = set(definition.get("required", ()))
        for member, prop in (definition.get("properties") or {}).items():
            if member in required or not isinstance(prop, dict) or "default" not in prop:
                continue
            default = prop.pop("default")
            said = prop.get("description", "")
            if "default" not in said:
                shown = json.dumps(default, ensure_ascii=False)
                prop["description"] = f"{said}; absent: `{shown}`" if said else f"absent: `{shown}`"

    def operation_helper(self, path=None, operations=None, **kwargs) -> None:
        known = set(all_codes())
        for operation in (operations or {}).values():
            if not isinstance(operation, dict):
                continue
            responses = operation.get("responses", {})
            limited = any(str(status) == "429" for status in responses)
            keyed = any(isinstance(p, dict) and p.get("name") == "Idempotency-Key"
                        for p in operation.get("parameters", ()))
            for status, response in responses.items():
                if not isinstance(response, dict) or "$ref" in response:
                    continue
                headers = response.setdefault("headers", {})
                headers.setdefault("X-Request-ID", _ref("RequestId"))
                code = int(status)
                if limited and (code < 300 or code == 429):
                    headers.setdefault("X-RateLimit-Limit", _ref("RateLimitLimit"))
                    headers.setdefault("X-RateLimit-Remaining", _ref("RateLimitRemaining"))
                    headers.setdefault("X-RateLimit-Reset", _ref("RateLimitReset"))
                if code == 429:
                    headers["Retry-After"] = _ref("RetryAfter")
                if keyed and 200 <= code < 300:
                    headers.setdefault("Idempotent-Replayed", _ref("IdempotentReplayed"))
                if code >= 400:
                    self._narrow(response, code, known)

    @staticmethod
    def _narrow(response: dict, status: int, known: set[str]) -> None:
        """The codes this problem response may carry, as ``x-problem-codes`` (see the module)."""
        named = [c for c in _CODE.findall(response.get("description", "")) if c in known]
        codes = sorted(set(named) | set(STATUS_CODES.get(status, ())))
        if status == 422:  # and any of the rules core's codes (a hand, a ruleset, an event it checks)
            codes = sorted(set(codes) | {str(c) for c in Code})
        if codes and any(content.get("schema") == {"$ref": "#/components/schemas/Problem"}
                         for content in response.get("content", {}).values()):
            response[PROBLEM_CODES] = codes
