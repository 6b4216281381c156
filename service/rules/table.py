"""A table: a physical game over many rounds, as a fold over its log (docs/rules.md#s10, §12, §14).

The log is a list of records, each ``{"seq": n, "type": ..., ...}`` with
``seq`` = its 1-based position.  Record types: the round events of docs/api.md
(``peng``, ``kong``, ``hu``, ``draw``, ``escape``, ``penalty``), ``round_start``
(``dealer``, ``voids``), ``round_end``, ``buy_in`` (``seat``, ``coins``: at
a table with stakes, between rounds), ``adjust`` (``transfers``, ``note``:
between rounds, docs/rules.md#s15.5), ``correction`` (``round``, ``events``,
``dealer``, ``voids``, ``note``: a round rewritten, §15.2; the fold applies it
with :meth:`TableState.correct`) and ``void`` (``target``: the seq of an
earlier record, which then counts as never having happened).

:class:`TableState` is the state after the first ``version`` records.  It is
plain data (:meth:`TableState.to_dict`), so a store keeps it beside the log
and appends without refolding; :func:`fold` rebuilds it from the log, which is
the definition the stored state must always equal.

The readings of a table's rounds, records and voids are docs/rules.md#s10's (and #s15's).

Corrections (docs/rules.md#s15.2 has the readings; code-level ones here):

* A round keeps an event's transfers and kongs by a *key*: a record's own seq,
  or for the i-th event of the correction recorded as seq c the negative
  :func:`correction_key` ``(c, i)``, unique in the round; tables show
  :func:`seq_of` it, so a correction's transfers name c.
* The state lists the live corrections (``corrections``: ``[seq, round]``);
  a correction of an earlier round needs more than the state: the summaries
  of the ended rounds from it on, and whether it and the round after it named
  their dealers and with which voids (:class:`History`: a fold keeps it as it
  goes, a store reads it).  A fold that starts after that round (from a
  snapshot) raises :class:`MissingHistory` and is started again from further
  back; a refold for a void starts early enough (:func:`refold_start`).
* An ``adjust`` moves ``base`` (so the balances are ``base`` plus the latest
  round's deltas as ever) and ``adjusted``; each round's summary keeps the
  adjusted points before it started, so a refold rebuilds the balances before
  a round from the summaries.

Facts (for the evening's summary, :mod:`service.rules.summary`): the fold keeps
what each seat did in the latest round (:class:`RoundFacts`: wins, 自摸, 点炮,
kongs, 花猪 and 大叫 paid, escapes, its biggest win) as it applies each record,
in the state (``round_facts``) while the round is played and in the round's
summary (``facts``) once it has ended; so a summary needs the state and the
ended rounds' summaries, never the log.  (``facts`` is kept for the summary:
it is not part of a round as docs/api.md shows it.)

Stakes (§12; the coin settlement itself is :mod:`service.rules.stakes`):

* A table created with stakes has ``coins`` (each seat's bankroll now).
  Whenever a round ends (by its events, an escape or ``round_end``) its coins
  are settled from its deltas and the coins at its start, and its summary
  carries ``bankrolls`` (the coins at its start: with its events, what
  :func:`~service.rules.stakes.settle_coins` needs to give its coins back),
  ``coins_delta`` and ``fees``; the latest round shows them too (``null``
  while it is played).
* ``buy_in`` adds ``coins`` (an integer 1-10^15) to ``seat``'s bankroll
  whenever no round is being played: before the first round, after a round
  has ended, as often as wanted.  During a round it is ``round_in_progress``;
  at a table without stakes ``no_stakes``; past 10^15 coins at the table in
  all ``too_many_coins``.  A malformed one is ``bad_event`` (an unknown
  member, a seat or coins that are not integers), before anything else.
* Coins are the fold of the log like everything else: a void that reopens a
  round (of its last event) undoes its coin settlement, a void of a
  ``buy_in`` removes it.  Reopening a round after which a seat bought in is
  ``void_conflict`` (the buy-in would fall inside the round): void the buy-in
  first.

>>> st = TableState.new(["A", "B", "C", "D"], "xuezhan", dealer=1)
>>> st, out = st.apply({"type": "round_start"}, seq=1)
>>> st, out = st.apply({"type": "kong", "seat": 2, "kind": "concealed", "tile": "7s"}, seq=2)
>>> st.balances, st.version, [t.as_dict()["reason"] for t in out]
([-12, -12, 36, -12], 2, ['kong_concealed', 'kong_concealed', 'kong_concealed'])

Three players for coins: seat 2 escapes owing 96 points to each of the others
(19,200 coins at 100 a point) but holds 300: the others share it, then pay the fee.

>>> st = TableState.new(["A", "B", "C"], "sanren-liangfang",
...                     stakes={"coin_per_point": 100, "fee": 50, "bankrolls": [1000, 1000, 300]})
>>> st, _ = st.apply({"type": "round_start"}, seq=1)
>>> st, _ = st.apply({"type": "escape", "seat": 2}, seq=2)
>>> st.balances, st.coins, st.round_view()["coins_delta"], st.round_view()["fees"]
([96, 96, -192], [1100, 1100, 0], [100, 100, -300], [50, 50, 0])
>>> st, _ = st.apply({"type": "buy_in", "seat": 2, "coins": 500}, seq=3)
>>> st.coins
[1100, 1100, 500]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from .codes import Code, Reason
from .errors import EventError, RuleError
from .events import EVENT_TYPES, MAX_SUIT_CHARS, parse_event
from .ruleset import Ruleset
from .settle import Round, Scored, Transfer
from .stakes import MAX_COINS, Stakes, settle_coins
from .tiles import parse_suit

ROUND_EVENTS = EVENT_TYPES  # (the events of a round: docs/rules.md §6)
TABLE_EVENTS = ROUND_EVENTS + ("round_start", "round_end", "buy_in", "adjust")
BUY_IN_FIELDS = ("type", "seat", "coins")
ADJUST_FIELDS = ("type", "transfers", "note")
CORRECTION_FIELDS = ("type", "events", "dealer", "voids", "note")
COIN_FIELDS = ("bankrolls", "coins_delta", "fees")  # what stakes add to a round's summary
MAX_NOTE_CHARS = 500
"""The longest ``note`` of an adjust or a correction."""
MAX_ADJUST_TRANSFERS = 16
MAX_ADJUST_POINTS = 10**12
"""An adjust moves at most this many points in one of its transfers (far below 2^53: exact in every client)."""
MAX_CORRECTION_EVENTS = 1000
"""The most events a correction may give its round (below :data:`KEY_SPAN`)."""
KEY_SPAN = 1024


def correction_key(seq: int, index: int) -> int:
    """The key the round gives the ``index``-th event of the correction recorded as ``seq``: unique in the
    round (a negative number: every other event's key is its own seq), and :func:`seq_of` reads back.

    >>> correction_key(17, 0), seq_of(correction_key(17, 0)), index_of(correction_key(17, 3)), seq_of(17)
    (-17409, 17, 3, 17)
    """
    return -(seq * KEY_SPAN + index + 1)


def seq_of(key: int) -> int:
    """The seq of the record whose event has this key: the event's own, or its correction's."""
    return key if key > 0 else (-key - 1) // KEY_SPAN


def index_of(key: int) -> int | None:
    """The index of a correction's event within it (None: an event of its own record)."""
    return None if key > 0 else (-key - 1) % KEY_SPAN


def labelled(transfers: Iterable[Transfer]) -> list[dict]:
    """Transfers as a table shows them: each names the seq of the record that caused it."""
    return [{"from": t.payer, "to": t.payee, "points": t.points, "reason": t.reason, "event": seq_of(t.event)}
            for t in transfers]


FACT_COUNTS = ("wins", "zimo", "dianpao_paid", "kongs_direct", "kongs_added", "kongs_concealed",
               "huazhu_paid", "dajiao_paid", "escapes", "penalties_paid")
"""The per-seat counts of :class:`RoundFacts`, by their names in a round summary's ``facts``."""


class WinFact(NamedTuple):
    """One win of a seat: its ``hu`` record's ``seq``, its ``fan`` after the cap, its pattern ids
    (none for a win given as a bare fan) and the ``points`` its own payments (点炮 or 自摸) brought.

    (An immutable record; a NamedTuple, as :class:`RoundFacts`, because the fold makes many.)
    """

    seq: int
    fan: int
    patterns: tuple[str, ...]
    points: int

    def beats(self, other: WinFact | None) -> bool:
        """More points, or as many and more fan (so on a tie the earlier win stays the biggest)."""
        return other is None or (self.points, self.fan) > (other.points, other.fan)

    def to_dict(self) -> dict:
        return {"seq": self.seq, "fan": self.fan, "patterns": list(self.patterns), "points": self.points}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> WinFact:
        return cls(d["seq"], d["fan"], tuple(d["patterns"]), d["points"])


class RoundFacts(NamedTuple):
    """What each seat did in one round, for the evening's summary (:mod:`service.rules.summary`,
    which documents the readings): every member is one entry per seat (an immutable value).

    The fold keeps the latest round's (``TableState.facts``), updated by each record it applies
    (:meth:`after`: from the record and the transfers it caused), and writes them into the round's
    summary (``facts``) when it ends; so they are the fold of the log, voids included.

    >>> f = RoundFacts.empty(4).after({"type": "kong", "seat": 2, "kind": "concealed", "tile": "7s"}, 2, (), ())
    >>> f.kongs_concealed, f.to_dict()
    ((0, 0, 1, 0), {'kongs_concealed': [0, 0, 1, 0]})
    """

    wins: tuple[int, ...]
    zimo: tuple[int, ...]
    dianpao_paid: tuple[int, ...]
    kongs_direct: tuple[int, ...]
    kongs_added: tuple[int, ...]
    kongs_concealed: tuple[int, ...]
    huazhu_paid: tuple[int, ...]
    dajiao_paid: tuple[int, ...]
    escapes: tuple[int, ...]
    penalties_paid: tuple[int, ...]
    biggest_win: tuple[WinFact | None, ...]

    @classmethod
    def empty(cls, n: int) -> RoundFacts:
        zeros = (0,) * n
        return cls(*(zeros,) * len(FACT_COUNTS), (None,) * n)

    def after(self, record: Mapping[str, Any], seq: int, transfers: Iterable[Transfer],
              scored: Iterable[Scored]) -> RoundFacts:
        """The facts once ``record`` (a round event the round took as ``seq``) has caused
        ``transfers``; ``scored``: its winners as scored, for a ``hu``."""
        kind = record["type"]
        if kind == "peng":
            return self
        values = list(self)
        if kind == "kong":
            i = _KONGS[record["kind"]]
            values[i] = _plus(values[i], record["seat"], 1)
        elif kind == "hu":
            _hu_facts(values, record, seq, transfers, scored)
        elif kind == "escape":
            values[_ESCAPES] = _plus(values[_ESCAPES], record["seat"], 1)
        elif kind == "penalty":  # 诈胡 (a 相公 pays nothing)
            for t in transfers:
                values[_PENALTIES] = _plus(values[_PENALTIES], t.payer, t.points)
        else:  # a draw: 查花猪 and 查大叫 (an escape's charge is neither)
            for t in transfers:
                i = _PAID_AT_DRAW.get(t.reason)
                if i is not None:
                    values[i] = _plus(values[i], t.payer, t.points)
        return _record(RoundFacts, values)

    def to_dict(self) -> dict:
        """The JSON shape (a round summary's ``facts``): a member that is 0 (None) for every seat is left out."""
        out = {name: list(getattr(self, name)) for name in FACT_COUNTS if any(getattr(self, name))}
        if any(w is not None for w in self.biggest_win):
            out["biggest_win"] = [None if w is None else w.to_dict() for w in self.biggest_win]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, n: int) -> RoundFacts:
        """From :meth:`to_dict`'s shape; a member left out (all of them for None: a summary or a state
        stored before the facts were kept) is 0 (None) for every seat."""
        d = d or {}
        counts = [tuple(d[name]) if name in d else (0,) * n for name in FACT_COUNTS]
        best = d.get("biggest_win")
        return cls(*counts, (None,) * n if best is None else
                   tuple(None if w is None else WinFact.from_dict(w) for w in best))


_record = tuple.__new__
"""Builds a record (a NamedTuple) from all its fields without its Python-level ``__new__``: the fold's hot path."""
_FACT = {name: i for i, name in enumerate(RoundFacts._fields)}
_KONGS = {kind: _FACT["kongs_" + kind] for kind in ("direct", "added", "concealed")}
_ESCAPES = _FACT["escapes"]
_PENALTIES = _FACT["penalties_paid"]
_PAID_AT_DRAW = {Reason.HUAZHU.value: _FACT["huazhu_paid"], Reason.DAJIAO.value: _FACT["dajiao_paid"]}
_WIN_REASONS = (Reason.DIANPAO.value, Reason.ZIMO.value)


def _hu_facts(values: list, record: Mapping[str, Any], seq: int, transfers: Iterable[Transfer],
              scored: Iterable[Scored]) -> None:
    """:meth:`RoundFacts.after` of a ``hu``, on the list of its members ``values``."""
    frm = record.get("from")
    discarder = frm
    points: dict[int, int] = {}  # winner -> what its own payments brought
    for t in transfers:
        if t.reason in _WIN_REASONS:
            points[t.payee] = points.get(t.payee, 0) + t.points
            if frm is None and t.reason == _WIN_REASONS[0]:
                discarder = t.payer  # 点杠花 paid by the feeder alone (dianganghua = discard)
    wins, zimo, best = list(values[_FACT["wins"]]), list(values[_FACT["zimo"]]), list(values[_FACT["biggest_win"]])
    for w in scored:
        wins[w.seat] += 1
        if discarder is None:
            zimo[w.seat] += 1
        win = _record(WinFact, (seq, w.fan, w.patterns, points.get(w.seat, 0)))
        if win.beats(best[w.seat]):
            best[w.seat] = win
    values[_FACT["wins"]], values[_FACT["zimo"]], values[_FACT["biggest_win"]] = tuple(wins), tuple(zimo), tuple(best)
    if discarder is not None:
        values[_FACT["dianpao_paid"]] = _plus(values[_FACT["dianpao_paid"]], discarder, 1)
    if record.get("robbing_kong"):  # 抢杠胡: the robbed kong never stood
        values[_KONGS["added"]] = _plus(values[_KONGS["added"]], frm, -1)


def _plus(values: tuple[int, ...], seat: int, n: int) -> tuple[int, ...]:
    return values[:seat] + (values[seat] + n,) + values[seat + 1:]


class TableError(EventError):
    """A record the table cannot take; ``code`` is stable, ``event`` is its seq."""


class VoidConflict(TableError):
    pass


class BetweenRounds(TableError):
    """A record that may only come between rounds (an ``adjust``) posted while a round is played
    (``round_in_progress``): the table's state forbids it, so a store answers it as a conflict."""


class CorrectionError(TableError):
    """A correction's event that cannot happen: ``event`` is its index in the correction's list (the
    ``context`` and ``code`` are the rules' own)."""


class CorrectionConflict(TableError):
    """A correction after which a later round no longer holds (``correction_conflict``): ``round`` is
    that round's number, ``event`` the seq of its record that would break (its ``round_start``)."""

    def __init__(self, round_number: int, seq: int, message: str) -> None:
        super().__init__(Code.CORRECTION_CONFLICT, seq, message, round=round_number)
        self.round = round_number


class MissingHistory(LookupError):
    """A fold met a correction of a past round it knows too little of (a fold that started after that
    round's start, from a snapshot): fold again from further back."""


class RoundInfo(NamedTuple):
    """What a correction of an earlier round needs to know of a round besides its summary: whether its
    dealer was named (by its ``round_start`` or a correction), not taken from the round before, and its
    voids as they stand."""

    named: bool
    voids: tuple


@dataclass
class History:
    """What a fold (or a store, from what it read) knows of a table's rounds, by number: ``summaries`` of
    ended rounds as they stand, and each round's :class:`RoundInfo`.  A correction of round n needs
    round n's and round n + 1's infos and the summaries of the ended rounds from n on."""

    summaries: dict[int, dict] = field(default_factory=dict)
    info: dict[int, RoundInfo] = field(default_factory=dict)

    def started(self, number: int, record: Mapping[str, Any], voids: Iterable) -> None:
        self.info[number] = RoundInfo(record.get("dealer") is not None, tuple(voids))

    def corrected(self, number: int, record: Mapping[str, Any], voids: Iterable) -> None:
        was = self.info.get(number)
        named = record.get("dealer") is not None or (was is not None and was.named)
        self.info[number] = RoundInfo(named, tuple(voids))

    def need(self, first: int, last: int, info_last: int) -> None:
        """Raise :class:`MissingHistory` unless the summaries of rounds ``first``..``last`` and the infos
        of rounds ``first``..``info_last`` are known."""
        if any(n not in self.summaries for n in range(first, last + 1)) or \
                any(n not in self.info for n in range(first, info_last + 1)):
            raise MissingHistory(f"round {first}")


class TableSetupError(RuleError):
    """A table that cannot be set up: its players do not match its ruleset's seats (``bad_players``),
    or its first dealer is no seat (``seat_out_of_range``)."""

    code = Code.BAD_PLAYERS

    def __init__(self, message: str, *, code: Code = Code.BAD_PLAYERS, **context: object) -> None:
        super().__init__(message, **context)
        self.code = code


@dataclass
class TableState:
    """The state of a table after ``version`` log records (mutable only inside :meth:`step`).

    Only what the log cannot give back cheaply is kept: the latest round (its
    own fold) with its number, first seq and how it ended, the balances before
    it, and the default dealer as of the last ended round.  Balances and the
    number of ended rounds are derived from those.
    """

    players: list[str]
    ruleset: Ruleset
    first_dealer: int                 # the table's first dealer (a fold starts from it)
    dealer: int = -1                  # the dealer of the next round_start that names none (§10)
    version: int = 0
    round_meta: dict | None = None    # number, start (seq of its round_start), ended_by
    round: Round | None = None
    voided: list[int] = field(default_factory=list)
    base: list[int] = field(default_factory=lambda: [0, 0, 0, 0])  # balances before the latest round (one per seat)
    stakes: Stakes | None = None      # §12: None for a table that plays for points only
    coins: list[int] | None = None    # with stakes: each seat's bankroll now
    facts: RoundFacts | None = None   # what each seat did in the latest round (None: nothing yet)
    adjusted: list[int] | None = None  # each seat's net points of every adjust so far (§15.5; None: none)
    corrections: list[list[int]] = field(default_factory=list)  # [seq, round] of each live correction (§15.2)

    def __post_init__(self) -> None:
        if self.facts is None:
            self.facts = RoundFacts.empty(len(self.players))
        if self.adjusted is None:
            self.adjusted = [0] * len(self.players)

    @classmethod
    def new(cls, players: list[str], ruleset: Ruleset | str | Mapping | None, dealer: int = 0,
            stakes: Stakes | Mapping | None = None) -> TableState:
        """A table before its first record: ``players`` names one seat each, as many as the ruleset seats.

        ``stakes`` (§12, optional): ``{"coin_per_point", "fee", "bankrolls"}``, one bankroll per seat.
        """
        rules = Ruleset.from_spec(ruleset)
        n = rules.players
        if len(players) != n:
            raise TableSetupError(
                f"this ruleset seats {n} players (players = {n}); got {len(players)} name(s)", text=str(len(players))
            )
        if isinstance(dealer, bool) or not isinstance(dealer, int) or not 0 <= dealer < n:
            raise TableSetupError(f"dealer {dealer!r} is not a seat 0-{n - 1}", text=str(dealer),
                                  code=Code.SEAT_OUT_OF_RANGE)
        if stakes is None:
            return cls(list(players), rules, dealer, dealer, base=[0] * n)
        stakes = Stakes.from_spec(stakes, n)
        return cls(list(players), rules, dealer, dealer, base=[0] * n, stakes=stakes, coins=list(stakes.bankrolls))

    # -- derived ----------------------------------------------------------------
    @property
    def playing(self) -> bool:
        return self.round is not None and not self.round.ended

    @property
    def balances(self) -> list[int]:
        if self.round is None:
            return list(self.base)
        return [b + d for b, d in zip(self.base, self.round.deltas)]

    @property
    def rounds_done(self) -> int:
        """Rounds that have ended (their summaries live beside the log)."""
        if self.round_meta is None:
            return 0
        return self.round_meta["number"] - (1 if self.playing else 0)

    # -- views ------------------------------------------------------------------
    def round_view(self) -> dict | None:
        """The latest round as docs/api.md shows it."""
        if self.round_meta is None or self.round is None:
            return None
        m, r = self.round_meta, self.round
        return {
            "number": m["number"],
            "dealer": r.dealer,
            "status": "playing" if self.playing else "ended",
            "voids": list(r.voids),
            "won": list(r.won),
            "left": list(r.left),
            "deltas": list(r.deltas),
            "ended_by": m["ended_by"],
            "next_dealer": None if self.playing else r.dealer_after(),
            "events": r.n,
        } | ({k: m[k] for k in COIN_FIELDS} if self.stakes is not None else {})

    def round_summary(self, last_seq: int | None = None) -> dict:
        """The summary of the latest round once it has ended (kept in the rounds list); ``last_seq``: the
        seq that ended it (default: the version, the record just applied).

        Besides the round as the table view lists it, a summary keeps ``facts`` (the evening summary's),
        and, only when there are any, ``adjusted`` (each seat's net points of the adjusts recorded before
        the round started, §15.5): what a refold from the round after it starts from.
        """
        view = self.round_view()
        assert view is not None
        m = self.round_meta
        keys = ("number", "dealer", "deltas", "won", "left", "ended_by", "next_dealer")
        out = {k: view[k] for k in keys} | {
            "first_seq": m["start"],
            "last_seq": self.version if last_seq is None else last_seq,
        } | ({k: view[k] for k in COIN_FIELDS} if self.stakes is not None else {}) | {
            "facts": self.facts.to_dict(),
        }
        if m.get("adjusted"):
            out["adjusted"] = list(m["adjusted"])
        return out

    # -- persistence ---------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "players": self.players, "ruleset": self.ruleset.as_dict(), "first_dealer": self.first_dealer,
            "dealer": self.dealer, "version": self.version, "round_meta": self.round_meta,
            "round": None if self.round is None else self.round.to_dict(),
            "voided": self.voided, "base": self.base,
            "stakes": None if self.stakes is None else self.stakes.as_dict(), "coins": self.coins,
            "round_facts": self.facts.to_dict(),
        } | ({"adjusted": self.adjusted} if any(self.adjusted) else {}) | (
            {"corrections": self.corrections} if self.corrections else {})

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TableState:
        return cls(
            players=list(d["players"]), ruleset=Ruleset.from_dict(d["ruleset"]),
            first_dealer=d["first_dealer"], dealer=d["dealer"], version=d["version"],
            round_meta=None if d["round_meta"] is None else dict(d["round_meta"]),
            round=None if d["round"] is None else Round.from_dict(d["round"]),
            voided=list(d["voided"]), base=list(d["base"]),
            stakes=None if d["stakes"] is None else Stakes.from_spec(d["stakes"], len(d["players"])),
            coins=None if d["coins"] is None else list(d["coins"]),
            # (states stored before the facts were kept have none: a round in play then counts
            # only its later records, until a refold)
            facts=RoundFacts.from_dict(d.get("round_facts"), len(d["players"])),
            adjusted=list(d["adjusted"]) if "adjusted" in d else None,
            corrections=[list(c) for c in d.get("corrections", ())],
        )

    def copy(self) -> TableState:
        return TableState.from_dict(self.to_dict())

    # -- applying records ---------------------------------------------------------------
    def apply(self, record: Mapping[str, Any], seq: int) -> tuple[TableState, tuple[Transfer, ...]]:
        """A new state with ``record`` (an event body) applied as ``seq``; self is unchanged."""
        new = self.copy()
        out = new.step(record, seq)
        return new, out

    def step(self, record: Mapping[str, Any], seq: int) -> tuple[Transfer, ...]:
        if not isinstance(record, Mapping):
            raise TableError(Code.BAD_EVENT, seq, f"an event is an object, got {type(record).__name__}",
                             field="_schema")
        kind = record.get("type")
        if kind == "round_start":
            out: tuple[Transfer, ...] = ()
            self._round_start(record, seq)
        elif kind == "round_end":
            out = ()
            self._round_end(record, seq)
        elif kind == "buy_in":
            out = ()
            self._buy_in(record, seq)
        elif kind == "adjust":
            out = self._adjust(record, seq)
        elif kind in ROUND_EVENTS:
            out = self._round_event(record, seq)
        elif kind == "correction":
            raise TableError(Code.BAD_EVENT, seq, "a correction is not an event of the round: it rewrites a round "
                             "(docs/api.md, mending the record)", field="type")
        else:
            raise TableError(Code.BAD_EVENT, seq, f"unknown event type {kind!r} (one of {', '.join(TABLE_EVENTS)})",
                             field="type")
        self.version = seq
        return out

    def _round_start(self, record: Mapping[str, Any], seq: int) -> None:
        _no_unknown(record, ("type", "dealer", "voids"), seq)
        dealer, voids = self._dealer_and_voids(record, seq, self.dealer, None)
        if self.playing:  # (a malformed round_start is told so first)
            raise TableError(Code.ROUND_IN_PROGRESS, seq,
                             f"round {self.round_meta['number']} is still being played; post round_end first")
        number = self.rounds_done + 1
        self.base = self.balances
        self.round = Round(self.ruleset, dealer, voids)
        self.facts = RoundFacts.empty(self.ruleset.players)
        self.round_meta = {"number": number, "start": seq, "ended_by": None}
        if self.stakes is not None:
            self.round_meta |= {"bankrolls": list(self.coins), "coins_delta": None, "fees": None}
        if any(self.adjusted):
            self.round_meta["adjusted"] = list(self.adjusted)

    def _dealer_and_voids(self, record: Mapping[str, Any], seq: int, dealer: int,
                          voids: list | None) -> tuple[int, list]:
        """A round_start's (or a correction's) ``dealer`` and ``voids``, checked; those not given (or null)
        are ``dealer`` and ``voids`` (None: no 定缺)."""
        n = self.ruleset.players
        if record.get("dealer") is not None:
            dealer = record["dealer"]
        if isinstance(dealer, bool) or not isinstance(dealer, int):
            raise TableError(Code.BAD_EVENT, seq, f"dealer {dealer!r} is not a seat 0-{n - 1}", field="dealer")
        if not 0 <= dealer < n:
            raise TableError(Code.SEAT_OUT_OF_RANGE, seq, f"dealer {dealer!r} is not a seat 0-{n - 1}",
                             field="dealer")
        if record.get("voids") is not None:
            voids = record["voids"]
        if voids is None:
            voids = [None] * n
        if not isinstance(voids, list) or len(voids) != n:
            raise TableError(Code.BAD_EVENT, seq, f"voids lists the {n} seats' void suits (or null)", field="voids")
        voids = list(voids)  # (the record itself is kept as given)
        for i, v in enumerate(voids):
            if v is not None and (not isinstance(v, str) or len(v) > MAX_SUIT_CHARS):
                raise TableError(Code.BAD_EVENT, seq, f"voids: a suit such as 's' (or null); got {v!r}",
                                 field=f"voids.{i}")
            try:
                voids[i] = None if v is None else parse_suit(v)
            except RuleError as exc:
                raise TableError(Code.BAD_EVENT, seq, f"voids: {exc}", field=f"voids.{i}") from None
        if n == 3 and any(v is not None for v in voids):
            raise TableError(Code.VOID_NOT_ALLOWED, seq,
                             "a three-player room (三人两房) has no 定缺: voids must be null", field="voids")
        return dealer, voids

    def _round_end(self, record: Mapping[str, Any], seq: int) -> None:
        _no_unknown(record, ("type",), seq)
        if self.round_meta is None:
            raise TableError(Code.NO_ROUND, seq, "no round has started")
        if not self.playing:
            raise TableError(Code.ROUND_ENDED, seq, f"round {self.round_meta['number']} has already ended")
        self.round.ended = True
        self._close("round_end")

    def _close(self, ended_by: str) -> None:
        self.round_meta["ended_by"] = ended_by
        self.dealer = self.round.dealer_after()
        if self.stakes is not None:  # §12: the round's coins, from its deltas and the coins at its start
            coins = settle_coins(self.round.deltas, replace(self.stakes, bankrolls=tuple(self.coins)))
            self.coins = list(coins.coins)
            self.round_meta |= {"coins_delta": list(coins.coins_delta), "fees": list(coins.fees)}

    def _buy_in(self, record: Mapping[str, Any], seq: int) -> None:
        _no_unknown(record, BUY_IN_FIELDS, seq)
        n = self.ruleset.players
        seat, coins = record.get("seat"), record.get("coins")
        if isinstance(seat, bool) or not isinstance(seat, int):
            raise TableError(Code.BAD_EVENT, seq, f"a buy_in names its seat 0-{n - 1}, got {seat!r}", field="seat")
        if not 0 <= seat < n:
            raise TableError(Code.SEAT_OUT_OF_RANGE, seq, f"seat {seat} is not a seat 0-{n - 1}", field="seat")
        if isinstance(coins, bool) or not isinstance(coins, int) or not 1 <= coins <= MAX_COINS:
            raise TableError(Code.BAD_EVENT, seq, f"a buy_in adds coins: an integer 1-{MAX_COINS}, got {coins!r}",
                             field="coins")
        if self.stakes is None:
            raise TableError(Code.NO_STAKES, seq, "this table plays without stakes: there are no coins to buy")
        if self.playing:
            raise TableError(Code.ROUND_IN_PROGRESS, seq,
                             f"round {self.round_meta['number']} is being played; buy in between rounds")
        if sum(self.coins) + coins > MAX_COINS:
            raise TableError(Code.TOO_MANY_COINS, seq,
                             f"the table would hold {sum(self.coins) + coins} coins, more than {MAX_COINS}",
                             field="coins")
        self.coins[seat] += coins

    def _adjust(self, record: Mapping[str, Any], seq: int) -> tuple[Transfer, ...]:
        """§15.5: points moved outside the rules, between rounds only (``BetweenRounds`` during one):
        counted in the balances (through ``base``, the balances less the latest round's deltas) and in
        ``adjusted``, never in a round's deltas; coins are untouched (§12 settles them from deltas)."""
        _no_unknown(record, ADJUST_FIELDS, seq)
        n = self.ruleset.players
        items = record.get("transfers")
        if not isinstance(items, list) or not 1 <= len(items) <= MAX_ADJUST_TRANSFERS:
            raise TableError(Code.BAD_EVENT, seq, f"an adjust lists 1-{MAX_ADJUST_TRANSFERS} transfers "
                             "{from, to, points}", field="transfers")
        out = []
        for i, item in enumerate(items):
            path = f"transfers.{i}"
            if not isinstance(item, Mapping) or set(item) != {"from", "to", "points"}:
                raise TableError(Code.BAD_EVENT, seq, "a transfer of an adjust is {from, to, points}", field=path)
            for name in ("from", "to"):
                seat = item[name]
                if isinstance(seat, bool) or not isinstance(seat, int):
                    raise TableError(Code.BAD_EVENT, seq, f"{name!r} must be a seat 0-{n - 1}; got {seat!r}",
                                     field=f"{path}.{name}")
                if not 0 <= seat < n:
                    raise TableError(Code.SEAT_OUT_OF_RANGE, seq, f"seat {seat} is not a seat 0-{n - 1}",
                                     field=f"{path}.{name}")
            points = item["points"]
            if isinstance(points, bool) or not isinstance(points, int) or not 1 <= points <= MAX_ADJUST_POINTS:
                raise TableError(Code.BAD_EVENT, seq, f"points: an integer 1-{MAX_ADJUST_POINTS}; got {points!r}",
                                 field=f"{path}.points")
            if item["from"] == item["to"]:
                raise TableError(Code.SELF_DISCARD, seq, f"seat {item['from']} cannot pay itself", field=path)
            out.append(Transfer(item["from"], item["to"], points, Reason.ADJUST.value, seq))
        _check_note(record, seq)
        if self.playing:
            raise BetweenRounds(Code.ROUND_IN_PROGRESS, seq, f"round {self.round_meta['number']} is being played: "
                                "adjust between rounds")
        for t in out:
            self.base[t.payer] -= t.points
            self.base[t.payee] += t.points
            self.adjusted[t.payer] -= t.points
            self.adjusted[t.payee] += t.points
        return tuple(out)

    def _round_event(self, record: Mapping[str, Any], seq: int) -> tuple[Transfer, ...]:
        if not self.playing:
            parse_event(record, seq, players=self.ruleset.players)  # a malformed event is told so first
        if self.round_meta is None:
            raise TableError(Code.NO_ROUND, seq, "post a round_start before the round's events")
        if not self.playing:
            raise TableError(Code.ROUND_ENDED, seq,
                             f"round {self.round_meta['number']} has ended; post a round_start for the next")
        out = self.round.step(record, seq)
        self.facts = self.facts.after(record, seq, out, self.round.scored if record["type"] == "hu" else ())
        if self.round.ended:
            self._close(record["type"])
        return out


    # -- corrections (§15.2) ------------------------------------------------------------
    def correct(self, number: int, record: Mapping[str, Any], seq: int,
                history: History | None = None) -> Corrected:
        """Apply the correction ``record`` (``{"type": "correction", "events", "dealer"?, "voids"?,
        "note"?}``) of round ``number`` as ``seq``, in place: the round's events are now the record's.

        The latest round needs nothing else; an earlier one needs ``history`` (the summaries of the ended
        rounds from it on, its :class:`RoundInfo` and the next round's), else :class:`MissingHistory`.
        Raises :class:`CorrectionError` (``event`` = the index in ``events``) for an event that cannot
        happen, :class:`CorrectionConflict` when the next round's dealer, not named, would change, and
        :class:`TableError` for a malformed record.  docs/rules.md#s15.2 has the readings.
        """
        _no_unknown(record, CORRECTION_FIELDS, seq)
        events = record.get("events")
        if not isinstance(events, list) or len(events) > MAX_CORRECTION_EVENTS:
            raise TableError(Code.BAD_EVENT, seq, f"a correction lists the round's events: at most "
                             f"{MAX_CORRECTION_EVENTS}", field="events")
        _check_note(record, seq)
        latest = 0 if self.round_meta is None else self.round_meta["number"]
        if not 1 <= number <= latest:
            raise TableError(Code.NO_ROUND, seq, f"there is no round {number} to correct")
        current = number == latest
        if current:
            dealer, voids = self.round.dealer, list(self.round.voids)
        else:
            history = history or History()
            history.need(number, self.rounds_done, number + 1)
            dealer, voids = history.summaries[number]["dealer"], list(history.info[number].voids) or None
        dealer, voids = self._dealer_and_voids(record, seq, dealer, voids)
        was_ended = not current or not self.playing
        if current and was_ended:  # (its summary gives the seq that ended it)
            history = history or History()
            history.need(number, number, number - 1)
        r, facts, made = _replay_events(self.ruleset, dealer, voids, events, seq)
        ended_by = None
        if r.ended:
            ended_by = events[-1]["type"]
        elif was_ended:  # an ended round stays ended: closed as by round_end
            r.ended, ended_by = True, "round_end"
        if history is not None:
            history.corrected(number, record, r.voids)
        self.corrections.append([seq, number])
        if current:
            return self._correct_latest(number, r, facts, made, ended_by, was_ended, seq, history)
        return self._correct_past(number, r, facts, made, ended_by, seq, history)

    def _correct_latest(self, number: int, r: Round, facts: RoundFacts, made: list, ended_by: str | None,
                        was_ended: bool, seq: int, history: History | None) -> Corrected:
        before = self.balances
        m = self.round_meta
        old_coins_delta = m.get("coins_delta")
        self.round, self.facts, self.version = r, facts, seq
        summaries: list[dict] = []
        if was_ended:
            m["ended_by"] = ended_by
            self.dealer = r.dealer_after()
            if self.stakes is not None:  # its coins again, from its bankrolls and its new deltas
                coins = settle_coins(r.deltas, replace(self.stakes, bankrolls=tuple(m["bankrolls"])))
                self.coins = [now - old + new for now, old, new in zip(self.coins, old_coins_delta, coins.coins_delta)]
                m |= {"coins_delta": list(coins.coins_delta), "fees": list(coins.fees)}
                self._check_coins(number, seq)
            summaries = [self.round_summary(history.summaries[number]["last_seq"])]
        elif r.ended:  # the open round, ended by its new events
            self._close(ended_by)
            summaries = [self.round_summary()]
        if history is not None:
            history.summaries.update((s["number"], s) for s in summaries)
        return Corrected(number, seq, made, summaries, [a - b for a, b in zip(self.balances, before)])

    def _correct_past(self, number: int, r: Round, facts: RoundFacts, made: list, ended_by: str,
                      seq: int, history: History) -> Corrected:
        before = self.balances
        old = [history.summaries[k] for k in range(number, self.rounds_done + 1)]
        new = dict(old[0]) | {
            "dealer": r.dealer, "deltas": list(r.deltas), "won": list(r.won), "left": list(r.left),
            "ended_by": ended_by, "next_dealer": r.dealer_after(), "facts": facts.to_dict(),
        }
        following = number + 1
        if new["next_dealer"] != old[0]["next_dealer"] and not history.info[following].named:
            start = old[1]["first_seq"] if len(old) > 1 else self.round_meta["start"]
            raise CorrectionConflict(following, start,
                                     f"round {following} took its dealer from round {number} (seat "
                                     f"{old[0]['next_dealer']}); after the correction it would be seat "
                                     f"{new['next_dealer']}: correct round {following} too, giving its dealer")
        change = [a - b for a, b in zip(new["deltas"], old[0]["deltas"])]
        self.base = [b + c for b, c in zip(self.base, change)]
        self.version = seq
        summaries = [new] + [dict(s) for s in old[1:]]
        if self.stakes is not None:
            self._recoin(summaries, old, number, seq)
        summaries[0] = {k: summaries[0][k] for k in _summary_order(summaries[0])}
        history.summaries.update((s["number"], s) for s in summaries)
        return Corrected(number, seq, made, summaries, [a - b for a, b in zip(self.balances, before)])

    def _recoin(self, summaries: list[dict], old: list[dict], number: int, seq: int) -> None:
        """§12 again from round ``number`` on, the rounds' deltas as they now stand: each round's bankrolls
        are the coins after the round before it plus the buy-ins between them (read off the old chain)."""
        coins = list(old[0]["bankrolls"])
        for k, (s, was) in enumerate(zip(summaries, old)):
            if k:
                before = old[k - 1]
                bought = [b - (a + d) for b, a, d in zip(was["bankrolls"], before["bankrolls"], before["coins_delta"])]
                coins = [c + x for c, x in zip(coins, bought)]
                self._check_total(coins, number + k, s["first_seq"])
            settled = settle_coins(s["deltas"], replace(self.stakes, bankrolls=tuple(coins)))
            s |= {"bankrolls": list(coins), "coins_delta": list(settled.coins_delta), "fees": list(settled.fees)}
            coins = list(settled.coins)
        last, m = old[-1], self.round_meta
        if self.playing:  # the round being played started from the coins after the last ended round
            bought = [b - (a + d) for b, a, d in zip(m["bankrolls"], last["bankrolls"], last["coins_delta"])]
            coins = [c + x for c, x in zip(coins, bought)]
            self._check_total(coins, m["number"], m["start"])
            m["bankrolls"] = list(coins)
            self.coins = list(coins)
        else:  # the latest round is the last ended one: its meta as its summary; buy-ins since
            bought = [now - (a + d) for now, a, d in zip(self.coins, last["bankrolls"], last["coins_delta"])]
            m |= {name: list(summaries[-1][name]) for name in COIN_FIELDS}
            self.coins = [c + x for c, x in zip(coins, bought)]
            self._check_coins(m["number"], seq)

    def _check_total(self, coins: list[int], number: int, seq: int) -> None:
        if sum(coins) > MAX_COINS:
            raise CorrectionConflict(number, seq, f"round {number} would start with {sum(coins)} coins at the "
                                     f"table, more than {MAX_COINS}")

    def _check_coins(self, number: int, seq: int) -> None:
        if sum(self.coins) > MAX_COINS:
            raise CorrectionConflict(number, seq, f"the table would hold {sum(self.coins)} coins, more than "
                                     f"{MAX_COINS}")


def round_info(start: Mapping[str, Any], corrections: Iterable[Mapping[str, Any]]) -> RoundInfo:
    """A round's :class:`RoundInfo` from its ``round_start`` record and its live corrections' records (in
    log order): named if any of them gave a dealer; the voids of the last of them that gave voids."""
    named, voids = start.get("dealer") is not None, start.get("voids")
    for rec in corrections:
        named = named or rec.get("dealer") is not None
        if rec.get("voids") is not None:
            voids = rec["voids"]
    return RoundInfo(named, tuple(voids) if voids is not None else ())


def corrected_by(st: TableState, number: int) -> list[int]:
    """The seqs of the live corrections of round ``number``, in log order (the latest is the one that holds)."""
    return [seq for seq, n in st.corrections if n == number]


def refold_start(number: int, corrections: Iterable[Iterable[int]], last_seq_of) -> int:
    """The round a refold must start from to refold round ``number`` and those after it: earlier when a
    correction the refold would read (recorded after the round before it ended: ``last_seq_of(k)`` is the
    seq that ended round k) rewrites an earlier round, since a fold applies a correction to the round as
    the fold has it (§15.2).

    >>> refold_start(3, [[12, 1]], lambda k: {1: 4, 2: 9}[k]), refold_start(3, [[8, 1]], lambda k: {1: 4, 2: 9}[k])
    (1, 3)
    """
    corrections = [tuple(c) for c in corrections]
    while number > 1:
        floor = last_seq_of(number - 1)
        earlier = [k for seq, k in corrections if seq > floor and k < number]
        if not earlier:
            return number
        number = min(earlier)
    return number


class Corrected(NamedTuple):
    """What a correction did: the round, the correction's seq, per event of it the transfers it made (keys:
    :func:`correction_key`), the summaries it rewrote (of the ended rounds from the round on, as they now
    stand; none when the round is still being played) and each seat's change of balance."""

    number: int
    seq: int
    made: list
    summaries: list[dict]
    changes: list[int]


_SUMMARY_KEYS = ("number", "dealer", "deltas", "won", "left", "ended_by", "next_dealer", "first_seq", "last_seq",
                 *COIN_FIELDS, "facts", "adjusted")


def _summary_order(summary: Mapping[str, Any]) -> list[str]:
    """A summary's keys in the order :meth:`TableState.round_summary` writes them (a fold's summaries and a
    correction's compare equal, order included, once stored)."""
    return [k for k in _SUMMARY_KEYS if k in summary] + [k for k in summary if k not in _SUMMARY_KEYS]


def _replay_events(ruleset: Ruleset, dealer: int, voids: list, events: list,
                   seq: int) -> tuple[Round, RoundFacts, list]:
    """A round from ``dealer`` and ``voids`` through the events of the correction ``seq``: the round, its
    facts and, per event, the transfers it made.  An event that cannot happen (or is no round event) is a
    :class:`CorrectionError` naming its index."""
    r = Round(ruleset, dealer, voids)
    facts = RoundFacts.empty(ruleset.players)
    made = []
    for i, ev in enumerate(events):
        kind = ev.get("type") if isinstance(ev, Mapping) else None
        if kind not in ROUND_EVENTS:
            raise CorrectionError(Code.BAD_EVENT, i, f"a correction lists round events ({', '.join(ROUND_EVENTS)}); "
                                  f"got {'a ' + type(ev).__name__ if kind is None else repr(kind)}",
                                  field="type" if isinstance(ev, Mapping) else "_schema")
        try:
            out = r.step(ev, correction_key(seq, i))
        except EventError as exc:
            raise CorrectionError(exc.code, i, exc.reason, **exc.context) from None
        facts = facts.after(ev, seq, out, r.scored if kind == "hu" else ())
        made.append(out)
    return r, facts, made


def _check_note(record: Mapping[str, Any], seq: int) -> None:
    note = record.get("note")
    if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE_CHARS):
        raise TableError(Code.BAD_EVENT, seq, f"a note is a text of at most {MAX_NOTE_CHARS} characters",
                         field="note")


def _no_unknown(record: Mapping[str, Any], known: tuple[str, ...], seq: int) -> None:
    for name in record:
        if name not in known:
            raise TableError(Code.BAD_EVENT, seq, f"unknown field {name!r} of a {record['type']}", field=str(name))


def fold(players: list[str], ruleset, dealer: int, records: Iterable[Mapping[str, Any]],
         stakes: Stakes | Mapping | None = None) -> tuple[TableState, list[dict]]:
    """Rebuild a table's state from its whole log; also the summaries of its ended rounds.

    Void records remove their targets; every other record is re-validated (a correction is applied
    where it stands in the log, §15.2).  Raises :class:`VoidConflict` when a record no longer validates.
    """
    records = list(records)
    voided = {r["target"] for r in records if r.get("type") == "void"}
    return _fold_on(TableState.new(players, ruleset, dealer, stakes), records, voided)


def refold_round(st: TableState, prior: Mapping[str, Any] | None, later: list[Mapping[str, Any]],
                 records: Iterable[Mapping[str, Any]], voided: Iterable[int]) -> tuple[TableState, list[dict]]:
    """:func:`fold` again from the start of one round, without re-reading the rounds before it.

    ``st`` is the table's state (the fold of its log, voids included); ``prior``
    the summary of the round before that round (None for round 1); ``later``
    the summaries of the ended rounds from that round on; ``records`` the log
    from just after ``prior`` (its ``last_seq`` + 1; seq 1 for round 1) on, so
    the buy-ins and adjusts before the round too, through ``st.version`` and then any new
    records (a new void last, say); ``voided`` every seq the new fold leaves
    out.  The rounds before it are not touched by what follows them, so the
    state between rounds is rebuilt from the summaries: the balances before
    the round are ``st``'s minus the deltas of the rounds from it on and the
    adjusts since ``prior`` started (``st.adjusted`` less ``prior``'s), and the
    coins after ``prior`` are its ``bankrolls`` plus its ``coins_delta``.  The
    caller starts early enough that no correction among ``records`` rewrites a
    round before that one (:class:`MissingHistory` otherwise).

    Returns what :func:`fold` would return for the whole log, except that the
    summaries are only those from that round on.  Raises :class:`VoidConflict`
    as soon as a record no longer validates (the records after it are not read).

    >>> log = [{"seq": 1, "type": "round_start"},
    ...        {"seq": 2, "type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"},
    ...        {"seq": 3, "type": "round_end"}, {"seq": 4, "type": "round_start"},
    ...        {"seq": 5, "type": "kong", "seat": 1, "kind": "concealed", "tile": "2m"}]
    >>> st, summaries = fold(["A", "B", "C", "D"], "xuezhan", 0, log)
    >>> void = {"seq": 6, "type": "void", "target": 5}
    >>> new, tail = refold_round(st, summaries[0], [], log[3:] + [void], {5})
    >>> new.balances, tail
    ([36, -12, -12, -12], [])
    >>> whole, every = fold(["A", "B", "C", "D"], "xuezhan", 0, log + [void])
    >>> new.to_dict() == whole.to_dict() and every == summaries
    True
    """
    n = len(st.players)
    before_adjusted = [0] * n if prior is None else list(prior.get("adjusted") or [0] * n)
    balances = [b - (a - p) for b, a, p in zip(st.balances, st.adjusted, before_adjusted)]
    for summary in list(later) + ([{"deltas": st.round.deltas}] if st.playing else []):
        balances = [b - d for b, d in zip(balances, summary["deltas"])]
    start = TableState(list(st.players), st.ruleset, st.first_dealer, base=balances, stakes=st.stakes,
                       adjusted=before_adjusted)
    if prior is not None:
        start.dealer = prior["next_dealer"]
        start.round_meta = {"number": prior["number"], "start": prior["first_seq"], "ended_by": prior["ended_by"]}
        start.version = prior["last_seq"]
        start.facts = RoundFacts.from_dict(prior.get("facts"), n)
        if st.stakes is not None:
            start.round_meta |= {k: prior[k] for k in COIN_FIELDS}
            start.coins = [b + d for b, d in zip(prior["bankrolls"], prior["coins_delta"])]
    else:
        start.dealer = st.first_dealer
        if st.stakes is not None:
            start.coins = list(st.stakes.bankrolls)
    first = 1 if prior is None else prior["last_seq"] + 1
    start.corrections = [list(c) for c in st.corrections if c[0] < first]  # (the fold meets the others again)
    new, summaries = _fold_on(start, records, set(voided))
    # the voids before the round, in log order, then those the fold met
    new.voided = list(st.voided) + [v for v in new.voided if v not in st.voided]
    return new, summaries


def fold_from(st: TableState, records: Iterable[Mapping[str, Any]], voided: Iterable[int]) -> TableState:
    """:func:`fold` continued from ``st`` (stepped in place): ``records`` are those after its
    version, ``voided`` the seqs the fold leaves out (the void records' targets).  A correction among
    them of a round that ended before ``st`` is :class:`MissingHistory`: fold from further back.

    >>> log = [{"seq": 1, "type": "round_start"},
    ...        {"seq": 2, "type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"}]
    >>> half, _ = fold(["A", "B", "C", "D"], "xuezhan", 0, log[:1])
    >>> fold_from(half, log[1:], set()).balances == fold(["A", "B", "C", "D"], "xuezhan", 0, log)[0].balances
    True
    """
    return _fold_on(st, records, set(voided))[0]


def _fold_on(st: TableState, records: Iterable[Mapping[str, Any]], voided: set[int]) -> tuple[TableState, list[dict]]:
    """Step ``st`` (in place) through ``records``, skipping void records and the ``voided`` seqs; also the
    summaries of the rounds that end on the way (rewritten by the corrections met)."""
    summaries: list[dict] = []
    first = st.rounds_done + 1  # the number of the first summary this fold makes
    history = History()  # (of the rounds this fold starts: a correction of an earlier one is MissingHistory)
    for rec in records:
        seq = rec["seq"]
        kind = rec.get("type")
        if kind == "void" or seq in voided:
            st.version = seq
            if kind == "void":
                st.voided.append(rec["target"])
            continue
        body = {k: v for k, v in rec.items() if k not in ("seq", "at", "round")}
        if kind == "correction":
            try:
                done = st.correct(rec["round"], body, seq, history)
            except EventError as exc:
                raise VoidConflict(Code.VOID_CONFLICT, seq, f"record {seq} no longer holds: {exc.reason}") from None
            for summary in done.summaries:
                if summary["number"] >= first:
                    summaries[summary["number"] - first:summary["number"] - first + 1] = [summary]
            continue
        before = st.rounds_done
        try:
            st.step(body, seq)
        except EventError as exc:
            raise VoidConflict(Code.VOID_CONFLICT, exc.event, f"record {seq} no longer holds: {exc.reason}") from None
        if kind == "round_start":
            history.started(st.round_meta["number"], body, st.round.voids)
        if st.rounds_done > before:
            summary = st.round_summary()
            summaries.append(summary)
            history.summaries[summary["number"]] = summary
    return st, summaries


def explain_round(ruleset: Ruleset | str | Mapping, dealer: int, records: Iterable[Mapping[str, Any]],
                  voided: Iterable[int], ended: bool) -> dict:
    """One round as it stands, each of its events with the transfers it made (the rounds view).

    ``records``: the round's records in log order, as the log lists them: its ``round_start``, the log
    from there to the record that ended it, and its corrections; ``voided``: the seqs voided; ``dealer``:
    the round's dealer as it stands (its summary's); ``ended``: whether it has ended.  The events are
    those of its latest live correction followed by its own events recorded after it (all of its own
    without one), each ``{"seq", ...the event, "transfers"}`` (a correction's also ``"index"``: its place
    in the correction's list); ``transfers`` all of them, in order.

    >>> log = [{"seq": 1, "type": "round_start", "round": 1},
    ...        {"seq": 2, "type": "kong", "seat": 0, "kind": "concealed", "tile": "1m", "round": 1},
    ...        {"seq": 3, "type": "round_end", "round": 1},
    ...        {"seq": 4, "type": "correction", "round": 1,
    ...         "events": [{"type": "penalty", "seat": 2, "kind": "zhahu"}]}]
    >>> r = explain_round("xuezhan", 0, log, (), ended=True)
    >>> r["deltas"], [(e["seq"], e["index"], e["type"]) for e in r["events"]], r["transfers"][0]
    ([24, 24, -72, 24], [(4, 0, 'penalty')], {'from': 2, 'to': 0, 'points': 24, 'reason': 'penalty', 'event': 4})
    """
    rules = Ruleset.from_spec(ruleset)
    voided = set(voided)
    live = [rec for rec in records if rec["seq"] not in voided and rec.get("type") != "void"]
    voids = None
    latest = None
    for rec in live:
        if rec.get("type") in ("round_start", "correction") and rec.get("voids") is not None:
            voids = rec["voids"]
        if rec.get("type") == "correction":
            latest = rec["seq"]
    r = Round(rules, dealer, voids)
    events: list[dict] = []
    if latest is not None:
        correction = next(rec for rec in live if rec["seq"] == latest)
        for i, ev in enumerate(correction["events"]):
            out = r.step(ev, correction_key(latest, i))
            events.append({"seq": latest, "index": i, **ev, "transfers": labelled(out)})
    for rec in live:
        if rec["seq"] > (latest or 0) and rec.get("type") in ROUND_EVENTS:
            ev = {k: v for k, v in rec.items() if k not in ("seq", "at", "round")}
            out = r.step(ev, rec["seq"])
            events.append({"seq": rec["seq"], **ev, "transfers": labelled(out)})
    return {"dealer": r.dealer, "voids": list(r.voids), "deltas": list(r.deltas), "won": list(r.won),
            "left": list(r.left), "next_dealer": r.dealer_after() if ended or r.ended else None,
            "events": events, "transfers": labelled(r.transfers)}
