"""Request and response schemas: marshmallow at the HTTP edge only.

*Load* schemas (``*Request``) check the JSON shape, reject unknown fields and bound every string, list
and number.  The hand, the win and ``visible`` are custom fields (:class:`HandField`, :class:`WinField`,
:class:`VisibleField`: marshmallow's documented ``_deserialize`` extension point) that load straight to
what the core takes: the common ``{"tiles": "<hand string>"}`` is handed to the core's own reading of a
hand string, and only melds, a ``void`` or a list of tiles go through the nested :class:`HandSchema`
(likewise :class:`WinSchema` only for a win that is not a tile string with ``true``/``false`` flags).  A
:class:`~service.rules.errors.RuleError` met there becomes a
:class:`~service.api.problems.FieldRuleError` naming the field, raised once every field has loaded
(:class:`Refused`), so that a body the schema refuses gets the schema's messages whatever the core
would say.  A batch loads the items of one operation together (each item still answered alone:
:mod:`service.api.batch_items`): an item of the fields' plain form (:class:`PlainField`, the form most
bodies have) by :meth:`_HandRequest.load_plain`, the very code the fields' ``_deserialize`` runs first,
without marshmallow's walk of the schema; the others by ``load(..., many=True)``.

*Response* schemas (``*Response`` and the schemas they nest) document each answer; they are not what
writes it.  One serializer per shape runs: the ``dump_*`` functions below build each body straight from
the core's value, for the single endpoints and for batch items alike (the views return the body, which
flask-smorest passes through; ``@blp.response`` only documents it).  Chosen by measurement
(``bench/serializers.py``, figures in docs/performance.md): a marshmallow dump of an answer walks every
field of every wait and pattern and costs many times the ``dump_*`` function of the same answer (more
than the core takes to compute most answers), where a batch item is held to a small multiple of the
core's cost, and no view needs anything a schema's dump would add.
So the schemas carry no serializer logic (no ``post_dump``, no attribute paths): each field is a member
of the body, under the body's name.  tests/test_api_response_schemas.py keeps the two in agreement for
generated hands and rounds: every body validates against its schema (no member missing, none
undocumented, each of the documented type) and the schema's own dump of that body gives it back to the
byte, and every documented member is written by some body.  The one shape a schema does write is
``GET /v1/rulesets`` (:class:`RulesetsResponse`, rarely called, no ``dump_*``).  A wait's body is a
function of an immutable value the core's memos share: it is built once and shared by the answers that
list it (:func:`dump_wait`, :func:`dump_pattern` by value; a discard option's by identity,
:class:`SharedBodies`; bodies are read-only).  A body is built of what orjson writes natively and what
JSON reads back the same (dicts, lists, strings, numbers).

*Events* are the rules core's to decide (:func:`service.rules.events.parse_event`
and the table fold: a seat's range depends on the table's ruleset): the event
schemas here (``PengEvent`` ... ``EscapeEvent``) only *document* them, and the
tests check that the document and the core agree.  Every enumeration (preset
names, kong kinds, reasons, pattern ids, the ruleset's choices) is one named
schema, referenced wherever it is used.

>>> TingRequest().load({"hand": {"tiles": "1112345678999m"}, "visible": "5m"})["visible"]
[Tile('5m')]
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import fields as dc_fields
from typing import Any, NamedTuple

import marshmallow as ma
from marshmallow import ValidationError, fields, post_load, validate

from ..rules.codes import REASONS
from ..rules.errors import RuleError
from ..rules.events import (
    EVENT_TYPES,
    HU_FLAGS,
    MAX_FAN,
    MAX_HAND_CHARS,
    MAX_HAND_TILES,
    MAX_MELDS,
    MAX_PATTERNS,
    MAX_SUIT_CHARS,
    MAX_TILE_CHARS,
    PENALTY_KINDS,
    STATUSES,
)
from ..rules.fan import Score, Win
from ..rules.hand import KONG_KINDS, MELD_TYPES, Hand, Meld, parse_hand, suit_keys
from ..rules.patterns import PATTERNS, PatternFan
from ..rules.ruleset import ENUMS, MAX_BASE, MAX_CAP, MAX_UNITS, PLAYERS, PRESETS, Ruleset
from ..rules.settle import Settlement
from ..rules.shanten import USEFUL, Shanten, ShantenOptions, UsefulTile
from ..rules.stakes import MAX_COINS, CoinSettlement, Stakes, StakesError
from ..rules.tiles import SUITS, Tile, parse_suit, parse_tiles
from ..rules.ting import DiscardAdvice, DiscardOption, Ting, Wait
from ..rules.validate import Validation
from .problems import FieldRuleError

# -- bounds -------------------------------------------------------------------
# (those of a hand and its parts are the core's, so that a hand inside an event,
# which the core parses, and a hand of /v1/hands/*, loaded here, agree)
MAX_VISIBLE_CHARS = 200
MAX_EVENTS = 200


def _rule(path: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the core; a RuleError becomes a FieldRuleError naming ``path``."""
    try:
        return fn(*args, **kwargs)
    except RuleError as exc:
        raise FieldRuleError(exc, path) from None


@functools.cache
def _instance(cls: type[ma.Schema]) -> ma.Schema:
    """One shared instance per schema class (loading keeps no state on the schema)."""
    return cls()


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


def Seat(**kwargs: Any) -> fields.Integer:
    return Int(0, 3, **kwargs)


class DocumentedField(fields.Field):
    """A field whose OpenAPI schema is given by :meth:`openapi` (see app.py)."""

    def openapi(self, converter) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError


class _NotPlain:
    """The type of :data:`NOT_PLAIN`."""

    def __repr__(self) -> str:
        return "NOT_PLAIN"


NOT_PLAIN: Any = _NotPlain()
"""What :meth:`PlainField.plain` answers for a value that is not of its field's plain form."""


class PlainField(DocumentedField):
    """A field with a plain form: the values most bodies give, loaded by :meth:`plain` without marshmallow's
    walk (its ``_deserialize`` runs :meth:`plain`, then :meth:`full` for any other value), for
    :meth:`_HandRequest.load_plain`."""

    def plain(self, value: Any) -> Any:
        """``value`` loaded, when it is of the plain form (one that breaks no rule of the field), else
        :data:`NOT_PLAIN`."""
        return NOT_PLAIN

    def full(self, value: Any) -> Any:
        """``value`` loaded by every rule of the field (what :meth:`plain` did not take)."""
        raise NotImplementedError

    def _deserialize(self, value, attr, data, **kwargs):
        loaded = self.plain(value)
        return self.full(value) if loaded is NOT_PLAIN else loaded


ENUMS_DOC: dict[str, tuple[str, ...]] = {}
"""Every named enumeration of the document: schema name → values (registered by app.py)."""


def named_enum(name: str, values: tuple[str, ...] | list[str], description: str) -> str:
    ENUMS_DOC[name] = tuple(values)
    ENUM_DESCRIPTIONS[name] = description
    return name


ENUM_DESCRIPTIONS: dict[str, str] = {}
PRESET_NAME = named_enum("PresetName", tuple(PRESETS), "a ruleset preset (docs/rules.md)")
KONG_KIND = named_enum("KongKind", KONG_KINDS, "direct 直杠 (from a discard), added 补杠 (onto an own peng), "
                                                "concealed 暗杠")
MELD_TYPE = named_enum("MeldType", MELD_TYPES, "peng 碰 or kong 杠")
SUIT = named_enum("Suit", SUITS, "m 万 characters, p 筒 dots, s 条 bamboo")
REASON = named_enum("TransferReason", REASONS, "why points moved (stable ids)")
PATTERN_ID = named_enum("PatternId", tuple(PATTERNS), "a fan pattern id (docs/rules.md)")
ROUND_STATUS = named_enum("RoundStatus", ("playing", "ended"), "whether the round is still being played")
PENALTY_KIND = named_enum("PenaltyKind", PENALTY_KINDS, "zhahu 诈胡 (a false win: the seat pays each other seat "
                          "still in the round, docs/rules.md#s15.3) or xianggong 相公 (a wrong number of tiles: "
                          "it may not win for the rest of the round, #s15.4)")
SEAT_STATUS = named_enum("SeatStatus", tuple(x for x in STATUSES if x != "ting"),
                         "a seat at a draw that is not ting, or a 花猪 (three suits, or its void suit kept)")
RULESET_ENUMS = {
    name: named_enum("Ruleset" + "".join(w.title() for w in name.split("_")), values, f"the ruleset's {name}")
    for name, values in ENUMS.items()
}


class EnumField(DocumentedField):
    """A string from a named enumeration, documented as a reference to its one schema."""

    def __init__(self, enum: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.enum = enum

    def _deserialize(self, value, attr, data, **kwargs):
        allowed = ENUMS_DOC[self.enum]
        if not isinstance(value, str) or value not in allowed:
            raise ValidationError(f"Must be one of: {', '.join(allowed)}.")
        return value

    def openapi(self, converter) -> dict:
        ref = {"$ref": f"#/components/schemas/{self.enum}"}
        return {"anyOf": [ref, {"type": "null"}]} if self.allow_none else ref


class Const(DocumentedField):
    """A string member that must be exactly ``value`` (an object's ``type``)."""

    def __init__(self, value: str, **kwargs: Any) -> None:
        super().__init__(required=True, **kwargs)
        self.value = value

    def _deserialize(self, value, attr, data, **kwargs):
        if value != self.value:
            raise ValidationError(f"Must be {self.value!r}.")
        return value

    def openapi(self, converter) -> dict:
        return {"type": "string", "const": self.value}


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
                i: ["Not a valid string."] if not isinstance(t, str)
                else [f"Longer than maximum length {MAX_TILE_CHARS}."]
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


class OneOf(DocumentedField):
    """Documentation only: an object that is one of several schemas (optionally by ``type``)."""

    def __init__(self, *schemas: type[ma.Schema], discriminator: dict[str, type[ma.Schema]] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.schemas = schemas or tuple((discriminator or {}).values())
        self.discriminator = discriminator

    def openapi(self, converter) -> dict:
        out: dict[str, Any] = {"oneOf": [converter.resolve_nested_schema(s) for s in self.schemas]}
        if self.discriminator:
            out["discriminator"] = {
                "propertyName": "type",
                "mapping": {k: converter.resolve_nested_schema(s)["$ref"] for k, s in self.discriminator.items()},
            }
        return out


class Ref(DocumentedField):
    """Any JSON value here, documented as a named component (its owner checks it)."""

    def __init__(self, component: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.component = component

    def _deserialize(self, value, attr, data, **kwargs):
        return value

    def openapi(self, converter) -> dict:
        return {"$ref": f"#/components/schemas/{self.component}"}


MAX_CACHED_RULESETS = 256
_RULESET_FIELDS = tuple(f.name for f in dc_fields(Ruleset))
DEFAULT_RULESET: ContextVar[Ruleset] = ContextVar("default_ruleset", default=PRESETS["xuezhan"])
"""The ruleset of a body without ``ruleset`` (the fields' ``load_default``): xuezhan, or within
:func:`default_ruleset` a batch envelope's."""


@contextmanager
def default_ruleset(ruleset: Ruleset) -> Iterator[None]:
    """Loads within it give a body without ``ruleset`` this one instead of xuezhan: a batch envelope's
    ruleset, loaded once for all its items.

    >>> with default_ruleset(PRESETS["xueliu"]):
    ...     TingRequest().load({"hand": {"tiles": "1112345678999m"}})["ruleset"].mode
    'xueliu'
    """
    token = DEFAULT_RULESET.set(ruleset)
    try:
        yield
    finally:
        DEFAULT_RULESET.reset(token)


def _spec_key(value: dict) -> tuple | None:
    """A ruleset object's cache key (its members in order), or None when one is not a plain scalar.

    The type is in the key: ``True == 1`` in Python, and only one of ``{"cap": 1}`` and ``{"cap": true}``
    is a ruleset.  Only objects that loaded are cached, so every refusal is still marshmallow's own.
    """
    if len(value) > len(_RULESET_FIELDS):
        return None
    items = []
    for name, member in value.items():
        if type(member) not in (str, int, bool, type(None)) or (type(member) is str and len(member) > 64):
            return None
        items.append((name, type(member), member))
    return tuple(items)


@functools.lru_cache(maxsize=MAX_CACHED_RULESETS)
def _loaded_ruleset(key: tuple, path: str) -> Ruleset:
    """A ruleset given as an object (by its :func:`_spec_key`), loaded once: a job's items often repeat one
    ruleset.  Only objects that load are kept (a refusal is raised, and raised again the next time)."""
    spec = _instance(RulesetSpec).load({name: member for name, _, member in key})
    return _rule(path, Ruleset.from_spec, spec)


class RulesetField(PlainField):
    """A preset name or an object of overrides; loads to a :class:`Ruleset`."""

    def plain(self, value: Any) -> Any:
        """A preset name, or an object of plain members that loaded before, loaded (:data:`NOT_PLAIN`: any
        other value; see :meth:`_HandRequest.load_plain`)."""
        if type(value) is str and len(value) <= 64:
            return _rule(self.name or "ruleset", Ruleset.from_spec, value)
        if type(value) is dict:
            key = _spec_key(value)
            if key is not None:
                try:
                    return _loaded_ruleset(key, self.name or "ruleset")
                except ValidationError:
                    return NOT_PLAIN
        return NOT_PLAIN

    def full(self, value):
        path = self.name or "ruleset"
        if isinstance(value, str):
            if len(value) > 64:
                raise ValidationError("Longer than maximum length 64.")
            return _rule(path, Ruleset.from_spec, value)
        if isinstance(value, dict):
            key = _spec_key(value)
            if key is None:
                return _rule(path, Ruleset.from_spec, _instance(RulesetSpec).load(value))
            return _loaded_ruleset(key, path)
        raise ValidationError("A preset name or an object of ruleset fields.")

    def openapi(self, converter) -> dict:
        return {
            "oneOf": [
                {"$ref": f"#/components/schemas/{PRESET_NAME}"},
                converter.resolve_nested_schema(RulesetSpec),
            ],
            "description": "a preset name, or an object overriding a preset's fields (default preset: xuezhan)",
        }


# -- shared objects ---------------------------------------------------------------
class StakesSchema(ma.Schema):
    """Documentation only (the rules core checks stakes, knowing the seats: :func:`load_stakes`)."""

    coin_per_point = Int(1, MAX_COINS, required=True, metadata={"description": "coins per point (QQ's room "
                                                                               "coefficient N)"})
    fee = Int(0, MAX_COINS, load_default=0, metadata={"description": "each seat pays it to the house after every "
                                                                     "ended round (QQ's A); default 0"})
    bankrolls = fields.List(Int(0, MAX_COINS), required=True,
                            validate=validate.Length(min=min(PLAYERS), max=max(PLAYERS)),
                            metadata={"description": "each seat's coins, one per seat (three with players = 3); "
                                                     f"{MAX_COINS} at most in all"})


class StakesField(DocumentedField):
    """The stakes (docs/rules.md#s12), passed as given to :func:`load_stakes` (which needs the ruleset's seats)."""

    def _deserialize(self, value, attr, data, **kwargs):
        return value

    def openapi(self, converter) -> dict:
        return converter.resolve_nested_schema(StakesSchema)


def load_stakes(value: Any, players: int) -> Stakes:
    """Stakes checked by the core; a refusal names the member (``stakes.bankrolls.2``)."""
    try:
        return Stakes.from_spec(value, players)
    except StakesError as exc:
        field = exc.context.get("field")
        raise FieldRuleError(exc, "stakes" if field in (None, "stakes") else f"stakes.{field}") from None


class MeldSchema(ma.Schema):
    type = EnumField(MELD_TYPE, required=True)
    tile = Str(MAX_TILE_CHARS, required=True)
    kind = EnumField(KONG_KIND, allow_none=True, metadata={"description": "kong kind; a peng has none"})


class HandSchema(ma.Schema):
    """``{"tiles", "melds", "void"}``; loads to a plain dict (melds default ``[]``)."""

    tiles = TilesField(required=True)
    melds = fields.List(fields.Nested(MeldSchema), load_default=list, validate=validate.Length(max=MAX_MELDS))
    void = Str(MAX_SUIT_CHARS, allow_none=True, load_default=None,
               metadata={"description": "定缺 suit: m, p or s (or 万/筒/条)"})


def _ruleset_spec_fields() -> dict[str, fields.Field]:
    out: dict[str, fields.Field] = {
        "preset": EnumField(PRESET_NAME, metadata={"default": "xuezhan"}),
    }
    for f in dc_fields(Ruleset):
        name = f.name
        if name == "preset":
            continue
        if name in ENUMS:
            out[name] = EnumField(RULESET_ENUMS[name])
        elif isinstance(f.default, bool):
            out[name] = StrictBoolean()
        elif name == "cap":
            out[name] = Int(1, MAX_CAP, allow_none=True)
        elif name == "zhahu_fan":
            out[name] = Int(1, MAX_CAP, allow_none=True, metadata={
                "description": "the fan of the win a 诈胡 pays for (docs/rules.md#s15.3); null: the cap, or 3"})
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
        # the core's parser (a hand string's concealed tiles; the errors are parse_tiles')
        concealed = _rule(f"{path}.tiles", parse_hand, raw)
        tiles = concealed.tiles
    else:
        concealed = None
        tiles = [_rule(f"{path}.tiles.{i}", Tile.from_str, t) for i, t in enumerate(raw)]
    melds = tuple(
        _rule(f"{path}.melds.{i}", Meld.from_mapping, m) for i, m in enumerate(data.get("melds") or ())
    )
    void = data.get("void")
    if void is not None:
        void = _rule(f"{path}.void", parse_suit, void)
    if concealed is not None and not melds and void is None:
        return concealed
    return Hand(tuple(tiles), melds, void)


class Refused(NamedTuple):
    """A field that loaded but that the rules core refused (its error), kept until every field has loaded:
    a body that also breaks the schema is answered the schema's 422, as if the core had not been asked,
    and otherwise the first refusal in the fields' order is raised (:func:`check_refusals`)."""

    error: Exception


def _core(path: str | None, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, or a :class:`Refused` when the core refuses it: a :class:`RuleError` names ``path``
    (a :class:`FieldRuleError`; with no ``path`` it is kept as it is)."""
    try:
        return fn(*args)
    except FieldRuleError as exc:
        return Refused(exc)
    except RuleError as exc:
        return Refused(FieldRuleError(exc, path) if path else exc)


def check_refusals(data: dict, names: tuple[str, ...]) -> dict:
    """``data`` (a loaded body), or the first :class:`Refused` of the fields ``names``, in order, raised."""
    for name in names:
        value = data.get(name)
        if type(value) is Refused:
            raise value.error
    return data


def _nested(schema: type[ma.Schema], value: Any) -> dict:
    """``value`` loaded by ``schema`` as a ``fields.Nested`` would (the same messages)."""
    try:
        return _instance(schema).load(value)
    except ValidationError as exc:
        raise ValidationError(exc.messages, valid_data=exc.valid_data) from None


class HandField(PlainField):
    """A hand (documented as :class:`HandSchema`), loaded for the core: a :class:`Hand`, or the hand string
    itself when it is one the core reads straight from the string.

    The common form, ``{"tiles": "<hand string>"}`` alone: a string in canonical suit order with no count
    over 4 (:func:`suit_keys` says so, from the core's memo of suits) is given to the operation as it is,
    which reads it as it reads a string from the Python API (its suits' keys, not a :class:`Hand`), so the
    string is parsed once; any other string is parsed by :func:`parse_hand`.  Melds, a ``void`` or a list
    of tiles are loaded by :class:`HandSchema` (their messages are its own), then by :func:`load_hand`.
    A core refusal is a :class:`Refused`.

    >>> TingRequest().load({"hand": {"tiles": "1112345678999m"}})["hand"]
    '1112345678999m'
    >>> TingRequest().load({"hand": {"tiles": "1112345678999m", "void": "p"}})["hand"].void
    'p'

    With ``parsed`` the common form is always parsed (:func:`parse_hand`): for an operation that parses a
    string anyway (scoring), so that it is parsed once.
    """

    def __init__(self, *, parsed: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.parsed = parsed

    def plain(self, value: Any) -> Any:
        """The common form loaded (:data:`NOT_PLAIN`: any other value)."""
        if type(value) is dict and len(value) == 1:
            tiles = value.get("tiles")
            if type(tiles) is str and len(tiles) <= MAX_HAND_CHARS:
                if not self.parsed and suit_keys(tiles) is not None:
                    return tiles
                return _core(f"{self.name or 'hand'}.tiles", parse_hand, tiles)
        return NOT_PLAIN

    def full(self, value):
        path = self.name or "hand"
        return _core(None, load_hand, _nested(HandSchema, value), path)

    def openapi(self, converter) -> dict:
        return converter.resolve_nested_schema(HandSchema)


WIN_FLAGS = ("self_drawn", "after_kong", "robbing_kong", "last_tile", "heavenly", "earthly")


def _win(tile: str, flags: dict) -> Win | Refused:
    parsed = _core("win.tile", Tile.from_str, tile)
    return parsed if type(parsed) is Refused else _core("win", lambda: Win(parsed, **flags))


class WinField(PlainField):
    """How a hand won (documented as :class:`WinSchema`), loaded to a core :class:`Win`.

    An object of a tile string and ``true``/``false`` flags is checked here and given to the core;
    anything else is loaded by :class:`WinSchema` (its messages).  A core refusal is a :class:`Refused`.
    """

    def plain(self, value: Any) -> Any:
        """An object of a tile string and ``true``/``false`` flags loaded (:data:`NOT_PLAIN`: any other value)."""
        if type(value) is dict:
            tile = value.get("tile")
            if type(tile) is str and len(tile) <= MAX_TILE_CHARS:
                if len(value) == 1:
                    return _win(tile, {})
                flags = {k: v for k, v in value.items() if k != "tile"}
                if all(k in WIN_FLAG_SET and (v is True or v is False) for k, v in flags.items()):
                    return _win(tile, flags)
        return NOT_PLAIN

    def full(self, value):
        w = _nested(WinSchema, value)
        return _win(w.pop("tile"), w)

    def openapi(self, converter) -> dict:
        return converter.resolve_nested_schema(WinSchema)


WIN_FLAG_SET = frozenset(WIN_FLAGS)


def _absent() -> None:
    return None


class VisibleField(PlainField):
    """Tiles seen elsewhere: a hand string of at most :data:`MAX_VISIBLE_CHARS`, loaded to the core's tiles
    (an empty string: None).  A core refusal is a :class:`Refused`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(load_default=_absent, **kwargs)  # (a callable: no ``null``, no documented default)

    def plain(self, value: Any) -> Any:
        """A string within the bound loaded (:data:`NOT_PLAIN`: any other value)."""
        if type(value) is str and len(value) <= MAX_VISIBLE_CHARS:
            return _core("visible", parse_tiles, value) if value else None
        return NOT_PLAIN

    def full(self, value):
        if not isinstance(value, str):
            raise ValidationError("Not a valid string.")
        if len(value) > MAX_VISIBLE_CHARS:
            raise ValidationError(f"Longer than maximum length {MAX_VISIBLE_CHARS}.")
        return _core("visible", parse_tiles, value) if value else None

    def openapi(self, converter) -> dict:
        return {"type": "string", "maxLength": MAX_VISIBLE_CHARS, "description": "tiles seen elsewhere (a hand string)"}


# -- hand requests ----------------------------------------------------------------
class _HandRequest(ma.Schema):
    """A hand operation's body.  Loaded alone (``schema.load``, the single endpoints) a core refusal is raised
    by the ``post_load``; loaded with ``many=True`` (a batch's items, :mod:`service.api.batch_items`) each item
    keeps its :class:`Refused` values for the caller to raise item by item
    (:func:`check_refusals` with :attr:`CORE_FIELDS`), so that one refused item does not fail the others.

    A batch first tries each item's plain load (:meth:`load_plain`), which most items are: only the others
    go through ``load(..., many=True)``."""

    CORE_FIELDS: tuple[str, ...] = ("hand", "visible")
    hand = HandField(required=True)
    ruleset = RulesetField(load_default=DEFAULT_RULESET.get, metadata={"default": "xuezhan"})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plain_loaders: dict[str, Callable[[Any], Any]] = {
            name: field.plain for name, field in self.fields.items() if isinstance(field, PlainField)}
        """Each field's :meth:`PlainField.plain`, by name (:meth:`load_plain`)."""

    @post_load(pass_collection=True)  # (once per load: a batch's items are checked by their caller)
    def _to_core(self, data: dict | list[dict], many: bool, **kwargs: Any) -> dict | list[dict]:
        if many or isinstance(data, list):
            return data
        return check_refusals(data, self.CORE_FIELDS)

    def plain_defaults(self) -> dict[str, Any]:
        """The loaded value of each member a body may leave out, now (the ruleset: :data:`DEFAULT_RULESET`'s):
        a batch's, taken once for all its items (:meth:`load_plain`)."""
        return {name: field.load_default() if callable(field.load_default) else field.load_default
                for name, field in self.fields.items() if not field.required}

    def load_plain(self, body: Any, defaults: dict[str, Any], ignore: str | None = None) -> dict | None:
        """``body`` loaded as ``load(body, many=True)`` loads an item, when it is of the plain form: an object
        whose members (but ``ignore``, a batch item's ``op``) are fields of this schema, the required ones
        among them, each of its field's plain form (the field's ``plain`` method, which its
        ``_deserialize`` runs first: the same values, :class:`Refused` included); else None (let ``load``
        give its messages).  ``defaults``: :meth:`plain_defaults`.  A plain body breaks no rule of the
        schema, so that only the fields' own exceptions may come out, as they would out of ``load``
        (a ruleset that the core refuses).

        >>> schema = TingRequest()
        >>> args = schema.load_plain({"hand": {"tiles": "1112345678999m"}, "op": "ting"}, schema.plain_defaults(), "op")
        >>> args["hand"], args["ruleset"].preset, args["visible"]
        ('1112345678999m', 'xuezhan', None)
        >>> schema.load_plain({"hand": {"tiles": "1112345678999m"}, "extra": 1}, schema.plain_defaults()) is None
        True
        """
        if type(body) is not dict:
            return None
        loaders = self.plain_loaders
        out = dict(defaults)
        for name, value in body.items():
            if name == ignore:
                continue
            plain = loaders.get(name)
            if plain is None:
                return None
            loaded = plain(value)
            if loaded is NOT_PLAIN:
                return None
            out[name] = loaded
        return out if len(out) == len(self.fields) else None


class ValidateRequest(_HandRequest):
    visible = VisibleField()


class TingRequest(_HandRequest):
    visible = VisibleField()


class DiscardsRequest(TingRequest):
    pass


class ShantenRequest(TingRequest):
    """A hand of 13 or 14 tiles (melds counted as 3)."""


class WinSchema(ma.Schema):
    tile = Str(MAX_TILE_CHARS, required=True, metadata={"description": "the winning tile, among the concealed tiles"})
    self_drawn = StrictBoolean(load_default=False)
    after_kong = StrictBoolean(load_default=False)
    robbing_kong = StrictBoolean(load_default=False)
    last_tile = StrictBoolean(load_default=False)
    heavenly = StrictBoolean(load_default=False)
    earthly = StrictBoolean(load_default=False)


assert tuple(WinSchema().fields)[1:] == WIN_FLAGS


class ScoreRequest(_HandRequest):
    CORE_FIELDS = ("hand", "win")
    hand = HandField(required=True, parsed=True)  # (scoring parses a hand string: parsed once, here)
    win = WinField(required=True)


# -- events (documentation: the rules core decides) ----------------------------------
class WinnerWithHand(ma.Schema):
    seat = Seat(required=True)
    hand = fields.Nested(HandSchema, required=True)


class WinnerWithFan(ma.Schema):
    seat = Seat(required=True)
    fan = Int(1, MAX_FAN, required=True, metadata={"description": "total fan before the cap"})
    patterns = fields.List(EnumField(PATTERN_ID), validate=validate.Length(max=MAX_PATTERNS),
                           metadata={"description": "pattern ids, informational"})


class SeatHand(ma.Schema):
    seat = Seat(required=True)
    hand = fields.Nested(HandSchema, required=True)


class SeatTing(ma.Schema):
    seat = Seat(required=True)
    status = Const("ting")
    dajiao_fan = Int(1, MAX_FAN, required=True, metadata={"description": "大叫 fan before the cap"})


class SeatNotTing(ma.Schema):
    seat = Seat(required=True)
    status = EnumField(SEAT_STATUS, required=True)


_SEAT_LIST = {"description": "each seat's hand or declared status; a seat at most once"}


class PengEvent(ma.Schema):
    type = Const("peng")
    seat = Seat(required=True)
    tile = Str(MAX_TILE_CHARS, required=True)
    from_ = Seat(required=True, data_key="from", metadata={"description": "the discarder"})


class KongEvent(ma.Schema):
    type = Const("kong")
    seat = Seat(required=True)
    kind = EnumField(KONG_KIND, required=True)
    tile = Str(MAX_TILE_CHARS, required=True)
    from_ = Seat(allow_none=True, data_key="from", metadata={"description": "the discarder, for a direct kong only"})


class HuEvent(ma.Schema):
    type = Const("hu")
    from_ = Seat(allow_none=True, data_key="from", metadata={"description": "the discarder; null or absent: 自摸"})
    tile = Str(MAX_TILE_CHARS, required=True)
    winners = fields.List(OneOf(WinnerWithHand, WinnerWithFan), required=True, validate=validate.Length(min=1, max=4),
                          metadata={"description": "one entry per winning seat (一炮多响: several)"})
    after_kong = StrictBoolean(metadata={"description": "杠上花 (self-drawn) or 杠上炮 (on a discard)"})
    robbing_kong = StrictBoolean(metadata={"description": "抢杠胡"})
    last_tile = StrictBoolean(metadata={"description": "海底 (the wall's last tile)"})
    heavenly = StrictBoolean(metadata={"description": "天胡"})
    earthly = StrictBoolean(metadata={"description": "地胡"})


class DrawEvent(ma.Schema):
    type = Const("draw")
    seats = fields.List(OneOf(SeatHand, SeatTing, SeatNotTing), required=True, validate=validate.Length(max=4),
                        metadata=_SEAT_LIST)


class EscapeEvent(ma.Schema):
    type = Const("escape")
    seat = Seat(required=True)
    last_four = StrictBoolean(metadata={"description": "left within the wall's last four tiles"})
    seats = fields.List(OneOf(SeatHand, SeatTing, SeatNotTing), validate=validate.Length(max=4), metadata=_SEAT_LIST)


class PenaltyEvent(ma.Schema):
    type = Const("penalty")
    seat = Seat(required=True)
    kind = EnumField(PENALTY_KIND, required=True)


EVENT_SCHEMAS: dict[str, type[ma.Schema]] = {
    "peng": PengEvent, "kong": KongEvent, "hu": HuEvent, "draw": DrawEvent, "escape": EscapeEvent,
    "penalty": PenaltyEvent,
}
assert set(EVENT_SCHEMAS) == set(EVENT_TYPES), "every event of the rules core has its schema"
assert set(HU_FLAGS) <= set(HuEvent().fields)


class SettleRequest(ma.Schema):
    ruleset = RulesetField(load_default=DEFAULT_RULESET.get, metadata={"default": "xuezhan"})
    dealer = Int(0, 3, required=True)
    voids = fields.List(
        Str(MAX_SUIT_CHARS, allow_none=True), validate=validate.Length(min=min(PLAYERS), max=max(PLAYERS)),
        metadata={"description": "each seat's 定缺 suit (or null), for hands that give no void; one per seat "
                                 "(three with players = 3, where all are null: no 定缺)"},
    )
    events = fields.List(Ref("Event"), required=True, validate=validate.Length(max=MAX_EVENTS),
                         metadata={"description": "the round's events in order (checked by the rules: "
                                                  "an error names the event's index)"})
    stakes = StakesField(metadata={"description": "optional (docs/rules.md#s12): `bankrolls` are the seats' coins "
                                                  "before the round; the response then has `coins_delta` and `fees`"})

    @post_load
    def _to_core(self, data: dict, **kwargs: Any) -> dict:
        if "stakes" in data:
            data["stakes"] = load_stakes(data["stakes"], Ruleset.from_spec(data["ruleset"]).players)
        voids = data.get("voids")
        if voids is not None:
            data["voids"] = [
                None if v is None else _rule(f"voids.{i}", parse_suit, v) for i, v in enumerate(voids)
            ]
        return data


# -- responses: each shape's documentation (the dump_* functions below write them) -----------
class PatternSchema(ma.Schema):
    """A :class:`~service.rules.patterns.PatternFan` (:func:`dump_patterns`)."""

    id = EnumField(PATTERN_ID, required=True)
    name = fields.String(required=True, metadata={"description": "Chinese name"})
    name_en = fields.String(required=True)
    fan = fields.Integer(required=True, metadata={"description": "total fan of this pattern"})
    count = fields.Integer(metadata={"description": "how many (根 only)"})


class DajiaoSchema(ma.Schema):
    """Documents a :class:`~service.rules.ting.Dajiao`."""

    fan = fields.Integer(required=True)
    points = fields.Integer(required=True)


class WaitSchema(ma.Schema):
    """Documents a :class:`~service.rules.ting.Wait`."""

    tile = fields.String(required=True)
    fan = fields.Integer(required=True)
    points = fields.Integer(required=True)
    patterns = fields.List(fields.Nested(PatternSchema), required=True)
    remaining = fields.Integer(required=True)


class HandProblemSchema(ma.Schema):
    """Documents a :class:`~service.rules.hand.Problem`."""

    code = fields.String(required=True)
    message = fields.String(required=True)


class ValidateResponse(ma.Schema):
    """Documents a :class:`~service.rules.validate.Validation`."""

    valid = fields.Boolean(required=True)
    size = fields.Integer(required=True)
    tiles = fields.String(required=True, metadata={"description": "canonical concealed tiles"})
    suits = fields.List(EnumField(SUIT), required=True)
    huazhu = fields.Boolean(required=True)
    complete = fields.Boolean(required=True)
    problems = fields.List(fields.Nested(HandProblemSchema), required=True)


class TingResponse(ma.Schema):
    """Documents a :class:`~service.rules.ting.Ting`."""

    ting = fields.Boolean(required=True)
    huazhu = fields.Boolean(required=True)
    waits = fields.List(fields.Nested(WaitSchema), required=True)
    dajiao = fields.Nested(DajiaoSchema, required=True, allow_none=True)


class DiscardOptionSchema(ma.Schema):
    """Documents a :class:`~service.rules.ting.DiscardOption`."""

    discard = fields.String(required=True)
    waits = fields.List(fields.Nested(WaitSchema), required=True)
    remaining = fields.Integer(required=True)
    dajiao = fields.Nested(DajiaoSchema, required=True)


class DiscardsResponse(ma.Schema):
    """Documents a :class:`~service.rules.ting.DiscardAdvice`."""

    options = fields.List(fields.Nested(DiscardOptionSchema), required=True)
    complete = fields.Boolean(required=True, metadata={"description": "the 14 tiles already win"})


class UsefulTileSchema(ma.Schema):
    """Documents a :class:`~service.rules.shanten.UsefulTile`."""

    tile = fields.String(required=True)
    remaining = fields.Integer(required=True, metadata={
        "description": "copies left: not in the hand, its melds or `visible` (for an option, nor the discard)"})


class ShantenOptionSchema(ma.Schema):
    """Documents a :class:`~service.rules.shanten.ShantenOption`."""

    discard = fields.String(required=True)
    shanten = fields.Integer(required=True, metadata={"description": "the shanten of the 13 tiles left"})
    tiles = fields.List(fields.Nested(UsefulTileSchema), required=True,
                        metadata={"description": "their useful tiles, in tile order"})
    remaining = fields.Integer(required=True, metadata={"description": "the useful tiles' copies left, in all"})


class ShantenResponse(ma.Schema):
    """Documents a :class:`~service.rules.shanten.Shanten` (13 tiles: ``tiles`` and ``remaining``) or a
    :class:`~service.rules.shanten.ShantenOptions` (14 tiles: ``options``)."""

    shanten = fields.Integer(required=True, allow_none=True, metadata={
        "description": "exchanges from ting (0: ting; -1: 14 tiles that win); null when the melds alone "
                       "break 缺一门 or hold the void suit"})
    tiles = fields.List(fields.Nested(UsefulTileSchema), metadata={
        "description": "(13 tiles) the useful tiles, in tile order: draws that lower the shanten by one"})
    remaining = fields.Integer(metadata={"description": "(13 tiles) the useful tiles' copies left, in all"})
    options = fields.List(fields.Nested(ShantenOptionSchema), metadata={
        "description": "(14 tiles) one per distinct discard, best first: lowest shanten, most useful tiles "
                       "left, tile order; empty when `shanten` is null"})


class ScoreResponse(ma.Schema):
    """Documents a :class:`~service.rules.fan.Score`."""

    fan = fields.Integer(required=True, metadata={"description": "after the cap"})
    raw_fan = fields.Integer(required=True)
    multiplier = fields.Integer(required=True)
    points = fields.Integer(required=True)
    capped = fields.Boolean(required=True)
    patterns = fields.List(fields.Nested(PatternSchema), required=True)
    decomposition = fields.List(fields.String(), required=True)


class TransferSchema(ma.Schema):
    """Documents a :class:`~service.rules.settle.Transfer`."""

    from_ = fields.Integer(required=True, data_key="from", attribute="from")
    to = fields.Integer(required=True)
    points = fields.Integer(required=True)
    reason = EnumField(REASON, required=True)
    event = fields.Integer(required=True, metadata={"description": "0-based index of the causing event"})


class SettledRound(NamedTuple):
    """What ``POST /v1/rounds/settle`` answers: the round's settlement and, with ``stakes``, its coins
    (None until the round ends)."""

    settlement: Settlement
    stakes: Stakes | None = None
    coins: CoinSettlement | None = None


class SettleResponse(ma.Schema):
    """A :class:`SettledRound` (:func:`dump_settle`): ``coins_delta`` and ``fees`` only with stakes (null
    until the round ends)."""

    deltas = fields.List(fields.Integer(), required=True,
                         validate=validate.Length(min=min(PLAYERS), max=max(PLAYERS)),
                         metadata={"description": "one per seat (three with players = 3)"})
    transfers = fields.List(fields.Nested(TransferSchema), required=True)
    winners = fields.List(fields.Integer(), required=True)
    ended = fields.Boolean(required=True)
    next_dealer = fields.Integer(required=True, allow_none=True)
    coins_delta = fields.List(fields.Integer(), allow_none=True, metadata={
        "description": "(with `stakes`) each seat's change of coins, its fee included; null until the round ends"})
    fees = fields.List(fields.Integer(), allow_none=True, metadata={
        "description": "(with `stakes`) what each seat paid the house; null until the round ends"})


def _required(f: fields.Field) -> fields.Field:
    f.required = True
    return f


RulesetOut = ma.Schema.from_dict(
    {name: _required(f) for name, f in _ruleset_spec_fields().items()}, name="Ruleset"
)
"""A ruleset with every field (``preset`` names the preset it was built from)."""


class RulesetsResponse(ma.Schema):
    """Dumps ``{"default": <preset name>, "presets": {<name>: Ruleset}}`` (``GET /v1/rulesets``: flask-smorest
    runs it)."""

    default = EnumField(PRESET_NAME, required=True)
    presets = fields.Dict(keys=fields.String(), values=fields.Nested(RulesetOut), required=True)


class HealthResponse(ma.Schema):
    status = fields.String(required=True)
    checks = fields.Dict(keys=fields.String(), values=fields.String())


class ProblemSchema(ma.Schema):
    """RFC 9457 problem details, with every extension member the service sends."""

    class Meta:
        unknown = ma.INCLUDE

    type = fields.String(required=True, metadata={
        "format": "uri", "description": "a page describing the code (`GET /problems/{code}`): "
                                        "`{PUBLIC_URL or the request's origin}/problems/{code}`"})
    title = fields.String(required=True)
    status = fields.Integer(required=True)
    detail = fields.String(required=True)
    code = Ref("ProblemCode", required=True)  # (the stable error id: the last segment of `type`)
    instance = fields.String(metadata={"description": "the request path"})
    request_id = fields.String(metadata={"description": "the X-Request-ID of the request (every problem "
                                                        "of the application; not those of the HTTP server "
                                                        "itself, for a request it could not read)"})
    errors = fields.Dict(
        keys=fields.String(), values=fields.List(fields.String()),
        metadata={"description": "field path → messages, for input that breaks the schema "
                                 "(a header's name for a bad header)"},
    )
    event = fields.Integer(metadata={"description": "an event that cannot happen: its 0-based index in a "
                                                     "settled round, or the seq it would have had in a table; "
                                                     "a refused void: the seq of the record that depends on it"})
    round = fields.Integer(metadata={"description": "a `correction_conflict`: the later round that would break "
                                                    "(`event`: the seq of its record)"})
    version = fields.Integer(metadata={"description": "the table's current version (412, 409 table_full)"})
    checks = fields.Dict(keys=fields.String(), values=fields.String(),
                         metadata={"description": "/readyz: each readiness check's result"})
    limit = Ref("RateLimitName")  # (a 429: the rate limit that refused)


# -- batches ----------------------------------------------------------------------
BATCH_MAX_ITEMS = 1000
"""The default of ``BATCH_MAX_ITEMS``: items of one JSON batch (the document says this one)."""


class ValidateItem(ValidateRequest):
    """A batch item of ``POST /v1/hands/validate``: its body and ``op``."""

    op = Const("validate")


class TingItem(TingRequest):
    """A batch item of ``POST /v1/hands/ting``: its body and ``op``."""

    op = Const("ting")


class DiscardsItem(DiscardsRequest):
    """A batch item of ``POST /v1/hands/discards``: its body and ``op``."""

    op = Const("discards")


class ScoreItem(ScoreRequest):
    """A batch item of ``POST /v1/hands/score``: its body and ``op``."""

    op = Const("score")


class SettleItem(SettleRequest):
    """A batch item of ``POST /v1/rounds/settle``: its body and ``op``."""

    op = Const("settle")


class ShantenItem(ShantenRequest):
    """A batch item of ``POST /v1/hands/shanten``: its body and ``op``."""

    op = Const("shanten")


BATCH_ITEM_SCHEMAS: dict[str, type[ma.Schema]] = {
    "validate": ValidateItem, "ting": TingItem, "discards": DiscardsItem, "score": ScoreItem, "settle": SettleItem,
    "shanten": ShantenItem,
}
"""op → the item's documented schema (documentation only: an item is loaded by its operation's own
request schema, without ``op``, so that it answers what the single endpoint answers)."""


def check_batch_item(value: Any) -> dict:
    """A batch item: an object whose ``op`` names a known operation (its ``ValidationError`` names ``op``).

    The rest of the item is its operation's body, for that operation's schema to load item by item:
    one bad item (this check's refusal included) is its own result and does not fail the others.

    >>> check_batch_item({"op": "ting", "hand": {"tiles": "1m"}})["hand"]
    {'tiles': '1m'}
    >>> check_batch_item({"op": "tingg"})
    Traceback (most recent call last):
    ...
    marshmallow.exceptions.ValidationError: {'op': ['Must be one of: validate, ting, discards, score, settle, shanten.']}
    >>> check_batch_item([1])
    Traceback (most recent call last):
    ...
    marshmallow.exceptions.ValidationError: {'op': ['An item is an object whose `op` names an operation.']}
    """  # noqa: E501 - a doctest's expected error line
    if not isinstance(value, dict):
        raise ValidationError({"op": ["An item is an object whose `op` names an operation."]})
    if "op" not in value:
        raise ValidationError({"op": ["Missing data for required field."]})
    op = value["op"]
    if not isinstance(op, str) or op not in BATCH_ITEM_SCHEMAS:
        raise ValidationError({"op": [f"Must be one of: {', '.join(BATCH_ITEM_SCHEMAS)}."]})
    return value


class BatchItemField(DocumentedField):
    """A batch item, loaded as given: each item is checked on its own (:func:`check_batch_item`), so that
    one that is not an object with a known ``op`` is that item's 422 result, as its NDJSON line's is."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_none=True, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        return value

    def openapi(self, converter) -> dict:
        return {"anyOf": [
            {"$ref": "#/components/schemas/BatchItem"},  # (the union by op, registered by service.api.batch)
            {"description": "anything else (an object with another body, no `op` or an unknown one, or not an "
                            "object): answered with its own 422 problem (one bad item does not fail the others)"},
        ]}


class BatchItems(fields.List):
    """A JSON batch's items, documented as a list of :class:`BatchItemField`: a list is taken as it is, not
    walked item by item (an item is any value, each checked on its own when it is answered)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(BatchItemField(), **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        if type(value) is not list:
            raise self.make_error("invalid")
        return value


class BatchRequest(ma.Schema):
    """A JSON batch: its items, and the ruleset of every item that has no ``ruleset`` member (as if
    the item gave it; default: xuezhan, as for a single request)."""

    ruleset = RulesetField()
    items = BatchItems(required=True, metadata={
        "maxItems": BATCH_MAX_ITEMS,
        "description": f"at most `BATCH_MAX_ITEMS` ({BATCH_MAX_ITEMS} by default) items, each the body of "
                       "its operation with `op`; the whole body at most `MAX_BATCH_BYTES` (1 MiB by default)"})


class BatchResult(ma.Schema):
    """One item's answer: the single endpoint's status with its body, or with its problem."""

    status = fields.Integer(required=True, metadata={"description": "what the single endpoint answers: 200, "
                                                                   "or the problem's status"})
    body = OneOf(ValidateResponse, TingResponse, DiscardsResponse, ScoreResponse, SettleResponse, ShantenResponse,
                 metadata={"description": "with status 200: the single endpoint's response body"})
    problem = fields.Nested(ProblemSchema, metadata={
        "description": "otherwise: the single endpoint's problem (its `instance` is the single endpoint's "
                       "path; for a line that is no item, the batch's)"})


class BatchResponse(ma.Schema):
    results = fields.List(fields.Nested(BatchResult), required=True,
                          metadata={"description": "one per item, in the items' order"})


# -- dump: each answer's one serializer (its schema above documents it: see the module) ------
MAX_CACHED_PATTERNS = 1 << 10
"""The bodies of the patterns answered lately that are kept (a :class:`~service.rules.patterns.PatternFan` is an
immutable value, of a few hundred there can be: an id, its fan, its count): read-only, as a wait's."""


@functools.lru_cache(maxsize=MAX_CACHED_PATTERNS)
def dump_pattern(p: PatternFan) -> dict:
    """A pattern's body (shared: see :data:`MAX_CACHED_PATTERNS`)."""
    return p.as_dict()


def dump_patterns(patterns: tuple[PatternFan, ...]) -> list[dict]:
    return [dump_pattern(p) for p in patterns]


MAX_CACHED_WAITS = 1 << 14
"""The bodies of the waits answered lately that are kept.  A :class:`~service.rules.ting.Wait` is an immutable
value (the core's memoized answers share them), so its body is built once and listed by every answer that
has it: bodies are read-only (they are serialized as they are)."""


@functools.lru_cache(maxsize=MAX_CACHED_WAITS)
def dump_wait(w: Wait) -> dict:
    """A wait's body (shared: see :data:`MAX_CACHED_WAITS`).

    >>> from service.rules.api import ting
    >>> w = ting("1112345678999m").waits[0]
    >>> dump_wait(w)["patterns"][0]["id"], dump_wait(w) is dump_wait(w)
    ('qingyise', True)
    """
    return {
        "tile": str(w.tile), "fan": w.fan, "points": w.points,
        "patterns": dump_patterns(w.patterns), "remaining": w.remaining,
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


class SharedBodies:
    """The bodies of immutable values that the core's memos share (the same object in many answers), by the
    value's identity: each is built once, then found by ``id()`` (no hash of the value: a discard option's
    would walk its waits).  Each entry holds its value, so that no other object takes that id while the entry
    is kept; a value equal to one kept but another object gets a body of its own.  Bounded: a full memo is
    emptied (``limit`` entries).  Bodies are read-only, as a wait's.

    >>> bodies = SharedBodies(lambda t: {"tile": str(t)}, 2)
    >>> from service.rules.tiles import TILES
    >>> bodies(TILES[0]) is bodies(TILES[0]), bodies(TILES[1])["tile"]
    (True, '2m')
    """

    def __init__(self, build: Callable[[Any], Any], limit: int) -> None:
        self.build, self.limit = build, limit
        self.memo: dict[int, tuple[Any, Any]] = {}

    def __call__(self, value: Any) -> Any:
        found = self.memo.get(id(value))
        if found is not None and found[0] is value:
            return found[1]
        body = self.build(value)
        if len(self.memo) >= self.limit:
            self.memo.clear()
        self.memo[id(value)] = (value, body)
        return body


def _option_body(o: DiscardOption) -> dict:
    return {
        "discard": str(o.discard), "waits": [dump_wait(w) for w in o.waits],
        "remaining": o.remaining, "dajiao": {"fan": o.dajiao.fan, "points": o.dajiao.points},
    }


dump_option = SharedBodies(_option_body, MAX_CACHED_WAITS)
"""A discard option's body (:class:`SharedBodies`: the core's memos share the options of the hands that have
them, :func:`~service.rules.ting.suit_options`)."""


def dump_discards(a: DiscardAdvice) -> dict:
    return {"options": [dump_option(o) for o in a.options], "complete": a.complete}


_USEFUL_BODIES = {t: {"tile": str(t.tile), "remaining": t.remaining} for by_left in USEFUL for t in by_left}
"""The body of every useful tile there can be (:data:`~service.rules.shanten.USEFUL`: values the answers
share); bodies are read-only, as :func:`dump_wait`'s."""


def dump_useful(tiles: tuple[UsefulTile, ...]) -> list[dict]:
    return [_USEFUL_BODIES[t] for t in tiles]


def dump_shanten(r: Shanten | ShantenOptions) -> dict:
    if isinstance(r, Shanten):
        return {"shanten": r.shanten, "tiles": dump_useful(r.tiles), "remaining": r.remaining}
    return {"shanten": r.shanten, "options": [
        {"discard": str(o.discard), "shanten": o.shanten, "tiles": dump_useful(o.tiles), "remaining": o.remaining}
        for o in r.options]}


def dump_score(s: Score) -> dict:
    return {
        "fan": s.fan, "raw_fan": s.raw_fan, "multiplier": s.multiplier, "points": s.points,
        "capped": s.capped, "patterns": dump_patterns(s.patterns), "decomposition": list(s.decomposition),
    }


def dump_settle(r: SettledRound) -> dict:
    body = r.settlement.as_dict()
    if r.stakes is not None:
        body |= r.coins.as_dict() if r.coins is not None else {"coins_delta": None, "fees": None}
    return body
