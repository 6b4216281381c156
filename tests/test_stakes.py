"""Stakes and bankrolls (docs/rules.md#s12): the worked examples, the table fold, and properties.

Expected coins are computed by hand from §12, or by the small independent model
below (:func:`model_coins`, exact fractions; it never calls the code under test).
"""

from __future__ import annotations

import math
import os
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.rules.errors import EventError
from service.rules.stakes import MAX_COINS, Stakes, StakesError, settle_coins
from service.rules.table import TableState, VoidConflict, fold, refold_round

PROPS = settings(max_examples=int(os.environ.get("STAKES_PROP_EXAMPLES", "200")), deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
NAMES = ["东", "南", "西", "北"]


# -- the independent model (§12, read literally, with fractions) ------------------------------
def model_coins(deltas, coins, coin_per_point, fee):
    """(coins after, fees, what each loser paid, what each winner received) for one ended round."""
    n = len(deltas)
    nominal = [d * coin_per_point for d in deltas]
    paid = [0] * n
    for s in range(n):
        if nominal[s] < 0:                                  # 游戏币不足扣尽
            paid[s] = -nominal[s] if coins[s] >= -nominal[s] else coins[s]
    pot = sum(paid)
    winners = [s for s in range(n) if nominal[s] > 0]
    claim = sum(nominal[w] for w in winners)
    received = [0] * n
    if winners:
        exact = {w: Fraction(pot) * nominal[w] / claim for w in winners}   # 赢家按照比例
        for w in winners:
            received[w] = math.floor(exact[w])
        left = pot - sum(received)
        by_remainder = sorted(winners, key=lambda w: (-(exact[w] - math.floor(exact[w])), w))
        for w in by_remainder[:left]:
            received[w] += 1
    held = [coins[s] - paid[s] + received[s] for s in range(n)]
    fees = [fee if held[s] >= fee else held[s] for s in range(n)]
    return [held[s] - fees[s] for s in range(n)], fees, paid, received


# -- builders ---------------------------------------------------------------------------------
def start(dealer=None):
    return {"type": "round_start"} if dealer is None else {"type": "round_start", "dealer": dealer}


def zimo(seat, fan, tile="5p"):
    return {"type": "hu", "from": None, "tile": tile, "winners": [{"seat": seat, "fan": fan}]}


def dianpao(seat, frm, fan, tile="5p"):
    return {"type": "hu", "from": frm, "tile": tile, "winners": [{"seat": seat, "fan": fan}]}


def buy_in(seat, coins):
    return {"type": "buy_in", "seat": seat, "coins": coins}


class Log:
    """A table and its log, appended record by record as a store would (incremental state)."""

    def __init__(self, ruleset, stakes, players=4, dealer=0):
        self.names = NAMES[:players]
        self.ruleset, self.stakes, self.dealer = ruleset, stakes, dealer
        self.state = TableState.new(self.names, ruleset, dealer, stakes)
        self.records: list[dict] = []

    def post(self, *bodies):
        for body in bodies:
            seq = len(self.records) + 1
            self.state, _ = self.state.apply(body, seq)
            self.records.append({"seq": seq, **body})
        return self.state

    def refuse(self, body) -> EventError:
        before = self.state.to_dict()
        with pytest.raises(EventError) as info:
            self.state.apply(body, len(self.records) + 1)
        assert self.state.to_dict() == before
        return info.value

    def void(self, target):
        """Append a void of ``target``; the state is the fold of the log with it (VoidConflict if it cannot)."""
        rec = {"seq": len(self.records) + 1, "type": "void", "target": target}
        state, summaries = fold(self.names, self.ruleset, self.dealer, self.records + [rec], self.stakes)
        self.records.append(rec)
        self.state = state
        return state, summaries

    def fold(self):
        return fold(self.names, self.ruleset, self.dealer, self.records, self.stakes)


# -- §12's worked examples ---------------------------------------------------------------------
def test_seed_001_ample_bankrolls():
    r = settle_coins([54, -18, -18, -18], Stakes(200, 400, (50_000, 50_000, 50_000, 50_000)))
    assert r.coins_delta == (10_400, -4_000, -4_000, -4_000)     # each loser 3,600 + 400; 10,800 − 400
    assert r.fees == (400, 400, 400, 400)
    assert r.coins == (60_400, 46_000, 46_000, 46_000)


def test_seed_001_seat_1_holding_only_1000():
    r = settle_coins([54, -18, -18, -18], Stakes(200, 400, (50_000, 1_000, 50_000, 50_000)))
    assert r.pot == 8_200
    assert r.coins_delta == (7_800, -1_000, -4_000, -4_000)
    assert r.fees == (400, 0, 400, 400)                          # seat 1 has nothing left for the fee
    assert r.coins[1] == 0


def test_two_winners_share_a_short_pot_by_largest_remainder():
    r = settle_coins([30, 10, -20, -20], Stakes(1, 0, (100, 100, 5, 100)))
    assert r.pot == 25                                           # 5 + 20
    assert r.coins_delta == (19, 6, -5, -20)                     # 18 + 1 (remainder .75), 6
    assert r.fees == (0, 0, 0, 0)


def test_seed_001_at_a_table():
    """The seed's round itself: 普通场 with 自摸加底, seat 0 自摸 2 fan = (12 + 6) from each."""
    t = Log({"preset": "normal", "zimo": "base"}, {"coin_per_point": 200, "fee": 400,
                                                   "bankrolls": [20_000, 1_000, 20_000, 20_000]})
    st_ = t.post(start(), zimo(0, 2))
    assert st_.balances == [54, -18, -18, -18]
    assert st_.coins == [20_000 + 7_800, 0, 16_000, 16_000]
    view = st_.round_view()
    assert view["coins_delta"] == [7_800, -1_000, -4_000, -4_000] and view["fees"] == [400, 0, 400, 400]
    assert view["bankrolls"] == [20_000, 1_000, 20_000, 20_000]
    (summary,) = t.fold()[1]
    assert summary["coins_delta"] == view["coins_delta"] and summary["fees"] == view["fees"]


# -- the rounding rule ---------------------------------------------------------------------------
def test_remainder_ties_go_to_the_lower_seat():
    # three equal winners share a pot of 2: each is owed 2/3, the two lower seats get the coins
    assert settle_coins([1, 1, 1, -3], Stakes(1, 0, (0, 0, 0, 2))).coins_delta == (1, 1, 0, -2)
    assert settle_coins([-3, 1, 1, 1], Stakes(1, 0, (1, 0, 0, 0))).coins_delta == (-1, 1, 0, 0)


def test_losers_in_full_pay_winners_exactly():
    r = settle_coins([7, 5, -4, -8], Stakes(3, 0, (0, 0, 12, 24)))
    assert r.coins_delta == (21, 15, -12, -24)


def test_fee_from_every_seat_even_with_nothing_won_or_lost():
    r = settle_coins([0, 0, 0], Stakes(10, 50, (40, 50, 60)))
    assert r.coins_delta == (-40, -50, -50) and r.fees == (40, 50, 50) and r.coins == (0, 0, 10)


def test_deltas_must_sum_to_zero():
    with pytest.raises(StakesError) as info:
        settle_coins([5, -4, 0, 0], Stakes(1, 0, (9, 9, 9, 9)))
    assert info.value.code == "bad_stakes"
    with pytest.raises(StakesError):
        settle_coins([5, -5, 0], Stakes(1, 0, (9, 9, 9, 9)))


# -- stakes values -------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, field", [
    ({"coin_per_point": 0, "fee": 0, "bankrolls": [1, 1, 1, 1]}, "coin_per_point"),
    ({"coin_per_point": 1.0, "fee": 0, "bankrolls": [1, 1, 1, 1]}, "coin_per_point"),
    ({"coin_per_point": True, "fee": 0, "bankrolls": [1, 1, 1, 1]}, "coin_per_point"),
    ({"coin_per_point": "200", "fee": 0, "bankrolls": [1, 1, 1, 1]}, "coin_per_point"),
    ({"coin_per_point": 1, "fee": -1, "bankrolls": [1, 1, 1, 1]}, "fee"),
    ({"coin_per_point": 1, "fee": 0, "bankrolls": [1, 1, -1, 1]}, "bankrolls.2"),
    ({"coin_per_point": 1, "fee": 0, "bankrolls": [1, 1, 1]}, "bankrolls"),
    ({"coin_per_point": 1, "fee": 0, "bankrolls": [1, 1, 1, 1, 1]}, "bankrolls"),
    ({"coin_per_point": 1, "fee": 0, "bankrolls": "1111"}, "bankrolls"),
    ({"coin_per_point": 1, "fee": 0, "bankrolls": [MAX_COINS, 1, 0, 0]}, "bankrolls"),
    ({"coin_per_point": 1, "fee": 0}, "bankrolls"),
    ({"fee": 0, "bankrolls": [1, 1, 1, 1]}, "coin_per_point"),
    ({"coin_per_point": 1, "bankrolls": [1, 1, 1, 1], "house": 5}, "house"),
    ([1, 0, [1, 1, 1, 1]], "stakes"),
])
def test_bad_stakes_are_refused_naming_the_member(spec, field):
    with pytest.raises(StakesError) as info:
        TableState.new(NAMES, "xuezhan", 0, spec)
    assert info.value.code == "bad_stakes" and info.value.context["field"] == field


def test_fee_defaults_to_zero_and_three_players_have_three_bankrolls():
    st_ = TableState.new(NAMES[:3], "sanren-liangfang", 0, {"coin_per_point": 5, "bankrolls": [10, 20, 30]})
    assert st_.stakes == Stakes(5, 0, (10, 20, 30)) and st_.coins == [10, 20, 30]
    with pytest.raises(StakesError):
        TableState.new(NAMES[:3], "sanren-liangfang", 0, {"coin_per_point": 5, "bankrolls": [10, 20, 30, 40]})


def test_a_table_without_stakes_has_no_coins_anywhere():
    t = Log("xuezhan", None)
    st_ = t.post(start(), zimo(0, 1), zimo(1, 1), zimo(2, 1))
    assert st_.coins is None and st_.stakes is None
    assert not {"coins_delta", "fees", "bankrolls"} & set(st_.round_view())
    assert not {"coins_delta", "fees", "bankrolls"} & set(t.fold()[1][0])
    assert t.refuse(buy_in(0, 100)).code == "no_stakes"


def test_state_round_trips_with_stakes():
    t = Log("xuezhan", {"coin_per_point": 2, "fee": 1, "bankrolls": [9, 9, 9, 9]})
    t.post(buy_in(1, 5), start(), zimo(0, 2))
    again = TableState.from_dict(t.state.to_dict())
    assert again.to_dict() == t.state.to_dict() and again.coins == t.state.coins


# -- when coins are settled --------------------------------------------------------------------
STAKES = {"coin_per_point": 10, "fee": 5, "bankrolls": [1000, 1000, 1000, 1000]}


def test_no_coins_move_until_the_round_ends():
    t = Log("xuezhan", STAKES)
    st_ = t.post(start(), {"type": "kong", "seat": 1, "kind": "concealed", "tile": "3s"}, zimo(0, 1))
    assert st_.balances == [6, 30, -18, -18] and st_.coins == [1000] * 4  # (-12 + 18, 36 - 6, ...)
    view = st_.round_view()
    assert view["coins_delta"] is None and view["fees"] is None and view["bankrolls"] == [1000] * 4


@pytest.mark.parametrize("ending, deltas", [
    (zimo(2, 1), [-6, -6, 18, -6]),                                           # normal: the first hu
    ({"type": "draw", "seats": [{"seat": s, "status": "not_ting"} for s in range(4)]}, [0, 0, 0, 0]),
    ({"type": "escape", "seat": 3}, [96, 96, 96, -288]),                     # 16 units to each
    ({"type": "round_end"}, [0, 0, 0, 0]),
])
def test_coins_settle_however_the_round_ends(ending, deltas):
    t = Log("normal", STAKES | {"bankrolls": [5000] * 4})
    st_ = t.post(start(), ending)
    assert st_.balances == deltas
    assert st_.coins == [5000 + 10 * d - 5 for d in deltas]   # ample bankrolls: nominal, then the fee
    assert st_.round_view()["fees"] == [5, 5, 5, 5]


def test_a_winner_who_left_in_xuezhan_is_paid_when_the_round_ends():
    """等游戏结束才为他加: seat 0 wins 自摸 and leaves; coins move only at the third win."""
    t = Log("xuezhan", {"coin_per_point": 10, "fee": 0, "bankrolls": [0, 1000, 1000, 60]})
    t.post(start(), zimo(0, 2), {"type": "escape", "seat": 0})      # 12 from each of three
    assert t.state.playing and t.state.coins == [0, 1000, 1000, 60]
    st_ = t.post(dianpao(1, 3, 1), dianpao(2, 3, 1, tile="6p"))     # 6 and 6 from seat 3: three have won
    assert not st_.playing and st_.balances == [36, -6, -6, -24]
    # seat 3 owes 240 and holds 60: the pot 60 + 60 + 60 = 180 goes to seat 0 alone
    assert st_.round_view()["coins_delta"] == [180, -60, -60, -60]
    assert st_.coins == [180, 940, 940, 0]


# -- buy_in ----------------------------------------------------------------------------------------
def test_buy_in_before_and_between_rounds():
    t = Log("normal", STAKES)
    t.post(buy_in(2, 500))
    assert t.state.coins == [1000, 1000, 1500, 1000]
    t.post(start(), zimo(0, 1), buy_in(1, 7), buy_in(1, 3))
    assert t.state.coins == [1000 + 180 - 5, 1000 - 60 - 5 + 10, 1500 - 65, 1000 - 65]
    assert t.fold()[0].to_dict() == t.state.to_dict()


@pytest.mark.parametrize("body, code, field", [
    (buy_in(0, 0), "bad_event", "coins"),
    (buy_in(0, -5), "bad_event", "coins"),
    (buy_in(0, 2.5), "bad_event", "coins"),
    (buy_in(0, True), "bad_event", "coins"),
    (buy_in(0, MAX_COINS + 1), "bad_event", "coins"),
    ({"type": "buy_in", "seat": 0}, "bad_event", "coins"),
    (buy_in("0", 5), "bad_event", "seat"),
    (buy_in(None, 5), "bad_event", "seat"),
    (buy_in(4, 5), "seat_out_of_range", "seat"),
    (buy_in(-1, 5), "seat_out_of_range", "seat"),
    ({"type": "buy_in", "seat": 0, "coins": 5, "note": "x"}, "bad_event", "note"),
    (buy_in(0, MAX_COINS - 3999), "too_many_coins", "coins"),
])
def test_malformed_buy_ins_are_refused(body, code, field):
    t = Log("normal", STAKES)
    err = t.refuse(body)
    assert err.code == code and err.context.get("field") == field and err.event == 1


def test_buy_in_during_a_round_is_refused():
    t = Log("xuezhan", STAKES)
    t.post(start())
    assert t.refuse(buy_in(0, 100)).code == "round_in_progress"
    t.post(zimo(0, 1))
    assert t.refuse(buy_in(0, 100)).code == "round_in_progress"   # 血战: one win does not end it
    t.post({"type": "round_end"}, buy_in(0, 100))
    assert t.state.coins[0] == 1000 + 180 - 5 + 100


def test_three_player_buy_in_seats():
    t = Log("sanren-liangfang", {"coin_per_point": 1, "fee": 0, "bankrolls": [5, 5, 5]}, players=3)
    assert t.refuse(buy_in(3, 5)).code == "seat_out_of_range"
    assert t.post(buy_in(2, 5)).coins == [5, 5, 10]


# -- a multi-round table: a bankrupt seat, a buy-in, voids ------------------------------------
def test_multi_round_table_with_a_bankrupt_seat_a_buy_in_and_a_void():
    t = Log("normal", {"coin_per_point": 10, "fee": 20, "bankrolls": [500, 100, 500, 500]})
    # round 1: seat 0 自摸 3 fan (24 from each): seat 1 owes 240, holds 100 -> bankrupt
    t.post(start(), zimo(0, 3))                                         # seqs 1-2
    assert t.state.coins == [500 + 100 + 240 + 240 - 20, 0, 500 - 240 - 20, 500 - 240 - 20]
    assert t.state.round_view()["fees"] == [20, 0, 20, 20]
    # round 2: the bankrupt seat loses again (pays nothing) while seat 2 wins on its discard
    t.post(start(), dianpao(2, 1, 2))                                   # seqs 3-4: 12 from seat 1
    assert t.state.balances == [72, -36, -12, -24]
    assert t.state.coins == [1060 - 20, 0, 240 - 20, 240 - 20]        # nothing to share: only fees
    assert t.state.round_view()["coins_delta"] == [-20, 0, -20, -20]
    # seat 1 buys in and wins round 3
    t.post(buy_in(1, 300), start(), zimo(1, 2))                         # seqs 5-7: 12 from each
    assert t.state.coins == [1040 - 120 - 20, 300 + 360 - 20, 220 - 120 - 20, 220 - 120 - 20]
    folded, summaries = t.fold()
    assert folded.to_dict() == t.state.to_dict()
    assert [s["bankrolls"] for s in summaries] == [[500, 100, 500, 500], [1060, 0, 240, 240],
                                                  [1040, 300, 220, 220]]
    # every round's coins are §12 on its deltas from its bankrolls (what /v1/rounds/settle would say)
    for s in summaries:
        assert list(settle_coins(s["deltas"], Stakes(10, 20, tuple(s["bankrolls"]))).coins_delta) == s["coins_delta"]
    # voiding round 3's last event reopens it: its coins and fees are undone
    state, summaries = t.void(7)
    assert state.playing and state.coins == [1040, 300, 220, 220] and len(summaries) == 2
    assert state.round_view()["coins_delta"] is None
    # a seat cannot buy in now (the round is open again); a different end settles from the same bankrolls
    assert t.refuse(buy_in(0, 1)).code == "round_in_progress"
    t.post(zimo(3, 1))
    assert t.state.coins == [1040 - 60 - 20, 300 - 60 - 20, 220 - 60 - 20, 220 + 180 - 20]
    assert t.fold()[0].to_dict() == t.state.to_dict()
    assert sum(t.state.coins) == 500 + 100 + 500 + 500 + 300 - 20 * (3 + 3 + 4)   # the house took the fees
    # voiding the buy-in (seq 5) takes it out of every later settlement
    state, _ = t.void(5)
    assert state.coins == [1040 - 60 - 20, 0, 220 - 60 - 20, 220 + 120 - 20]  # seat 1 pays nothing
    assert t.fold()[0].to_dict() == state.to_dict()


def test_reopening_a_round_after_a_buy_in_is_a_void_conflict():
    t = Log("normal", STAKES)
    t.post(start(), zimo(0, 1), buy_in(1, 50))
    with pytest.raises(VoidConflict) as info:
        t.void(2)
    assert info.value.code == "void_conflict" and info.value.event == 3
    t.void(3)                                  # the buy-in first, then the round's last event
    state, _ = t.void(2)
    assert state.playing and state.coins == [1000] * 4


def test_voiding_a_round_start_charges_no_fee():
    t = Log("normal", STAKES)
    t.post(start(), {"type": "round_end"})
    assert t.state.coins == [995] * 4
    t.void(2)
    state, _ = t.void(1)
    assert state.coins == [1000] * 4 and state.round_meta is None


def test_refold_from_a_round_gives_the_fold_of_the_whole_log():
    """What a store does on a void: refold from the record after the round before (buy-ins included)."""
    t = Log("normal", {"coin_per_point": 3, "fee": 2, "bankrolls": [40, 40, 40, 40]})
    t.post(buy_in(0, 10), start(), zimo(1, 2), buy_in(2, 4), buy_in(3, 1), start(), dianpao(0, 3, 1),
           buy_in(1, 9), start(), zimo(2, 1))
    _, summaries = t.fold()
    for target in range(1, len(t.records) + 1):
        void = {"seq": len(t.records) + 1, "type": "void", "target": target}
        try:
            want = fold(t.names, t.ruleset, t.dealer, t.records + [void], t.stakes)
        except VoidConflict:
            continue
        # the round the target is in, or the one after it for a buy-in between rounds (the store's
        # choice: the round before it is as good, see above)
        number = next((i for i, s in enumerate(summaries) if target <= s["last_seq"]), len(summaries))
        prior = summaries[number - 1] if number else None
        first = prior["last_seq"] + 1 if prior else 1
        got = refold_round(t.state, prior, summaries[number:], t.records[first - 1:] + [void],
                           set(t.state.voided) | {target})
        assert got[0].to_dict() == want[0].to_dict(), target
        assert got[1] == want[1][number:], target


# -- properties: §12 against the independent model ---------------------------------------------
@st.composite
def coin_rounds(draw):
    n = draw(st.sampled_from([3, 4]))
    head = draw(st.lists(st.integers(-300, 300), min_size=n - 1, max_size=n - 1))
    deltas = head + [-sum(head)]
    deltas = draw(st.permutations(deltas))
    coin_per_point = draw(st.integers(1, 500) | st.sampled_from([1, 200]))
    fee = draw(st.integers(0, 1000) | st.just(0))
    small = st.integers(0, 2000)
    coins = draw(st.lists(small | st.integers(0, 200_000) | st.just(0), min_size=n, max_size=n))
    return list(deltas), coins, coin_per_point, fee


@PROPS
@given(coin_rounds())
def test_coins_follow_the_model_and_its_properties(case):
    deltas, coins, cpp, fee = case
    r = settle_coins(deltas, Stakes(cpp, fee, tuple(coins)))
    after, fees, paid, received = model_coins(deltas, coins, cpp, fee)
    assert list(r.coins) == after and list(r.fees) == fees
    assert list(r.coins_delta) == [a - c for a, c in zip(after, coins)]
    nominal = [d * cpp for d in deltas]
    assert all(c >= 0 for c in r.coins)                                    # never negative
    assert sum(coins) - sum(r.coins) == sum(r.fees)                        # the house takes exactly the fees
    assert sum(r.coins_delta) == -sum(r.fees)
    assert all(0 <= f <= fee for f in r.fees)
    before_fee = [d + f for d, f in zip(r.coins_delta, r.fees)]           # what the round moved, fee aside
    winners = [s for s in range(len(deltas)) if nominal[s] > 0]
    for s in range(len(deltas)):
        if nominal[s] > 0:
            assert 0 <= before_fee[s] <= nominal[s]                        # never more than the nominal
        elif nominal[s] < 0 and coins[s] >= -nominal[s]:
            assert before_fee[s] == nominal[s]                             # enough coins: exactly the nominal
        elif nominal[s] < 0:
            assert before_fee[s] == -coins[s] and r.coins[s] == 0         # 扣尽
        else:
            assert before_fee[s] == 0
    pot = sum(-min(b, 0) for b in before_fee)
    assert pot == r.pot == sum(paid)
    claim = sum(nominal[w] for w in winners)
    for w in winners:                                                      # shares within one coin
        assert abs(before_fee[w] - Fraction(pot * nominal[w], claim)) < 1
    if all(coins[s] >= -nominal[s] for s in range(len(deltas)) if nominal[s] < 0):
        assert all(before_fee[w] == nominal[w] for w in winners)


# -- properties: a table's coins are the fold of its log ----------------------------------------
RULESETS = [("xuezhan", 4), ("normal", 4), ("xueliu", 4), ("sanren-liangfang", 3), ("chengdu-points", 4)]
ROUND_OPS = ("kong", "zimo", "dianpao", "escape", "draw")
TILES = {4: [f"{r}{s}" for s in "mps" for r in range(1, 10)], 3: [f"{r}{s}" for s in "ps" for r in range(1, 10)]}


@st.composite
def table_logs(draw):
    """Random bodies for a table with stakes: rounds of kongs, wins, draws, escapes, round_end,
    buy-ins anywhere (some refused), voids of random earlier records (some refused)."""
    ruleset, n = draw(st.sampled_from(RULESETS))
    stakes = {"coin_per_point": draw(st.integers(1, 50)), "fee": draw(st.integers(0, 30)),
              "bankrolls": draw(st.lists(st.integers(0, 3000), min_size=n, max_size=n))}
    seat = st.integers(0, n - 1)
    tile = st.sampled_from(TILES[n])
    ops = draw(st.lists(st.one_of(
        st.just(("start",)), st.just(("end",)), st.just(("end",)),
        st.tuples(st.just("kong"), seat, tile),
        st.tuples(st.just("zimo"), seat, st.integers(1, 4), tile),
        st.tuples(st.just("dianpao"), seat, seat, st.integers(2, 4), tile),
        st.tuples(st.just("escape"), seat),
        st.tuples(st.just("draw"), st.lists(st.sampled_from(["ting", "not_ting", "huazhu"]), min_size=n,
                                           max_size=n), st.integers(1, 3)),
        st.tuples(st.just("buy_in"), seat, st.integers(1, 500)),
        st.tuples(st.just("void"), st.integers(1, 40)),
    ), min_size=1, max_size=30))
    return ruleset, n, stakes, ops


def body_of(op, state: TableState):
    kind = op[0]
    if kind == "start":
        return start()
    if kind == "end":
        return {"type": "round_end"}
    if kind == "kong":
        return {"type": "kong", "seat": op[1], "kind": "concealed", "tile": op[2]}
    if kind == "zimo":
        return zimo(op[1], op[2], op[3])
    if kind == "dianpao":
        return dianpao(op[1], op[2], op[3], op[4])
    if kind == "escape":
        return {"type": "escape", "seat": op[1]}
    if kind == "draw":
        seats = state.round.active if state.round is not None and state.playing else range(len(op[1]))
        return {"type": "draw", "seats": [{"seat": s, "status": op[1][s]} | (
            {"dajiao_fan": op[2]} if op[1][s] == "ting" else {}) for s in seats]}
    return buy_in(op[1], op[2])


def replay_coins(records: list[dict], summaries: list[dict], stakes: dict) -> tuple[list[int], list[dict]]:
    """The coins the log defines, by the model: buy-ins and round ends in seq order."""
    voided = {r["target"] for r in records if r["type"] == "void"}
    ends = {s["last_seq"]: s for s in summaries}
    coins = list(stakes["bankrolls"])
    expected = []
    for rec in records:
        if rec["type"] == "buy_in" and rec["seq"] not in voided:
            coins[rec["seat"]] += rec["coins"]
        if rec["seq"] in ends:
            before = list(coins)
            coins, fees, _, _ = model_coins(ends[rec["seq"]]["deltas"], coins, stakes["coin_per_point"], stakes["fee"])
            expected.append({"bankrolls": before, "coins_delta": [a - b for a, b in zip(coins, before)],
                             "fees": fees})
    return coins, expected


@PROPS
@given(table_logs())
def test_a_tables_coins_are_the_fold_of_its_log(case):
    ruleset, n, stakes, ops = case
    names = NAMES[:n]
    state = TableState.new(names, ruleset, 0, stakes)
    records: list[dict] = []
    bought = 0
    for op in ops:
        seq = len(records) + 1
        if op[0] == "void":
            if not records:
                continue
            target = 1 + (op[1] - 1) % len(records)
            if target in state.voided or records[target - 1]["type"] == "void":
                continue
            rec = {"seq": seq, "type": "void", "target": target}
            try:
                new, tail = fold(names, ruleset, 0, records + [rec], stakes)
            except VoidConflict:
                continue
            # a store refolds from the last round that starts at or before the target (the round
            # before, when the target is that round's start: the round before becomes the latest again)
            _, summaries = fold(names, ruleset, 0, records, stakes)
            starts = [s["first_seq"] for s in summaries] + ([state.round_meta["start"]] if state.playing else [])
            number = max(sum(1 for f in starts if f <= target) - 1, 0)
            if starts and target == starts[number] and number:
                number -= 1
            prior = summaries[number - 1] if number else None
            first = prior["last_seq"] + 1 if prior else 1
            got, got_tail = refold_round(state, prior, summaries[number:], records[first - 1:] + [rec],
                                         set(state.voided) | {target})
            assert got.to_dict() == new.to_dict() and got_tail == tail[number:]
            state = new
            records.append(rec)
            continue
        if op[0] in ROUND_OPS and not state.playing:  # mostly a round event starts a round
            state, _ = state.apply(start(), seq)
            records.append({"seq": seq, **start()})
            seq += 1
        body = body_of(op, state)
        try:
            new, _ = state.apply(body, seq)
        except EventError:
            continue
        state = new
        records.append({"seq": seq, **body})
        bought += body["coins"] if body["type"] == "buy_in" else 0
    folded, summaries = fold(names, ruleset, 0, records, stakes)
    assert folded.to_dict() == state.to_dict()                       # the stored state is the fold
    coins, expected = replay_coins(records, summaries, stakes)
    assert state.coins == coins
    assert [{k: s[k] for k in ("bankrolls", "coins_delta", "fees")} for s in summaries] == expected
    assert all(c >= 0 for c in state.coins) and len(state.coins) == n
    voided = {r["target"] for r in records if r["type"] == "void"}
    bought = sum(r["coins"] for r in records if r["type"] == "buy_in" and r["seq"] not in voided)
    fees = sum(sum(s["fees"]) for s in summaries)
    assert sum(state.coins) == sum(stakes["bankrolls"]) + bought - fees
