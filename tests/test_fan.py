"""Fan, points and rule variants (docs/rules.md#s3, §5, §9, §11).

Every expected value below is worked out by hand from docs/rules.md (the comments
give the reasoning); none is read back from the code under test.
"""

from __future__ import annotations

import dataclasses

import pytest

from service import Ruleset, parse_hand, score
from service.rules.errors import (
    BadRulesetValue,
    ContradictoryFlags,
    NotAWin,
    RulesetError,
    UnknownRuleset,
    UnknownRulesetField,
    WinTileNotInHand,
)
from service.rules.fan import Win
from service.rules.hand import Meld
from service.rules.patterns import PATTERNS


def pats(s) -> list[tuple[str, int]]:
    return [(p.id, p.fan) for p in s.patterns]


def first_tile(text: str) -> str:
    return str(parse_hand(text).tiles[0])


def sc(text, win=None, melds=(), ruleset=None, **flags):
    hand = parse_hand(text, melds=melds)
    tile = win if win is not None else str(hand.tiles[-1])
    return score(hand, Win(tile, **flags), ruleset=ruleset)


KONG_2P = [Meld.kong("2p", "concealed")]
"""The concealed kong of the last §11 example."""


# -- §11 worked examples (base 6, preset xuezhan) ---------------------------------------------
@pytest.mark.parametrize(
    "hand, patterns, fan, points",
    [
        ("23445677p345789s", [("pinghu", 1)], 1, 6),
        ("111222444m33399p", [("duiduihu", 2)], 2, 12),
        ("11333222456999s", [("qingyise", 3)], 3, 24),
        ("111222333m78999p", [("daiyaojiu", 3)], 3, 24),
        ("222555888s88855m", [("jiangdui", 4)], 4, 48),
        ("11222244p557799m", [("longqidui", 5)], 5, 96),  # the 2222p gives no 根
        ("11334466778899s", [("qingqidui", 5)], 5, 96),
        ("11123777888999p", [("qingyaojiu", 5)], 5, 96),
        ("11224444557799m", [("qinglongqidui", 6)], 6, 192),
    ],
)
def test_worked_examples(hand, patterns, fan, points):
    for ruleset in (None, "xuezhan", Ruleset.from_preset("xuezhan")):
        for tile in {str(t) for t in parse_hand(hand).tiles}:  # any tile of the hand may be the win tile
            s = score(parse_hand(hand), tile, ruleset=ruleset)
            assert pats(s) == patterns
            assert (s.fan, s.raw_fan, s.points, s.capped, s.multiplier) == (fan, fan, points, False, 2 ** (fan - 1))


def test_worked_example_with_a_concealed_kong():
    # 123m 345m 999p 66p + 2222p: 平胡 1 + 根 1 = 2 → 6 × 2 = 12
    s = score(parse_hand("123345m999p66p", melds=KONG_2P), "6p")
    assert pats(s) == [("pinghu", 1), ("gen", 1)]
    assert (s.fan, s.points) == (2, 12)
    assert sorted(s.decomposition) == sorted(["123m", "345m", "999p", "2222p", "66p"])


# -- base patterns (§5.1) ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "hand, melds, base, fan",
    [
        # 123m 456m 789m 234p 55p: two suits, a sequence without 1/9 → only 平胡
        ("123m456m789m234p55p", [], "pinghu", 1),
        # 333m 444p 77p + 666m, 999p pengs: all triplets
        ("333m444p77p", [Meld.peng("6m"), Meld.peng("9p")], "duiduihu", 2),
        # 111p (peng) 234p 567p 789p 55p: one suit, not all triplets, 234 has no 1/9
        ("234567789p55p", [Meld.peng("1p")], "qingyise", 3),
        # 123m 789p 111p 999m (peng) 11m: every set and the pair hold a 1 or 9
        ("123m789p111p11m", [Meld.peng("9m")], "daiyaojiu", 3),
        # 11 33 55 m 22 44 66 88 p: seven pairs, no four, no standard split
        ("113355m224466p88p", [], "qidui", 3),
        # 111 333 555 777 99 m
        ("111333555777m99m", [], "qingdui", 4),
        # 555m 888p 22p + 222m, 888m pengs: all triplets of 2/5/8
        ("555m888p22p", [Meld.peng("2m"), Meld.peng("8m")], "jiangdui", 4),
        # 1111m 22m 33p 44p 55p 66p: seven pairs with a four (111122m has no standard split)
        ("1111m22m33p44p55p66p", [], "longqidui", 5),
    ],
)
def test_base_patterns(hand, melds, base, fan):
    s = sc(hand, melds=melds)
    assert pats(s) == [(base, fan)]
    assert s.fan == fan and s.points == 6 * 2 ** (fan - 1)


def test_jiangdui_counts_the_melds():
    # the concealed tiles are all 2/5/8 but the 999p peng is not: only 对对胡
    s = sc("555m888p22p", melds=[Meld.peng("2m"), Meld.peng("9p")])
    assert pats(s) == [("duiduihu", 2)]
    s = sc("555m888p22p", melds=[Meld.peng("2m"), Meld.kong("5p", "added")])
    assert pats(s) == [("jiangdui", 4), ("gen", 1)]


def test_daiyaojiu_counts_the_melds():
    # every concealed set holds a 1 or 9 but the 555m peng does not
    s = sc("123m789p111p11m", melds=[Meld.peng("5m")])
    assert pats(s) == [("pinghu", 1)]


def test_qingqidui():
    s = sc("1122557788p3344p")
    assert pats(s) == [("qingqidui", 5)] and s.points == 96


def test_qingyaojiu():
    # 11 + 123 + 789 789 789, all s: every set and the pair hold a 1 or 9
    s = sc("11123789789789s")
    assert pats(s) == [("qingyaojiu", 5)] and s.points == 96


def test_qinglongqidui_with_two_fours():
    # 1111 2222 55 77 99 s: 清龙七对 6 + 根 2 − 1 (减1根) = 7
    s = sc("11112222557799s")
    assert pats(s) == [("qinglongqidui", 6), ("gen", 1)]
    assert (s.fan, s.points) == (7, 6 * 64)


def test_seven_pairs_has_no_melds():
    # four pairs + two melds (8 + 6 = 14) is neither seven pairs nor a standard win
    hand = parse_hand("1133m2244p", melds=[Meld.peng("6p"), Meld.kong("8p", "concealed")])
    with pytest.raises(NotAWin):
        score(hand, "1m")


@pytest.mark.parametrize("hand", ["23445677p345789s", "11123777888999p", "11224444557799m"])
def test_tianhu(hand):
    # 天胡 6 competes with the shape's pattern; every 根 stays (no 减1根 for 天胡)
    s = sc(hand, self_drawn=True, heavenly=True)
    gens = 1 if hand == "11224444557799m" else 0
    assert pats(s) == [("tianhu", 6)] + ([("gen", gens)] if gens else [])
    assert s.fan == 6 + gens and s.points == 6 * 2 ** (5 + gens)


@pytest.mark.parametrize("hand", ["23445677p345789s", "11123777888999p", "11224444557799m"])
def test_dihu(hand):
    s = sc(hand, self_drawn=True, earthly=True)
    gens = 1 if hand == "11224444557799m" else 0
    assert pats(s) == [("dihu", 6)] + ([("gen", gens)] if gens else [])
    assert s.fan == 6 + gens


def test_tianhu_beats_qinglongqidui_keeping_every_gen():
    # 1111 2222 55 77 99 s: 清龙七对 6 + 根 2 − 1 = 7; 天胡 6 + 根 2 = 8 (减1根 only for 龙七对/清龙七对)
    assert pats(sc("11112222557799s")) == [("qinglongqidui", 6), ("gen", 1)]
    for flags in (dict(heavenly=True), dict(earthly=True)):
        s = sc("11112222557799s", self_drawn=True, **flags)
        assert pats(s) == [("tianhu" if "heavenly" in flags else "dihu", 6), ("gen", 2)]
        assert (s.fan, s.points) == (8, 6 * 128)
        assert sorted(s.decomposition) == sorted(["11s", "11s", "22s", "22s", "55s", "77s", "99s"])


def test_tianhu_beats_longqidui_with_all_gens():
    # 1111 2222 m 33 44 55 p: 龙七对 5 + 2 − 1 = 6; 天胡 6 + 2 = 8
    assert sc("11112222m3344p55p").fan == 6
    s = sc("11112222m3344p55p", self_drawn=True, heavenly=True)
    assert pats(s) == [("tianhu", 6), ("gen", 2)] and s.fan == 8
    assert [p.as_dict()["count"] for p in s.patterns if p.id == "gen"] == [2]


# -- decompositions and tie-breaks (§3) ------------------------------------------------------------
def test_highest_total_over_decompositions():
    # 111 222 333 m → 对对胡 2 with 999p 11p; or 123 ×3 → 带幺九 3
    s = sc("111222333m999p11p")
    assert pats(s) == [("daiyaojiu", 3)]
    assert sorted(s.decomposition) == sorted(["123m", "123m", "123m", "999p", "11p"])


def test_all_triplets_decomposition_is_reported():
    s = sc("111222444m33399p")
    assert sorted(s.decomposition) == sorted(["111m", "222m", "444m", "333p", "99p"])


def test_tie_on_total_prefers_higher_base_fan():
    # 1111 22 33 77 88 99 m: 清龙七对 6 + 1 − 1 = 6; as 11 + 123 123 789 789: 清幺九 5 + 根 1 = 6
    s = sc("11112233778899m")
    assert pats(s) == [("qinglongqidui", 6)]  # the 减1根 leaves no 根 to list
    assert s.fan == 6
    assert sorted(s.decomposition) == sorted(["11m", "11m", "22m", "33m", "77m", "88m", "99m"])


def test_tie_on_total_and_base_fan_prefers_section_5_1_order():
    # 11 22 33 99 m 77 88 99 p: 七对 3; as 123m 123m 99m 789p 789p: 带幺九 3 — 带幺九 comes first
    s = sc("112233m99m778899p")
    assert pats(s) == [("daiyaojiu", 3)]
    assert sorted(s.decomposition) == sorted(["123m", "123m", "789p", "789p", "99m"])
    # the chengdu table values both 3 as well
    s = sc("112233m99m778899p", ruleset="chengdu-points")
    assert pats(s) == [("daiyaojiu", 3)]


def test_seven_pairs_decomposition_lists_the_pairs():
    s = sc("113355m224466p88p")
    assert sorted(s.decomposition) == sorted(["11m", "33m", "55m", "22p", "44p", "66p", "88p"])


def test_decomposition_lists_melds():
    s = sc("333m444p77p", melds=[Meld.peng("6m"), Meld.kong("9p", "direct")])
    assert sorted(s.decomposition) == sorted(["333m", "444p", "666m", "9999p", "77p"])


# -- extras (§5.2) -----------------------------------------------------------------------------------
def test_gen_for_four_concealed_tiles():
    # 222m 234m 345p 567p 99p: 平胡 1 + 根 1 (2222m)
    s = sc("222234m345567p99p")
    assert pats(s) == [("pinghu", 1), ("gen", 1)] and s.points == 12
    gen = [p.as_dict() for p in s.patterns if p.id == "gen"][0]
    assert gen == {"id": "gen", "name": "根", "name_en": gen["name_en"], "fan": 1, "count": 1}


def test_gen_counts_each_four():
    # 1111m 23m 2222p 34p 99p: 平胡 1 + 根 2
    s = sc("111123m222234p99p")
    assert pats(s) == [("pinghu", 1), ("gen", 2)] and s.fan == 3


@pytest.mark.parametrize("kind", ["direct", "added", "concealed"])
def test_every_kong_is_a_gen(kind):
    s = sc("123m456m789m55p", melds=[Meld.kong("1p", kind)])
    assert pats(s) == [("pinghu", 1), ("gen", 1)] and s.points == 12


def test_peng_plus_concealed_fourth_is_a_gen():
    # 345m 678m 789p 11p + 555m peng: the concealed 5m is the fourth 5m → 根
    s = sc("345678m11789p", win="3m", melds=[Meld.peng("5m")])
    assert pats(s) == [("pinghu", 1), ("gen", 1)] and s.points == 12
    # the same concealed tiles with a 222m peng: no four anywhere
    s = sc("345678m11789p", win="3m", melds=[Meld.peng("2m")])
    assert pats(s) == [("pinghu", 1)] and s.points == 6


def test_jian_yi_gen_with_two_fours():
    # 1111 2222 m 33 44 55 p: 龙七对 5 + 根 2 − 1 = 6
    s = sc("11112222m3344p55p")
    assert pats(s) == [("longqidui", 5), ("gen", 1)]
    assert (s.fan, s.points) == (6, 192)
    assert [p.as_dict()["count"] for p in s.patterns if p.id == "gen"] == [1]


def test_gangshanghua():
    s = score(parse_hand("123345m999p66p", melds=KONG_2P), Win("6p", self_drawn=True, after_kong=True))
    assert pats(s) == [("pinghu", 1), ("gen", 1), ("gangshanghua", 1)] and s.points == 24


def test_gangshangpao():
    s = score(parse_hand("123345m999p66p", melds=KONG_2P), Win("6p", after_kong=True))
    assert pats(s) == [("pinghu", 1), ("gen", 1), ("gangshangpao", 1)] and s.points == 24


def test_qiangganghu():
    s = sc("23445677p345789s", robbing_kong=True)
    assert pats(s) == [("pinghu", 1), ("qiangganghu", 1)] and s.points == 12
    s = sc("23445677p345789s", robbing_kong=True, last_tile=True, ruleset={"haidi": True})
    assert pats(s) == [("pinghu", 1), ("qiangganghu", 1), ("haidi", 1)] and s.fan == 3


def test_zimo_fan():
    rules = {"zimo": "fan"}
    assert pats(sc("23445677p345789s", self_drawn=True, ruleset=rules)) == [("pinghu", 1), ("zimo", 1)]
    assert sc("23445677p345789s", self_drawn=True, ruleset=rules).points == 12
    assert pats(sc("23445677p345789s", ruleset=rules)) == [("pinghu", 1)]  # by discard: no 自摸
    # 杠上花 and 天胡 are self-drawn too
    s = score(
        parse_hand("123345m999p66p", melds=KONG_2P), Win("6p", self_drawn=True, after_kong=True), ruleset=rules
    )
    assert pats(s) == [("pinghu", 1), ("gen", 1), ("gangshanghua", 1), ("zimo", 1)] and s.fan == 4
    s = sc("23445677p345789s", self_drawn=True, heavenly=True, ruleset=rules)
    assert pats(s) == [("tianhu", 6), ("zimo", 1)] and s.points == 6 * 64
    s = sc("23445677p345789s", self_drawn=True, earthly=True, ruleset=rules)
    assert pats(s) == [("dihu", 6), ("zimo", 1)]


@pytest.mark.parametrize("zimo", ["none", "base"])
def test_no_zimo_fan_without_the_option(zimo):
    # 自摸加底 is a settlement payment: the points of a score never include it
    s = sc("23445677p345789s", self_drawn=True, ruleset={"zimo": zimo})
    assert pats(s) == [("pinghu", 1)] and (s.fan, s.points) == (1, 6)


def test_haidi():
    on = {"haidi": True}
    assert pats(sc("23445677p345789s", last_tile=True, ruleset=on)) == [("pinghu", 1), ("haidi", 1)]
    assert pats(sc("23445677p345789s", last_tile=True, self_drawn=True, ruleset=on)) == [("pinghu", 1), ("haidi", 1)]
    assert pats(sc("23445677p345789s", last_tile=True)) == [("pinghu", 1)]  # option off (default)
    assert pats(sc("23445677p345789s", ruleset=on)) == [("pinghu", 1)]  # not the last tile


def test_haidi_with_after_kong():
    s = score(
        parse_hand("123345m999p66p", melds=KONG_2P),
        Win("6p", self_drawn=True, after_kong=True, last_tile=True),
        ruleset={"haidi": True},
    )
    assert pats(s) == [("pinghu", 1), ("gen", 1), ("gangshanghua", 1), ("haidi", 1)] and s.fan == 4


JINGOU = [Meld.peng("2m"), Meld.peng("5m"), Meld.peng("3p"), Meld.peng("6p")]


def test_jingoudiao():
    # four pengs + 77p: 对对胡 2 (+ 金钩钓 1 when on)
    assert pats(sc("77p", melds=JINGOU)) == [("duiduihu", 2)]
    s = sc("77p", melds=JINGOU, ruleset={"jingoudiao": True})
    assert pats(s) == [("duiduihu", 2), ("jingoudiao", 1)] and s.points == 24


def test_jingoudiao_with_concealed_kongs():
    melds = [Meld.kong("2m", "concealed"), Meld.peng("5m"), Meld.kong("3p", "direct"), Meld.peng("6p")]
    s = sc("77p", melds=melds, ruleset={"jingoudiao": True})
    assert pats(s) == [("duiduihu", 2), ("gen", 2), ("jingoudiao", 1)] and s.fan == 5


def test_no_jingoudiao_with_three_melds():
    s = sc("333m444p77p", melds=[Meld.peng("6m"), Meld.peng("9p")], ruleset={"jingoudiao": True})
    assert pats(s) == [("duiduihu", 2)]


def test_menqing():
    on = {"menqing": True}
    assert pats(sc("23445677p345789s", ruleset=on)) == [("pinghu", 1), ("menqing", 1)]
    assert pats(sc("23445677p345789s")) == [("pinghu", 1)]  # off by default
    # concealed kongs keep the hand 门清
    s = score(parse_hand("123345m999p66p", melds=KONG_2P), "6p", ruleset=on)
    assert pats(s) == [("pinghu", 1), ("gen", 1), ("menqing", 1)] and s.fan == 3
    # any other meld breaks it
    for meld in (Meld.peng("2p"), Meld.kong("2p", "direct"), Meld.kong("2p", "added")):
        s = score(parse_hand("123345m999p66p", melds=[meld]), "6p", ruleset=on)
        assert "menqing" not in [p.id for p in s.patterns]


def test_zhongzhang():
    on = {"zhongzhang": True}
    assert pats(sc("23445677p345678s", ruleset=on)) == [("pinghu", 1), ("zhongzhang", 1)]
    assert pats(sc("23445677p345678s")) == [("pinghu", 1)]  # off by default
    assert pats(sc("23445677p345789s", ruleset=on)) == [("pinghu", 1)]  # 9s
    # melds count: a 999p peng spoils it, an 888p peng does not
    assert pats(sc("234567p345s44p", melds=[Meld.peng("9p")], ruleset=on)) == [("pinghu", 1)]
    assert pats(sc("234567p345s44p", melds=[Meld.peng("8p")], ruleset=on)) == [("pinghu", 1), ("zhongzhang", 1)]


def test_all_options_on_add_up():
    rules = {"zimo": "fan", "haidi": True, "menqing": True, "zhongzhang": True}
    s = sc("23445677p345678s", self_drawn=True, last_tile=True, ruleset=rules)
    assert pats(s) == [("pinghu", 1), ("zimo", 1), ("haidi", 1), ("menqing", 1), ("zhongzhang", 1)]
    assert (s.fan, s.points) == (5, 96)


# -- cap and scoring (§5.3) -------------------------------------------------------------------------
def test_cap_clips_fan_before_the_multiplier():
    s = sc("11334466778899s", ruleset={"cap": 3})
    assert (s.fan, s.raw_fan, s.capped, s.multiplier, s.points) == (3, 5, True, 4, 24)
    assert pats(s) == [("qingqidui", 5)]  # patterns keep their own fan


@pytest.mark.parametrize("cap, fan, capped", [(5, 5, False), (6, 5, False), (4, 4, True), (1, 1, True)])
def test_cap_boundaries(cap, fan, capped):
    s = sc("11334466778899s", ruleset={"cap": cap})
    assert (s.fan, s.raw_fan, s.capped, s.points) == (fan, 5, capped, 6 * 2 ** (fan - 1))


def test_linear_scoring():
    s = sc("11334466778899s", ruleset={"scoring": "linear"})
    assert (s.fan, s.multiplier, s.points) == (5, 5, 30)
    s = sc("11334466778899s", ruleset={"scoring": "linear", "cap": 2, "base": 10})
    assert (s.fan, s.raw_fan, s.capped, s.points) == (2, 5, True, 20)


def test_base_scales_points():
    assert sc("111222444m33399p", ruleset={"base": 5}).points == 10
    assert sc("111222444m33399p", ruleset={"preset": "normal", "base": 1}).points == 2


# -- the chengdu fan table (§9) -----------------------------------------------------------------------
CHENGDU = "chengdu-points"  # fan_table chengdu, linear, base 1


@pytest.mark.parametrize(
    "hand, patterns, fan",
    [
        ("23445677p345789s", [("pinghu", 1)], 1),
        ("111222444m33399p", [("duiduihu", 2)], 2),
        ("11333222456999s", [("qingyise", 3)], 3),
        ("111222333m78999p", [("daiyaojiu", 3)], 3),
        ("113355m224466p88p", [("qidui", 3)], 3),
        ("111333555777m99m", [("qingdui", 4)], 4),
        ("222555888s88855m", [("jiangdui", 4)], 4),
        ("11334466778899s", [("qingqidui", 4)], 4),
        # no 清幺九 in this table: 清一色 3 and 带幺九 3 tie; 清一色 comes first in §5.1 (§3)
        ("11123777888999p", [("qingyise", 3)], 3),
        # 龙七对 = 七对 3 + every 根
        ("11222244p557799m", [("qidui", 3), ("gen", 1)], 4),
        # 清龙七对 = 清七对 4 + every 根
        ("11224444557799m", [("qingqidui", 4), ("gen", 1)], 5),
        # 双龙七对 = 七对 3 + 根 2 = 5
        ("11112222m3344p55p", [("qidui", 3), ("gen", 2)], 5),
    ],
)
def test_chengdu_fan_table(hand, patterns, fan):
    s = sc(hand, ruleset=CHENGDU)
    assert pats(s) == patterns
    assert (s.fan, s.multiplier, s.points) == (fan, fan, fan)  # linear, base 1


def test_chengdu_has_no_qingyaojiu():
    """§9's chengdu table lists no 清幺九; 清一色 + 带幺九 is 3, reported as 清一色 (§3 tie rule)."""
    cases = [
        ("11123777888999p", [], "9p", [("qingyise", 3)], [("qingyaojiu", 5)]),
        ("11112233789s", [Meld.peng("9s")], "9s", [("qingyise", 3), ("gen", 2)], [("qingyaojiu", 5), ("gen", 2)]),
    ]
    for hand, melds, tile, chengdu, qq in cases:
        assert pats(score(parse_hand(hand, melds=melds), tile, ruleset=CHENGDU)) == chengdu
        assert pats(score(parse_hand(hand, melds=melds), tile)) == qq
    s = sc("11123777888999p", ruleset={"fan_table": "chengdu"})
    assert pats(s) == [("qingyise", 3)] and s.points == 24


def test_chengdu_table_with_exponential_scoring():
    # overriding scoring keeps the chengdu fan table
    s = sc("11112222m3344p55p", ruleset={"preset": CHENGDU, "scoring": "exponential", "base": 6})
    assert pats(s) == [("qidui", 3), ("gen", 2)] and s.points == 6 * 16
    s = sc("11112222m3344p55p", ruleset={"fan_table": "chengdu"})
    assert s.fan == 5 and s.points == 96


def test_chengdu_tianhu_and_dihu():
    assert pats(sc("23445677p345789s", self_drawn=True, heavenly=True, ruleset=CHENGDU)) == [("tianhu", 8)]
    assert pats(sc("23445677p345789s", self_drawn=True, earthly=True, ruleset=CHENGDU)) == [("dihu", 8)]


def test_chengdu_earthly_by_discard():
    # §9: 地胡 there is a non-dealer winning on the dealer's first discard
    s = sc("23445677p345789s", earthly=True, ruleset=CHENGDU)
    assert pats(s) == [("dihu", 8)] and s.points == 8
    s = sc("11224444557799m", earthly=True, ruleset=CHENGDU)
    assert pats(s) == [("dihu", 8), ("gen", 1)] and s.points == 9
    s = sc("23445677p345789s", earthly=True, ruleset={"fan_table": "chengdu"})
    assert s.fan == 8 and s.points == 6 * 128


def test_chengdu_earthly_by_discard_gets_no_zimo():
    s = sc("23445677p345789s", earthly=True, ruleset={"preset": CHENGDU, "zimo": "fan"})
    assert pats(s) == [("dihu", 8)]


def test_chengdu_kong_extras():
    hand = parse_hand("123345m999p66p", melds=KONG_2P)
    s = score(hand, Win("6p", self_drawn=True, after_kong=True), ruleset=CHENGDU)
    assert pats(s) == [("pinghu", 1), ("gen", 1), ("gangshanghua", 2)] and s.points == 4
    s = score(hand, Win("6p", after_kong=True), ruleset=CHENGDU)
    assert pats(s) == [("pinghu", 1), ("gen", 1)] and s.points == 2  # 杠上炮 0: not listed
    s = sc("23445677p345789s", robbing_kong=True, ruleset=CHENGDU)
    assert pats(s) == [("pinghu", 1), ("qiangganghu", 1)] and s.points == 2


def test_chengdu_options_keep_section_5_2_values():
    rules = {"preset": CHENGDU, "menqing": True, "zhongzhang": True, "zimo": "fan"}
    s = sc("23445677p345678s", self_drawn=True, ruleset=rules)
    assert pats(s) == [("pinghu", 1), ("zimo", 1), ("menqing", 1), ("zhongzhang", 1)] and s.points == 4


# -- rulesets (§9) ----------------------------------------------------------------------------------------
PRESET_TABLE = {
    "xuezhan": dict(
        mode="xuezhan", fan_table="qq", scoring="exponential", base=6, cap=None, zimo="none",
        direct_kong=1, added_kong=1, concealed_kong=2, dianganghua="self_draw", huazhu=16,
        huazhu_pays_winners=True, dajiao="max", escape=16, winner_leaves="deferred",
        next_dealer="winner", haidi=False, jingoudiao=False, menqing=False, zhongzhang=False,
    ),
    "normal": dict(
        mode="normal", fan_table="qq", scoring="exponential", base=6, cap=None, zimo="none",
        direct_kong=1, added_kong=1, concealed_kong=2, dianganghua="self_draw", huazhu=16,
        huazhu_pays_winners=True, dajiao="max", escape=16, winner_leaves="deferred",
        next_dealer="discarder", haidi=False, jingoudiao=False, menqing=False, zhongzhang=False,
    ),
    "chengdu-points": dict(
        mode="normal", fan_table="chengdu", scoring="linear", base=1, cap=None, zimo="none",
        direct_kong=0, added_kong=0, concealed_kong=0, dianganghua="discard", huazhu=0,
        huazhu_pays_winners=True, dajiao="min", escape=16, winner_leaves="deferred",
        next_dealer="winner", haidi=False, jingoudiao=False, menqing=False, zhongzhang=False,
    ),
}
_NEW_FIELDS = dict(jiaxinwu=False, kaertiao=False, yitiaolong=False, players=4, dianpao_pinghu=True,
                   xueliu_dajiao_winners=False, zhahu_fan=None)   # §9, §15.3
for _fields in PRESET_TABLE.values():
    _fields.update(_NEW_FIELDS)
PRESET_TABLE["xueliu"] = dict(PRESET_TABLE["xuezhan"], mode="xueliu")
PRESET_TABLE["sanren-liangfang"] = dict(PRESET_TABLE["xuezhan"], players=3, dianpao_pinghu=False, huazhu=0,
                                        direct_kong=2, cap=4)


def test_every_preset_is_in_the_section_9_table():
    assert set(PRESET_TABLE) == set(Ruleset.from_preset(n).preset for n in PRESET_TABLE)
    from service.rules.ruleset import PRESETS

    assert set(PRESETS) == set(PRESET_TABLE)
    for name, r in PRESETS.items():
        assert r.as_dict() == {"preset": name, **PRESET_TABLE[name]}


def test_three_players_have_no_huazhu_whatever_is_asked():
    assert Ruleset.from_spec({"preset": "sanren-liangfang", "huazhu": 16}).huazhu == 0
    assert Ruleset.from_spec({"players": 3}).huazhu == 0
    assert Ruleset.from_spec({"players": 3}).as_dict()["huazhu"] == 0
    assert Ruleset.from_spec({"players": 4}).huazhu == 16


@pytest.mark.parametrize("name", sorted(PRESET_TABLE))
def test_presets_match_the_section_9_table(name):
    for r in (Ruleset.from_preset(name), Ruleset.from_spec(name), Ruleset.from_spec({"preset": name})):
        d = r.as_dict()
        assert {k: d[k] for k in PRESET_TABLE[name]} == PRESET_TABLE[name]
        assert r.preset == name


def test_default_ruleset_is_xuezhan():
    assert Ruleset.from_spec(None).as_dict() == Ruleset.from_preset("xuezhan").as_dict()
    assert Ruleset().as_dict() == Ruleset.from_preset("xuezhan").as_dict()
    assert Ruleset(cap=3).as_dict() == dict(Ruleset.from_preset("xuezhan").as_dict(), cap=3)
    assert Ruleset.from_spec({}).as_dict() == Ruleset.from_preset("xuezhan").as_dict()


def test_overriding_one_field_does_not_change_the_other():
    r = Ruleset.from_spec({"preset": "chengdu-points", "scoring": "exponential"})
    assert (r.fan_table, r.scoring, r.base, r.dajiao) == ("chengdu", "exponential", 1, "min")
    r = Ruleset.from_spec({"preset": "xuezhan", "fan_table": "chengdu"})
    assert (r.fan_table, r.scoring) == ("chengdu", "exponential")


def test_every_field_can_be_overridden():
    overrides = dict(
        mode="normal", fan_table="chengdu", scoring="linear", base=3, cap=7, zimo="fan",
        direct_kong=2, added_kong=0, concealed_kong=5, dianganghua="discard", huazhu=0,
        huazhu_pays_winners=False, dajiao="min", escape=0, winner_leaves="forfeit",
        next_dealer="discarder", haidi=True, jingoudiao=True, menqing=True, zhongzhang=True,
        jiaxinwu=True, kaertiao=True, yitiaolong=True, players=4, dianpao_pinghu=False,
        xueliu_dajiao_winners=True, zhahu_fan=5,
    )
    r = Ruleset.from_spec(overrides)
    d = r.as_dict()
    assert Ruleset.from_spec(dict(overrides, mode="xueliu", players=3)).as_dict() == dict(
        d, mode="xueliu", players=3, huazhu=0)
    assert {k: d[k] for k in overrides} == overrides
    assert Ruleset.from_spec(dict(overrides, cap=None)).cap is None


def test_unknown_field():
    with pytest.raises(UnknownRulesetField) as exc:
        Ruleset.from_spec({"bogus": 1})
    assert exc.value.code == "unknown_ruleset_field" and "bogus" in str(exc.value)
    with pytest.raises(UnknownRulesetField):
        score("23445677p345789s", "7p", ruleset={"preset": "normal", "fan": 3})


@pytest.mark.parametrize("spec", ["nope", {"preset": "nope"}, {"preset": "XUEZHAN"}])
def test_unknown_preset(spec):
    with pytest.raises(UnknownRuleset) as exc:
        Ruleset.from_spec(spec)
    assert exc.value.code == "unknown_ruleset"


@pytest.mark.parametrize(
    "field, value",
    [
        ("mode", "bloody"), ("fan_table", "hk"), ("scoring", "quadratic"), ("zimo", "double"),
        ("dianganghua", "none"), ("dajiao", "avg"), ("winner_leaves", "stay"), ("next_dealer", "dealer"),
        ("base", 0), ("base", -6), ("base", "6"), ("base", 1.5), ("base", True),
        ("cap", 0), ("cap", -1), ("cap", "4"), ("cap", True),
        ("direct_kong", -1), ("added_kong", "1"), ("concealed_kong", 2.0), ("huazhu", -16), ("escape", None),
        ("huazhu_pays_winners", "yes"), ("haidi", 1), ("jingoudiao", None), ("menqing", "true"), ("zhongzhang", 0),
        ("jiaxinwu", 1), ("kaertiao", "no"), ("yitiaolong", None), ("dianpao_pinghu", 0),
        ("xueliu_dajiao_winners", "true"), ("players", 2), ("players", 5), ("players", "3"), ("players", True),
        ("players", 3.0), ("players", None), ("zhahu_fan", 0), ("zhahu_fan", 65), ("zhahu_fan", "3"),
        ("zhahu_fan", True),
    ],
)
def test_bad_ruleset_values(field, value):
    with pytest.raises(BadRulesetValue) as exc:
        Ruleset.from_spec({field: value})
    assert exc.value.code == "bad_ruleset_value"
    assert isinstance(exc.value, RulesetError)
    with pytest.raises(BadRulesetValue):
        score("23445677p345789s", "7p", ruleset={field: value})


def test_ruleset_spec_of_a_wrong_type():
    with pytest.raises(RulesetError):
        Ruleset.from_spec(5)  # type: ignore[arg-type]


def test_rulesets_are_immutable_values():
    r = Ruleset.from_preset("xuezhan")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.cap = 3  # type: ignore[misc]
    assert r.replace(cap=3).cap == 3 and r.cap is None


# -- score errors ---------------------------------------------------------------------------------------
def test_win_tile_must_be_in_the_concealed_tiles():
    with pytest.raises(WinTileNotInHand) as exc:
        score("23445677p345789s", "1m")
    assert exc.value.code == "win_tile_not_in_hand" and "1m" in str(exc.value)
    # a tile only in a meld is not in the concealed tiles
    with pytest.raises(WinTileNotInHand):
        score(parse_hand("123345m999p66p", melds=KONG_2P), "2p")


def test_win_tile_accepts_every_notation():
    for tile in ("7p", "7P", "7筒", "7饼", "7銅", " 7p "):
        assert score("23445677p345789s", tile).fan == 1
        assert score("23445677p345789s", Win(tile, self_drawn=True)).fan == 1


@pytest.mark.parametrize(
    "hand",
    [
        "1357913579m2468p",  # no shape
        "123m456p789s11m555m",  # four sets and a pair, three suits (缺一门)
        "1122334455667s7p",  # "seven pairs" but one pair is two different tiles
    ],
)
def test_not_a_win(hand):
    with pytest.raises(NotAWin) as exc:
        score(hand, first_tile(hand))
    assert exc.value.code == "not_a_win"


@pytest.mark.parametrize(
    "flags",
    [
        dict(robbing_kong=True, self_drawn=True),
        dict(after_kong=True, robbing_kong=True),
        dict(heavenly=True, earthly=True, self_drawn=True),
        dict(heavenly=True),  # heavenly is self-drawn
        dict(heavenly=True, self_drawn=True, after_kong=True),
        dict(heavenly=True, self_drawn=True, last_tile=True),
        dict(earthly=True, self_drawn=True, after_kong=True),
        dict(earthly=True, self_drawn=True, last_tile=True),
        dict(earthly=True, robbing_kong=True),
        dict(earthly=True),  # by discard: only under the chengdu table
    ],
)
def test_contradictory_flags(flags):
    with pytest.raises(ContradictoryFlags) as exc:
        score("23445677p345789s", Win("7p", **flags))
    assert exc.value.code == "contradictory_flags"


@pytest.mark.parametrize(
    "flags",
    [
        dict(heavenly=True, earthly=True, self_drawn=True),
        dict(heavenly=True),
        dict(earthly=True, robbing_kong=True),
        dict(earthly=True, self_drawn=True, after_kong=True),
        dict(robbing_kong=True, self_drawn=True),
    ],
)
def test_contradictory_flags_under_chengdu(flags):
    with pytest.raises(ContradictoryFlags):
        score("23445677p345789s", Win("7p", **flags), ruleset=CHENGDU)


@pytest.mark.parametrize("flags", [dict(heavenly=True, self_drawn=True), dict(earthly=True, self_drawn=True)])
def test_heavenly_and_earthly_carry_no_melds(flags):
    with pytest.raises(ContradictoryFlags):
        score(parse_hand("123345m999p66p", melds=KONG_2P), Win("6p", **flags))
    with pytest.raises(ContradictoryFlags):
        score(parse_hand("77p", melds=JINGOU), Win("7p", **flags), ruleset=CHENGDU)


@pytest.mark.parametrize(
    "flags",
    [
        dict(),
        dict(self_drawn=True),
        dict(self_drawn=True, after_kong=True),
        dict(self_drawn=True, last_tile=True),
        dict(self_drawn=True, after_kong=True, last_tile=True),
        dict(after_kong=True),
        dict(robbing_kong=True),
        dict(last_tile=True),
        dict(after_kong=True, last_tile=True),
        dict(robbing_kong=True, last_tile=True),
        dict(heavenly=True, self_drawn=True),
        dict(earthly=True, self_drawn=True),
    ],
)
def test_allowed_flag_combinations(flags):
    hand = "23445677p345789s"
    if flags.get("self_drawn") and flags.get("after_kong"):   # 杠上花 needs a kong among the melds
        hand = parse_hand("123345m999p77p", melds=KONG_2P)
    s = score(hand, Win("7p", **flags))
    assert s.fan >= 1


@pytest.mark.parametrize(
    "tiles, melds, tile",
    [
        ("23445677p345789s", (), "7p"),
        ("123345m999p66p", [Meld.peng("2p")], "6p"),
        ("123m999p66p", [Meld.peng("2p"), Meld.peng("8p")], "6p"),
    ],
    ids=["no melds", "a peng", "two pengs"],
)
@pytest.mark.parametrize("ruleset", ["xuezhan", CHENGDU])
def test_gangshanghua_needs_a_kong_among_the_melds(tiles, melds, tile, ruleset):
    """§5.1: 杠上花 is a win on the replacement tile of one's own kong: no kong, bad input."""
    hand = parse_hand(tiles, melds=melds)
    with pytest.raises(ContradictoryFlags) as exc:
        score(hand, Win(tile, self_drawn=True, after_kong=True), ruleset=ruleset)
    assert exc.value.code == "contradictory_flags" and "kong" in str(exc.value)
    # the same hand scores without the flag, and 杠上炮 (by discard) needs no kong of the winner's
    score(hand, Win(tile, self_drawn=True), ruleset=ruleset)
    score(hand, Win(tile, after_kong=True), ruleset=ruleset)


@pytest.mark.parametrize("kind", ["direct", "added", "concealed"])
def test_gangshanghua_with_any_kind_of_kong(kind):
    s = score(parse_hand("123345m999p66p", melds=[Meld.kong("2p", kind)]), Win("6p", self_drawn=True, after_kong=True))
    assert pats(s) == [("pinghu", 1), ("gen", 1), ("gangshanghua", 1)]


def test_omitted_flags_are_false():
    w = Win("7p")
    assert not any((w.self_drawn, w.after_kong, w.robbing_kong, w.last_tile, w.heavenly, w.earthly))
    assert score("23445677p345789s", w) == score("23445677p345789s", "7p")


# -- pattern names -----------------------------------------------------------------------------------------
NAMES = {  # docs/rules.md#s5.1 and §5.2, column 名
    "pinghu": "平胡", "duiduihu": "对对胡", "qingyise": "清一色", "daiyaojiu": "带幺九", "qidui": "七对",
    "qingdui": "清对", "jiangdui": "将对", "longqidui": "龙七对", "qingqidui": "清七对", "qingyaojiu": "清幺九",
    "qinglongqidui": "清龙七对", "tianhu": "天胡", "dihu": "地胡",
    "gen": "根", "gangshanghua": "杠上花", "gangshangpao": "杠上炮", "qiangganghu": "抢杠胡", "zimo": "自摸加番",
    "haidi": "海底捞月/海底炮", "jingoudiao": "金钩钓", "menqing": "门清", "zhongzhang": "中张",
    "jiaxinwu": "夹心五", "kaertiao": "卡二条", "yitiaolong": "一条龙",
}


def test_every_pattern_of_the_rule_book_exists_with_its_name():
    assert set(PATTERNS) == set(NAMES)
    for pid, name in NAMES.items():
        p = PATTERNS[pid]
        assert p.id == pid and p.name == name
        assert isinstance(p.name_en, str) and p.name_en.strip() and p.name_en.isascii()
    assert len({p.name_en for p in PATTERNS.values()}) == len(PATTERNS)


def test_patterns_in_a_score_carry_id_name_and_name_en():
    s = score(
        parse_hand("123345m999p66p", melds=KONG_2P), Win("6p", self_drawn=True, after_kong=True),
        ruleset={"zimo": "fan", "menqing": True},
    )
    dicts = [p.as_dict() for p in s.patterns]
    assert [(d["id"], d["name"], d["fan"]) for d in dicts] == [
        ("pinghu", "平胡", 1), ("gen", "根", 1), ("gangshanghua", "杠上花", 1), ("zimo", "自摸加番", 1),
        ("menqing", "门清", 1),
    ]
    for d in dicts:
        assert d["name_en"] == PATTERNS[d["id"]].name_en
        assert ("count" in d) == (d["id"] == "gen")


# -- 夹心五, 卡二条, 一条龙 (§5.2) ----------------------------------------------------------------
RUNS = {"jiaxinwu": True, "kaertiao": True, "yitiaolong": True}


def test_jiaxinwu():
    # 46p + 5p: the winning 5 sits in the middle of 456p
    assert pats(sc("234678m11145699p", "5p", ruleset={"jiaxinwu": True})) == [("pinghu", 1), ("jiaxinwu", 1)]
    assert pats(sc("234678m11145699p", "5p")) == [("pinghu", 1)]                    # off by default
    assert pats(sc("234678m11145699p", "4p", ruleset={"jiaxinwu": True})) == [("pinghu", 1)]  # not a 5
    # the 5 won is in a triplet: no 456 in the decomposition
    assert pats(sc("234678m11155599p", "5p", ruleset={"jiaxinwu": True})) == [("pinghu", 1)]
    # a 5 of another suit than the 456
    assert pats(sc("234m567m111p456p99p", "5m", ruleset={"jiaxinwu": True})) == [("pinghu", 1)]


def test_jiaxinwu_competes_through_section_3():
    # 444555666p: 对对胡 (2), or 456p×3 with the 5p in the middle: 平胡 1 + 夹心五 1 = 2.  Equal totals:
    # the higher base-pattern fan is reported (§3)
    s = sc("111m99m444555666p", "5p", ruleset={"jiaxinwu": True})
    assert pats(s) == [("duiduihu", 2)] and s.decomposition == ("111m", "444p", "555p", "666p", "99m")
    # with 中张 on the 111m/99m spoil it either way; with 一条龙 also on nothing changes (no 123/789)
    s = sc("111m99m444555666p", "5p", ruleset=RUNS)
    assert pats(s) == [("duiduihu", 2)]


def test_kaertiao():
    # 13s + 2s, the only wait: 卡二条
    s = sc("234567888m12399s", "2s", ruleset={"kaertiao": True})
    assert pats(s) == [("pinghu", 1), ("kaertiao", 1)] and "123s" in s.decomposition
    assert pats(sc("234567888m12399s", "2s")) == [("pinghu", 1)]                    # off by default
    # 1113s waits on 2s and 3s: not the only wait
    assert pats(sc("234567888m11123s", "2s", ruleset={"kaertiao": True})) == [("pinghu", 1)]
    # 2p is no 2条
    assert pats(sc("234567888m12399p", "2p", ruleset={"kaertiao": True})) == [("pinghu", 1)]
    # the only wait 2s, but as the pair (单钓): not in a 1-2-3
    assert pats(sc("234567888m45622s", "2s", ruleset={"kaertiao": True})) == [("pinghu", 1)]


def test_yitiaolong():
    s = sc("123456789m11234p", "5m", ruleset={"yitiaolong": True})
    assert pats(s) == [("pinghu", 1), ("yitiaolong", 1)]
    assert s.decomposition == ("123m", "456m", "789m", "234p", "11p")
    assert pats(sc("123456789m11234p", "5m")) == [("pinghu", 1)]
    # 清一色 + 根 (1111m) + 一条龙
    s = sc("11112345678999m", "5m", ruleset={"yitiaolong": True})
    assert pats(s) == [("qingyise", 3), ("gen", 1), ("yitiaolong", 1)] and s.fan == 5
    # all three at once, with the chengdu table's values (the table lists none of them: §5.2's +1)
    s = sc("123456789m45699p", "5m", ruleset=dict(RUNS, preset=CHENGDU))
    assert pats(s) == [("pinghu", 1), ("jiaxinwu", 1), ("yitiaolong", 1)] and s.points == 3


def test_run_extras_count_for_ting_and_dajiao():
    from service import ting

    r = ting("123456789m4699p", ruleset=RUNS)
    assert [(str(w.tile), [p.id for p in w.patterns]) for w in r.waits] == [
        ("5p", ["pinghu", "jiaxinwu", "yitiaolong"])]
    assert r.dajiao.fan == 3
    r = ting("234567888m1399s", ruleset=RUNS)
    assert [(str(w.tile), w.fan) for w in r.waits] == [("2s", 2)]
    r = ting("234567888m1113s", ruleset=RUNS)       # two waits: no 卡二条 on the 2s
    assert [(str(w.tile), w.fan) for w in r.waits] == [("2s", 1), ("3s", 1)]


# -- dianpao_pinghu (§9) ---------------------------------------------------------------------------
NO_PINGHU_ON_DISCARD = {"dianpao_pinghu": False}


def test_a_one_fan_win_on_a_discard_is_refused():
    from service.rules.errors import DianpaoPinghu

    for ruleset in (NO_PINGHU_ON_DISCARD, {"preset": "normal", "dianpao_pinghu": False}):
        with pytest.raises(DianpaoPinghu) as exc:
            sc("23445677p345789s", ruleset=ruleset)
        assert exc.value.code == "dianpao_pinghu"
    with pytest.raises(DianpaoPinghu):       # 海底炮 without the haidi option is still 1 fan
        sc("23445677p345789s", last_tile=True, ruleset=NO_PINGHU_ON_DISCARD)
    with pytest.raises(DianpaoPinghu):       # 杠上炮 worth 0 in the chengdu table: 1 fan in all
        score(parse_hand("123345m999p66p", melds=[Meld.peng("2p")]), Win("6p", after_kong=True),
              ruleset=dict(NO_PINGHU_ON_DISCARD, preset=CHENGDU))


def test_other_wins_are_not_affected_by_dianpao_pinghu():
    r = NO_PINGHU_ON_DISCARD
    assert sc("23445677p345789s", self_drawn=True, ruleset=r).fan == 1               # 自摸 平胡
    assert sc("111222444m33399p", ruleset=r).fan == 2                                  # 对对胡 on a discard
    assert sc("23445677p345789s", robbing_kong=True, ruleset=r).fan == 2               # 抢杠胡: 平胡 + 1
    assert sc("23445677p345789s", after_kong=True, ruleset=r).fan == 2                 # 杠上炮: 平胡 + 1
    assert sc("23445677p345789s", last_tile=True, ruleset=dict(r, haidi=True)).fan == 2
    # the rule looks at the fan before the cap: 2 fan capped to 1 is a legal win on a discard
    s = sc("111222444m33399p", ruleset=dict(r, cap=1))
    assert (s.fan, s.raw_fan, s.capped) == (1, 2, True)
    # and 1-fan discard wins stay legal when the option is true (the default)
    assert sc("23445677p345789s").fan == 1


def test_ting_still_lists_one_fan_waits_under_dianpao_pinghu():
    """Reading: the option refuses a win on a discard; the hand is ting all the same (it may win self-drawn)."""
    from service import ting

    r = ting("2344567p345789s", ruleset=NO_PINGHU_ON_DISCARD)
    assert r.ting and r.dajiao.fan == 1


def test_per_key_memos_are_bounded(monkeypatch):
    """The decomposition and tile-flag memos hold at most MEMO_LIMIT keys (a full memo is emptied),
    and a key looked up again after that gives the same answer."""
    from service.rules import shapes

    monkeypatch.setattr(shapes, "MEMO_LIMIT", 8)
    monkeypatch.setattr(shapes, "FEATURES_MEMO", {})
    monkeypatch.setattr(shapes, "FLAGS_MEMO", {})
    keys = list(range(1, 40))
    first = [(shapes.suit_features(k), shapes.suit_flags(k)) for k in keys]
    assert len(shapes.FEATURES_MEMO) <= 8 and len(shapes.FLAGS_MEMO) <= 8
    assert [(shapes.suit_features(k), shapes.suit_flags(k)) for k in keys] == first


def test_suit_and_parse_memos_are_bounded(monkeypatch):
    """The per-suit wait and discard memos (shapes) and the parse memos (hand) are bounded too: a full
    memo is emptied, and what is looked up after that is the same."""
    from service.rules import hand, shapes
    from service.rules.hand import parse_hand

    monkeypatch.setattr(shapes, "MEMO_LIMIT", 8)
    monkeypatch.setattr(shapes, "INFO_MEMO", {})
    monkeypatch.setattr(shapes, "DISCARD_MEMO", {})
    monkeypatch.setattr(hand, "PARTS_LIMIT", 8)
    monkeypatch.setattr(hand, "PARTS_MEMO", ({}, {}, {}))
    keys = list(range(1, 60))
    first = [(shapes.suit_info(k), shapes.suit_discards(k)) for k in keys]
    assert len(shapes.INFO_MEMO) <= 8 and len(shapes.DISCARD_MEMO) <= 8
    assert [(shapes.suit_info(k), shapes.suit_discards(k)) for k in keys] == first
    hands = [f"{a}{a}{a}{b}{b}{b}{c}{c}{c}m{d}{d}{d}{e}{e}p" for a, b, c, d, e in
             [(1, 2, 3, 4, 5), (2, 3, 4, 5, 6), (3, 4, 5, 6, 7), (4, 5, 6, 7, 8), (5, 6, 7, 8, 9)] * 3]
    hands += [f"{r}{r}{r}m{r}{r}{r}p11234567s" for r in range(1, 10)] * 2
    parsed = [str(parse_hand(h)) for h in hands]
    assert all(0 < len(memo) <= 8 for memo in hand.PARTS_MEMO)  # (filled: the strings are canonical)
    assert [str(parse_hand(h)) for h in hands] == parsed


def test_hand_win_memo_is_bounded_and_per_ruleset(monkeypatch):
    """hand_win (a settled win's raw fan and pattern ids) is memoized per ruleset by the hand's value, the
    tile and the situation: bounded (a full memo is emptied), and what it gives, first and again, is what
    evaluate gives (with only_wait where an extra of the ruleset asks it), a hand not a win giving None."""
    from service.rules import fan as fan_module
    from service.rules.fan import context, evaluate, hand_win, meld_info, only_wait

    hands = [(parse_hand(text, melds=melds), tile) for text, tile, melds in [
        ("11333222456999s", "4s", ()), ("11222244p557799m", "9m", ()), ("123456789m11122p", "5m", ()),
        ("123456789m22p", "2p", (Meld.kong("5p", "concealed"),)), ("12345678m12355p", "1m", ()),
        ("11223344556677m", "4m", ()), ("1234566789m1112p", "3m", ())]]
    sits = [(False,) * 6, (True, False, False, False, False, False), (True, True, False, True, False, False)]
    rulesets = [Ruleset.from_spec(None), Ruleset.from_spec({"jiaxinwu": True, "kaertiao": True}),
                Ruleset.from_spec("chengdu-points")]
    monkeypatch.setattr(fan_module, "MEMO_LIMIT", 4)
    context.cache_clear()  # (one context per ruleset: its memos start empty under the small limit)

    def direct(hand, t, sit, ctx):
        evn = evaluate(*hand.keys, len(hand.tiles), meld_info(hand.melds), sit, ctx, t,
                       ctx.asks_wait[t] and only_wait(hand, t))
        return None if evn is None else (evn.raw_fan, tuple(p.id for p in evn.patterns))

    cases = [(h, parse_hand(w).tiles[0].index, sit, context(r)) for h, w in hands for sit in sits for r in rulesets]
    cases = [c for c in cases if c[0].counts[c[1]]]
    expected = [direct(*c) for c in cases]
    assert [hand_win(*c) for c in cases] == expected
    assert [hand_win(*c) for c in cases] == expected
    assert all(0 < len(context(r).wins) <= 4 for r in rulesets)
    assert None in expected and any(e is not None and e[1] for e in expected)
    by_ruleset = [tuple(e for e, c in zip(expected, cases) if c[3] is context(r)) for r in rulesets]
    assert len(set(by_ruleset)) == len(rulesets)  # (each ruleset values some win of the same hands its own way)
    context.cache_clear()
