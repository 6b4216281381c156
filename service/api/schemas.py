"""Request and response schemas: marshmallow at the HTTP edge only.

*Load* schemas (``*Request``) check the JSON shape, reject unknown fields and
bound every string, list and number; their ``post_load`` turns the payload
into the core's value types (:class:`~service.rules.hand.Hand`,
:class:`~service.rules.fan.Win`, :class:`~service.rules.ruleset.Ruleset`,
tiles).  A :class:`~service.rules.errors.RuleError` met there is re-raised as
:class:`~service.api.problems.FieldRuleError` naming the field.

*Dump* is kept apart: the ``dump_*`` functions build the response bodies
straight from the core's results (fast, no per-object marshmallow work), and
the ``*Response`` schemas only *document* those bodies in the OpenAPI
document (the test suite checks the two agree).

>>> TingRequest().load({"hand": {"tiles": "1112345678999m"}})["hand"].size
13
"""

from __future__ import annotations

from dataclasses import fields as dc_fields
from typing import Any, Callable, Mapping

import marshmallow as ma
from marshmallow import ValidationError, fields, post_load, validate

from ..rules.codes import REASONS  # API.md: stable transfer reasons
from ..rules.errors import RuleError
from ..rules.events import MAX_FAN
from ..rules.fan import Score, Win
from ..rules.hand import Hand, Meld
from ..rules.patterns import PATTERNS, PatternFan
from ..rules.ruleset import MAX_BASE, MAX_CAP, MAX_UNITS, PLAYERS, PRESETS, Ruleset, ENUMS
from ..rules.tiles import Tile, parse_suit, parse_tiles
from ..rules.ting import DiscardAdvice, Ting, Wait
from ..rules.validate import Validation
from .problems import FieldRuleError

# -- bounds -------------------------------------------------------------------
MAX_HAND_CHARS = 200
MAX_HAND_TILES = 64
MAX_TILE_CHARS = 16
MAX_SUIT_CHARS = 8
MAX_MELDS = 4
MAX_VISIBLE_CHARS = 200
MAX_EVENTS = 200
MAX_WINNERS = 4
MAX_SEATS = 4
MAX_PATTERNS = 32


def _rule(path: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the core; a RuleError becomes a FieldRuleError naming ``path``."""
    try:
        return fn(*args, **kwargs)
    except RuleError as exc:
        raise FieldRuleError(exc, path) from None


_INSTANCES: dict[type, ma.Schema] = {}


def _instance(cls: type[ma.Schema]) -> ma.Schema:
    """One shared instance per schema class (loading keeps no state on the schema)."""
    schema = _INSTANCES.get(cls)
    if schema is None:
        schema = _INSTANCES[cls] = cls()
    return schema


# -- fields -------------------------------------------------------------------
class StrictBoolean(fields.Boolean):
    """A JSON ``true`` or ``false`` only (no 1, "yes", "true")."""

    def _deserialize(self, value, attr, data, **kwargs):
        if value is True or value is False:
            return value
        raise self.make_error("invalid", input=value)


def Int(lo: int, hi: int, **kwargs: Any) -> fields.Integer:
    return fields.Integer(strict=True, validate=validate.Range(lo, hi), **kwargs)


def Str(max_len: int, **kwargs: Any) -> fields.String:
    return fields.String(validate=validate.Length(max=max_len), **kwargs)


class DocumentedField(fields.Field):
    """A field whose OpenAPI schema is given by :meth:`openapi` (see app.py)."""

    def openapi(self, converter) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError


class TilesField(DocumentedField):
    """A hand's tiles: a hand string, or a list of tile strings."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, str):
            if len(value) > MAX_HAND_CHARS:
                raise ValidationError(f"Longer than maximum length {MAX_HAND_CHARS}.")
            return value
        if isinstance(value, list):
            if len(value) > MAX_HAND_TILES:
                raise ValidationError(f"Longer than maximum length {MAX_HAND_TILES}.")
            errors = {
                i: ["Not a valid string."] if not isinstance(t, str) else [f"Longer than maximum length {MAX_TILE_CHARS}."]
                for i, t in enumerate(value)
                if not isinstance(t, str) or len(t) > MAX_TILE_CHARS
            }
            if errors:
                raise ValidationError(errors)
            return list(value)
        raise ValidationError("A hand string or a list of tile strings.")

    def openapi(self, converter) -> dict:
        return {
            "oneOf": [
                {"type": "string", "maxLength": MAX_HAND_CHARS,
                 "description": "hand string, e.g. 123m456p789s11m"},
                {"type": "array", "maxItems": MAX_HAND_TILES,
                 "items": {"type": "string", "maxLength": MAX_TILE_CHARS},
                 "description": "tile strings, e.g. [\"1m\", \"2m\"]"},
            ],
            "examples": ["123m456p789s11m"],
        }


class UnionField(DocumentedField):
    """An object that is one of several schemas, chosen by :meth:`choose`."""

    schemas: tuple[type[ma.Schema], ...] = ()
    discriminator: str | None = None

    def choose(self, value: Mapping[str, Any]) -> type[ma.Schema] | None:
        raise NotImplementedError

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, dict):
            raise ValidationError("Invalid input type.")
        schema = self.choose(value)
        if schema is None:
            raise ValidationError({self.discriminator or "_schema": [self.no_match]})
        return _instance(schema).load(value)

    no_match = "Does not match any of the allowed shapes."

    def openapi(self, converter) -> dict:
        out: dict[str, Any] = {"oneOf": [converter.resolve_nested_schema(s) for s in self.schemas]}
        return out


class RulesetField(DocumentedField):
    """A preset name or an object of overrides; loads to a :class:`Ruleset`."""

    def _deserialize(self, value, attr, data, **kwargs):
        path = self.name or "ruleset"
        if isinstance(value, str):
            if len(value) > 64:
                raise ValidationError("Longer than maximum length 64.")
            return _rule(path, Ruleset.from_spec, value)
        if isinstance(value, dict):
            return _rule(path, Ruleset.from_spec, _instance(RulesetSpec).load(value))
        raise ValidationError("A preset name or an object of ruleset fields.")

    def openapi(self, converter) -> dict:
        return {
            "oneOf": [
                {"type": "string", "enum": list(PRESETS), "description": "a preset name"},
                converter.resolve_nested_schema(RulesetSpec),
            ],
            "description": "a preset name, or an object overriding a preset's fields (default preset: xuezhan)",
        }


# -- shared objects ---------------------------------------------------------------
class MeldSchema(ma.Schema):
    type = fields.String(required=True, validate=validate.OneOf(["peng", "kong"]))
    tile = Str(MAX_TILE_CHARS, required=True)
    kind = fields.String(
        allow_none=True, validate=validate.OneOf(["direct", "added", "concealed"]),
        metadata={"description": "kong kind; a peng has none"},
    )


class HandSchema(ma.Schema):
    """``{"tiles", "melds", "void"}``; loads to a plain dict (melds default ``[]``)."""

    tiles = TilesField(required=True)
    melds = fields.List(fields.Nested(MeldSchema), load_default=list, validate=validate.Length(max=MAX_MELDS))
    void = Str(MAX_SUIT_CHARS, allow_none=True, load_default=None,
               metadata={"description": "定缺 suit: m, p or s (or 万/筒/条)"})


def _ruleset_spec_fields() -> dict[str, fields.Field]:
    out: dict[str, fields.Field] = {
        "preset": fields.String(validate=validate.OneOf(list(PRESETS)), metadata={"default": "xuezhan"}),
    }
    for f in dc_fields(Ruleset):
        name = f.name
        if name == "preset":
            continue
        if name in ENUMS:
            out[name] = fields.String(validate=validate.OneOf(list(ENUMS[name])))
        elif isinstance(f.default, bool):
            out[name] = StrictBoolean()
        elif name == "cap":
            out[name] = Int(1, MAX_CAP, allow_none=True)
        elif name == "players":
            out[name] = fields.Integer(strict=True, validate=[validate.Range(min(PLAYERS), max(PLAYERS)),
                                                              validate.OneOf(list(PLAYERS))],
                                       metadata={"description": "4, or 3 (三人两房: seats 0-2, 筒 and 条 only)"})
        elif name == "base":
            out[name] = Int(1, MAX_BASE)
        else:
            out[name] = Int(0, MAX_UNITS)
    return out


RulesetSpec = ma.Schema.from_dict(_ruleset_spec_fields(), name="RulesetSpec")
"""The object form of a ruleset: a preset and any of its fields overridden."""


def load_hand(data: Mapping[str, Any], path: str) -> Hand:
    """A loaded HandSchema dict → :class:`Hand`; notation errors name the field."""
    raw = data["tiles"]
    if isinstance(raw, str):
        tiles = _rule(f"{path}.tiles", parse_tiles, raw)
    else:
        tiles = [_rule(f"{path}.tiles.{i}", Tile.from_str, t) for i, t in enumerate(raw)]
    melds = tuple(
        _rule(f"{path}.melds.{i}", Meld.from_mapping, m) for i, m in enumerate(data.get("melds") or ())
    )
    void = data.get("void")
    if void is not None:
        void = _rule(f"{path}.void", parse_suit, void)
    return Hand(tuple(tiles), melds, void)


# -- hand requests ----------------------------------------------------------------
class _HandRequest(ma.Schema):
    hand = fields.Nested(HandSchema, required=True)
    ruleset = RulesetField(metadata={"default": "xuezhan"})

    @post_load
    def _to_core(self, data: dict, **kwargs: Any) -> dict:
        data["hand"] = load_hand(data["hand"], "hand")
        data.setdefault("ruleset", PRESETS["xuezhan"])
        if "visible" in self.fields:
            visible = data.get("visible")
            data["visible"] = _rule("visible", parse_tiles, visible) if visible else None
        return data


class ValidateRequest(_HandRequest):
    visible = Str(MAX_VISIBLE_CHARS, metadata={"description": "tiles seen elsewhere (a hand string)"})


class TingRequest(_HandRequest):
    visible = Str(MAX_VISIBLE_CHARS, metadata={"description": "tiles seen elsewhere (a hand string)"})


class DiscardsRequest(TingRequest):
    pass


class WinSchema(ma.Schema):
    tile = Str(MAX_TILE_CHARS, required=True, metadata={"description": "the winning tile, among the concealed tiles"})
    self_drawn = StrictBoolean(load_default=False)
    after_kong = StrictBoolean(load_default=False)
    robbing_kong = StrictBoolean(load_default=False)
    last_tile = StrictBoolean(load_default=False)
    heavenly = StrictBoolean(load_default=False)
    earthly = StrictBoolean(load_default=False)


class ScoreRequest(_HandRequest):
    win = fields.Nested(WinSchema, required=True)

    @post_load
    def _win(self, data: dict, **kwargs: Any) -> dict:
        w = dict(data["win"])
        w["tile"] = _rule("win.tile", Tile.from_str, w["tile"])
        data["win"] = _rule("win", Win, **w)
        return data


# -- rounds -------------------------------------------------------------------------
class _Keyed(ma.Schema):
    """Loads to a plain dict with ``from_`` renamed to the API key ``from``."""

    @post_load
    def _rename(self, data: dict, **kwargs: Any) -> dict:
        if "from_" in data:
            data["from"] = data.pop("from_")
        return data


class WinnerWithHand(ma.Schema):
    seat = Int(0, 3, required=True)
    hand = fields.Nested(HandSchema, required=True)


class WinnerWithFan(ma.Schema):
    seat = Int(0, 3, required=True)
    fan = Int(1, MAX_FAN, required=True, metadata={"description": "total fan before the cap"})
    patterns = fields.List(
        fields.String(validate=validate.OneOf(list(PATTERNS))), validate=validate.Length(max=MAX_PATTERNS),
        metadata={"description": "pattern ids, informational"},
    )


class WinnerField(UnionField):
    schemas = (WinnerWithHand, WinnerWithFan)
    no_match = "A winner gives 'hand' or 'fan'."

    def choose(self, value):
        return WinnerWithHand if "hand" in value else WinnerWithFan


class SeatHand(ma.Schema):
    seat = Int(0, 3, required=True)
    hand = fields.Nested(HandSchema, required=True)


class SeatTing(ma.Schema):
    seat = Int(0, 3, required=True)
    status = fields.String(required=True, validate=validate.OneOf(["ting"]))
    dajiao_fan = Int(1, MAX_FAN, required=True, metadata={"description": "大叫 fan before the cap"})


class SeatStatus(ma.Schema):
    seat = Int(0, 3, required=True)
    status = fields.String(required=True, validate=validate.OneOf(["not_ting", "huazhu"]))


class SeatField(UnionField):
    schemas = (SeatHand, SeatTing, SeatStatus)

    def choose(self, value):
        if "hand" in value:
            return SeatHand
        return SeatTing if value.get("status") == "ting" else SeatStatus


class PengEvent(_Keyed):
    type = fields.String(required=True, validate=validate.OneOf(["peng"]))
    seat = Int(0, 3, required=True)
    tile = Str(MAX_TILE_CHARS, required=True)
    from_ = Int(0, 3, required=True, data_key="from")


class KongEvent(_Keyed):
    type = fields.String(required=True, validate=validate.OneOf(["kong"]))
    seat = Int(0, 3, required=True)
    kind = fields.String(required=True, validate=validate.OneOf(["direct", "added", "concealed"]))
    tile = Str(MAX_TILE_CHARS, required=True)
    from_ = Int(0, 3, allow_none=True, load_default=None, data_key="from",
                metadata={"description": "the discarder, for a direct kong only"})


class HuEvent(_Keyed):
    type = fields.String(required=True, validate=validate.OneOf(["hu"]))
    from_ = Int(0, 3, allow_none=True, load_default=None, data_key="from",
                metadata={"description": "the discarder; null for 自摸"})
    tile = Str(MAX_TILE_CHARS, required=True)
    winners = fields.List(WinnerField(), required=True, validate=validate.Length(min=1, max=MAX_WINNERS))
    after_kong = StrictBoolean(load_default=False)
    robbing_kong = StrictBoolean(load_default=False)
    last_tile = StrictBoolean(load_default=False)
    heavenly = StrictBoolean(load_default=False)
    earthly = StrictBoolean(load_default=False)


class DrawEvent(_Keyed):
    type = fields.String(required=True, validate=validate.OneOf(["draw"]))
    seats = fields.List(SeatField(), required=True, validate=validate.Length(max=MAX_SEATS))


class EscapeEvent(_Keyed):
    type = fields.String(required=True, validate=validate.OneOf(["escape"]))
    seat = Int(0, 3, required=True)
    last_four = StrictBoolean(load_default=False)
    seats = fields.List(SeatField(), validate=validate.Length(max=MAX_SEATS))


EVENT_SCHEMAS: dict[str, type[ma.Schema]] = {
    "peng": PengEvent, "kong": KongEvent, "hu": HuEvent, "draw": DrawEvent, "escape": EscapeEvent,
}


class TypedUnionField(UnionField):
    """A union chosen by the object's ``type`` member, documented with an OpenAPI discriminator."""

    kinds: dict[str, type[ma.Schema]] = {}
    discriminator = "type"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.schemas = tuple(cls.kinds.values())
        cls.no_match = f"Must be one of: {', '.join(cls.kinds)}."

    def choose(self, value):
        kind = value.get("type")
        return self.kinds.get(kind) if isinstance(kind, str) else None

    def openapi(self, converter) -> dict:
        out = super().openapi(converter)
        out["discriminator"] = {
            "propertyName": "type",
            "mapping": {k: converter.resolve_nested_schema(s)["$ref"] for k, s in self.kinds.items()},
        }
        return out


class EventField(TypedUnionField):
    kinds = EVENT_SCHEMAS


class SettleRequest(ma.Schema):
    ruleset = RulesetField(metadata={"default": "xuezhan"})
    dealer = Int(0, 3, required=True)
    voids = fields.List(
        Str(MAX_SUIT_CHARS, allow_none=True), validate=validate.Length(min=min(PLAYERS), max=max(PLAYERS)),
        metadata={"description": "each seat's 定缺 suit (or null), for hands that give no void; one per seat "
                                 "(three with players = 3, where all are null: no 定缺)"},
    )
    events = fields.List(EventField(), required=True, validate=validate.Length(max=MAX_EVENTS))

    @post_load
    def _to_core(self, data: dict, **kwargs: Any) -> dict:
        data.setdefault("ruleset", PRESETS["xuezhan"])
        voids = data.get("voids")
        if voids is not None:
            data["voids"] = [
                None if v is None else _rule(f"voids.{i}", parse_suit, v) for i, v in enumerate(voids)
            ]
        return data


# -- responses (documentation) ----------------------------------------------------
class PatternSchema(ma.Schema):
    id = fields.String(required=True, validate=validate.OneOf(list(PATTERNS)))
    name = fields.String(required=True, metadata={"description": "Chinese name"})
    name_en = fields.String(required=True)
    fan = fields.Integer(required=True, metadata={"description": "total fan of this pattern"})
    count = fields.Integer(metadata={"description": "how many (根 only)"})


class DajiaoSchema(ma.Schema):
    fan = fields.Integer(required=True)
    points = fields.Integer(required=True)


class WaitSchema(ma.Schema):
    tile = fields.String(required=True)
    fan = fields.Integer(required=True)
    points = fields.Integer(required=True)
    patterns = fields.List(fields.Nested(PatternSchema), required=True)
    remaining = fields.Integer(required=True)


class HandProblemSchema(ma.Schema):
    code = fields.String(required=True)
    message = fields.String(required=True)


class ValidateResponse(ma.Schema):
    valid = fields.Boolean(required=True)
    size = fields.Integer(required=True)
    tiles = fields.String(required=True, metadata={"description": "canonical concealed tiles"})
    suits = fields.List(fields.String(validate=validate.OneOf(["m", "p", "s"])), required=True)
    huazhu = fields.Boolean(required=True)
    complete = fields.Boolean(required=True)
    problems = fields.List(fields.Nested(HandProblemSchema), required=True)


class TingResponse(ma.Schema):
    ting = fields.Boolean(required=True)
    huazhu = fields.Boolean(required=True)
    waits = fields.List(fields.Nested(WaitSchema), required=True)
    dajiao = fields.Nested(DajiaoSchema, required=True, allow_none=True)


class DiscardOptionSchema(ma.Schema):
    discard = fields.String(required=True)
    waits = fields.List(fields.Nested(WaitSchema), required=True)
    remaining = fields.Integer(required=True)
    dajiao = fields.Nested(DajiaoSchema, required=True)


class DiscardsResponse(ma.Schema):
    options = fields.List(fields.Nested(DiscardOptionSchema), required=True)
    complete = fields.Boolean(required=True, metadata={"description": "the 14 tiles already win"})


class ScoreResponse(ma.Schema):
    fan = fields.Integer(required=True, metadata={"description": "after the cap"})
    raw_fan = fields.Integer(required=True)
    multiplier = fields.Integer(required=True)
    points = fields.Integer(required=True)
    capped = fields.Boolean(required=True)
    patterns = fields.List(fields.Nested(PatternSchema), required=True)
    decomposition = fields.List(fields.String(), required=True)


class TransferSchema(ma.Schema):
    from_ = fields.Integer(required=True, data_key="from")
    to = fields.Integer(required=True)
    points = fields.Integer(required=True)
    reason = fields.String(required=True, validate=validate.OneOf(REASONS))
    event = fields.Integer(required=True, metadata={"description": "0-based index of the causing event"})


class SettleResponse(ma.Schema):
    deltas = fields.List(fields.Integer(), required=True, validate=validate.Length(min=min(PLAYERS), max=max(PLAYERS)),
                         metadata={"description": "one per seat (three with players = 3)"})
    transfers = fields.List(fields.Nested(TransferSchema), required=True)
    winners = fields.List(fields.Integer(), required=True)
    ended = fields.Boolean(required=True)
    next_dealer = fields.Integer(required=True, allow_none=True)


def _required(f: fields.Field) -> fields.Field:
    f.required = True
    return f


RulesetOut = ma.Schema.from_dict(
    {name: _required(f) for name, f in _ruleset_spec_fields().items()}, name="Ruleset"
)
"""A ruleset with every field (``preset`` names the preset it was built from)."""


class RulesetsResponse(ma.Schema):
    default = fields.String(required=True)
    presets = fields.Dict(keys=fields.String(), values=fields.Nested(RulesetOut), required=True)


class HealthResponse(ma.Schema):
    status = fields.String(required=True)
    checks = fields.Dict(keys=fields.String(), values=fields.String())


class ProblemSchema(ma.Schema):
    """RFC 9457 problem details."""

    class Meta:
        unknown = ma.INCLUDE

    type = fields.String(required=True, metadata={"format": "uri"})
    title = fields.String(required=True)
    status = fields.Integer(required=True)
    detail = fields.String(required=True)
    code = fields.String(metadata={"description": "stable error id"})
    instance = fields.String(metadata={"description": "the request path"})
    request_id = fields.String()
    errors = fields.Dict(
        keys=fields.String(), values=fields.List(fields.String()),
        metadata={"description": "field path → messages, for input that breaks the schema"},
    )
    event = fields.Integer(metadata={"description": "index of the event that cannot happen"})


# -- dump -------------------------------------------------------------------------
def dump_patterns(patterns: tuple[PatternFan, ...]) -> list[dict]:
    return [p.as_dict() for p in patterns]


def dump_wait(w: Wait) -> dict:
    return {
        "tile": str(w.tile), "fan": w.fan, "points": w.points,
        "patterns": [p.as_dict() for p in w.patterns], "remaining": w.remaining,
    }


def dump_validation(v: Validation) -> dict:
    return {
        "valid": v.valid, "size": v.size, "tiles": v.tiles, "suits": list(v.suits),
        "huazhu": v.huazhu, "complete": v.complete,
        "problems": [{"code": p.code, "message": p.message} for p in v.problems],
    }


def dump_ting(t: Ting) -> dict:
    return {
        "ting": t.ting, "huazhu": t.huazhu, "waits": [dump_wait(w) for w in t.waits],
        "dajiao": None if t.dajiao is None else {"fan": t.dajiao.fan, "points": t.dajiao.points},
    }


def dump_discards(a: DiscardAdvice) -> dict:
    return {
        "options": [
            {
                "discard": str(o.discard), "waits": [dump_wait(w) for w in o.waits],
                "remaining": o.remaining, "dajiao": {"fan": o.dajiao.fan, "points": o.dajiao.points},
            }
            for o in a.options
        ],
        "complete": a.complete,
    }


def dump_score(s: Score) -> dict:
    return {
        "fan": s.fan, "raw_fan": s.raw_fan, "multiplier": s.multiplier, "points": s.points,
        "capped": s.capped, "patterns": dump_patterns(s.patterns), "decomposition": list(s.decomposition),
    }


def dump_rulesets() -> dict:
    return {"default": "xuezhan", "presets": {name: r.as_dict() for name, r in PRESETS.items()}}
