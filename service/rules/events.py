"""The round events of API.md as immutable value types.

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

from dataclasses import dataclass
from typing import Any, Mapping, Union

from .codes import Code
from .errors import EventError, RuleError
from .hand import KONG_KINDS, Hand, parse_hand, require_in_play
from .tiles import Tile

STATUSES = ("ting", "not_ting", "huazhu")
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


Event = Union[Peng, Kong, Hu, Draw, Escape]
EVENT_TYPES = ("peng", "kong", "hu", "draw", "escape")


def parse_event(data: "Mapping[str, Any] | Event", index: int, voids=None, players: int = 4) -> Event:
    """Build a typed event from its API.md mapping; ``index`` is for error messages.

    ``voids`` (a suit letter or None per seat) gives each seat's 定缺 suit for
    hands that do not state one.  With ``players = 3`` (三人两房, §14) seats are
    0-2, and a 万 tile or a 定缺 void anywhere in the event is bad input.
    """
    if type(data) is not dict and not isinstance(data, Mapping):
        if isinstance(data, (Peng, Kong, Hu, Draw, Escape)):
            return data
        raise EventError(Code.BAD_EVENT, index, f"an event is an object, got {type(data).__name__}")
    p = _Parser(data, index, voids, players)
    kind = data.get("type")
    if kind == "peng":
        return Peng(p.seat("seat"), p.tile("tile"), p.seat("from"))
    if kind == "kong":
        k = data.get("kind")
        if k not in KONG_KINDS:
            raise EventError(Code.BAD_EVENT, index, f"kong kind must be direct, added or concealed; got {k!r}")
        if k == "direct":
            return Kong(p.seat("seat"), k, p.tile("tile"), p.seat("from"))
        if data.get("from") is not None:
            raise EventError(Code.BAD_EVENT, index, f"an {k} kong has no 'from'")
        return Kong(p.seat("seat"), k, p.tile("tile"))
    if kind == "hu":
        frm = data.get("from")
        winners = data.get("winners")
        if not isinstance(winners, list) or not winners:
            raise EventError(Code.BAD_EVENT, index, "a hu needs at least one winner")
        entries = tuple(p.winner(w) for w in winners)
        return Hu(
            None if frm is None else p.seat("from"),
            p.tile("tile"),
            entries,
            **{f: p.flag(f) for f in HU_FLAGS},
        )
    if kind == "draw":
        return Draw(p.reports(data.get("seats"), required=True))
    if kind == "escape":
        return Escape(p.seat("seat"), p.flag("last_four"), p.reports(data.get("seats"), required=False))
    raise EventError(Code.BAD_EVENT, index, f"unknown event type {kind!r} (one of {', '.join(EVENT_TYPES)})")


class _Parser:
    def __init__(self, data: Mapping[str, Any], index: int, voids, players: int = 4) -> None:
        self.data, self.index, self.voids, self.players = data, index, voids, players

    def fail(self, message: str) -> EventError:
        return EventError(Code.BAD_EVENT, self.index, message)

    def seat(self, name: str, data: Mapping | None = None) -> int:
        value = (self.data if data is None else data).get(name)
        top = self.players - 1
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{name!r} must be a seat number 0-{top}; got {value!r}")
        if not 0 <= value <= top:
            raise EventError(Code.SEAT_OUT_OF_RANGE, self.index,
                             f"seat {value} is out of range (0-{top}: {self.players} players)")
        return value

    def tile(self, name: str) -> Tile:
        value = self.data.get(name)
        try:
            tile = Tile.from_str(value)
        except RuleError as exc:
            raise self.fail(f"{name!r}: {exc}") from None
        if self.players == 3 and tile.suit == "m":
            raise EventError(Code.SUIT_NOT_IN_PLAY, self.index,
                             f"{name!r}: a 万 tile ({tile}) in a three-player room: 三人两房 plays 筒 and 条 only")
        return tile

    def flag(self, name: str) -> bool:
        value = self.data.get(name, False)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self.fail(f"{name!r} must be true or false; got {value!r}")
        return value

    def hand(self, data: Any, seat: int) -> Hand:
        if isinstance(data, Hand):
            return data
        if type(data) is not dict and not isinstance(data, Mapping):
            raise self.fail(f"a hand is an object with 'tiles'; got {data!r}")
        void = data.get("void")
        if void is None and self.voids is not None:
            void = self.voids[seat]
        try:
            hand = parse_hand(data.get("tiles", ""), data.get("melds") or (), void)
            require_in_play(hand, self.players)
        except RuleError as exc:
            code = exc.code if exc.code in (Code.SUIT_NOT_IN_PLAY, Code.VOID_NOT_ALLOWED) else Code.BAD_HAND
            raise EventError(code, self.index, f"seat {seat}'s hand: {exc}") from None
        return hand

    def fan(self, value: Any, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_FAN:
            raise self.fail(f"{what} must be an integer from 0 to {MAX_FAN}; got {value!r}")
        return value

    def winner(self, w: Any) -> WinnerEntry:
        if type(w) is not dict and not isinstance(w, Mapping):
            raise self.fail("each winner is an object with 'seat' and 'hand' or 'fan'")
        seat = self.seat("seat", w)
        has_hand, has_fan = w.get("hand") is not None, w.get("fan") is not None
        if has_hand == has_fan:
            raise self.fail(f"winner {seat} must give exactly one of 'hand' or 'fan'")
        if has_hand:
            return WinnerEntry(seat, hand=self.hand(w["hand"], seat))
        fan = self.fan(w["fan"], f"winner {seat}'s fan")
        if fan < 1:
            raise self.fail(f"winner {seat}'s fan must be at least 1")
        return WinnerEntry(seat, fan=fan, patterns=tuple(w.get("patterns") or ()))

    def reports(self, items: Any, required: bool) -> tuple[SeatReport, ...]:
        if items is None and not required:
            return ()
        if not isinstance(items, list):
            raise self.fail("'seats' must be a list of {seat, hand | status}")
        out = []
        for item in items:
            if type(item) is not dict and not isinstance(item, Mapping):
                raise self.fail("each entry of 'seats' is an object")
            seat = self.seat("seat", item)
            hand, status = item.get("hand"), item.get("status")
            if (hand is None) == (status is None):
                raise self.fail(f"seat {seat} must give exactly one of 'hand' or 'status'")
            if hand is not None:
                out.append(SeatReport(seat, hand=self.hand(hand, seat)))
                continue
            if status not in STATUSES:
                raise self.fail(f"seat {seat}'s status must be one of {', '.join(STATUSES)}; got {status!r}")
            dajiao = item.get("dajiao_fan")
            if status == "ting":
                if dajiao is None:
                    raise self.fail(f"seat {seat} is ting: give its 'dajiao_fan'")
                dajiao = self.fan(dajiao, f"seat {seat}'s dajiao_fan")
                if dajiao < 1:
                    raise self.fail(f"seat {seat}'s dajiao_fan must be at least 1")
            elif dajiao is not None:
                raise self.fail(f"seat {seat} is {status}: 'dajiao_fan' is only for a ting seat")
            out.append(SeatReport(seat, status=status, dajiao_fan=dajiao))
        return tuple(out)
