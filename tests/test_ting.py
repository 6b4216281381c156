"""Ting, waits, 大叫 and discard advice (docs/rules.md#s4).

Expected waits were enumerated by hand (each candidate tile added and the
hand split into sets and a pair); the comments give the splits.
"""

from __future__ import annotations

import pytest

from service import discards, parse_hand, ting
from service.rules.errors import HandSizeError, TooManyCopies
from service.rules.hand import Meld


def wait_names(r) -> list[str]:
    return [str(w.tile) for w in r.waits]


def by_tile(r) -> dict:
    return {str(w.tile): w for w in r.waits}


# -- waits -------------------------------------------------------------------------------------------------
def test_waits_of_a_simple_hand():
    # 2344567p + 345s 789s: 1p (123 44 567), 4p (234 44 567), 7p (234 456 77)
    r = ting("2344567p345789s")
    assert r.ting and not r.huazhu
    assert wait_names(r) == ["1p", "4p", "7p"]
    for w in r.waits:
        assert [(p.id, p.fan) for p in w.patterns] == [("pinghu", 1)]
        assert (w.fan, w.raw_fan, w.points, w.capped) == (1, 1, 6, False)
    # remaining = 4 − copies in hand: 1p 0, 4p 2, 7p 1
    assert [w.remaining for w in r.waits] == [4, 2, 3]
    assert (r.dajiao.fan, r.dajiao.points) == (1, 6)


def test_nine_gates_waits_on_every_tile_of_its_suit():
    r = ting("1112345678999m")
    assert wait_names(r) == [f"{i}m" for i in range(1, 10)]
    fans = {str(w.tile): w.fan for w in r.waits}
    # 清一色 3 everywhere; 1m and 9m make a four (根 +1); 4-5-6 rule out 幺九
    assert fans == {"1m": 4, "2m": 3, "3m": 3, "4m": 3, "5m": 3, "6m": 3, "7m": 3, "8m": 3, "9m": 4}
    assert [(p.id, p.fan) for p in by_tile(r)["9m"].patterns] == [("qingyise", 3), ("gen", 1)]
    assert [w.remaining for w in r.waits] == [1, 3, 3, 3, 3, 3, 3, 3, 1]


def test_waits_are_in_canonical_order():
    # 11m 22p shanpon with 345m 678m 789p, written in any order
    for text in ("11m22p345m678m789p", "789p22p678m345m11m", "22p 11万 345678m 789筒"):
        r = ting(text)
        assert wait_names(r) == ["1m", "2p"]
    waits = [w.tile.index for w in ting("1112345678999m").waits]
    assert waits == sorted(waits)


def test_tanki_wait_with_four_melds():
    melds = [Meld.peng("2m"), Meld.peng("5m"), Meld.peng("3p"), Meld.peng("6p")]
    r = ting(parse_hand("7p", melds=melds))
    assert wait_names(r) == ["7p"]
    assert [(p.id, p.fan) for p in r.waits[0].patterns] == [("duiduihu", 2)]
    r = ting(parse_hand("7p", melds=melds), ruleset={"jingoudiao": True})
    assert [(p.id, p.fan) for p in r.waits[0].patterns] == [("duiduihu", 2), ("jingoudiao", 1)]
    assert r.waits[0].points == 24


def test_seven_pairs_wait():
    # 11 33 55 m 22 44 66 p + 8p: only the pair wait
    r = ting("113355m224466p8p")
    assert wait_names(r) == ["8p"]
    assert [(p.id, p.fan) for p in r.waits[0].patterns] == [("qidui", 3)]
    # a triplet among six pairs waits for the fourth: 龙七对
    r = ting("111m33m55m22p44p66p")
    assert wait_names(r) == ["1m"]
    assert [(p.id, p.fan) for p in r.waits[0].patterns] == [("longqidui", 5)]


def test_wait_with_a_kong():
    # 123m 345m 999p + 2222p + 6p: tanki on 6p, 平胡 1 + 根 1
    r = ting(parse_hand("123345m999p6p", melds=[Meld.kong("2p", "concealed")]))
    assert wait_names(r) == ["6p"]
    assert (r.waits[0].fan, r.waits[0].points) == (2, 12)


# -- 死叫 -----------------------------------------------------------------------------------------------------
def test_dead_wait_only_is_not_ting():
    # 1111m + 123456789p: the only completion is a fifth 1m
    r = ting("1111m123456789p")
    assert (r.ting, r.waits, r.dajiao, r.huazhu) == (False, (), None, False)


def test_dead_wait_through_a_peng():
    # 5m + 555m peng: the pair wait 5m has all four copies in hand and melds
    r = ting(parse_hand("5m123p456p789p", melds=[Meld.peng("5m")]))
    assert (r.ting, r.waits, r.dajiao) == (False, (), None)
    # the same shape with another tile is ting
    assert wait_names(ting(parse_hand("6m123p456p789p", melds=[Meld.peng("5m")]))) == ["6m"]


def test_dead_wait_is_dropped_beside_a_live_one():
    # 111 2222 m + 123p 456p: 3m completes (11 123 222); 2m would too (111 222 22) but all four are held
    r = ting("1112222m123456p")
    assert r.ting and wait_names(r) == ["3m"]
    assert [(p.id, p.fan) for p in r.waits[0].patterns] == [("pinghu", 1), ("gen", 1)]


# -- 花猪 and 定缺 ---------------------------------------------------------------------------------------------
def test_three_suits_is_never_ting():
    r = ting("123m456p789s1122m")
    assert (r.ting, r.huazhu, r.waits, r.dajiao) == (False, True, (), None)
    # a shape that would wait on 5p, but a 111s peng makes three suits
    r = ting(parse_hand("123456789m5p", melds=[Meld.peng("1s")]))
    assert (r.ting, r.huazhu, r.waits) == (False, True, ())
    assert wait_names(ting(parse_hand("123456789m5p", melds=[Meld.peng("1p")]))) == ["5p"]


def test_void_suit_is_never_ting():
    r = ting(parse_hand("2344567p345789s", void="s"))
    assert (r.ting, r.huazhu, r.waits, r.dajiao) == (False, True, (), None)
    assert ting(parse_hand("2344567p345789s", void="m")).ting


# -- 大叫 ------------------------------------------------------------------------------------------------------
def test_dajiao_max_and_min():
    hand = "1112345678999m"
    r = ting(hand)
    assert (r.dajiao.fan, r.dajiao.points) == (4, 48)
    r = ting(hand, ruleset={"dajiao": "min"})
    assert (r.dajiao.fan, r.dajiao.points) == (3, 24)
    # the chengdu preset: min, linear, base 1
    r = ting(hand, ruleset="chengdu-points")
    assert (r.dajiao.fan, r.dajiao.points) == (3, 3)
    r = ting(hand, ruleset={"preset": "chengdu-points", "dajiao": "max"})
    assert (r.dajiao.fan, r.dajiao.points) == (4, 4)


def test_cap_applies_to_waits_and_dajiao():
    r = ting("1112345678999m", ruleset={"cap": 3})
    assert (r.dajiao.fan, r.dajiao.points) == (3, 24)
    w = by_tile(r)["1m"]
    assert (w.fan, w.raw_fan, w.capped, w.points) == (3, 4, True, 24)
    w = by_tile(r)["5m"]
    assert (w.fan, w.raw_fan, w.capped) == (3, 3, False)


def test_waits_carry_no_situational_extras():
    rules = {"zimo": "fan", "haidi": True}
    for w in ting("2344567p345789s", ruleset=rules).waits:
        assert [(p.id, p.fan) for p in w.patterns] == [("pinghu", 1)]
    r = ting(parse_hand("123345m999p6p", melds=[Meld.kong("2p", "concealed")]), ruleset=rules)
    assert [(p.id, p.fan) for p in r.waits[0].patterns] == [("pinghu", 1), ("gen", 1)]


def test_waits_count_hand_only_extras():
    r = ting("2344567p345678s", ruleset={"menqing": True, "zhongzhang": True})
    fans = {str(w.tile): [(p.id, p.fan) for p in w.patterns] for w in r.waits}
    assert fans == {
        "1p": [("pinghu", 1), ("menqing", 1)],  # the 1p spoils 中张
        "4p": [("pinghu", 1), ("menqing", 1), ("zhongzhang", 1)],
        "7p": [("pinghu", 1), ("menqing", 1), ("zhongzhang", 1)],
    }
    assert (r.dajiao.fan, r.dajiao.points) == (3, 24)
    r = ting("2344567p345678s", ruleset={"menqing": True, "zhongzhang": True, "dajiao": "min"})
    assert (r.dajiao.fan, r.dajiao.points) == (2, 12)


# -- remaining and visible -------------------------------------------------------------------------------------
def test_remaining_subtracts_visible_tiles():
    r = ting("2344567p345789s", visible="4p7p7p1s")
    assert [w.remaining for w in r.waits] == [4, 1, 1]
    r = ting("2344567p345789s", visible=["4筒", "7P", "7p"])
    assert [w.remaining for w in r.waits] == [4, 1, 1]
    r = ting("1m2m3m 456p 789p 111p 5m", visible="5m5m")
    assert [(str(w.tile), w.remaining) for w in r.waits] == [("5m", 1)]


def test_a_wait_with_nothing_left_is_still_a_wait():
    # only the player's own hand and melds make a dead wait; visible tiles do not
    r = ting("1m2m3m 456p 789p 111p 5m", visible="555m")
    assert r.ting and [(str(w.tile), w.remaining) for w in r.waits] == [("5m", 0)]


def test_visible_tiles_count_toward_copies():
    with pytest.raises(TooManyCopies):
        ting("2344567p345789s", visible="444p")


def test_ting_wants_13():
    with pytest.raises(HandSizeError):
        ting("23445677p345789s")


# -- discard advice ----------------------------------------------------------------------------------------------
def test_only_discards_that_leave_the_hand_ting():
    # a 5s among m and p: every other discard keeps three suits
    adv = discards("11122233345m99p5s")
    assert [str(o.discard) for o in adv.options] == ["5s"]
    assert adv.complete is False
    (opt,) = adv.options
    # 3m (111 222 333 345 99p), 6m (… 456 99p), 9p (111 222 33 345 + 999p)
    assert [str(w.tile) for w in opt.waits] == ["3m", "6m", "9p"]
    assert [w.remaining for w in opt.waits] == [1, 4, 2]
    assert opt.remaining == 7
    # 3m makes 3333m: 平胡 + 根; the others are 平胡
    assert [w.fan for w in opt.waits] == [2, 1, 1]
    assert (opt.dajiao.fan, opt.dajiao.points) == (2, 12)


def test_discards_count_visible_tiles():
    adv = discards("11122233345m99p5s", visible="6m6m9p")
    (opt,) = adv.options
    assert [w.remaining for w in opt.waits] == [1, 2, 1] and opt.remaining == 4
    with pytest.raises(TooManyCopies):
        discards("11122233345m99p5s", visible="99p9p")


def test_order_most_remaining_first():
    # discard 3m → 23m 66m 888m 888p 999p waits 1m/4m: 8 left, 平胡 (6)
    # discard 2m → 33m 66m shanpon 3m/6m: 2 + 2 left, 对对胡 (12)
    adv = discards("23366888m888999p")
    assert [(str(o.discard), o.remaining, o.dajiao.points) for o in adv.options] == [("3m", 8, 6), ("2m", 4, 12)]
    assert [str(w.tile) for w in adv.options[0].waits] == ["1m", "4m"]
    assert [str(w.tile) for w in adv.options[1].waits] == ["3m", "6m"]


def test_order_then_highest_dajiao():
    # discard 3m → 13m: 2m kanchan, 4 left; 123m 11p 789p×3 is 带幺九 (24)
    # discard 1m → 33m 11p shanpon, 2 + 2 left; 对对胡 (12)
    adv = discards("133m11777888999p")
    assert [(str(o.discard), o.remaining, o.dajiao.points) for o in adv.options] == [("3m", 4, 24), ("1m", 4, 12)]


def test_order_then_tile_order():
    # 234567m 112345p 99p: discard 1p → 12345p 99p waits 3p/6p (3 + 4 left)
    # discard 2p → 11 345 99 and discard 5p → 11 234 99: shanpon 1p/9p (2 + 2 left), both 平胡
    adv = discards("99p 543211p 765432m")
    assert [(str(o.discard), o.remaining) for o in adv.options] == [("1p", 7), ("2p", 4), ("5p", 4)]
    assert adv.options[1].dajiao.points == adv.options[2].dajiao.points == 6


def test_discarded_copy_counts_as_seen():
    adv = discards("11112345678999m")
    assert adv.complete is True  # 111 123 456 789 99
    opts = {str(o.discard): o for o in adv.options}
    # discard 2m → 1111345678999m: only 2m completes it; 4 − 1 (the discarded copy) = 3 left
    assert [(str(w.tile), w.remaining) for w in opts["2m"].waits] == [("2m", 3)]
    # discard 1m → nine gates, but all four 1m are in the 14-tile hand: 1m is not listed
    assert [str(w.tile) for w in opts["1m"].waits] == [f"{i}m" for i in range(2, 10)]
    assert opts["1m"].remaining == 7 * 3 + 1
    assert adv.options[0].discard == opts["1m"].discard  # the most tiles remaining


def test_a_discard_with_only_dead_waits_is_not_listed():
    # discarding the 9s leaves 1111m123456789p, whose only wait is a fifth 1m
    adv = discards("1111m123456789p9s")
    assert adv.options == () and adv.complete is False


def test_complete_flag():
    assert discards("11122233344455m").complete is True
    assert discards("23445677p345789s").complete is True
    assert discards("123m456p789s11m555m").complete is False  # three suits
    assert discards(parse_hand("23445677p345789s", void="s")).complete is False
    assert discards("1357913579m2468p").complete is False


def test_discard_option_dajiao_follows_the_ruleset():
    adv = discards("11112345678999m", ruleset={"dajiao": "min"})
    opts = {str(o.discard): o for o in adv.options}
    assert opts["1m"].dajiao.points == 24  # 清一色 3 on 2m…8m
    adv = discards("11112345678999m")
    opts = {str(o.discard): o for o in adv.options}
    assert opts["1m"].dajiao.points == 48  # 9m makes 9999m: 清一色 3 + 根 1


def test_discards_wants_14():
    with pytest.raises(HandSizeError):
        discards("2344567p345789s")


def test_one_discard_with_waits_in_two_suits():
    # discard 5s → 11123456m 22789p: 1m (111 23456… → 1111m: 根), 4m, 7m in 万 with 22p the pair, or
    # 2p (222p) with 11m the pair: the waits in suit order, 大叫 the first best of them all
    adv = discards("11123456m22789p5s")
    [o] = adv.options
    assert [(str(w.tile), w.points, w.remaining) for w in o.waits] == [("1m", 12, 1), ("4m", 6, 3), ("7m", 6, 4),
                                                                      ("2p", 6, 2)]
    assert (o.remaining, o.dajiao) == (10, (2, 12))
    [o] = discards("11123456m22789p5s", ruleset={"dajiao": "min"}).options
    assert o.dajiao == (1, 6) and o.waits[0].points == 12


def test_discard_wait_memo_is_bounded(monkeypatch):
    """The per-suit wait answers of discard advice (memoized per ruleset) are bounded: a full memo is
    emptied, and what is looked up after that is the same."""
    from service import Ruleset
    from service.rules import ting as ting_module
    from service.rules.fan import context

    hands = [f"{a}{a}{a}{b}{b}{b}{c}{c}{c}m{d}{d}{e}{e}{f}p" for a, b, c, d, e, f in
             [(1, 2, 3, 4, 5, 6), (2, 3, 4, 5, 6, 1), (3, 4, 5, 6, 7, 9), (4, 5, 6, 7, 8, 2), (5, 6, 7, 8, 9, 1)]]
    hands += ["11123456m22789p5s", "2344567p345789s1m", "1112345678999m5p", "1123m456p789p111s5s"]
    unbounded = [discards(h, ruleset=Ruleset.from_spec({"cap": 5})) for h in hands]
    monkeypatch.setattr(ting_module, "MEMO_LIMIT", 4)
    context.cache_clear()  # (one context per ruleset: its memos start empty under the small limit)
    rules = Ruleset.from_spec({"cap": 5})
    first = [discards(h, ruleset=rules) for h in hands]
    assert 0 < len(context(rules).wait_parts) <= 4
    assert [discards(h, ruleset=rules) for h in hands] == first == unbounded
    assert any(o.waits for a in first for o in a.options)
