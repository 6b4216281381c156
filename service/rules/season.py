"""A club's season (docs/rules.md#s17): standings as a fold of the season's finished tables' results.

A finished table (or an evening brought in by an import) enters a club's
record as one :class:`TableResult`: per seat the club's player (or a guest),
its total and rank and the facts of the evening's summary
(:mod:`service.rules.summary`).  The standings of a season are the fold of its
results in the order the club counted them (:func:`fold`); one result is one
:func:`step`, which changes only the standings of the players at that table, so
a store keeps the standings and updates them as each table is counted, never
refolding on a read.  A player's lifetime figures are the same fold over every
season.

What each figure of a :class:`Standing` is (per player, over the results
folded):

* ``evenings``: the results the player sat in; ``rounds``: the rounds of
  those tables (every seat plays every round; an imported evening has the
  rounds its row gave, 0 when none); ``total``: the sum of the player's
  totals (points); ``coins``: the sum of the player's coin results (the
  summary's per-seat ``coins``) at the tables that had stakes, None while no
  table of the player had any.
* ``wins``, ``zimo``, ``dianpao_paid``, ``kongs`` (by kind), ``huazhu_paid``,
  ``dajiao_paid``: the sums of the summary's per-seat facts;
  ``penalties``: the sum of the points paid as penalties (the summary's
  ``penalties_paid``, 0 at a table whose summary has none).
* ``biggest_win``: the player's win with the most points over the results
  (ties: the most fan, then the earlier result, then the earlier round), as
  the summary gives it, with the ``table`` it was won at; None before any win.
* ``rating``: Plackett-Luce (Weng-Lin), the ``openskill`` library's
  :class:`~openskill.models.PlackettLuce` model with its defaults (μ 25, σ
  25/3, β 25/6, τ 25/300), updated once per result: each seat is a team of
  one, ranked by its total at that table (equal totals share a rank, the
  summary's ``rank``); every player starts the season at the model's prior;
  ``ordinal`` = μ − 3σ.
* **Guests** are never ranked and keep no figures: at the table they are
  rated as a fresh player at the prior, for that result only (so the others'
  ranks are their real places at the table: beating a guest counts as
  beating anyone new), and that rating is dropped.

:func:`standings_table` orders them (§17): a player is ranked once they have
played ``min_rounds`` rounds; ranked players first, then by the club's order
(``total`` or ``rating``, by its ``ordinal``), ties by the other, then by the
name.  A ranked player's ``rank`` is 1 + the ranked players strictly ahead of
them on both figures (so a tie on both shares a rank; the name only orders
the rows).

>>> r1 = TableResult("t1", "2025-01-03T22:00:00.000Z", 8, (
...     SeatResult("p1", "老王", 120, 1, wins=3, zimo=1), SeatResult("p2", "小李", -20, 2),
...     SeatResult(None, "客人", -40, 3), SeatResult("p3", "阿珍", -60, 4)))
>>> after = fold([r1])
>>> after["p1"].evenings, after["p1"].total, after["p1"].wins, sorted(after)
(1, 120, 3, ['p1', 'p2', 'p3'])
>>> after["p1"].rating.mu > PRIOR.mu > after["p3"].rating.mu
True
>>> names = {"p1": "老王", "p2": "小李", "p3": "阿珍"}
>>> [(row["name"], row["rank"], row["ranked"]) for row in standings_table(after.values(), names, min_rounds=8)]
[('老王', 1, True), ('小李', 2, True), ('阿珍', 3, True)]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from openskill.models import PlackettLuce

ORDERS = ("total", "rating")
"""How a club orders its standings (its ``order`` setting): by total points or by the rating's ordinal."""
MIN_ROUNDS = 16
"""A club's ``min_rounds`` unless it sets one: the rounds a player needs in a season to be ranked."""
KONG_KINDS = ("direct", "added", "concealed")
MODEL = PlackettLuce()
"""The rating model: openskill's Plackett-Luce with its documented defaults (an immutable setting)."""


@dataclass(frozen=True, slots=True)
class Rating:
    """A player's skill as the model believes it: mean ``mu`` and uncertainty ``sigma``."""

    mu: float
    sigma: float

    @property
    def ordinal(self) -> float:
        """μ − 3σ: the conservative figure the standings order by."""
        return self.mu - 3 * self.sigma

    def as_dict(self) -> dict:
        return {"mu": self.mu, "sigma": self.sigma, "ordinal": self.ordinal}


PRIOR = Rating(MODEL.rating().mu, MODEL.rating().sigma)
"""Where every player starts a season (and a guest every table)."""


@dataclass(frozen=True, slots=True)
class SeatResult:
    """One seat of a result: the club's ``player`` (None for a guest), the ``name`` shown, and what the
    seat did (the evening summary's per-seat figures; ``coins`` None at a table without stakes)."""

    player: str | None
    name: str
    total: int
    rank: int
    wins: int = 0
    zimo: int = 0
    dianpao_paid: int = 0
    kongs: tuple[int, int, int] = (0, 0, 0)
    huazhu_paid: int = 0
    dajiao_paid: int = 0
    penalties: int = 0
    biggest_win: Mapping[str, Any] | None = None
    coins: int | None = None

    def as_dict(self) -> dict:
        out = {"player": self.player, "name": self.name, "total": self.total, "rank": self.rank,
               "wins": self.wins, "zimo": self.zimo, "dianpao_paid": self.dianpao_paid,
               "kongs": dict(zip(KONG_KINDS, self.kongs)), "huazhu_paid": self.huazhu_paid,
               "dajiao_paid": self.dajiao_paid, "penalties": self.penalties,
               "biggest_win": None if self.biggest_win is None else dict(self.biggest_win)}
        return out if self.coins is None else out | {"coins": self.coins}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SeatResult:
        kongs = d.get("kongs") or {}
        return cls(d.get("player"), d["name"], d["total"], d["rank"], d.get("wins", 0), d.get("zimo", 0),
                   d.get("dianpao_paid", 0), tuple(kongs.get(k, 0) for k in KONG_KINDS),
                   d.get("huazhu_paid", 0), d.get("dajiao_paid", 0), d.get("penalties", 0),
                   d.get("biggest_win"), d.get("coins"))


def ranks_of(totals: Sequence[int]) -> list[int]:
    """Competition ranks of totals: 1 for the highest, equal totals share a rank and the next skips.

    >>> ranks_of([50, 50, -20, -80])
    [1, 1, 3, 4]
    """
    return [1 + sum(t > own for t in totals) for own in totals]


@dataclass(frozen=True, slots=True)
class TableResult:
    """A finished table (or an imported evening) as the club counts it: its ``id``, when it was
    finished (RFC 3339), its ``rounds`` and its seats."""

    id: str
    finished_at: str
    rounds: int
    seats: tuple[SeatResult, ...]

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any], players: Sequence[str | None], finished_at: str,
                     table_id: str | None = None) -> TableResult:
        """The result of a table from its evening summary (``GET /v1/tables/{id}/summary``'s body) and
        the club's player at each seat (None: a guest)."""
        if len(players) != len(summary["seats"]):
            raise ValueError(f"{len(summary['seats'])} seats, {len(players)} players given")
        seats = []
        for player, s in zip(players, summary["seats"]):
            kongs = s["kongs"]
            seats.append(SeatResult(
                player, s["name"], s["total"], s["rank"], s["wins"], s["zimo"], s["dianpao_paid"],
                tuple(kongs[k] for k in KONG_KINDS), s["huazhu_paid"], s["dajiao_paid"],
                s.get("penalties_paid", 0), s["biggest_win"], s.get("coins")))
        return cls(table_id or summary["id"], finished_at, summary["rounds"], tuple(seats))

    @classmethod
    def imported(cls, result_id: str, finished_at: str, rows: Sequence[tuple[str, str, int]],
                 rounds: int = 0) -> TableResult:
        """An evening without rounds (an import): ``rows`` of (player, name, total); ranks from the totals."""
        ranks = ranks_of([total for _, _, total in rows])
        return cls(result_id, finished_at, rounds,
                   tuple(SeatResult(p, name, total, rank) for (p, name, total), rank in zip(rows, ranks)))

    def players(self) -> list[str]:
        """The club's players at the table (guests left out), seat order."""
        return [s.player for s in self.seats if s.player is not None]

    def with_player(self, old: str, new: str) -> TableResult:
        """The result with player ``old`` counted as ``new`` (a merge)."""
        return replace(self, seats=tuple(replace(s, player=new) if s.player == old else s for s in self.seats))

    def as_dict(self) -> dict:
        return {"id": self.id, "finished_at": self.finished_at, "rounds": self.rounds,
                "seats": [s.as_dict() for s in self.seats]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TableResult:
        return cls(d["id"], d["finished_at"], d["rounds"], tuple(SeatResult.from_dict(s) for s in d["seats"]))


@dataclass(frozen=True, slots=True)
class Standing:
    """One player's figures over the results folded (the module's docstring says what each is)."""

    player: str
    evenings: int = 0
    rounds: int = 0
    total: int = 0
    coins: int | None = None
    wins: int = 0
    zimo: int = 0
    dianpao_paid: int = 0
    kongs: tuple[int, int, int] = (0, 0, 0)
    huazhu_paid: int = 0
    dajiao_paid: int = 0
    penalties: int = 0
    biggest_win: Mapping[str, Any] | None = None
    rating: Rating = field(default=PRIOR)

    def as_dict(self) -> dict:
        """The figures as the standings show them (and as a store keeps them)."""
        out = {"player": self.player, "evenings": self.evenings, "rounds": self.rounds, "total": self.total,
               "wins": self.wins, "zimo": self.zimo, "dianpao_paid": self.dianpao_paid,
               "kongs": dict(zip(KONG_KINDS, self.kongs)), "huazhu_paid": self.huazhu_paid,
               "dajiao_paid": self.dajiao_paid, "penalties": self.penalties,
               "biggest_win": None if self.biggest_win is None else dict(self.biggest_win),
               "rating": self.rating.as_dict()}
        return out if self.coins is None else out | {"coins": self.coins}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Standing:
        kongs = d["kongs"]
        return cls(d["player"], d["evenings"], d["rounds"], d["total"], d.get("coins"), d["wins"], d["zimo"],
                   d["dianpao_paid"], tuple(kongs[k] for k in KONG_KINDS), d["huazhu_paid"],
                   d["dajiao_paid"], d["penalties"], d["biggest_win"],
                   Rating(d["rating"]["mu"], d["rating"]["sigma"]))


def _beats(win: Mapping[str, Any], best: Mapping[str, Any] | None) -> bool:
    """Whether ``win`` (a later one) is bigger than ``best``: more points, else more fan (equal: the earlier stays)."""
    return best is None or (win["points"], win["fan"]) > (best["points"], best["fan"])


def rate(ratings: Sequence[Rating | None], ranks: Sequence[int]) -> list[Rating]:
    """The seats' ratings after a table: ``ratings`` one per seat (None: a guest, rated at the prior),
    ``ranks`` the seats' places (1 = best, equal totals equal ranks), as openskill's ``rate`` takes them."""
    teams = [[MODEL.rating(mu=r.mu, sigma=r.sigma) if r is not None else MODEL.rating()] for r in ratings]
    return [Rating(team[0].mu, team[0].sigma) for team in MODEL.rate(teams, ranks=list(ranks))]


def step(standings: Mapping[str, Standing], result: TableResult) -> dict[str, Standing]:
    """The standings of ``result``'s players once it is counted (only theirs change; a player not in
    ``standings`` starts from nothing, at the prior).  A player may sit at most once at a table."""
    players = result.players()
    if len(set(players)) != len(players):
        raise ValueError(f"result {result.id!r} seats a player twice")
    before = [None if s.player is None else standings.get(s.player, Standing(s.player)) for s in result.seats]
    rated = rate([None if b is None else b.rating for b in before], [s.rank for s in result.seats])
    out: dict[str, Standing] = {}
    for seat, was, rating in zip(result.seats, before, rated):
        if was is None:  # a guest
            continue
        best = was.biggest_win
        if seat.biggest_win is not None and _beats(seat.biggest_win, best):
            best = {"table": result.id, **seat.biggest_win}
        coins = was.coins if seat.coins is None else (was.coins or 0) + seat.coins
        out[was.player] = replace(
            was, evenings=was.evenings + 1, rounds=was.rounds + result.rounds, total=was.total + seat.total,
            coins=coins, wins=was.wins + seat.wins, zimo=was.zimo + seat.zimo,
            dianpao_paid=was.dianpao_paid + seat.dianpao_paid,
            kongs=tuple(a + b for a, b in zip(was.kongs, seat.kongs)),  # type: ignore[arg-type]
            huazhu_paid=was.huazhu_paid + seat.huazhu_paid, dajiao_paid=was.dajiao_paid + seat.dajiao_paid,
            penalties=was.penalties + seat.penalties, biggest_win=best, rating=rating)
    return out


def fold(results: Iterable[TableResult]) -> dict[str, Standing]:
    """The standings after ``results``, in order (each one :func:`step`)."""
    standings: dict[str, Standing] = {}
    for result in results:
        standings.update(step(standings, result))
    return standings


def standings_table(standings: Iterable[Standing], names: Mapping[str, str] | None = None, *,
                    min_rounds: int = MIN_ROUNDS, order: str = "total") -> list[dict]:
    """The standings in their order (§17; the module's docstring), each row the player's figures with
    ``name`` (from ``names``, else the id), ``ranked`` and ``rank`` (None when unranked)."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    names = names or {}

    def figures(s: Standing) -> tuple:
        return (s.total, s.rating.ordinal) if order == "total" else (s.rating.ordinal, s.total)

    rows = sorted(standings, key=lambda s: (s.rounds < min_rounds, *(-x for x in figures(s)),
                                            names.get(s.player, s.player).casefold(), s.player))
    ranked = [figures(s) for s in rows if s.rounds >= min_rounds]
    out = []
    for s in rows:
        is_ranked = s.rounds >= min_rounds
        rank = 1 + sum(other > figures(s) for other in ranked) if is_ranked else None
        out.append({"player": s.player, "name": names.get(s.player, s.player), "rank": rank, "ranked": is_ranked,
                    **{k: v for k, v in s.as_dict().items() if k != "player"}})
    return out


@dataclass(frozen=True, slots=True)
class Season:
    """A season of a club: its ``id``, ``name`` and when it started (and ended: None while current)."""

    id: str
    name: str
    started: str
    ended: str | None = None

    def as_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "started": self.started, "ended": self.ended}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Season:
        return cls(d["id"], d["name"], d["started"], d.get("ended"))


def season_at(seasons: Sequence[Season], at: str) -> Season | None:
    """The season current at ``at`` (RFC 3339 UTC, as the service writes times): the last one started
    at or before it (seasons in the order they were opened); None before the first.

    >>> s = [Season("s1", "spring", "2025-01-01T00:00:00.000Z", "2025-04-01T00:00:00.000Z"),
    ...      Season("s2", "summer", "2025-04-01T00:00:00.000Z")]
    >>> season_at(s, "2025-03-31T23:59:59.999Z").id, season_at(s, "2025-04-01T00:00:00.000Z").id
    ('s1', 's2')
    >>> season_at(s, "2024-12-31T00:00:00.000Z") is None
    True
    """
    found = None
    for season in seasons:
        if season.started <= at:
            found = season
    return found
