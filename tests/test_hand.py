"""Hands, melds and validation (docs/rules.md#s1-§2, §7 花猪)."""

from __future__ import annotations

import pytest

from service import parse_hand, score, ting, validate
from service.rules.errors import (
    BadMeld,
    BadRulesetValue,
    HandSizeError,
    NotationError,
    NotAWin,
    TooManyCopies,
    UnknownSuit,
)
from service.rules.fan import is_win
from service.rules.hand import Meld


def codes(validation) -> list[str]:
    return [p.code for p in validation.problems]


# -- parse_hand -------------------------------------------------------------------------
def test_canonical_output_of_a_hand():
    h = parse_hand("321m 456p 789s 11m")
    assert str(h) == "11123m456p789s"
    assert [str(t) for t in h.tiles] == ["1m", "1m", "1m", "2m", "3m", "4p", "5p", "6p", "7s", "8s", "9s"]


def test_both_notations_give_the_same_hand():
    letters = parse_hand("123m456p789s11m")
    chinese = parse_hand("123万456筒789条11萬")
    traditional = parse_hand("123萬456餅789條11万")
    other_marks = parse_hand("123M456铜789索11m")
    also = parse_hand("123m456銅789S11m")
    assert letters == chinese == traditional == other_marks == also
    assert str(chinese) == "11123m456p789s"


def test_parse_hand_accepts_a_list_of_tile_strings():
    assert str(parse_hand(["5m", "1万", "9索"])) == "15m9s"


def test_parse_hand_rejects_other_types():
    with pytest.raises(NotationError):
        parse_hand(42)  # type: ignore[arg-type]


def test_empty_hand_string_is_a_hand_of_size_0():
    h = parse_hand("")
    assert h.size == 0 and str(h) == "" and h.tiles == ()


def test_melds_are_reported_separately_and_count_three():
    h = parse_hand("123m456p11m", melds=[Meld.peng("5s"), Meld.kong("7s", "concealed")])
    assert str(h) == "11123m456p"  # concealed tiles only
    assert h.size == 8 + 3 + 3  # a kong counts as 3 toward the size
    assert [m.as_dict() for m in h.melds] == [
        {"type": "peng", "tile": "5s"},
        {"type": "kong", "tile": "7s", "kind": "concealed"},
    ]


@pytest.mark.parametrize("kind", ["direct", "added", "concealed"])
def test_kong_kinds(kind):
    m = Meld.from_mapping({"type": "kong", "tile": "3筒", "kind": kind})
    assert (m.type, str(m.tile), m.kind, m.copies) == ("kong", "3p", kind, 4)
    assert m.is_concealed_kong == (kind == "concealed")


def test_meld_from_mapping_accepts_every_mark():
    assert Meld.from_mapping({"type": "peng", "tile": " 9條 "}) == Meld.peng("9s")
    h = parse_hand("11m", melds=[{"type": "peng", "tile": "2萬"}])
    assert h.melds == (Meld.peng("2m"),)


@pytest.mark.parametrize(
    "data",
    [
        {"type": "chi", "tile": "1m"},
        {"type": "kong", "tile": "1m"},  # a kong needs a kind
        {"type": "kong", "tile": "1m", "kind": "secret"},
        {"type": "peng", "tile": "1m", "kind": "direct"},  # a peng has no kind
    ],
)
def test_bad_melds(data):
    with pytest.raises(BadMeld) as exc:
        Meld.from_mapping(data)
    assert exc.value.code == "bad_meld"


def test_bad_meld_tile_is_a_notation_error():
    with pytest.raises(NotationError):
        Meld.from_mapping({"type": "peng", "tile": "0m"})


def test_void_suit_accepts_every_mark():
    for mark, suit in (("m", "m"), ("萬", "m"), ("S", "s"), ("索", "s"), ("饼", "p"), ("銅", "p")):
        assert parse_hand("11m", void=mark).void == suit
    with pytest.raises(UnknownSuit):
        parse_hand("11m", void="z")


def test_suits_include_melds():
    h = parse_hand("11m", melds=[Meld.peng("5s")])
    assert h.suits == frozenset({"m", "s"})


# -- validate ---------------------------------------------------------------------------------
def test_validate_a_valid_complete_hand():
    v = validate("11122233344455m")
    assert (v.valid, v.size, v.tiles, v.suits, v.huazhu, v.complete, v.problems) == (
        True, 14, "11122233344455m", ("m",), False, True, (),
    )


def test_validate_a_valid_waiting_hand():
    v = validate("2344567p345789s")
    assert (v.valid, v.size, v.tiles, v.suits, v.huazhu, v.complete, codes(v)) == (
        True, 13, "2344567p345789s", ("p", "s"), False, False, [],
    )


def test_validate_reports_canonical_tiles_and_suits_in_order():
    v = validate("9s 1p 5万 3p 1s")
    assert v.tiles == "5m13p19s"
    assert v.suits == ("m", "p", "s")


def test_validate_a_14_size_non_winning_hand():
    v = validate("1357913579m2468p")
    assert v.size == 14 and v.valid and not v.complete and not v.huazhu


def test_validate_with_melds():
    v = validate(parse_hand("123m456m789m55p", melds=[Meld.kong("1s", "direct")]))
    # 11 concealed + 3 = 14, but three suits: a 花猪, never complete
    assert (v.valid, v.size, v.suits, v.huazhu, v.complete) == (True, 14, ("m", "p", "s"), True, False)
    v = validate(parse_hand("123m456m789m55p", melds=[Meld.kong("1p", "added")]))
    assert (v.valid, v.size, v.suits, v.huazhu, v.complete) == (True, 14, ("m", "p"), False, True)


def test_seven_pairs_needs_no_melds_to_be_complete():
    # four pairs + two melds: 14 in size, every concealed count even, but no win
    h = parse_hand("1133m2244p", melds=[Meld.peng("6p"), Meld.kong("8p", "concealed")])
    assert not is_win(h)
    v = validate(h)
    assert v.valid and v.size == 14 and not v.complete


def test_an_invalid_hand_is_never_complete():
    # a winning shape, but the visible tiles make a fifth 1m
    assert validate("11122233344455m").complete
    v = validate("11122233344455m", visible="11m")
    assert codes(v) == ["too_many_copies"] and not v.complete


def test_validate_empty_string_is_size_0():
    v = validate("")
    assert (v.valid, v.size, v.tiles, v.suits, v.huazhu, v.complete) == (False, 0, "", (), False, False)
    assert codes(v) == ["bad_size"]


@pytest.mark.parametrize("text, size", [("111222333444555m", 15), ("123m", 3), ("1112223334445m", 13), ("12m", 2)])
def test_validate_sizes(text, size):
    v = validate(text)
    assert v.size == size
    assert ("bad_size" in codes(v)) == (size not in (13, 14))
    assert v.valid == (size in (13, 14))


def test_validate_fifteen_tiles_is_bad_size():
    v = validate("111222333444555m")
    assert codes(v) == ["bad_size"] and not v.valid and not v.complete


def test_validate_a_fifth_copy_is_too_many_copies():
    v = validate("11111m234567m999p")
    assert v.size == 14
    assert codes(v) == ["too_many_copies"] and not v.valid and not v.complete
    assert "1m" in v.problems[0].message


def test_validate_a_fifth_copy_across_melds():
    v = validate(parse_hand("1m234567m999p", melds=[Meld.kong("1m", "concealed")]))
    assert v.size == 13 and codes(v) == ["too_many_copies"] and not v.valid
    v = validate(parse_hand("1m234567m99p", melds=[Meld.kong("1m", "concealed"), Meld.peng("9p")]))
    assert v.size == 15 and codes(v) == ["bad_size", "too_many_copies"]
    assert "1m" in v.problems[1].message and "9p" in v.problems[1].message


def test_validate_counts_visible_tiles():
    assert validate("11m234567m999p123s", visible="11m").valid
    v = validate("11m234567m999p123s", visible="111m")
    assert codes(v) == ["too_many_copies"]


def test_validate_rejects_a_bad_ruleset():
    with pytest.raises(BadRulesetValue):
        validate("11122233344455m", ruleset={"cap": 0})


def test_validate_notation_errors_raise():
    with pytest.raises(NotationError):
        validate("0m")


# -- 缺一门 and 定缺 ----------------------------------------------------------------------------
def test_three_suits_is_huazhu_and_never_a_win():
    # four sets and a pair, but three suits
    v = validate("123m456p789s11m555m")
    assert v.valid and v.huazhu and not v.complete
    assert not is_win(parse_hand("123m456p789s11m555m"))


def test_two_suits_win():
    assert is_win(parse_hand("123m456m555m789p11p"))


def test_void_suit_makes_huazhu_and_blocks_win():
    text = "123m456m555m789p11p"
    assert validate(parse_hand(text, void="s")).complete
    assert not validate(parse_hand(text, void="s")).huazhu
    v = validate(parse_hand(text, void="p"))
    assert v.valid and v.huazhu and not v.complete
    assert not is_win(parse_hand(text, void="筒"))
    with pytest.raises(NotAWin):
        score(parse_hand(text, void="p"), "1p")


def test_void_suit_in_melds_makes_huazhu():
    h = parse_hand("123m456m789m1m", melds=[Meld.peng("5p")], void="p")
    assert validate(h).huazhu
    assert not ting(h).ting
    assert ting(parse_hand("123m456m789m1m", melds=[Meld.peng("5p")], void="s")).ting


def test_void_suit_blocks_ting():
    text = "1112345678999m"
    assert ting(parse_hand(text, void="p")).ting
    r = ting(parse_hand(text, void="m"))
    assert (r.ting, r.huazhu, r.waits, r.dajiao) == (False, True, (), None)


# -- operations enforce sizes and copies -----------------------------------------------------------
def test_ting_and_score_enforce_size():
    with pytest.raises(HandSizeError) as exc:
        ting("11122233344455m")  # 14, ting wants 13
    assert exc.value.code == "bad_size"
    with pytest.raises(HandSizeError):
        score("1112223334445m", "1m")  # 13, score wants 14
    with pytest.raises(HandSizeError):
        score("111222333444555m", "1m")  # 15
    with pytest.raises(HandSizeError):
        ting("")


def test_ting_and_score_enforce_copies():
    with pytest.raises(TooManyCopies) as exc:
        ting("11111m23456789p")
    assert exc.value.code == "too_many_copies"
    with pytest.raises(TooManyCopies):
        score("11111m234567m999p", "2m")
    with pytest.raises(TooManyCopies):
        ting("1112345678999m", visible="99m")  # 3 held + 2 visible
    assert ting("1112345678999m", visible="9m").ting  # 3 held + 1 visible = 4 is fine
