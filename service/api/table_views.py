"""`/v1/tables`: the live log of a physical game (thin views over the store).

Writes take ``Authorization: Bearer <write token>``; reads take either token.
``If-Match: "<version>"`` makes a write conditional (412 when stale) and
``Idempotency-Key`` makes a retry replay the first response
(``Idempotent-Replayed: true``).  A creation's ``Idempotency-Key`` must be a
UUID (RFC 9562, version 4 or 7): it finds the table again and replays its
tokens, so it is a secret.  The store answers in domain terms
(:class:`~service.store.table_store.Created`, :class:`~service.store.table_store.Written`);
status codes, ``Location`` and ``ETag`` are made here.  The write headers are
loaded by their schemas (:mod:`.table_schemas`) and read as Werkzeug parses
them (``request.authorization``, ``werkzeug.http.parse_etags``).

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
from pathlib import Path

import marshmallow as ma
import orjson
from flask import Response, current_app, g, jsonify, request
from marshmallow import fields
from werkzeug.http import parse_etags

from ..rules.table import CorrectionError, TableError
from ..spreadsheets import table_rounds_csv
from ..store.errors import TableNotFound, Unauthorized
from ..store.table_store import Access, Created, TableStore, Written, fingerprint
from . import rate_limits
from . import table_schemas as ts
from .callers import API_KEY_HEADER, api_key
from .csv_answers import CSV, csv_response, wants_csv
from .problems import ApiProblem, FieldRuleError, InvalidInput, WithoutApiKeys
from .rate_limits import QUOTA
from .smorest import Blueprint, read_json_body

blp = Blueprint("tables", __name__, url_prefix="/v1/tables",
                description="The live table log: rounds, events, balances, undo.")

TABLE_ID = re.compile(r"[0-9a-f]{16}")
_DIGITS = re.compile(r"\d{1,40}")

READ = [{"tableToken": ["read"]}]     # the read token or the write token
WRITE = [{"tableToken": ["write"]}]   # the write token only
READ_OR_KEY = [*READ, {"apiKey": []}]  # a token, or the API key that created the table
WRITE_OR_KEY = [*WRITE, {"apiKey": []}]
KEYED: list[dict[str, list[str]]] = [{"apiKey": []}, {}]  # X-API-Key when the service has API keys

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
RESPONSE_EXAMPLES: dict[str, dict[str, dict]] = orjson.loads(
    (Path(__file__).parent / "response_examples.json").read_bytes())
"""Response examples by operationId, then name: answers this code gave to the requests of docs/api.md's
examples, written by ``python -m tools.docs`` (tools/docs.py, ``example=``), which fails its check
when one no longer matches what the code answers."""
_STORE_DOWN = (503, "the tables store (Redis) is unavailable (`store_unavailable`, `busy`), or may evict keys "
                    "when full, so that no write is taken (`store_evicting`); retry after `Retry-After`")
NO_TOKEN = (401, "no table token, or not this table's (`unauthorized`); with API keys on, an `X-API-Key` "
                  "that is not a key of the service (`api_key_invalid`)")
_READ_TOKEN_ON_WRITE = (403, "the read token on a write (`forbidden`)")
NO_TABLE = (404, "no such table, or it was deleted (`table_not_found`)")
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


def table_id_of(table_id: str) -> str:
    """A table id as the store takes it; another string is answered as an unknown table would be."""
    if not TABLE_ID.fullmatch(table_id):
        if token() is not None:  # (as a wrong token is: nothing said about which ids exist)
            raise Unauthorized("the token is not valid for this table (or there is no such table)")
        if api_key() is not None:
            raise TableNotFound(f"no table {table_id!r}")
        raise Unauthorized("this table needs 'Authorization: Bearer <token>'")
    return table_id


def access(write: bool) -> Access:
    """Who the request is, for a table: its bearer token, else the API key it gave (the key that created
    a table may read and write it without a token)."""
    return Access(token(), write, api_key())


def token() -> str | None:
    """The request's bearer token (Werkzeug's reading of ``Authorization``), or None."""
    auth = request.authorization
    if auth is None or auth.type != "bearer" or not auth.token:
        return None
    return auth.token


def versions(raw: str | None) -> frozenset[int] | None:
    """The versions an ``If-Match`` accepts; ``*`` (any existing table) and no header: None.

    A list (``"3", "4"``) accepts any of its versions; a weak tag never matches
    (RFC 9110 §13.1.1: strong comparison), so only weak tags: an empty set.
    """
    if raw is None:
        return None
    tags = parse_etags(raw)
    if tags.star_tag:
        return None
    strong = tags.as_set()
    weak = tags.as_set(include_weak=True) - strong
    if not strong and not weak or not all(isinstance(t, str) and _DIGITS.fullmatch(t) for t in strong | weak):
        raise InvalidInput('If-Match must be a version in quotes, e.g. "12"',
                           errors={"If-Match": ['a version in quotes, e.g. "12"']})
    return frozenset(int(t) for t in strong)


def creation_key(raw: str | None = None) -> str | None:
    """A creation's ``Idempotency-Key`` in its canonical (lower-case) form (None: none given); 422
    unless a UUID of version 4 or 7 (the header schema checks it for the view)."""
    key = request.headers.get("Idempotency-Key") if raw is None else raw
    if key is None:
        return None
    if not ts.CREATION_KEY.match(key):
        raise InvalidInput("the Idempotency-Key of a table creation must be a random UUID (RFC 9562, version 4 "
                           "or 7), e.g. from uuid.uuid4(): it finds the table again, so it is a secret",
                           errors={"Idempotency-Key": ["a UUID of version 4 or 7"]})
    return str(uuid.UUID(key))


def _is_create_replay() -> bool:
    """A retried table creation (its Idempotency-Key already made a table from this very
    request) replays the first response: it creates nothing, so it does not count against
    the limit.  The same key with another body counts (it could be guessing)."""
    found = current_app.extensions.get("tables")
    if found is None:
        return False
    try:
        key = creation_key()
        return key is not None and found.is_creation_replay(key, creation_fingerprint(), api_key())
    except Exception:  # noqa: BLE001 - not a valid key (the view refuses it) or Redis trouble (503): counted
        return False


def _created(table: Created) -> Response:
    response = jsonify(table.as_dict())
    response.status_code = 201
    response.headers["Location"] = f"/v1/tables/{table.id}"
    if table.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return response


def _written(table_id: str, written: Written) -> Response:
    if written.quota is not None:
        g.setdefault(QUOTA, written.quota)  # (the rate limit headers: see rate_limits)
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
@rate_limits.limited("client_reads_per_minute")
def list_tables(args):
    """The tables created with the caller's API key, newest first, a page at a time.

    Needs `X-API-Key` (without `API_KEYS` the service has no callers to tell
    apart: 404). Pass a page's `next` as `after` for the next page.
    """
    owner = api_key()
    if owner is None:
        raise WithoutApiKeys("listing tables needs API keys (the service runs without API_KEYS)")
    return jsonify(store().tables_of(owner, args.get("cursor", args.get("after")), args["limit"]))


@blp.route("", methods=["POST"])
@blp.arguments(ts.CreateTableRequest(),
               example={"players": ["东", "南", "西", "北"], "ruleset": "xuezhan", "dealer": 0})
@blp.response(201, ts.TableCreated, headers={"Location": {"schema": {"type": "string"}}})
@blp.problems(400, (401, "with API keys on: no `X-API-Key`, or not a key of the service "
                         "(`api_key_required`, `api_key_invalid`)"),
              (409, "the table this Idempotency-Key created was deleted (`table_deleted`), its tokens were "
                    "rotated since (`tokens_rotated`), or its first response is no longer kept "
                    "(`idempotency_key_expired`)"),
              413, 415,
              (422, "the body breaks the schema or a rule (`invalid_input`, `unknown_ruleset`, ...), or the "
                    "Idempotency-Key is malformed or was used with another body (`idempotency_key_reused`)"),
              _LIMITED, _STORE_DOWN, _FULL)
@blp.arguments(ts.CreateHeaders(), location="headers", as_kwargs=True)
@blp.doc(operationId="createTable", security=KEYED,
         responses={201: {"links": {**_links(_NEW_TABLE, start_round=True),
                                      "ReadTable": {"operationId": "getTable", "parameters": _READ_TABLE},
                                      "DeleteTable": {"operationId": "deleteTable", "parameters": _NEW_TABLE}}}})
@rate_limits.limited("tables_per_hour", exempt_when=_is_create_replay)
def create_table(args, idempotency_key=None):
    """Create a table. Its write `token` and `read_token` are shown only in this response.

    An `Idempotency-Key` here must be a random UUID (version 4 or 7) and is a secret: its retry
    returns the same table and tokens. With API keys on, needs `X-API-Key`; the table is then
    listed under the key and an `Idempotency-Key` is scoped to the key.

    `players` names as many seats as the ruleset has (`players`: four, or three for
    `sanren-liangfang`); another number is a 422 `bad_players`. With `stakes` (docs/rules.md
    §12) the table plays for coins: the response has `coins`.
    """
    key = creation_key(idempotency_key)
    table = store().create(args["players"], args["ruleset"], args["dealer"], stakes=args["stakes"],
                           idempotency_key=key, fp=creation_fingerprint(), owner=api_key())
    return _created(table)


def creation_fingerprint() -> str:
    """What a creation's Idempotency-Key is bound to (:func:`_is_create_replay` asks too)."""
    return fingerprint("POST", request.path, request.get_json(silent=True))


@blp.route("/<table_id>", methods=["GET"])
@blp.arguments(ts.TableQuery(), location="query")
@blp.response(200, ts.TableView, headers={"ETag": {"schema": {"type": "string"}}})
@blp.alt_response(304, description="Not modified (If-None-Match names the current version)",
                  headers={"ETag": {"schema": {"type": "string"}}})
@blp.problems(NO_TOKEN, NO_TABLE, (422, "a query parameter out of range (`invalid_input`)"), _LIMITED,
              _STORE_DOWN)
@blp.arguments(ts.ReadHeaders(), location="headers", as_kwargs=True)
@blp.doc(security=READ_OR_KEY, operationId="getTable")
@rate_limits.limited("client_reads_per_minute", "table_reads_per_minute")
def get_table(args, table_id, if_none_match=None):
    """A table: players, ruleset, version, balances, the current round and a page of the ended rounds.

    Either token: the read token or the write token. `ETag` is the version;
    `If-None-Match` with it answers 304 while nothing has changed. `rounds` lists
    the ended rounds after round `rounds_after`, oldest first, at most
    `rounds_limit` (100 by default); `rounds_next` is the `rounds_after` of the
    next page, or null.
    """
    s = store()
    tid = table_id_of(table_id)
    view = s.get(tid, access(write=False), rounds_after=args["rounds_after"],
                 rounds_limit=args["rounds_limit"])
    etag = f'"{view["version"]}"'
    # weak comparison (RFC 9110 §13.1.2)
    if if_none_match is not None and parse_etags(if_none_match).contains_weak(str(view["version"])):
        response = _no_content(304)
    else:
        response = jsonify(view)
    response.headers["ETag"] = etag
    return response


@blp.route("/<table_id>", methods=["DELETE"])
@blp.response(204)
@blp.problems(NO_TOKEN, _READ_TOKEN_ON_WRITE, NO_TABLE, _STORE_DOWN)
@blp.doc(security=WRITE_OR_KEY, operationId="deleteTable")
@rate_limits.unlimited("the write token only, and a table is deleted once")
def delete_table(table_id):
    """Delete a table and its whole log.

    The write token only; the read token gets 403.
    """
    s = store()
    tid = table_id_of(table_id)
    s.authorize(tid, access(write=True))
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
@blp.problems(400, NO_TOKEN, _READ_TOKEN_ON_WRITE, NO_TABLE,
              (409, "the table is full (`table_full`, with `version`; a void, a correction or a round's end still "
                    "fits), finished (`table_finished`), or an `adjust` during a round (`round_in_progress`)"),
              (412, "If-Match names another version (`version_mismatch`, with `version`)"),
              413, 415,
              (422, "the event breaks its schema (`bad_event`, with `errors`) or the rules for the round as it "
                    "stands (a stable `code`, e.g. `seat_not_in_round`, `not_a_win`), with `event` (the seq it "
                    "would have had); a malformed If-Match or Idempotency-Key (`invalid_input`); an "
                    "Idempotency-Key used with another body (`idempotency_key_reused`)"),
              _LIMITED, _STORE_DOWN, _FULL)
@blp.arguments(ts.WriteHeaders(), location="headers", as_kwargs=True)
@blp.doc(security=WRITE_OR_KEY, operationId="postEvent",
         responses={201: {"links": _links(_SAME_TABLE, start_round=True, void=True)}})
@rate_limits.limited("client_events_per_minute", "table_events_per_minute")
def post_event(table_id, idempotency_key=None, if_match=None):
    """Append an event: a round event (`penalty` included), `round_start`, `round_end`, `buy_in` or `adjust`.

    The write token only; the read token gets 403. The event is checked by the
    rules against the round as it stands; one they reject is a 422 with a
    stable `code` and `event` (the seq it would have had), and nothing is
    recorded. A `buy_in` adds coins to a seat between rounds at a table with
    stakes (`round_in_progress` during a round, `no_stakes` without stakes).
    An `adjust` moves points between rounds only (during one: 409
    `round_in_progress`). A full table always takes a `round_end`.
    """
    s = store()
    tid = table_id_of(table_id)
    body = _json_body()
    written = s.append(tid, body, if_match=versions(if_match), idempotency_key=idempotency_key,
                       fp=fingerprint("POST", request.path, body) if idempotency_key else "",  # (only a key is bound)
                       access=access(write=True),  # (the token is checked in the store's one read)
                       charge=rate_limits.charge())  # (the client's own limits: counted by the same APPEND)
    return _written(tid, written)


@blp.route("/<table_id>/finish", methods=["POST"])
@blp.response(200, ts.TableView, examples=RESPONSE_EXAMPLES.get("finishTable"))
@blp.problems(NO_TOKEN, _READ_TOKEN_ON_WRITE, NO_TABLE,
              (409, "a round is still being played (`round_in_progress`): end it or void its events first"),
              _LIMITED, _STORE_DOWN)
@blp.doc(security=WRITE_OR_KEY, operationId="finishTable")
@rate_limits.limited("client_events_per_minute")
def finish_table(table_id):
    """Finish the evening: the table takes no more events or voids (409 `table_finished`) and stays
    readable, with its log, its summary and `finished_at`.

    The write token (or the API key that created the table). Idempotent: finishing a finished table
    answers it as it is. A round being played must be ended (`round_end`) or voided first. A club's
    table is counted in the club's season (once, however often it is finished).
    """
    s = store()
    tid = table_id_of(table_id)
    view = s.finish(tid, access(write=True))
    clubs = current_app.extensions.get("clubs")
    if clubs is not None:  # a club's table counts in its season (again on a retry: it is counted once)
        club = clubs.table_club(tid)
        if club is not None:
            clubs.count(club, tid)
    return jsonify(view)


@blp.route("/<table_id>/next", methods=["POST"])
@blp.arguments(ts.NextTableRequest(), example={})
@blp.response(201, ts.NextTableCreated, headers={"Location": {"schema": {"type": "string"}}})
@blp.problems(400, NO_TOKEN, _READ_TOKEN_ON_WRITE, NO_TABLE,
              (409, "the table is still being played (`table_not_finished`), or it has its next table already "
                    "(`table_followed`, with `next`: open that one)"),
              413, 415,
              (422, "the body breaks the schema or a rule (`invalid_input`, `bad_players`, ...), or a malformed "
                    "Idempotency-Key (`invalid_input`)"),
              _LIMITED, _STORE_DOWN, _FULL)
@blp.arguments(ts.NextHeaders(), location="headers", as_kwargs=True)
@blp.doc(security=WRITE_OR_KEY, operationId="nextTable",
         responses={201: {"links": {"GetTable": {"operationId": "getTable", "parameters": {
             "path.table_id": "$response.body#/id", "header.Authorization": "$request.header.Authorization"}}}}})
@rate_limits.limited("tables_per_hour")
def next_table(args, table_id, idempotency_key=None):
    """Start the next table after a finished one: the same phones go on with the same tokens.

    The finished table's write token (or the API key that created it). The new table takes over the
    finished table's write and read tokens (so no tokens are in this answer) and its API key; each member
    of the body left out is the finished table's (`{}`: the same players, ruleset and coins), `dealer`
    0. The finished table then names it: its view and summary gain `next`, and its stream sends
    `event: next` (`data: {"next"}`), so every phone can open the new table by itself. A table has one
    next table: another start is 409 `table_followed` naming it, except a retry with the same
    `Idempotency-Key` and body, which answers the first response again (`Idempotent-Replayed: true`).
    """
    s = store()
    tid = table_id_of(table_id)

    def setup(old: dict) -> dict:
        return ts.table_setup({"players": args.get("players", old["players"]),
                               "ruleset": args.get("ruleset", old["ruleset"]), "dealer": args["dealer"],
                               "stakes": args["stakes"] if "stakes" in args else old["stakes"]})

    followed = s.follow(tid, access(write=True), setup, idempotency_key=idempotency_key,
                        fp=fingerprint("POST", request.path, request.get_json(silent=True)) if idempotency_key else "")
    response = jsonify(followed.as_dict())
    response.status_code = 201
    response.headers["Location"] = f"/v1/tables/{followed.id}"
    if followed.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return response


class TokensRotated(ma.Schema):
    token = fields.String(required=True, metadata={"description": "the new write token"})
    read_token = fields.String(required=True, metadata={"description": "the new read token"})


@blp.route("/<table_id>/tokens/rotate", methods=["POST"])
@blp.response(200, TokensRotated)
@blp.problems(NO_TOKEN, _READ_TOKEN_ON_WRITE, NO_TABLE,
              (422, "a malformed Idempotency-Key (`invalid_input`), or one that rotated this table's tokens for "
                    "another credential (`idempotency_key_reused`)"),
              _STORE_DOWN, _FULL)
@blp.arguments(ts.RotateHeaders(), location="headers", as_kwargs=True)
@blp.doc(security=WRITE_OR_KEY, operationId="rotateTokens")
@rate_limits.unlimited("the write token (or the creating API key) only; each rotation is one small write")
def rotate_tokens(table_id, idempotency_key=None):
    """New tokens for the table (shown only here): the old write and read tokens stop working at once.

    The write token (or the API key that created the table); the read token gets 403. Streams opened
    with an old token get `event: rotated` and end (a stream opened with the API key goes on); a retry
    of the table's creation no longer replays its first response (409 `tokens_rotated`). With an
    `Idempotency-Key`, a retry that lost the answer (same key, same credential: the old write token
    still works for that one retry) gets the same new tokens within 24 h.
    """
    s = store()
    tid = table_id_of(table_id)
    credential = token() or request.headers.get(API_KEY_HEADER, "")
    rotated = s.rotate(tid, access(write=True), idempotency_key=idempotency_key, credential=credential)
    response = jsonify(rotated.as_dict())
    response.headers["Cache-Control"] = "no-store"
    if rotated.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return response


@blp.route("/<table_id>/summary", methods=["GET"])
@blp.response(200, ts.TableSummaryOfEvening, examples=RESPONSE_EXAMPLES.get("getSummary"))
@blp.problems(NO_TOKEN, NO_TABLE, _LIMITED, _STORE_DOWN)
@blp.doc(security=READ_OR_KEY, operationId="getSummary")
@rate_limits.limited("client_reads_per_minute", "table_reads_per_minute")
def get_summary(table_id):
    """The evening so far: per seat its total, rank and facts, and the settle-up (the fewest payments
    that bring every balance to 0).

    Either token (or the API key that created the table); available before the table is finished
    too (a running tally). How each fact is counted, how ties are broken and what the coins of a
    payment are: docs/rules.md#s10.1.
    """
    s = store()
    tid = table_id_of(table_id)
    return jsonify(s.summary(tid, access(write=False)))


@blp.route("/<table_id>/events", methods=["GET"])
@blp.arguments(ts.EventsQuery(), location="query")
@blp.arguments(ts.ReadHeaders(), location="headers", as_kwargs=True)
@blp.response(200, ts.EventsPage, headers={"ETag": {"schema": {"type": "string"},
                                                     "description": "the table's version"}})
@blp.alt_response(304, description="Not modified (If-None-Match names the current version)",
                  headers={"ETag": {"schema": {"type": "string"}}})
@blp.problems(NO_TOKEN, NO_TABLE, (422, "a query parameter out of range (`invalid_input`)"), _LIMITED, _STORE_DOWN)
@blp.doc(security=READ_OR_KEY, operationId="listEvents")
@rate_limits.limited("client_reads_per_minute", "table_reads_per_minute")
def list_events(args, table_id, if_none_match=None):
    """The log in order, a page at a time: at most `limit` records after `cursor`.

    Either token (or the API key that created the table). Each record is the event
    as posted plus its `seq`, `at`, `round` and `voided`; void records name
    their `target`. `ETag` is the table's version: with `If-None-Match` naming it, 304.
    """
    s = store()
    tid = table_id_of(table_id)
    after = int(args["cursor"]) if "cursor" in args else args.get("after", 0)
    page = s.events(tid, after, args["limit"], access=access(write=False))
    version = page.pop("version")
    return _with_etag(jsonify(page), version, if_none_match)


ROUNDS_CSV_DOC = {"responses": {200: {"content": {CSV: {
    "schema": {"type": "string", "contentMediaType": CSV},
    "example": "\ufeffround,seat,player,dealer,delta,running\r\n1,0,老王,1,36,36\r\n1,1,小李,0,-12,-12\r\n",
}}}}}


@blp.route("/<table_id>/rounds", methods=["GET"])
@blp.arguments(ts.RoundsQuery(), location="query")
@blp.response(200, ts.RoundsPage, examples=RESPONSE_EXAMPLES.get("listRounds"))
@blp.problems(NO_TOKEN, NO_TABLE, (422, "a query parameter out of range (`invalid_input`)"), _LIMITED, _STORE_DOWN)
@blp.doc(security=READ_OR_KEY, operationId="listRounds", **ROUNDS_CSV_DOC)
@rate_limits.limited("client_reads_per_minute", "table_reads_per_minute")
def list_rounds(args, table_id):
    """Every round explained, oldest first, a page at a time: at most `limit` after `cursor`.

    Either token (or the API key that created the table). Each round as it stands (corrected):
    its figures, its events each with the transfers it made (`seq`: its record's; an event of a
    correction also `index`), all its transfers, and `corrected_by`. The round being played comes
    last (`status: playing`).

    With `Accept: text/csv`, every ended round at once (`cursor` and `limit` are not used) for a
    spreadsheet: one row per round and seat (`round`, `seat`, `player`, `dealer`, `delta`, `running`,
    and `coins_delta`, `fees` with stakes), UTF-8 with a byte order mark, for Excel.
    """
    s = store()
    tid = table_id_of(table_id)
    if wants_csv():
        return csv_response(table_rounds_csv(s, tid, access(write=False)), f"rounds-{tid}.csv")
    return jsonify(s.rounds(tid, int(args.get("cursor", 0)), args["limit"], access=access(write=False)))


@blp.route("/<table_id>/rounds/<int:number>", methods=["GET"])
@blp.response(200, ts.RoundExplained, examples=RESPONSE_EXAMPLES.get("getRound"))
@blp.problems(NO_TOKEN, (404, "no such table or round (`table_not_found`, `round_not_found`)"), _LIMITED,
              _STORE_DOWN)
@blp.doc(security=READ_OR_KEY, operationId="getRound")
@rate_limits.limited("client_reads_per_minute", "table_reads_per_minute")
def get_round(table_id, number):
    """One round explained, as `listRounds` lists it.

    Either token (or the API key that created the table).
    """
    s = store()
    tid = table_id_of(table_id)
    return jsonify(s.round(tid, number, access=access(write=False)))


@blp.route("/<table_id>/rounds/<int:number>/events", methods=["PUT"])
@blp.arguments(ts.CorrectionRequest(), example={
    "events": [{"type": "kong", "seat": 2, "kind": "concealed", "tile": "7s"},
               {"type": "hu", "from": None, "tile": "5p", "winners": [{"seat": 0, "fan": 2}]}],
    "note": "the 暗杠 came before the 自摸"})
@blp.response(201, ts.Corrected, headers={"ETag": {"schema": {"type": "string"}},
                                           "Location": {"schema": {"type": "string"}}},
              examples=RESPONSE_EXAMPLES.get("correctRound"))
@blp.problems(400, NO_TOKEN, _READ_TOKEN_ON_WRITE, (404, "no such table or round (`table_not_found`, "
                                                        "`round_not_found`)"),
              (409, "a later round would break (`correction_conflict`, with `round` and `event`: the seq of "
                    "its record), the table is full (`table_full`) or finished (`table_finished`)"),
              (412, "If-Match names another version (`version_mismatch`, with `version`)"),
              413, 415,
              (422, "an event that cannot happen in the round as corrected (a stable `code`, with `event`: its "
                    "index in `events`; a malformed one also `errors`), a malformed body, If-Match or "
                    "Idempotency-Key (`invalid_input`), or an Idempotency-Key used with another body "
                    "(`idempotency_key_reused`)"),
              _LIMITED, _STORE_DOWN, _FULL)
@blp.arguments(ts.WriteHeaders(), location="headers", as_kwargs=True)
@blp.doc(security=WRITE_OR_KEY, operationId="correctRound")
@rate_limits.limited("client_voids_per_minute", "table_voids_per_minute")
def correct_round(args, table_id, number, idempotency_key=None, if_match=None):
    """Rewrite a round, the one being played or an ended one: its new `events` replace its own.

    The write token (or the API key that created the table). One `correction` record is appended;
    the round's dealer and voids are kept unless given. An ended round stays ended (closed as by
    `round_end` when its new events do not end it); the round being played goes on. Later rounds
    keep their events and deltas; a later round whose dealer came from this one and would change
    is a 409 `correction_conflict`. Voiding the correction gives back what it replaced. How it
    reads: docs/rules.md#s15.2.
    """
    s = store()
    tid = table_id_of(table_id)
    try:
        written = s.correct(tid, number, args, if_match=versions(if_match), idempotency_key=idempotency_key,
                            fp=fingerprint("PUT", request.path, request.get_json(silent=True)) if idempotency_key
                            else "", access=access(write=True), charge=rate_limits.charge())
    except CorrectionError as exc:
        if "field" not in exc.context:  # an event that cannot happen: `event` says which
            raise
        raise FieldRuleError(exc, f"events.{exc.event}") from None
    except TableError as exc:  # (the body's own members: a void suit that does not parse)
        raise InvalidInput(exc.reason, errors={str(exc.context.get("field", "_schema")): [exc.reason]}) from None
    response = _written(tid, written)
    response.headers["Location"] = f"/v1/tables/{tid}/rounds/{number}"
    return response


def _with_etag(response: Response, version: int, if_none_match: str | None) -> Response:
    """``ETag`` = the version; 304 when ``If-None-Match`` names it (weak comparison, RFC 9110 §13.1.2)."""
    if if_none_match is not None and parse_etags(if_none_match).contains_weak(str(version)):
        response = _no_content(304)
    response.headers["ETag"] = f'"{version}"'
    return response


@blp.route("/<table_id>/events/<int:seq>/void", methods=["POST"])
@blp.response(201, ts.EventAppended, headers={"ETag": {"schema": {"type": "string"}},
                                               "Location": {"schema": {"type": "string"}}})
@blp.problems(NO_TOKEN, _READ_TOKEN_ON_WRITE, (404, "no such table or event (`table_not_found`, "
                                                     "`event_not_found`)"),
              (409, "a later event depends on it (`void_conflict`, with `event`), it is already voided "
                    "(`already_voided`), it is a void itself (`not_voidable`), the table is full (`table_full`) or "
                    "finished (`table_finished`)"),
              (412, "If-Match names another version (`version_mismatch`, with `version`)"),
              (422, "a malformed If-Match or Idempotency-Key (`invalid_input`), or an Idempotency-Key used with "
                    "another request (`idempotency_key_reused`)"),
              _LIMITED, _STORE_DOWN, _FULL)
@blp.arguments(ts.WriteHeaders(), location="headers", as_kwargs=True)
@blp.doc(security=WRITE_OR_KEY, operationId="voidEvent",
         responses={201: {"links": _links(_SAME_TABLE)}})
@rate_limits.limited("client_voids_per_minute", "table_voids_per_minute")
def void_event(table_id, seq, idempotency_key=None, if_match=None):
    """Undo an event by a compensating record: balances are recomputed without it.

    The write token only; the read token gets 403. Refused (409) when a later
    event depends on it, or it is already voided.
    """
    s = store()
    tid = table_id_of(table_id)
    written = s.void(tid, seq, if_match=versions(if_match), idempotency_key=idempotency_key,
                     fp=fingerprint("POST", request.path, None), access=access(write=True),
                     charge=rate_limits.charge())
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

    union("Event", EVENT_SCHEMAS,
          "A round event (docs/api.md, the events): checked by the rules against the round as it stands.")
    union("TableEvent", ts.TABLE_EVENT_SCHEMAS,
          "An event of a table: a round event, round_start, round_end or buy_in (with stakes, between rounds).")
    union("StreamRecord", ts.STREAM_RECORD_SCHEMAS,
          "The `data` of an `event: record` frame of the table's stream: the record as the log lists it, with "
          "the table's version and balances after it (and its coins with stakes; a buy-in's own coins as `amount`).")
    spec.components.schema("StreamDeleted", component={
        "type": "object", "required": ["id"], "additionalProperties": False, "properties": {"id": {"type": "string"}},
        "description": "The `data` of `event: deleted` (the table was deleted or expired; the stream ends)."})
    spec.components.schema("StreamResync", component={
        "type": "object", "required": ["after"], "additionalProperties": False,
        "properties": {"after": {"type": "integer"}},
        "description": "The `data` of `event: resync` (this client fell behind; the stream ends: reconnect with "
                       "`Last-Event-ID` = `after`)."})
    spec.components.schema("StreamFinished", component={
        "type": "object", "required": ["finished_at"], "additionalProperties": False,
        "properties": {"finished_at": {"type": "string", "format": "date-time"}},
        "description": "The `data` of `event: finished` (the table was finished: it takes no more events; the "
                       "stream goes on)."})
    spec.components.schema(
        "StreamNext",
        component={
            "type": "object",
            "required": ["next"],
            "additionalProperties": False,
            "properties": {"next": {"type": "string"}},
            "description": "The `data` of `event: next` (the finished table has a next table, which its tokens open: "
            "`POST /v1/tables/{table_id}/next`; the stream goes on).",
        },
    )
    spec.components.schema(
        "StreamRotated",
        component={
            "type": "object",
            "required": ["id"],
            "additionalProperties": False,
            "properties": {"id": {"type": "string"}},
            "description": "The `data` of `event: rotated` (the table's tokens were rotated and this stream's token is "
            "an old one; the stream ends).",
        },
    )
    spec.components.schema(
        "StreamEvents",
        component={
            "type": "object",
            "additionalProperties": False,
            "description": "The frames of a table's stream by their `event:` name, each with the schema of its `data`.",
            "properties": {
                name: {"$ref": f"#/components/schemas/Stream{name.title()}"}
                for name in ("record", "finished", "next", "deleted", "resync", "rotated")
            },
        },
    )
    spec.components.security_scheme(
        "tableToken",
        {
            "type": "http",
            "scheme": "bearer",
            "description": "A table's token from its creation: the write token, or the read token (reads only). "
            "An operation's role says which: `read` accepts either token, `write` only the write token.",
        },
    )
    spec.components.security_scheme(
        "apiKey",
        {
            "type": "apiKey",
            "in": "header",
            "name": "X-API-Key",
            "description": "Needed on every /v1/ call without a table token when the service runs with API keys "
            "(`API_KEYS`); rate limits then count per key. Without API keys it is not needed.",
        },
    )
