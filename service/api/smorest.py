"""flask-smorest adapted to the service: strict JSON bodies, problem+json errors.

* :class:`JsonBodyParser` reads a request body as JSON only when the content
  type says JSON (else 415), rejects malformed JSON, ``NaN``/``Infinity``, lone
  surrogates and over-deep nesting (400), and turns schema errors into
  :class:`~service.api.problems.InvalidInput` with flat field paths (422).
* :class:`Blueprint` uses that parser; :class:`Api` documents every error
  response as ``application/problem+json`` and leaves error handling to
  :mod:`service.api.problems` (flask-smorest's own handler is not installed);
  ``Blueprint.problems(...)`` documents an operation's problem responses.

>>> flatten_messages({"hand": {"melds": {0: {"tile": ["Missing data for required field."]}}}})
{'hand.melds.0.tile': ['Missing data for required field.']}
>>> flatten_messages({"_schema": ["Invalid input type."]})
{'_schema': ['Invalid input type.']}
"""

from __future__ import annotations

import http
import json
import re
from functools import wraps
from typing import Any

import flask_smorest
import orjson
from flask import request
from flask_smorest.utils import prepare_response
from marshmallow import Schema, ValidationError
from webargs import core
from werkzeug.exceptions import RequestEntityTooLarge
from webargs.flaskparser import FlaskParser

from .problems import PROBLEM_JSON, InvalidInput, MalformedJSON, UnsupportedMediaType

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


_LONG_DIGITS = re.compile(rb"[0-9]{19}")


def parse_json_body(raw: bytes) -> Any:
    """Decode a request body as strict JSON, raising :class:`MalformedJSON`.

    orjson decodes it when it can and would give what :mod:`json` gives: it
    refuses everything :mod:`json` refuses here (malformed text, ``NaN``, lone
    surrogates, bytes that are not UTF-8, a byte-order mark) and a little more
    (nesting past 1024, numbers past a double's range), and those go to
    :mod:`json`, whose result or error message stands.  A run of 19 digits or
    more goes to :mod:`json` at once: orjson reads an integer past 64 bits as a
    float.
    """
    if _LONG_DIGITS.search(raw) is None:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # json says why (or, for what only orjson refuses, decodes it)
    return parse_json_body_stdlib(raw)


def parse_json_body_stdlib(raw: bytes) -> Any:
    """:func:`parse_json_body` with :mod:`json` alone (the reference the tests compare with)."""
    if not raw.strip():
        raise MalformedJSON("the request body is empty; a JSON object is expected")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedJSON(f"the request body is not UTF-8 (byte {exc.start})") from None
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise MalformedJSON(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise MalformedJSON("invalid JSON: nested too deeply") from None
    except ValueError as exc:  # NaN/Infinity, integers too long to convert
        raise MalformedJSON(f"invalid JSON: {exc}") from None
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(data):
        raise MalformedJSON("invalid JSON: a string holds an unpaired UTF-16 surrogate")
    return data


def _has_lone_surrogate(data: Any) -> bool:
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


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
    # (the exact common header first: parsing it costs more than the rest of this check)
    if req.environ.get("CONTENT_TYPE") != "application/json" and not core.is_json(req.mimetype):
        got = req.mimetype or "no content type"
        raise UnsupportedMediaType(f"the request body must be application/json, got {got}")
    raw = req.get_data(cache=True)
    if req.content_length is None:
        # A body without Content-Length (chunked) is cut at the limit by
        # werkzeug without an error: anything left unread makes it too large.
        limit = req.max_content_length
        if limit is not None and len(raw) >= limit and req.environ["wsgi.input"].read(1):
            raise RequestEntityTooLarge()
    return parse_json_body(raw)


def invalid_input(messages: Any) -> InvalidInput:
    """The 422 for marshmallow's ``messages``: flat field paths, the first one in the detail."""
    errors = flatten_messages(messages)
    first = next(iter(errors.items()), None)
    detail = "the request body does not match the schema"
    if first:
        where = "" if first[0] == "_schema" else f"{first[0]}: "
        detail += f" ({where}{first[1][0]})"
    return InvalidInput(detail, errors=errors)


def load_json_body(schema: Schema) -> Any:
    """The request's JSON body loaded by ``schema`` (its own ``unknown``: RAISE), or a problem.

    A schema's ``quick_load(data)``, when it has one, goes first: the same result
    for the bodies it takes, None for the others.
    """
    data = read_json_body(request)
    quick = getattr(schema, "quick_load", None)
    if quick is not None:
        loaded = quick(data)
        if loaded is not None:
            return loaded
    try:
        return schema.load(data)
    except ValidationError as error:
        raise invalid_input(error.messages) from None


class JsonBodyParser(FlaskParser):
    """webargs parser with the service's error model (the query-string arguments)."""

    def _raw_load_json(self, req) -> Any:
        return read_json_body(req)

    def handle_error(self, error, req, schema, *, error_status_code, error_headers):
        messages = error.messages
        if isinstance(messages, dict) and set(messages) == {"json"}:
            messages = messages["json"]
        raise invalid_input(messages)


JSON_BODY = (400, 413, 415, 422)
"""What every operation with a JSON body can answer besides its success."""

_PROBLEM_HEADERS = {
    401: {"WWW-Authenticate": "the scheme to use (Bearer for a table token)"},
    412: {"ETag": "the table's current version"},
    429: {"Retry-After": "seconds until the limit lets the request through"},
    503: {"Retry-After": "seconds to wait before retrying"},
}


def _documentation_only(decorator: Any) -> Any:
    """A flask-smorest decorator that only documents, applied without its run-time wrapper.

    flask-smorest wraps the view in one more function per decorator (each looking
    up ``current_app`` on every call) even where the decorator only adds to the
    OpenAPI document; the document is the wrapper's ``_apidoc``, kept here on the
    view itself.
    """
    def decorate(func):
        func._apidoc = decorator(func)._apidoc
        return func

    return decorate


class Blueprint(flask_smorest.Blueprint):
    """flask-smorest's Blueprint with the service's JSON parser and its documentation helpers.

    A JSON body (``arguments(schema)``) is read by :func:`load_json_body` straight
    from the view's wrapper (what webargs did for it, minus its generic
    machinery); other locations (the query string) go through webargs.
    ``doc`` and ``alt_response`` (so ``problems``) add to the document only.
    """

    ARGUMENTS_PARSER = JsonBodyParser()

    def arguments(self, schema: Any, *, location: str = "json", **kwargs: Any):
        document = super().arguments(schema, location=location, **kwargs)
        if location != "json" or not isinstance(schema, Schema) or \
                set(kwargs) - {"example", "examples", "description", "required", "content_type"}:
            return document

        def decorate(func):
            @wraps(func)
            def view(*args: Any, **view_args: Any) -> Any:
                return func(*args, load_json_body(schema), **view_args)

            view._apidoc = document(func)._apidoc  # type: ignore[attr-defined]
            return view

        return decorate

    def alt_response(self, *args: Any, **kwargs: Any):
        return _documentation_only(super().alt_response(*args, **kwargs))

    @staticmethod
    def doc(**kwargs: Any):
        return _documentation_only(flask_smorest.Blueprint.doc(**kwargs))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._prepare_doc_cbks.append(self._prepare_headers_doc)

    def headers(self, *parameters: dict):
        """Document header parameters of an operation, beside those of its ``arguments``."""
        def decorate(func):
            func._apidoc = getattr(func, "_apidoc", {})
            func._apidoc.setdefault("headers", []).extend(parameters)
            return func

        return decorate

    @staticmethod
    def _prepare_headers_doc(doc, doc_info, **kwargs):
        if doc_info.get("headers"):
            doc.setdefault("parameters", []).extend(doc_info["headers"])
        return doc

    def problems(self, *statuses: "int | tuple[int, str]"):
        """Document the problem+json responses an operation gives besides its success.

        A status alone refers to the shared response of that status; ``(status,
        description)`` documents what the status means for this operation (its
        codes), still with the ``Problem`` schema.
        """
        def decorate(func):
            for item in statuses:
                status, description = item if isinstance(item, tuple) else (item, None)
                if description is None:
                    func = self.alt_response(status, http.HTTPStatus(status).name)(func)
                else:
                    func = self.alt_response(
                        status, description=description, schema=_problem_schema(),
                        content_type=PROBLEM_JSON, headers=_problem_headers(status),
                    )(func)
            return func

        return decorate


def _problem_schema():
    from .schemas import ProblemSchema

    return ProblemSchema


def _problem_headers(status: int) -> dict | None:
    headers = _PROBLEM_HEADERS.get(status)
    if not headers:
        return None
    return {name: {"description": text, "schema": {"type": "string"}} for name, text in headers.items()}


class Api(flask_smorest.Api):
    """flask-smorest Api whose documented errors are problem+json."""

    DEFAULT_ERROR_RESPONSE_NAME = "DEFAULT_ERROR"

    def _register_error_handlers(self) -> None:
        """Errors are handled by the handlers of :mod:`service.api.problems`."""

    def _register_responses(self) -> None:
        from .schemas import ProblemSchema

        for status in http.HTTPStatus:
            if status < 400:
                continue
            response = {"description": status.phrase, "schema": ProblemSchema}
            headers = _problem_headers(status)
            if headers:
                response["headers"] = headers
            prepare_response(response, self.spec, PROBLEM_JSON)
            self.spec.components.response(status.name, response, lazy=True)
        response = {"description": "Error (RFC 9457 problem details)", "schema": ProblemSchema}
        prepare_response(response, self.spec, PROBLEM_JSON)
        self.spec.components.response(self.DEFAULT_ERROR_RESPONSE_NAME, response, lazy=True)
