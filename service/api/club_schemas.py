"""Schemas of the clubs API (docs/rules.md#s17): requests loaded at the edge, responses documented."""

from __future__ import annotations

import re
from typing import Any

import marshmallow as ma
from marshmallow import ValidationError, fields, post_load, validate, validates_schema

from ..rules.season import MIN_ROUNDS, ORDERS
from .schemas import Int, RulesetField, RulesetOut, StakesField, StakesSchema, load_stakes
from .table_schemas import MAX_PLAYER_CHARS, BiggestWin, KongCounts, TableCreated

MAX_CLUB_CHARS = 60
MAX_ALIASES = 20
CLUB_ID = re.compile(r"[0-9a-f]{16}")
PLAYER_ID = re.compile(r"p[0-9a-f]{12}")
SEASON_ID = re.compile(r"s[0-9]{1,9}|current")

_Name = lambda n, **kw: fields.String(validate=validate.Length(min=1, max=n), **kw)  # noqa: E731


def _not_blank(value: str) -> None:
    if not value.strip():
        raise ValidationError("must not be blank")


class CreateClubRequest(ma.Schema):
    name = fields.String(required=True, validate=[validate.Length(min=1, max=MAX_CLUB_CHARS), _not_blank],
                         metadata={"description": "the club's name"})
    ruleset = RulesetField(metadata={"description": "the club's tables' ruleset unless a table names one (absent: "
                                                    "`xuezhan`)"})
    stakes = StakesField(metadata={"description": "the club's tables' stakes unless a table gives its own "
                                                  "(docs/rules.md#s12)"})
    min_rounds = Int(0, 100_000, load_default=MIN_ROUNDS, metadata={
        "description": "the rounds a player needs in a season to be ranked (docs/rules.md#s17)"})
    order = fields.String(validate=validate.OneOf(ORDERS), load_default="total", metadata={
        "description": "how the standings are ordered: by `total` points or by `rating` (its ordinal)"})
    season = fields.String(validate=[validate.Length(min=1, max=MAX_CLUB_CHARS), _not_blank], load_default="1",
                           metadata={"description": "the name of the first season, opened with the club"})

    @post_load
    def _to_core(self, data: dict, **kwargs: Any) -> dict:
        ruleset = data.get("ruleset")
        if data.get("stakes") is not None:
            seats = ruleset.players if ruleset is not None else 4
            data["stakes"] = load_stakes(data["stakes"], seats).as_dict()
        if ruleset is not None:
            data["ruleset"] = ruleset.as_dict()
        data["name"] = data["name"].strip()
        data["season"] = data["season"].strip()
        return data


class SeasonView(ma.Schema):
    id = fields.String(required=True, metadata={"description": "`s1`, `s2`, ... in the order they were opened"})
    name = fields.String(required=True)
    started = fields.String(required=True, metadata={"format": "date-time"})
    ended = fields.String(required=True, allow_none=True, metadata={
        "format": "date-time", "description": "null while it is the current season"})


class PlayerView(ma.Schema):
    id = fields.String(required=True)
    name = fields.String(required=True)
    aliases = fields.List(fields.String(), required=True, metadata={
        "description": "other names the player is found by (an import's rows)"})
    merged = fields.List(fields.String(), required=True, metadata={
        "description": "the ids of the players merged into this one (they name this player from then on)"})


class ClubView(ma.Schema):
    id = fields.String(required=True)
    name = fields.String(required=True)
    ruleset = fields.Nested(RulesetOut, required=True, allow_none=True)
    stakes = fields.Nested(StakesSchema, required=True, allow_none=True)
    min_rounds = fields.Integer(required=True)
    order = fields.String(required=True, validate=validate.OneOf(ORDERS))
    created = fields.String(required=True, metadata={"format": "date-time"})
    players = fields.List(fields.Nested(PlayerView), required=True, metadata={"description": "by name"})
    seasons = fields.List(fields.Nested(SeasonView), required=True, metadata={"description": "oldest first"})
    current_season = fields.String(required=True)


class ClubCreated(ClubView):
    token = fields.String(required=True, metadata={"description": "the club's write token: shown only here"})
    read_token = fields.String(required=True, metadata={"description": "the club's read token: shown only here"})


class PlayerRequest(ma.Schema):
    name = fields.String(required=True, validate=[validate.Length(min=1, max=MAX_PLAYER_CHARS), _not_blank])
    aliases = fields.List(fields.String(validate=[validate.Length(min=1, max=MAX_PLAYER_CHARS), _not_blank]),
                          load_default=list, validate=validate.Length(max=MAX_ALIASES))


class PlayerPatch(ma.Schema):
    name = fields.String(validate=[validate.Length(min=1, max=MAX_PLAYER_CHARS), _not_blank])
    aliases = fields.List(fields.String(validate=[validate.Length(min=1, max=MAX_PLAYER_CHARS), _not_blank]),
                          validate=validate.Length(max=MAX_ALIASES), metadata={"description": "replaces the aliases"})

    @validates_schema
    def _something(self, data: dict, **kwargs: Any) -> None:
        if not data:
            raise ValidationError("give a `name` or `aliases`", "_schema")


class MergeRequest(ma.Schema):
    into = fields.String(required=True, validate=validate.Length(min=1, max=64), metadata={
        "description": "the player of this club who stays: the merged player's history joins theirs"})


class SeasonRequest(ma.Schema):
    name = fields.String(required=True, validate=[validate.Length(min=1, max=MAX_CLUB_CHARS), _not_blank])


class SeatRequest(ma.Schema):
    player = fields.String(validate=validate.Length(min=1, max=64), metadata={"description": "a player of this club"})
    guest = fields.String(validate=[validate.Length(min=1, max=MAX_PLAYER_CHARS), _not_blank], metadata={
        "description": "a guest's name (never ranked)"})

    @validates_schema
    def _one(self, data: dict, **kwargs: Any) -> None:
        if len(data) != 1:
            raise ValidationError("give either `player` or `guest`", "_schema")


class ClubTableRequest(ma.Schema):
    players = fields.List(fields.Nested(SeatRequest), required=True, validate=validate.Length(min=3, max=4),
                          metadata={"description": "seat 0 first: each `{\"player\": id}` or `{\"guest\": name}`"})
    ruleset = RulesetField(metadata={"description": "absent: the club's"})
    dealer = Int(0, 3, load_default=0)
    stakes = StakesField(metadata={"description": "absent: the club's"})


class Seat(ma.Schema):
    player = fields.String(metadata={"description": "the club's player at the seat"})
    guest = fields.String(metadata={"description": "a guest's name"})


class ClubTableCreated(TableCreated):
    club = fields.String(required=True, metadata={"description": "the club's id"})
    seats = fields.List(fields.Nested(Seat), required=True, metadata={"description": "who sits where (a merged "
                                                                                     "player named by who stays)"})


class RatingView(ma.Schema):
    mu = fields.Float(required=True)
    sigma = fields.Float(required=True)
    ordinal = fields.Float(required=True, metadata={"description": "μ − 3σ"})


class SeasonBiggestWin(BiggestWin):
    table = fields.String(required=True, metadata={"description": "the table (or imported evening) it was won at"})


class Figures(ma.Schema):
    evenings = fields.Integer(required=True, metadata={"description": "tables (and imported evenings) played"})
    rounds = fields.Integer(required=True)
    total = fields.Integer(required=True, metadata={"description": "points"})
    coins = fields.Integer(metadata={"description": "(tables with stakes) the coin results' sum"})
    wins = fields.Integer(required=True)
    zimo = fields.Integer(required=True)
    dianpao_paid = fields.Integer(required=True)
    kongs = fields.Nested(KongCounts, required=True)
    huazhu_paid = fields.Integer(required=True)
    dajiao_paid = fields.Integer(required=True)
    penalties = fields.Integer(required=True, metadata={"description": "points paid as penalties"})
    biggest_win = fields.Nested(SeasonBiggestWin, required=True, allow_none=True)
    rating = fields.Nested(RatingView, required=True)


class StandingRow(Figures):
    player = fields.String(required=True)
    name = fields.String(required=True)
    rank = fields.Integer(required=True, allow_none=True, metadata={"description": "null while unranked"})
    ranked = fields.Boolean(required=True, metadata={"description": "has played `min_rounds` rounds"})


class Standings(ma.Schema):
    season = fields.String(required=True)
    name = fields.String(required=True, metadata={"description": "the season's name"})
    min_rounds = fields.Integer(required=True)
    order = fields.String(required=True, validate=validate.OneOf(ORDERS))
    players = fields.List(fields.Nested(StandingRow), required=True, metadata={
        "description": "ranked players first, then by `order`, ties by the other figure, then by name"})


class StandingsQuery(ma.Schema):
    order = fields.String(validate=validate.OneOf(ORDERS), metadata={"description": "absent: the club's order"})


class SeasonFigures(Figures):
    season = fields.String(required=True)
    name = fields.String(required=True)
    rank = fields.Integer(required=True, allow_none=True)
    ranked = fields.Boolean(required=True)


class HistoryEntry(ma.Schema):
    table = fields.String(required=True, metadata={"description": "the table (or imported evening, `imp_...`)"})
    finished_at = fields.String(required=True, metadata={"format": "date-time"})
    season = fields.String(required=True)
    total = fields.Integer(required=True)
    rank = fields.Integer(required=True, metadata={"description": "the player's place at that table"})
    rounds = fields.Integer(required=True)
    imported = fields.Boolean(required=True)
    coins = fields.Integer(metadata={"description": "(a table with stakes) the player's coin result"})


class PlayerPage(PlayerView):
    lifetime = fields.Nested(Figures, required=True, metadata={"description": "every season (its own rating)"})
    seasons = fields.List(fields.Nested(SeasonFigures), required=True, metadata={
        "description": "the seasons the player played in, oldest first, with the place in each"})
    history = fields.List(fields.Nested(HistoryEntry), required=True, metadata={
        "description": "one entry per finished table (or imported evening), oldest first"})


class Imported(ma.Schema):
    season = fields.String(required=True, metadata={"description": "the season they count in: the current one"})
    evenings = fields.Integer(required=True)
    rows = fields.Integer(required=True)
    results = fields.List(fields.String(), required=True, metadata={"description": "the evenings' ids"})
