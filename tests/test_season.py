"""A club's season, the rules core (docs/rules.md#s17): the fold against an independent one, the rating
against openskill run directly on the same ranks, guests, the standings' order."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openskill.models import PlackettLuce

from service.rules.season import (
    PRIOR,
    SeatResult,
    Standing,
    TableResult,
    fold,
    ranks_of,
    standings_table,
    step,
)

POOL = ["p1", "p2", "p3", "p4", "p5", "p6"]


def result(rid: str, seats: list[tuple[str | None, int]], rounds: int = 8, **facts) -> TableResult:
    """A result: (player or None for a guest, total) per seat, ranks from the totals."""
    ranks = ranks_of([t for _, t in seats])
    return TableResult(rid, f"2025-01-{len(rid):02d}T20:00:00.000Z", rounds, tuple(
        SeatResult(p, p or "客人", t, r, **(facts.get(p, {}) if p is not None else {}))
        for (p, t), r in zip(seats, ranks)))


def test_the_rating_is_openskill_plackett_luce_on_the_seats_ranks():
    """Three tables; openskill run directly on the same teams and ranks gives the same μ and σ."""
    tables = [result("t1", [("p1", 60), ("p2", -20), ("p3", -20), ("p4", -20)]),
              result("t2", [("p2", 40), ("p1", 40), ("p4", -30), ("p3", -50)]),
              result("t3", [("p3", 100), ("p1", -10), ("p2", -40), (None, -50)])]
    got = fold(tables)
    model = PlackettLuce()
    now = {p: model.rating() for p in POOL[:4]}
    for players, ranks in ((["p1", "p2", "p3", "p4"], [1, 2, 2, 2]), (["p2", "p1", "p4", "p3"], [1, 1, 3, 4]),
                           (["p3", "p1", "p2", None], [1, 2, 3, 4])):
        teams = [[now[p]] if p is not None else [model.rating()] for p in players]
        for p, team in zip(players, model.rate(teams, ranks=ranks)):
            if p is not None:
                now[p] = team[0]
    for p in POOL[:4]:
        assert (got[p].rating.mu, got[p].rating.sigma) == pytest.approx((now[p].mu, now[p].sigma), rel=1e-12)
        assert got[p].rating.ordinal == pytest.approx(now[p].mu - 3 * now[p].sigma, rel=1e-12)


def test_a_guest_is_rated_as_a_fresh_player_and_kept_nowhere():
    with_guest = step({}, result("t1", [("p1", 30), (None, 10), ("p2", -10), ("p3", -30)]))
    with_newcomer = step({}, result("t1", [("p1", 30), ("p9", 10), ("p2", -10), ("p3", -30)]))
    assert sorted(with_guest) == ["p1", "p2", "p3"]
    for p in ("p1", "p2", "p3"):
        assert with_guest[p].rating == with_newcomer[p].rating


def test_every_player_starts_at_the_prior_and_equal_totals_share_a_rank():
    after = step({}, result("t1", [("p1", 0), ("p2", 0), ("p3", 0), ("p4", 0)]))
    assert {s.rating.mu for s in after.values()} == {PRIOR.mu}  # (four-way tie: no one moves)
    assert ranks_of([5, 5, 5, -15]) == [1, 1, 1, 4]


def test_a_player_twice_at_one_table_is_refused():
    with pytest.raises(ValueError):
        step({}, result("t1", [("p1", 10), ("p1", -10), ("p2", 0), ("p3", 0)]))


def test_order_ranked_first_then_total_then_rating_then_name():
    s = {
        "a": Standing("a", rounds=16, total=50), "b": Standing("b", rounds=16, total=50),
        "c": Standing("c", rounds=15, total=500), "d": Standing("d", rounds=20, total=-10),
    }
    s["b"] = Standing("b", rounds=16, total=50, rating=PRIOR.__class__(30.0, 5.0))  # better ordinal than a
    rows = standings_table(s.values(), {"a": "阿珍", "b": "老王", "c": "小李", "d": "大刘"}, min_rounds=16)
    assert [(r["player"], r["rank"], r["ranked"]) for r in rows] == [("b", 1, True), ("a", 2, True),
                                                                    ("d", 3, True), ("c", None, False)]
    by_rating = standings_table(s.values(), min_rounds=16, order="rating")
    assert [r["player"] for r in by_rating] == ["b", "a", "d", "c"]  # b's ordinal, then a and d at the prior by total
    tie = standings_table([Standing("x", rounds=1), Standing("y", rounds=1)], {"x": "B", "y": "a"}, min_rounds=0)
    assert [(r["player"], r["rank"]) for r in tie] == [("y", 1), ("x", 1)]  # a tie on both shares a rank


def _independent(results: list[TableResult]) -> dict[str, dict]:
    """The season's figures computed afresh: sums over every seat of each player, the biggest win by points
    then fan then the earliest, and the rating from openskill directly."""
    model = PlackettLuce()
    out: dict[str, dict] = {}
    rating: dict = {}
    for r in results:
        teams = [[rating.get(s.player) or model.rating()] if s.player else [model.rating()] for s in r.seats]
        rated = model.rate(teams, ranks=[s.rank for s in r.seats])
        for s, team in zip(r.seats, rated):
            if s.player is None:
                continue
            rating[s.player] = team[0]
            f = out.setdefault(s.player, {"evenings": 0, "rounds": 0, "total": 0, "wins": 0, "zimo": 0,
                                          "penalties": 0, "coins": None, "best": None})
            f["evenings"] += 1
            f["rounds"] += r.rounds
            f["total"] += s.total
            f["wins"] += s.wins
            f["zimo"] += s.zimo
            f["penalties"] += s.penalties
            if s.coins is not None:
                f["coins"] = (f["coins"] or 0) + s.coins
            if s.biggest_win and (f["best"] is None or (s.biggest_win["points"], s.biggest_win["fan"])
                                  > (f["best"]["points"], f["best"]["fan"])):
                f["best"] = {"table": r.id, **s.biggest_win}
    for p, f in out.items():
        f["mu"], f["sigma"] = rating[p].mu, rating[p].sigma
    return out


@st.composite
def seasons(draw) -> list[TableResult]:
    out = []
    for i in range(draw(st.integers(1, 8))):
        players = draw(st.lists(st.sampled_from(POOL), min_size=2, max_size=4, unique=True))
        guests = draw(st.integers(0, 4 - len(players)))
        seats: list[tuple[str | None, int]] = [(p, draw(st.integers(-200, 200))) for p in players]
        seats += [(None, draw(st.integers(-200, 200))) for _ in range(guests)]
        seats = draw(st.permutations(seats))
        ranks = ranks_of([t for _, t in seats])
        stakes = draw(st.booleans())
        out.append(TableResult(f"t{i}", f"2025-02-{i + 1:02d}T20:00:00.000Z", draw(st.integers(0, 12)), tuple(
            SeatResult(p, p or "客人", t, r, wins=draw(st.integers(0, 3)), zimo=draw(st.integers(0, 2)),
                       penalties=draw(st.integers(0, 50)), coins=t * 10 if stakes else None,
                       biggest_win=draw(st.none() | st.builds(lambda pts, fan: {"round": 1, "fan": fan, "patterns": [],
                                                                                "points": pts},
                                                              st.integers(1, 100), st.integers(0, 4))))
            for (p, t), r in zip(seats, ranks))))
    return out


@given(seasons())
def test_the_fold_is_the_sums_and_the_rating_computed_afresh(results):
    got = fold(results)
    want = _independent(results)
    assert sorted(got) == sorted(want)
    for p, f in want.items():
        s = got[p]
        assert (s.evenings, s.rounds, s.total, s.wins, s.zimo, s.penalties, s.coins) == \
            (f["evenings"], f["rounds"], f["total"], f["wins"], f["zimo"], f["penalties"], f["coins"])
        assert s.biggest_win == f["best"]
        assert (s.rating.mu, s.rating.sigma) == pytest.approx((f["mu"], f["sigma"]), rel=1e-12)


@given(seasons())
def test_a_fold_is_its_steps_and_survives_storage(results):
    """Step by step through the stored form (as the store keeps them) is the fold itself."""
    kept: dict[str, dict] = {}
    for r in results:
        now = {p: Standing.from_dict(d) for p, d in kept.items()}
        for p, s in step(now, TableResult.from_dict(r.as_dict())).items():
            kept[p] = s.as_dict()
    assert {p: Standing.from_dict(d) for p, d in kept.items()} == fold(results)
