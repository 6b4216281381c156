"""`/v1/tables`: the live log of a physical game (thin views over the store).

Writes take ``Authorization: Bearer <write token>``; reads take either token.
``If-Match: "<version>"`` makes a write conditional (412 when stale) and
``Idempotency-Key`` makes a retry replay the first response
(``Idempotent-Replayed: true``).
"""

from __future__ import annotations

import re

from flask import Response, current_app, jsonify, request
from marshmallow import ValidationError

from ..store.tables import Access, TableNotFound, TableStore, Unauthorized, fingerprint
from . import table_schemas as ts
from .hands import errors
from .problems import ApiProblem, InvalidInput
from .smorest import Blueprint, flatten_messages, read_json_body

blp = Blueprint("tables", __name__, url_prefix="/v1/tables",
                description="The live table log: rounds, events, balances, undo.")

_TABLE_ID = re.compile(r"[0-9a-f]{16}")
_IDEM_KEY = re.compile(r"^[\x21-\x7e]{1,%d}$" % ts.MAX_IDEMPOTENCY_KEY)
_VERSION = re.compile(r'^(W/)?"(\d{1,40})"$')
NEVER = -1  # a version no table has: a weak tag never matches If-Match (RFC 9110 §13.1.1)

AUTH = [{"bearer": []}]
MIN_CREATE_KEY = 16

# OpenAPI links: how a client (or a stateful fuzzer) goes from one call to the next.
_SAME_TABLE = {"path.table_id": "$request.path.table_id", "header.Authorization": "$request.header.Authorization"}
_NEW_TABLE = {"path.table_id": "$response.body#/id", "header.Authorization": "Bearer {$response.body#/token}"}
_READ_TABLE = {"path.table_id": "$response.body#/id", "header.Authorization": "Bearer {$response.body#/read_token}"}


def _links(params: dict, start_round: bool = False, void: bool = False) -> dict:
    links = {
        "GetTable": {"operationId": "getTable", "parameters": params},
        "ListEvents": {"operationId": "listEvents", "parameters": params},
        "PostEvent": {"operationId": "postEvent", "parameters": params},
    }
    if start_round:
        links["StartRound"] = {"operationId": "postEvent", "parameters": params,
                               "requestBody": {"type": "round_start"}}
    if void:
        links["VoidEvent"] = {"operationId": "voidEvent", "parameters": {**params, "path.seq": "$response.body#/seq"}}
    return links
WRITE_HEADERS = [
    {"in": "header", "name": "Idempotency-Key", "required": False,
     "schema": {"type": "string", "maxLength": ts.MAX_IDEMPOTENCY_KEY},
     "description": "a retry with the same key returns the first response; another body: 422"},
]
IF_MATCH = {"in": "header", "name": "If-Match", "required": False, "schema": {"type": "string"},
            "description": 'the version the write expects, as "<version>"; stale: 412'}


def responds(*statuses: int):
    """Document the error responses a table operation can give (besides its success)."""
    names = {400: "BAD_REQUEST", 401: "UNAUTHORIZED", 403: "FORBIDDEN", 404: "NOT_FOUND", 409: "CONFLICT",
             412: "PRECONDITION_FAILED", 422: "UNPROCESSABLE_ENTITY", 429: "TOO_MANY_REQUESTS",
             503: "SERVICE_UNAVAILABLE"}

    def decorate(func):
        for status in statuses:
            func = blp.alt_response(status, names[status])(func)
        return func

    return decorate


class StoreNotConfigured(ApiProblem):
    status, code, title = 503, "store_unavailable", "Tables store unavailable"


def store() -> TableStore:
    s = current_app.extensions.get("tables")
    if s is None:
        raise StoreNotConfigured("no Redis is configured for tables (set REDIS_URL)",
                                 headers={"Retry-After": "5"})
    return s


def _table_id(table_id: str) -> str:
    if not _TABLE_ID.fullmatch(table_id):
        if _token() is None:  # as for a real table: no token, no answer about existence
            raise Unauthorized("this table needs 'Authorization: Bearer <token>'")
        raise TableNotFound(f"no table {table_id!r}")
    return table_id


def _token() -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def _idempotency_key() -> str | None:
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not _IDEM_KEY.match(key):
        raise InvalidInput("Idempotency-Key must be 1-128 visible ASCII characters",
                           errors={"Idempotency-Key": ["1-128 visible ASCII characters"]})
    return key


def _if_match() -> int | tuple[int, ...] | None:
    """The version(s) an ``If-Match`` accepts; ``*`` (any existing table) and no header: None.

    A list (``"3", "4"``) accepts any of its versions; a weak tag never matches.
    """
    raw = request.headers.get("If-Match")
    if raw is None or raw.strip() == "*":
        return None
    versions = []
    for tag in raw.split(","):
        m = _VERSION.match(tag.strip())
        if not m:
            raise InvalidInput('If-Match must be a version in quotes, e.g. "12"',
                               errors={"If-Match": ['a version in quotes, e.g. "12"']})
        versions.append(NEVER if m.group(1) else int(m.group(2)))
    return versions[0] if len(versions) == 1 else tuple(versions)


def _reply(reply) -> Response:
    response = jsonify(reply.body)
    response.status_code = reply.status
    for k, v in reply.headers.items():
        response.headers[k] = v
    if reply.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return response


def _no_content(status: int) -> Response:
    """A response without a body, and so without a ``Content-Type`` (Werkzeug would add text/html)."""
    response = Response(status=status)
    del response.headers["Content-Type"]
    return response


def _json_body() -> dict:
    """The request body as JSON (415/413/400 as for every JSON POST)."""
    return read_json_body(request)


@blp.route("", methods=["POST"])
@blp.arguments(ts.CreateTableRequest(), example={"players": ["东", "南", "西", "北"], "ruleset": "xuezhan", "dealer": 0})
@blp.response(201, ts.TableCreated, headers={"Location": {"schema": {"type": "string"}}})
@responds(429, 503)
@blp.doc(parameters=WRITE_HEADERS, operationId="createTable",
         responses={201: {"links": {**_links(_NEW_TABLE, start_round=True),
                                      "ReadTable": {"operationId": "getTable", "parameters": _READ_TABLE},
                                      "DeleteTable": {"operationId": "deleteTable", "parameters": _NEW_TABLE}}}})
@errors
def create_table(args):
    """Create a table. Its write `token` and `read_token` are shown only in this response."""
    key = _idempotency_key()
    if key is not None and len(key) < MIN_CREATE_KEY:
        # the key alone finds the table again (and replays its tokens): it must be unguessable
        raise InvalidInput(f"an Idempotency-Key that creates a table must be at least {MIN_CREATE_KEY} "
                           "characters: use a random UUID",
                           errors={"Idempotency-Key": [f"at least {MIN_CREATE_KEY} characters"]})
    fp = fingerprint("POST", request.path, request.get_json(silent=True))
    reply = store().create(args["players"], args["ruleset"], args["dealer"], idempotency_key=key, fp=fp)
    return _reply(reply)


@blp.route("/<table_id>", methods=["GET"])
@blp.response(200, ts.TableView, headers={"ETag": {"schema": {"type": "string"}}})
@blp.alt_response(304, description="Not modified (If-None-Match)")
@responds(401, 403, 404, 503)
@blp.doc(security=AUTH, operationId="getTable")
def get_table(table_id):
    """A table: players, ruleset, version, balances, the current round and the ended rounds."""
    s = store()
    tid = _table_id(table_id)
    view = s.get(tid, Access(_token(), write=False))
    etag = f'"{view["version"]}"'
    if request.if_none_match.contains_weak(str(view["version"])):  # weak comparison (RFC 9110 §13.1.2)
        response = _no_content(304)
    else:
        response = jsonify(view)
    response.headers["ETag"] = etag
    return response


@blp.route("/<table_id>", methods=["DELETE"])
@blp.response(204)
@responds(401, 403, 404, 503)
@blp.doc(security=AUTH, operationId="deleteTable")
def delete_table(table_id):
    """Delete a table and its whole log (write token)."""
    s = store()
    tid = _table_id(table_id)
    s.authorize(tid, _token(), write=True)
    s.delete(tid)
    return _no_content(204)


@blp.route("/<table_id>/events", methods=["POST"])
@blp.doc(requestBody={
    "required": True,
    "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/TableEvent"},
        "example": {"type": "kong", "seat": 0, "kind": "direct", "tile": "5m", "from": 2},
    }},
})
@blp.response(201, ts.EventAppended, headers={"ETag": {"schema": {"type": "string"}}})
@responds(401, 403, 404, 409, 412, 503)
@blp.doc(security=AUTH, parameters=WRITE_HEADERS + [IF_MATCH], operationId="postEvent",
         responses={201: {"links": _links(_SAME_TABLE, start_round=True, void=True)}})
@errors
def post_event(table_id):
    """Append an event: a round event of API.md, `round_start` or `round_end`.

    The event is validated against the round as it stands; an event the rules
    reject is a 422 with a stable `code` and `event` (the seq it would have had).
    """
    s = store()
    tid = _table_id(table_id)
    token = _token()  # checked with the state, in the store's one read before the append
    body = _json_body()
    if not isinstance(body, dict):
        raise InvalidInput("the event must be a JSON object", errors={"_schema": ["Invalid input type."]})
    try:
        ts.TableEventField().deserialize(body)
    except ValidationError as exc:
        raise InvalidInput("the event does not match its schema", errors=flatten_messages(exc.messages)) from None
    key = _idempotency_key()
    reply = s.append(tid, body, if_match=_if_match(), idempotency_key=key,
                     fp=fingerprint("POST", request.path, body), access=Access(token, write=True))
    return _reply(reply)


@blp.route("/<table_id>/events", methods=["GET"])
@blp.arguments(ts.EventsQuery(), location="query")
@blp.response(200, ts.EventsPage)
@responds(401, 403, 404, 422, 503)
@blp.doc(security=AUTH, operationId="listEvents")
def list_events(args, table_id):
    """The log in order, a page at a time: `after` a seq, at most `limit` records."""
    s = store()
    tid = _table_id(table_id)
    return jsonify(s.events(tid, args["after"], args["limit"], access=Access(_token(), write=False)))


@blp.route("/<table_id>/events/<int:seq>/void", methods=["POST"])
@blp.response(201, ts.EventAppended, headers={"ETag": {"schema": {"type": "string"}}})
@responds(401, 403, 404, 409, 412, 422, 503)
@blp.doc(security=AUTH, parameters=WRITE_HEADERS + [IF_MATCH], operationId="voidEvent",
         responses={201: {"links": _links(_SAME_TABLE)}})
def void_event(table_id, seq):
    """Undo an event by a compensating record: balances are recomputed without it.

    Refused (409) when a later event depends on it, or it is already voided.
    """
    s = store()
    tid = _table_id(table_id)
    key = _idempotency_key()
    reply = s.void(tid, seq, if_match=_if_match(), idempotency_key=key,
                   fp=fingerprint("POST", request.path, None), access=Access(_token(), write=True))
    return _reply(reply)


def document(api) -> None:
    """Register the event union of ``POST /v1/tables/{id}/events`` in the OpenAPI document."""
    spec = api.spec
    names = {}
    for kind, schema in ts.TABLE_EVENT_SCHEMAS.items():
        name = schema.__name__
        if name not in spec.components.schemas:
            spec.components.schema(name, schema=schema)
        names[kind] = f"#/components/schemas/{name}"
    spec.components.schema("TableEvent", component={
        "oneOf": [{"$ref": ref} for ref in names.values()],
        "discriminator": {"propertyName": "type", "mapping": names},
    })
    spec.components.security_scheme("bearer", {"type": "http", "scheme": "bearer"})
