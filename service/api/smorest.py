"""flask-smorest set up for the service: strict JSON bodies, problem+json errors.

* :data:`PARSER` is webargs' Flask parser with the service's JSON location
  (:func:`read_json_body`: 415 unless the content type is JSON, 413 over the
  size limit, 400 for JSON that does not parse) and its error model: a schema
  error is :class:`~service.api.problems.InvalidInput` with flat field paths
  (422).
* :class:`Blueprint` uses that parser and documents an operation's problem
  responses (``Blueprint.problems(...)``) as ``application/problem+json``.
* :class:`Api` adds no default error response; the errors themselves are
  handled by :mod:`service.api.problems`.

>>> flatten_messages({"hand": {"melds": {0: {"tile": ["Missing data for required field."]}}}})
{'hand.melds.0.tile': ['Missing data for required field.']}
>>> flatten_messages({"_schema": ["Invalid input type."]})
{'_schema': ['Invalid input type.']}
"""

from __future__ import annotations

import http
from typing import Any

import flask_smorest
from webargs import core
from webargs.flaskparser import FlaskParser
from werkzeug.exceptions import RequestEntityTooLarge

from . import jsonio
from .problems import PROBLEM_JSON, InvalidInput, MalformedJSON, UnsupportedMediaType
from .schemas import ProblemSchema


def flatten_messages(messages: Any, prefix: str = "") -> dict[str, list[str]]:
    """marshmallow's nested error messages → ``{"a.b.0.c": [messages]}``.

    Schema-level messages (``_schema``) belong to the object that holds them;
    at the top they stay under ``_schema``.
    """
    out: dict[str, list[str]] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                key = str(key)
                if key == "_schema":
                    walk(value, path or "_schema")
                else:
                    walk(value, f"{path}.{key}" if path else key)
        elif isinstance(node, (list, tuple)):
            for item in node:
                if isinstance(item, (dict, list, tuple)):
                    walk(item, path)
                else:
                    out.setdefault(path or "_schema", []).append(str(item))
        else:
            out.setdefault(path or "_schema", []).append(str(node))

    walk(messages, prefix)
    return out


def read_json_body(req) -> Any:
    """A request's body as strict JSON: 415 unless the content type is JSON, 413 over the
    size limit (chunked bodies included), 400 when it does not parse."""
    if not core.is_json(req.mimetype):
        got = req.mimetype or "no content type"
        raise UnsupportedMediaType(f"the request body must be application/json, got {got}")
    raw = req.get_data(cache=True)
    if req.content_length is None:
        # A body without Content-Length (chunked) is cut at the limit by
        # werkzeug without an error: anything left unread makes it too large.
        limit = req.max_content_length
        if limit is not None and len(raw) >= limit and req.environ["wsgi.input"].read(1):
            raise RequestEntityTooLarge()
    return parse_json(raw)


def parse_json(raw: bytes) -> Any:
    """A body (or an NDJSON line) as strict JSON, or the 400 :class:`MalformedJSON` saying why not; JSON with
    a number past a double's range is the 422 :class:`InvalidInput` naming its member."""
    try:
        return jsonio.loads(raw)
    except jsonio.NotJson as exc:
        raise MalformedJSON(str(exc)) from None
    except jsonio.OutOfRange as exc:
        raise InvalidInput(str(exc), errors={exc.member: [jsonio.OUT_OF_RANGE]}) from None


_WHAT = {"query": "a query parameter is invalid", "headers": "a header is invalid",
         "json": "the request body does not match the schema"}


def invalid_input(messages: Any, location: str = "json") -> InvalidInput:
    """The 422 for marshmallow's ``messages`` about the request's ``location`` (``json``: its body,
    ``query``, ``headers``; ``location``: messages by location, as webargs gives them): flat field
    paths (a query parameter's as ``query.<name>``, a header's by its name), the first one in the detail.

    >>> invalid_input({"limit": ["Too big."]}, "query").detail
    'a query parameter is invalid (query.limit: Too big.)'
    """
    if location == "location":  # {location: messages}: each location's own paths
        errors: dict[str, list[str]] = {}
        for where, found in messages.items():
            errors |= _located(found, where)
        first_location = next(iter(messages), "json")
    else:
        errors, first_location = _located(messages, location), location
    first = next(iter(errors.items()), None)
    detail = _WHAT.get(first_location, _WHAT["json"])
    if first:
        where = "" if first[0] == "_schema" else f"{first[0]}: "
        detail += f" ({where}{first[1][0]})"
    return InvalidInput(detail, errors=errors)


def _located(messages: Any, location: str) -> dict[str, list[str]]:
    """Flat paths of one location's messages: a body's and a header's as they are, others under their
    location (``query.limit``)."""
    return flatten_messages(messages, "" if location in ("json", "headers") else location)


PARSER = FlaskParser()


@PARSER.location_loader("json")
def _load_json(request, schema) -> Any:
    return read_json_body(request)


@PARSER.error_handler
def _on_invalid(error, req, schema, *, error_status_code, error_headers):
    raise invalid_input(error.messages, "location")  # {location: messages}


JSON_BODY = (400, 413, 415, 422)
"""What every operation with a JSON body can answer besides its success."""

_PROBLEM_HEADERS = {
    401: {"WWW-Authenticate": "the scheme to use (Bearer for a table token)"},
    412: {"ETag": "the table's current version"},
    429: {"Retry-After": "seconds until the limit lets the request through"},
    503: {"Retry-After": "seconds to wait before retrying"},
}


def _problem_headers(status: int) -> dict | None:
    headers = _PROBLEM_HEADERS.get(status)
    if not headers:
        return None
    return {name: {"description": text, "schema": {"type": "string"}} for name, text in headers.items()}


class Blueprint(flask_smorest.Blueprint):
    """flask-smorest's Blueprint with the service's parser and its problem documentation."""

    ARGUMENTS_PARSER = PARSER

    def problems(self, *statuses: int | tuple[int, str]):
        """Document the problem+json responses an operation gives besides its success.

        A status alone is documented with its reason phrase; ``(status,
        description)`` says what the status means for this operation (its codes).
        """
        def decorate(func):
            for item in statuses:
                status, description = item if isinstance(item, tuple) else (item, http.HTTPStatus(item).phrase)
                func = self.alt_response(status, description=description, schema=ProblemSchema,
                                         content_type=PROBLEM_JSON, headers=_problem_headers(status))(func)
            return func

        return decorate


class Api(flask_smorest.Api):
    """flask-smorest's Api without its default error response: every operation lists its own problems
    (:meth:`Blueprint.problems`, RFC 9457's :class:`ProblemSchema`)."""

    DEFAULT_ERROR_RESPONSE_NAME = None
