"""`/v1/tables`: the live log of a physical game (thin views over the store).

Writes take ``Authorization: Bearer <write token>``; reads take either token.
``If-Match: "<version>"`` makes a write conditional (412 when stale) and
``Idempotency-Key`` makes a retry replay the first response
(``Idempotent-Replayed: true``).  A creation's ``Idempotency-Key`` must be a
UUID (RFC 9562, version 4 or 7): it finds the table again and replays its
tokens, so it is a secret.  The store answers in domain terms
(:class:`~service.store.tables.Created`, :class:`~service.store.tables.Written`);
status codes, ``Location`` and ``ETag`` are made here.  Headers are parsed by
Werkzeug (``request.authorization``, ``request.if_match``,
``request.if_none_match``).

An event body is the rules core's to check (the store validates it against the
table's state, in the same read that checks the token): a malformed event is a
422 ``bad_event`` (or ``seat_out_of_range``, ``bad_hand``) whose ``errors``
name the member, like any event the rules reject.

With API keys on, ``GET /v1/tables`` lists the tables the caller's key
created, newest first, and a creation's ``Idempotency-Key`` is scoped to the
key (the same key sent with another API key makes another table).
"""

from __future__ import annotations

import re
import uuid

from flask import Response, current_app, jsonify, request

from ..store.tables import Access, Created, TableNotFound, TableStore, Unauthorized, Written, fingerprint
from . import table_schemas as ts
from .clients import api_key
from .problems import ApiProblem, InvalidInput
from .smorest import Blueprint, read_json_body

blp = Blueprint("tables", __name__, url_prefix="/v1/tables",
                description="The live table log: rounds, events, balances, undo.")

_TABLE_ID = re.compile(r"[0-9a-f]{16}")
_IDEM_KEY = re.compile(r"^[\x21-\x7e]{1,%d}$" % ts.MAX_IDEMPOTENCY_KEY)
_DIGITS = re.compile(r"\d{1,40}")

READ = [{"tableToken": ["read"]}]     # the read token or the write token
WRITE = [{"tableToken": ["write"]}]   # the write token only
KEYED = [{"apiKey": []}, {}]          # X-API-Key when the service has API keys
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
            "description": 'the version the write expects, as "<version>" (a list: any of them; "*": any); '
                           'stale: 412; a tag that is not a version: 422'}
IF_NONE_MATCH = {"in": "header", "name": "If-None-Match", "required": False, "schema": {"type": "string"},
                 "description": 'the version the client has, as "<version>": 304 when the table is still '
                                'at it (weak comparison)'}
_STORE_DOWN = (503, "the tables store (Redis) is unavailable (`store_unavailable`, `busy`); retry after "
                    "`Retry-After`")
_NO_TOKEN = (401, "no table token, or not this table's (`unauthorized`); with API keys on, an `X-API-Key` "
                  "that is not a key of the service (`api_key_invalid`)")
_READ_TOKEN_ON_WRITE = (403, "the read token on a write (`forbidden`)")
_NO_TABLE = (404, "no such table, or it was deleted (`table_not_found`)")
_LIMITED = (429, "a rate limit (`too_many_requests`): see `Retry-After`")
_FULL = (507, "the tables store is full (`store_full`): nothing was written; retry later")


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
    auth = request.authorization
    if auth is None or auth.type != "bearer" or not auth.token:
        return None
    return auth.token


def _idempotency_key() -> str | None:
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not _IDEM_KEY.match(key):
        raise InvalidInput("Idempotency-Key must be 1-128 visible ASCII characters",
                           errors={"Idempotency-Key": ["1-128 visible ASCII characters"]})
    return key


def _if_match() -> frozenset[int] | None:
    """The versions an ``If-Match`` accepts; ``*`` (any existing table) and no header: None.

    A list (``"3", "4"``) accepts any of its versions; a weak tag never matches
    (RFC 9110 §13.1.1: strong comparison), so only weak tags: an empty set.
    """
    if "If-Match" not in request.headers:
        return None
    tags = request.if_match
    if tags.star_tag:
        return None
    strong = tags.as_set()
    weak = tags.as_set(include_weak=True) - strong
    if not strong and not weak or not all(isinstance(t, str) and _DIGITS.fullmatch(t) for t in strong | weak):
        raise InvalidInput('If-Match must be a version in quotes, e.g. "12"',
                           errors={"If-Match": ['a version in quotes, e.g. "12"']})
    return frozenset(int(t) for t in strong)


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


def _json_body() -> object:
    """The request body as JSON (415/413/400 as for every JSON POST)."""
    return read_json_body(request)


@blp.route("", methods=["GET"])
@blp.arguments(ts.TablesQuery(), location="query")
@blp.response(200, ts.TablesPage)
@blp.problems((401, "no `X-API-Key`, or not a key of the service (`api_key_required`, `api_key_invalid`)"),
              (404, "the service runs without API keys: there is no caller to list tables for (`not_found`)"),
              (422, "a query parameter out of range (`invalid_input`)"), _LIMITED, _STORE_DOWN)
@blp.doc(operationId="listTables", security=[{"apiKey": []}])
def list_tables(args):
    """The tables created with the caller's API key, newest first, a page at a time.

    Needs `X-API-Key` (without `API_KEYS` the service has no callers to tell
    apart: 404). Pass a page's `next` as `after` for the next page.
    """
    owner = api_key()
    if owner is None:
        raise TableListUnavailable("listing tables needs API keys (the service runs without API_KEYS)")
    return jsonify(store().tables_of(owner, args.get("after"), args["limit"]))


class TableListUnavailable(ApiProblem):
    status, code, title = 404, "not_found", "Not found"


@blp.route("", methods=["POST"])
@blp.arguments(ts.CreateTableRequest(), example={"players": ["东", "南", "西", "北"], "ruleset": "xuezhan", "dealer": 0})
@blp.response(201, ts.TableCreated, headers={"Location": {"schema": {"type": "string"}}})
@blp.problems(400, (401, "with API keys on: no `X-API-Key`, or not a key of the service "
                         "(`api_key_required`, `api_key_invalid`)"),
              (409, "the table this Idempotency-Key created was deleted (`table_deleted`), or its first "
                    "response is no longer kept (`idempotency_key_expired`)"),
              413, 415,
              (422, "the body breaks the schema or a rule (`invalid_input`, `unknown_ruleset`, ...), or the "
                    "Idempotency-Key is malformed or was used with another body (`idempotency_key_reused`)"),
              _LIMITED, _STORE_DOWN, _FULL)
@blp.headers(*CREATE_HEADERS)
@blp.doc(operationId="createTable", security=KEYED,
         responses={201: {"links": {**_links(_NEW_TABLE, start_round=True),
                                      "ReadTable": {"operationId": "getTable", "parameters": _READ_TABLE},
                                      "DeleteTable": {"operationId": "deleteTable", "parameters": _NEW_TABLE}}}})
def create_table(args):
    """Create a table. Its write `token` and `read_token` are shown only in this response.

    An `Idempotency-Key` here must be a random UUID (version 4 or 7) and is a secret: its retry
    returns the same table and tokens. With API keys on, needs `X-API-Key`; the table is then
    listed under the key and an `Idempotency-Key` is scoped to the key.

    `players` names as many seats as the ruleset has (`players`: four, or three for
    `sanren-liangfang`); another number is a 422 `bad_players`. With `stakes` (RULES.md
    §12) the table plays for coins: the response has `coins`.
    """
    key = creation_key()
    table = store().create(args["players"], args["ruleset"], args["dealer"], stakes=args["stakes"],
                           idempotency_key=key, fp=creation_fingerprint(), owner=api_key())
    return _created(table)


def creation_fingerprint() -> str:
    """What a creation's Idempotency-Key is bound to (the rate limiter asks too)."""
    return fingerprint("POST", request.path, request.get_json(silent=True))


@blp.route("/<table_id>", methods=["GET"])
@blp.arguments(ts.TableQuery(), location="query")
@blp.response(200, ts.TableView, headers={"ETag": {"schema": {"type": "string"}}})
@blp.alt_response(304, description="Not modified (If-None-Match names the current version)",
                  headers={"ETag": {"schema": {"type": "string"}}})
@blp.problems(_NO_TOKEN, _NO_TABLE, (422, "a query parameter out of range (`invalid_input`)"), _LIMITED,
              _STORE_DOWN)
@blp.headers(IF_NONE_MATCH)
@blp.doc(security=READ, operationId="getTable")
def get_table(args, table_id):
    """A table: players, ruleset, version, balances, the current round and a page of the ended rounds.

    Either token: the read token or the write token. `ETag` is the version;
    `If-None-Match` with it answers 304 while nothing has changed. `rounds` lists
    the ended rounds after round `rounds_after`, oldest first, at most
    `rounds_limit` (100 by default); `rounds_next` is the `rounds_after` of the
    next page, or null.
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
@blp.problems(_NO_TOKEN, _READ_TOKEN_ON_WRITE, _NO_TABLE, _STORE_DOWN)
@blp.doc(security=WRITE, operationId="deleteTable")
def delete_table(table_id):
    """Delete a table and its whole log.

    The write token only; the read token gets 403.
    """
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
@blp.response(201, ts.EventAppended, headers={"ETag": {"schema": {"type": "string"}},
                                               "Location": {"schema": {"type": "string"}}})
@blp.problems(400, _NO_TOKEN, _READ_TOKEN_ON_WRITE, _NO_TABLE,
              (409, "the table is full (`table_full`, with `version`)"),
              (412, "If-Match names another version (`version_mismatch`, with `version`)"),
              413, 415,
              (422, "the event breaks its schema (`bad_event`, with `errors`) or the rules for the round as it "
                    "stands (a stable `code`, e.g. `seat_not_in_round`, `not_a_win`), with `event` (the seq it "
                    "would have had); a malformed If-Match or Idempotency-Key (`invalid_input`); an "
                    "Idempotency-Key used with another body (`idempotency_key_reused`)"),
              _LIMITED, _STORE_DOWN, _FULL)
@blp.headers(*WRITE_HEADERS, IF_MATCH)
@blp.doc(security=WRITE, operationId="postEvent",
         responses={201: {"links": _links(_SAME_TABLE, start_round=True, void=True)}})
def post_event(table_id):
    """Append an event: a round event, `round_start`, `round_end` or `buy_in`.

    The write token only; the read token gets 403. The event is checked by the
    rules against the round as it stands; one they reject is a 422 with a
    stable `code` and `event` (the seq it would have had), and nothing is
    recorded. A `buy_in` adds coins to a seat between rounds at a table with
    stakes (`round_in_progress` during a round, `no_stakes` without stakes).
    """
    s = store()
    tid = _table_id(table_id)
    token = _token()  # checked with the state, in the store's one read before the append
    body = _json_body()
    key = _idempotency_key()
    if_match = _if_match()
    outcome = request.environ.pop(APPEND_OUTCOME, None)
    if outcome is None:
        written = s.append(tid, body, if_match=if_match, idempotency_key=key,  # (fp: only a key is bound to it)
                           fp=fingerprint("POST", request.path, body) if key else "", access=Access(token, write=True))
    elif isinstance(outcome, Exception):  # the hot path asked the store, which refused (or failed): say why
        raise outcome
    else:
        written = outcome
    return _written(tid, written)


APPEND_OUTCOME = "service.hot_path.append_outcome"
"""The environ key under which the hot path (:mod:`.hotpath`) hands :func:`post_event` what the store
answered to this very request (its :class:`Written`, or the exception it raised), when it leaves the
answer to Flask after asking the store: the store is asked once per request, so a write is never
made twice.  (No header can set it: a server puts the headers under ``HTTP_`` names.)"""


@blp.route("/<table_id>/events", methods=["GET"])
@blp.arguments(ts.EventsQuery(), location="query")
@blp.response(200, ts.EventsPage)
@blp.problems(_NO_TOKEN, _NO_TABLE, (422, "a query parameter out of range (`invalid_input`)"), _LIMITED, _STORE_DOWN)
@blp.doc(security=READ, operationId="listEvents")
def list_events(args, table_id):
    """The log in order, a page at a time: `after` a seq, at most `limit` records.

    Either token: the read token or the write token. Each record is the event
    as posted plus its `seq`, `at`, `round` and `voided`; void records name
    their `target`.
    """
    s = store()
    tid = _table_id(table_id)
    return jsonify(s.events(tid, args["after"], args["limit"], access=Access(_token(), write=False)))


@blp.route("/<table_id>/events/<int:seq>/void", methods=["POST"])
@blp.response(201, ts.EventAppended, headers={"ETag": {"schema": {"type": "string"}},
                                               "Location": {"schema": {"type": "string"}}})
@blp.problems(_NO_TOKEN, _READ_TOKEN_ON_WRITE, (404, "no such table or event (`table_not_found`, "
                                                     "`event_not_found`)"),
              (409, "a later event depends on it (`void_conflict`, with `event`), it is already voided "
                    "(`already_voided`), it is a void itself (`not_voidable`), or the table is full (`table_full`)"),
              (412, "If-Match names another version (`version_mismatch`, with `version`)"),
              (422, "a malformed If-Match or Idempotency-Key (`invalid_input`), or an Idempotency-Key used with "
                    "another request (`idempotency_key_reused`)"),
              _LIMITED, _STORE_DOWN, _FULL)
@blp.headers(*WRITE_HEADERS, IF_MATCH)
@blp.doc(security=WRITE, operationId="voidEvent",
         responses={201: {"links": _links(_SAME_TABLE)}})
def void_event(table_id, seq):
    """Undo an event by a compensating record: balances are recomputed without it.

    The write token only; the read token gets 403. Refused (409) when a later
    event depends on it, or it is already voided.
    """
    s = store()
    tid = _table_id(table_id)
    key = _idempotency_key()
    written = s.void(tid, seq, if_match=_if_match(), idempotency_key=key,
                     fp=fingerprint("POST", request.path, None), access=Access(_token(), write=True))
    return _written(tid, written)


def document(api) -> None:
    """Register the event unions and the security schemes in the OpenAPI document."""
    spec = api.spec

    def union(name: str, kinds: dict, description: str) -> None:
        mapping = {}
        for kind, schema in kinds.items():
            if schema.__name__ not in spec.components.schemas:
                spec.components.schema(schema.__name__, schema=schema)
            mapping[kind] = f"#/components/schemas/{schema.__name__}"
        spec.components.schema(name, component={
            "oneOf": [{"$ref": ref} for ref in mapping.values()],
            "discriminator": {"propertyName": "type", "mapping": mapping},
            "description": description,
        })

    from .schemas import EVENT_SCHEMAS

    union("Event", EVENT_SCHEMAS, "A round event (docs/events.md): checked by the rules against the round as it stands.")
    union("TableEvent", ts.TABLE_EVENT_SCHEMAS,
          "An event of a table: a round event, round_start, round_end or buy_in (with stakes, between rounds).")
    spec.components.security_scheme("tableToken", {
        "type": "http", "scheme": "bearer",
        "description": "A table's token from its creation: the write token, or the read token (reads only). "
                       "An operation's role says which: `read` accepts either token, `write` only the write token.",
    })
    spec.components.security_scheme("apiKey", {
        "type": "apiKey", "in": "header", "name": "X-API-Key",
        "description": "Needed on every /v1/ call without a table token when the service runs with API keys "
                       "(`API_KEYS`); rate limits then count per key. Without API keys it is not needed.",
    })
