"""The end of the evening (service/rules/summary.py): a table's summary and its settle-up.

Worked examples, each computed by hand from the rule book (docs/rules.md#s10.1, with #s6 to #s8,
#s12 to #s14), then properties: the settle-up against a brute-force search for the fewest
payments, and the facts of random evenings (the rich valid rounds of test_settle_properties,
with random voids taken the store's way, through ``refold_round``) against the fold of the
log from scratch and against an independent reading of the log.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

import pytest
from hypothesis import event as hypothesis_event
from hypothesis import given, settings
from hypothesis import strategies as st

from service.rules.errors import EventError
from service.rules.fan import Win, score
from service.rules.hand import parse_hand
from service.rules.ruleset import Ruleset
from service.rules.summary import BiggestWin, Payment, settle_up, summarize
from service.rules.table import RoundFacts, TableState, VoidConflict, fold, refold_round
from tests.test_settle_properties import PROPS, rounds, voids_arg

NAMES = ["东", "南", "西", "北"]


class Evening:
    """A table as a store keeps it: the state stepped record by record, the ended rounds' summaries
    pushed as rounds end, and voids refolded from the round they fall in (``refold_round``)."""

    def __init__(self, ruleset, n=4, dealer=0, stakes=None):
        self.args: tuple[list[str], Ruleset | str | Mapping | None, int] = (NAMES[:n], ruleset, dealer)
        self.stakes = stakes
        self.state = TableState.new(*self.args, stakes=stakes)
        self.records: list[dict] = []
        self.summaries: list[dict] = []

    def post(self, *bodies):
        for body in bodies:
            seq = len(self.records) + 1
            done = self.state.rounds_done
            self.state, _ = self.state.apply(body, seq)  # (raises EventError: then nothing is kept)
            self.records.append({"seq": seq, **body})
            if self.state.rounds_done > done:
                self.summaries.append(self.state.round_summary())
        return self

    def void(self, target: int):
        """Void ``target`` as the store does: refold from the round before the target's round."""
        st_ = self.state
        rec = {"seq": len(self.records) + 1, "type": "void", "target": target}
        starts = [s["first_seq"] for s in self.summaries] + ([st_.round_meta["start"]] if st_.playing else [])
        number = max(sum(1 for f in starts if f <= target) - 1, 0)
        if starts and target == starts[number] and number:
            number -= 1  # voiding a round_start: the round before it becomes the latest again
        prior = self.summaries[number - 1] if number else None
        first = prior["last_seq"] + 1 if prior else 1
        new, tail = refold_round(st_, prior, self.summaries[number:], self.records[first - 1:] + [rec],
                                 set(st_.voided) | {target})
        self.state, self.summaries = new, self.summaries[:number] + tail
        self.records.append(rec)
        return self

    def fold(self):
        return fold(*self.args, self.records, self.stakes)

    def summary(self, **kw):
        return summarize(self.state, self.summaries, **kw)


def start(dealer=None):
    return {"type": "round_start"} | ({} if dealer is None else {"dealer": dealer})


def kong(seat, kind, tile, frm=None):
    return {"type": "kong", "seat": seat, "kind": kind, "tile": tile} | ({} if frm is None else {"from": frm})


def hu(tile, winners, frm=None, **flags):
    entries = [{"seat": s, "fan": w} if isinstance(w, int) else {"seat": s, "hand": {"tiles": w}}
               for s, w in winners]
    return {"type": "hu", "tile": tile, "winners": entries} | ({} if frm is None else {"from": frm}) | flags


def seat_facts(summary, name):
    return [getattr(s, name) for s in summary.seats]


def kongs(summary):
    return [s.kongs.as_dict() for s in summary.seats]


def clears(balances, payments, field="points"):
    left = list(balances)
    for p in payments:
        amount = getattr(p, field)
        left[p.payer] += amount
        left[p.payee] -= amount
    return left == [0] * len(balances)


# -- worked examples -------------------------------------------------------------------------
def xuezhan_evening() -> Evening:
    """血战, base 6, three rounds.

    Round 1: seat 1 面下杠 5m (6 from each) and seat 0 robs it (抢杠胡, 2 fan: 12; the kong's 6s go
    back); seat 2 直杠 9p from seat 3 (6) and discards to seat 1 (杠上炮, 3 fan: 24, and the 6 by
    呼叫转移); seat 3 自摸 1 fan, paid by seat 2 alone (6): [12, 18, -30, 0].
    Round 2: seat 2 暗杠 2s (12 from each); seat 0 自摸 平胡 with a hand (6 from each: 18); draw:
    seat 1 花猪, seat 2 not ting, seat 3 ting (大叫 2 fan, 12).  退税: seat 2 hands back 12 to each;
    查花猪: seat 1 pays 96 to seats 2, 3 and the winner 0; 查大叫: seat 2 pays seat 3 12:
    [114, -294, 78, 102].
    Round 3: 一炮多响, seat 3's discard to seats 0 (1 fan, 6) and 1 (2 fan, 12); seat 2 escapes,
    16 units (96) to seat 3, the only other seat still in: [6, 12, -96, 78].
    """
    return Evening("xuezhan").post(
        start(), kong(1, "added", "5m"), hu("5m", [(0, 2)], frm=1, robbing_kong=True),
        kong(2, "direct", "9p", frm=3), hu("3s", [(1, 3)], frm=2, after_kong=True), hu("7p", [(3, 1)]),
        start(), kong(2, "concealed", "2s"), hu("7p", [(0, "23445677p345789s")]),
        {"type": "draw", "seats": [{"seat": 1, "status": "huazhu"}, {"seat": 2, "status": "not_ting"},
                                   {"seat": 3, "status": "ting", "dajiao_fan": 2}]},
        start(), hu("5s", [(0, 1), (1, 2)], frm=3), {"type": "escape", "seat": 2},
    )


def test_a_xuezhan_evening():
    t = xuezhan_evening()
    assert [s["deltas"] for s in t.summaries] == [[12, 18, -30, 0], [114, -294, 78, 102], [6, 12, -96, 78]]
    s = t.summary(table_id="abc", finished_at="2025-01-01T23:00:00.000Z")
    assert (s.id, s.rounds, s.finished_at, s.players) == ("abc", 3, "2025-01-01T23:00:00.000Z", tuple(NAMES))
    assert seat_facts(s, "total") == [132, -264, -48, 180] == t.state.balances
    assert seat_facts(s, "rank") == [2, 4, 3, 1]
    assert seat_facts(s, "wins") == [3, 2, 0, 1]
    assert seat_facts(s, "zimo") == [1, 0, 0, 1]
    # 抢杠胡 (seat 1, robbed), 杠上炮 (seat 2), 一炮多响 (seat 3, once)
    assert seat_facts(s, "dianpao_paid") == [0, 1, 1, 1]
    # the robbed 面下杠 is no kong; the 直杠 whose income went to the winner and the 暗杠 handed back stood
    assert kongs(s) == [{"direct": 0, "added": 0, "concealed": 0}, {"direct": 0, "added": 0, "concealed": 0},
                        {"direct": 1, "added": 0, "concealed": 1}, {"direct": 0, "added": 0, "concealed": 0}]
    assert seat_facts(s, "huazhu_paid") == [0, 288, 0, 0]
    assert seat_facts(s, "dajiao_paid") == [0, 0, 12, 0]
    assert seat_facts(s, "escapes") == [0, 0, 1, 0]
    assert seat_facts(s, "biggest_win") == [
        BiggestWin(2, 1, ("pinghu",), 18),  # the 自摸 (18) beats the 2-fan 抢杠胡 (12): points first
        BiggestWin(1, 3, (), 24),           # 杠上炮: its own 24, not the kong's 6 passed on
        None,
        BiggestWin(1, 1, (), 6),
    ]
    assert s.settle_up == (Payment(1, 0, 84), Payment(1, 3, 180), Payment(2, 0, 48))
    d = s.as_dict()
    assert list(d) == ["id", "players", "rounds", "finished_at", "seats", "settle_up"]
    assert d["seats"][1] == {
        "seat": 1, "name": "南", "total": -264, "rank": 4, "wins": 2, "zimo": 0, "dianpao_paid": 1,
        "kongs": {"direct": 0, "added": 0, "concealed": 0}, "huazhu_paid": 288, "dajiao_paid": 0, "escapes": 0,
        "biggest_win": {"round": 1, "fan": 3, "patterns": [], "points": 24}, "penalties_paid": 0, "adjusted": 0,
    }
    assert d["settle_up"] == [{"from": 1, "to": 0, "points": 84}, {"from": 1, "to": 3, "points": 180},
                              {"from": 2, "to": 0, "points": 48}]
    # the store's path and the fold of the log agree, summaries included
    folded, summaries = t.fold()
    assert folded.to_dict() == t.state.to_dict() and summaries == t.summaries
    assert summarize(folded, summaries) == t.summary()


def test_the_round_summary_keeps_the_facts_by_name():
    t = xuezhan_evening()
    assert t.summaries[0]["facts"] == {
        "wins": [1, 1, 0, 1], "zimo": [0, 0, 0, 1], "dianpao_paid": [0, 1, 1, 0], "kongs_direct": [0, 0, 1, 0],
        "biggest_win": [{"seq": 3, "fan": 2, "patterns": [], "points": 12},
                        {"seq": 5, "fan": 3, "patterns": [], "points": 24}, None,
                        {"seq": 6, "fan": 1, "patterns": [], "points": 6}],
    }  # (kongs_added is 0 for every seat again after the robbery: left out)
    assert t.summaries[1]["facts"]["huazhu_paid"] == [0, 288, 0, 0]
    assert t.summaries[2]["facts"]["escapes"] == [0, 0, 1, 0]
    assert RoundFacts.from_dict(t.summaries[0]["facts"], 4).to_dict() == t.summaries[0]["facts"]


def test_a_void_that_removes_a_win_changes_the_summary():
    t = xuezhan_evening()
    t.void(12)  # the 一炮多响: seat 2's escape now pays every other seat (none has won)
    assert t.summaries[2]["deltas"] == [96, 96, -288, 96]
    s = t.summary()
    assert seat_facts(s, "wins") == [2, 1, 0, 1] and seat_facts(s, "dianpao_paid") == [0, 1, 1, 0]
    assert seat_facts(s, "total") == t.state.balances == [222, -180, -240, 198]
    folded, summaries = t.fold()
    assert folded.to_dict() == t.state.to_dict() and summaries == t.summaries
    assert summarize(folded, summaries) == s


def test_voiding_a_robbery_gives_the_kong_back():
    t = Evening("xuezhan").post(start(), kong(1, "added", "5m"), hu("5m", [(0, 2)], frm=1, robbing_kong=True),
                                {"type": "round_end"}, start())
    s = t.summary()
    assert s.seats[1].kongs.added == 0 and s.seats[1].dianpao_paid == 1 and s.seats[0].wins == 1
    t.void(3)  # the 抢杠胡: the 面下杠 stands again (6 from each), and seat 0 has not won
    s = t.summary()
    assert s.seats[1].kongs.added == 1 and s.seats[1].dianpao_paid == 0 and s.seats[0].wins == 0
    assert s.seats[0].biggest_win is None and seat_facts(s, "total") == [-6, 18, -6, -6]
    assert summarize(*t.fold()) == s


def test_a_round_in_play_counts_so_far():
    t = Evening("xuezhan").post(start(), kong(0, "concealed", "1m"), hu("2p", [(1, 2)], frm=3))
    s = t.summary()
    assert s.rounds == 0 and seat_facts(s, "total") == t.state.balances == [36, 0, -12, -24]
    assert seat_facts(s, "wins") == [0, 1, 0, 0] and s.seats[0].kongs.concealed == 1
    assert s.seats[1].biggest_win == BiggestWin(1, 2, (), 12)
    assert s.settle_up == (Payment(2, 0, 12), Payment(3, 0, 24))


def test_a_xueliu_table_with_repeated_wins():
    """docs/rules.md#s13's example, then a second round in which seat 1 wins as big again."""
    t = Evening("xueliu").post(
        start(), kong(0, "concealed", "5m"), hu("3p", [(1, 2)]), hu("4p", [(1, 1)], frm=0),
        kong(1, "concealed", "9p"),
        {"type": "draw", "seats": [{"seat": 0, "status": "not_ting"}, {"seat": 2, "status": "ting", "dajiao_fan": 2},
                                   {"seat": 3, "status": "huazhu"}]},
        start(), hu("6s", [(1, 2)]), hu("7s", [(1, 1)], frm=2), {"type": "round_end"},
    )
    assert t.summaries[0]["deltas"] == [54, 174, 84, -312] and t.summaries[0]["next_dealer"] == 1
    s = t.summary()
    assert seat_facts(s, "wins") == [0, 4, 0, 0] and seat_facts(s, "zimo") == [0, 2, 0, 0]
    assert seat_facts(s, "dianpao_paid") == [1, 0, 1, 0]
    assert [k["concealed"] for k in kongs(s)] == [1, 1, 0, 0]
    assert seat_facts(s, "huazhu_paid") == [0, 0, 0, 288] and seat_facts(s, "dajiao_paid") == [12, 0, 0, 0]
    # two 自摸 of 2 fan (36 each): a tie on points and fan keeps the earlier
    assert s.seats[1].biggest_win == BiggestWin(1, 2, (), 36)
    assert sum(seat_facts(s, "total")) == 0 and clears(seat_facts(s, "total"), s.settle_up)


def test_a_three_player_table():
    """docs/rules.md#s14's example, seat 0's 自摸 given as a hand: 清七对 5 fan, capped at 4."""
    t = Evening("sanren-liangfang", n=3).post(
        start(), kong(0, "direct", "5p", frm=1), hu("3s", [(1, 2)], frm=2), {"type": "escape", "seat": 1},
        hu("9s", [(0, "11334466778899s")]),
    )
    assert t.summaries[0]["deltas"] == [60, 0, -60] and t.summaries[0]["next_dealer"] == 1
    s = t.summary()
    assert len(s.seats) == 3 and s.rounds == 1
    assert seat_facts(s, "total") == [60, 0, -60] and seat_facts(s, "rank") == [1, 2, 3]
    assert seat_facts(s, "wins") == [1, 1, 0] and seat_facts(s, "zimo") == [1, 0, 0]
    assert seat_facts(s, "dianpao_paid") == [0, 0, 1] and seat_facts(s, "escapes") == [0, 1, 0]
    assert kongs(s)[0] == {"direct": 1, "added": 0, "concealed": 0}
    assert s.seats[0].biggest_win == BiggestWin(1, 4, ("qingqidui",), 48)  # the fan after the cap
    assert s.settle_up == (Payment(2, 0, 60),)


def test_biggest_win_ties_and_dianganghua_paid_by_the_feeder():
    """chengdu-points (linear, base 1, kongs pay nothing, 点杠花 paid by the feeder as a 点炮)."""
    t = Evening("chengdu-points").post(
        start(), kong(0, "concealed", "1m"), hu("2p", [(0, 1)]),                # 自摸 1 fan: 1 from each, 3
        start(0), hu("3p", [(0, 3)], frm=1),                                    # 3 fan on a discard: 3
        start(0), kong(0, "direct", "4s", frm=2), hu("5s", [(0, 3)], after_kong=True),  # 点杠花: 3 from seat 2
    )
    assert [s["deltas"] for s in t.summaries] == [[3, -1, -1, -1], [3, -3, 0, 0], [3, 0, -3, 0]]
    s = t.summary()
    assert s.seats[0].biggest_win == BiggestWin(2, 3, (), 3)  # 3 points each: the most fan, then the earliest
    assert s.seats[0].wins == 3 and s.seats[0].zimo == 1      # the 点杠花 is a win on the feeder's discard
    assert seat_facts(s, "dianpao_paid") == [0, 1, 1, 0]
    assert kongs(s)[0] == {"direct": 1, "added": 0, "concealed": 1}  # kongs that pay nothing still count


def test_stakes_with_a_short_seat_and_a_buy_in():
    """三人两房 at 100 coins a point, fee 50.  Round 1: seat 2 escapes owing 96 to each but holds 300
    (coins [+100, +100, -300], fees [50, 50, 0]); seat 2 buys 500.  Round 2: seat 0 暗杠 (12 from each
    other seat: nominal 1,200 each), seat 1 holds 1,100 and seat 2 500: seat 0 takes the 1,600 pot, pays
    its fee (coins [+1550, -1100, -500]).  Seat 1 is up in points (84) but down in coins (-950 to
    the others, besides its 50 of fees): the settle-up squares the coin results, so seat 1 pays and
    seat 2, short in round 1, pays what it lost and no more (docs/rules.md#s10.1)."""
    t = Evening("sanren-liangfang", n=3, stakes={"coin_per_point": 100, "fee": 50, "bankrolls": [1000, 1000, 300]})
    t.post(start(), {"type": "escape", "seat": 2}, {"type": "buy_in", "seat": 2, "coins": 500},
           start(), kong(0, "concealed", "5p"), {"type": "round_end"})
    assert t.state.coins == [2650, 0, 0] and [x["coins_delta"] for x in t.summaries] == [[100, 100, -300],
                                                                                          [1550, -1100, -500]]
    s = t.summary()
    assert seat_facts(s, "total") == [120, 84, -204]
    # coins now - bankroll - buy-ins + fees: what passed between the players
    assert seat_facts(s, "coins") == [1750, -950, -800]
    assert seat_facts(s, "fees") == [100, 50, 0] and seat_facts(s, "buy_ins") == [0, 0, 500]
    # both debtors pay the one creditor: n - 1 = 2 payments, none of 0, in coins
    assert s.settle_up == (Payment(1, 0, None, 950), Payment(2, 0, None, 800))
    assert clears(seat_facts(s, "coins"), s.settle_up, "coins")
    assert s.as_dict()["seats"][2] | {"kongs": None} == {
        "seat": 2, "name": "西", "total": -204, "rank": 3, "wins": 0, "zimo": 0, "dianpao_paid": 0, "kongs": None,
        "huazhu_paid": 0, "dajiao_paid": 0, "escapes": 1, "biggest_win": None, "penalties_paid": 0, "adjusted": 0,
        "coins": -800, "fees": 0, "buy_ins": 500}
    assert s.as_dict()["settle_up"] == [{"from": 1, "to": 0, "coins": 950}, {"from": 2, "to": 0, "coins": 800}]


def test_stakes_in_a_round_being_played_settle_no_coins_yet():
    """A round in play has moved no coins yet: the settle-up, in coins, has nothing to square."""
    t = Evening("xuezhan", stakes={"coin_per_point": 10, "fee": 5, "bankrolls": [1000] * 4})
    t.post(start(), kong(2, "concealed", "7s"))
    s = t.summary()
    assert seat_facts(s, "total") == [-12, -12, 36, -12]
    assert seat_facts(s, "coins") == [0] * 4 and seat_facts(s, "fees") == [0] * 4
    assert s.settle_up == ()


def test_stakes_paid_in_full_settle_up_on_the_same_payments():
    t = Evening("xuezhan", stakes={"coin_per_point": 10, "fee": 5, "bankrolls": [10_000] * 4})
    t.post(start(), kong(2, "concealed", "7s"), hu("5p", [(0, 2)]), hu("9m", [(1, 1)], frm=3),
           {"type": "round_end"}, {"type": "buy_in", "seat": 3, "coins": 70})
    s = t.summary()
    assert seat_facts(s, "total") == [24, -18, 24, -30] and seat_facts(s, "fees") == [5] * 4
    assert seat_facts(s, "coins") == [240, -180, 240, -300] and seat_facts(s, "buy_ins") == [0, 0, 0, 70]
    # no seat ran short: the coins are the points at 10 a point, and so are the payments
    assert s.settle_up == (Payment(1, 2, None, 180), Payment(3, 0, None, 240), Payment(3, 2, None, 60))
    assert clears(seat_facts(s, "coins"), s.settle_up, "coins")


def test_states_and_summaries_stored_before_the_facts_read_as_no_facts():
    t = xuezhan_evening()
    old_state = {k: v for k, v in t.state.to_dict().items() if k != "round_facts"}
    old_summaries = [{k: v for k, v in x.items() if k != "facts"} for x in t.summaries]
    st_ = TableState.from_dict(old_state)
    assert st_.facts == RoundFacts.empty(4)
    s = summarize(st_, old_summaries)
    assert seat_facts(s, "total") == t.state.balances and s.rounds == 3
    assert seat_facts(s, "wins") == [0] * 4 and seat_facts(s, "biggest_win") == [None] * 4
    # a round in play from then on counts its later records
    st_.step(start(), 14)
    st_.step(hu("1m", [(2, 1)], frm=0), 15)
    assert summarize(st_, old_summaries).seats[2].wins == 1


def test_summaries_must_be_every_ended_round():
    t = xuezhan_evening()
    with pytest.raises(ValueError, match="3 ended round"):
        summarize(t.state, t.summaries[1:])


# -- settle_up: properties ---------------------------------------------------------------------
@st.composite
def balance_lists(draw, max_seats=6):
    n = draw(st.integers(0, max_seats))
    amount = st.integers(-300, 300) | st.sampled_from([0, 6, -6, 12, -12, 96, -96])
    head = draw(st.lists(amount, min_size=max(n - 1, 0), max_size=max(n - 1, 0)))
    return head + [-sum(head)] if n else []


def fewest_by_search(balances) -> int:
    """The fewest payments, by breadth-first search: a payment may clear either of its two seats.

    (Any set of payments can be ordered so that each clears one seat, its seat's last; so this
    search over "one seat squares up with another" finds the minimum.)"""
    start = tuple(balances)
    seen, queue = {start}, deque([(start, 0)])
    while queue:
        state, depth = queue.popleft()
        if not any(state):
            return depth
        for i, b in enumerate(state):
            if not b:
                continue
            for j in range(len(state)):
                if j != i:
                    moved = list(state)
                    moved[i], moved[j] = 0, moved[j] + b
                    nxt = tuple(moved)
                    if nxt not in seen:
                        seen.add(nxt)
                        queue.append((nxt, depth + 1))
    raise AssertionError("unreachable")


@settings(max_examples=300, deadline=None)
@given(balance_lists())
def test_settle_up_clears_every_balance_in_at_most_n_minus_1_payments(balances):
    payments = settle_up(balances)
    assert clears(balances, payments)
    assert len(payments) <= max(sum(1 for b in balances if b) - 1, 0)
    for p in payments:
        assert p.points > 0 and p.coins is None
        assert balances[p.payer] < 0 < balances[p.payee]  # a debtor pays, a creditor is paid
    assert len({(p.payer, p.payee) for p in payments}) == len(payments)
    assert list(payments) == sorted(payments, key=lambda p: (p.payer, p.payee))
    assert settle_up(list(balances)) == payments  # deterministic


@settings(max_examples=300, deadline=None)
@given(balance_lists(max_seats=4))
def test_settle_up_is_the_fewest_payments(balances):
    assert len(settle_up(balances)) == fewest_by_search(balances)


def test_settle_up_examples():
    assert settle_up([]) == () and settle_up([0, 0, 0]) == ()
    assert settle_up([5, -5, 0, 0]) == (Payment(1, 0, 5),)
    assert settle_up([7, 3, -3, -7]) == (Payment(2, 1, 3), Payment(3, 0, 7))  # two pairs, not three payments
    assert settle_up([-4, 2, 2]) == (Payment(0, 1, 2), Payment(0, 2, 2))
    with pytest.raises(ValueError):
        settle_up([1, 1])
    with pytest.raises(ValueError):
        settle_up([True, -1])


# -- random evenings: the facts are the fold of the log --------------------------------------
def reference_summary(ev: Evening, spec) -> dict:
    """What the summary must say, read from the log alone (its records not voided, stepped once
    through a fresh table to learn each one's transfers), with its own reading of the facts."""
    voided = {r["target"] for r in ev.records if r["type"] == "void"}
    rules = Ruleset.from_spec(spec)
    n = rules.players
    facts = {k: [0] * n for k in ("wins", "zimo", "dianpao_paid", "direct", "added", "concealed", "huazhu_paid",
                                  "dajiao_paid", "escapes", "buy_ins")}
    best: list = [None] * n
    table = TableState.new(*ev.args, stakes=ev.stakes)
    for rec in ev.records:
        if rec["type"] == "void" or rec["seq"] in voided:
            continue
        body = {k: v for k, v in rec.items() if k != "seq"}
        out = table.step(body, rec["seq"])
        number = table.round_meta["number"] if table.round_meta else 0
        for t in out:
            if t.reason in ("huazhu", "dajiao"):
                facts[t.reason + "_paid"][t.payer] += t.points
        kind = body["type"]
        if kind == "kong":
            facts[body["kind"]][body["seat"]] += 1
        elif kind == "escape":
            facts["escapes"][body["seat"]] += 1
        elif kind == "buy_in":
            facts["buy_ins"][body["seat"]] += body["coins"]
        elif kind == "hu":
            feeder = [t.payer for t in out if t.reason == "dianpao"] if body.get("from") is None else []
            discarder = body.get("from", None) if not feeder else feeder[0]
            if discarder is not None:
                facts["dianpao_paid"][discarder] += 1
            if body.get("robbing_kong"):
                facts["added"][body["from"]] -= 1
            for w in body["winners"]:
                seat = w["seat"]
                facts["wins"][seat] += 1
                facts["zimo"][seat] += discarder is None
                points = sum(t.points for t in out if t.payee == seat and t.reason in ("dianpao", "zimo"))
                patterns: tuple[str, ...]
                if "fan" in w:
                    fan, patterns = min(w["fan"], rules.cap or w["fan"]), ()
                else:
                    flags = {f: body.get(f, False) for f in ("after_kong", "robbing_kong", "last_tile", "heavenly",
                                                           "earthly")}
                    hand = w["hand"]
                    sc = score(parse_hand(hand["tiles"], hand.get("melds", [])),
                               Win(body["tile"], self_drawn=body.get("from") is None, **flags), ruleset=rules)
                    fan, patterns = sc.fan, tuple(p.id for p in sc.patterns)
                    if feeder and "zimo" in patterns:  # 点杠花 paid by the feeder: no 自摸加番
                        patterns = tuple(p for p in patterns if p != "zimo")
                        fan = min(sc.raw_fan - 1, rules.cap or sc.raw_fan)
                key = (points, fan, -number, -rec["seq"])
                if best[seat] is None or key > best[seat][0]:
                    best[seat] = (key, number, fan, patterns, points)
    return facts | {"best": best, "balances": table.balances}


def evenings():
    kinds = st.one_of(rounds(), rounds(mode="xueliu"), rounds(players=3), rounds(xuezhan=True))
    return st.tuples(kinds, st.lists(st.integers(0, 2), min_size=1, max_size=3), st.booleans(), st.data())


@PROPS
@given(evenings())
def test_facts_after_events_and_voids_are_the_fold_of_the_log(case):
    (spec, m), more, with_stakes, data = case
    stakes = None
    if with_stakes:
        stakes = {"coin_per_point": data.draw(st.sampled_from([1, 10, 100])), "fee": data.draw(st.integers(0, 30)),
                  "bankrolls": data.draw(st.lists(st.integers(0, 3000), min_size=m.n, max_size=m.n))}
    ev = Evening(spec, n=m.n, dealer=m.dealer, stakes=stakes)
    bodies = []
    for _ in range(1 + len(more)):
        bodies += [{"type": "round_start", "dealer": m.dealer, "voids": voids_arg(m)}] + m.events
        bodies += [] if m.ended else [{"type": "round_end"}]
        if stakes is not None and data.draw(st.booleans()):
            bodies.append({"type": "buy_in", "seat": data.draw(st.integers(0, m.n - 1)),
                           "coins": data.draw(st.integers(1, 500))})
    for body in bodies:
        try:
            ev.post(body)
        except EventError:
            pass  # (after a void, a record may no longer hold: it is not logged)
        if data.draw(st.integers(0, 4)) == 0:
            target = data.draw(st.integers(1, len(ev.records)))
            if ev.records[target - 1]["type"] != "void" and target not in ev.state.voided:
                try:
                    ev.void(target)
                except VoidConflict:
                    pass
    folded, summaries = ev.fold()
    assert folded.to_dict() == ev.state.to_dict() and summaries == ev.summaries
    got = ev.summary()
    hypothesis_event(f"voids that held: {min(sum(r['type'] == 'void' for r in ev.records), 3)}")
    hypothesis_event(f"wins: {min(sum(s.wins for s in got.seats), 5)}")
    hypothesis_event(f"a win with patterns: {any(s.biggest_win and s.biggest_win.patterns for s in got.seats)}")
    assert got == summarize(folded, summaries)
    assert TableState.from_dict(ev.state.to_dict()).facts == ev.state.facts
    # the totals are the balances, and the settle-up clears them
    totals = [s.total for s in got.seats]
    assert totals == ev.state.balances and sum(totals) == 0
    assert stakes is not None or clears(totals, got.settle_up)  # (with stakes, in coins: below)
    assert all(s.rank == 1 + sum(t > s.total for t in totals) for s in got.seats)
    # the facts are those of an independent reading of the log
    ref = reference_summary(ev, spec)
    assert ref["balances"] == totals
    for name in ("wins", "zimo", "dianpao_paid", "huazhu_paid", "dajiao_paid", "escapes"):
        assert seat_facts(got, name) == ref[name], name
    assert kongs(got) == [{k: ref[k][s] for k in ("direct", "added", "concealed")} for s in range(m.n)]
    for seat, want in zip(got.seats, ref["best"]):
        if want is None:
            assert seat.biggest_win is None
            continue
        _key, number, fan, patterns, points = want
        assert seat.biggest_win == BiggestWin(number, fan, patterns, points)
    if stakes is not None:
        assert seat_facts(got, "buy_ins") == ref["buy_ins"]
        fees = [sum(x["fees"][s] for x in ev.summaries) for s in range(m.n)]
        assert seat_facts(got, "fees") == fees
        change = [c - b - i for c, b, i in zip(ev.state.coins, stakes["bankrolls"], ref["buy_ins"])]
        between = [c + f for c, f in zip(change, fees)]
        assert seat_facts(got, "coins") == between and sum(between) == 0
        # the settle-up squares the coin results (at most n - 1 payments, none of 0), none paying more than it lost
        rate = stakes["coin_per_point"]
        assert clears(between, got.settle_up, "coins") and all(p.coins > 0 and p.points is None for p in got.settle_up)
        assert len(got.settle_up) <= max(sum(1 for c in between if c) - 1, 0)
        assert got.settle_up == tuple(Payment(p.payer, p.payee, None, p.points) for p in settle_up(between))
        paid_in_full = all([c + f for c, f in zip(x["coins_delta"], x["fees"])] == [d * rate for d in x["deltas"]]
                           for x in ev.summaries)
        hypothesis_event(f"stakes, every round paid in full: {paid_in_full}")
        if paid_in_full and not ev.state.playing:  # then the coins are the points at the table's rate
            assert between == [t * rate for t in totals]
    else:
        assert got.settle_up == settle_up(totals)
        assert len(got.settle_up) <= max(sum(1 for t in totals if t) - 1, 0)
        assert all(p.points > 0 for p in got.settle_up)
