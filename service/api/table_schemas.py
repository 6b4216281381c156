"""Schemas of the tables API: requests loaded at the edge; events, log records and
responses documented (the rules core decides what an event is, see schemas.py)."""

from __future__ import annotations

import re
from typing import Any

import marshmallow as ma
from marshmallow import fields, post_load, validate

from ..rules.codes import Code
from ..rules.ruleset import PLAYERS, PRESETS
from ..rules.stakes import MAX_COINS, StakesError
from ..rules.table import (
    MAX_ADJUST_POINTS,
    MAX_ADJUST_TRANSFERS,
    MAX_CORRECTION_EVENTS,
    MAX_NOTE_CHARS,
    TABLE_EVENTS,
    TableSetupError,
    TableState,
)
from ..store.table_store import ROUNDS_PAGE
from .problems import FieldRuleError
from .schemas import (
    EVENT_SCHEMAS,
    MAX_SUIT_CHARS,
    ROUND_STATUS,
    SUIT,
    Const,
    DrawEvent,
    EnumField,
    EscapeEvent,
    HuEvent,
    Int,
    KongEvent,
    OneOf,
    PenaltyEvent,
    PengEvent,
    Ref,
    RulesetField,
    RulesetOut,
    Seat,
    StakesField,
    Str,
    TransferSchema,
)

MAX_PLAYER_CHARS = 40
MAX_PAGE = 500
MAX_IDEMPOTENCY_KEY = 128
MAX_TABLES_PAGE = 100


class CreateTableRequest(ma.Schema):
    players = fields.List(
        fields.String(validate=validate.Length(min=1, max=MAX_PLAYER_CHARS)),
        required=True, validate=validate.Length(min=min(PLAYERS), max=max(PLAYERS)),
        metadata={"description": "the seats' names, seat 0 first: as many as the ruleset's `players` (four, or "
                                 "three for sanren-liangfang); another number is a 422 `bad_players`"},
    )
    ruleset = RulesetField(metadata={"default": "xuezhan"})
    dealer = Int(0, 3, load_default=0, metadata={"description": "the first round's dealer (0-2 with three players)"})
    stakes = StakesField(metadata={"description": "optional: play for coins (docs/rules.md#s12); the table then has "
                                                  "`coins`, and each ended round `coins_delta` and `fees`"})

    @post_load
    def _to_core(self, data: dict, **kwargs: Any) -> dict:
        data.setdefault("ruleset", PRESETS["xuezhan"])
        return table_setup(data)


def table_setup(data: dict) -> dict:
    """A table's ``players``, ``ruleset``, ``dealer`` and ``stakes`` checked by the core (as many names as
    the ruleset's ``players``, the dealer, the stakes): a refusal is a 422 naming the member."""
    try:
        table = TableState.new(data["players"], data["ruleset"], data["dealer"], data.get("stakes"))
    except StakesError as exc:
        field = exc.context.get("field")
        raise FieldRuleError(exc, "stakes" if field in (None, "stakes") else f"stakes.{field}") from None
    except TableSetupError as exc:
        raise FieldRuleError(exc, "dealer" if exc.code == Code.SEAT_OUT_OF_RANGE else "players") from None
    return {**data, "stakes": table.stakes}


class NextTableRequest(ma.Schema):
    """The table that follows a finished one: each member left out is the finished table's."""

    players = fields.List(
        fields.String(validate=validate.Length(min=1, max=MAX_PLAYER_CHARS)),
        validate=validate.Length(min=min(PLAYERS), max=max(PLAYERS)),
        metadata={"description": "the seats' names, seat 0 first; left out: the finished table's"})
    ruleset = RulesetField(metadata={"description": "a preset name, or an object overriding a preset's fields; "
                                                    "left out: the finished table's ruleset"})
    dealer = Int(0, 3, load_default=0, metadata={"description": "the first round's dealer (0-2 with three players)"})
    stakes = StakesField(allow_none=True, metadata={
        "description": "the coin settings (docs/rules.md#s12); left out: the finished table's (its bankrolls as "
                       "they were set at its start); null: no coins"})


class RoundStartEvent(ma.Schema):
    type = Const("round_start")
    dealer = Seat(allow_none=True, metadata={
        "description": "this round's dealer; omitted: the previous round's next dealer"})
    voids = fields.List(Str(MAX_SUIT_CHARS, allow_none=True), allow_none=True,
                        validate=validate.Length(min=min(PLAYERS), max=max(PLAYERS)),
                        metadata={"description": "each seat's 定缺 suit (or null), one per seat (three with "
                                                 "players = 3, all null: no 定缺)"})


class RoundEndEvent(ma.Schema):
    type = Const("round_end")


class BuyInEvent(ma.Schema):
    type = Const("buy_in")
    seat = Seat(required=True)
    coins = Int(1, MAX_COINS, required=True, metadata={
        "description": "added to the seat's bankroll; only between rounds, at a table with stakes (docs/rules.md#s12)"})


class AdjustTransfer(ma.Schema):
    from_ = Seat(required=True, data_key="from", metadata={"description": "the seat that pays"})
    to = Seat(required=True, metadata={"description": "the seat paid (not the payer)"})
    points = Int(1, MAX_ADJUST_POINTS, required=True)


class AdjustEvent(ma.Schema):
    type = Const("adjust")
    transfers = fields.List(fields.Nested(AdjustTransfer), required=True,
                            validate=validate.Length(min=1, max=MAX_ADJUST_TRANSFERS), metadata={
                                "description": "points moved outside the rules (reason `adjust`), between rounds "
                                               "only (409 `round_in_progress` during one); in the balances, never in "
                                               "a round's deltas; no coins move (docs/rules.md#s15.5)"})
    note = Str(MAX_NOTE_CHARS, allow_none=True, metadata={"description": "why (茶水, a side bet, a mistake found "
                                                                         "after the evening, ...)"})


TABLE_EVENT_SCHEMAS: dict[str, type[ma.Schema]] = {
    **EVENT_SCHEMAS, "round_start": RoundStartEvent, "round_end": RoundEndEvent, "buy_in": BuyInEvent,
    "adjust": AdjustEvent,
}
assert set(TABLE_EVENT_SCHEMAS) == set(TABLE_EVENTS), "every event of a table has its schema"


class CorrectionRequest(ma.Schema):
    """The body of a correction (docs/rules.md#s15.2), loaded as given: the rules core checks the events."""

    events = fields.List(Ref("Event"), required=True, validate=validate.Length(max=MAX_CORRECTION_EVENTS), metadata={
        "description": "the round's events, all of them, in order: they replace the round's (a refused one: 422 "
                       "with `event`, its index here)"})
    dealer = Seat(allow_none=True, metadata={"description": "the round's dealer; omitted: kept"})
    voids = fields.List(Str(MAX_SUIT_CHARS, allow_none=True), allow_none=True,
                        validate=validate.Length(min=min(PLAYERS), max=max(PLAYERS)),
                        metadata={"description": "each seat's 定缺 suit (or null); omitted: kept"})
    note = Str(MAX_NOTE_CHARS, allow_none=True, metadata={"description": "why (kept in the log)"})


_TABLES_CURSOR = [validate.Length(max=32), validate.Regexp(r"^\d{1,15}-[0-9a-f]{16}$")]
_SEQ_CURSOR = [validate.Length(max=10), validate.Regexp(r"^[0-9]{1,10}$")]


class TablesQuery(ma.Schema):
    cursor = fields.String(validate=_TABLES_CURSOR, metadata={
        "description": "the `next` of the previous page (opaque); absent: the first page"})
    after = fields.String(validate=_TABLES_CURSOR, metadata={
        "description": "the same as `cursor` (its earlier name, kept as an alias)"})
    limit = fields.Integer(validate=validate.Range(1, MAX_TABLES_PAGE), load_default=50)


class TableQuery(ma.Schema):
    rounds_after = fields.Integer(validate=validate.Range(0, 10**9), load_default=0,
                                  metadata={"description": "list the ended rounds after this round number"})
    rounds_limit = fields.Integer(validate=validate.Range(1, MAX_PAGE), load_default=ROUNDS_PAGE,
                                  metadata={"description": "at most this many ended rounds"})


class EventsQuery(ma.Schema):
    cursor = fields.String(validate=_SEQ_CURSOR, metadata={
        "description": "the `next` of the previous page (opaque); absent: from the first record"})
    after = fields.Integer(validate=validate.Range(0, 10**9), metadata={
        "description": "list the records after this seq (an alias of `cursor`, which is the seq as text)"})
    limit = fields.Integer(validate=validate.Range(1, MAX_PAGE), load_default=100)


class RoundsQuery(ma.Schema):
    cursor = fields.String(validate=_SEQ_CURSOR, metadata={
        "description": "the `next` of the previous page (opaque); absent: from the first round"})
    limit = fields.Integer(validate=validate.Range(1, MAX_PAGE), load_default=ROUNDS_PAGE)


# -- headers -------------------------------------------------------------------------
IDEMPOTENCY_KEY = re.compile(rf"^[\x21-\x7e]{{1,{MAX_IDEMPOTENCY_KEY}}}$")
# a creation's Idempotency-Key: a UUID of version 4 (random) or 7 (time and random), RFC 9562
CREATION_KEY = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[47][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$")



def idempotency_key_field(description: str) -> fields.String:
    """An ``Idempotency-Key`` header of 1-128 visible ASCII characters, with what it does at its endpoint."""
    return fields.String(data_key="Idempotency-Key",
                         validate=validate.Regexp(IDEMPOTENCY_KEY, error="1-128 visible ASCII characters"),
                         metadata={"description": description})


class WriteHeaders(ma.Schema):
    """The headers of a write to a table (loaded from the request's headers; others are ignored)."""

    idempotency_key = idempotency_key_field(
        "1-128 visible ASCII characters, unique per write of this table: a retry with "
                                 "the same key and body returns the first response (`Idempotent-Replayed: true`) "
                                 "and records nothing; the same key with another body: 422 "
                                 "`idempotency_key_reused`. Kept as long as the table.")
    if_match = fields.String(
        data_key="If-Match", validate=validate.Length(max=2048),
        metadata={"description": 'the version the write expects, as "<version>" (a list: any of them; "*": any); '
                                 'stale: 412; a tag that is not a version: 422'})


class CreateHeaders(ma.Schema):
    idempotency_key = fields.String(
        data_key="Idempotency-Key",
        validate=validate.Regexp(CREATION_KEY, error="a UUID of version 4 or 7"),
        metadata={"format": "uuid", "description":
                  "a UUID (RFC 9562) of version 4 or 7, generated at random for this one creation; anything "
                  "else: 422. **A secret**: a retry with the same key and body returns the first response, "
                  "the tokens included (kept 24 h, never longer than the table), so whoever knows the key "
                  "can take the table. The same key with another body: 422 `idempotency_key_reused`, and it "
                  "counts against the creation rate limit (an exact retry does not)."})


class RotateHeaders(ma.Schema):
    idempotency_key = idempotency_key_field(
        "1-128 visible ASCII characters (a random UUID is best), made afresh for this "
                                 "one rotation: a retry with the same key and the same credential (the old write "
                                 "token, which works for that retry only, or the API key) within 24 h answers "
                                 "the same new tokens (`Idempotent-Replayed: true`); the same key with another "
                                 "credential: 422 `idempotency_key_reused`. Only the table's last rotation is "
                                 "kept.")


class NextHeaders(ma.Schema):
    idempotency_key = idempotency_key_field(
        "1-128 visible ASCII characters (a random UUID is best): a retry with the same key "
                                 "and body answers the first response (`Idempotent-Replayed: true`) as long as the "
                                 "next table lives; without it (or with another body) a retry is 409 "
                                 "`table_followed`, which names the table all the same.")


class ReadHeaders(ma.Schema):
    if_none_match = fields.String(
        data_key="If-None-Match", validate=validate.Length(max=2048),
        metadata={"description": 'the version the client has, as "<version>": 304 when the table is still at '
                                 'it (weak comparison)'})


# -- responses (documentation) ----------------------------------------------------
_Seats = fields.List(fields.Integer(), required=True)


def _Coins(description: str, **kwargs: Any) -> fields.List:
    """A seat-indexed list of coins, present only at a table with stakes."""
    return fields.List(fields.Integer(), metadata={"description": description}, **kwargs)


class RoundView(ma.Schema):
    number = fields.Integer(required=True)
    dealer = fields.Integer(required=True)
    status = EnumField(ROUND_STATUS, required=True)
    voids = fields.List(EnumField(SUIT, allow_none=True), required=True)
    won = fields.List(fields.Integer(), required=True, metadata={"description": "winners in order"})
    left = fields.List(fields.Integer(), required=True, metadata={"description": "seats that escaped"})
    deltas = fields.List(fields.Integer(), required=True)
    ended_by = fields.String(required=True, allow_none=True)
    next_dealer = fields.Integer(required=True, allow_none=True)
    events = fields.Integer(required=True, metadata={"description": "round events so far"})
    bankrolls = _Coins("(with stakes) each seat's coins when the round started")
    coins_delta = _Coins("(with stakes) each seat's change of coins, its fee included; null while it is played",
                         allow_none=True)
    fees = _Coins("(with stakes) what each seat paid the house; null while it is played", allow_none=True)


class RoundSummary(ma.Schema):
    number = fields.Integer(required=True)
    dealer = fields.Integer(required=True)
    deltas = fields.List(fields.Integer(), required=True)
    won = fields.List(fields.Integer(), required=True)
    left = fields.List(fields.Integer(), required=True)
    ended_by = fields.String(required=True, allow_none=True)
    next_dealer = fields.Integer(required=True, allow_none=True)
    first_seq = fields.Integer(required=True)
    last_seq = fields.Integer(required=True)
    bankrolls = _Coins("(with stakes) each seat's coins when the round started")
    coins_delta = _Coins("(with stakes) each seat's change of coins in the round, its fee included")
    fees = _Coins("(with stakes) what each seat paid the house for the round")


class TableCreated(ma.Schema):
    id = fields.String(required=True)
    token = fields.String(required=True, metadata={"description": "write token: shown only here"})
    read_token = fields.String(required=True, metadata={"description": "read token: shown only here"})
    players = fields.List(fields.String(), required=True)
    ruleset = fields.Nested(RulesetOut, required=True)
    dealer = fields.Integer(required=True)
    version = fields.Integer(required=True)
    balances = fields.List(fields.Integer(), required=True)
    coins = _Coins("(with stakes) each seat's bankroll")


class NextTableCreated(ma.Schema):
    id = fields.String(required=True)
    follows = fields.String(required=True, metadata={
        "description": "the finished table it follows: its write and read tokens are this table's too"})
    players = fields.List(fields.String(), required=True)
    ruleset = fields.Nested(RulesetOut, required=True)
    dealer = fields.Integer(required=True)
    version = fields.Integer(required=True)
    balances = fields.List(fields.Integer(), required=True)
    coins = _Coins("(with stakes) each seat's bankroll")


class TableView(ma.Schema):
    id = fields.String(required=True)
    players = fields.List(fields.String(), required=True)
    ruleset = fields.Nested(RulesetOut, required=True)
    dealer = fields.Integer(required=True, metadata={"description": "dealer of the next round_start"})
    version = fields.Integer(required=True, metadata={"description": "log length; also the ETag"})
    balances = fields.List(fields.Integer(), required=True)
    coins = _Coins("(with stakes) each seat's bankroll now")
    round = fields.Nested(RoundView, required=True, allow_none=True)
    rounds = fields.List(fields.Nested(RoundSummary), required=True, metadata={
        "description": "the ended rounds after `rounds_after`, oldest first, at most `rounds_limit`"})
    rounds_next = fields.Integer(required=True, allow_none=True, metadata={
        "description": "pass as `rounds_after` for the next page of ended rounds; null at the end"})
    finished_at = fields.String(required=True, allow_none=True, metadata={
        "format": "date-time", "description": "when the table was finished (it then takes no more events); "
                                              "null while it is not"})
    next = fields.String(metadata={
        "description": "(a finished table another follows) the table that follows it: it takes the same tokens "
                       "(`POST /v1/tables/{table_id}/next`)"})


class KongCounts(ma.Schema):
    direct = fields.Integer(required=True)
    added = fields.Integer(required=True)
    concealed = fields.Integer(required=True)


class BiggestWin(ma.Schema):
    round = fields.Integer(required=True)
    fan = fields.Integer(required=True, metadata={"description": "after the cap"})
    patterns = fields.List(fields.String(), required=True, metadata={
        "description": "pattern ids of the hand (empty for a win entered as a fan)"})
    points = fields.Integer(required=True, metadata={"description": "what the win's own payments brought"})


class SeatSummary(ma.Schema):
    seat = fields.Integer(required=True)
    name = fields.String(required=True)
    total = fields.Integer(required=True, metadata={"description": "the seat's balance (points)"})
    rank = fields.Integer(required=True, metadata={"description": "1 = the highest total; equal totals share one"})
    wins = fields.Integer(required=True, metadata={"description": "hu events the seat won"})
    zimo = fields.Integer(required=True, metadata={"description": "of them self-drawn (the others: 点炮 received)"})
    dianpao_paid = fields.Integer(required=True, metadata={"description": "won discards the seat fed"})
    kongs = fields.Nested(KongCounts, required=True)
    huazhu_paid = fields.Integer(required=True, metadata={"description": "points paid as a 花猪"})
    dajiao_paid = fields.Integer(required=True, metadata={"description": "points paid at 查大叫"})
    escapes = fields.Integer(required=True)
    biggest_win = fields.Nested(BiggestWin, required=True, allow_none=True)
    penalties_paid = fields.Integer(required=True,
                                    metadata={"description": "points paid for 诈胡 (docs/rules.md#s15.3)"})
    adjusted = fields.Integer(required=True, metadata={"description": "net points of adjustments (received less "
                                                                      "paid; in `total`, docs/rules.md#s15.5)"})
    coins = fields.Integer(metadata={"description": "(with stakes) the seat's coin result: coins now - bankroll - "
                                                    "buy-ins + fees paid, what passed between it and the others"})
    fees = fields.Integer(metadata={"description": "(with stakes) what the seat paid the house"})
    buy_ins = fields.Integer(metadata={"description": "(with stakes) the coins the seat bought in"})


class Payment(ma.Schema):
    from_ = fields.Integer(required=True, data_key="from")
    to = fields.Integer(required=True)
    points = fields.Integer(metadata={"description": "(without stakes) the points paid"})
    coins = fields.Integer(metadata={"description": "(with stakes, in place of `points`) the coins paid: the "
                                                    "payments square each seat's coin result (docs/rules.md#s10.1)"})


class TableSummaryOfEvening(ma.Schema):
    id = fields.String(required=True)
    players = fields.List(fields.String(), required=True)
    rounds = fields.Integer(required=True, metadata={"description": "ended rounds"})
    finished_at = fields.String(required=True, allow_none=True, metadata={"format": "date-time"})
    seats = fields.List(fields.Nested(SeatSummary), required=True)
    settle_up = fields.List(fields.Nested(Payment), required=True, metadata={
        "description": "the fewest payments that bring every balance to 0 (at most one fewer than the "
                       "seats), by payer then payee; with stakes, in coins, squaring each seat's `coins`; how "
                       "ties are broken: docs/rules.md#s10.1"})
    next = fields.String(metadata={"description": "(a finished table another follows) the table that follows it"})


class EventAppended(ma.Schema):
    seq = fields.Integer(required=True)
    version = fields.Integer(required=True)
    transfers = fields.List(fields.Nested(TransferSchema), required=True,
                            metadata={"description": "transfers caused; `event` is the seq"})
    balances = fields.List(fields.Integer(), required=True)
    round = fields.Nested(RoundView, required=True, allow_none=True)
    voided = fields.Integer(metadata={"description": "(void) the seq voided"})
    deltas = fields.List(fields.Integer(), metadata={"description": "(void) change of the balances"})
    coins = _Coins("(with stakes) each seat's bankroll after it")


class _Record(ma.Schema):
    """What the log adds to an event it records."""

    seq = fields.Integer(required=True, metadata={"description": "1-based position in the log"})
    at = fields.String(required=True, metadata={"format": "date-time",
                                                "description": "when it was recorded (UTC, RFC 3339)"})
    voided = fields.Boolean(required=True, metadata={"description": "a later void record undid it"})


class _RoundRecord(_Record):
    round = fields.Integer(required=True, allow_none=True,
                           metadata={"description": "the round it belongs to (a buy-in: the round before it); null "
                                                    "before the first round"})


class PengRecord(PengEvent, _RoundRecord):
    pass


class KongRecord(KongEvent, _RoundRecord):
    pass


class HuRecord(HuEvent, _RoundRecord):
    pass


class DrawRecord(DrawEvent, _RoundRecord):
    pass


class EscapeRecord(EscapeEvent, _RoundRecord):
    pass


class RoundStartRecord(RoundStartEvent, _RoundRecord):
    pass


class RoundEndRecord(RoundEndEvent, _RoundRecord):
    pass


class BuyInRecord(BuyInEvent, _RoundRecord):
    pass


class PenaltyRecord(PenaltyEvent, _RoundRecord):
    pass


class AdjustRecord(AdjustEvent, _RoundRecord):
    pass


class CorrectionRecord(_Record):
    type = Const("correction")
    round = fields.Integer(required=True, metadata={"description": "the round it rewrites"})
    events = fields.List(Ref("Event"), required=True, metadata={"description": "the round's events from then on"})
    dealer = Seat(metadata={"description": "the round's dealer, when given"})
    voids = fields.List(EnumField(SUIT, allow_none=True), metadata={"description": "the round's voids, when given"})
    note = fields.String(allow_none=True)


class VoidRecord(_Record):
    type = Const("void")
    target = fields.Integer(required=True, metadata={"description": "the seq of the record it undoes"})
    round = fields.Integer(allow_none=True, metadata={"description": "the round of the record it undoes"})


LOG_RECORD_SCHEMAS: dict[str, type[ma.Schema]] = {
    "peng": PengRecord, "kong": KongRecord, "hu": HuRecord, "draw": DrawRecord, "escape": EscapeRecord,
    "round_start": RoundStartRecord, "round_end": RoundEndRecord, "buy_in": BuyInRecord, "void": VoidRecord,
    "penalty": PenaltyRecord, "adjust": AdjustRecord, "correction": CorrectionRecord,
}
assert set(LOG_RECORD_SCHEMAS) == {*TABLE_EVENTS, "void", "correction"}, "every record of the log has its schema"


class _Streamed(ma.Schema):
    """What the live stream adds to a record: the table after it."""

    version = fields.Integer(required=True, metadata={"description": "the table's version after it"})
    balances = fields.List(fields.Integer(), required=True, metadata={"description": "each seat's balance after it"})
    coins = _Coins("(with stakes) each seat's bankroll after it")


def _streamed(record: type[ma.Schema], **extra: Any) -> type[ma.Schema]:
    """``record`` as the stream sends it, a schema of its own (``Stream<record>``): a generated client
    gets one flat type per kind, not an intersection with the log's union."""
    return type(f"Stream{record.__name__}", (_Streamed, record), extra)


_BUY_IN_STREAMED = {  # a buy-in's own coins bought travel as `amount`: `coins` is the bankrolls
    "coins": _Coins("each seat's bankroll after it", required=True),
    "amount": fields.Integer(required=True, metadata={"description": "the coins bought"}),
}
STREAM_RECORD_SCHEMAS: dict[str, type[ma.Schema]] = {
    kind: _streamed(schema, **(_BUY_IN_STREAMED if kind == "buy_in" else {}))
    for kind, schema in LOG_RECORD_SCHEMAS.items()}


class TableSummary(ma.Schema):
    id = fields.String(required=True)
    players = fields.List(fields.String(), required=True)
    created = fields.String(required=True, metadata={"format": "date-time",
                                                     "description": "when it was created (UTC, RFC 3339)"})
    version = fields.Integer(required=True)
    balances = fields.List(fields.Integer(), required=True)


class TablesPage(ma.Schema):
    tables = fields.List(fields.Nested(TableSummary), required=True, metadata={"description": "newest first"})
    next = fields.String(required=True, allow_none=True,
                         metadata={"description": "pass as `cursor` for the next page; null at the end"})


class EventsPage(ma.Schema):
    events = fields.List(OneOf(discriminator=LOG_RECORD_SCHEMAS), required=True,
                         metadata={"description": "log records in order, each the event as posted plus its seq"})
    next = fields.String(required=True, allow_none=True,
                         metadata={"description": "pass as `cursor` for the next page; null at the end"})


class _Explained(ma.Schema):
    """What the rounds view adds to an event of a round: where it is in the log, and what it paid."""

    seq = fields.Integer(required=True, metadata={"description": "the seq of its record (a correction's event: the "
                                                                 "correction's)"})
    index = fields.Integer(metadata={"description": "(an event of a correction) its place in the correction's list"})
    transfers = fields.List(fields.Nested(TransferSchema), required=True, metadata={
        "description": "what it paid; each names `event`: the seq above"})


EXPLAINED_EVENT_SCHEMAS: dict[str, type[ma.Schema]] = {
    kind: type(f"Explained{schema.__name__}", (schema, _Explained), {}) for kind, schema in EVENT_SCHEMAS.items()}


class RoundExplained(ma.Schema):
    """A round as it stands (corrected), every event with the transfers it made (docs/api.md: the rounds)."""

    number = fields.Integer(required=True)
    dealer = fields.Integer(required=True)
    status = EnumField(ROUND_STATUS, required=True)
    voids = fields.List(EnumField(SUIT, allow_none=True), required=True)
    deltas = fields.List(fields.Integer(), required=True, metadata={"description": "each seat's points in it"})
    won = fields.List(fields.Integer(), required=True, metadata={"description": "winners in order"})
    left = fields.List(fields.Integer(), required=True, metadata={"description": "seats that escaped"})
    ended_by = fields.String(required=True, allow_none=True, metadata={
        "description": "the event that ended it, or `round_end` (a correction that left it without an ending "
                       "closes it so); null while played"})
    next_dealer = fields.Integer(required=True, allow_none=True)
    first_seq = fields.Integer(required=True, metadata={"description": "the seq of its round_start"})
    last_seq = fields.Integer(required=True, allow_none=True, metadata={
        "description": "the seq of the record that ended it; null while played"})
    events = fields.List(OneOf(discriminator=EXPLAINED_EVENT_SCHEMAS), required=True, metadata={
        "description": "its events as they stand: those of its latest correction (if any), then its own recorded "
                       "after that; voided ones left out"})
    transfers = fields.List(fields.Nested(TransferSchema), required=True, metadata={"description": "all of them, "
                                                                                                   "in order"})
    corrected_by = fields.List(fields.Integer(), required=True, metadata={
        "description": "the seqs of its corrections not voided, oldest first (the last one holds)"})
    bankrolls = _Coins("(with stakes) each seat's coins when the round started")
    coins_delta = _Coins("(with stakes) each seat's change of coins, its fee included; null while played",
                         allow_none=True)
    fees = _Coins("(with stakes) what each seat paid the house; null while played", allow_none=True)


class RoundsPage(ma.Schema):
    rounds = fields.List(fields.Nested(RoundExplained), required=True, metadata={
        "description": "oldest first; the round being played last"})
    next = fields.String(required=True, allow_none=True,
                         metadata={"description": "pass as `cursor` for the next page; null at the end"})


class Corrected(ma.Schema):
    seq = fields.Integer(required=True, metadata={"description": "the correction's seq"})
    version = fields.Integer(required=True)
    balances = fields.List(fields.Integer(), required=True)
    changes = fields.List(fields.Integer(), required=True, metadata={"description": "each seat's new balance less "
                                                                                    "its old"})
    round = fields.Nested(RoundExplained, required=True, metadata={"description": "the round as corrected"})
    coins = _Coins("(with stakes) each seat's bankroll after it")
