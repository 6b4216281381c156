"""The round events of docs/api.md as immutable value types.

:func:`parse_event` turns the JSON shape (a mapping) into a typed event and
reports malformed ones as :class:`EventError` ``bad_event`` with the index.

>>> e = parse_event({"type": "kong", "seat": 0, "kind": "direct", "tile": "5万", "from": 2}, 0)
>>> e.kind, str(e.tile), e.from_
('direct', '5m', 2)
>>> parse_event({"type": "hu", "from": None, "tile": "5p", "winners": []}, 3)
Traceback (most recent call last):
...
service.rules.errors.EventError: event 3: a hu needs at least one winner
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple, get_args

from .codes import Code
from .errors import EventError, RuleError
from .hand import KONG_KINDS, Hand, Meld, parse_hand, require_in_play
from .patterns import PATTERNS
from .tiles import TILES, Tile

STATUSES = ("ting", "not_ting", "huazhu")
PENALTY_KINDS = ("zhahu", "xianggong")
"""诈胡 (a false win: the seat pays, §15.3) and 相公 (a wrong number of tiles: it may not win, §15.4)."""
HU_FLAGS = ("after_kong", "robbing_kong", "last_tile", "heavenly", "earthly")
MAX_FAN = 64


@dataclass(frozen=True, slots=True)
class Peng:
    seat: int
    tile: Tile
    from_: int
    type = "peng"


@dataclass(frozen=True, slots=True)
class Kong:
    seat: int
    kind: str
    tile: Tile
    from_: int | None = None
    type = "kong"


@dataclass(frozen=True, slots=True)
class WinnerEntry:
    seat: int
    hand: Hand | None = None
    fan: int | None = None
    patterns: tuple = ()


@dataclass(frozen=True, slots=True)
class Hu:
    from_: int | None
    tile: Tile
    winners: tuple[WinnerEntry, ...]
    after_kong: bool = False
    robbing_kong: bool = False
    last_tile: bool = False
    heavenly: bool = False
    earthly: bool = False
    type = "hu"

    @property
    def self_drawn(self) -> bool:
        return self.from_ is None


@dataclass(frozen=True, slots=True)
class SeatReport:
    """A seat's hand or declared status at a draw (or an escape in the last four tiles)."""

    seat: int
    hand: Hand | None = None
    status: str | None = None
    dajiao_fan: int | None = None


@dataclass(frozen=True, slots=True)
class Draw:
    seats: tuple[SeatReport, ...]
    type = "draw"


@dataclass(frozen=True, slots=True)
class Escape:
    seat: int
    last_four: bool = False
    seats: tuple[SeatReport, ...] = ()
    type = "escape"


@dataclass(frozen=True, slots=True)
class Penalty:
    """A seat penalized during the round (§15.3, §15.4): ``kind`` is one of :data:`PENALTY_KINDS`."""

    seat: int
    kind: str
    type = "penalty"


Event = Peng | Kong | Hu | Draw | Escape | Penalty
# a round's event types, from the union (a new event is a class above and its member of ``Event``)
EVENT_TYPES: tuple[str, ...] = tuple(cls.type for cls in get_args(Event))

# The JSON form's fields (required, optional) per object, and its bounds: what an
# event *is* is decided here only (the HTTP layer documents it, it does not re-check).
FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "peng": (("type", "seat", "tile", "from"), ()),
    "kong": (("type", "seat", "kind", "tile"), ("from",)),
    "hu": (("type", "tile", "winners"), ("from",) + HU_FLAGS),
    "draw": (("type", "seats"), ()),
    "escape": (("type", "seat"), ("last_four", "seats")),
    "penalty": (("type", "seat", "kind"), ()),
    "winner": (("seat",), ("hand", "fan", "patterns")),
    "report": (("seat",), ("hand", "status", "dajiao_fan")),
    "hand": (("tiles",), ("melds", "void")),
    "meld": (("type", "tile"), ("kind",)),
}
_REQUIRED = {kind: frozenset(required) for kind, (required, _optional) in FIELDS.items()}
_ALLOWED = {kind: frozenset(required + optional) for kind, (required, optional) in FIELDS.items()}
_HAND_REQUIRED, _HAND_ALLOWED = _REQUIRED["hand"], _ALLOWED["hand"]
_NO_MELDS: list = []  # (read only)
MAX_HAND_CHARS = 200   # a hand string
MAX_HAND_TILES = 64    # a hand given as a list of tile strings
MAX_TILE_CHARS = 16    # one tile string
MAX_SUIT_CHARS = 8     # a void suit
MAX_MELDS = 8  # more than 4 melds is a wrong size (validate reports it: 200, valid false); 8 bounds the input
MAX_PATTERNS = 32


def parse_event(data: Mapping[str, Any] | Event, index: int, voids=None, players: int = 4) -> Event:
    """Build a typed event from its docs/api.md mapping; ``index`` is for error messages.

    ``voids`` (a suit letter or None per seat) gives each seat's 定缺 suit for
    hands that do not state one.  With ``players = 3`` (三人两房, §14) seats are
    0-2, and a 万 tile or a 定缺 void anywhere in the event is bad input.
    A malformed event is ``bad_event`` (or
    ``seat_out_of_range``, ``bad_hand``) whose ``context["field"]`` is the path
    of the offending member (``"winners.0.fan"``; ``"_schema"`` for the event
    itself), so that a client can point at it:

    >>> try:
    ...     parse_event({"type": "draw", "seats": [{"seat": 0, "status": "maybe"}]}, 2)
    ... except EventError as exc:
    ...     print(exc.code, exc.context["field"], "-", exc.reason)
    bad_event seats.0.status - seat 0's status must be one of ting, not_ting, huazhu; got 'maybe'
    """
    if type(data) is dict and data.get("type") == "kong":
        kong = _plain_kong(data, players)
        if kong is not None:
            return kong
    elif type(data) is not dict and not isinstance(data, Mapping):
        if isinstance(data, (Peng, Kong, Hu, Draw, Escape, Penalty)):
            return data
        raise EventError(Code.BAD_EVENT, index, f"an event is an object, got {type(data).__name__}", field="_schema")
    p = _Parser(data, index, voids, players)
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in EVENT_TYPES:
        raise p.fail(f"unknown event type {kind!r} (one of {', '.join(EVENT_TYPES)})", "type")
    p.members(data, kind, "")
    if kind == "peng":
        return Peng(p.seat("seat"), p.tile("tile"), p.seat("from"))
    if kind == "kong":
        k = data.get("kind")
        if k not in KONG_KINDS:
            raise p.fail(f"kong kind must be direct, added or concealed; got {k!r}", "kind")
        if k == "direct":
            return Kong(p.seat("seat"), k, p.tile("tile"), p.seat("from"))
        if data.get("from") is not None:
            raise p.fail(f"an {k} kong has no 'from'", "from")
        return Kong(p.seat("seat"), k, p.tile("tile"))
    if kind == "hu":
        frm = data.get("from")
        winners = p.items(data["winners"], "winners")  # (a seat twice: duplicate_winner)
        if not winners:
            raise p.fail("a hu needs at least one winner", "winners")
        entries = tuple([p.winner(w, f"winners.{i}") for i, w in enumerate(winners)])
        frm = None if frm is None else p.seat("from")
        tile = p.tile("tile")
        if len(data) == (3 if "from" not in data else 4):  # no flag given (members() allows no other field)
            return Hu(frm, tile, entries)
        return Hu(frm, tile, entries, *[p.flag(f) for f in HU_FLAGS])
    if kind == "draw":
        return Draw(p.reports(data["seats"]))
    if kind == "penalty":
        k = data.get("kind")
        if k not in PENALTY_KINDS:
            raise p.fail(f"a penalty's kind must be {' or '.join(PENALTY_KINDS)}; got {_short(k)}", "kind")
        return Penalty(p.seat("seat"), k)
    return Escape(p.seat("seat"), p.flag("last_four"),
                  p.reports(data["seats"]) if "seats" in data else ())


class _Parser:
    def __init__(self, data: Mapping[str, Any], index: int, voids, players: int = 4) -> None:
        self.data, self.index, self.voids, self.players = data, index, voids, players

    def fail(self, message: str, field: str, code: Code = Code.BAD_EVENT) -> EventError:
        return EventError(code, self.index, message, field=field)

    def members(self, obj: Mapping[str, Any], kind: str, path: str) -> None:
        """Every required member present, no unknown one."""
        if _REQUIRED[kind] <= obj.keys() <= _ALLOWED[kind]:
            return
        required, optional = FIELDS[kind]
        for name in required:
            if name not in obj:
                raise self.fail(f"{kind} needs {name!r}", path + name)
        for name in obj:
            if name not in required and name not in optional:
                what = "an event" if kind in EVENT_TYPES else f"a {kind}"
                raise self.fail(f"unknown field {name!r} of {what} {kind if what == 'an event' else ''}".rstrip(),
                                path + str(name))

    def object(self, value: Any, kind: str, path: str) -> Mapping[str, Any]:
        if type(value) is dict and _REQUIRED[kind] <= value.keys() <= _ALLOWED[kind]:
            return value  # (what members() would pass, checked at once)
        if type(value) is not dict and not isinstance(value, Mapping):
            raise self.fail(f"{path}: a {kind} is an object; got {_short(value)}", path)
        self.members(value, kind, path + ".")
        return value

    def items(self, value: Any, path: str, most: int | None = None) -> list:
        if not isinstance(value, list):
            raise self.fail(f"{path!r} must be a list; got {_short(value)}", path)
        if most is not None and len(value) > most:
            raise self.fail(f"{path!r} lists at most {most} entries; got {len(value)}", path)
        return value

    def seat(self, name: str, data: Mapping | None = None, path: str = "") -> int:
        value = (self.data if data is None else data).get(name)
        if type(value) is int and 0 <= value < self.players:
            return value
        top = self.players - 1
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{name!r} must be a seat number 0-{top}; got {_short(value)}", path + name)
        if not 0 <= value <= top:
            raise self.fail(f"seat {value} is out of range (0-{top}: {self.players} players)", path + name,
                            Code.SEAT_OUT_OF_RANGE)
        return value

    def tile(self, name: str) -> Tile:
        value = self.data.get(name)
        if not isinstance(value, str) or len(value) > MAX_TILE_CHARS:
            raise self.fail(f"{name!r} must be a tile such as '5m'; got {_short(value)}", name)
        try:
            tile = Tile.from_str(value)
        except RuleError as exc:
            raise self.fail(f"{name!r}: {exc}", name) from None
        if self.players == 3 and tile.suit == "m":
            raise self.fail(f"{name!r}: a 万 tile ({tile}) in a three-player room: 三人两房 plays 筒 and 条 only",
                            name, Code.SUIT_NOT_IN_PLAY)
        return tile

    def flag(self, name: str) -> bool:
        value = self.data.get(name, False)
        if not isinstance(value, bool):
            raise self.fail(f"{name!r} must be true or false; got {_short(value)}", name)
        return value

    def hand(self, data: Any, seat: int, path: str) -> Hand:
        plain = _plain_hand_members(data)
        if plain is not None:  # (every check below passes, and so do the melds)
            return self._parse_hand(plain[0], plain[1], None, seat, path)
        if isinstance(data, Hand):
            return data
        data = self.object(data, "hand", path)
        tiles, melds, void = data["tiles"], data.get("melds", []), data.get("void")
        if isinstance(tiles, str):
            if len(tiles) > MAX_HAND_CHARS:
                raise self.fail(f"seat {seat}'s hand string is longer than {MAX_HAND_CHARS} characters",
                                path + ".tiles")
        elif isinstance(tiles, list):
            self.items(tiles, path + ".tiles", MAX_HAND_TILES)
            for i, t in enumerate(tiles):
                if not isinstance(t, str) or len(t) > MAX_TILE_CHARS:
                    raise self.fail(f"a tile is a string such as '5m'; got {_short(t)}", f"{path}.tiles.{i}")
        else:
            raise self.fail(f"a hand's tiles are a hand string or a list of tiles; got {_short(tiles)}",
                            path + ".tiles")
        for i, m in enumerate(self.items(melds, path + ".melds", MAX_MELDS)):
            if _plain_meld(m):
                continue
            m = self.object(m, "meld", f"{path}.melds.{i}")
            for name in ("type", "tile", "kind"):
                value = m.get(name)
                if not (isinstance(value, str) and len(value) <= MAX_TILE_CHARS or name == "kind" and value is None):
                    raise self.fail(f"a meld's {name!r} must be a string; got {_short(value)}",
                                    f"{path}.melds.{i}.{name}")
        if void is not None and (not isinstance(void, str) or len(void) > MAX_SUIT_CHARS):
            raise self.fail(f"a void is a suit such as 's'; got {_short(void)}", path + ".void")
        return self._parse_hand(tiles, melds, void, seat, path)

    def _parse_hand(self, tiles, melds, void, seat: int, path: str) -> Hand:
        """The hand of members already checked (the round's 定缺 when it states no void)."""
        if void is None and self.voids is not None:
            void = self.voids[seat]
        try:
            hand = parse_hand(tiles, melds, void)
            if self.players == 3:
                require_in_play(hand, 3)
        except RuleError as exc:
            code = exc.code if exc.code in (Code.SUIT_NOT_IN_PLAY, Code.VOID_NOT_ALLOWED) else Code.BAD_HAND
            raise self.fail(f"seat {seat}'s hand: {exc}", path, code) from None
        return hand

    def fan(self, value: Any, what: str, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_FAN:
            raise self.fail(f"{what} must be an integer from 1 to {MAX_FAN}; got {_short(value)}", path)
        return value

    def winner(self, w: Any, path: str) -> WinnerEntry:
        if type(w) is dict and len(w) == 2 and "hand" in w:  # {seat, hand} with a seat in range: the common case
            seat = w.get("seat")
            if type(seat) is int and 0 <= seat < self.players:
                return WinnerEntry(seat, self.hand(w["hand"], seat, path + ".hand"))
        w = self.object(w, "winner", path)
        seat = self.seat("seat", w, path + ".")
        has_hand, has_fan = "hand" in w, "fan" in w
        if has_hand == has_fan:
            raise self.fail(f"winner {seat} must give exactly one of 'hand' or 'fan'", path)
        if has_hand:
            if "patterns" in w:
                raise self.fail(f"winner {seat} gives a hand: its patterns are computed", path + ".patterns")
            return WinnerEntry(seat, self.hand(w["hand"], seat, path + ".hand"))
        fan = self.fan(w["fan"], f"winner {seat}'s fan", path + ".fan")
        patterns = self.items(w.get("patterns", []), path + ".patterns", MAX_PATTERNS)
        for i, pid in enumerate(patterns):
            if not isinstance(pid, str) or pid not in PATTERNS:
                raise self.fail(f"unknown pattern id {_short(pid)}", f"{path}.patterns.{i}")
        return WinnerEntry(seat, fan=fan, patterns=tuple(patterns))

    def reports(self, items: Any) -> tuple[SeatReport, ...]:
        out = []
        for i, item in enumerate(self.items(items, "seats")):  # (a seat twice: bad_seats)
            if type(item) is dict and len(item) == 2 and "hand" in item:  # {seat, hand}: the common case
                seat = item.get("seat")
                if type(seat) is int and 0 <= seat < self.players:
                    out.append(SeatReport(seat, self.hand(item["hand"], seat, f"seats.{i}.hand")))
                    continue
            path = f"seats.{i}"
            item = self.object(item, "report", path)
            seat = self.seat("seat", item, path + ".")
            has_hand, has_status = "hand" in item, "status" in item
            if has_hand == has_status:
                raise self.fail(f"seat {seat} must give exactly one of 'hand' or 'status'", path)
            if has_hand:
                if "dajiao_fan" in item:
                    raise self.fail(f"seat {seat} gives a hand: its 大叫 is computed", path + ".dajiao_fan")
                out.append(SeatReport(seat, self.hand(item["hand"], seat, path + ".hand")))
                continue
            status = item["status"]
            if status not in STATUSES:
                raise self.fail(f"seat {seat}'s status must be one of {', '.join(STATUSES)}; got {_short(status)}",
                                path + ".status")
            dajiao = item.get("dajiao_fan")
            if status == "ting":
                if dajiao is None:
                    raise self.fail(f"seat {seat} is ting: give its 'dajiao_fan'", path + ".dajiao_fan")
                dajiao = self.fan(dajiao, f"seat {seat}'s dajiao_fan", path + ".dajiao_fan")
            elif "dajiao_fan" in item:
                raise self.fail(f"seat {seat} is {status}: 'dajiao_fan' is only for a ting seat",
                                path + ".dajiao_fan")
            out.append(SeatReport(seat, status=status, dajiao_fan=dajiao))
        return tuple(out)


def _plain_hand_members(data: Any) -> tuple[str, tuple[Meld, ...]] | None:
    """``(tiles, melds)`` of a hand object that passes every member check of :meth:`_Parser.hand` (the
    common case, checked at once: a hand string, no void, melds as :class:`Meld` values), else None."""
    if type(data) is dict and _HAND_REQUIRED <= data.keys() <= _HAND_ALLOWED:
        tiles, melds = data["tiles"], data.get("melds", _NO_MELDS)
        if (type(tiles) is str and len(tiles) <= MAX_HAND_CHARS and data.get("void") is None
                and type(melds) is list and len(melds) <= MAX_MELDS):
            parsed = tuple(map(_meld_object, melds)) if melds else ()
            if None not in parsed:
                return tiles, parsed  # type: ignore[return-value]  # (no None in it)
    return None


@lru_cache(maxsize=1024)
def parsed_hand(tiles: str, void: str | None, melds: tuple[Meld, ...]) -> Hand:
    """:func:`.hand.parse_hand` of a plain hand, memoized by what it reads (the hand string, the seat's void,
    the melds; bounded, a failure not kept): a round's hands are parsed again when it is settled again
    (re-read, corrected, or checked before it is sent)."""
    return parse_hand(tiles, melds, void)


def _plain_hand(data: Any, seat: int, voids, players: int) -> Hand | None:
    """The hand :meth:`_Parser.hand` gives for a plain hand object (:func:`_plain_hand_members`) that
    parses (:func:`parsed_hand`), else None (the caller then parses the whole event, which reports what is
    wrong)."""
    plain = _plain_hand_members(data)
    if plain is None:
        return None
    try:
        hand = parsed_hand(plain[0], None if voids is None else voids[seat], plain[1])
        if players == 3:
            require_in_play(hand, 3)
    except RuleError:
        return None
    return hand


class WinnerFields(NamedTuple):
    """A :class:`WinnerEntry`'s fields as a record (what :func:`plain_hu` gives the fold)."""

    seat: int
    hand: Hand | None = None
    fan: int | None = None
    patterns: tuple = ()


class HuFields(NamedTuple):
    """A :class:`Hu`'s fields as a record, read as a :class:`Hu` is (what :func:`plain_hu` gives the fold)."""

    from_: int | None
    tile: Tile
    winners: tuple[WinnerEntry | WinnerFields, ...]
    after_kong: bool = False
    robbing_kong: bool = False
    last_tile: bool = False
    heavenly: bool = False
    earthly: bool = False

    @property
    def self_drawn(self) -> bool:
        return self.from_ is None


class ReportFields(NamedTuple):
    """A :class:`SeatReport`'s fields as a record (what :func:`plain_draw` gives the fold)."""

    seat: int
    hand: Hand | None = None
    status: str | None = None
    dajiao_fan: int | None = None


_HU_MEMBERS = (frozenset(("type", "tile", "winners")), frozenset(("type", "tile", "winners", "from")))
_DRAW_MEMBERS = frozenset(("type", "seats"))
_record = tuple.__new__
"""Builds a record (a NamedTuple) from all its fields without its Python-level ``__new__``: the fold's hot path."""


def plain_hu(data: dict, players: int, voids=None) -> HuFields | None:
    """The fields of the :class:`Hu` that :func:`parse_event` builds of a hu object in the common form,
    checked at once: no flag, a discarder in range or none, a tile in canonical spelling, and winners
    that are each ``{seat, hand}`` with a seat in range and a plain hand that parses
    (:func:`_plain_hand`); else None (the object may still be valid: :func:`parse_event` tells).

    (The fold settles such a hu from these fields without building the frozen :class:`Hu` and
    :class:`WinnerEntry` values, as it does a kong's: :func:`plain_kong_fields`.)
    """
    n = len(data)
    if not 3 <= n <= 4 or data.keys() != _HU_MEMBERS[n - 3]:  # (a flag given: not plain)
        return None
    frm, text, winners = data.get("from"), data["tile"], data["winners"]
    if frm is not None and (type(frm) is not int or not 0 <= frm < players):
        return None
    tile = _TILE_TEXT.get(text) if type(text) is str else None
    if tile is None or players == 3 and tile.suit == "m" or type(winners) is not list or not winners:
        return None
    out = []
    for w in winners:
        found = _plain_seat_hand(w, players, voids)
        if found is None:
            return None
        out.append(_record(WinnerFields, (*found, None, ())))
    return _record(HuFields, (frm, tile, tuple(out), False, False, False, False, False))


def plain_draw(data: dict, players: int, voids=None) -> tuple[ReportFields, ...] | None:
    """The seats of the :class:`Draw` that :func:`parse_event` builds of a draw object whose seats are
    each ``{seat, hand}`` with a seat in range and a plain hand that parses (:func:`_plain_hand`),
    checked at once; else None (the object may still be valid: :func:`parse_event` tells)."""
    if data.keys() != _DRAW_MEMBERS:
        return None
    seats = data["seats"]
    if type(seats) is not list:
        return None
    out = []
    for item in seats:
        found = _plain_seat_hand(item, players, voids)
        if found is None:
            return None
        out.append(_record(ReportFields, (*found, None, None)))
    return tuple(out)


def _plain_seat_hand(item: Any, players: int, voids) -> tuple[int, Hand] | None:
    """``(seat, hand)`` of a hu's winner or a draw's seat given as ``{seat, hand}`` with a seat in range and
    a plain hand that parses (:func:`_plain_hand`), else None."""
    if type(item) is not dict or len(item) != 2 or "hand" not in item:
        return None
    seat = item.get("seat")
    if type(seat) is not int or not 0 <= seat < players:
        return None
    hand = _plain_hand(item["hand"], seat, voids, players)
    return None if hand is None else (seat, hand)


def _plain_kong(data: dict, players: int) -> Kong | None:
    """The kong of a kong object that passes every check of :func:`parse_event` (the common case), else None."""
    fields = plain_kong_fields(data, players)
    return None if fields is None else Kong(*fields)


def plain_kong_fields(data: dict, players: int) -> tuple[int, str, Tile, int | None] | None:
    """``(seat, kind, tile, from)`` of a kong object that passes every check of :func:`parse_event` (the
    common case, checked at once: its members, seats in range and a tile in canonical spelling), else None.

    (The fold settles such a kong from these fields without building the :class:`Kong`.)
    """
    if not _REQUIRED["kong"] <= data.keys() <= _ALLOWED["kong"]:
        return None
    seat, kind, text, frm = data["seat"], data["kind"], data["tile"], data.get("from")
    tile = _TILE_TEXT.get(text) if type(text) is str else None
    if tile is None or type(seat) is not int or not 0 <= seat < players or players == 3 and tile.suit == "m":
        return None
    if kind == "direct":
        return (seat, kind, tile, frm) if type(frm) is int and 0 <= frm < players else None
    return (seat, kind, tile, None) if frm is None and (kind == "added" or kind == "concealed") else None


_TILE_TEXT = {str(t): t for t in TILES}  # (the canonical spellings)


MELD_OBJECTS_MEMO: dict[tuple, Meld] = {}
MELD_OBJECTS_LIMIT = 1024
"""Entries of the memo of :func:`_meld_object`; a full memo is emptied (a bound, not a policy)."""
_ABSENT = object()


def _meld_object(m: Any) -> Meld | None:
    """The :class:`Meld` of a meld object that passes every check of :meth:`_Parser.hand` and parses
    (the common case), else None (the caller then takes the checked road, which reports the error).

    A bounded memo keyed by what decides both, the types and values of the three members and the
    object's size (so also whether it has an unknown member): a hand's melds come from a small domain.
    """
    if type(m) is not dict:
        return None
    kind, tile, kong_kind = m.get("type"), m.get("tile"), m.get("kind", _ABSENT)
    key = (type(kind), kind, type(tile), tile, type(kong_kind), kong_kind, len(m))
    try:
        meld = MELD_OBJECTS_MEMO.get(key)
    except TypeError:  # (an unhashable member: not a plain meld)
        return None
    if meld is None and _plain_meld(m):
        try:
            meld = Meld.from_mapping(m)
        except RuleError:
            return None
        if len(MELD_OBJECTS_MEMO) >= MELD_OBJECTS_LIMIT:
            MELD_OBJECTS_MEMO.clear()
        MELD_OBJECTS_MEMO[key] = meld
    return meld


def _plain_meld(m: Any) -> bool:
    """A meld object that passes every check of :meth:`_Parser.hand` (the common case, checked at once)."""
    if type(m) is not dict or not _REQUIRED["meld"] <= m.keys() <= _ALLOWED["meld"]:
        return False
    kind, tile, kong_kind = m["type"], m["tile"], m.get("kind")
    return (type(kind) is str and len(kind) <= MAX_TILE_CHARS and type(tile) is str and len(tile) <= MAX_TILE_CHARS
            and (kong_kind is None or type(kong_kind) is str and len(kong_kind) <= MAX_TILE_CHARS))


def _short(value: Any) -> str:
    """A value for a message, cut short (input can be large)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
