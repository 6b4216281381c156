"""Settling a round from its events (docs/rules.md#s6-§8, §10, §13, §14): the only place money moves.

A round is a fold over its events: :class:`Round` holds the state after N
events and :meth:`Round.step` validates one more event against it, returning
the transfers it causes.  :func:`settle` folds a whole list.

Errors: an event that cannot happen raises :class:`~service.rules.errors.EventError`
whose ``code`` is a stable :class:`~service.rules.codes.Code` (the documented
table of codes is generated from that enum: :func:`~service.rules.codes.code_table`);
transfer reasons are :class:`~service.rules.codes.Reason`.

The readings where the rules are silent are docs/rules.md's, beside the rules they read:
天胡/地胡 (docs/rules.md#s5.1), the events and their checks (#s6), the draw (#s7), escapes
(#s8), three players (#s14) and 血流成河 (#s13, its winners #s13.8).

>>> s = settle([{"type": "kong", "seat": 0, "kind": "concealed", "tile": "5m"}], dealer=0)
>>> s.deltas, [t.as_dict()["reason"] for t in s.transfers]
((36, -12, -12, -12), ['kong_concealed', 'kong_concealed', 'kong_concealed'])
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import filterfalse
from operator import add, attrgetter, itemgetter, sub
from typing import Any, NamedTuple

from .codes import Code, Reason
from .errors import EventError, RuleError
from .events import (
    Draw,
    Escape,
    Event,
    Hu,
    HuFields,
    Kong,
    Penalty,
    Peng,
    ReportFields,
    SeatReport,
    parse_event,
    plain_draw,
    plain_hu,
    plain_kong_fields,
)
from .fan import (
    DIANPAO_PINGHU,
    GANGSHANGHUA_NEEDS_KONG,
    FanContext,
    Win,
    context,
    hand_win,
    points_of,
    suit_problem,
)
from .hand import Hand, Meld, hand_problems, parse_hand
from .patterns import PATTERNS
from .ruleset import Ruleset
from .shapes import wait_tiles
from .tiles import TILES, Tile, parse_suit
from .ting import dajiao_points


class KongRecord(NamedTuple):
    """A kong made this round, as settlement remembers it (an immutable record).

    ``paid``: ``(payer, points)`` of what the kong collected; ``void``: robbed
    (抢杠胡), so it counts as a peng and its payments were reversed;
    ``transferred``: its income passed on by 呼叫转移 (杠上炮), never refunded.
    """

    seat: int
    kind: str
    tile: int
    from_: int | None
    paid: tuple[tuple[int, int], ...]
    void: bool = False
    transferred: bool = False

    @property
    def collected(self) -> int:
        return sum(points for _, points in self.paid)

    def to_dict(self) -> dict:
        return {"seat": self.seat, "kind": self.kind, "tile": self.tile, "from": self.from_,
                "paid": [[payer, points] for payer, points in self.paid],
                "void": self.void, "transferred": self.transferred}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> KongRecord:
        return cls(d["seat"], d["kind"], d["tile"], d["from"],
                   tuple((payer, points) for payer, points in d["paid"]), d["void"], d["transferred"])


class LastEvent(NamedTuple):
    """What later events need to know of the event just before (杠上花/杠上炮/抢杠胡)."""

    type: str
    index: int
    seat: int | None = None
    kind: str | None = None
    tile: int | None = None
    from_: int | None = None

    def to_dict(self) -> dict:
        return {"type": self.type, "index": self.index, "seat": self.seat, "kind": self.kind,
                "tile": self.tile, "from": self.from_}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LastEvent:
        return cls(d["type"], d["index"], d["seat"], d["kind"], d["tile"], d["from"])


_record = tuple.__new__
_index = attrgetter("index")
_pair_reason = itemgetter(0, 1, 3)  # a Transfer's payer, payee and reason
"""Builds a record (a NamedTuple) from all its fields without its Python-level ``__new__``: the fold's hot path."""

_KONG_REASON = {"direct": Reason.KONG_DIRECT, "added": Reason.KONG_ADDED, "concealed": Reason.KONG_CONCEALED}
_KONG_REASONS = frozenset(_KONG_REASON.values())
_DIANPAO, _ZIMO, _TRANSFER, _KONG_VOID, _PENALTY, _HUAZHU, _DAJIAO, _REFUND, _ESCAPE, _FORFEIT = (
    r.value for r in (Reason.DIANPAO, Reason.ZIMO, Reason.TRANSFER, Reason.KONG_VOID, Reason.PENALTY, Reason.HUAZHU,
                      Reason.DAJIAO, Reason.REFUND, Reason.ESCAPE, Reason.FORFEIT))
"""The reasons' plain ids, as transfers keep them (read once: an enum member's ``value`` is a property)."""
_KONG_REASON_ID = {kind: reason.value for kind, reason in _KONG_REASON.items()}
_OTHERS = {n: tuple(tuple(s for s in range(n) if s != seat) for seat in range(n)) for n in (3, 4)}
"""Per table size, per seat: the other seats in seat order (who pays a kong when every seat is in)."""


class Standing(NamedTuple):
    """A seat's standing at a draw (or an escape's last-four reports): ting or not, and its 大叫 points."""

    status: str     # "ting", "not_ting" or "huazhu"
    dajiao: int = 0


class FirstWin(NamedTuple):
    """The round's first ``hu`` event: its winners and its discarder (None: self-drawn)."""

    seats: tuple[int, ...]
    from_: int | None

    def to_dict(self) -> dict:
        return {"seats": list(self.seats), "from": self.from_}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FirstWin:
        return cls(tuple(d["seats"]), d["from"])


class Scored(NamedTuple):
    """A winner of a ``hu`` as it was scored: its ``fan`` after the cap and the ids of its patterns
    (those of its hand; none for a winner given as a bare ``fan``).

    :meth:`Round.step` of a ``hu`` leaves one per winner, in the event's order, in ``Round.scored``
    for the caller to read at once (a table's summary keeps each seat's biggest win); it is not
    part of the round's state (:meth:`Round.to_dict`), and any other event leaves it as it was.
    """

    seat: int
    fan: int
    patterns: tuple[str, ...]


class Transfer(NamedTuple):
    """``payer`` pays ``payee`` ``points`` for ``reason``, caused by event ``event``.

    (An immutable record; a NamedTuple because a round makes many of them.)
    """

    payer: int
    payee: int
    points: int
    reason: str
    event: int

    def as_dict(self) -> dict:
        return {"from": self.payer, "to": self.payee, "points": self.points,
                "reason": self.reason, "event": self.event}


@dataclass(frozen=True)
class Settlement:
    deltas: tuple[int, ...]          # one per seat (three with players = 3)
    transfers: tuple[Transfer, ...]
    winners: tuple[int, ...]
    ended: bool
    next_dealer: int | None

    def as_dict(self) -> dict:
        return {
            "deltas": list(self.deltas),
            "transfers": [t.as_dict() for t in self.transfers],
            "winners": list(self.winners),
            "ended": self.ended,
            "next_dealer": self.next_dealer,
        }


class Round:
    """The state of one round after some events; :meth:`step` applies one more.

    The state is plain data (see :meth:`to_dict`), so a store can keep it
    beside the log and resume without refolding.
    """

    def __init__(self, ruleset: Ruleset | str | Mapping | None = None, dealer: int = 0,
                 voids: Iterable[str | None] | None = None) -> None:
        self.rules = Ruleset.from_spec(ruleset)
        self.fan_context = context(self.rules)  # (derived once: the hu and draw events read it)
        n = self.rules.players
        self.seats = tuple(range(n))
        self.xueliu = self.rules.mode == "xueliu"
        if isinstance(dealer, bool) or not isinstance(dealer, int) or not 0 <= dealer < n:
            raise EventError(Code.SEAT_OUT_OF_RANGE, 0, f"dealer {dealer!r} is not a seat 0-{n - 1}")
        self.dealer = dealer
        if voids is None:
            self.voids: list[str | None] = [None] * n
        else:
            v = list(voids)
            if len(v) != n:
                raise EventError(Code.BAD_EVENT, 0, f"voids must list {n} seats")
            if n == 3 and any(x is not None for x in v):
                raise EventError(Code.VOID_NOT_ALLOWED, 0,
                                 "a three-player room (三人两房) has no 定缺: voids must be null")
            self.voids = [None if x is None else parse_suit(x) for x in v]
        self.n = 0                      # events applied
        self.won: list[int] = []        # seats that have won, in the order of their first win
        self.left: list[int] = []       # seats that left (escaped)
        self.ended = False
        self.first_win: FirstWin | None = None
        self.kongs: dict[int, KongRecord] = {}          # by event index
        self.melds = [[0] * 27 for _ in self.seats]     # copies in logged peng/kong, per seat
        self.logged = [False] * n
        self.pengs: list[list[int]] = [[] for _ in self.seats]
        self.pengs_logged = [False] * n  # the seat has a logged peng this round (§6: per seat)
        self.any_meld = False
        self.hand_melds = [[0] * 27 for _ in self.seats]  # melds of the last hand given, per seat
        self._concealed = [0] * 27                        # concealed tiles of the hands given (see concealed)
        self._unadded: list[tuple[int, ...]] = []         # counts of hands given not yet added to it
        self.copies = [0] * 27                            # the 4-copy count of each tile (see _recount)
        self.kept: list[Hand | None] = [None] * n         # 血流: a winner's kept 13 tiles, once known (§13.2)
        self.xianggong: list[int] = []                    # seats found 相公 this round (§15.4), in that order
        self.last: LastEvent | None = None                # the previous event
        self.transfers: list[Transfer] = []
        self.scored: tuple[Scored, ...] = ()             # the last hu's winners as scored (not state: see Scored)

    # -- derived ------------------------------------------------------------
    @property
    def active(self) -> list[int]:
        """Seats still in the round, in seat order: not left, and (but in 血流) not won."""
        gone = self.left if self.xueliu else self.won + self.left
        return list(filterfalse(gone.__contains__, self.seats)) if gone else list(self.seats)

    @property
    def deltas(self) -> tuple[int, ...]:
        d = [0] * len(self.seats)
        for payer, payee, points, _reason, _event in self.transfers:
            d[payer] -= points
            d[payee] += points
        return tuple(d)

    @property
    def next_dealer(self) -> int | None:
        """The next round's dealer (§10), or None while the round goes on."""
        return self.dealer_after() if self.ended else None

    def dealer_after(self) -> int:
        """The dealer the next round gets if this one ends now (§10)."""
        if self.first_win is None:
            return self.dealer  # 流局 or no win: 连庄
        seats, frm = self.first_win.seats, self.first_win.from_
        if self.rules.next_dealer == "discarder":
            return seats[0] if frm is None else frm
        return seats[0] if len(seats) == 1 else frm  # 一炮多响: the discarder

    def settlement(self) -> Settlement:
        return Settlement(self.deltas, tuple(self.transfers), tuple(self.won), self.ended,
                          self.dealer_after() if self.ended else None)

    # -- persistence ----------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "ruleset": self.rules.as_dict(), "dealer": self.dealer, "voids": self.voids,
            "n": self.n, "won": self.won, "left": self.left, "ended": self.ended,
            "first_win": None if self.first_win is None else self.first_win.to_dict(),
            "kongs": {str(k): v.to_dict() for k, v in self.kongs.items()},
            "melds": self.melds, "logged": self.logged, "pengs": self.pengs,
            "pengs_logged": self.pengs_logged, "any_meld": self.any_meld,
            "hand_melds": self.hand_melds, "concealed": self.concealed,
            "kept": [None if h is None else h.as_dict() for h in self.kept],
            "xianggong": self.xianggong,
            "last": None if self.last is None else self.last.to_dict(),
            "transfers": [[t.payer, t.payee, t.points, t.reason, t.event] for t in self.transfers],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Round:
        r = cls(Ruleset.from_dict(d["ruleset"]), d["dealer"], d["voids"])
        r.n, r.won, r.left, r.ended = d["n"], list(d["won"]), list(d["left"]), d["ended"]
        r.first_win = None if d["first_win"] is None else FirstWin.from_dict(d["first_win"])
        r.kongs = {int(k): KongRecord.from_dict(v) for k, v in d["kongs"].items()}
        r.melds = [list(m) for m in d["melds"]]
        r.logged = list(d["logged"])
        r.pengs = [list(p) for p in d["pengs"]]
        r.pengs_logged, r.any_meld = list(d["pengs_logged"]), d["any_meld"]
        r.hand_melds = [list(m) for m in d["hand_melds"]]
        r._concealed = list(d["concealed"])
        r._recount()
        kept = d.get("kept")  # (absent from states stored before 血流)
        if kept is not None:
            r.kept = [None if h is None else parse_hand(h["tiles"], h["melds"], h.get("void")) for h in kept]
        r.xianggong = list(d.get("xianggong", ()))  # (absent from states stored before §15.4)
        r.last = None if d["last"] is None else LastEvent.from_dict(d["last"])
        r.transfers = [Transfer(*t) for t in d["transfers"]]
        return r

    def copy(self) -> Round:
        return Round.from_dict(self.to_dict())

    # -- applying events --------------------------------------------------------
    def apply(self, event: Mapping[str, Any] | Event,
              index: int | None = None) -> tuple[Round, tuple[Transfer, ...]]:
        """A new round with ``event`` applied, and the transfers it caused (self is unchanged)."""
        new = self.copy()
        return new, new.step(event, index)

    def step(self, event: Mapping[str, Any] | Event, index: int | None = None) -> tuple[Transfer, ...]:
        """Apply one event in place, as event ``index`` (default: the count so far).

        On error the state may be half-changed: use :meth:`apply` to keep the old one.
        """
        start = len(self.transfers)
        self._advance(event, index)
        return tuple(self.transfers[start:])

    def _advance(self, event: Mapping[str, Any] | Event, index: int | None = None) -> None:
        """:meth:`step` without building its answer (the fold's loop)."""
        i = self.n if index is None else index
        if self.ended:
            raise EventError(Code.ROUND_ENDED, i, "the round has already ended")
        if type(event) is dict:  # the common forms, settled from their fields (what parse_event would build of them)
            kind = event.get("type")
            if kind == "kong":
                fields = plain_kong_fields(event, len(self.seats))
                if fields is not None:
                    self._make_kong(*fields, i)
                    self.n += 1
                    return
            elif kind == "hu":
                hu = plain_hu(event, len(self.seats), self.voids)
                if hu is not None:
                    self._hu(hu, i)
                    self.n += 1
                    return
            elif kind == "draw":
                reports = plain_draw(event, len(self.seats), self.voids)
                if reports is not None:
                    start = len(self.transfers)
                    self._draw(reports, i)
                    self._merge(start)
                    self.n += 1
                    return
        ev = parse_event(event, i, self.voids, len(self.seats))
        handler = _HANDLERS.get(type(ev))
        if handler is None:  # (a subclass of an event class)
            handler = next(h for cls, h in _HANDLERS.items() if isinstance(ev, cls))
        handler(self, ev, i)
        self.n += 1

    # -- helpers ------------------------------------------------------------------
    def _pay(self, payer: int, payee: int, points: int, reason: str, i: int) -> None:
        """``reason``: a :class:`Reason`'s plain id (a transfer keeps the id: it is data)."""
        if points and payer != payee:
            self.transfers.append(_record(Transfer, (payer, payee, points, reason, i)))

    def _merge(self, start: int) -> None:
        new = self.transfers[start:]
        if len(set(map(_pair_reason, new))) == len(new):
            return
        merged: dict[tuple, int] = {}
        for t in self.transfers[start:]:
            key = (t.payer, t.payee, t.reason, t.event)
            merged[key] = merged.get(key, 0) + t.points
        self.transfers[start:] = [_record(Transfer, (p, q, pts, r, e)) for (p, q, r, e), pts in merged.items() if pts]

    def _require_active(self, seat: int, i: int, role: str) -> None:
        if seat in self.left:
            raise EventError(Code.SEAT_NOT_IN_ROUND, i, f"{role} seat {seat} has left the round")
        if seat in self.won and not self.xueliu:
            raise EventError(Code.SEAT_NOT_IN_ROUND, i, f"{role} seat {seat} has already won")

    def _no_claim_after_win(self, seat: int, i: int, what: str) -> None:
        """血流 (§13.2): from its first win on, a seat only discards what it draws: no 碰, no 直杠."""
        if self.xueliu and seat in self.won:
            raise EventError(Code.CLAIM_AFTER_WIN, i,
                             f"seat {seat} has won (血流成河): it may not {what}, only discard what it draws")

    # -- the 4-copy count ------------------------------------------------------------
    # A speed-driven layout: ``copies`` (the count §6 limits to 4, per tile) is kept as events
    # are applied, so that checking an event reads the counts of the tiles it added instead of
    # summing every seat's melds again.  Invariant, restored by every change of its parts:
    #   copies[t] == concealed[t] + sum over seats s of (melds[s][t] if logged[s] else hand_melds[s][t])
    # The concealed tiles themselves (stored by to_dict, never read by the fold) add up the
    # counts of the hands given only when read.

    @property
    def concealed(self) -> list[int]:
        """The concealed tiles of every hand given, per tile."""
        if self._unadded:
            concealed = self._concealed
            for counts in self._unadded:
                concealed = list(map(add, concealed, counts))
            self._concealed = concealed
            self._unadded = []
        return self._concealed

    def _recount(self) -> None:
        """``copies`` from its parts (a round restored by from_dict)."""
        copies = list(self.concealed)
        for logged, melds, hand_melds in zip(self.logged, self.melds, self.hand_melds):
            counted = melds if logged else hand_melds
            if any(counted):  # (most seats have none)
                copies = list(map(add, copies, counted))
        self.copies = copies

    def _add_meld(self, seat: int, t: int, n: int) -> None:
        """``n`` more copies of tile ``t`` in ``seat``'s logged melds (a peng's or a kong's); the seat logs melds."""
        melds = self.melds[seat]
        if not self.logged[seat]:  # its first logged meld: its logged melds count from now on, not its hand's (§6)
            self.logged[seat] = True
            if any(melds) or any(self.hand_melds[seat]):
                melds[t] += n
                self.copies = list(map(add, map(sub, self.copies, self.hand_melds[seat]), melds))
                return
        melds[t] += n
        self.copies[t] += n

    def _add_concealed(self, t: int, n: int) -> None:
        self._concealed[t] += n
        self.copies[t] += n

    def _set_hand_melds(self, seat: int, counts: list[int]) -> None:
        """``counts``: the copies in the melds of ``seat``'s last hand given (they count while it logs none)."""
        if not self.logged[seat]:
            self.copies = list(map(add, map(sub, self.copies, self.hand_melds[seat]), counts))
        self.hand_melds[seat] = counts

    def _check_copies(self, i: int, touched: list[int | Hand]) -> None:
        """No tile among ``touched`` (those the event added) appears more than 4 times in the round.

        ``touched``: tile indices, and hands given (a hand stands for its concealed tiles, then
        its melds' tiles).  Per seat, the melds logged by peng/kong events count, or else those
        of its hand (§6): the sum kept in ``copies``.
        """
        copies = self.copies
        if max(copies) <= 4:
            return
        over = {}
        for x in touched:
            tiles = [x] if type(x) is int else [*map(_index, x.tiles), *(m.tile.index for m in x.melds)]
            for t in tiles:
                if copies[t] > 4:
                    over[t] = copies[t]
        if over:
            raise EventError(Code.TOO_MANY_COPIES, i, "more than 4 copies across the round: "
                             + ", ".join(f"{TILES[t]} ({n})" for t, n in over.items()))

    def _check_tile(self, i: int, t: int) -> None:
        """:meth:`_check_copies` of the one tile ``t`` (a peng's or a kong's)."""
        total = self.copies[t]
        if total > 4:
            raise EventError(Code.TOO_MANY_COPIES, i, f"more than 4 copies across the round: {TILES[t]} ({total})")

    def _unit(self, units: int) -> int:
        return units * self.rules.base

    # -- peng / kong -------------------------------------------------------------
    def _peng(self, ev: Peng, i: int) -> None:
        self._require_active(ev.seat, i, "peng")
        self._no_claim_after_win(ev.seat, i, "碰 (peng)")
        self._require_active(ev.from_, i, "discarding")
        if ev.from_ == ev.seat:
            raise EventError(Code.SELF_DISCARD, i, f"seat {ev.seat} cannot peng its own discard")
        self._add_meld(ev.seat, ev.tile.index, 3)
        self.pengs[ev.seat].append(ev.tile.index)
        self.pengs_logged[ev.seat] = self.any_meld = True
        self._check_tile(i, ev.tile.index)
        self.last = _record(LastEvent, ("peng", i, ev.seat, None, ev.tile.index, ev.from_))

    def _kept_kong(self, seat: int, kept: Hand, kind: str, tile: Tile, i: int) -> None:
        """A 血流 winner's concealed or added kong on its known kept hand (§13.2).

        The kong must fit the hand (three of the tile concealed with the drawn
        fourth, or its peng of it) and leave its waits unchanged; the kept hand
        then holds the kong, and its three concealed copies move to the kong.
        """
        t = tile.index
        if kind == "concealed":
            if kept.counts[t] != 3:
                raise EventError(Code.KONG_NOT_IN_HAND, i,
                                 f"seat {seat}'s kept hand {str(kept)!r} does not hold three {tile} for a "
                                 "concealed kong with the tile it drew")
            rest = list(kept.tiles)
            for _ in range(3):
                rest.remove(tile)
            new = Hand(tuple(rest), kept.melds + (Meld("kong", tile, "concealed"),), kept.void)
        else:
            peng = Meld("peng", tile)
            if peng not in kept.melds:
                raise EventError(Code.KONG_NOT_IN_HAND, i,
                                 f"seat {seat}'s kept hand has no peng of {tile} to add to")
            melds = list(kept.melds)
            melds[melds.index(peng)] = Meld("kong", tile, "added")
            new = Hand(kept.tiles, tuple(melds), kept.void)
        before, after = _waits(kept), _waits(new)
        if before != after:
            raise EventError(Code.KONG_CHANGES_WAITS, i,
                             f"seat {seat}'s {kind} kong of {tile} would change its kept hand's waits "
                             f"from {_tile_list(before)} to {_tile_list(after)} (血流成河: not allowed)")
        if kind == "concealed":
            self._add_concealed(t, -3)  # those copies move from its concealed tiles into the kong
        self.kept[seat] = new
        self._set_hand_melds(seat, _meld_counts(new))

    def _kong(self, ev: Kong, i: int) -> None:
        self._make_kong(ev.seat, ev.kind, ev.tile, ev.from_, i)

    def _make_kong(self, seat: int, kind: str, tile: Tile, frm: int | None, i: int) -> None:
        """A kong event by its fields (:meth:`_advance` gives a plain kong object's without building a
        :class:`Kong`)."""
        t = tile.index
        if self.left or self.won:  # (no seat has left or won: every seat is active)
            self._require_active(seat, i, "kong")
        rules = self.rules
        if kind == "direct":
            if self.xueliu:
                self._no_claim_after_win(seat, i, "make a direct kong (直杠)")
            if self.left or self.won:
                self._require_active(frm, i, "discarding")
            if frm == seat:
                raise EventError(Code.SELF_DISCARD, i, f"seat {seat} cannot kong its own discard")
            self._add_meld(seat, t, 4)
            payers: tuple[int, ...] | list[int] = (frm,)
            unit = rules.direct_kong * rules.base
        else:
            kept = self.kept[seat]
            if kept is not None:
                self._kept_kong(seat, kept, kind, tile, i)
            if kind == "added":
                pengs = self.pengs[seat]
                if t in pengs:
                    pengs.remove(t)
                    self._add_meld(seat, t, 1)
                elif self.pengs_logged[seat]:
                    raise EventError(Code.NO_PENG, i, f"seat {seat} logs its pengs but has no peng of {tile} to add to")
                else:
                    self._add_meld(seat, t, 4)
                unit = rules.added_kong * rules.base
            else:
                self._add_meld(seat, t, 4)
                unit = rules.concealed_kong * rules.base
            payers = [s for s in self.active if s != seat] if self.left or self.won else _OTHERS[len(self.seats)][seat]
        self.any_meld = True
        self._check_tile(i, t)
        if unit:  # (no payer is the kong's seat)
            reason = _KONG_REASON_ID[kind]
            self.transfers += [_record(Transfer, (payer, seat, unit, reason, i)) for payer in payers]
            paid = tuple([(payer, unit) for payer in payers])
        else:
            paid = ()
        self.kongs[i] = _record(KongRecord, (seat, kind, t, frm, paid, False, False))
        self.last = _record(LastEvent, ("kong", i, seat, kind, t, frm))

    # -- hu -----------------------------------------------------------------------
    def _hu(self, ev: Hu | HuFields, i: int) -> None:
        seats = [w.seat for w in ev.winners]
        if len(seats) > 1 and len(set(seats)) != len(seats):
            raise EventError(Code.DUPLICATE_WINNER, i, "a seat is listed twice among the winners")
        everyone = not self.left and not self.won  # (every seat is still in the round)
        if not everyone:
            for s in seats:
                self._require_active(s, i, "winning")
        for s in seats:
            if s in self.xianggong:
                raise EventError(Code.XIANGGONG, i, f"seat {s} was found 相公 (a wrong number of tiles) this round: "
                                 "it may not win until the round ends")
        if self.xueliu and (ev.heavenly or ev.earthly) and self.first_win is not None:
            raise EventError(Code.CONTRADICTORY_FLAGS, i, "天胡 and 地胡 are only for the round's first win (§13.3)")
        if ev.from_ is not None:
            if not everyone:
                self._require_active(ev.from_, i, "discarding")
            if ev.from_ in seats:
                raise EventError(Code.SELF_DISCARD, i, f"the discarder {ev.from_} cannot be a winner")
        elif len(seats) != 1:
            raise EventError(Code.SELF_DRAW_ONE_WINNER, i, "a self-drawn hu has exactly one winner")
        sit = self._check_hu_flags(ev, i)
        kong_index = self.last.index if self.last and self.last.type == "kong" else None
        kong = None if kong_index is None else self.kongs[kong_index]
        ctx = self.fan_context
        feeder_pays = (
            ev.from_ is None and ev.after_kong and self.rules.dianganghua == "discard"
            and kong is not None and kong.kind == "direct"
        )
        if feeder_pays:
            ctx = context(self.rules, without="zimo")
        for k, w in enumerate(ev.winners):
            if w.patterns:
                _check_given_patterns(w, k, ev, ctx, i)
        # value every winner first: nothing moves unless all are valid
        points, scored = [], []
        for w in ev.winners:
            raw, patterns = self._winner_fan(w, ev, sit, ctx, i)
            if raw == 1 and ev.from_ is not None and not self.rules.dianpao_pinghu:
                raise EventError(Code.DIANPAO_PINGHU, i, f"seat {w.seat}: {DIANPAO_PINGHU}")
            value = points_of(raw, ctx)
            points.append(value.points)
            scored.append(_record(Scored, (w.seat, value.fan, patterns)))
        self._count_hu_tiles(ev, i)
        if ev.robbing_kong:
            self._void_kong(kong, i)
        if self.xueliu:
            self._keep_hands(ev)
        append = self.transfers.append
        for w, pts in zip(ev.winners, points):
            if ev.from_ is not None:
                if pts:  # (as _pay: the discarder is no winner)
                    append(_record(Transfer, (ev.from_, w.seat, pts, _DIANPAO, i)))
            elif feeder_pays:
                self._pay(kong.from_, w.seat, pts, _DIANPAO, i)
            else:
                pts += self.rules.base if self.rules.zimo == "base" else 0
                if pts:
                    for s in (self.seats if everyone else self.active):
                        if s != w.seat:
                            append(_record(Transfer, (s, w.seat, pts, _ZIMO, i)))
        if ev.after_kong and ev.from_ is not None:  # 杠上炮: 呼叫转移
            for w in ev.winners:
                self._pay(ev.from_, w.seat, kong.collected, _TRANSFER, i)
            self.kongs[kong_index] = kong._replace(transferred=True)
        self.scored = tuple(scored)
        if self.first_win is None:
            self.first_win = _record(FirstWin, (tuple(seats), ev.from_))
        for s in seats:
            if s not in self.won:
                self.won.append(s)
        if self.rules.mode == "normal" or (not self.xueliu and len(self.won) >= len(self.seats) - 1):
            self.ended = True  # 血战: all but one have won (three of four, two of three); 血流: never by a win
        self.last = _record(LastEvent, ("hu", i, seats[0], None, ev.tile.index, ev.from_))

    def _check_hu_flags(self, ev: Hu | HuFields, i: int) -> tuple:
        """The situation flags of the win, after checking they can hold together here."""
        flags = (ev.from_ is None, ev.after_kong, ev.robbing_kong, ev.last_tile, ev.heavenly, ev.earthly)
        if ev.robbing_kong or ev.heavenly or ev.earthly:  # the only flags that can clash
            try:
                win = Win(ev.tile, *flags)
            except RuleError as exc:
                raise EventError(Code.CONTRADICTORY_FLAGS, i, str(exc)) from None
            problem = win.contradiction(self.rules.fan_table)
            if problem:
                raise EventError(Code.CONTRADICTORY_FLAGS, i, problem)
        last = self.last
        if ev.robbing_kong:
            if not (last and last.type == "kong" and last.kind == "added" and last.seat == ev.from_
                    and last.tile == ev.tile.index):
                raise EventError(Code.KONG_REQUIRED, i,
                                 f"robbing_kong needs seat {ev.from_}'s added kong of {ev.tile} just before")
        elif ev.after_kong:
            actor = ev.winners[0].seat if ev.self_drawn else ev.from_
            if not (last and last.type == "kong" and last.seat == actor):
                what = "杠上花 needs the winner's" if ev.self_drawn else "杠上炮 needs the discarder's"
                raise EventError(Code.KONG_REQUIRED, i, f"{what} kong (seat {actor}) just before")
        if ev.heavenly:
            if ev.winners[0].seat != self.dealer:
                raise EventError(Code.CONTRADICTORY_FLAGS, i, "heavenly is the dealer's win")
            if self.n != 0:
                raise EventError(Code.CONTRADICTORY_FLAGS, i, "heavenly must be the round's first event")
        if ev.earthly:
            if any(w.seat == self.dealer for w in ev.winners):
                raise EventError(Code.CONTRADICTORY_FLAGS, i, "earthly is a non-dealer's win")
            if self.any_meld:
                raise EventError(Code.CONTRADICTORY_FLAGS, i, "earthly comes before any peng or kong")
            if ev.from_ is not None and ev.from_ != self.dealer:
                raise EventError(Code.CONTRADICTORY_FLAGS, i, "earthly by discard is on the dealer's first discard")
        return flags

    def _winner_fan(self, w, ev: Hu | HuFields, sit, ctx: FanContext, i: int) -> tuple[int, tuple[str, ...]]:
        """A winner's total fan before the cap, as declared or its hand's (checked), and the ids of
        its hand's patterns (none for a declared fan)."""
        if w.hand is None:
            return w.fan, ()
        hand: Hand = w.hand
        probs = hand_problems(hand, sizes=(14,)) if hand.size != 14 or hand.max_held > 4 else None
        if probs:
            raise EventError(Code.BAD_HAND if probs[0].code == Code.BAD_SIZE else Code.TOO_MANY_COPIES, i,
                             f"seat {w.seat}'s hand: {probs[0].message}")
        if not hand.counts[ev.tile.index]:
            raise EventError(Code.WIN_TILE_NOT_IN_HAND, i,
                             f"the hu tile {ev.tile} is not among seat {w.seat}'s concealed tiles {str(hand)!r}")
        kept = self.kept[w.seat]
        if kept is not None and not _same_hand(_without(hand, ev.tile.index), kept):
            raise EventError(Code.KEPT_HAND_MISMATCH, i,
                             f"seat {w.seat} has won before (血流成河): its hand must be its kept hand "
                             f"{_describe(kept)} and the tile won {ev.tile}; got {_describe(hand)}")
        if ev.after_kong and ev.self_drawn and not any(m.type == "kong" for m in hand.melds):
            raise EventError(Code.CONTRADICTORY_FLAGS, i, f"seat {w.seat}: {GANGSHANGHUA_NEEDS_KONG}")
        if (ev.heavenly or ev.earthly) and hand.melds:
            raise EventError(Code.CONTRADICTORY_FLAGS, i, "heavenly/earthly is a win with no melds")
        problem = suit_problem(hand.suit_mask, hand.void)
        if problem:
            raise EventError(Code.NOT_A_WIN, i, f"seat {w.seat} cannot win: {problem}")
        value = hand_win(hand, ev.tile.index, sit, ctx)
        if value is None:
            raise EventError(Code.NOT_A_WIN, i, f"seat {w.seat}'s hand {str(hand)!r} is not a winning shape")
        return value

    def _count_hu_tiles(self, ev: Hu | HuFields, i: int) -> None:
        first = True
        touched: list[int] = []
        t = ev.tile.index
        for w in ev.winners:
            if w.hand is None:
                continue
            if self.kept[w.seat] is not None:   # 血流: its kept hand is counted already; the tile won is new
                self._add_concealed(t, 1)
                touched.append(t)
            else:
                touched.append(self._add_hand(w.seat, w.hand))
            if ev.from_ is not None and not first:
                self._add_concealed(t, -1)  # the discard counts once
            first = False
        if first and self.rules.mode == "xueliu":
            # 血流 (§13.2): the tile won is set aside and counts toward the limit even when every
            # winner is given as a fan (elsewhere only the tiles of hands given count, §6)
            self._add_concealed(t, 1)
            touched.append(t)
        if ev.robbing_kong:
            self.melds[ev.from_][t] -= 1   # the robbed kong counts as a peng (its seat logged it)
            if self.logged[ev.from_]:
                self.copies[t] -= 1
            robbed = self.kept[ev.from_]
            if robbed is not None:         # (a 血流 winner's kept hand holds the peng again)
                melds = list(robbed.melds)
                melds[melds.index(Meld("kong", ev.tile, "added"))] = Meld("peng", ev.tile)
                self.kept[ev.from_] = Hand(robbed.tiles, tuple(melds), robbed.void)
                hand_melds = list(self.hand_melds[ev.from_])
                hand_melds[t] -= 1
                self._set_hand_melds(ev.from_, hand_melds)
        self._check_copies(i, touched)

    def _keep_hands(self, ev: Hu | HuFields) -> None:
        """血流: a winner given with a hand keeps its 13 concealed tiles; the tile won is set aside (§13.2)."""
        for w in ev.winners:
            if w.hand is not None:
                self.kept[w.seat] = _without(w.hand, ev.tile.index)

    def _add_hand(self, seat: int, hand: Hand) -> Hand:
        """Count a given hand's tiles in the round; the hand (for :meth:`_check_copies`: the tiles it touched)."""
        self._unadded.append(hand.counts)  # (added to concealed when it is read)
        copies = self.copies
        for tile in hand.tiles:  # (its 13 or 14 tiles: fewer steps than the 27 counts, and no new list)
            copies[tile.index] += 1
        if hand.melds or any(self.hand_melds[seat]):  # (replacing a seat's earlier hand only lowers counts)
            hm = [0] * 27
            for m in hand.melds:
                hm[m.tile.index] += 4 if m.type == "kong" else 3
            self._set_hand_melds(seat, hm)
        # (else no melds before or now: the seat's count stays all zeros)
        return hand

    def _void_kong(self, kong: KongRecord, i: int) -> None:
        """抢杠胡: the robbed kong's payments are reversed and it counts as a peng."""
        for payer, pts in kong.paid:
            self._pay(kong.seat, payer, pts, _KONG_VOID, i)
        self.kongs[self.last.index] = kong._replace(void=True)
        self.pengs[kong.seat].append(kong.tile)

    # -- penalties ---------------------------------------------------------------------
    def _penalty(self, ev: Penalty, i: int) -> None:
        """诈胡 (§15.3): the seat pays each other seat still in the round a win of the ruleset's
        ``zhahu`` fan, capped, and plays on.  相公 (§15.4): no payment; the seat may not win for the rest
        of the round and is not ting at its end."""
        self._require_active(ev.seat, i, "penalized")
        if ev.kind == "zhahu":
            points = points_of(self.rules.zhahu, self.fan_context).points
            for s in self.active:
                self._pay(ev.seat, s, points, _PENALTY, i)
        elif ev.seat not in self.xianggong:
            self.xianggong.append(ev.seat)
        self.last = _record(LastEvent, ("penalty", i, ev.seat, None, None, None))

    # -- draw and escape ------------------------------------------------------------
    def _statuses(self, reports: Iterable[SeatReport | ReportFields], i: int, seats: list[int]) -> dict[int, Standing]:
        """seat → its :class:`Standing` for the listed seats; hands are evaluated.

        In 血流 a seat that has won is ting (§13.5): listed, it must be; its
        大叫 is its kept hand's when that is known, else its entry's.
        """
        ctx = self.fan_context
        pigs = self.rules.huazhu != 0  # §7.2: with huazhu = 0 there is no 花猪, only seats not ting
        out: dict[int, Standing] = {}
        touched: list[int] = []
        for rep in reports:
            seat = rep.seat
            if seat not in seats:
                raise EventError(Code.BAD_SEATS, i, f"seat {seat} is not in the round")
            if seat in out:
                raise EventError(Code.BAD_SEATS, i, f"seat {seat} is listed twice")
            winner = self.xueliu and seat in self.won
            kept = self.kept[seat]
            if rep.hand is not None:
                h = rep.hand
                probs = hand_problems(h, sizes=(13,)) if h.size != 13 or h.max_held > 4 else None
                if probs:
                    raise EventError(Code.BAD_HAND if probs[0].code == Code.BAD_SIZE else Code.TOO_MANY_COPIES, i,
                                     f"seat {seat}'s hand: {probs[0].message}")
                if kept is not None:
                    if not _same_hand(h, kept):
                        raise EventError(Code.KEPT_HAND_MISMATCH, i,
                                         f"seat {seat} has won (血流成河): its hand is its kept hand "
                                         f"{_describe(kept)}; got {_describe(h)}")
                else:
                    touched.append(self._add_hand(seat, h))
                if h.huazhu:
                    out[seat] = _record(Standing, ("huazhu" if pigs and not winner else "not_ting", 0))
                else:
                    best = dajiao_points(h, ctx, self.rules.dajiao)
                    out[seat] = _record(Standing, ("not_ting", 0) if best is None else ("ting", best))
            elif rep.status == "ting":
                out[seat] = Standing("ting", points_of(rep.dajiao_fan, ctx).points)
            else:
                out[seat] = Standing(rep.status if pigs or rep.status != "huazhu" else "not_ting")
            if winner:
                if out[seat].status != "ting":
                    raise EventError(Code.WINNER_NOT_TING, i,
                                     f"seat {seat} has won (血流成河): it is ting, not {out[seat].status}")
                if kept is not None:
                    out[seat] = Standing("ting", dajiao_points(kept, ctx, self.rules.dajiao) or 0)
        self._check_copies(i, touched)
        if self.xueliu:
            for seat in self.won:
                if seat in seats and seat not in out:  # a winner not listed: ting, its 大叫 from its kept hand
                    kept = self.kept[seat]
                    points = 0 if kept is None else dajiao_points(kept, ctx, self.rules.dajiao) or 0
                    out[seat] = Standing("ting", points)
        for seat in self.xianggong:  # §15.4: not ting whatever is said of its hand (a 花猪 stays one)
            if seat in out and out[seat].status == "ting":
                out[seat] = Standing("not_ting")
        return out

    def _collects_dajiao(self, seat: int) -> bool:
        """Whether a ting seat collects 大叫: in 血流 a winner does only with ``xueliu_dajiao_winners`` (§13.5)."""
        return not (self.xueliu and seat in self.won) or self.rules.xueliu_dajiao_winners

    def _draw_merged(self, ev: Draw, i: int) -> None:
        start = len(self.transfers)
        self._draw(ev.seats, i)
        self._merge(start)  # refunds of several kongs between the same two seats

    def _escape_merged(self, ev: Escape, i: int) -> None:
        start = len(self.transfers)
        self._escape(ev, i)
        self._merge(start)

    def _draw(self, reports: Iterable[SeatReport | ReportFields], i: int) -> None:
        """A draw of these seat reports (its transfers are merged by the caller)."""
        active = self.active
        status = self._statuses(reports, i, active)
        missing = [s for s in active if s not in status]
        if missing:
            what = "every seat that has not won" if self.xueliu else "every seat still in the round"
            raise EventError(Code.BAD_SEATS, i, f"a draw lists {what}; missing {missing}")
        # 1. 退税
        for s in active:
            if status[s].status != "ting":
                self._refund(s, i)
        # 2. 查花猪
        pigs = [s for s in active if status[s].status == "huazhu"]
        if pigs:
            payees = [s for s in active if status[s].status != "huazhu"]
            if self.rules.huazhu_pays_winners and not self.xueliu:
                payees += [s for s in self.won if s not in self.left]
            for pig in pigs:
                for s in payees:
                    self._pay(pig, s, self._unit(self.rules.huazhu), _HUAZHU, i)
        # 3. 查大叫
        everyone = not self.xueliu or self.rules.xueliu_dajiao_winners  # else only seats that have not won
        tings = [s for s in active if status[s].status == "ting" and (everyone or s not in self.won)]
        for s in active:
            if status[s].status == "not_ting":
                for t in tings:
                    self._pay(s, t, status[t].dajiao, _DAJIAO, i)
        self.ended = True
        self.last = _record(LastEvent, ("draw", i, None, None, None, None))

    def _refund(self, seat: int, i: int) -> None:
        """退税: ``seat`` hands back its kongs' income (not a robbed kong's, nor one passed on)."""
        owed: dict[int, int] = {}  # payer -> points, in the order of the first kong it paid (as _merge sums them)
        for kong in self.kongs.values():
            if kong.seat != seat or kong.void or kong.transferred:
                continue
            for payer, pts in kong.paid:
                if payer not in self.left and pts:
                    owed[payer] = owed.get(payer, 0) + pts
        for payer, pts in owed.items():
            self._pay(seat, payer, pts, _REFUND, i)

    def _escape(self, ev: Escape, i: int) -> None:
        seat = ev.seat
        if seat in self.left:
            raise EventError(Code.SEAT_NOT_IN_ROUND, i, f"seat {seat} has already left")
        if seat in self.won and not self.xueliu:  # (血流: every seat is in the round, §13.7)
            self._winner_leaves(seat, i)
            return
        others = [s for s in self.active if s != seat]
        reports = [r for r in ev.seats if r.seat != seat]
        status = self._statuses(reports, i, others)
        charge = [(s, self._unit(self.rules.escape)) for s in others]
        if ev.last_four:
            dajiao = [(s, status[s].dajiao) for s in others
                      if s in status and status[s].status == "ting" and self._collects_dajiao(s)]
            if sum(p for _, p in dajiao) > sum(p for _, p in charge):
                charge = dajiao
        for s, pts in charge:
            self._pay(seat, s, pts, _ESCAPE, i)
        self.left.append(seat)
        self.ended = True
        self.last = LastEvent("escape", i, seat)

    def _winner_leaves(self, seat: int, i: int) -> None:
        if self.rules.winner_leaves == "forfeit":
            for t in list(self.transfers):
                if t.payee != seat or t.payer in self.left or t.reason == Reason.KONG_VOID:
                    continue
                kong = self.kongs.get(t.event) if t.reason in _KONG_REASONS else None
                if kong is not None and kong.void:
                    continue  # a robbed kong's payments were already given back (kong_void)
                self._pay(seat, t.payer, t.points, _FORFEIT, i)
        self.left.append(seat)
        self.last = LastEvent("escape", i, seat)


# How a win happened, as a pattern id and the hu event's flags (§15.1): (pattern, the flags' reading,
# whether that reading alone asks for the pattern: "if and only if", or only "only with")
_HOW_WON: tuple[tuple[str, str, bool], ...] = (
    ("qiangganghu", "robbing_kong", True),
    ("gangshanghua", "after_kong and self-drawn", True),
    ("gangshangpao", "after_kong and on a discard", True),
    ("haidi", "last_tile", False),
    ("zimo", "self-drawn", False),
    ("tianhu", "heavenly", True),
    ("dihu", "earthly", True),
)


def _how_won(ev: Hu | HuFields) -> dict[str, bool]:
    """Whether each reading of :data:`_HOW_WON` holds for ``ev``."""
    drawn = ev.from_ is None
    return {"robbing_kong": ev.robbing_kong, "after_kong and self-drawn": ev.after_kong and drawn,
            "after_kong and on a discard": ev.after_kong and not drawn, "last_tile": ev.last_tile,
            "self-drawn": drawn, "heavenly": ev.heavenly, "earthly": ev.earthly}


def _check_given_patterns(w, k: int, ev: Hu | HuFields, ctx: FanContext, i: int) -> None:
    """A winner given by ``fan`` with ``patterns`` (the ``k``-th of event ``i``): the ids that say how the
    win happened must agree with the event's flags (§15.1), else ``patterns_contradict_win`` naming both.

    "If" holds only where the pattern is worth fan under the ruleset (a pattern worth 0, such as 杠上炮
    under the chengdu table, is never listed); "only if" always.
    """
    holds = _how_won(ev)
    for pid, flag, iff in _HOW_WON:
        listed = pid in w.patterns
        if listed and not holds[flag]:
            raise EventError(Code.PATTERNS_CONTRADICT_WIN, i,
                             f"seat {w.seat}'s patterns list {pid} ({PATTERNS[pid].name}), but the hu is not "
                             f"{flag}", field=f"winners.{k}.patterns.{w.patterns.index(pid)}")
        worth = ctx.base_fans.get(pid) if PATTERNS[pid].base else ctx.extra_fans.get(pid)
        if iff and holds[flag] and not listed and worth:
            raise EventError(Code.PATTERNS_CONTRADICT_WIN, i,
                             f"the hu is {flag}, but seat {w.seat}'s patterns do not list {pid} "
                             f"({PATTERNS[pid].name})", field=f"winners.{k}.patterns")


_HANDLERS = {Kong: Round._kong, Hu: Round._hu, Peng: Round._peng, Draw: Round._draw_merged,
             Escape: Round._escape_merged, Penalty: Round._penalty}
"""The handler of each event class (the classes are disjoint)."""


def _without(hand: Hand, tile: int) -> Hand:
    """The hand with one concealed copy of ``tile`` taken out."""
    rest = list(hand.tiles)
    rest.remove(TILES[tile])
    return Hand(tuple(rest), hand.melds, hand.void)


def _meld_key(m: Meld) -> tuple:
    return (m.type, m.tile.index, m.kind or "")


def _same_hand(a: Hand, b: Hand) -> bool:
    """Same concealed tiles and the same melds (in any order)."""
    return a.counts == b.counts and sorted(map(_meld_key, a.melds)) == sorted(map(_meld_key, b.melds))


def _describe(hand: Hand) -> str:
    melds = ", ".join(map(str, hand.melds))
    return repr(str(hand)) + (f" with {melds}" if melds else "")


def _meld_counts(hand: Hand) -> list[int]:
    out = [0] * 27
    for m in hand.melds:
        out[m.tile.index] += m.copies
    return out


def _waits(hand: Hand) -> list[int]:
    void = -1 if hand.void is None else "mps".index(hand.void)
    return wait_tiles(hand.keys, len(hand.tiles), len(hand.melds), hand.held, hand.suit_mask, void)


def _tile_list(tiles: list[int]) -> str:
    return "[" + ", ".join(str(TILES[t]) for t in tiles) + "]"


def settle(events: Iterable[Mapping[str, Any] | Event], *, dealer: int,
           ruleset: Ruleset | str | Mapping | None = None,
           voids: Iterable[str | None] | None = None) -> Settlement:
    """Settle a round: fold its events into transfers, deltas, winners and the next dealer.

    All-or-nothing: an event that cannot happen raises :class:`EventError`
    (``code``, ``event`` index, reason) and nothing is returned.

    >>> s = settle([
    ...     {"type": "kong", "seat": 1, "kind": "direct", "tile": "5m", "from": 2},
    ...     {"type": "hu", "from": 3, "tile": "5p", "winners": [{"seat": 0, "fan": 2}]},
    ... ], dealer=0)
    >>> s.deltas, s.winners, s.ended
    ((12, 6, -6, -12), (0,), False)
    """
    r = Round(ruleset, dealer, voids)
    advance = r._advance
    for ev in events:
        advance(ev)
    return r.settlement()
