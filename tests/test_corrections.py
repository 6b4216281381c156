"""Mending the record in the table's fold (docs/rules.md#s15.2-§15.5): corrections, penalties, adjusts.

Worked examples computed by hand from the rule book (base 6, ``xuezhan`` unless said), then
properties over the rich random rounds of test_settle_properties: a correction that rewrites a round
to its own events changes nothing; voiding it gives back the fold before it exactly; and a table
kept the store's way (state stepped, corrections applied from the summaries and the records read,
voids refolded from the round they reach) always equals the fold of its log from scratch.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st

from service.rules.errors import EventError
from service.rules.summary import summarize
from service.rules.table import (
    BetweenRounds,
    CorrectionConflict,
    CorrectionError,
    History,
    TableError,
    TableState,
    VoidConflict,
    corrected_by,
    explain_round,
    fold,
    refold_round,
    refold_start,
    round_info,
)
from tests.test_settle_properties import rounds, voids_arg

NAMES = ["东", "南", "西", "北"]
PROPS = settings(deadline=None, suppress_health_check=list(HealthCheck))
"""(The profile says how many examples: fewer in the fast lane.)"""


class Table:
    """A table as the store keeps it: the state stepped record by record, each ended round's summary kept,
    a correction applied from the summaries and the records of the rounds it needs (as the store reads
    them), a void refolded from the round it reaches (``refold_start``, ``refold_round``)."""

    def __init__(self, ruleset="xuezhan", n=4, dealer=0, stakes=None):
        self.args = (NAMES[:n], ruleset, dealer)
        self.stakes = stakes
        self.state = TableState.new(*self.args, stakes=stakes)
        self.records: list[dict] = []
        self.summaries: list[dict] = []

    @property
    def seq(self) -> int:
        return len(self.records) + 1

    def post(self, *bodies):
        out = []
        for body in bodies:
            new = self.state.copy()
            done = new.rounds_done
            out = new.step(body, self.seq)  # (raises: then nothing is kept)
            self.state = new
            self.records.append({"seq": self.seq, **body, "round": new.round_meta and new.round_meta["number"]})
            if new.rounds_done > done:
                self.summaries.append(new.round_summary())
        return out

    def history(self, number: int) -> History:
        """What the store reads for a correction of round ``number``: the summaries from it on and the
        infos of it and the next round, from their round_start records and live corrections."""
        h = History({s["number"]: s for s in self.summaries[number - 1:]})
        for k in (number, number + 1):
            starts = [r for r in self.records if r["type"] == "round_start" and r["round"] == k
                      and r["seq"] not in self.state.voided]
            if starts:
                live = [self.records[seq - 1] for seq in corrected_by(self.state, k)]
                h.info[k] = round_info(starts[-1], live)
        return h

    def correct(self, number: int, events: list, **extra):
        body = {"type": "correction", "events": events, **extra}
        new = self.state.copy()
        done = new.correct(number, body, self.seq, self.history(number))
        self.state = new
        self.records.append({"seq": self.seq, **body, "round": number})
        for s in done.summaries:
            self.summaries[s["number"] - 1:s["number"]] = [s]
        return done

    def void(self, target: int):
        st_ = self.state
        rec = {"seq": self.seq, "type": "void", "target": target, "round": self.records[target - 1]["round"]}
        record = self.records[target - 1]
        starts = [s["first_seq"] for s in self.summaries] + ([st_.round_meta["start"]] if st_.playing else [])
        if record["type"] == "correction":
            number = record["round"]
        else:
            number = max(sum(1 for f in starts if f <= target), 1)
            if starts and target == starts[number - 1] and number > 1:
                number -= 1  # voiding a round_start: the round before it becomes the latest again
        number = refold_start(number, st_.corrections, lambda k: self.summaries[k - 1]["last_seq"])
        prior = self.summaries[number - 2] if number > 1 else None
        first = prior["last_seq"] + 1 if prior else 1
        new, tail = refold_round(st_, prior, self.summaries[number - 1:], self.records[first - 1:] + [rec],
                                 set(st_.voided) | {target})
        self.state, self.summaries = new, self.summaries[:number - 1] + tail
        self.records.append(rec)

    def fold(self):
        return fold(*self.args, self.records, self.stakes)

    def check(self):
        folded, summaries = self.fold()
        assert folded.to_dict() == self.state.to_dict()
        assert summaries == self.summaries
        assert sum(self.state.balances) == 0

    def explain(self, number: int) -> dict:
        if number <= len(self.summaries):
            s = self.summaries[number - 1]
            span, ended, dealer = (s["first_seq"], s["last_seq"]), True, s["dealer"]
        else:
            span, ended, dealer = (self.state.round_meta["start"], len(self.records)), False, self.state.round.dealer
        records = self.records[span[0] - 1:span[1]] + [self.records[c - 1] for c in corrected_by(self.state, number)]
        return explain_round(self.state.ruleset, dealer, records, self.state.voided, ended)


def start(dealer=None, **extra):
    return {"type": "round_start"} | ({} if dealer is None else {"dealer": dealer}) | extra


def kong(seat, kind, tile, frm=None):
    return {"type": "kong", "seat": seat, "kind": kind, "tile": tile} | ({} if frm is None else {"from": frm})


def hu(tile, seat, fan, frm=None, **flags):
    return {"type": "hu", "from": frm, "tile": tile, "winners": [{"seat": seat, "fan": fan}], **flags}


END = {"type": "round_end"}


def as_posted(events: list[dict]) -> list[dict]:
    """A round's events as the rounds view lists them, back to what was posted."""
    return [{k: v for k, v in e.items() if k not in ("seq", "index", "transfers")} for e in events]


# -- corrections: worked examples ------------------------------------------------------------------
def test_the_forgotten_concealed_kong_before_the_self_drawn_win():
    """The commonest mistake: seat 2's 暗杠 (12 from each) was forgotten before seat 0's 自摸 (2 fan,
    12 from each).  Appending the kong afterwards would make seat 0 pay it too, which is right, but in
    血战 a kong after a win leaves the winner out; the correction puts it where it happened."""
    t = Table()
    t.post(start(), hu("5p", 0, 2), END)
    assert t.state.balances == [36, -12, -12, -12]
    done = t.correct(1, [kong(2, "concealed", "7s"), hu("5p", 0, 2)], note="the 暗杠 came first")
    assert t.state.balances == [24, -24, 24, -24] and done.changes == [-12, -12, 36, -12]
    assert [t_.event for out in done.made for t_ in out] == [-(4 * 1024 + 1)] * 3 + [-(4 * 1024 + 2)] * 3
    assert t.summaries[0]["deltas"] == [24, -24, 24, -24] and t.summaries[0]["ended_by"] == "round_end"
    assert t.summaries[0]["facts"]["kongs_concealed"] == [0, 0, 1, 0]
    assert t.summaries[0]["last_seq"] == 3 and corrected_by(t.state, 1) == [4]
    view = t.explain(1)
    assert [(e["seq"], e["index"], e["type"]) for e in view["events"]] == [(4, 0, "kong"), (4, 1, "hu")]
    assert {tr["event"] for tr in view["transfers"]} == {4} and view["deltas"] == [24, -24, 24, -24]
    t.check()


def test_an_ended_round_stays_ended_and_nothing_comes_after_its_end():
    t = Table()
    t.post(start(), kong(1, "concealed", "2m"), {"type": "draw", "seats": [
        {"seat": s, "status": "ting", "dajiao_fan": 1} for s in range(4)]})
    t.correct(1, [kong(1, "concealed", "3m")])  # no draw now: closed as by round_end
    assert t.summaries[0]["ended_by"] == "round_end" and not t.state.playing
    with pytest.raises(CorrectionError) as exc:
        t.correct(1, [{"type": "escape", "seat": 3}, kong(1, "concealed", "3m")])
    assert (exc.value.code, exc.value.event) == ("round_ended", 1)
    with pytest.raises(CorrectionError) as exc:
        t.correct(1, [kong(1, "concealed", "3m"), {"type": "round_end"}])
    assert (exc.value.code, exc.value.event, exc.value.context["field"]) == ("bad_event", 1, "type")
    with pytest.raises(CorrectionError) as exc:
        t.correct(1, [kong(1, "concealed", "3m"), kong(2, "concealed", "3m")])  # a fifth 3m
    assert (exc.value.code, exc.value.event) == ("too_many_copies", 1)
    t.check()


def test_a_round_whose_next_dealer_changes_conflicts_with_a_round_that_took_it():
    """Round 1: seat 1 wins first (next dealer 1); round 2 started without a dealer, so seat 1 dealt.
    Correcting round 1 so that seat 2 wins first would change round 2's dealer: refused, naming round 2
    and its round_start.  Round 3 named its dealer: correcting round 2 is fine whatever it does."""
    t = Table()
    t.post(start(), hu("5p", 1, 1, frm=0), END, start(), hu("6p", 3, 1, frm=0), END, start(dealer=0))
    with pytest.raises(CorrectionConflict) as exc:
        t.correct(1, [hu("5p", 2, 1, frm=0)])
    assert (exc.value.code, exc.value.round, exc.value.event) == ("correction_conflict", 2, 4)
    t.check()  # (nothing changed)
    # the same winner, by another discard: the dealer chain holds
    t.correct(1, [hu("5p", 1, 1, frm=3)])
    assert t.state.balances == [-6, 6, 0, 0]
    # round 3 named its dealer: round 2 may now end with nobody winning
    t.correct(2, [])
    assert t.state.balances == [0, 6, 0, -6] and t.summaries[1]["next_dealer"] == 1
    t.check()


def test_a_correction_may_name_the_round_s_dealer_and_voids():
    t = Table()
    t.post(start(), hu("5p", 1, 1, frm=0), END, start())
    assert t.state.round.dealer == 1
    t.correct(2, [], dealer=3)  # the open round: its dealer is now 3 (it names it)
    assert t.state.round.dealer == 3 and t.state.playing
    t.post(hu("1s", 2, 1, frm=3), END, start())
    assert t.state.round.dealer == 2
    t.correct(1, [hu("5p", 0, 1, frm=3)])  # round 2 named its dealer (by its correction): no conflict
    assert t.summaries[0]["next_dealer"] == 0
    win = {"type": "hu", "from": 3, "tile": "5p", "winners": [{"seat": 0, "hand": {"tiles": "123456789m11155p"}}]}
    with pytest.raises(CorrectionError) as exc:
        t.correct(1, [win], voids=["p", "p", "p", "p"])  # its hand holds its 定缺 suit
    assert (exc.value.code, exc.value.event) == ("not_a_win", 0)
    t.correct(1, [win], voids=["s", "s", "s", "s"])
    t.correct(1, [win])  # the voids given before hold
    with pytest.raises(CorrectionError) as exc:
        t.correct(1, [win | {"winners": [{"seat": 0, "hand": {"tiles": "123456789s11155p"}}]}])
    assert exc.value.code == "not_a_win"
    with pytest.raises(TableError) as exc:
        t.correct(1, [], voids=["x"])
    assert exc.value.code == "bad_event" and exc.value.context["field"] == "voids"
    t.check()


def test_the_open_round_goes_on_after_its_correction():
    t = Table()
    t.post(start(), kong(0, "concealed", "1m"), kong(1, "concealed", "2m"))
    t.correct(1, [kong(0, "concealed", "1m")])  # the second kong never happened
    assert t.state.playing and t.state.balances == [36, -12, -12, -12]
    t.post(kong(2, "concealed", "3m"))
    view = t.explain(1)
    assert [(e["seq"], e.get("index")) for e in view["events"]] == [(4, 0), (5, None)]
    t.correct(1, view_events := as_posted(view["events"]) + [{"type": "draw", "seats": [
        {"seat": s, "status": "ting", "dajiao_fan": 1} for s in range(4)]}])
    assert not t.state.playing and t.summaries[0]["ended_by"] == "draw" and len(view_events) == 3
    assert t.summaries[0]["last_seq"] == 6  # a round ended by its correction ends there
    t.check()


def test_corrections_with_stakes_settle_the_coins_again_down_the_chain():
    """At 10 coins a point, fee 0: seat 3 holds 50.  Round 1 seat 0 自摸 1 fan (6 from each: 60 coins
    each); seat 3 buys 100; round 2 seat 1 wins 1 fan on seat 3 (6: 60 coins).  Correcting round 1 to a
    3-fan 自摸 (24 from each: 240 coins each) leaves seat 3 short (扣尽: it pays its 50); its buy-in
    then makes it 100 for round 2, which it pays as before."""
    t = Table(stakes={"coin_per_point": 10, "fee": 0, "bankrolls": [1000, 1000, 1000, 50]})
    t.post(start(), hu("5p", 0, 1), END, {"type": "buy_in", "seat": 3, "coins": 100}, start(dealer=0),
           hu("6p", 1, 1, frm=3), END)
    assert t.state.coins == [1170, 1000, 940, 40]  # (seat 3 paid its 50 in round 1: 扣尽)
    t.correct(1, [hu("5p", 0, 3)])
    assert t.summaries[0]["coins_delta"] == [530, -240, -240, -50]
    assert t.summaries[1]["bankrolls"] == [1530, 760, 760, 100] and t.summaries[1]["coins_delta"] == [0, 60, 0, -60]
    assert t.state.coins == [1530, 820, 760, 40]
    assert t.state.balances == [72, -18, -24, -30]
    s = summarize(t.state, t.summaries)
    assert [x.coins for x in s.seats] == [530, -180, -240, -110] and [x.buy_ins for x in s.seats] == [0, 0, 0, 100]
    t.check()


# -- penalties and adjusts ----------------------------------------------------------------------
def test_zhahu_pays_a_capped_win_to_each_seat_still_in_the_round_and_plays_on():
    t = Table({"preset": "xuezhan", "cap": 4})
    t.post(start(), hu("5p", 0, 1, frm=1))
    out = t.post({"type": "penalty", "seat": 2, "kind": "zhahu"})  # the cap, 4 fan: 48 to seats 1 and 3
    assert [(x.payer, x.payee, x.points, x.reason) for x in out] == [(2, 1, 48, "penalty"), (2, 3, 48, "penalty")]
    t.post(hu("6p", 2, 1, frm=3))  # it plays on, and may win
    t.post(END)
    assert summarize(t.state, t.summaries).seats[2].penalties_paid == 96
    t2 = Table({"preset": "normal", "zhahu_fan": 2})
    t2.post(start())
    assert [x.points for x in t2.post({"type": "penalty", "seat": 0, "kind": "zhahu"})] == [12, 12, 12]
    t.check()


def test_xianggong_may_not_win_and_is_not_ting_at_the_draw():
    t = Table()
    t.post(start(), kong(1, "concealed", "5m"), {"type": "penalty", "seat": 1, "kind": "xianggong"})
    with pytest.raises(EventError) as exc:
        t.post(hu("6p", 1, 2, frm=0))
    assert exc.value.code == "xianggong"
    # declared ting with 3 fan: not ting all the same, so it hands its kong back and pays 大叫
    t.post({"type": "draw", "seats": [{"seat": 0, "status": "ting", "dajiao_fan": 1},
                                      {"seat": 1, "status": "ting", "dajiao_fan": 3},
                                      {"seat": 2, "status": "not_ting"}, {"seat": 3, "status": "huazhu"}]})
    assert t.state.balances == [108, 90, 90, -288]  # 退税 12 x 3; 花猪 96 x 3; 大叫 6 from seats 1 and 2
    t.check()


def test_adjusts_move_points_between_rounds_only_and_never_a_round_s_deltas():
    t = Table(stakes={"coin_per_point": 10, "fee": 0, "bankrolls": [100] * 4})
    t.post({"type": "adjust", "transfers": [{"from": 0, "to": 1, "points": 10}], "note": "last week"}, start())
    with pytest.raises(BetweenRounds) as exc:
        t.post({"type": "adjust", "transfers": [{"from": 0, "to": 1, "points": 1}]})
    assert exc.value.code == "round_in_progress"
    t.post(kong(2, "concealed", "1m"), END,
           {"type": "adjust", "transfers": [{"from": 2, "to": 3, "points": 5}, {"from": 2, "to": 0, "points": 5}]})
    assert t.state.balances == [-17, -2, 26, -7] and t.summaries[0]["deltas"] == [-12, -12, 36, -12]
    assert t.state.coins == [0, 0, 400, 0]  # (扣尽: 100 each, not 120; the adjusts move no coins)
    s = summarize(t.state, t.summaries)
    assert [x.adjusted for x in s.seats] == [-5, 10, -10, 5] and [x.total for x in s.seats] == t.state.balances
    for bad, field in [
        ({"transfers": []}, "transfers"),
        ({"transfers": [{"from": 0, "to": 0, "points": 1}]}, "transfers.0"),
        ({"transfers": [{"from": 0, "to": 4, "points": 1}]}, "transfers.0.to"),
        ({"transfers": [{"from": 0, "to": 1, "points": 0}]}, "transfers.0.points"),
        ({"transfers": [{"from": 0, "to": 1}]}, "transfers.0"),
        ({"transfers": [{"from": 0, "to": 1, "points": 1}], "note": 7}, "note"),
        ({"transfers": [{"from": 0, "to": 1, "points": 1}], "x": 1}, "x"),
    ]:
        with pytest.raises(TableError) as exc:
            t.post({"type": "adjust", **bad})
        assert exc.value.context["field"] == field
    t.void(t.seq - 1)  # the second adjust, after round 1: refolded from round 2 on
    assert t.state.balances == [-22, -2, 36, -12]
    t.check()


# -- properties ------------------------------------------------------------------------------------
def cases():
    kinds = st.one_of(rounds(), rounds(mode="xueliu"), rounds(players=3), rounds(xuezhan=True))
    return st.tuples(kinds, st.integers(1, 3), st.booleans(), st.data())


@PROPS
@given(cases())
def test_a_correction_to_a_round_s_own_events_changes_nothing_and_its_void_gives_the_fold_back(case):
    (spec, m), count, with_stakes, data = case
    t = Table(spec, n=m.n, dealer=m.dealer, stakes=None if not with_stakes else {
        "coin_per_point": data.draw(st.sampled_from([1, 10, 100])), "fee": data.draw(st.integers(0, 30)),
        "bankrolls": data.draw(st.lists(st.integers(0, 3000), min_size=m.n, max_size=m.n))})
    for k in range(count):
        t.post({"type": "round_start", "dealer": m.dealer, "voids": voids_arg(m)}, *m.events)
        if not m.ended and (k < count - 1 or data.draw(st.booleans())):
            t.post(END)
        if not t.state.playing and data.draw(st.booleans()):
            t.post({"type": "adjust", "transfers": [{"from": 0, "to": 1, "points": data.draw(st.integers(1, 50))}]})
    before_state, before_summaries = t.fold()
    number = data.draw(st.integers(1, t.state.round_meta["number"]))
    own = as_posted(t.explain(number)["events"])
    assert own == m.events
    done = t.correct(number, own)
    hypothesis_event(f"corrected round {number} of {t.state.round_meta['number']}, ended: {not t.state.playing}")
    assert done.changes == [0] * m.n
    assert t.state.balances == before_state.balances and t.state.coins == before_state.coins
    assert t.state.dealer == before_state.dealer and t.state.playing == before_state.playing
    for got, was in zip(t.summaries, before_summaries):
        assert {k: v for k, v in got.items() if k != "facts"} == {k: v for k, v in was.items() if k != "facts"}
        facts = {k: v for k, v in got["facts"].items() if k != "biggest_win"}
        assert facts == {k: v for k, v in was["facts"].items() if k != "biggest_win"}
    t.check()
    # voiding it gives back exactly the fold before it (but for the version and the voids)
    t.void(t.seq - 1)
    t.check()
    after = t.state.to_dict()
    assert {k: v for k, v in after.items() if k not in ("version", "voided")} == \
        {k: v for k, v in before_state.to_dict().items() if k not in ("version", "voided")}
    assert t.summaries == before_summaries


@PROPS
@given(cases(), st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10 ** 6)), min_size=1, max_size=6))
def test_a_table_mended_at_random_is_always_the_fold_of_its_log(case, moves):
    """Corrections of random rounds to random other rounds' events, voids of random records (the
    corrections included), penalties and adjusts: whatever is accepted, the table kept the store's way
    is the fold of its log, and every round explained adds up to its summary."""
    (spec, m), count, with_stakes, data = case
    t = Table(spec, n=m.n, dealer=m.dealer, stakes=None if not with_stakes else {
        "coin_per_point": 10, "fee": 5, "bankrolls": [500] * m.n})
    variants = [m.events, m.events[:len(m.events) // 2], [], m.events[1:]]
    for k in range(count):
        t.post({"type": "round_start", "dealer": m.dealer if k % 2 == 0 else None, "voids": voids_arg(m)})
        try:
            t.post(*m.events)
        except EventError:
            pass
        if t.state.playing:
            t.post(END)
    accepted = 0
    for what, pick in moves:
        try:
            if what == 0:
                number = 1 + pick % t.state.round_meta["number"]
                t.correct(number, variants[pick % len(variants)], **({"dealer": m.dealer} if pick % 3 == 0 else {}))
            elif what == 1:
                target = 1 + pick % len(t.records)
                if t.records[target - 1]["type"] == "void" or target in t.state.voided:
                    continue
                t.void(target)
            elif what == 2:
                t.post({"type": "adjust", "transfers": [{"from": pick % m.n, "to": (pick + 1) % m.n, "points": 7}]})
            else:
                t.post(start(dealer=m.dealer), {"type": "penalty", "seat": pick % m.n, "kind": "zhahu"}, END)
            accepted += 1
        except (EventError, VoidConflict):
            continue
        t.check()
        for number, summary in enumerate(t.summaries, 1):
            assert t.explain(number)["deltas"] == summary["deltas"]
    hypothesis_event(f"moves accepted: {min(accepted, 4)}")
