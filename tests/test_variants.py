"""血流成河 (docs/rules.md#s13) and 三人两房 (§14): the worked examples, then one test per rule.

Expected transfers are computed by hand from docs/rules.md (base 6: a unit is 6 points, a win of
f fan is 6 × 2^(f-1)), never from the engine.  Transfers are compared after merging equal
``(payer, payee, reason, event)`` keys, as docs/rules.md#s6 allows.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from service import discards, score, ting, validate
from service.rules.errors import EventError, RuleError, SuitNotInPlay, VoidNotAllowed
from service.rules.fan import Win
from service.rules.hand import Meld, parse_hand
from service.rules.settle import Round, settle
from service.rules.table import TableSetupError, TableState


# -- builders --------------------------------------------------------------------------------
def kong(seat, kind, tile, frm=None):
    ev = {"type": "kong", "seat": seat, "kind": kind, "tile": tile}
    if frm is not None:
        ev["from"] = frm
    return ev


def peng(seat, tile, frm):
    return {"type": "peng", "seat": seat, "tile": tile, "from": frm}


def win(seat, fan=None, tiles=None, melds=()):
    if fan is not None:
        return {"seat": seat, "fan": fan}
    return {"seat": seat, "hand": {"tiles": tiles, "melds": [dict(m) for m in melds]}}


def hu(frm, tile, *winners, **flags):
    return {"type": "hu", "from": frm, "tile": tile, "winners": list(winners), **flags}


def st(seat, status, dajiao_fan=None):
    out = {"seat": seat, "status": status}
    if dajiao_fan is not None:
        out["dajiao_fan"] = dajiao_fan
    return out


def hs(seat, tiles, melds=()):
    return {"seat": seat, "hand": {"tiles": tiles, "melds": [dict(m) for m in melds]}}


def draw(*seats):
    return {"type": "draw", "seats": list(seats)}


def escape(seat, last_four=False, seats=None):
    ev = {"type": "escape", "seat": seat, "last_four": last_four}
    if seats is not None:
        ev["seats"] = list(seats)
    return ev


def KONG(tile, kind="concealed"):
    return {"type": "kong", "kind": kind, "tile": tile}


def PENG(tile):
    return {"type": "peng", "tile": tile}


def T(payer, payee, points, reason, event):
    return (payer, payee, points, reason, event)


def norm(transfers):
    c = Counter()
    for t in transfers:
        c[(t.payer, t.payee, t.reason, t.event)] += t.points
    return sorted((p, q, pts, r, e) for (p, q, r, e), pts in c.items())


def of_event(s, i):
    return norm(t for t in s.transfers if t.event == i)


def reject(events, code, event, ruleset="xueliu", **kw):
    kw.setdefault("dealer", 0)
    with pytest.raises(EventError) as info:
        settle(events, ruleset=ruleset, **kw)
    assert (info.value.code, info.value.event) == (code, event), str(info.value)
    return info.value


XUELIU = "xueliu"
SANREN = "sanren-liangfang"

# seat 1's hand in the 血流 rule tests: 111m 456m 789m 234p 55p, won on 5p; it keeps
# 111m456m789m2345p, waiting on 2p and 5p
H1_TILES = "111456789m23455p"
H1_KEPT = "111456789m2345p"
H1_NO_1M = "456789m23455p"     # the same with the 1m triplet as a meld


# =================================================================================================
# §13 worked example
# =================================================================================================
SEC13 = [
    kong(0, "concealed", "5m"),
    hu(None, "3s", win(1, fan=2)),
    hu(0, "4s", win(1, fan=1)),
    kong(1, "concealed", "9p"),
    draw(st(0, "not_ting"), st(2, "ting", 2), st(3, "huazhu")),
]


def test_section_13_worked_example():
    r = Round(XUELIU, 0)
    after = []
    for ev in SEC13:
        r.step(ev)
        after.append(r.deltas)
    assert after[:4] == [(36, -12, -12, -12), (24, 24, -24, -24), (18, 30, -24, -24), (6, 66, -36, -36)]
    s = r.settlement()
    assert of_event(s, 4) == sorted([
        # 退税: seat 0 (not ting) hands back its 5m kong's income; seat 1 has won: it is ting
        T(0, 1, 12, "refund", 4), T(0, 2, 12, "refund", 4), T(0, 3, 12, "refund", 4),
        # 查花猪: seat 3 pays every non-花猪 seat, seat 1 included
        T(3, 0, 96, "huazhu", 4), T(3, 1, 96, "huazhu", 4), T(3, 2, 96, "huazhu", 4),
        # 查大叫: seat 0 pays seat 2 (seat 1 has won and collects nothing)
        T(0, 2, 12, "dajiao", 4),
    ])
    assert s.deltas == (54, 174, 84, -312)
    assert s.ended and s.next_dealer == 1 and s.winners == (1,)


# =================================================================================================
# §14 worked example
# =================================================================================================
def test_section_14_worked_example():
    r = Round(SANREN, 0)
    r.step(kong(0, "direct", "5p", 1))
    assert r.deltas == (12, -12, 0)
    with pytest.raises(EventError) as info:
        r.apply(hu(2, "3s", win(1, fan=1)))
    assert info.value.code == "dianpao_pinghu"
    r.step(hu(2, "3s", win(1, fan=2)))
    assert r.deltas == (12, 0, -12) and not r.ended
    r.step(hu(None, "6s", win(0, fan=5)))     # capped at 4: 6 × 8 = 48, from seat 2 alone
    s = r.settlement()
    assert of_event(s, 2) == [T(2, 0, 48, "zimo", 2)]
    assert s.deltas == (60, 0, -60)
    assert s.ended and s.next_dealer == 1 and s.winners == (1, 0)


def test_section_14_worked_example_at_a_table():
    st0 = TableState.new(["甲", "乙", "丙"], SANREN, dealer=0)
    records = [{"type": "round_start"}, kong(0, "direct", "5p", 1), hu(2, "3s", win(1, fan=2)),
               hu(None, "6s", win(0, fan=5))]
    for seq, rec in enumerate(records, 1):
        st0, _ = st0.apply(rec, seq)
    assert st0.balances == [60, 0, -60] and not st0.playing
    assert st0.round_view()["deltas"] == [60, 0, -60] and st0.round_view()["next_dealer"] == 1
    st1, _ = st0.apply({"type": "round_start"}, 5)
    assert st1.round.dealer == 1 and st1.balances == [60, 0, -60]
    again = TableState.from_dict(json.loads(json.dumps(st1.to_dict())))
    assert again.to_dict() == st1.to_dict()


# =================================================================================================
# §13 rule by rule
# =================================================================================================
class TestXueliuFlow:
    """§13.1: winning does not take a seat out; the round ends only with a draw or an escape."""

    def test_the_same_seat_wins_again_and_again(self):
        events = [hu(None, "3s", win(1, fan=1)), hu(2, "4s", win(1, fan=1)), hu(None, "5s", win(1, fan=1)),
                  hu(0, "6s", win(1, fan=2), win(3, fan=1))]
        s = settle(events, dealer=0, ruleset=XUELIU)
        assert not s.ended and s.next_dealer is None
        assert s.winners == (1, 3)           # the seats that have won, in the order of their first win
        assert of_event(s, 2) == [T(0, 1, 6, "zimo", 2), T(2, 1, 6, "zimo", 2), T(3, 1, 6, "zimo", 2)]
        assert of_event(s, 3) == [T(0, 1, 12, "dianpao", 3), T(0, 3, 6, "dianpao", 3)]   # 一炮多响 as §6

    def test_three_seats_winning_does_not_end_the_round(self):
        s = settle([hu(3, "1s", win(0, fan=1)), hu(3, "1s", win(1, fan=1)), hu(0, "1p", win(2, fan=1)),
                    hu(None, "2p", win(3, fan=1))], dealer=0, ruleset=XUELIU)
        assert not s.ended and s.winners == (0, 1, 2, 3)

    def test_winners_discard_and_are_discarded_to(self):
        s = settle([hu(None, "3s", win(1, fan=1)), peng(2, "7p", 1), kong(3, "direct", "8p", 1),
                    hu(1, "9p", win(0, fan=1))], dealer=0, ruleset=XUELIU)
        assert of_event(s, 2) == [T(1, 3, 6, "kong_direct", 2)]
        assert of_event(s, 3) == [T(1, 0, 6, "dianpao", 3)]

    def test_draw_and_escape_end_the_round(self):
        s = settle([hu(None, "3s", win(1, fan=1)), escape(2)], dealer=0, ruleset=XUELIU)
        assert s.ended
        with pytest.raises(EventError) as info:
            settle([hu(None, "3s", win(1, fan=1)), draw(st(0, "not_ting"), st(2, "not_ting"), st(3, "not_ting")),
                    hu(None, "3s", win(1, fan=1))], dealer=0, ruleset=XUELIU)
        assert info.value.code == "round_ended"


class TestKeptHand:
    """§13.2: a winner keeps its 13 tiles, may not 碰 or 直杠, and kongs only without changing its waits."""

    def test_a_winner_may_not_peng(self):
        e = reject([hu(None, "5p", win(1, tiles=H1_TILES)), peng(1, "7s", 0)], "claim_after_win", 1)
        assert "碰" in e.reason
        reject([hu(None, "5p", win(1, fan=1)), peng(1, "7s", 0)], "claim_after_win", 1)  # hand known or not

    def test_a_winner_may_not_make_a_direct_kong(self):
        reject([hu(None, "5p", win(1, tiles=H1_TILES)), kong(1, "direct", "1m", 0)], "claim_after_win", 1)
        reject([hu(None, "5p", win(1, fan=1)), kong(1, "direct", "7s", 0)], "claim_after_win", 1)

    def test_others_still_claim(self):
        settle([hu(None, "5p", win(1, fan=1)), peng(2, "7s", 1), kong(3, "direct", "8s", 2)], dealer=0,
               ruleset=XUELIU)

    def test_a_concealed_kong_that_keeps_the_waits(self):
        # kept 111m456m789m5p waits on 5p only; 1111m as a concealed kong: still waiting on 5p
        s = settle([hu(None, "5p", win(1, tiles=H1_TILES)), kong(1, "concealed", "1m"),
                    hu(0, "5p", win(1, tiles=H1_NO_1M, melds=[KONG("1m")]))], dealer=0, ruleset=XUELIU)
        assert of_event(s, 1) == [T(0, 1, 12, "kong_concealed", 1), T(2, 1, 12, "kong_concealed", 1),
                                  T(3, 1, 12, "kong_concealed", 1)]
        # second win: 平胡 1 + 根 1 (the kong) = 2 fan = 12 from the discarder
        assert of_event(s, 2) == [T(0, 1, 12, "dianpao", 2)]

    def test_a_kong_that_changes_the_waits_is_refused(self):
        # kept 111m23m456p789p99p waits on 1m and 4m; after a concealed kong of 1m all four 1m are its
        # own, so 1m is no wait any more (§4): the waits change
        e = reject([hu(None, "4m", win(1, tiles="111234m456789p99p")), kong(1, "concealed", "1m")],
                   "kong_changes_waits", 1)
        assert "waits" in e.reason

    def test_a_kong_the_kept_hand_cannot_make(self):
        reject([hu(None, "5p", win(1, tiles=H1_TILES)), kong(1, "concealed", "4m")], "kong_not_in_hand", 1)
        reject([hu(None, "5p", win(1, tiles=H1_TILES)), kong(1, "added", "1m")], "kong_not_in_hand", 1)

    def test_an_added_kong_on_the_kept_peng(self):
        hand = win(1, tiles=H1_NO_1M, melds=[PENG("1m")])
        s = settle([peng(1, "1m", 0), hu(None, "5p", hand), kong(1, "added", "1m"),
                    hu(None, "5p", win(1, tiles=H1_NO_1M, melds=[KONG("1m", "added")]))],
                   dealer=0, ruleset=XUELIU)
        assert of_event(s, 2) == [T(0, 1, 6, "kong_added", 2), T(2, 1, 6, "kong_added", 2),
                                  T(3, 1, 6, "kong_added", 2)]
        assert len(of_event(s, 3)) == 3

    def test_a_kong_with_the_hand_unknown_is_allowed(self):
        s = settle([hu(None, "5p", win(1, fan=1)), kong(1, "concealed", "1m")], dealer=0, ruleset=XUELIU)
        assert s.deltas == (-18, 54, -18, -18)

    def test_a_later_win_with_a_different_hand_is_refused(self):
        e = reject([hu(None, "5p", win(1, tiles=H1_TILES)), hu(0, "5p", win(1, tiles="111456789m22345p"))],
                   "kept_hand_mismatch", 1)
        assert "kept hand" in e.reason
        reject([hu(None, "5p", win(1, tiles=H1_TILES)), hu(0, "2p", win(1, tiles="111456789m22234p"))],
               "kept_hand_mismatch", 1)
        # the kept hand must show the kong it made, and no other meld
        reject([hu(None, "5p", win(1, tiles=H1_TILES)), kong(1, "concealed", "1m"),
                hu(0, "5p", win(1, tiles=H1_TILES))], "kept_hand_mismatch", 2)
        reject([hu(None, "5p", win(1, tiles=H1_TILES)),
                hu(0, "5p", win(1, tiles=H1_NO_1M, melds=[PENG("1m")]))], "kept_hand_mismatch", 1)

    def test_a_later_win_with_the_kept_hand_and_a_new_tile(self):
        s = settle([hu(None, "5p", win(1, tiles=H1_TILES)), hu(0, "5p", win(1, tiles=H1_TILES)),
                    hu(2, "5p", win(1, tiles=H1_TILES))], dealer=0, ruleset=XUELIU)
        assert len(s.transfers) == 5

    def test_kept_hand_counts_once_and_each_tile_won_once(self):
        # 111m is in the kept hand: counted once however many wins (else the second win is a 6th 1m)
        events = [hu(None, "5p", win(1, tiles=H1_TILES)), hu(0, "5p", win(1, tiles=H1_TILES)),
                  hu(2, "5p", win(1, tiles=H1_TILES))]
        settle(events, dealer=0, ruleset=XUELIU)   # 5p: 1 kept + 3 set aside = 4
        reject(events + [hu(3, "5p", win(1, tiles=H1_TILES))], "too_many_copies", 3)   # a fifth 5p
        # the set-aside tiles are in no later hand but still count: another seat's 5p is a fifth
        reject(events + [draw(hs(0, "123456789s5p999p"), st(2, "not_ting"), st(3, "not_ting"))],
               "too_many_copies", 3)

    def test_robbing_a_winners_added_kong_gives_back_its_peng(self):
        hand = win(1, tiles=H1_NO_1M, melds=[PENG("1m")])
        s = settle([peng(1, "1m", 0), hu(None, "5p", hand), kong(1, "added", "1m"),
                    hu(1, "1m", win(2, fan=2), robbing_kong=True),
                    hu(None, "5p", win(1, tiles=H1_NO_1M, melds=[PENG("1m")]))], dealer=0, ruleset=XUELIU)
        assert of_event(s, 3) == sorted([T(1, 0, 6, "kong_void", 3), T(1, 2, 6, "kong_void", 3),
                                         T(1, 3, 6, "kong_void", 3), T(1, 2, 12, "dianpao", 3)])
        assert len(of_event(s, 4)) == 3


class TestXueliuScoring:
    """§13.3: each win scored on its hand with its flags; 根 of that hand; cap per win; 天胡/地胡 first win only."""

    def test_gen_counts_the_kong_made_after_winning(self):
        s = settle([hu(None, "5p", win(1, tiles=H1_TILES)), kong(1, "concealed", "1m"),
                    hu(None, "5p", win(1, tiles=H1_NO_1M, melds=[KONG("1m")]), after_kong=True)],
                   dealer=0, ruleset=XUELIU)
        # first win: 平胡 1 (111m is three, not four) = 6 each; then 平胡 + 根 + 杠上花 = 3 fan = 24 each
        assert [t.points for t in s.transfers if t.event == 0] == [6, 6, 6]
        assert [t.points for t in s.transfers if t.event == 2] == [24, 24, 24]

    def test_cap_applies_to_each_win(self):
        s = settle([hu(None, "5p", win(1, fan=6)), hu(0, "5p", win(1, fan=6))], dealer=0,
                   ruleset={"preset": XUELIU, "cap": 3})
        assert s.deltas == (-48, 96, -24, -24)     # 6 fan capped at 3 (24), twice

    def test_tianhu_and_dihu_only_for_the_first_win(self):
        settle([hu(None, "5p", win(0, fan=6), heavenly=True), hu(1, "5p", win(2, fan=1))], dealer=0, ruleset=XUELIU)
        reject([hu(None, "5p", win(0, fan=1)), hu(None, "5p", win(2, fan=6), earthly=True)], "contradictory_flags", 1)
        s = settle([hu(None, "5p", win(2, fan=6), earthly=True)], dealer=0, ruleset=XUELIU)
        assert s.deltas == (-192, -192, 576, -192)


class TestXueliuPayments:
    """§13.4: "the others" are every other seat, winners included."""

    def test_zimo_and_kongs_are_paid_by_every_other_seat(self):
        s = settle([hu(None, "5p", win(1, fan=1)), hu(None, "5p", win(2, fan=2)), kong(0, "concealed", "7s"),
                    kong(3, "added", "8s")], dealer=0, ruleset=XUELIU)
        assert of_event(s, 1) == [T(0, 2, 12, "zimo", 1), T(1, 2, 12, "zimo", 1), T(3, 2, 12, "zimo", 1)]
        assert of_event(s, 2) == [T(1, 0, 12, "kong_concealed", 2), T(2, 0, 12, "kong_concealed", 2),
                                  T(3, 0, 12, "kong_concealed", 2)]
        assert of_event(s, 3) == [T(0, 3, 6, "kong_added", 3), T(1, 3, 6, "kong_added", 3),
                                  T(2, 3, 6, "kong_added", 3)]

    def test_zimo_base_unit_from_every_other_seat(self):
        s = settle([hu(None, "5p", win(1, fan=1)), hu(None, "5p", win(1, fan=1))], dealer=0,
                   ruleset={"preset": XUELIU, "zimo": "base"})
        assert s.deltas == (-24, 72, -24, -24)

    def test_gangshangpao_by_a_winner_transfers_its_kong(self):
        s = settle([hu(None, "5p", win(1, fan=1)), kong(1, "concealed", "7s"), hu(1, "3s", win(2, fan=1),
                                                                                   after_kong=True)],
                   dealer=0, ruleset=XUELIU)
        assert of_event(s, 2) == [T(1, 2, 6, "dianpao", 2), T(1, 2, 36, "transfer", 2)]

    def test_gangshanghua_by_a_winner(self):
        s = settle([hu(None, "5p", win(1, fan=1)), kong(1, "concealed", "7s"),
                    hu(None, "3s", win(1, fan=2), after_kong=True)], dealer=0, ruleset=XUELIU)
        assert of_event(s, 2) == [T(0, 1, 12, "zimo", 2), T(2, 1, 12, "zimo", 2), T(3, 1, 12, "zimo", 2)]


class TestXueliuDraw:
    """§13.5: 退税, 查花猪, 查大叫 with seats that have and have not won."""

    def test_winners_need_not_be_listed_and_every_other_seat_must(self):
        settle([hu(None, "5p", win(1, fan=1)), draw(st(0, "not_ting"), st(2, "not_ting"), st(3, "not_ting"))],
               dealer=0, ruleset=XUELIU)
        reject([hu(None, "5p", win(1, fan=1)), draw(st(0, "not_ting"), st(2, "not_ting"))], "bad_seats", 1)

    def test_a_listed_winner_must_be_ting(self):
        base = [hu(None, "5p", win(1, tiles=H1_TILES))]
        others = [st(0, "not_ting"), st(2, "not_ting"), st(3, "not_ting")]
        settle(base + [draw(st(1, "ting", 1), *others)], dealer=0, ruleset=XUELIU)
        settle(base + [draw(hs(1, H1_KEPT), *others)], dealer=0, ruleset=XUELIU)
        reject(base + [draw(st(1, "not_ting"), *others)], "winner_not_ting", 1)
        reject(base + [draw(st(1, "huazhu"), *others)], "winner_not_ting", 1)
        reject(base + [draw(hs(1, "111456789m2346p"), *others)], "kept_hand_mismatch", 1)
        reject([hu(None, "5p", win(1, fan=1)), draw(hs(1, "123456789m1357p"), *others)], "winner_not_ting", 1)

    def test_winners_keep_their_kong_income(self):
        s = settle([kong(1, "concealed", "7s"), hu(None, "5p", win(1, fan=1)),
                    draw(st(0, "not_ting"), st(2, "not_ting"), st(3, "not_ting"))], dealer=0, ruleset=XUELIU)
        assert of_event(s, 2) == []

    def test_only_a_seat_that_never_won_is_a_huazhu(self):
        s = settle([hu(None, "5p", win(1, fan=1)),
                    draw(st(0, "huazhu"), st(2, "ting", 1), st(3, "not_ting"))], dealer=0, ruleset=XUELIU)
        # seat 0 pays 96 to each of 1, 2, 3 (winners included); seat 3 pays seat 2's 大叫 only
        assert of_event(s, 1) == sorted([T(0, 1, 96, "huazhu", 1), T(0, 2, 96, "huazhu", 1),
                                         T(0, 3, 96, "huazhu", 1), T(3, 2, 6, "dajiao", 1)])

    def test_huazhu_pays_winners_false_changes_nothing_in_xueliu(self):
        s = settle([hu(None, "5p", win(1, fan=1)), draw(st(0, "huazhu"), st(2, "not_ting"), st(3, "not_ting"))],
                   dealer=0, ruleset={"preset": XUELIU, "huazhu_pays_winners": False})
        assert [t for t in of_event(s, 1) if t[3] == "huazhu"] == [T(0, 1, 96, "huazhu", 1), T(0, 2, 96, "huazhu", 1),
                                                                     T(0, 3, 96, "huazhu", 1)]

    def test_winners_collect_dajiao_only_with_the_option(self):
        events = [hu(None, "5p", win(1, tiles=H1_TILES)),
                  draw(st(0, "not_ting"), st(2, "ting", 2), st(3, "not_ting"))]
        s = settle(events, dealer=0, ruleset=XUELIU)
        assert [t for t in of_event(s, 1) if t[3] == "dajiao"] == [T(0, 2, 12, "dajiao", 1), T(3, 2, 12, "dajiao", 1)]
        s = settle(events, dealer=0, ruleset={"preset": XUELIU, "xueliu_dajiao_winners": True})
        # seat 1's kept hand 111m456m789m2345p waits on 2p and 5p: 平胡 1 → 6 from each seat not ting
        assert [t for t in of_event(s, 1) if t[3] == "dajiao"] == sorted([
            T(0, 1, 6, "dajiao", 1), T(0, 2, 12, "dajiao", 1), T(3, 1, 6, "dajiao", 1), T(3, 2, 12, "dajiao", 1)])

    def test_winners_dajiao_from_the_draw_entry_when_the_hand_is_unknown(self):
        R = {"preset": XUELIU, "xueliu_dajiao_winners": True}
        s = settle([hu(None, "5p", win(1, fan=1)), draw(st(1, "ting", 3), st(0, "not_ting"), st(2, "not_ting"),
                                                          st(3, "not_ting"))], dealer=0, ruleset=R)
        assert [t for t in of_event(s, 1)] == [T(0, 1, 24, "dajiao", 1), T(2, 1, 24, "dajiao", 1),
                                               T(3, 1, 24, "dajiao", 1)]
        s = settle([hu(None, "5p", win(1, fan=1)), draw(hs(1, "1112345678999m"), st(0, "not_ting"),
                                                          st(2, "not_ting"), st(3, "not_ting"))], dealer=0, ruleset=R)
        assert [t.points for t in s.transfers if t.event == 1] == [48, 48, 48]
        # unknown and unlisted: ting, but nothing to collect
        s = settle([hu(None, "5p", win(1, fan=1)), draw(st(0, "not_ting"), st(2, "not_ting"), st(3, "not_ting"))],
                   dealer=0, ruleset=R)
        assert of_event(s, 1) == []


class TestXueliuDealerAndEscapes:
    def test_next_dealer(self):
        end = draw(st(0, "not_ting"), st(3, "not_ting"))     # seats 1 and 2 have won: they need not be listed
        assert settle([hu(None, "5p", win(1, fan=1)), hu(None, "5p", win(2, fan=1)), end], dealer=0,
                      ruleset=XUELIU).next_dealer == 1
        end4 = draw(st(0, "not_ting"), st(1, "not_ting"), st(2, "not_ting"), st(3, "not_ting"))
        assert settle([hu(3, "5p", win(1, fan=1), win(2, fan=1)), end], dealer=0, ruleset=XUELIU).next_dealer == 3
        assert settle([end4], dealer=2, ruleset=XUELIU).next_dealer == 2

    def test_a_winner_who_escapes_ends_the_round_and_pays_every_other_seat(self):
        s = settle([hu(None, "5p", win(1, fan=1)), escape(1)], dealer=0, ruleset=XUELIU)
        assert s.ended and of_event(s, 1) == [T(1, 0, 96, "escape", 1), T(1, 2, 96, "escape", 1),
                                              T(1, 3, 96, "escape", 1)]
        s = settle([hu(None, "5p", win(1, fan=1)), escape(1)], dealer=0,
                   ruleset={"preset": XUELIU, "winner_leaves": "forfeit"})
        assert [t[3] for t in of_event(s, 1)] == ["escape"] * 3     # no forfeit in 血流

    def test_an_escape_pays_winners_too(self):
        s = settle([hu(None, "5p", win(1, fan=1)), escape(2)], dealer=0, ruleset=XUELIU)
        assert of_event(s, 1) == [T(2, 0, 96, "escape", 1), T(2, 1, 96, "escape", 1), T(2, 3, 96, "escape", 1)]

    def test_last_four_dajiao_follows_section_13_5(self):
        R = {"preset": XUELIU, "escape": 1}
        events = [hu(None, "5p", win(1, fan=1)), escape(0, True, [st(1, "ting", 9), st(2, "ting", 6)])]
        s = settle(events, dealer=0, ruleset=R)
        assert of_event(s, 1) == [T(0, 2, 192, "escape", 1)]          # seat 1 has won: collects no 大叫
        s = settle(events, dealer=0, ruleset=dict(R, xueliu_dajiao_winners=True))
        assert of_event(s, 1) == [T(0, 1, 1536, "escape", 1), T(0, 2, 192, "escape", 1)]


# =================================================================================================
# §14 rule by rule
# =================================================================================================
class TestThreePlayerSeatsAndTiles:
    """§14.1, §14.6: seats 0-2, 筒 and 条 only, three-entry lists."""

    @pytest.mark.parametrize("event", [
        kong(3, "concealed", "5p"), kong(0, "direct", "5p", 3), peng(3, "5p", 0), peng(0, "5p", 3),
        hu(3, "5p", win(0, fan=2)), hu(None, "5p", win(3, fan=2)), escape(3),
        draw(st(0, "not_ting"), st(1, "not_ting"), st(2, "not_ting"), st(3, "not_ting")),
    ])
    def test_a_fourth_seat_is_out_of_range(self, event):
        e = reject([event], "seat_out_of_range", 0, ruleset=SANREN)
        assert "0-2" in e.reason

    @pytest.mark.parametrize("event", [
        kong(0, "concealed", "5m"), peng(0, "5万", 1), hu(1, "5m", win(0, fan=2)),
        hu(1, "5p", win(0, tiles="123m456p789p11p55p")),
        hu(1, "5p", win(0, tiles="456p789p11p55p", melds=[PENG("1m")])),
        draw(hs(0, "123456789p1234m"), st(1, "not_ting"), st(2, "not_ting")),
        escape(0, True, [hs(1, "1112345678999m")]),
    ])
    def test_a_wan_tile_anywhere_is_bad_input(self, event):
        reject([event], "suit_not_in_play", 0, ruleset=SANREN)

    def test_deltas_and_draws_have_three_entries(self):
        s = settle([draw(st(0, "ting", 1), st(1, "not_ting"), st(2, "not_ting"))], dealer=2, ruleset=SANREN)
        assert s.deltas == (12, -6, -6) and s.as_dict()["deltas"] == [12, -6, -6]
        reject([draw(st(0, "ting", 1), st(1, "not_ting"))], "bad_seats", 0, ruleset=SANREN)
        with pytest.raises(EventError) as info:
            Round(SANREN, dealer=3)
        assert info.value.code == "seat_out_of_range"

    def test_hands_endpoints_refuse_wan_tiles(self):
        for call in (lambda: score("123m456789p11p555p", "5p", ruleset=SANREN),
                     lambda: ting("123m456789p1155p", ruleset=SANREN),
                     lambda: discards("123m456789p11p555p", ruleset=SANREN),
                     lambda: validate("123m456p789p11p5p", ruleset=SANREN),
                     lambda: ting("1112345678999p", ruleset=SANREN, visible="5m"),
                     lambda: score(parse_hand("456789p11p555p", melds=[Meld.peng("1m")]), "5p", ruleset=SANREN),
                     lambda: score("123456789p11s555s", Win("5m"), ruleset=SANREN)):
            with pytest.raises(SuitNotInPlay) as exc:
                call()
            assert exc.value.code == "suit_not_in_play"
        assert ting("1112345678999p", ruleset=SANREN).ting


class TestThreePlayerNoVoid:
    """§14.2: no 定缺, no 花猪."""

    def test_voids_are_bad_input(self):
        with pytest.raises(EventError) as info:
            Round(SANREN, 0, voids=["p", None, None])
        assert info.value.code == "void_not_allowed"
        Round(SANREN, 0, voids=[None, None, None])
        with pytest.raises(EventError):
            Round(SANREN, 0, voids=[None, None, None, None])
        reject([hu(1, "5p", {"seat": 0, "hand": {"tiles": "123456789p11p555p", "void": "s"}})], "void_not_allowed", 0,
               ruleset=SANREN)
        with pytest.raises(VoidNotAllowed):
            ting(parse_hand("1112345678999p", void="m"), ruleset=SANREN)

    def test_no_huazhu_whatever_is_asked(self):
        s = settle([kong(0, "concealed", "5p"), draw(st(0, "huazhu"), st(1, "ting", 1), st(2, "not_ting"))],
                   dealer=0, ruleset={"preset": SANREN, "huazhu": 16})
        # a declared huazhu is simply not ting: it hands back its kong income and pays 大叫
        assert of_event(s, 1) == sorted([T(0, 1, 12, "refund", 1), T(0, 2, 12, "refund", 1),
                                         T(0, 1, 6, "dajiao", 1), T(2, 1, 6, "dajiao", 1)])


class TestThreePlayerFlow:
    """§14.3: flow as the mode says; §14.5: the others are the seats still in the round."""

    def test_xuezhan_ends_when_two_have_won(self):
        s = settle([hu(None, "5p", win(1, fan=2))], dealer=0, ruleset=SANREN)
        assert not s.ended and s.deltas == (-12, 24, -12)
        s = settle([hu(None, "5p", win(1, fan=2)), hu(None, "6p", win(2, fan=2))], dealer=0, ruleset=SANREN)
        assert s.ended and s.deltas == (-24, 24, 0) and s.next_dealer == 1
        reject([hu(None, "5p", win(1, fan=2)), hu(None, "6p", win(2, fan=2)), kong(0, "concealed", "1s")],
               "round_ended", 2, ruleset=SANREN)

    def test_normal_ends_with_the_first_hu(self):
        s = settle([hu(0, "5p", win(1, fan=2), win(2, fan=3))], dealer=0, ruleset={"preset": SANREN, "mode": "normal"})
        assert s.ended and s.deltas == (-36, 12, 24)

    def test_xueliu_with_three_players(self):
        R = {"preset": SANREN, "mode": "xueliu"}
        s = settle([hu(None, "5p", win(1, fan=2)), hu(None, "6p", win(1, fan=2)), hu(None, "7p", win(2, fan=2)),
                    draw(st(0, "ting", 2))], dealer=0, ruleset=R)
        assert s.deltas == (-36, 36, 0) and s.ended and s.next_dealer == 1

    def test_kongs_paid_by_the_seats_still_in(self):
        s = settle([kong(0, "concealed", "5p"), hu(None, "1s", win(1, fan=2)), kong(0, "added", "9s"),
                    kong(2, "direct", "7s", 0)], dealer=0, ruleset=SANREN)
        assert of_event(s, 0) == [T(1, 0, 12, "kong_concealed", 0), T(2, 0, 12, "kong_concealed", 0)]
        assert of_event(s, 2) == [T(2, 0, 6, "kong_added", 2)]
        assert of_event(s, 3) == [T(0, 2, 12, "kong_direct", 3)]        # direct_kong 2 units in the preset

    def test_escape_pays_each_other_seat_still_in(self):
        s = settle([hu(None, "1s", win(1, fan=2)), escape(2)], dealer=0, ruleset=SANREN)
        assert of_event(s, 1) == [T(2, 0, 96, "escape", 1)]
        s = settle([escape(0)], dealer=0, ruleset=SANREN)
        assert s.deltas == (-192, 96, 96)

    def test_qingyise_is_all_tong_or_all_tiao(self):
        assert [p.id for p in score("11333222456999s", "4s", ruleset=SANREN).patterns] == ["qingyise"]
        assert [p.id for p in score("23445677p345789s", Win("7p", self_drawn=True), ruleset=SANREN).patterns] == [
            "pinghu"]


class TestThreePlayerTables:
    def test_a_table_seats_as_many_players_as_its_ruleset(self):
        with pytest.raises(TableSetupError) as info:
            TableState.new(["A", "B", "C", "D"], SANREN)
        assert info.value.code == "bad_players" and isinstance(info.value, RuleError)
        with pytest.raises(TableSetupError):
            TableState.new(["A", "B", "C"], "xuezhan")
        with pytest.raises(TableSetupError) as info:
            TableState.new(["A", "B", "C"], SANREN, dealer=3)
        assert info.value.code == "seat_out_of_range"
        t = TableState.new(["A", "B", "C"], SANREN, dealer=2)
        assert t.balances == [0, 0, 0]

    @pytest.mark.parametrize("record, code", [
        ({"type": "round_start", "dealer": 3}, "seat_out_of_range"),
        ({"type": "round_start", "voids": [None, "p", None]}, "void_not_allowed"),
        ({"type": "round_start", "voids": [None, None, None, None]}, "bad_event"),
    ])
    def test_round_start_refusals(self, record, code):
        t = TableState.new(["A", "B", "C"], SANREN)
        with pytest.raises(EventError) as info:
            t.apply(record, 1)
        assert info.value.code == code

    def test_a_fourth_seat_event_at_a_table(self):
        t, _ = TableState.new(["A", "B", "C"], SANREN).apply({"type": "round_start", "voids": [None] * 3}, 1)
        with pytest.raises(EventError) as info:
            t.apply(kong(3, "concealed", "5p"), 2)
        assert info.value.code == "seat_out_of_range"
        t, out = t.apply(kong(2, "concealed", "5p"), 2)
        assert t.balances == [-12, -12, 24] and t.round_view()["deltas"] == [-12, -12, 24]


def test_xueliu_tiles_won_by_fan_winners_count_toward_the_copy_limit():
    """§13.2: the tile won is set aside and counts toward the 4-copy limit, even when the
    winner is given as a fan (found by an independent audit: six 9m were accepted)."""
    from service.rules.errors import EventError

    events = [{"type": "kong", "seat": 0, "kind": "concealed", "tile": "9m"},
              {"type": "hu", "from": None, "tile": "9m", "winners": [{"seat": 1, "fan": 2}]}]
    with pytest.raises(EventError) as exc:
        settle(events, dealer=0, ruleset="xueliu")
    assert (exc.value.code, exc.value.event) == ("too_many_copies", 1)
    three = [{"type": "hu", "from": 2, "tile": "9m", "winners": [{"seat": 1, "fan": 2}, {"seat": 3, "fan": 1}]}] * 4
    assert settle(three[:1] * 4, dealer=0, ruleset="xueliu").deltas  # four 9m won: possible
    with pytest.raises(EventError) as exc:
        settle(three[:1] * 5, dealer=0, ruleset="xueliu")
    assert (exc.value.code, exc.value.event) == ("too_many_copies", 4)
    # 血战 counts only the hands given (§6): a fan winner adds no tile
    assert settle(events, dealer=0, ruleset="xuezhan").winners == (1,)
