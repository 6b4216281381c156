"""The end of the evening: a table's summary (what each seat did) and its settle-up (who pays whom).

:func:`summarize` reads a table's state (:class:`~service.rules.table.TableState`)
and the summaries of its ended rounds (:meth:`~service.rules.table.TableState.round_summary`,
as the store keeps them): O(rounds), never a refold of the log.  The facts
of each round are collected by the fold as it applies each record
(:class:`~service.rules.table.RoundFacts`, a round summary's ``facts``), so
they are the fold of the log, voids included.  :func:`settle_up` is the
fewest payments that clear a list of balances.

What each seat's figures mean (§10.1, docs/rules.md#s10.1; the events of #s6 to #s8, #s13):

* ``total``: the seat's balance in points (the table's ``balances``), so the
  totals sum to 0.  Everything counts what the log holds so far: a round still
  being played counts with its payments and facts so far; ``rounds`` counts
  the ended rounds only.
* ``rank``: 1 for the highest total; equal totals share a rank and the next
  rank skips (totals 50, 50, -20, -80 rank 1, 1, 3, 4).
* ``wins``: the seat's wins, one per ``hu`` event it wins (一炮多响 is a win for
  each winner; in 血流成河 a seat may win many times in a round).
* ``zimo``: those of its wins that were self-drawn (自摸, 杠上花, 天胡, 地胡 by
  its own draw); so ``wins - zimo`` is the wins on another seat's tile (点炮
  received, 抢杠胡 and 杠上炮 included).  One exception follows the ruleset:
  with ``dianganghua = discard`` a 杠上花 on a direct kong is paid by the
  feeder alone "exactly as for a win on the feeder's discard", so it counts as
  a win on the feeder's discard, not as a 自摸 (and the feeder's 点炮).
* ``dianpao_paid``: the times the seat was the discarder of a won tile (点炮),
  once per ``hu`` event however many seats won on it (一炮多响 counts once).
  抢杠胡 counts for the robbed seat (it pays as a discarder); 杠上炮 counts
  for the seat that made the kong and then discarded (it is a 点炮: that seat
  pays the winners as a discarder, and passes its kong's income on).
* ``kongs``: ``{"direct", "added", "concealed"}``, the seat's kongs that
  stood.  A robbed kong (抢杠胡) is no kong: it counts as a peng.  A kong whose
  income was passed on (杠上炮) or handed back at a draw (退税) still stood:
  it counts.  Kongs count at tables where kongs pay nothing (chengdu-points).
* ``huazhu_paid``, ``dajiao_paid``: the points (not the times) the seat paid
  at draws as a 花猪 (查花猪) and to ting seats' 大叫 (查大叫).  An escape's
  charge is not 大叫, even when it was reckoned by 查大叫 (``last_four``).
* ``escapes``: the times the seat left a round (any ``escape`` naming it, a
  血战 winner leaving included).
* ``penalties_paid``: the points the seat paid for 诈胡 (§15.3; a 相公 pays
  nothing).  ``adjusted``: the net points adjustments brought it (§15.5,
  received less paid), which its ``total`` includes.
* ``biggest_win``: the seat's win with the most points, where the points of a
  win are what its own payments brought the seat: its 点炮 or 自摸 payments
  from every payer (自摸加底 included), not the kong income passed on by
  呼叫转移 (杠上炮) nor anything handed back later (forfeit).  Ties: the most
  fan, then the earliest win (round, then event).  ``{"round", "fan",
  "patterns", "points"}``: ``fan`` after the cap, ``patterns`` the ids of its
  hand's patterns (docs/rules.md#s5; 0-fan ones are not listed), ``[]`` for a win given as a
  bare ``fan`` (its declared patterns, if any, are the caller's and are not
  checked, so they are not shown).  None: the seat has not won.
* Every seat is seated for every round (a seat that escaped plays the next),
  three-player tables included: the seats' rounds played are the table's
  ``rounds``, so there is no per-seat count.

The settle-up (``settle_up``):

* Points: the fewest payments that bring every seat's ``total`` to 0.  The
  minimum is n' - k, where n' is the number of seats with a non-zero balance
  and k the most groups those seats can be split into that each sum to 0;
  :func:`settle_up` finds such a split (exactly: a search over the subsets of
  seats, fine for any table and exact for any n), then within each group the
  biggest debtor pays the biggest creditor as much as it can, again and again
  (ties: the lower seat).  So at most n - 1 payments; a debtor only pays, a
  creditor only receives; the answer depends only on the balances (equal
  balances: equal payments).  Payments are listed by payer, then payee.
* Coins (a table with stakes, docs/rules.md#s12): a seat's ``coins`` is its
  coin result over the evening, what passed between it and the other players:
  ``coins now - starting bankroll - buy-ins + fees paid`` (the sum of its
  rounds' ``coins_delta`` and ``fees``), so the seats' results sum to 0;
  ``fees`` is what it paid the house and ``buy_ins`` the coins it bought (read
  off the state and the summaries: buy-ins come only between rounds, so
  ``coins now = starting bankroll + buy-ins + the ended rounds' coins_delta``).
  These are the bankrolls' own record: the coins moved round by round, 扣尽
  included.
* The settle-up at a table with stakes is in coins: the fewest payments
  ``{from, to, coins}`` that square every seat's coin result (the same method
  as for points), so a seat that ran short (扣尽) pays what it lost, never
  more, and a seat up in points but down in coins pays.  Adjustments (§15.5)
  move points only: they are in the totals, not in the coins.
* A round still being played has settled no coins yet: a seat's ``coins``
  counts the ended rounds.

The rule book's §10.1 says all this for players, with a worked example.

A small evening (血战, base 6).  Round 1: seat 2 暗杠 (12 from each other
seat); seat 0 自摸 with 2 fan (12 from each); seat 1 wins 1 fan on seat 3's
discard (6); seat 2 wins 对对胡, 2 fan, on seat 3's discard (12): three seats
have won, the round ends.  Round 2: seat 1 escapes (16 units, 96, to each):

>>> from service.rules.table import TableState
>>> st, ended = TableState.new(["A", "B", "C", "D"], "xuezhan"), []
>>> log = [{"type": "round_start"},
...        {"type": "kong", "seat": 2, "kind": "concealed", "tile": "7s"},
...        {"type": "hu", "tile": "5p", "winners": [{"seat": 0, "fan": 2}]},
...        {"type": "hu", "from": 3, "tile": "9m", "winners": [{"seat": 1, "fan": 1}]},
...        {"type": "hu", "from": 3, "tile": "4m",
...         "winners": [{"seat": 2, "hand": {"tiles": "111222444m33399p"}}]},
...        {"type": "round_start"}, {"type": "escape", "seat": 1}]
>>> for seq, record in enumerate(log, 1):
...     st, _ = st.apply(record, seq)
...     if st.rounds_done > len(ended):  # (as the store keeps each ended round's summary)
...         ended.append(st.round_summary())
>>> s = summarize(st, ended, table_id="t1")
>>> s.rounds, [x.total for x in s.seats], [x.rank for x in s.seats], [x.dianpao_paid for x in s.seats]
(2, [120, -306, 132, 54], [2, 4, 1, 3], [0, 0, 0, 2])
>>> s.seats[0].biggest_win  # 自摸: 12 from each of three
BiggestWin(round=1, fan=2, patterns=(), points=36)
>>> s.as_dict()["seats"][2]
{'seat': 2, 'name': 'C', 'total': 132, 'rank': 1, 'wins': 1, 'zimo': 0, 'dianpao_paid': 0,
 'kongs': {'direct': 0, 'added': 0, 'concealed': 1}, 'huazhu_paid': 0, 'dajiao_paid': 0, 'escapes': 0,
 'biggest_win': {'round': 1, 'fan': 2, 'patterns': ['duiduihu'], 'points': 12}, 'penalties_paid': 0, 'adjusted': 0}
>>> s.as_dict()["settle_up"]
[{'from': 1, 'to': 0, 'points': 120}, {'from': 1, 'to': 2, 'points': 132},
 {'from': 1, 'to': 3, 'points': 54}]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .table import FACT_COUNTS, RoundFacts, WinFact

if TYPE_CHECKING:  # (only for the annotations: the table module does not need this one)
    from .table import TableState

KONG_KINDS = ("direct", "added", "concealed")


@dataclass(frozen=True, slots=True)
class Payment:
    """``payer`` hands ``payee`` ``points`` (a table with stakes: ``coins``, and ``points`` is None)."""

    payer: int
    payee: int
    points: int | None
    coins: int | None = None

    def as_dict(self) -> dict:
        out = {"from": self.payer, "to": self.payee}
        if self.points is not None:
            out["points"] = self.points
        return out if self.coins is None else out | {"coins": self.coins}


@dataclass(frozen=True, slots=True)
class BiggestWin:
    """A seat's biggest win: its round's number, fan after the cap, pattern ids and points."""

    round: int
    fan: int
    patterns: tuple[str, ...]
    points: int

    def as_dict(self) -> dict:
        return {"round": self.round, "fan": self.fan, "patterns": list(self.patterns), "points": self.points}


@dataclass(frozen=True, slots=True)
class Kongs:
    """A seat's kongs that stood, by kind."""

    direct: int = 0
    added: int = 0
    concealed: int = 0

    def as_dict(self) -> dict:
        return {"direct": self.direct, "added": self.added, "concealed": self.concealed}


@dataclass(frozen=True, slots=True)
class SeatSummary:
    """One seat's evening (the module's docstring says what each figure means).

    ``coins``, ``fees`` and ``buy_ins`` are None at a table without stakes.
    """

    seat: int
    name: str
    total: int
    rank: int
    wins: int
    zimo: int
    dianpao_paid: int
    kongs: Kongs
    huazhu_paid: int
    dajiao_paid: int
    escapes: int
    biggest_win: BiggestWin | None
    penalties_paid: int = 0
    adjusted: int = 0
    coins: int | None = None
    fees: int | None = None
    buy_ins: int | None = None

    def as_dict(self) -> dict:
        out = {
            "seat": self.seat, "name": self.name, "total": self.total, "rank": self.rank,
            "wins": self.wins, "zimo": self.zimo, "dianpao_paid": self.dianpao_paid,
            "kongs": self.kongs.as_dict(), "huazhu_paid": self.huazhu_paid, "dajiao_paid": self.dajiao_paid,
            "escapes": self.escapes,
            "biggest_win": None if self.biggest_win is None else self.biggest_win.as_dict(),
            "penalties_paid": self.penalties_paid, "adjusted": self.adjusted,
        }
        if self.coins is None:
            return out
        return out | {"coins": self.coins, "fees": self.fees, "buy_ins": self.buy_ins}


@dataclass(frozen=True, slots=True)
class Summary:
    """A table's evening: ``GET /v1/tables/{id}/summary``'s body is :meth:`as_dict`."""

    id: str | None
    players: tuple[str, ...]
    rounds: int
    finished_at: str | None
    seats: tuple[SeatSummary, ...]
    settle_up: tuple[Payment, ...]

    def as_dict(self) -> dict:
        return {"id": self.id, "players": list(self.players), "rounds": self.rounds,
                "finished_at": self.finished_at, "seats": [s.as_dict() for s in self.seats],
                "settle_up": [p.as_dict() for p in self.settle_up]}


# -- the settle-up ----------------------------------------------------------------------
def settle_up(balances: Sequence[int]) -> tuple[Payment, ...]:
    """The fewest payments that bring every balance to 0 (balances that sum to 0).

    Seats are the indices of ``balances``; each payment's ``points`` is its
    amount.  Exact for any number of seats (a search over the subsets of the
    seats whose balance is not 0: 2^n steps, nothing for a table of 3 or 4).
    The module's docstring gives the method and its tie-breaking.

    >>> settle_up([30, -10, -20, 0])
    (Payment(payer=1, payee=0, points=10, coins=None), Payment(payer=2, payee=0, points=20, coins=None))
    >>> settle_up([10, -10, 25, -25])  # two pairs that clear each other: 2 payments, not 3
    (Payment(payer=1, payee=0, points=10, coins=None), Payment(payer=3, payee=2, points=25, coins=None))
    >>> [(p.payer, p.payee, p.points) for p in settle_up([50, 50, -20, -80])]  # seat 3 pays seat 0 first
    [(2, 1, 20), (3, 0, 50), (3, 1, 30)]
    >>> settle_up([1, -2])
    Traceback (most recent call last):
    ...
    ValueError: balances must be integers that sum to 0, got [1, -2]
    """
    return tuple(Payment(payer, payee, amount) for payer, payee, amount in _fewest(balances))


def _fewest(balances: Sequence[int]) -> list[tuple[int, int, int]]:
    """``(payer, payee, amount)`` of the fewest payments clearing ``balances``, by payer then payee."""
    balances = list(balances)
    if any(isinstance(b, bool) or not isinstance(b, int) for b in balances) or sum(balances) != 0:
        raise ValueError(f"balances must be integers that sum to 0, got {balances}")
    out: list[tuple[int, int, int]] = []
    for group in _zero_sum_groups(balances):
        out += _settle_group({s: balances[s] for s in group})
    return sorted(out)


def _zero_sum_groups(balances: list[int]) -> list[list[int]]:
    """The seats whose balance is not 0, split into as many groups summing to 0 as can be.

    ``most[mask]``: the most zero-sum groups a subset (a bit mask of those seats)
    splits into, when it sums to 0 itself (as many as a split of it less one seat
    into such groups, plus itself); a split is found by taking seats off one at a
    time, the lowest first among equal choices, the subsets that sum to 0 on the
    way marking where one group ends.
    """
    seats = [s for s, b in enumerate(balances) if b]
    n = len(seats)
    full = (1 << n) - 1
    total = [0] * (1 << n)
    most = [0] * (1 << n)
    for mask in range(1, full + 1):
        low = (mask & -mask).bit_length() - 1
        total[mask] = total[mask & (mask - 1)] + balances[seats[low]]
        most[mask] = max(most[mask & ~(1 << i)] for i in range(n) if mask >> i & 1) + (total[mask] == 0)
    groups: list[list[int]] = []
    mask, start = full, full
    while mask:
        i = next(i for i in range(n) if mask >> i & 1 and most[mask & ~(1 << i)] == most[mask] - (total[mask] == 0))
        mask &= ~(1 << i)
        if total[mask] == 0:  # (the empty set sums to 0: the last group ends there)
            groups.append([seats[j] for j in range(n) if (start & ~mask) >> j & 1])
            start = mask
    return groups


def _settle_group(group: dict[int, int]) -> list[tuple[int, int, int]]:
    """A zero-sum group settled: the biggest debtor pays the biggest creditor (ties: the lower seat)
    as much as it can, until all are 0; one payment fewer than the group's seats at most."""
    out = []
    while any(group.values()):
        debtor = min(group, key=lambda s: (group[s], s))
        creditor = max(group, key=lambda s: (group[s], -s))
        amount = min(-group[debtor], group[creditor])
        out.append((debtor, creditor, amount))
        group[debtor] += amount
        group[creditor] -= amount
    return out


# -- the summary ---------------------------------------------------------------------------
def summarize(state: TableState, ended_round_summaries: Iterable[Mapping[str, Any]],
              finished_at: str | None = None, *, table_id: str | None = None) -> Summary:
    """A table's evening from its state and the summaries of its ended rounds (oldest first, all of
    them: ``state.rounds_done``, else ValueError).  ``finished_at`` (an ISO time, or None for a table
    still going) and ``table_id`` are shown as given.

    A summary stored before the facts were kept (no ``facts``) counts as a round in which no seat
    did anything (its deltas and coins still count: they are the table's).
    """
    ended = list(ended_round_summaries)
    if len(ended) != state.rounds_done:
        raise ValueError(f"the table has {state.rounds_done} ended round(s), got {len(ended)} summaries")
    n = len(state.players)
    counts = {name: [0] * n for name in FACT_COUNTS}
    best: list[tuple[BiggestWin, WinFact] | None] = [None] * n
    rounds = [(s["number"], RoundFacts.from_dict(s.get("facts"), n)) for s in ended]
    if state.playing:
        if state.round_meta is None or state.facts is None:
            raise ValueError("the table plays a round without its number or facts")
        rounds.append((state.round_meta["number"], state.facts))
    for number, facts in rounds:
        for name in FACT_COUNTS:
            counts[name] = [a + b for a, b in zip(counts[name], getattr(facts, name))]
        for seat, win in enumerate(facts.biggest_win):
            so_far = best[seat]
            if win is not None and (so_far is None or win.beats(so_far[1])):  # (earlier rounds first)
                best[seat] = (BiggestWin(number, win.fan, win.patterns, win.points), win)
    biggest = [None if b is None else b[0] for b in best]
    adjusted = [0] * n if state.adjusted is None else state.adjusted  # (None: no adjust)
    totals = state.balances
    coins: list[int] | None = None
    fees: list[int] | None = None
    buy_ins: list[int] | None = None
    if state.stakes is not None:
        if state.coins is None:
            raise ValueError("the table plays for stakes without coins")
        coins, fees = [0] * n, [0] * n
        for s in ended:
            coins = [a + b for a, b in zip(coins, s["coins_delta"])]
            fees = [a + b for a, b in zip(fees, s["fees"])]
        # coins now = starting bankroll + buy-ins + each ended round's coins_delta (buy-ins come between rounds)
        buy_ins = [now - start - change for now, start, change in zip(state.coins, state.stakes.bankrolls, coins)]
        coins = [change + fee for change, fee in zip(coins, fees)]  # the coin result: what passed between players
    seats = tuple(
        SeatSummary(
            seat=s, name=state.players[s], total=totals[s], rank=1 + sum(t > totals[s] for t in totals),
            wins=counts["wins"][s], zimo=counts["zimo"][s], dianpao_paid=counts["dianpao_paid"][s],
            kongs=Kongs(*(counts["kongs_" + kind][s] for kind in KONG_KINDS)),
            huazhu_paid=counts["huazhu_paid"][s], dajiao_paid=counts["dajiao_paid"][s],
            escapes=counts["escapes"][s], biggest_win=biggest[s],
            penalties_paid=counts["penalties_paid"][s], adjusted=adjusted[s],
            coins=None if coins is None else coins[s], fees=None if fees is None else fees[s],
            buy_ins=None if buy_ins is None else buy_ins[s],
        )
        for s in range(n)
    )
    if coins is None:
        payments = settle_up(totals)
    else:  # with stakes, the coin results are squared (each seat's result, 扣尽 included)
        payments = tuple(Payment(payer, payee, None, amount) for payer, payee, amount in _fewest(coins))
    return Summary(table_id, tuple(state.players), state.rounds_done, finished_at, seats, payments)

