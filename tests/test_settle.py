"""Scenario tests for round settlement (docs/rules.md#s5.3, §6, §7, §8, §10, §11).

Every expected transfer and delta below is computed by hand from docs/rules.md, never
from the engine: base 6 (preset ``xuezhan``) unless a test says otherwise, so one
unit is 6 points and a win of f fan is worth 6 × 2^(f-1) (exponential scoring).

Transfers are compared as a multiset of ``(payer, payee, points, reason, event)``
after merging equal keys (docs/rules.md#s6 allows merging), so the tests do not depend
on whether the engine merges.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from service.rules.errors import EventError
from service.rules.settle import Round, Settlement, settle


# -- event builders ------------------------------------------------------------
def kong(seat, kind, tile, frm=None):
    ev = {"type": "kong", "seat": seat, "kind": kind, "tile": tile}
    if frm is not None:
        ev["from"] = frm
    return ev


def peng(seat, tile, frm):
    return {"type": "peng", "seat": seat, "tile": tile, "from": frm}


def win(seat, fan=None, tiles=None, melds=(), void=None):
    if fan is not None:
        return {"seat": seat, "fan": fan}
    hand = {"tiles": tiles, "melds": [dict(m) for m in melds]}
    if void is not None:
        hand["void"] = void
    return {"seat": seat, "hand": hand}


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


def KONG_MELD(tile, kind="concealed"):
    return {"type": "kong", "kind": kind, "tile": tile}


def PENG_MELD(tile):
    return {"type": "peng", "tile": tile}


# -- helpers ----------------------------------------------------------------------
def norm(transfers):
    """Merge equal (payer, payee, reason, event) keys; a sorted list of 5-tuples."""
    c: Counter = Counter()
    for t in transfers:
        assert t.points > 0, f"0 or negative transfer listed: {t}"
        assert t.payer != t.payee, f"a seat pays itself: {t}"
        c[(t.payer, t.payee, t.reason, t.event)] += t.points
    return sorted((p, q, pts, r, e) for (p, q, r, e), pts in c.items())


def T(payer, payee, points, reason, event):
    return (payer, payee, points, reason, event)


def check(s: Settlement, transfers, deltas):
    assert norm(s.transfers) == sorted(transfers)
    assert s.deltas == tuple(deltas)
    assert sum(s.deltas) == 0


class Bag(list):
    """A list of transfer tuples that compares equal to any ordering of the same items."""

    def __eq__(self, other):
        return sorted(self) == sorted(other)

    def __ne__(self, other):
        return not self == other


def of_event(s: Settlement, i):
    return Bag(norm(t for t in s.transfers if t.event == i))


def reject(events, code, event, **kw):
    kw.setdefault("dealer", 0)
    with pytest.raises(EventError) as info:
        settle(events, **kw)
    assert info.value.code == code, str(info.value)
    assert info.value.event == event, str(info.value)
    return info.value


# =========================================================================
# §6 kongs (and the §11 payment lines)
# =========================================================================
class TestKongs:
    def test_direct_kong_discarder_pays_one_unit(self):
        # §11: 直杠 6 from the discarder
        s = settle([kong(1, "direct", "5m", 2)], dealer=0)
        check(s, [T(2, 1, 6, "kong_direct", 0)], (0, 6, -6, 0))
        assert s.ended is False and s.next_dealer is None and s.winners == ()

    def test_added_kong_each_of_three_pays_one_unit(self):
        # §11: 面下杠 6 from each of three
        s = settle([kong(1, "added", "5m")], dealer=0)
        check(s, [T(0, 1, 6, "kong_added", 0), T(2, 1, 6, "kong_added", 0), T(3, 1, 6, "kong_added", 0)],
              (-6, 18, -6, -6))

    def test_concealed_kong_each_of_three_pays_two_units(self):
        # §11: 暗杠 12 from each of three
        s = settle([kong(0, "concealed", "7s")], dealer=0)
        check(s, [T(1, 0, 12, "kong_concealed", 0), T(2, 0, 12, "kong_concealed", 0),
                  T(3, 0, 12, "kong_concealed", 0)], (36, -12, -12, -12))

    def test_peng_then_added_kong(self):
        # the peng moves no money; the added kong (event 1) is paid by the three others
        s = settle([peng(2, "3p", 0), kong(2, "added", "3p")], dealer=0)
        check(s, [T(0, 2, 6, "kong_added", 1), T(1, 2, 6, "kong_added", 1), T(3, 2, 6, "kong_added", 1)],
              (-6, -6, 18, -6))

    def test_direct_kong_option_two_units(self):
        s = settle([kong(3, "direct", "9p", 0)], dealer=0, ruleset={"direct_kong": 2})
        check(s, [T(0, 3, 12, "kong_direct", 0)], (-12, 0, 0, 12))

    def test_kong_unit_options_and_base(self):
        rules = {"added_kong": 3, "concealed_kong": 1, "base": 5}
        s = settle([kong(0, "added", "1m"), kong(1, "concealed", "2m")], dealer=0, ruleset=rules)
        check(s, [T(1, 0, 15, "kong_added", 0), T(2, 0, 15, "kong_added", 0), T(3, 0, 15, "kong_added", 0),
                  T(0, 1, 5, "kong_concealed", 1), T(2, 1, 5, "kong_concealed", 1),
                  T(3, 1, 5, "kong_concealed", 1)],
              (45 - 5, -15 + 15, -20, -20))

    def test_zero_unit_kongs_list_no_transfers(self):
        s = settle([kong(0, "concealed", "1m"), kong(1, "direct", "2m", 0), kong(2, "added", "3m")],
                   dealer=0, ruleset={"concealed_kong": 0, "direct_kong": 0, "added_kong": 0})
        assert s.transfers == () and s.deltas == (0, 0, 0, 0)

    def test_winner_no_longer_pays_kongs_in_xuezhan(self):
        events = [
            hu(1, "5s", win(0, fan=1)),            # 0: seat 0 wins on seat 1's discard
            kong(2, "concealed", "1m"),            # 1: only 1 and 3 pay
            kong(3, "added", "2m"),                # 2: only 1 and 2 pay
        ]
        s = settle(events, dealer=0)
        check(s, [T(1, 0, 6, "dianpao", 0),
                  T(1, 2, 12, "kong_concealed", 1), T(3, 2, 12, "kong_concealed", 1),
                  T(1, 3, 6, "kong_added", 2), T(2, 3, 6, "kong_added", 2)],
              (6, -6 - 12 - 6, 24 - 6, -12 + 12))

    def test_huazhu_line_of_section_11(self):
        # §11: 花猪 96 to each non-花猪 (16 units × 6)
        s = settle([draw(st(0, "huazhu"), st(1, "not_ting"), st(2, "not_ting"), st(3, "not_ting"))], dealer=0)
        check(s, [T(0, 1, 96, "huazhu", 0), T(0, 2, 96, "huazhu", 0), T(0, 3, 96, "huazhu", 0)],
              (-288, 96, 96, 96))

    def test_escape_line_of_section_11(self):
        # §11: a seat escaping with three others still in pays 16 × 6 × 3 = 288
        s = settle([escape(2)], dealer=1)
        check(s, [T(2, 0, 96, "escape", 0), T(2, 1, 96, "escape", 0), T(2, 3, 96, "escape", 0)],
              (96, 96, -288, 96))
        assert s.ended is True and s.next_dealer == 1


# =========================================================================
# §11 worked examples: points of each hand, won on a discard
# =========================================================================
SECTION_11 = [
    ("23445677p345789s", (), 6),
    ("111222444m33399p", (), 12),
    ("11333222456999s", (), 24),
    ("111222333m78999p", (), 24),
    ("222555888s88855m", (), 48),
    ("11222244p557799m", (), 96),
    ("11334466778899s", (), 96),
    ("11123777888999p", (), 96),
    ("11224444557799m", (), 192),
    ("123345m999p66p", (KONG_MELD("2p"),), 12),
]


@pytest.mark.parametrize("tiles,melds,points", SECTION_11)
def test_section_11_hands_by_discard(tiles, melds, points):
    tile = tiles[0] + next(c for c in tiles if c.isalpha())   # the first rank with its suit
    s = settle([hu(3, tile, win(1, tiles=tiles, melds=melds))], dealer=0)
    check(s, [T(3, 1, points, "dianpao", 0)], (0, points, 0, -points))


# =========================================================================
# §6 hu
# =========================================================================
class TestHu:
    def test_hu_by_discard_declared_fan(self):
        s = settle([hu(2, "5p", win(0, fan=3))], dealer=0)
        check(s, [T(2, 0, 24, "dianpao", 0)], (24, 0, -24, 0))
        assert s.winners == (0,) and s.ended is False

    def test_cap_clips_declared_fan(self):
        # cap 3: a 6-fan win pays 2^(3-1) × 6 = 24
        s = settle([hu(2, "5p", win(0, fan=6))], dealer=0, ruleset={"cap": 3})
        check(s, [T(2, 0, 24, "dianpao", 0)], (24, 0, -24, 0))

    def test_linear_scoring(self):
        s = settle([hu(2, "5p", win(0, fan=5))], dealer=0, ruleset={"scoring": "linear", "base": 2})
        check(s, [T(2, 0, 10, "dianpao", 0)], (10, 0, -10, 0))

    def test_one_discard_many_winners_each_settled_one_to_one(self):
        s = settle([hu(3, "5p", win(0, fan=2), win(1, fan=3))], dealer=0)
        check(s, [T(3, 0, 12, "dianpao", 0), T(3, 1, 24, "dianpao", 0)], (12, 24, 0, -36))
        assert set(s.winners) == {0, 1}

    def test_one_discard_three_winners_ends_xuezhan(self):
        s = settle([hu(3, "5p", win(0, fan=1), win(1, fan=1), win(2, fan=4))], dealer=0)
        check(s, [T(3, 0, 6, "dianpao", 0), T(3, 1, 6, "dianpao", 0), T(3, 2, 48, "dianpao", 0)],
              (6, 6, 48, -60))
        assert s.ended is True
        assert s.next_dealer == 3      # `winner` rule: a 一炮多响 first win → the discarder

    def test_self_drawn_all_others_pay(self):
        s = settle([hu(None, "5p", win(1, fan=2))], dealer=0)
        check(s, [T(0, 1, 12, "zimo", 0), T(2, 1, 12, "zimo", 0), T(3, 1, 12, "zimo", 0)],
              (-12, 36, -12, -12))

    def test_self_drawn_after_a_win_only_active_seats_pay(self):
        s = settle([hu(3, "1m", win(0, fan=1)), hu(None, "5p", win(1, fan=2))], dealer=0)
        check(s, [T(3, 0, 6, "dianpao", 0), T(2, 1, 12, "zimo", 1), T(3, 1, 12, "zimo", 1)],
              (6, 24, -12, -18))

    def test_zimo_base_adds_one_unit_per_payer(self):
        s = settle([hu(None, "5p", win(1, fan=2))], dealer=0, ruleset={"zimo": "base"})
        check(s, [T(0, 1, 18, "zimo", 0), T(2, 1, 18, "zimo", 0), T(3, 1, 18, "zimo", 0)],
              (-18, 54, -18, -18))

    def test_zimo_base_does_not_touch_discard_wins(self):
        s = settle([hu(0, "5p", win(1, fan=2))], dealer=0, ruleset={"zimo": "base"})
        check(s, [T(0, 1, 12, "dianpao", 0)], (-12, 12, 0, 0))

    def test_zimo_fan_adds_one_fan_to_a_hand(self):
        # 11333222456999s: 清一色 3, + 自摸加番 1 = 4 fan → 48 from each
        s = settle([hu(None, "4s", win(2, tiles="11333222456999s"))], dealer=0, ruleset={"zimo": "fan"})
        check(s, [T(0, 2, 48, "zimo", 0), T(1, 2, 48, "zimo", 0), T(3, 2, 48, "zimo", 0)],
              (-48, -48, 144, -48))

    def test_zimo_fan_without_option_is_not_added(self):
        s = settle([hu(None, "4s", win(2, tiles="11333222456999s"))], dealer=0)
        check(s, [T(0, 2, 24, "zimo", 0), T(1, 2, 24, "zimo", 0), T(3, 2, 24, "zimo", 0)],
              (-24, -24, 72, -24))

    def test_zimo_fan_adds_nothing_to_a_declared_fan(self):
        # §5.3: a winner given as a number gives its total fan; nothing is added
        s = settle([hu(None, "4s", win(2, fan=3))], dealer=0, ruleset={"zimo": "fan"})
        check(s, [T(0, 2, 24, "zimo", 0), T(1, 2, 24, "zimo", 0), T(3, 2, 24, "zimo", 0)],
              (-24, -24, 72, -24))

    def test_haidi_only_when_option_on(self):
        ev = [hu(3, "5p", win(1, tiles=ROB_HAND), last_tile=True)]
        assert of_event(settle(ev, dealer=0), 0) == [T(3, 1, 6, "dianpao", 0)]                    # 平胡 1
        assert of_event(settle(ev, dealer=0, ruleset={"haidi": True}), 0) == [T(3, 1, 12, "dianpao", 0)]  # + 海底 1

    def test_heavenly_with_zimo_fan(self):
        # 天胡 6 + 自摸加番 1 = 7 fan → 6 × 64 = 384 from each
        s = settle([hu(None, "5p", win(0, tiles=ROB_HAND), heavenly=True)], dealer=0, ruleset={"zimo": "fan"})
        check(s, [T(1, 0, 384, "zimo", 0), T(2, 0, 384, "zimo", 0), T(3, 0, 384, "zimo", 0)],
              (1152, -384, -384, -384))

    def test_declared_fan_cap_with_zimo_base(self):
        # cap 2 clips 5 fan to 2 (12 points); 自摸加底 adds one unit outside the cap
        s = settle([hu(None, "4s", win(0, fan=5))], dealer=0, ruleset={"cap": 2, "zimo": "base"})
        check(s, [T(1, 0, 18, "zimo", 0), T(2, 0, 18, "zimo", 0), T(3, 0, 18, "zimo", 0)],
              (54, -18, -18, -18))


# =========================================================================
# 抢杠胡
# =========================================================================
ROB_HAND = "123m456m789m345p11p"   # 平胡 1, holds one 5p


class TestRobbingKong:
    def test_robbed_kong_void_and_robbed_player_pays_as_discarder(self):
        events = [
            peng(1, "5p", 3),                                        # 0
            kong(1, "added", "5p"),                                  # 1: 0, 2, 3 pay 6 each
            hu(1, "5p", win(0, tiles=ROB_HAND), robbing_kong=True),  # 2: 平胡 1 + 抢杠胡 1 = 12
        ]
        s = settle(events, dealer=0)
        check(s, [
            T(0, 1, 6, "kong_added", 1), T(2, 1, 6, "kong_added", 1), T(3, 1, 6, "kong_added", 1),
            T(1, 0, 6, "kong_void", 2), T(1, 2, 6, "kong_void", 2), T(1, 3, 6, "kong_void", 2),
            T(1, 0, 12, "dianpao", 2),
        ], (12, -12, 0, 0))

    def test_robbing_with_declared_fan_adds_nothing(self):
        events = [kong(2, "added", "5p"), hu(2, "5p", win(3, fan=2), robbing_kong=True)]
        s = settle(events, dealer=0)
        check(s, [
            T(0, 2, 6, "kong_added", 0), T(1, 2, 6, "kong_added", 0), T(3, 2, 6, "kong_added", 0),
            T(2, 0, 6, "kong_void", 1), T(2, 1, 6, "kong_void", 1), T(2, 3, 6, "kong_void", 1),
            T(2, 3, 12, "dianpao", 1),
        ], (0, 0, -12, 12))

    def test_robbed_kong_is_never_refunded(self):
        events = [
            kong(1, "added", "5p"),
            hu(1, "5p", win(0, fan=1), robbing_kong=True),
            draw(st(1, "not_ting"), st(2, "ting", 1), st(3, "not_ting")),   # 2
        ]
        s = settle(events, dealer=0)
        # no refund of the void kong; 查大叫: 1 and 3 pay seat 2's 大叫 (1 fan = 6)
        assert of_event(s, 2) == [T(1, 2, 6, "dajiao", 2), T(3, 2, 6, "dajiao", 2)]
        assert s.deltas == (6, -12, 12, -6)

    def test_robbed_kong_counts_as_a_peng_for_copies(self):
        # peng 5p (3) + kong adds the 4th; robbed → the kong counts as a peng (3) + the winner's 1 = 4
        events = [peng(1, "5p", 3), kong(1, "added", "5p"),
                  hu(1, "5p", win(0, tiles=ROB_HAND), robbing_kong=True)]
        settle(events, dealer=0)
        # a winner holding two 5p makes five copies (3 for the void kong + 2)
        events[2] = hu(1, "5p", win(0, tiles="123m456m789m55p999p"), robbing_kong=True)
        reject(events, "too_many_copies", 2)

    def test_robbing_a_kong_with_several_winners(self):
        events = [kong(0, "added", "5p"),
                  hu(0, "5p", win(1, fan=1), win(2, fan=2), robbing_kong=True)]
        s = settle(events, dealer=0)
        check(s, [
            T(1, 0, 6, "kong_added", 0), T(2, 0, 6, "kong_added", 0), T(3, 0, 6, "kong_added", 0),
            T(0, 1, 6, "kong_void", 1), T(0, 2, 6, "kong_void", 1), T(0, 3, 6, "kong_void", 1),
            T(0, 1, 6, "dianpao", 1), T(0, 2, 12, "dianpao", 1),
        ], (-18, 6, 12, 0))


# =========================================================================
# 杠上炮 (呼叫转移)
# =========================================================================
class TestGangShangPao:
    def test_transfer_of_concealed_kong_income(self):
        events = [kong(1, "concealed", "5m"),                   # 0: 0, 2, 3 pay 12 → 36
                  hu(1, "3s", win(2, fan=1), after_kong=True)]  # 1: 6 + transfer 36
        s = settle(events, dealer=0)
        check(s, [
            T(0, 1, 12, "kong_concealed", 0), T(2, 1, 12, "kong_concealed", 0), T(3, 1, 12, "kong_concealed", 0),
            T(1, 2, 6, "dianpao", 1), T(1, 2, 36, "transfer", 1),
        ], (-12, -6, 30, -12))

    def test_gangshangpao_fan_from_a_hand(self):
        # 123p456p789p234s55s won on 5s: 平胡 1 + 杠上炮 1 = 2 fan → 12
        events = [kong(1, "concealed", "5m"),
                  hu(1, "5s", win(2, tiles="123p456p789p234s55s"), after_kong=True)]
        s = settle(events, dealer=0)
        assert of_event(s, 1) == [T(1, 2, 12, "dianpao", 1), T(1, 2, 36, "transfer", 1)]

    def test_transfer_of_direct_kong_income(self):
        events = [kong(1, "direct", "5m", 0), hu(1, "3s", win(0, fan=2), after_kong=True)]
        s = settle(events, dealer=0)
        check(s, [T(0, 1, 6, "kong_direct", 0), T(1, 0, 12, "dianpao", 1), T(1, 0, 6, "transfer", 1)],
              (12, -12, 0, 0))

    def test_transfer_is_the_sum_actually_collected(self):
        events = [
            hu(3, "1m", win(0, fan=1)),                     # 0: seat 0 out
            kong(1, "concealed", "5m"),                     # 1: only 2 and 3 pay → 24
            hu(1, "3s", win(2, fan=1), after_kong=True),    # 2: 6 + 24
        ]
        s = settle(events, dealer=0)
        assert of_event(s, 2) == [T(1, 2, 6, "dianpao", 2), T(1, 2, 24, "transfer", 2)]
        assert s.deltas == (6, 24 - 30, -12 + 30, -6 - 12)

    def test_several_winners_each_receive_the_transfer(self):
        events = [kong(1, "added", "5m"),                   # 0, 2, 3 pay 6 → 18
                  hu(1, "3s", win(2, fan=1), win(3, fan=2), after_kong=True)]
        s = settle(events, dealer=0)
        assert of_event(s, 1) == [T(1, 2, 6, "dianpao", 1), T(1, 2, 18, "transfer", 1),
                                  T(1, 3, 12, "dianpao", 1), T(1, 3, 18, "transfer", 1)]

    def test_transferred_kong_never_refunded(self):
        events = [
            kong(1, "concealed", "5m"),                         # 0
            hu(1, "3s", win(2, fan=1), after_kong=True),        # 1
            draw(st(0, "not_ting"), st(1, "not_ting"), st(3, "ting", 2)),  # 2
        ]
        s = settle(events, dealer=0)
        # no refund of kong 0 by seat 1; 查大叫: 0 and 1 pay seat 3 2 fan = 12 each
        assert of_event(s, 2) == [T(0, 3, 12, "dajiao", 2), T(1, 3, 12, "dajiao", 2)]

    def test_zero_income_kong_transfers_nothing(self):
        events = [kong(1, "concealed", "5m"), hu(1, "3s", win(2, fan=1), after_kong=True)]
        s = settle(events, dealer=0, ruleset={"concealed_kong": 0})
        check(s, [T(1, 2, 6, "dianpao", 1)], (0, -6, 6, 0))


# =========================================================================
# 杠上花
# =========================================================================
GSH_TILES = "123m456m789m11p"          # + concealed kong 9p: 平胡 1 + 根 1 (+ 杠上花)


class TestGangShangHua:
    def test_self_drawn_after_own_kong_all_pay(self):
        events = [kong(0, "concealed", "9p"),
                  hu(None, "1p", win(0, tiles=GSH_TILES, melds=[KONG_MELD("9p")]), after_kong=True)]
        s = settle(events, dealer=0)
        # 平胡 1 + 根 1 + 杠上花 1 = 3 fan = 24 from each of 1, 2, 3
        check(s, [
            T(1, 0, 12, "kong_concealed", 0), T(2, 0, 12, "kong_concealed", 0), T(3, 0, 12, "kong_concealed", 0),
            T(1, 0, 24, "zimo", 1), T(2, 0, 24, "zimo", 1), T(3, 0, 24, "zimo", 1),
        ], (108, -36, -36, -36))

    def test_direct_kong_self_draw_option_all_pay(self):
        events = [kong(0, "direct", "9p", 2), hu(None, "1p", win(0, fan=2), after_kong=True)]
        s = settle(events, dealer=0)     # default dianganghua = self_draw
        check(s, [T(2, 0, 6, "kong_direct", 0),
                  T(1, 0, 12, "zimo", 1), T(2, 0, 12, "zimo", 1), T(3, 0, 12, "zimo", 1)],
              (42, -12, -18, -12))

    def test_dianganghua_discard_feeder_pays_alone(self):
        events = [kong(0, "direct", "9p", 2), hu(None, "1p", win(0, fan=2), after_kong=True)]
        s = settle(events, dealer=0, ruleset={"dianganghua": "discard", "zimo": "base"})
        # the feeder (2) pays alone as a discarder: 12, reason dianpao, no 自摸加底 unit
        check(s, [T(2, 0, 6, "kong_direct", 0), T(2, 0, 12, "dianpao", 1)], (18, 0, -18, 0))

    def test_dianganghua_discard_no_zimo_fan(self):
        events = [kong(0, "direct", "9p", 2),
                  hu(None, "1p", win(0, tiles=GSH_TILES, melds=[KONG_MELD("9p", "direct")]), after_kong=True)]
        s = settle(events, dealer=0, ruleset={"dianganghua": "discard", "zimo": "fan"})
        # 平胡 1 + 根 1 + 杠上花 1 = 3 → 24; no 自摸加番 (would be 48)
        assert of_event(s, 1) == [T(2, 0, 24, "dianpao", 1)]

    def test_dianganghua_discard_only_for_direct_kongs(self):
        events = [kong(0, "concealed", "9p"), hu(None, "1p", win(0, fan=2), after_kong=True)]
        s = settle(events, dealer=0, ruleset={"dianganghua": "discard", "zimo": "base"})
        assert of_event(s, 1) == [T(1, 0, 18, "zimo", 1), T(2, 0, 18, "zimo", 1), T(3, 0, 18, "zimo", 1)]

    def test_gangshanghua_after_a_win_only_active_pay(self):
        events = [hu(2, "1s", win(3, fan=1)), kong(0, "concealed", "9p"),
                  hu(None, "1p", win(0, fan=1), after_kong=True)]
        s = settle(events, dealer=0)
        check(s, [T(2, 3, 6, "dianpao", 0),
                  T(1, 0, 12, "kong_concealed", 1), T(2, 0, 12, "kong_concealed", 1),
                  T(1, 0, 6, "zimo", 2), T(2, 0, 6, "zimo", 2)],
              (36, -18, -24, 6))


# =========================================================================
# xuezhan vs normal
# =========================================================================
class TestModes:
    def test_xuezhan_goes_on_until_three_winners(self):
        events = [
            hu(1, "5s", win(0, fan=1)),            # 0
            kong(2, "concealed", "1m"),            # 1: 1, 3 pay 12
            hu(None, "3p", win(1, fan=2)),         # 2: 2, 3 pay 12
            hu(2, "4p", win(3, fan=1)),            # 3: third winner → ended
        ]
        s = settle(events, dealer=2)
        check(s, [
            T(1, 0, 6, "dianpao", 0),
            T(1, 2, 12, "kong_concealed", 1), T(3, 2, 12, "kong_concealed", 1),
            T(2, 1, 12, "zimo", 2), T(3, 1, 12, "zimo", 2),
            T(2, 3, 6, "dianpao", 3),
        ], (6, -6 - 12 + 24, 24 - 12 - 6, -12 - 12 + 6))
        assert s.winners == (0, 1, 3)
        assert s.ended is True and s.next_dealer == 0
        reject(events + [kong(2, "concealed", "2m")], "round_ended", 4, dealer=2)

    def test_xuezhan_not_ended_after_two_winners(self):
        s = settle([hu(1, "5s", win(0, fan=1)), hu(None, "3p", win(1, fan=2))], dealer=0)
        assert s.ended is False and s.next_dealer is None and s.winners == (0, 1)

    def test_normal_ends_at_first_hu(self):
        s = settle([hu(1, "5s", win(0, fan=1))], dealer=3, ruleset="normal")
        check(s, [T(1, 0, 6, "dianpao", 0)], (6, -6, 0, 0))
        assert s.ended is True
        for nxt in (kong(2, "concealed", "1m"), hu(None, "3p", win(2, fan=1)),
                    draw(st(2, "not_ting"), st(3, "not_ting")), escape(2), peng(2, "1m", 3)):
            reject([hu(1, "5s", win(0, fan=1)), nxt], "round_ended", 1, dealer=3, ruleset="normal")

    def test_normal_one_discard_many_winners_all_count(self):
        s = settle([hu(1, "5s", win(0, fan=1), win(3, fan=2))], dealer=0, ruleset="normal")
        check(s, [T(1, 0, 6, "dianpao", 0), T(1, 3, 12, "dianpao", 0)], (6, -18, 0, 12))
        assert s.ended is True and s.next_dealer == 1

    def test_xuezhan_override_to_normal_mode(self):
        s = settle([hu(1, "5s", win(0, fan=1))], dealer=0, ruleset={"mode": "normal"})
        assert s.ended is True and s.next_dealer == 0   # next_dealer stays `winner`


# =========================================================================
# §7 流局
# =========================================================================
class TestDraw:
    EVENTS = [
        kong(0, "concealed", "9m"),        # 0: 1, 2, 3 pay 12
        kong(1, "direct", "5p", 2),        # 1: 2 pays 6
        hu(3, "1s", win(2, fan=1)),        # 2: 3 pays 2 6
        draw(st(0, "not_ting"), st(1, "huazhu"), st(3, "ting", 2)),   # 3
    ]

    def test_refund_huazhu_dajiao_in_order(self):
        s = settle(self.EVENTS, dealer=0)
        refunds = [T(0, 1, 12, "refund", 3), T(0, 2, 12, "refund", 3), T(0, 3, 12, "refund", 3),
                   T(1, 2, 6, "refund", 3)]
        huazhu = [T(1, 0, 96, "huazhu", 3), T(1, 2, 96, "huazhu", 3), T(1, 3, 96, "huazhu", 3)]
        dajiao = [T(0, 3, 12, "dajiao", 3)]
        assert of_event(s, 3) == sorted(refunds + huazhu + dajiao)
        # the order of the steps: every refund, then 花猪, then 大叫
        order = [t.reason for t in s.transfers if t.event == 3]
        assert order == sorted(order, key=["refund", "huazhu", "dajiao"].index)
        assert s.deltas == (84, -288, 102, 102)
        assert s.ended is True and s.next_dealer == 2     # the first winner

    def test_huazhu_pays_winners_false(self):
        s = settle(self.EVENTS, dealer=0, ruleset={"huazhu_pays_winners": False})
        assert [t for t in of_event(s, 3) if t[3] == "huazhu"] == [T(1, 0, 96, "huazhu", 3),
                                                                  T(1, 3, 96, "huazhu", 3)]
        assert s.deltas == (84, -192, 6, 102)

    def test_ting_seats_keep_kong_income(self):
        events = [kong(0, "concealed", "9m"), kong(1, "added", "5p"),
                  draw(st(0, "ting", 1), st(1, "ting", 3), st(2, "not_ting"), st(3, "not_ting"))]
        s = settle(events, dealer=0)
        assert of_event(s, 2) == [T(2, 0, 6, "dajiao", 2), T(2, 1, 24, "dajiao", 2),
                                  T(3, 0, 6, "dajiao", 2), T(3, 1, 24, "dajiao", 2)]

    def test_huazhu_refunds_and_pays_no_dajiao(self):
        events = [kong(1, "added", "5p"),
                  draw(st(0, "ting", 3), st(1, "huazhu"), st(2, "huazhu"), st(3, "not_ting"))]
        s = settle(events, dealer=0)
        assert of_event(s, 1) == sorted([
            T(1, 0, 6, "refund", 1), T(1, 2, 6, "refund", 1), T(1, 3, 6, "refund", 1),
            T(1, 0, 96, "huazhu", 1), T(1, 3, 96, "huazhu", 1),
            T(2, 0, 96, "huazhu", 1), T(2, 3, 96, "huazhu", 1),
            T(3, 0, 24, "dajiao", 1),
        ])

    def test_dajiao_cap_applies(self):
        events = [draw(st(0, "ting", 6), st(1, "not_ting"), st(2, "ting", 1), st(3, "not_ting"))]
        s = settle(events, dealer=0, ruleset={"cap": 4})
        check(s, [T(1, 0, 48, "dajiao", 0), T(3, 0, 48, "dajiao", 0),
                  T(1, 2, 6, "dajiao", 0), T(3, 2, 6, "dajiao", 0)], (96, -54, 12, -54))

    # hands given at the draw are evaluated:
    # 1112345678999m (九莲): waits 1-9m; 1m/9m → 清一色 3 + 根 1 = 4 (48), the others 清一色 3 (24)
    # (the three hands together hold at most four copies of any tile)
    HANDS = [hs(0, "1112345678999m"),          # ting, 大叫 max 48 / min 24
             hs(1, "13579p2468p2468s"),          # two suits, not ting
             hs(2, "555m456p789s1122s"),          # three suits: 花猪
             st(3, "not_ting")]

    def test_hands_evaluated_dajiao_max(self):
        s = settle([draw(*self.HANDS)], dealer=0)
        check(s, [T(2, 0, 96, "huazhu", 0), T(2, 1, 96, "huazhu", 0), T(2, 3, 96, "huazhu", 0),
                  T(1, 0, 48, "dajiao", 0), T(3, 0, 48, "dajiao", 0)], (192, 48, -288, 48))

    def test_hands_evaluated_dajiao_min(self):
        s = settle([draw(*self.HANDS)], dealer=0, ruleset={"dajiao": "min"})
        assert [t for t in norm(s.transfers) if t[3] == "dajiao"] == [T(1, 0, 24, "dajiao", 0),
                                                                       T(3, 0, 24, "dajiao", 0)]

    def test_hands_evaluated_dajiao_cap(self):
        s = settle([draw(*self.HANDS)], dealer=0, ruleset={"cap": 3})
        assert [t for t in norm(s.transfers) if t[3] == "dajiao"] == [T(1, 0, 24, "dajiao", 0),
                                                                       T(3, 0, 24, "dajiao", 0)]

    def test_dead_wait_hand_is_not_ting(self):
        # 123456789m1111p: its only wait is 1p, all four held → 死叫, not ting: pays seat 1's 大叫
        s = settle([draw(hs(0, "123456789m1111p"), st(1, "ting", 2), st(2, "ting", 1), st(3, "ting", 1))],
                   dealer=0)
        check(s, [T(0, 1, 12, "dajiao", 0), T(0, 2, 6, "dajiao", 0), T(0, 3, 6, "dajiao", 0)],
              (-24, 12, 6, 6))

    def test_void_suit_hand_is_huazhu(self):
        # two suits, but holding the declared 定缺 suit → 花猪
        s = settle([draw(hs(0, "1112345678999m"), st(1, "not_ting"), st(2, "not_ting"), st(3, "not_ting"))],
                   dealer=0, voids=["m", None, None, None])
        check(s, [T(0, 1, 96, "huazhu", 0), T(0, 2, 96, "huazhu", 0), T(0, 3, 96, "huazhu", 0)],
              (-288, 96, 96, 96))

    def test_winner_gets_refund_of_kong_paid_before_winning(self):
        events = [kong(1, "concealed", "5m"),          # 0: 0, 2, 3 pay 12
                  hu(2, "3s", win(0, fan=1)),          # 1
                  draw(st(1, "not_ting"), st(2, "not_ting"), st(3, "not_ting"))]
        s = settle(events, dealer=0)
        assert of_event(s, 2) == [T(1, 0, 12, "refund", 2), T(1, 2, 12, "refund", 2), T(1, 3, 12, "refund", 2)]
        assert s.deltas == (6, 0, -6, 0)

    def test_refund_of_a_kong_made_after_others_won(self):
        events = [hu(2, "3s", win(0, fan=1)),           # 0
                  kong(1, "added", "5m"),               # 1: 2, 3 pay 6
                  draw(st(1, "not_ting"), st(2, "ting", 1), st(3, "not_ting"))]
        s = settle(events, dealer=0)
        assert of_event(s, 2) == [T(1, 2, 6, "refund", 2), T(1, 2, 6, "dajiao", 2),
                                  T(1, 3, 6, "refund", 2), T(3, 2, 6, "dajiao", 2)]

    def test_draw_in_normal_mode_keeps_dealer(self):
        s = settle([draw(st(0, "ting", 1), st(1, "not_ting"), st(2, "not_ting"), st(3, "not_ting"))],
                   dealer=2, ruleset="normal")
        assert s.ended is True and s.next_dealer == 2 and s.winners == ()


# =========================================================================
# §8 escapes
# =========================================================================
class TestEscape:
    def test_escape_pays_only_seats_still_in(self):
        s = settle([hu(1, "5s", win(0, fan=1)), escape(3)], dealer=0)
        check(s, [T(1, 0, 6, "dianpao", 0), T(3, 1, 96, "escape", 1), T(3, 2, 96, "escape", 1)],
              (6, 90, 96, -192))
        assert s.ended is True and s.next_dealer == 0      # a round with a win: its first winner

    def test_payments_so_far_stand(self):
        s = settle([kong(3, "concealed", "1m"), escape(3)], dealer=0)
        # the kong stands (0, 1, 2 paid 12 each); then 96 to each of them
        assert s.deltas == (-12 + 96, -12 + 96, -12 + 96, 36 - 288)

    def test_last_four_larger_dajiao_charged(self):
        seats = [st(0, "ting", 7), st(1, "ting", 1), st(2, "not_ting")]
        s = settle([escape(3, True, seats)], dealer=0)
        # escape: 3 × 96 = 288; 大叫: 384 + 6 = 390 > 288 → charged instead
        check(s, [T(3, 0, 384, "escape", 0), T(3, 1, 6, "escape", 0)], (384, 6, 0, -390))

    def test_last_four_equal_dajiao_not_charged(self):
        seats = [st(0, "ting", 6), st(1, "ting", 5), st(2, "not_ting")]    # 192 + 96 = 288
        s = settle([escape(3, True, seats)], dealer=0)
        check(s, [T(3, 0, 96, "escape", 0), T(3, 1, 96, "escape", 0), T(3, 2, 96, "escape", 0)],
              (96, 96, 96, -288))

    def test_last_four_smaller_dajiao_not_charged(self):
        s = settle([escape(3, True, [st(0, "ting", 3)])], dealer=0)
        check(s, [T(3, 0, 96, "escape", 0), T(3, 1, 96, "escape", 0), T(3, 2, 96, "escape", 0)],
              (96, 96, 96, -288))

    def test_last_four_false_ignores_dajiao(self):
        s = settle([escape(3, False, [st(0, "ting", 9)])], dealer=0)
        assert norm(s.transfers) == [T(3, 0, 96, "escape", 0), T(3, 1, 96, "escape", 0), T(3, 2, 96, "escape", 0)]

    def test_last_four_own_entry_ignored_and_hands_evaluated(self):
        seats = [st(3, "ting", 10), hs(0, "1112345678999m"), st(1, "not_ting")]
        s = settle([escape(3, True, seats)], dealer=0, ruleset={"escape": 1})
        # escape 1 unit: 3 × 6 = 18; 大叫 of seat 0's hand 48 > 18 → charged; seat 3's own entry ignored
        check(s, [T(3, 0, 48, "escape", 0)], (48, 0, 0, -48))

    def test_last_four_entry_for_a_seat_not_in_round(self):
        reject([hu(1, "5s", win(0, fan=1)), escape(3, True, [st(0, "ting", 9)])], "bad_seats", 1)

    def test_last_four_cap_applies_to_dajiao(self):
        s = settle([escape(3, True, [st(0, "ting", 9)])], dealer=0, ruleset={"cap": 5, "escape": 1})
        # 9 fan capped to 5 → 96 > 18
        check(s, [T(3, 0, 96, "escape", 0)], (96, 0, 0, -96))

    # -- a winner leaves (血战) ----------------------------------------------------
    def test_winner_leaves_deferred(self):
        events = [
            kong(0, "concealed", "9m"),           # 0: 1, 2, 3 pay 12
            hu(1, "3s", win(0, fan=2)),           # 1: 1 pays 12
            escape(0),                            # 2: nothing moves
            kong(1, "concealed", "5m"),           # 3: only 2, 3 pay
            draw(st(1, "not_ting"), st(2, "ting", 1), st(3, "huazhu")),   # 4
        ]
        s = settle(events, dealer=0)
        assert of_event(s, 2) == []
        assert of_event(s, 3) == [T(2, 1, 12, "kong_concealed", 3), T(3, 1, 12, "kong_concealed", 3)]
        assert of_event(s, 4) == sorted([
            T(1, 2, 12, "refund", 4), T(1, 3, 12, "refund", 4),
            T(3, 1, 96, "huazhu", 4), T(3, 2, 96, "huazhu", 4),       # not to the left winner 0
            T(1, 2, 6, "dajiao", 4),
        ])
        assert s.ended is True and s.next_dealer == 0

    def test_left_winner_gets_no_refund(self):
        events = [kong(1, "concealed", "5m"), hu(2, "3s", win(0, fan=1)), escape(0),
                  draw(st(1, "not_ting"), st(2, "not_ting"), st(3, "not_ting"))]
        s = settle(events, dealer=0)
        assert of_event(s, 3) == [T(1, 2, 12, "refund", 3), T(1, 3, 12, "refund", 3)]

    def test_winner_leaving_cannot_act_again(self):
        base = [hu(1, "3s", win(0, fan=2)), escape(0)]
        reject(base + [escape(0)], "seat_not_in_round", 2)
        reject(base + [hu(0, "1m", win(2, fan=1))], "seat_not_in_round", 2)
        reject(base + [draw(st(0, "not_ting"), st(1, "not_ting"), st(2, "not_ting"), st(3, "not_ting"))],
               "bad_seats", 2)

    def test_winner_leaves_forfeit(self):
        events = [
            kong(0, "concealed", "9m"),           # 0: 1, 2, 3 pay 12 to 0
            hu(2, "1s", win(3, fan=1)),           # 1: 2 pays 3 6
            escape(3),                            # 2: forfeit: 3 returns 6 to 2
            hu(1, "3s", win(0, fan=2)),           # 3: 1 pays 0 12
            escape(0),                            # 4: forfeit: 0 returns 12+12 to 1, 12 to 2, nothing to 3 (left)
        ]
        s = settle(events, dealer=0, ruleset={"winner_leaves": "forfeit"})
        assert of_event(s, 2) == [T(3, 2, 6, "forfeit", 2)]
        assert of_event(s, 4) == [T(0, 1, 24, "forfeit", 4), T(0, 2, 12, "forfeit", 4)]
        # seat 3's kong payment to 0 is not returned (3 has left)
        assert s.deltas == (36 + 12 - 24 - 12, -12 - 12 + 24, -12 - 6 + 6 + 12, -12 + 6 - 6)
        assert s.ended is False

    def test_forfeit_payments_made_stand(self):
        events = [hu(2, "1s", win(3, fan=1)),     # 0
                  kong(1, "concealed", "5m"),     # 1: 0, 2 pay 12
                  hu(None, "3s", win(0, fan=1)),  # 2: 1, 2 pay 6
                  escape(0)]                      # 3: 0 returns the 12 it got (6 + 6), keeps its kong payment
        s = settle(events, dealer=0, ruleset={"winner_leaves": "forfeit"})
        assert of_event(s, 3) == [T(0, 1, 6, "forfeit", 3), T(0, 2, 6, "forfeit", 3)]
        assert s.deltas == (-12, 24, -18, 6)

    def test_forfeit_does_not_return_kong_void(self):
        events = [kong(1, "added", "5p"),                                   # 0: 0, 2, 3 pay 6
                  hu(1, "5p", win(0, tiles=ROB_HAND), robbing_kong=True),  # 1: void + 12
                  escape(0)]                                                # 2
        s = settle(events, dealer=0, ruleset={"winner_leaves": "forfeit"})
        assert of_event(s, 2) == [T(0, 1, 12, "forfeit", 2)]
        assert s.deltas == (0, 0, 0, 0)
        d = settle(events, dealer=0)
        assert of_event(d, 2) == [] and d.deltas == (12, -12, 0, 0)

    def test_forfeit_voided_kong_income(self):
        """A robbed kong's payments were already given back by kong_void: forfeit must not repeat them."""
        events = [kong(1, "added", "5p"),                               # 0: 0, 2, 3 pay 1 6 each
                  hu(1, "5p", win(0, fan=1), robbing_kong=True),       # 1: 1 reverses the 18, pays 0 6
                  hu(2, "1s", win(1, fan=1)),                          # 2: 2 pays 1 6
                  escape(1)]                                           # 3: 1 leaves, forfeit
        s = settle(events, dealer=0, ruleset={"winner_leaves": "forfeit"})
        # the only payment 1 still holds is 2's 6 (event 2): that is what it returns
        assert of_event(s, 3) == [T(1, 2, 6, "forfeit", 3)]
        assert s.deltas == (6, -6, 0, 0)

    def test_left_winner_gets_no_huazhu(self):
        events = [hu(2, "1s", win(3, fan=1)), escape(3),
                  draw(st(0, "huazhu"), st(1, "not_ting"), st(2, "not_ting"))]
        s = settle(events, dealer=0)
        assert of_event(s, 2) == [T(0, 1, 96, "huazhu", 2), T(0, 2, 96, "huazhu", 2)]

    def test_xuezhan_escape_ends_after_leaving_winner(self):
        events = [hu(2, "1s", win(3, fan=1)), escape(3), escape(1)]
        s = settle(events, dealer=0)
        assert of_event(s, 2) == [T(1, 0, 96, "escape", 2), T(1, 2, 96, "escape", 2)]
        assert s.ended is True and s.next_dealer == 3


# =========================================================================
# next dealer (§10)
# =========================================================================
class TestNextDealer:
    def test_winner_rule_first_winner(self):
        s = settle([hu(3, "1s", win(1, fan=1)), hu(0, "2s", win(2, fan=1)), hu(None, "3s", win(3, fan=1))],
                   dealer=0)
        assert s.next_dealer == 1 and s.winners == (1, 2, 3)

    def test_winner_rule_self_drawn_first(self):
        s = settle([hu(None, "1s", win(2, fan=1)), hu(0, "2s", win(1, fan=1)), hu(0, "3s", win(3, fan=1))],
                   dealer=0)
        assert s.next_dealer == 2

    def test_winner_rule_multi_win_first_gives_discarder(self):
        s = settle([hu(3, "1s", win(1, fan=1), win(2, fan=1)), hu(None, "3s", win(0, fan=1))], dealer=0)
        assert s.ended is True and s.next_dealer == 3

    def test_winner_rule_later_multi_win_does_not_matter(self):
        s = settle([hu(None, "1s", win(2, fan=1)), hu(0, "2s", win(1, fan=1), win(3, fan=1))], dealer=0)
        assert s.ended is True and s.next_dealer == 2

    def test_draw_keeps_dealer(self):
        s = settle([draw(st(0, "not_ting"), st(1, "not_ting"), st(2, "not_ting"), st(3, "not_ting"))], dealer=3)
        assert s.next_dealer == 3

    def test_escape_without_win_keeps_dealer(self):
        assert settle([escape(0)], dealer=1, ruleset="normal").next_dealer == 1

    def test_discarder_rule(self):
        rules = {"next_dealer": "discarder"}
        s = settle([hu(3, "1s", win(1, fan=1)), hu(0, "2s", win(2, fan=1)), hu(0, "3s", win(3, fan=1))],
                   dealer=0, ruleset=rules)
        assert s.next_dealer == 3
        s = settle([hu(None, "1s", win(2, fan=1)), hu(0, "2s", win(1, fan=1)), hu(0, "3s", win(3, fan=1))],
                   dealer=0, ruleset=rules)
        assert s.next_dealer == 2
        s = settle([hu(3, "1s", win(1, fan=1), win(2, fan=1), win(0, fan=1))], dealer=1, ruleset=rules)
        assert s.next_dealer == 3

    def test_normal_preset_uses_discarder(self):
        assert settle([hu(2, "1s", win(1, fan=1))], dealer=0, ruleset="normal").next_dealer == 2
        assert settle([hu(None, "1s", win(1, fan=1))], dealer=0, ruleset="normal").next_dealer == 1
        assert settle([draw(st(0, "not_ting"), st(1, "not_ting"), st(2, "not_ting"), st(3, "not_ting"))],
                      dealer=2, ruleset="normal").next_dealer == 2

    def test_null_until_ended(self):
        assert settle([], dealer=0).next_dealer is None
        assert settle([hu(2, "1s", win(1, fan=1))], dealer=0).next_dealer is None


# =========================================================================
# chengdu-points preset (§9)
# =========================================================================
class TestChengduPoints:
    def test_kongs_pay_nothing(self):
        s = settle([kong(0, "concealed", "9p"), kong(1, "direct", "1m", 0)], dealer=0, ruleset="chengdu-points")
        assert s.transfers == () and s.deltas == (0, 0, 0, 0)

    def test_linear_points(self):
        s = settle([hu(3, "4s", win(1, tiles="11333222456999s"))], dealer=0, ruleset="chengdu-points")
        check(s, [T(3, 1, 3, "dianpao", 0)], (0, 3, 0, -3))      # 清一色 3 × base 1
        assert s.ended is True and s.next_dealer == 1

    def test_gangshanghua_after_concealed_kong_all_pay(self):
        events = [kong(0, "concealed", "9p"),
                  hu(None, "1p", win(0, tiles=GSH_TILES, melds=[KONG_MELD("9p")]), after_kong=True)]
        s = settle(events, dealer=0, ruleset="chengdu-points")
        # 平胡 1 + 根 1 + 杠上花 2 = 4 (linear, base 1)
        check(s, [T(1, 0, 4, "zimo", 1), T(2, 0, 4, "zimo", 1), T(3, 0, 4, "zimo", 1)], (12, -4, -4, -4))

    def test_dianganghua_discard_after_direct_kong(self):
        events = [kong(0, "direct", "9p", 2),
                  hu(None, "1p", win(0, tiles=GSH_TILES, melds=[KONG_MELD("9p", "direct")]), after_kong=True)]
        s = settle(events, dealer=0, ruleset="chengdu-points")
        check(s, [T(2, 0, 4, "dianpao", 1)], (4, 0, -4, 0))

    def test_gangshangpao_is_worth_nothing(self):
        events = [kong(1, "concealed", "5m"),
                  hu(1, "5s", win(2, tiles="123p456p789p234s55s"), after_kong=True)]
        s = settle(events, dealer=0, ruleset="chengdu-points")
        # 平胡 1 + 杠上炮 0 = 1 point; the kong collected nothing, so nothing is transferred
        check(s, [T(1, 2, 1, "dianpao", 1)], (0, -1, 1, 0))
        assert s.ended is True and s.next_dealer == 2

    def test_dajiao_min(self):
        s = settle([draw(hs(0, "1112345678999m"), st(1, "not_ting"), st(2, "not_ting"), st(3, "huazhu"))],
                   dealer=0, ruleset="chengdu-points")
        # 大叫 min = 清一色 3 → 3; no 花猪 in this table (§7.2 as revised): seat 3 is simply not ting
        check(s, [T(1, 0, 3, "dajiao", 0), T(2, 0, 3, "dajiao", 0), T(3, 0, 3, "dajiao", 0)], (9, -3, -3, -3))

    def test_earthly_by_discard_on_dealers_discard(self):
        # §5.1/§9: under the chengdu table 地胡 may be won on the dealer's (first) discard: 8 fan
        s = settle([hu(0, "5p", win(2, tiles=ROB_HAND), earthly=True)], dealer=0, ruleset="chengdu-points")
        check(s, [T(0, 2, 8, "dianpao", 0)], (-8, 0, 8, 0))

    def test_earthly_by_discard_not_dealers_discard(self):
        reject([hu(1, "5p", win(2, fan=8), earthly=True)], "contradictory_flags", 0, ruleset="chengdu-points")

    def test_earthly_by_discard_rejected_under_qq(self):
        reject([hu(0, "5p", win(2, fan=6), earthly=True)], "contradictory_flags", 0)


# =========================================================================
# 天胡 / 地胡
# =========================================================================
class TestHeavenlyEarthly:
    def test_heavenly_dealer_first(self):
        s = settle([hu(None, "5p", win(2, tiles=ROB_HAND), heavenly=True)], dealer=2)
        # 天胡 6 beats 平胡 1: 192 from each
        check(s, [T(0, 2, 192, "zimo", 0), T(1, 2, 192, "zimo", 0), T(3, 2, 192, "zimo", 0)],
              (-192, -192, 576, -192))

    def test_heavenly_not_first(self):
        reject([kong(1, "concealed", "1s"), hu(None, "5p", win(0, fan=6), heavenly=True)],
               "contradictory_flags", 1)

    def test_heavenly_not_dealer(self):
        reject([hu(None, "5p", win(1, fan=6), heavenly=True)], "contradictory_flags", 0)

    def test_heavenly_by_discard(self):
        reject([hu(1, "5p", win(0, fan=6), heavenly=True)], "contradictory_flags", 0)

    def test_heavenly_with_melds(self):
        reject([hu(None, "1p", win(0, tiles=GSH_TILES, melds=[KONG_MELD("9p")]), heavenly=True)],
               "contradictory_flags", 0)

    def test_earthly_self_drawn(self):
        s = settle([hu(None, "5p", win(1, tiles=ROB_HAND), earthly=True)], dealer=0)
        check(s, [T(0, 1, 192, "zimo", 0), T(2, 1, 192, "zimo", 0), T(3, 1, 192, "zimo", 0)],
              (-192, 576, -192, -192))

    def test_earthly_by_dealer(self):
        reject([hu(None, "5p", win(0, fan=6), earthly=True)], "contradictory_flags", 0)

    def test_earthly_after_a_peng_or_kong(self):
        reject([peng(2, "1s", 0), hu(None, "5p", win(1, fan=6), earthly=True)], "contradictory_flags", 1)
        reject([kong(2, "concealed", "1s"), hu(None, "5p", win(1, fan=6), earthly=True)],
               "contradictory_flags", 1)


# =========================================================================
# invalid sequences
# =========================================================================
class TestRejections:
    def test_seat_out_of_range(self):
        reject([kong(4, "concealed", "1m")], "seat_out_of_range", 0)
        reject([kong(0, "concealed", "1m"), kong(1, "direct", "2m", 7)], "seat_out_of_range", 1)
        reject([kong(0, "concealed", "1m"), hu(None, "1s", win(-1, fan=1))], "seat_out_of_range", 1)
        reject([hu(5, "1s", win(1, fan=1))], "seat_out_of_range", 0)
        reject([peng(0, "1s", 4)], "seat_out_of_range", 0)
        reject([escape(9)], "seat_out_of_range", 0)
        reject([draw(st(0, "not_ting"), st(1, "not_ting"), st(2, "not_ting"), st(4, "not_ting"))],
               "seat_out_of_range", 0)

    def test_dealer_out_of_range(self):
        with pytest.raises(EventError) as info:
            settle([], dealer=4)
        assert info.value.code == "seat_out_of_range"

    def test_winner_acting_again(self):
        first = [hu(2, "1s", win(1, fan=1))]
        reject(first + [kong(1, "concealed", "5m")], "seat_not_in_round", 1)
        reject(first + [kong(0, "direct", "5m", 1)], "seat_not_in_round", 1)
        reject(first + [peng(1, "5m", 0)], "seat_not_in_round", 1)
        reject(first + [peng(0, "5m", 1)], "seat_not_in_round", 1)
        reject(first + [hu(None, "3s", win(1, fan=1))], "seat_not_in_round", 1)
        reject(first + [hu(1, "3s", win(0, fan=1))], "seat_not_in_round", 1)
        reject(first + [hu(0, "3s", win(1, fan=1), win(3, fan=1))], "seat_not_in_round", 1)

    def test_discarder_is_winner(self):
        reject([hu(1, "1s", win(1, fan=1))], "self_discard", 0)
        reject([hu(1, "1s", win(0, fan=1), win(1, fan=1))], "self_discard", 0)
        reject([kong(1, "direct", "1s", 1)], "self_discard", 0)
        reject([peng(1, "1s", 1)], "self_discard", 0)

    def test_duplicate_winner_and_self_draw_many(self):
        reject([hu(1, "1s", win(0, fan=1), win(0, fan=2))], "duplicate_winner", 0)
        reject([hu(None, "1s", win(0, fan=1), win(2, fan=2))], "self_draw_one_winner", 0)

    def test_non_winning_hand(self):
        reject([kong(0, "concealed", "9s"), hu(2, "1m", win(0, tiles="1234567m1234567p"))], "not_a_win", 1)

    def test_three_suit_hand(self):
        reject([hu(2, "1m", win(0, tiles="123m456p789s111m22m"))], "not_a_win", 0)

    def test_three_suit_hand_through_melds(self):
        reject([hu(2, "1m", win(0, tiles="123m456p111m22m", melds=[PENG_MELD("9s")]))], "not_a_win", 0)

    def test_void_suit_hand(self):
        reject([hu(2, "1m", win(0, tiles="11122233344455m", void="m"))], "not_a_win", 0)
        reject([hu(2, "1m", win(0, tiles="11122233344455m"))], "not_a_win", 0, voids=["m", None, None, None])
        # the same hand with another seat's void wins
        settle([hu(2, "1m", win(0, tiles="11122233344455m"))], dealer=0, voids=[None, "m", "m", "m"])

    def test_win_tile_not_in_hand(self):
        reject([hu(2, "9p", win(0, tiles="11122233344455m"))], "win_tile_not_in_hand", 0)

    def test_bad_hand_size(self):
        reject([hu(2, "1m", win(0, tiles="1112223334445m"))], "bad_hand", 0)
        reject([draw(hs(0, "111222333444m"), st(1, "not_ting"), st(2, "not_ting"), st(3, "not_ting"))],
               "bad_hand", 0)

    # -- fifth copies -------------------------------------------------------------
    def test_fifth_copy_across_melds(self):
        reject([peng(1, "5m", 0), kong(2, "concealed", "5m")], "too_many_copies", 1)
        reject([kong(1, "concealed", "5m"), kong(2, "direct", "5m", 0)], "too_many_copies", 1)
        reject([peng(1, "5m", 0), peng(2, "5m", 0)], "too_many_copies", 1)
        reject([kong(1, "added", "5m"), peng(2, "5m", 0)], "too_many_copies", 1)

    def test_fifth_copy_across_melds_and_hands(self):
        # seat 1's peng 1m + seat 0's hand holding 111m (+1 in 123m) = 7
        reject([peng(1, "1m", 2), hu(2, "4m", win(0, tiles="11122233344455m"))], "too_many_copies", 1)
        # a draw hand against an earlier kong
        reject([kong(1, "concealed", "9m"),
                draw(hs(0, "1112345678999m"), st(1, "not_ting"), st(2, "not_ting"), st(3, "not_ting"))],
               "too_many_copies", 1)

    def test_fifth_copy_across_two_hands(self):
        events = [hu(3, "2m", win(0, tiles="11122233344455m")),
                  draw(hs(1, "1112345678999m"), st(2, "not_ting"), st(3, "not_ting"))]
        reject(events, "too_many_copies", 1)

    def test_fifth_copy_hand_melds_counted_when_none_logged(self):
        # seat 0 logged no melds: its hand's peng 7s counts (3)
        w0 = hu(3, "1s", win(0, tiles="123s456s111m22m", melds=[PENG_MELD("7s")]))
        settle([w0, hu(3, "1p", win(1, tiles="123p456p789p789s11p"))], dealer=0)           # 3 + 1
        reject([w0, hu(3, "1p", win(1, tiles="123p456p777s789s11p"))], "too_many_copies", 1)  # 3 + 2

    def test_logged_melds_replace_hand_melds(self):
        # seat 0 logged a kong: the unlogged peng 7s in its hand is not counted (§6)
        events = [kong(0, "concealed", "9m"),
                  hu(3, "1s", win(0, tiles="123s456s11m", melds=[KONG_MELD("9m"), PENG_MELD("7s")])),
                  hu(3, "1p", win(1, tiles="123p456p777s789s11p"))]
        settle(events, dealer=0)

    def test_multi_winner_tile_counted_once(self):
        # winner 0 holds 555p, winner 1 holds 55p: 3 + 2 - 1 (the one discard) = 4
        w0 = win(0, tiles="123m456m789m555p11p")
        w1 = win(1, tiles="234m567m888m55p678p")
        settle([hu(3, "5p", w0, w1)], dealer=0)
        w1b = win(1, tiles="234m567m888m555p99p")             # 3 + 3 - 1 = 5
        reject([hu(3, "5p", w0, w1b)], "too_many_copies", 0)

    def test_self_drawn_tile_counts(self):
        # seat 2's peng 5p (3) + a self-drawn hand with 55p → 5; with one 5p → 4
        settle([peng(2, "5p", 1), hu(None, "5p", win(0, tiles=ROB_HAND))], dealer=0)
        reject([peng(2, "5p", 1), hu(None, "5p", win(0, tiles="123m456m789m55p999p"))], "too_many_copies", 1)

    # -- pengs and added kongs --------------------------------------------------------
    def test_added_kong_without_peng_when_pengs_logged(self):
        # pengs are logged per seat (§6 counts melds per seat): seat 2 logs none, so its added
        # kong stands alone as four copies — here a fifth and more of 5m
        reject([peng(1, "5m", 0), kong(2, "added", "5m")], "too_many_copies", 1)
        s = settle([peng(1, "5m", 0), kong(2, "added", "6m")], dealer=0)
        assert s.deltas == (-6, -6, 18, -6)
        reject([peng(1, "5m", 0), kong(1, "added", "6m")], "no_peng", 1)
        # after upgrading the peng it is gone: a second added kong of it has no peng
        reject([peng(1, "5m", 0), kong(1, "added", "5m"), kong(1, "added", "5m")], "no_peng", 2)

    def test_added_kong_without_any_logged_peng_is_allowed(self):
        s = settle([kong(1, "added", "5m")], dealer=0)
        assert s.deltas == (-6, 18, -6, -6)

    # -- kong-dependent wins -------------------------------------------------------------
    def test_gangshangpao_without_kong(self):
        reject([hu(1, "3s", win(2, fan=1), after_kong=True)], "kong_required", 0)
        reject([peng(1, "1m", 0), hu(1, "3s", win(2, fan=1), after_kong=True)], "kong_required", 1)
        # the kong is not the discarder's
        reject([kong(0, "concealed", "5m"), hu(1, "3s", win(2, fan=1), after_kong=True)], "kong_required", 1)
        # the kong is not just before
        reject([kong(1, "concealed", "5m"), peng(3, "1m", 0), hu(1, "3s", win(2, fan=1), after_kong=True)],
               "kong_required", 2)

    def test_gangshanghua_without_kong(self):
        reject([hu(None, "3s", win(2, fan=1), after_kong=True)], "kong_required", 0)
        reject([kong(1, "concealed", "5m"), hu(None, "3s", win(2, fan=1), after_kong=True)], "kong_required", 1)
        reject([kong(2, "concealed", "5m"), hu(0, "7s", win(1, fan=1)),
                hu(None, "3s", win(2, fan=1), after_kong=True)], "kong_required", 2)

    def test_robbing_kong_without_added_kong(self):
        reject([hu(1, "5p", win(0, fan=1), robbing_kong=True)], "kong_required", 0)
        reject([kong(1, "concealed", "5p"), hu(1, "5p", win(0, fan=1), robbing_kong=True)], "kong_required", 1)
        reject([kong(1, "direct", "5p", 2), hu(1, "5p", win(0, fan=1), robbing_kong=True)], "kong_required", 1)
        reject([kong(1, "added", "6p"), hu(1, "5p", win(0, fan=1), robbing_kong=True)], "kong_required", 1)
        reject([kong(2, "added", "5p"), hu(1, "5p", win(0, fan=1), robbing_kong=True)], "kong_required", 1)
        reject([kong(1, "added", "5p"), kong(3, "concealed", "1s"), hu(1, "5p", win(0, fan=1), robbing_kong=True)],
               "kong_required", 2)

    def test_contradictory_flags(self):
        reject([kong(1, "added", "5p"), hu(None, "5p", win(0, fan=1), robbing_kong=True)],
               "contradictory_flags", 1)
        reject([kong(1, "added", "5p"), hu(1, "5p", win(0, fan=1), robbing_kong=True, after_kong=True)],
               "contradictory_flags", 1)
        reject([hu(None, "5p", win(0, fan=6), heavenly=True, earthly=True)], "contradictory_flags", 0)
        reject([hu(None, "5p", win(0, fan=6), heavenly=True, last_tile=True)], "contradictory_flags", 0)
        reject([hu(None, "5p", win(1, fan=6), earthly=True, last_tile=True)], "contradictory_flags", 0)

    # -- ended rounds, draws ----------------------------------------------------------------
    def test_events_after_round_ended(self):
        d = draw(st(0, "not_ting"), st(1, "not_ting"), st(2, "not_ting"), st(3, "not_ting"))
        reject([d, kong(0, "concealed", "1m")], "round_ended", 1)
        reject([escape(1), hu(None, "1m", win(0, fan=1))], "round_ended", 1)
        reject([escape(1), escape(2)], "round_ended", 1)
        reject([d, {"type": "bogus"}], "round_ended", 1)

    def test_draw_must_list_every_active_seat_once(self):
        reject([draw(st(0, "not_ting"), st(1, "not_ting"), st(2, "not_ting"))], "bad_seats", 0)
        reject([draw(st(0, "not_ting"), st(1, "not_ting"), st(2, "not_ting"), st(2, "ting", 1),
                     st(3, "not_ting"))], "bad_seats", 0)
        reject([hu(3, "1s", win(0, fan=1)),
                draw(st(0, "not_ting"), st(1, "not_ting"), st(2, "not_ting"), st(3, "not_ting"))], "bad_seats", 1)
        reject([hu(3, "1s", win(0, fan=1)), draw(st(1, "not_ting"), st(2, "not_ting"))], "bad_seats", 1)
        reject([draw()], "bad_seats", 0)

    # -- malformed events ----------------------------------------------------------------------
    @pytest.mark.parametrize(
        "bad",
        [
            {"type": "bogus"},
            {"seat": 0},
            "kong",
            None,
            {"type": "kong", "seat": 0, "kind": "huge", "tile": "1m"},
            {"type": "kong", "seat": 0, "kind": "concealed", "tile": "0m"},
            {"type": "kong", "seat": 0, "kind": "concealed", "tile": "1z"},
            {"type": "kong", "seat": 0, "kind": "concealed"},
            {"type": "kong", "seat": "0", "kind": "concealed", "tile": "1m"},
            {"type": "kong", "seat": True, "kind": "concealed", "tile": "1m"},
            {"type": "kong", "seat": 0, "kind": "concealed", "tile": "1m", "from": 2},
            {"type": "kong", "seat": 0, "kind": "direct", "tile": "1m"},
            {"type": "peng", "seat": 0, "tile": "1m"},
            {"type": "hu", "from": 1, "tile": "1m", "winners": []},
            {"type": "hu", "from": 1, "tile": "1m"},
            {"type": "hu", "from": 1, "winners": [{"seat": 0, "fan": 1}]},
            {"type": "hu", "from": 1, "tile": "1m", "winners": [{"seat": 0}]},
            {
                "type": "hu",
                "from": 1,
                "tile": "1m",
                "winners": [{"seat": 0, "fan": 1, "hand": {"tiles": "11122233344455m"}}],
            },
            {"type": "hu", "from": 1, "tile": "1m", "winners": [{"seat": 0, "fan": 0}]},
            {"type": "hu", "from": 1, "tile": "1m", "winners": [{"seat": 0, "fan": "3"}]},
            {"type": "hu", "from": 1, "tile": "1m", "winners": [{"seat": 0, "fan": 1}], "after_kong": "yes"},
            {"type": "hu", "from": 1, "tile": "1m", "winners": [0]},
            {"type": "draw"},
            {"type": "draw", "seats": [{"seat": 0, "status": "maybe"}]},
            {"type": "draw", "seats": [{"seat": 0, "status": "ting"}]},
            {"type": "draw", "seats": [{"seat": 0, "status": "not_ting", "dajiao_fan": 2}]},
            {"type": "draw", "seats": [{"seat": 0}]},
            {"type": "escape", "seat": 0, "last_four": 1},
            {"type": "escape", "seat": 0, "seats": "all"},
        ],
    )
    def test_malformed_event(self, bad):
        reject([kong(3, "concealed", "9s"), bad], "bad_event", 1)

    def test_unparsable_hand(self):
        reject([kong(3, "concealed", "9s"), hu(1, "1m", win(0, tiles="1112223334445x"))], "bad_hand", 1)
        reject([hu(1, "1m", win(0, tiles="11122233344405m"))], "bad_hand", 0)


# =========================================================================
# all-or-nothing, Round persistence
# =========================================================================
class TestRound:
    EVENTS = [
        peng(1, "5p", 3),
        kong(1, "added", "5p"),
        kong(2, "concealed", "1m"),
        hu(2, "3s", win(0, fan=2), after_kong=True),
        hu(None, "7m", win(3, fan=1)),
        draw(st(1, "not_ting"), st(2, "huazhu")),
    ]

    def test_error_names_event_and_returns_nothing(self):
        events = self.EVENTS[:3] + [hu(2, "3s", win(2, fan=2))] + self.EVENTS[4:]
        err = reject(events, "self_discard", 3)
        assert "event 3" in str(err)

    def test_step_matches_settle(self):
        r = Round(None, 0)
        got = []
        for ev in self.EVENTS:
            got.extend(r.step(ev))
        s = settle(self.EVENTS, dealer=0)
        assert tuple(got) == s.transfers and r.settlement() == s
        # hand-computed: 1's added kong (0,2,3 pay 6); 2's concealed kong (0,1,3 pay 12);
        # 杠上炮: 2 pays 0 12 + transfer 36; 3 zimo 6 from 1, 2; draw: 1 refunds 6 to 0, 2, 3
        # (2's kong was transferred: no refund); 2 is 花猪: 96 to 1, 0, 3; no 大叫
        assert s.deltas == (-6 - 12 + 48 + 6 + 96, 18 - 12 - 6 - 18 + 96,
                            -6 + 36 - 48 - 6 + 6 - 288, -6 - 12 + 12 + 6 + 96)
        assert s.ended and s.next_dealer == 0

    def test_apply_leaves_original_unchanged(self):
        r = Round("xuezhan", 0)
        for ev in self.EVENTS[:3]:
            r.step(ev)
        before = json.dumps(r.to_dict(), sort_keys=True)
        new, transfers = r.apply(self.EVENTS[3])
        assert json.dumps(r.to_dict(), sort_keys=True) == before
        assert new.n == 4 and r.n == 3 and len(transfers) == 2
        for bad in (hu(2, "3s", win(2, fan=2)), kong(1, "concealed", "5p"), {"type": "nope"},
                    hu(2, "3s", win(0, tiles="1234567m1234567p"), after_kong=True),
                    draw(st(0, "not_ting"))):
            with pytest.raises(EventError):
                r.apply(bad)
            assert json.dumps(r.to_dict(), sort_keys=True) == before

    def test_to_dict_json_round_trip_then_continue(self):
        full = settle(self.EVENTS, dealer=0, ruleset={"preset": "normal", "mode": "xuezhan", "cap": 5})
        for cut in range(len(self.EVENTS) + 1):
            r = Round({"preset": "normal", "mode": "xuezhan", "cap": 5}, 0)
            for ev in self.EVENTS[:cut]:
                r.step(ev)
            r2 = Round.from_dict(json.loads(json.dumps(r.to_dict())))
            assert json.dumps(r2.to_dict(), sort_keys=True) == json.dumps(r.to_dict(), sort_keys=True)
            for ev in self.EVENTS[cut:]:
                r2.step(ev)
            assert r2.settlement() == full

    def test_as_dict_shape(self):
        d = settle([kong(1, "direct", "5m", 2), hu(3, "5p", win(0, fan=2))], dealer=0).as_dict()
        assert d == {"deltas": [12, 6, -6, -12],
                     "transfers": [{"from": 2, "to": 1, "points": 6, "reason": "kong_direct", "event": 0},
                                   {"from": 3, "to": 0, "points": 12, "reason": "dianpao", "event": 1}],
                     "winners": [0], "ended": False, "next_dealer": None}


# =========================================================================
# 杠上花 needs a kong among the winner's melds
# =========================================================================
class TestGangShangHuaNeedsAKong:
    def test_a_hand_with_only_a_peng_is_refused(self):
        # the kong just before is seat 0's (kong_required holds) but its hand shows only a peng
        e = reject([kong(0, "concealed", "9p"),
                    hu(None, "1p", win(0, tiles="123m456m11p", melds=[PENG_MELD("9p"), PENG_MELD("7m")]),
                       after_kong=True)], "contradictory_flags", 1)
        assert "kong" in e.reason
        reject([kong(0, "concealed", "9p"), hu(None, "1p", win(0, tiles="123m456m789m11p999p"), after_kong=True)],
               "contradictory_flags", 1)

    def test_a_hand_with_a_kong_is_accepted(self):
        s = settle([kong(0, "concealed", "9p"),
                    hu(None, "1p", win(0, tiles=GSH_TILES, melds=[KONG_MELD("9p")]), after_kong=True)], dealer=0)
        assert s.winners == (0,)

    def test_gangshangpao_needs_no_kong_of_the_winner(self):
        s = settle([kong(1, "concealed", "5m"), hu(1, "5s", win(2, tiles="123p456p789p234s55s"), after_kong=True)],
                   dealer=0)
        assert s.winners == (2,)

    def test_at_a_table_too(self):
        from service.rules.table import TableState

        st0 = TableState.new(["A", "B", "C", "D"], "xuezhan")
        st0, _ = st0.apply({"type": "round_start"}, 1)
        st0, _ = st0.apply(kong(0, "concealed", "9p"), 2)
        with pytest.raises(EventError) as info:
            st0.apply(hu(None, "1p", win(0, tiles="123m456m789m11p999p"), after_kong=True), 3)
        assert (info.value.code, info.value.event) == ("contradictory_flags", 3)
        assert st0.version == 2 and st0.balances == [36, -12, -12, -12]


# =========================================================================
# with huazhu = 0 there is no 花猪
# =========================================================================
class TestNoHuazhuTable:
    def test_issue_example_chengdu_points(self):
        # seat 0 holds three suits: not ting (no 花猪 in chengdu-points); seat 1 九莲, 大叫 min = 清一色 3
        s = settle([draw(hs(0, "234m456p789s5566m"), hs(1, "1112345678999m"), st(2, "not_ting"), st(3, "not_ting"))],
                   dealer=0, ruleset="chengdu-points")
        check(s, [T(0, 1, 3, "dajiao", 0), T(2, 1, 3, "dajiao", 0), T(3, 1, 3, "dajiao", 0)], (-3, 9, -3, -3))

    def test_declared_huazhu_is_not_ting_refunds_and_pays_dajiao(self):
        events = [kong(1, "concealed", "5p"),
                  draw(st(0, "ting", 3), st(1, "huazhu"), hs(2, "123m467p789s1122s"), st(3, "not_ting"))]
        s = settle(events, dealer=0, ruleset={"huazhu": 0})
        assert of_event(s, 1) == [
            T(1, 0, 12, "refund", 1), T(1, 2, 12, "refund", 1), T(1, 3, 12, "refund", 1),
            T(1, 0, 24, "dajiao", 1), T(2, 0, 24, "dajiao", 1), T(3, 0, 24, "dajiao", 1),
        ]

    def test_void_suit_hand_is_simply_not_ting(self):
        s = settle([draw(hs(0, "1112345678999m"), st(1, "ting", 1), st(2, "not_ting"), st(3, "not_ting"))],
                   dealer=0, voids=["m", None, None, None], ruleset={"huazhu": 0})
        check(s, [T(0, 1, 6, "dajiao", 0), T(2, 1, 6, "dajiao", 0), T(3, 1, 6, "dajiao", 0)], (-6, 18, -6, -6))

    def test_escape_in_the_last_four_reads_huazhu_as_not_ting(self):
        s = settle([escape(0, True, [st(1, "huazhu"), hs(2, "234m456p789s5566m"), st(3, "ting", 6)])],
                   dealer=0, ruleset={"huazhu": 0, "escape": 1})
        check(s, [T(0, 3, 192, "escape", 0)], (-192, 0, 0, 192))


# =========================================================================
# named records, persisted through to_dict / from_dict
# =========================================================================
class TestRecords:
    EVENTS = [kong(1, "added", "5p"), hu(1, "5p", win(0, fan=1), robbing_kong=True),
              kong(2, "concealed", "9s"), hu(2, "3s", win(3, fan=2), after_kong=True)]

    def test_state_holds_named_records(self):
        from service.rules.settle import FirstWin, KongRecord, LastEvent

        r = Round("xuezhan", 0)
        for ev in self.EVENTS:
            r.step(ev)
        assert r.kongs[0] == KongRecord(1, "added", 13, None, ((0, 6), (2, 6), (3, 6)), void=True)
        assert r.kongs[2].transferred and not r.kongs[2].void and r.kongs[2].collected == 24  # seat 0 has won
        assert r.last == LastEvent("hu", 3, 3, None, 20, 2)
        assert r.first_win == FirstWin((0,), 1)
        d = r.to_dict()
        assert d["kongs"]["0"] == {"seat": 1, "kind": "added", "tile": 13, "from": None,
                                   "paid": [[0, 6], [2, 6], [3, 6]], "void": True, "transferred": False}
        assert d["last"] == {"type": "hu", "index": 3, "seat": 3, "kind": None, "tile": 20, "from": 2}
        assert d["first_win"] == {"seats": [0], "from": 1}
        again = Round.from_dict(json.loads(json.dumps(d)))
        assert again.kongs == r.kongs and again.last == r.last and again.to_dict() == d


def test_run_extras_in_settlement():
    # a winner's hand is scored with 夹心五/卡二条/一条龙 when the ruleset has them (§5.2)
    s = settle([hu(1, "5m", win(0, tiles="123456789m45699p"))], dealer=0,
               ruleset={"jiaxinwu": True, "yitiaolong": True})
    assert s.transfers[0].points == 6 * 4          # 平胡 1 + 夹心五 1 + 一条龙 1 = 3 fan
    s = settle([hu(1, "2s", win(0, tiles="234567888m12399s"))], dealer=0, ruleset={"kaertiao": True})
    assert s.transfers[0].points == 12             # 平胡 1 + 卡二条 1
    s = settle([draw(hs(0, "123456789m4699p"), st(1, "not_ting"), st(2, "not_ting"), st(3, "not_ting"))],
               dealer=0, ruleset={"jiaxinwu": True, "yitiaolong": True})
    assert s.deltas == (72, -24, -24, -24)         # 大叫 3 fan


# =========================================================================
# dianpao_pinghu (§9, §14.4): no 1-fan win on a discard
# =========================================================================
class TestDianpaoPinghu:
    R = {"dianpao_pinghu": False}

    def test_one_fan_on_a_discard_is_refused(self):
        e = reject([hu(2, "5p", win(1, fan=1))], "dianpao_pinghu", 0, ruleset=self.R)
        assert "1 fan" in e.reason
        reject([hu(2, "7p", win(1, tiles="23445677p345789s"))], "dianpao_pinghu", 0, ruleset=self.R)

    def test_robbing_kong_and_gangshangpao_count_their_extra_fan(self):
        s = settle([kong(1, "added", "5p"), hu(1, "5p", win(0, tiles=ROB_HAND), robbing_kong=True)],
                   dealer=0, ruleset=self.R)
        assert s.winners == (0,)
        s = settle([kong(1, "concealed", "5m"), hu(1, "5s", win(2, tiles="123p456p789p234s55s"), after_kong=True)],
                   dealer=0, ruleset=self.R)
        assert s.winners == (2,)
        # but a declared total of 1 on those is refused
        reject([kong(1, "added", "5p"), hu(1, "5p", win(0, fan=1), robbing_kong=True)], "dianpao_pinghu", 1,
               ruleset=self.R)
        reject([kong(1, "concealed", "5m"), hu(1, "5s", win(2, fan=1), after_kong=True)], "dianpao_pinghu", 1,
               ruleset=dict(self.R, preset="chengdu-points"))

    def test_one_refused_winner_refuses_the_whole_event(self):
        r = Round(self.R, 0)
        r.step(kong(3, "concealed", "9s"))
        before = json.dumps(r.to_dict(), sort_keys=True)
        with pytest.raises(EventError) as info:
            r.apply(hu(0, "5p", win(1, fan=2), win(2, fan=1)))
        assert (info.value.code, info.value.event) == ("dianpao_pinghu", 1)
        assert json.dumps(r.to_dict(), sort_keys=True) == before

    def test_self_drawn_wins_are_not_affected(self):
        s = settle([hu(None, "7p", win(1, tiles="23445677p345789s"))], dealer=0, ruleset=self.R)
        assert s.deltas == (-6, 18, -6, -6)
        # 杠上花 paid by the feeder alone (dianganghua = discard) is still a self-drawn win
        s = settle([kong(0, "direct", "9p", 2), hu(None, "1p", win(0, fan=1), after_kong=True)], dealer=0,
                   ruleset=dict(self.R, dianganghua="discard"))
        assert of_event(s, 1) == [T(2, 0, 6, "dianpao", 1)]

    def test_the_cap_does_not_count(self):
        s = settle([hu(2, "5p", win(1, fan=3))], dealer=0, ruleset=dict(self.R, cap=1))
        assert s.deltas == (0, 6, -6, 0)


def test_meld_object_memo_is_bounded_and_keyed_by_what_decides(monkeypatch):
    """The memo of a hand's meld objects (events._meld_object) is bounded (a full memo is emptied, and
    the answers after that are the same) and a hit needs the same member types, values and object size:
    an unknown member, or ``kind`` given as null instead of left out, is not taken from the memo."""
    from service.rules import events

    monkeypatch.setattr(events, "MELD_OBJECTS_LIMIT", 4)
    monkeypatch.setattr(events, "MELD_OBJECTS_MEMO", {})

    def draw_with(melds):
        return {"type": "draw", "seats": [{"seat": 0, "hand": {"tiles": "1112223334m", "melds": melds}}]}

    kongs = [[{"type": "kong", "kind": "concealed", "tile": f"{r}p"}] for r in range(1, 10)]
    first = [events.parse_event(draw_with(m), 0) for m in kongs]
    assert 0 < len(events.MELD_OBJECTS_MEMO) <= 4
    assert [events.parse_event(draw_with(m), 0) for m in kongs] == first
    assert first[4].seats[0].hand.melds[0] == events.Meld("kong", "5p", "concealed")

    peng = {"type": "peng", "tile": "5s"}
    assert str(events.parse_event(draw_with([peng]), 0).seats[0].hand.melds[0]) == "peng 5s"
    assert str(events.parse_event(draw_with([dict(peng, kind=None)]), 0).seats[0].hand.melds[0]) == "peng 5s"
    with pytest.raises(EventError) as info:
        events.parse_event(draw_with([dict(peng, size=None)]), 3)
    assert (info.value.code, info.value.context["field"]) == ("bad_event", "seats.0.hand.melds.0.size")
    with pytest.raises(EventError) as info:
        events.parse_event(draw_with([dict(peng, kind="added")]), 3)
    assert info.value.code == "bad_hand" and "a peng has no kind" in info.value.reason


def test_plain_hand_memo_is_keyed_by_what_parse_hand_reads():
    """The memo of the hands of plain hu and draw objects (events.parsed_hand) gives parse_hand's hands,
    keyed by the hand string, the seat's void and the melds (the same string with another void or other
    melds is another hand), and a hand taken from it is still checked against the room: a 万 tile in a
    three-player round is reported as before."""
    from service.rules import events
    from service.rules.hand import parse_hand

    events.parsed_hand.cache_clear()

    def draw_of(tiles, melds=()):
        return {"type": "draw", "seats": [{"seat": 0, "hand": {"tiles": tiles, "melds": list(melds)}}]}

    texts = [f"{r}{r}{r}{r}m123456789p" for r in range(1, 10)]
    first = [events.plain_draw(draw_of(t), 4)[0].hand for t in texts]
    assert events.parsed_hand.cache_info().currsize == len(texts)
    assert [events.plain_draw(draw_of(t), 4)[0].hand for t in texts] == first == [parse_hand(t) for t in texts]

    plain = events.plain_draw(draw_of(texts[0]), 4)[0].hand
    voided = events.plain_draw(draw_of(texts[0]), 4, ["p", None, None, None])[0].hand
    assert (plain.void, voided.void, plain.huazhu, voided.huazhu) == (None, "p", False, True)
    kong = {"type": "kong", "kind": "concealed", "tile": "9s"}
    melded = events.plain_draw(draw_of("123456789p1s", [kong]), 4)[0].hand
    assert melded == parse_hand("123456789p1s", [events.Meld("kong", "9s", "concealed")])
    assert events.plain_draw(draw_of("123456789p1s"), 4)[0].hand.melds == ()

    three = {"players": 3}
    events.parsed_hand.cache_clear()
    with pytest.raises(EventError) as fresh:
        settle([draw_of(texts[0])], dealer=0, ruleset=three)
    assert events.plain_draw(draw_of(texts[0]), 4)[0].hand == plain  # (four players: the hand is kept)
    assert events.plain_draw(draw_of(texts[0]), 3) is None
    with pytest.raises(EventError) as kept:
        settle([draw_of(texts[0])], dealer=0, ruleset=three)
    assert (kept.value.code, kept.value.reason) == (fresh.value.code, fresh.value.reason)
    assert "万" in fresh.value.reason


# -- the fold's plain objects: settled from their fields, as parse_event reads them ----------------
def test_plain_hu_and_draw_are_the_events_parse_event_builds():
    """A hu or draw object in the common form is settled from its fields (events.plain_hu, plain_draw):
    the same fields, the same hands, as the typed event parse_event builds of it."""
    from bench.rounds import typical_rounds
    from service.rules import events

    for r in typical_rounds(30, seed=7):
        for i, ev in enumerate(r["events"]):
            if ev["type"] == "hu":
                fields = events.plain_hu(ev, 4, [None] * 4)
                typed = events.parse_event(ev, i, [None] * 4)
                assert fields is not None and tuple(fields[:3]) == (typed.from_, typed.tile, tuple(
                    events.WinnerFields(w.seat, w.hand, w.fan, w.patterns) for w in typed.winners))
                assert tuple(fields[3:]) == (typed.after_kong, typed.robbing_kong, typed.last_tile,
                                             typed.heavenly, typed.earthly)
                assert fields.self_drawn == typed.self_drawn
            elif ev["type"] == "draw":
                reports = events.plain_draw(ev, 4, [None] * 4)
                typed = events.parse_event(ev, i, [None] * 4)
                assert reports == tuple(events.ReportFields(s.seat, s.hand, s.status, s.dajiao_fan)
                                        for s in typed.seats)


@pytest.mark.parametrize("event", [
    {"type": "hu", "from": 1, "tile": "5m", "after_kong": False, "winners": [{"seat": 0, "hand": {"tiles": "5m"}}]},
    {"type": "hu", "from": 1, "tile": "5万", "winners": [{"seat": 0, "hand": {"tiles": "5m"}}]},
    {"type": "hu", "from": True, "tile": "5m", "winners": [{"seat": 0, "hand": {"tiles": "5m"}}]},
    {"type": "hu", "from": 1, "tile": "5m", "winners": []},
    {"type": "hu", "from": 1, "tile": "5m", "winners": [{"seat": 0, "fan": 2}]},
    {"type": "hu", "from": 1, "tile": "5m", "winners": [{"seat": 4, "hand": {"tiles": "5m"}}]},
    {"type": "hu", "from": 1, "tile": "5m", "winners": [{"seat": 0, "hand": {"tiles": "5x"}}]},
    {"type": "hu", "from": 1, "tile": "5m", "winners": [{"seat": 0, "hand": {"tiles": "5m", "void": "s"}}]},
    {"type": "hu", "from": 1, "tile": "5m", "winners": [{"seat": 0, "hand": {"tiles": "5m"}, "fan": 2}]},
    {"type": "draw", "seats": [{"seat": 0, "status": "not_ting"}]},
    {"type": "draw", "seats": [{"seat": 0, "hand": {"tiles": "5m", "melds": [{"type": "pong", "tile": "5m"}]}}]},
    {"type": "draw", "seats": {"seat": 0}},
    {"type": "draw", "seats": [], "extra": 1},
])
def test_other_objects_are_not_plain(event):
    """Anything else (flags, another spelling, a bad value, another form) goes through parse_event, which
    builds it or tells what is wrong."""
    from service.rules import events

    plain = events.plain_hu if event["type"] == "hu" else events.plain_draw
    assert plain(event, 4, [None] * 4) is None
