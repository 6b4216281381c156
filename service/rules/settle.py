"""Settling a round from its events (RULES.md §6-§8, §10): the only place money moves.

A round is a fold over its events: :class:`Round` holds the state after N
events and :meth:`Round.step` validates one more event against it, returning
the transfers it causes.  :func:`settle` folds a whole list.

Error codes (``EventError.code``), stable:

=========================  ====================================================
``bad_event``              malformed event (shape, flag types, unknown type)
``bad_hand``               a hand that does not parse or has the wrong size
``seat_out_of_range``      a seat outside 0-3
``seat_not_in_round``      a seat that has won or left acts (or pays) again
``self_discard``           a discarder (or kong feeder) who is the actor itself
``duplicate_winner``       one seat listed twice as a winner
``self_draw_one_winner``   a self-drawn hu with several winners
``not_a_win``              a winner's hand does not win (shape, 缺一门, 定缺)
``win_tile_not_in_hand``   the hu tile is not among a winner's concealed tiles
``contradictory_flags``    flags that cannot hold together (§5.1)
``kong_required``          杠上炮/杠上花/抢杠胡 without the kong just before
``no_peng``                an added kong without the seat's peng, pengs being logged
``too_many_copies``        a fifth copy of a tile across the round
``bad_seats``              a draw/escape seat list naming a seat not in the round, twice, or (draw) not all
``round_ended``            any event after the round has ended
=========================  ====================================================

Readings of RULES.md where it is silent (documented choices):

* 天胡 must be the round's first event and the dealer's win; 地胡 needs no peng
  or kong before it and a non-dealer winner; under the chengdu table a 地胡 by
  discard must be on the dealer's discard.
* 杠上炮 with several winners: each winner receives the full kong income
  (呼叫转移 per winner, as the rule reads).
* "Pengs are logged" per seat (as §6 counts melds per seat): a seat with a logged
  peng this round must have logged the peng its added kong upgrades; a seat that
  logs no pengs may post added kongs alone (the kong then counts as four copies).
* A 13-size hand given at a draw is ting by the same rules as ``ting`` (死叫 is
  not ting); its 大叫 follows the ruleset's ``dajiao`` (max or min) and cap.

>>> s = settle([{"type": "kong", "seat": 0, "kind": "concealed", "tile": "5m"}], dealer=0)
>>> s.deltas, [t.as_dict()["reason"] for t in s.transfers]
((36, -12, -12, -12), ['kong_concealed', 'kong_concealed', 'kong_concealed'])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, NamedTuple

from .errors import EventError, RuleError
from .events import Draw, Escape, Event, Hu, Kong, Peng, SeatReport, parse_event
from .fan import (
    GANGSHANGHUA_NEEDS_KONG, _Ctx, context, evaluate, meld_info, points_of, suit_problem, Win,
)
from .hand import Hand, hand_problems
from .ruleset import Ruleset
from .tiles import TILES, parse_suit
from .ting import dajiao_points

REASONS = (
    "kong_direct", "kong_added", "kong_concealed", "kong_void", "dianpao", "zimo",
    "transfer", "refund", "huazhu", "dajiao", "escape", "forfeit",
)


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
    deltas: tuple[int, int, int, int]
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

    def __init__(self, ruleset: "Ruleset | str | Mapping | None" = None, dealer: int = 0,
                 voids: Iterable[str | None] | None = None) -> None:
        self.rules = Ruleset.from_spec(ruleset)
        if isinstance(dealer, bool) or not isinstance(dealer, int) or not 0 <= dealer <= 3:
            raise EventError("seat_out_of_range", 0, f"dealer {dealer!r} is not a seat 0-3")
        self.dealer = dealer
        v = list(voids) if voids is not None else [None] * 4
        if len(v) != 4:
            raise EventError("bad_event", 0, "voids must list four seats")
        self.voids = [None if x is None else parse_suit(x) for x in v]
        self.n = 0                      # events applied
        self.won: list[int] = []        # winners in order
        self.left: list[int] = []       # seats that left (escaped)
        self.ended = False
        self.first_win: tuple[list[int], int | None] | None = None
        # kongs by event index: [seat, kind, tile, from, [[payer, points]...], void, transferred]
        self.kongs: dict[int, list] = {}
        self.melds = [[0] * 27 for _ in range(4)]      # copies in logged peng/kong, per seat
        self.logged = [False] * 4
        self.pengs: list[list[int]] = [[] for _ in range(4)]
        self.pengs_logged = [False] * 4  # the seat has a logged peng this round (§6: per seat)
        self.any_meld = False
        self.hand_melds = [[0] * 27 for _ in range(4)]  # melds of the last hand given, per seat
        self.concealed = [0] * 27                       # concealed tiles of every hand given
        self.last: tuple | None = None                  # (type, seat, kind, tile, from) of the previous event
        self.transfers: list[Transfer] = []

    # -- derived ------------------------------------------------------------
    @property
    def active(self) -> list[int]:
        """Seats still in the round (neither won nor left), in seat order."""
        return [s for s in (0, 1, 2, 3) if s not in self.won and s not in self.left]

    @property
    def deltas(self) -> tuple[int, int, int, int]:
        d = [0, 0, 0, 0]
        for t in self.transfers:
            d[t.payer] -= t.points
            d[t.payee] += t.points
        return tuple(d)  # type: ignore[return-value]

    @property
    def next_dealer(self) -> int | None:
        """The next round's dealer (§10), or None while the round goes on."""
        return self.dealer_after() if self.ended else None

    def dealer_after(self) -> int:
        """The dealer the next round gets if this one ends now (§10)."""
        if self.first_win is None:
            return self.dealer  # 流局 or no win: 连庄
        seats, frm = self.first_win
        if self.rules.next_dealer == "discarder":
            return seats[0] if frm is None else frm
        return seats[0] if len(seats) == 1 else frm  # 一炮多响: the discarder

    def settlement(self) -> Settlement:
        return Settlement(self.deltas, tuple(self.transfers), tuple(self.won), self.ended, self.next_dealer)

    # -- persistence ----------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "ruleset": self.rules.as_dict(), "dealer": self.dealer, "voids": self.voids,
            "n": self.n, "won": self.won, "left": self.left, "ended": self.ended,
            "first_win": self.first_win, "kongs": {str(k): v for k, v in self.kongs.items()},
            "melds": self.melds, "logged": self.logged, "pengs": self.pengs,
            "pengs_logged": self.pengs_logged, "any_meld": self.any_meld,
            "hand_melds": self.hand_melds, "concealed": self.concealed,
            "last": self.last,
            "transfers": [[t.payer, t.payee, t.points, t.reason, t.event] for t in self.transfers],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Round":
        r = cls(Ruleset.from_dict(d["ruleset"]), d["dealer"], d["voids"])
        r.n, r.won, r.left, r.ended = d["n"], list(d["won"]), list(d["left"]), d["ended"]
        r.first_win = None if d["first_win"] is None else (list(d["first_win"][0]), d["first_win"][1])
        r.kongs = {int(k): [list(x) if isinstance(x, list) else x for x in v] for k, v in d["kongs"].items()}
        for v in r.kongs.values():
            v[4] = [list(p) for p in v[4]]
        r.melds = [list(m) for m in d["melds"]]
        r.logged = list(d["logged"])
        r.pengs = [list(p) for p in d["pengs"]]
        r.pengs_logged, r.any_meld = list(d["pengs_logged"]), d["any_meld"]
        r.hand_melds = [list(m) for m in d["hand_melds"]]
        r.concealed = list(d["concealed"])
        r.last = None if d["last"] is None else tuple(d["last"])
        r.transfers = [Transfer(*t) for t in d["transfers"]]
        return r

    def copy(self) -> "Round":
        return Round.from_dict(self.to_dict())

    # -- applying events --------------------------------------------------------
    def apply(self, event: "Mapping[str, Any] | Event", index: int | None = None) -> tuple["Round", tuple[Transfer, ...]]:
        """A new round with ``event`` applied, and the transfers it caused (self is unchanged)."""
        new = self.copy()
        return new, new.step(event, index)

    def step(self, event: "Mapping[str, Any] | Event", index: int | None = None) -> tuple[Transfer, ...]:
        """Apply one event in place, as event ``index`` (default: the count so far).

        On error the state may be half-changed: use :meth:`apply` to keep the old one.
        """
        i = self.n if index is None else index
        if self.ended:
            raise EventError("round_ended", i, "the round has already ended")
        ev = parse_event(event, i, self.voids)
        start = len(self.transfers)
        if isinstance(ev, Peng):
            self._peng(ev, i)
        elif isinstance(ev, Kong):
            self._kong(ev, i)
        elif isinstance(ev, Hu):
            self._hu(ev, i)
        elif isinstance(ev, Draw):
            self._draw(ev, i)
            self._merge(start)  # refunds of several kongs between the same two seats
        else:
            self._escape(ev, i)
            self._merge(start)
        self.n += 1
        return tuple(self.transfers[start:])

    # -- helpers ------------------------------------------------------------------
    def _pay(self, payer: int, payee: int, points: int, reason: str, i: int) -> None:
        if points and payer != payee:
            self.transfers.append(Transfer(payer, payee, points, reason, i))

    def _merge(self, start: int) -> None:
        new = self.transfers[start:]
        if len({(t.payer, t.payee, t.reason) for t in new}) == len(new):
            return
        merged: dict[tuple, int] = {}
        for t in self.transfers[start:]:
            key = (t.payer, t.payee, t.reason, t.event)
            merged[key] = merged.get(key, 0) + t.points
        self.transfers[start:] = [Transfer(p, q, pts, r, e) for (p, q, r, e), pts in merged.items() if pts]

    def _require_active(self, seat: int, i: int, role: str) -> None:
        if seat in self.won:
            raise EventError("seat_not_in_round", i, f"{role} seat {seat} has already won")
        if seat in self.left:
            raise EventError("seat_not_in_round", i, f"{role} seat {seat} has left the round")

    def _check_copies(self, i: int, tiles: Iterable[int]) -> None:
        """No tile among ``tiles`` (those the event added) appears more than 4 times in the round.

        Per seat, the melds logged by peng/kong events count, or else those of its hand (§6).
        """
        melds = [self.melds[s] if self.logged[s] else self.hand_melds[s] for s in (0, 1, 2, 3)]
        over = {}
        for t in tiles:
            total = self.concealed[t] + melds[0][t] + melds[1][t] + melds[2][t] + melds[3][t]
            if total > 4:
                over[t] = total
        if over:
            raise EventError("too_many_copies", i, "more than 4 copies across the round: "
                             + ", ".join(f"{TILES[t]} ({n})" for t, n in over.items()))

    def _unit(self, units: int) -> int:
        return units * self.rules.base

    # -- peng / kong -------------------------------------------------------------
    def _peng(self, ev: Peng, i: int) -> None:
        self._require_active(ev.seat, i, "peng")
        self._require_active(ev.from_, i, "discarding")
        if ev.from_ == ev.seat:
            raise EventError("self_discard", i, f"seat {ev.seat} cannot peng its own discard")
        self.melds[ev.seat][ev.tile.index] += 3
        self.logged[ev.seat] = True
        self.pengs[ev.seat].append(ev.tile.index)
        self.pengs_logged[ev.seat] = self.any_meld = True
        self._check_copies(i, (ev.tile.index,))
        self.last = ("peng", ev.seat, None, ev.tile.index, ev.from_, i)

    def _kong(self, ev: Kong, i: int) -> None:
        seat, t = ev.seat, ev.tile.index
        self._require_active(seat, i, "kong")
        others = [s for s in self.active if s != seat]
        if ev.kind == "direct":
            self._require_active(ev.from_, i, "discarding")
            if ev.from_ == seat:
                raise EventError("self_discard", i, f"seat {seat} cannot kong its own discard")
            self.melds[seat][t] += 4
            payers = [(ev.from_, self._unit(self.rules.direct_kong))]
        elif ev.kind == "added":
            if t in self.pengs[seat]:
                self.pengs[seat].remove(t)
                self.melds[seat][t] += 1
            elif self.pengs_logged[seat]:
                raise EventError("no_peng", i, f"seat {seat} logs its pengs but has no peng of {ev.tile} to add to")
            else:
                self.melds[seat][t] += 4
            payers = [(s, self._unit(self.rules.added_kong)) for s in others]
        else:
            self.melds[seat][t] += 4
            payers = [(s, self._unit(self.rules.concealed_kong)) for s in others]
        self.logged[seat] = True
        self.any_meld = True
        self._check_copies(i, (t,))
        reason = "kong_" + ev.kind
        paid = []
        for payer, pts in payers:
            if pts:
                self._pay(payer, seat, pts, reason, i)
                paid.append([payer, pts])
        self.kongs[i] = [seat, ev.kind, t, ev.from_, paid, False, False]
        self.last = ("kong", seat, ev.kind, t, ev.from_, i)

    # -- hu -----------------------------------------------------------------------
    def _hu(self, ev: Hu, i: int) -> None:
        seats = [w.seat for w in ev.winners]
        if len(set(seats)) != len(seats):
            raise EventError("duplicate_winner", i, "a seat is listed twice among the winners")
        for s in seats:
            self._require_active(s, i, "winning")
        if ev.from_ is not None:
            self._require_active(ev.from_, i, "discarding")
            if ev.from_ in seats:
                raise EventError("self_discard", i, f"the discarder {ev.from_} cannot be a winner")
        elif len(seats) != 1:
            raise EventError("self_draw_one_winner", i, "a self-drawn hu has exactly one winner")
        sit = self._check_hu_flags(ev, i)
        kong = self.kongs[self.last[5]] if self.last and self.last[0] == "kong" else None
        ctx = context(self.rules)
        feeder_pays = (
            ev.self_drawn and ev.after_kong and self.rules.dianganghua == "discard"
            and kong is not None and kong[1] == "direct"
        )
        if feeder_pays:
            ctx = ctx._replace(zimo_fan=False)
        # value every winner first: nothing moves unless all are valid
        points = [self._winner_points(w, ev, sit, ctx, i) for w in ev.winners]
        self._count_hu_tiles(ev, i)
        if ev.robbing_kong:
            self._void_kong(kong, i)
        for w, pts in zip(ev.winners, points):
            if ev.from_ is not None:
                self._pay(ev.from_, w.seat, pts, "dianpao", i)
            elif feeder_pays:
                self._pay(kong[3], w.seat, pts, "dianpao", i)
            else:
                extra = self._unit(1) if self.rules.zimo == "base" else 0
                for s in self.active:
                    if s != w.seat:
                        self._pay(s, w.seat, pts + extra, "zimo", i)
        if ev.after_kong and ev.from_ is not None:
            collected = sum(p for _, p in kong[4])
            for w in ev.winners:
                self._pay(ev.from_, w.seat, collected, "transfer", i)
            kong[6] = True
        if self.first_win is None:
            self.first_win = (seats, ev.from_)
        self.won.extend(seats)
        if self.rules.mode == "normal" or len(self.won) >= 3:
            self.ended = True
        self.last = ("hu", seats[0], None, ev.tile.index, ev.from_, i)

    def _check_hu_flags(self, ev: Hu, i: int) -> tuple:
        """The situation flags of the win, after checking they can hold together here."""
        flags = (ev.self_drawn, ev.after_kong, ev.robbing_kong, ev.last_tile, ev.heavenly, ev.earthly)
        if ev.robbing_kong or ev.heavenly or ev.earthly:  # the only flags that can clash
            try:
                win = Win(ev.tile, *flags)
            except RuleError as exc:
                raise EventError("contradictory_flags", i, str(exc)) from None
            problem = win.contradiction(self.rules.fan_table)
            if problem:
                raise EventError("contradictory_flags", i, problem)
        last = self.last
        if ev.robbing_kong:
            if not (last and last[0] == "kong" and last[2] == "added" and last[1] == ev.from_
                    and last[3] == ev.tile.index):
                raise EventError("kong_required", i,
                                 f"robbing_kong needs seat {ev.from_}'s added kong of {ev.tile} just before")
        elif ev.after_kong:
            actor = ev.winners[0].seat if ev.self_drawn else ev.from_
            if not (last and last[0] == "kong" and last[1] == actor):
                what = "杠上花 needs the winner's" if ev.self_drawn else "杠上炮 needs the discarder's"
                raise EventError("kong_required", i, f"{what} kong (seat {actor}) just before")
        if ev.heavenly:
            if ev.winners[0].seat != self.dealer:
                raise EventError("contradictory_flags", i, "heavenly is the dealer's win")
            if self.n != 0:
                raise EventError("contradictory_flags", i, "heavenly must be the round's first event")
        if ev.earthly:
            if any(w.seat == self.dealer for w in ev.winners):
                raise EventError("contradictory_flags", i, "earthly is a non-dealer's win")
            if self.any_meld:
                raise EventError("contradictory_flags", i, "earthly comes before any peng or kong")
            if ev.from_ is not None and ev.from_ != self.dealer:
                raise EventError("contradictory_flags", i, "earthly by discard is on the dealer's first discard")
        return flags

    def _winner_points(self, w, ev: Hu, sit, ctx: _Ctx, i: int) -> int:
        if w.hand is None:
            return points_of(w.fan, ctx)[2]
        hand: Hand = w.hand
        probs = hand_problems(hand, sizes=(14,)) if hand.size != 14 or hand.max_held > 4 else None
        if probs:
            raise EventError("bad_hand" if probs[0].code == "bad_size" else "too_many_copies", i,
                             f"seat {w.seat}'s hand: {probs[0].message}")
        if not hand.counts[ev.tile.index]:
            raise EventError("win_tile_not_in_hand", i,
                             f"the hu tile {ev.tile} is not among seat {w.seat}'s concealed tiles {str(hand)!r}")
        if ev.after_kong and ev.self_drawn and not any(m.type == "kong" for m in hand.melds):
            raise EventError("contradictory_flags", i, f"seat {w.seat}: {GANGSHANGHUA_NEEDS_KONG}")
        if (ev.heavenly or ev.earthly) and hand.melds:
            raise EventError("contradictory_flags", i, "heavenly/earthly is a win with no melds")
        problem = suit_problem(hand.suit_mask, hand.void)
        if problem:
            raise EventError("not_a_win", i, f"seat {w.seat} cannot win: {problem}")
        evn = evaluate(*hand.keys, len(hand.tiles), meld_info(hand.melds), sit, ctx)
        if evn is None:
            raise EventError("not_a_win", i, f"seat {w.seat}'s hand {str(hand)!r} is not a winning shape")
        return points_of(evn.raw_fan, ctx)[2]

    def _count_hu_tiles(self, ev: Hu, i: int) -> None:
        first = True
        touched: list[int] = []
        for w in ev.winners:
            if w.hand is None:
                continue
            touched.extend(self._add_hand(w.seat, w.hand))
            if ev.from_ is not None and not first:
                self.concealed[ev.tile.index] -= 1  # the discard counts once
            first = False
        if ev.robbing_kong:
            self.melds[ev.from_][ev.tile.index] -= 1   # the robbed kong counts as a peng
        self._check_copies(i, touched)

    def _add_hand(self, seat: int, hand: Hand) -> list[int]:
        """Count a given hand's tiles in the round; the tile indices it touched."""
        touched = [t.index for t in hand.tiles]
        for t in touched:
            self.concealed[t] += 1
        hm = [0] * 27
        for m in hand.melds:
            hm[m.tile.index] += m.copies
            touched.append(m.tile.index)
        self.hand_melds[seat] = hm  # (replacing a seat's earlier hand only lowers counts)
        return touched

    def _void_kong(self, kong: list, i: int) -> None:
        seat = kong[0]
        for payer, pts in kong[4]:
            self._pay(seat, payer, pts, "kong_void", i)
        kong[5] = True
        self.pengs[seat].append(kong[2])

    # -- draw and escape ------------------------------------------------------------
    def _statuses(self, reports: Iterable[SeatReport], i: int, seats: list[int]) -> dict[int, tuple[str, int]]:
        """seat → (status, dajiao points) for the listed seats; hands are evaluated."""
        ctx = context(self.rules)
        pigs = self.rules.huazhu != 0  # §7.2: with huazhu = 0 there is no 花猪, only seats not ting
        out: dict[int, tuple[str, int]] = {}
        touched: list[int] = []
        for rep in reports:
            if rep.seat not in seats:
                raise EventError("bad_seats", i, f"seat {rep.seat} is not in the round")
            if rep.seat in out:
                raise EventError("bad_seats", i, f"seat {rep.seat} is listed twice")
            if rep.hand is not None:
                h = rep.hand
                probs = hand_problems(h, sizes=(13,)) if h.size != 13 or h.max_held > 4 else None
                if probs:
                    raise EventError("bad_hand" if probs[0].code == "bad_size" else "too_many_copies", i,
                                     f"seat {rep.seat}'s hand: {probs[0].message}")
                touched.extend(self._add_hand(rep.seat, h))
                if h.huazhu:
                    out[rep.seat] = ("huazhu" if pigs else "not_ting", 0)
                else:
                    best = dajiao_points(h, ctx, self.rules.dajiao)
                    out[rep.seat] = ("not_ting", 0) if best is None else ("ting", best)
            elif rep.status == "ting":
                out[rep.seat] = ("ting", points_of(rep.dajiao_fan, ctx)[2])
            else:
                out[rep.seat] = (rep.status if pigs or rep.status != "huazhu" else "not_ting", 0)
        self._check_copies(i, touched)
        return out

    def _draw(self, ev: Draw, i: int) -> None:
        active = self.active
        status = self._statuses(ev.seats, i, active)
        missing = [s for s in active if s not in status]
        if missing:
            raise EventError("bad_seats", i, f"a draw lists every seat still in the round; missing {missing}")
        # 1. 退税
        for s in active:
            if status[s][0] != "ting":
                self._refund(s, i)
        # 2. 查花猪
        pigs = [s for s in active if status[s][0] == "huazhu"]
        if pigs:
            payees = [s for s in active if status[s][0] != "huazhu"]
            if self.rules.huazhu_pays_winners:
                payees += [s for s in self.won if s not in self.left]
            for pig in pigs:
                for s in payees:
                    self._pay(pig, s, self._unit(self.rules.huazhu), "huazhu", i)
        # 3. 查大叫
        tings = [s for s in active if status[s][0] == "ting"]
        for s in active:
            if status[s][0] == "not_ting":
                for t in tings:
                    self._pay(s, t, status[t][1], "dajiao", i)
        self.ended = True
        self.last = ("draw", None, None, None, None, i)

    def _refund(self, seat: int, i: int) -> None:
        for kong in self.kongs.values():
            if kong[0] != seat or kong[5] or kong[6]:
                continue
            for payer, pts in kong[4]:
                if payer not in self.left:
                    self._pay(seat, payer, pts, "refund", i)

    def _escape(self, ev: Escape, i: int) -> None:
        seat = ev.seat
        if seat in self.left:
            raise EventError("seat_not_in_round", i, f"seat {seat} has already left")
        if seat in self.won:
            self._winner_leaves(seat, i)
            return
        others = [s for s in self.active if s != seat]
        reports = [r for r in ev.seats if r.seat != seat]
        status = self._statuses(reports, i, others)
        charge = [(s, self._unit(self.rules.escape)) for s in others]
        if ev.last_four:
            dajiao = [(s, status[s][1]) for s in others if s in status and status[s][0] == "ting"]
            if sum(p for _, p in dajiao) > sum(p for _, p in charge):
                charge = dajiao
        for s, pts in charge:
            self._pay(seat, s, pts, "escape", i)
        self.left.append(seat)
        self.ended = True
        self.last = ("escape", seat, None, None, None, i)

    def _winner_leaves(self, seat: int, i: int) -> None:
        if self.rules.winner_leaves == "forfeit":
            for t in list(self.transfers):
                if t.payee != seat or t.payer in self.left or t.reason == "kong_void":
                    continue
                kong = self.kongs.get(t.event) if t.reason.startswith("kong_") else None
                if kong is not None and kong[5]:
                    continue  # a robbed kong's payments were already given back (kong_void)
                self._pay(seat, t.payer, t.points, "forfeit", i)
        self.left.append(seat)
        self.last = ("escape", seat, None, None, None, i)


def settle(events: Iterable["Mapping[str, Any] | Event"], *, dealer: int,
           ruleset: "Ruleset | str | Mapping | None" = None,
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
    for ev in events:
        r.step(ev)
    return r.settlement()
