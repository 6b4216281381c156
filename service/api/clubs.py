"""`/v1/clubs`: a club's players, seasons, tables and standings (thin views over :mod:`service.store.clubs`).

A club has its own write and read tokens (``Authorization: Bearer``), as a
table has; with API keys on, a club belongs to the key that created it, which
may use it without a token, and any other key finds no such club (404).  An
unknown club or player is a 404 (``club_not_found``, ``player_not_found``);
the read token on a write is a 403.  ``GET .../standings`` answers CSV for
``Accept: text/csv`` (:mod:`service.spreadsheets`); ``POST .../import`` takes
``text/csv``.

Readings (where the contract is silent; the rules' readings are in docs/rules.md#s17):

* A club is created with its first season open (``season``: its name, default
  ``1``); ``s1``, ``s2``, ... are the seasons' ids, ``current`` names the
  current one in a path.
* A seat naming a merged player seats the player it was merged into; a
  player's page for a merged id is the page of the player who stayed.
* Names and aliases are unique in a club, compared case-folded (409
  ``name_taken``).
"""

from __future__ import annotations

from typing import Any

from flask import Response, current_app, jsonify, request

from ..rules.codes import Code
from ..rules.stakes import StakesError
from ..rules.table import TableSetupError, TableState
from ..spreadsheets import read_evenings, standings_csv
from ..store.clubs import ClubStore
from ..store.errors import ClubNotFound, PlayerNotFound
from ..store.table_store import Access, fingerprint
from . import club_schemas as cs
from . import rate_limits
from . import table_schemas as ts
from .callers import api_key
from .csv_answers import CSV, csv_response, wants_csv
from .problems import FieldRuleError, UnsupportedMediaType
from .smorest import Blueprint
from .table_views import RESPONSE_EXAMPLES, StoreNotConfigured, creation_key, token

blp = Blueprint("clubs", __name__, url_prefix="/v1/clubs",
                description="A club's season: players, seasons, tables, standings, a rating.")

READ = [{"clubToken": ["read"]}, {"apiKey": []}]
WRITE = [{"clubToken": ["write"]}, {"apiKey": []}]
KEYED: list[dict[str, list[str]]] = [{"apiKey": []}, {}]
_NO_TOKEN = (401, "no club token, or not this club's (`unauthorized`); with API keys on, an `X-API-Key` that is "
                  "not a key of the service (`api_key_invalid`)")
_READ_TOKEN = (403, "the read token on a write (`forbidden`)")
_NO_CLUB = (404, "no such club, or not this API key's (`club_not_found`)")
_NO_PLAYER = (404, "no such club (`club_not_found`) or player of it (`player_not_found`)")
_LIMITED = (429, "a rate limit (`too_many_requests`): see `Retry-After`")
_STORE_DOWN = (503, "the store (Redis) is unavailable (`store_unavailable`, `busy`); retry after `Retry-After`")
_FULL = (507, "the store is full (`store_full`): nothing was written; retry later")


def clubs() -> ClubStore:
    found = current_app.extensions.get("clubs")
    if found is None:
        raise StoreNotConfigured("no Redis is configured for clubs (set REDIS_URL)", headers={"Retry-After": "5"})
    return found


def club_id_of(club_id: str) -> str:
    if not cs.CLUB_ID.fullmatch(club_id):
        raise ClubNotFound(f"no club {club_id!r}")
    return club_id


def player_id_of(pid: str) -> str:
    if not cs.PLAYER_ID.fullmatch(pid):
        raise PlayerNotFound(f"no player {pid!r}")
    return pid


def access(write: bool) -> Access:
    return Access(token(), write, api_key())


def _creation_fingerprint() -> str:
    """What a creation's Idempotency-Key is bound to (the creations' views and :func:`_is_table_replay` alike)."""
    return fingerprint("POST", request.path, request.get_json(silent=True))


def _created(body: dict, location: str) -> Response:
    replayed = body.pop("replayed", False)
    response = jsonify(body)
    response.status_code = 201
    response.headers["Location"] = location
    if replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return response


# -- the club ------------------------------------------------------------------------------------
@blp.route("", methods=["POST"])
@blp.arguments(cs.CreateClubRequest(), example={"name": "周五麻将", "min_rounds": 16, "order": "total"})
@blp.arguments(ts.CreateHeaders(), location="headers", as_kwargs=True)
@blp.response(201, cs.ClubCreated, headers={"Location": {"schema": {"type": "string"}}})
@blp.problems(400, (401, "with API keys on: no `X-API-Key`, or not a key of the service (`api_key_required`, "
                         "`api_key_invalid`)"),
              (409, "this Idempotency-Key's first response is no longer kept (`idempotency_key_expired`)"), 413, 415,
              (422, "the body breaks the schema (`invalid_input`, `unknown_ruleset`, ...), or the Idempotency-Key "
                    "is malformed or was used with another body (`idempotency_key_reused`)"), _LIMITED, _STORE_DOWN,
              _FULL)
@blp.doc(operationId="createClub", security=KEYED)
@rate_limits.limited("client_events_per_minute")
def create_club(args, idempotency_key=None):
    """Create a club, with its first season open. Its write `token` and `read_token` are shown only here.

    An `Idempotency-Key` works as a table creation's: a random UUID (version 4 or 7), a secret; its
    retry returns the same club and tokens. With API keys on, needs `X-API-Key`: the club is then the
    key's (another key finds no such club).
    """
    key = creation_key(idempotency_key)
    body = clubs().create(args["name"], ruleset=args.get("ruleset"), stakes=args.get("stakes"),
                          min_rounds=args["min_rounds"], order=args["order"], season=args["season"],
                          idempotency_key=key, fp=_creation_fingerprint(),
                          owner=api_key())
    response = _created(body, f"/v1/clubs/{body['id']}")
    response.headers["Cache-Control"] = "no-store"
    return response


@blp.route("/<club_id>", methods=["GET"])
@blp.response(200, cs.ClubView, examples=RESPONSE_EXAMPLES.get("getClub"))
@blp.problems(_NO_TOKEN, _NO_CLUB, _LIMITED, _STORE_DOWN)
@blp.doc(operationId="getClub", security=READ)
@rate_limits.limited("client_reads_per_minute")
def get_club(club_id):
    """The club: its settings, players (by name), seasons (oldest first) and the current season's id."""
    return jsonify(clubs().club(club_id_of(club_id), access(write=False)))


# -- players -------------------------------------------------------------------------------------
@blp.route("/<club_id>/players", methods=["POST"])
@blp.arguments(cs.PlayerRequest(), example={"name": "老王", "aliases": ["王哥"]})
@blp.response(201, cs.PlayerView, headers={"Location": {"schema": {"type": "string"}}})
@blp.problems(400, _NO_TOKEN, _READ_TOKEN, _NO_CLUB,
              (409, "the name or an alias is already a player's of the club (`name_taken`)"), 413, 415, 422,
              _LIMITED, _STORE_DOWN, _FULL)
@blp.doc(operationId="addPlayer", security=WRITE)
@rate_limits.limited("client_events_per_minute")
def add_player(args, club_id):
    """Add a player to the club: a name, and aliases (other names an import finds them by)."""
    cid = club_id_of(club_id)
    player = clubs().add_player(cid, access(write=True), args["name"], args["aliases"])
    return _created(player, f"/v1/clubs/{cid}/players/{player['id']}")


@blp.route("/<club_id>/players/<pid>", methods=["PATCH"])
@blp.arguments(cs.PlayerPatch(), example={"name": "王老五"})
@blp.response(200, cs.PlayerView)
@blp.problems(400, _NO_TOKEN, _READ_TOKEN, _NO_PLAYER,
              (409, "the name or an alias is already another player's (`name_taken`)"), 413, 415, 422,
              _LIMITED, _STORE_DOWN, _FULL)
@blp.doc(operationId="updatePlayer", security=WRITE)
@rate_limits.limited("client_events_per_minute")
def update_player(args, club_id, pid):
    """Rename a player and/or replace its aliases; its history and figures stay."""
    return jsonify(clubs().update_player(club_id_of(club_id), access(write=True), player_id_of(pid),
                                         args.get("name"), args.get("aliases")))


@blp.route("/<club_id>/players/<pid>", methods=["GET"])
@blp.response(200, cs.PlayerPage, examples=RESPONSE_EXAMPLES.get("getPlayer"))
@blp.problems(_NO_TOKEN, _NO_PLAYER, _LIMITED, _STORE_DOWN)
@blp.doc(operationId="getPlayer", security=READ)
@rate_limits.limited("client_reads_per_minute")
def get_player(club_id, pid):
    """A player's page: lifetime figures, each season's with the place in it, and `history`, one entry per
    finished table (oldest first: enough for a trend chart of totals or places)."""
    return jsonify(clubs().player(club_id_of(club_id), access(write=False), player_id_of(pid)))


@blp.route("/<club_id>/players/<pid>/merge", methods=["POST"])
@blp.arguments(cs.MergeRequest(), example={"into": "p0123456789ab"})
@blp.response(200, cs.PlayerPage)
@blp.problems(400, _NO_TOKEN, _READ_TOKEN, _NO_PLAYER, 413, 415,
              (422, "`into` is not a player of this club (`player_not_in_club`: another club's, or none), is the "
                    "player itself (`merge_into_itself`), or sat at a table with it (`players_met`)"),
              _LIMITED, _STORE_DOWN, _FULL)
@blp.doc(operationId="mergePlayer", security=WRITE)
@rate_limits.limited("client_events_per_minute")
def merge_player(args, club_id, pid):
    """Merge the player into `into`: one player from then on, both histories joined (the seasons they played
    are counted again as one player's; docs/rules.md#s17). Answers the page of the player who stays."""
    return jsonify(clubs().merge(club_id_of(club_id), access(write=True), player_id_of(pid), args["into"]))


# -- seasons -------------------------------------------------------------------------------------
@blp.route("/<club_id>/seasons", methods=["POST"])
@blp.arguments(cs.SeasonRequest(), example={"name": "2026 春"})
@blp.response(201, cs.SeasonView, headers={"Location": {"schema": {"type": "string"}}})
@blp.problems(400, _NO_TOKEN, _READ_TOKEN, _NO_CLUB, 413, 415, 422, _LIMITED, _STORE_DOWN, _FULL)
@blp.doc(operationId="openSeason", security=WRITE)
@rate_limits.limited("client_events_per_minute")
def open_season(args, club_id):
    """Open a new season, the current one from now on: the last one ends now. A table counts in the season
    that was current when it was finished."""
    cid = club_id_of(club_id)
    season = clubs().open_season(cid, access(write=True), args["name"].strip())
    return _created(season, f"/v1/clubs/{cid}/seasons/{season['id']}/standings")


STANDINGS_DOC = {"responses": {200: {"content": {CSV: {
    "schema": {"type": "string", "contentMediaType": CSV},
    "example": "\ufeffrank,name,player,ranked,evenings,rounds,total,...\r\n1,老王,p0123456789ab,true,3,24,180,...\r\n",
}}}}}


@blp.route("/<club_id>/seasons/<season_id>/standings", methods=["GET"])
@blp.arguments(cs.StandingsQuery(), location="query")
@blp.response(200, cs.Standings, examples=RESPONSE_EXAMPLES.get("getStandings"))
@blp.problems(_NO_TOKEN, (404, "no such club (`club_not_found`) or season of it (`season_not_found`)"),
              (422, "a query parameter out of range (`invalid_input`)"), _LIMITED, _STORE_DOWN)
@blp.doc(operationId="getStandings", security=READ, **STANDINGS_DOC)
@rate_limits.limited("client_reads_per_minute")
def get_standings(args, club_id, season_id):
    """A season's standings (`current`: the current season's): per player the evenings, rounds, totals (and
    coins with stakes), wins, 自摸, 点炮 paid, kongs, 花猪 and 大叫 paid, penalties, the biggest win and the
    rating; ranked players (`min_rounds` rounds played) first, in the club's `order` (or `order`).

    With `Accept: text/csv` the same rows as CSV (UTF-8 with a byte order mark, for Excel). Kept up to date
    as each table is counted: a read never refolds the season.
    """
    cid = club_id_of(club_id)
    if not cs.SEASON_ID.fullmatch(season_id):
        season_id = "s0"  # (no such season: the store says so, after the club's access is checked)
    body = clubs().standings(cid, access(write=False), season_id, args.get("order"))
    if wants_csv():
        return csv_response(standings_csv(body), f"standings-{body['season']}.csv")
    return jsonify(body)


# -- tables --------------------------------------------------------------------------------------
def _check_table(dealer: int):
    """How a club's table is checked before anything is written: the rules core's own checks, as for
    ``POST /v1/tables`` (the ruleset's seats, the dealer, the stakes)."""
    def check(names: list[str], ruleset: Any, stakes: Any) -> tuple[Any, Any]:
        try:
            table = TableState.new(names, ruleset, dealer, stakes)
        except StakesError as exc:
            field = exc.context.get("field")
            raise FieldRuleError(exc, "stakes" if field in (None, "stakes") else f"stakes.{field}") from None
        except TableSetupError as exc:
            raise FieldRuleError(exc, "dealer" if exc.code == Code.SEAT_OUT_OF_RANGE else "players") from None
        return table.ruleset, table.stakes
    return check


def _is_table_replay() -> bool:
    """A retried club-table creation (its Idempotency-Key already made a table from this very request)
    replays the first response: it creates nothing, so it does not count against ``tables_per_hour``
    (as ``POST /v1/tables``'s replay).  The table belongs to the club's owner, whoever creates it (the club's
    token alone, its API key, the token with another key): the store looks the replay up as the club's
    (:meth:`~service.store.clubs.ClubStore.is_table_replay`).  The same key with another body counts, and so
    does a request the club refuses."""
    found = current_app.extensions.get("clubs")
    if found is None:
        return False
    try:
        key = creation_key()
        cid = club_id_of(str((request.view_args or {}).get("club_id", "")))
        return key is not None and found.is_table_replay(cid, access(write=True), key, _creation_fingerprint())
    except Exception:  # noqa: BLE001 - not a valid key or club (the view refuses it) or Redis trouble (503): counted
        return False


@blp.route("/<club_id>/tables", methods=["POST"])
@blp.arguments(cs.ClubTableRequest(), example={"players": [{"player": "p0123456789ab"}, {"player": "p1123456789ab"},
                                                           {"player": "p2123456789ab"}, {"guest": "小张"}]})
@blp.arguments(ts.CreateHeaders(), location="headers", as_kwargs=True)
@blp.response(201, cs.ClubTableCreated, headers={"Location": {"schema": {"type": "string"}}})
@blp.problems(400, _NO_TOKEN, _READ_TOKEN, _NO_CLUB,
              (409, "the table this Idempotency-Key created was deleted (`table_deleted`), or its first "
                    "response is no longer kept (`idempotency_key_expired`)"), 413, 415,
              (422, "the body breaks the schema or a rule (`invalid_input`, `bad_players`, ...); a seat names a "
                    "player that is not this club's (`player_not_in_club`) or a player twice "
                    "(`player_seated_twice`), with `errors` naming the seat"), _LIMITED, _STORE_DOWN, _FULL)
@blp.doc(operationId="createClubTable", security=WRITE)
@rate_limits.limited("tables_per_hour", exempt_when=_is_table_replay)
def create_club_table(args, club_id, idempotency_key=None):
    """Start a table played for the club: as `POST /v1/tables`, but each of `players` is `{"player": id}` or
    `{"guest": name}` (the club's ruleset and stakes unless given). The table's tokens are shown only here;
    when it is finished it counts, once, in the season current then.

    An `Idempotency-Key` works as a table creation's, and so does `TABLES_PER_HOUR`: an exact retry is free
    whether it comes with the club's write token or its API key (the table is the club's key's).
    """
    cid = club_id_of(club_id)
    key = creation_key(idempotency_key)
    created, seats = clubs().create_table(
        cid, access(write=True), args["players"], ruleset=args.get("ruleset"), dealer=args["dealer"],
        stakes=args.get("stakes"), idempotency_key=key,
        fp=_creation_fingerprint(), validate=_check_table(args["dealer"]))
    response = jsonify({**created.as_dict(), "club": cid, "seats": seats})
    response.status_code = 201
    response.headers["Location"] = f"/v1/tables/{created.id}"
    if created.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return response


# -- import --------------------------------------------------------------------------------------
IMPORT_DOC = {"requestBody": {"required": True, "content": {CSV: {
    "schema": {"type": "string", "contentMediaType": CSV, "maxLength": 16 * 1024 * 1024,
               "description": "at most `MAX_BODY_BYTES` (64 KiB by default)"},
    "example": "date,player,total\r\n2025-11-07,老王,120\r\n2025-11-07,小李,-40\r\n2025-11-07,阿珍,-80\r\n",
}}}}


@blp.route("/<club_id>/import", methods=["POST"])
@blp.response(201, cs.Imported)
@blp.alt_response(200, schema=cs.Imported, description="the same import again: nothing new (`Idempotent-Replayed`)")
@blp.problems(_NO_TOKEN, _READ_TOKEN, _NO_CLUB,
              (409, "some of the evenings were imported before (`already_imported`, `errors` naming their rows)"),
              413, (415, "the body is not `text/csv`"),
              (422, "rows that cannot be imported (`bad_rows`: `errors` names each, `<line>.<column>`), or none "
                    "(`empty_import`): nothing is imported"), _LIMITED, _STORE_DOWN, _FULL)
@blp.doc(operationId="importEvenings", security=WRITE, **IMPORT_DOC)
@rate_limits.limited("client_events_per_minute")
def import_evenings(club_id):
    """Bring in past evenings from CSV (`date,player,total` rows; players by name or alias): each evening
    (the rows of one date) becomes a finished result without rounds in the current season. All rows or
    none: every bad row is named in the problem's `errors`. The same file again changes nothing.
    """
    cid = club_id_of(club_id)
    if request.mimetype != CSV:
        raise UnsupportedMediaType(f"an import is text/csv, got {request.mimetype or 'no content type'}")
    rows, errors = read_evenings(request.get_data())
    body = clubs().import_evenings(cid, access(write=True), rows, errors)
    replayed = body.pop("replayed")
    response = jsonify(body)
    response.status_code = 200 if replayed else 201
    if replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return response


def document(api) -> None:
    """The clubs' security scheme."""
    api.spec.components.security_scheme("clubToken", {
        "type": "http", "scheme": "bearer",
        "description": "A club's token from its creation: the write token, or the read token (reads only).",
    })

