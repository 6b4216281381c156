"""`/v1/tables`: the live log of a physical game (thin views over the store).

Writes take ``Authorization: Bearer <write token>``; reads take either token.
``If-Match: "<version>"`` makes a write conditional (412 when stale) and
``Idempotency-Key`` makes a retry replay the first response
(``Idempotent-Replayed: true``).  A creation's ``Idempotency-Key`` must be a
UUID (RFC 9562, version 4 or 7): it finds the table again and replays its
tokens, so it is a secret.  The store answers in domain terms
(:class:`~service.store.tables.Created`, :class:`~service.store.tables.Written`);
status codes, ``Location`` and ``ETag`` are made here.
"""

from __future__ import annotations

import re
import uuid

from flask import Response, current_app, jsonify, request
from marshmallow import ValidationError

from ..store.tables import Access, Created, TableNotFound, TableStore, Unauthorized, Written, fingerprint
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
# a creation's Idempotency-Key: a UUID of version 4 (random) or 7 (time and random), RFC 9562
_CREATE_KEY = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[47][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", re.IGNORECASE)

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
     "schema": {"type": "string", "minLength": 1, "maxLength": ts.MAX_IDEMPOTENCY_KEY, "pattern": r"^[!-~]+$"},
     "description": "1-128 visible ASCII characters, unique per write of this table: a retry with the same key "
                    "and body returns the first response (`Idempotent-Replayed: true`) and records nothing; the "
                    "same key with another body: 422 `idempotency_key_reused`. Kept as long as the table."},
]
CREATE_HEADERS = [
    {"in": "header", "name": "Idempotency-Key", "required": False,
     "schema": {"type": "string", "format": "uuid", "pattern": _CREATE_KEY.pattern},
     "description": "a UUID (RFC 9562) of version 4 or 7, generated at random for this one creation; anything "
                    "else: 422. **A secret**: a retry with the same key and body returns the first response, "
                    "the tokens included (kept 24 h, never longer than the table), so whoever knows the key "
                    "can take the table. The same key with another body: 422 `idempotency_key_reused`, and it "
                    "counts against the creation rate limit (an exact retry does not)."},
]
IF_MATCH = {"in": "header", "name": "If-Match", "required": False, "schema": {"type": "string"},
            "description": 'the version the write expects, as "<version>"; stale: 412'}


def responds(*statuses: int):
    """Document the error responses a table operation can give (besides its success)."""
    names = {400: "BAD_REQUEST", 401: "UNAUTHORIZED", 403: "FORBIDDEN", 404: "NOT_FOUND", 409: "CONFLICT",
             412: "PRECONDITION_FAILED", 422: "UNPROCESSABLE_ENTITY", 429: "TOO_MANY_REQUESTS",
             503: "SERVICE_UNAVAILABLE", 507: "INSUFFICIENT_STORAGE"}

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


def creation_key() -> str | None:
    """A creation's ``Idempotency-Key``, in its canonical (lower-case) form; 422 unless a UUID v4 or v7."""
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not _CREATE_KEY.fullmatch(key):
        raise InvalidInput("the Idempotency-Key of a table creation must be a random UUID (RFC 9562, version 4 "
                           "or 7), e.g. from uuid.uuid4(): it finds the table again, so it is a secret",
                           errors={"Idempotency-Key": ["a UUID of version 4 or 7"]})
    return str(uuid.UUID(key))


def _created(table: Created) -> Response:
    response = jsonify(table.as_dict())
    response.status_code = 201
    response.headers["Location"] = f"/v1/tables/{table.id}"
    if table.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return response


def _written(table_id: str, written: Written) -> Response:
    response = jsonify(written.as_dict())
    response.status_code = 201
    response.headers["Location"] = f"/v1/tables/{table_id}/events?after={written.seq - 1}&limit=1"
    response.headers["ETag"] = f'"{written.version}"'
    if written.replayed:
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
@responds(429, 503, 507)
@blp.doc(parameters=CREATE_HEADERS, operationId="createTable",
         responses={201: {"links": {**_links(_NEW_TABLE, start_round=True),
                                      "ReadTable": {"operationId": "getTable", "parameters": _READ_TABLE},
                                      "DeleteTable": {"operationId": "deleteTable", "parameters": _NEW_TABLE}}}})
@errors
def create_table(args):
    """Create a table. Its write `token` and `read_token` are shown only in this response.

    An `Idempotency-Key` here must be a random UUID (version 4 or 7) and is a secret: its retry
    returns the same table and tokens.
    """
    key = creation_key()
    table = store().create(args["players"], args["ruleset"], args["dealer"], idempotency_key=key,
                           fp=creation_fingerprint())
    return _created(table)


def creation_fingerprint() -> str:
    """What a creation's Idempotency-Key is bound to (the rate limiter asks too)."""
    return fingerprint("POST", request.path, request.get_json(silent=True))


@blp.route("/<table_id>", methods=["GET"])
@blp.arguments(ts.TableQuery(), location="query")
@blp.response(200, ts.TableView, headers={"ETag": {"schema": {"type": "string"}}})
@blp.alt_response(304, description="Not modified (If-None-Match)")
@responds(401, 403, 404, 422, 503)
@blp.doc(security=AUTH, operationId="getTable")
def get_table(args, table_id):
    """A table: players, ruleset, version, balances, the current round and a page of the ended rounds.

    `rounds` lists the ended rounds after round `rounds_after`, oldest first, at most `rounds_limit`
    (100 by default); `rounds_next` is the `rounds_after` of the next page, or null.
    """
    s = store()
    tid = _table_id(table_id)
    view = s.get(tid, Access(_token(), write=False), rounds_after=args["rounds_after"],
                 rounds_limit=args["rounds_limit"])
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
@responds(401, 403, 404, 409, 412, 503, 507)
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
    written = s.append(tid, body, if_match=_if_match(), idempotency_key=key,
                       fp=fingerprint("POST", request.path, body), access=Access(token, write=True))
    return _written(tid, written)


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
@responds(401, 403, 404, 409, 412, 422, 503, 507)
@blp.doc(security=AUTH, parameters=WRITE_HEADERS + [IF_MATCH], operationId="voidEvent",
         responses={201: {"links": _links(_SAME_TABLE)}})
def void_event(table_id, seq):
    """Undo an event by a compensating record: balances are recomputed without it.

    Refused (409) when a later event depends on it, or it is already voided.
    """
    s = store()
    tid = _table_id(table_id)
    key = _idempotency_key()
    written = s.void(tid, seq, if_match=_if_match(), idempotency_key=key,
                     fp=fingerprint("POST", request.path, None), access=Access(_token(), write=True))
    return _written(tid, written)


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
