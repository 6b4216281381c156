"""Tiles and notation (docs/rules.md#s1): parsing, canonical output, bad input."""

from __future__ import annotations

import pytest

from service import parse_hand
from service.rules.errors import (
    InvalidRank,
    MissingSuit,
    NotationError,
    RuleError,
    UnexpectedCharacter,
    UnknownSuit,
)
from service.rules.tiles import TILES, Tile, format_tiles, parse_suit, parse_tiles


def names(tiles) -> list[str]:
    return [str(t) for t in tiles]


# -- the 27 kinds ----------------------------------------------------------------
def test_there_are_27_tile_kinds_in_canonical_order():
    expected = [f"{r}{s}" for s in "mps" for r in range(1, 10)]
    assert names(TILES) == expected
    assert [t.index for t in TILES] == list(range(27))


@pytest.mark.parametrize("text, rank, suit", [("1m", 1, "m"), ("5p", 5, "p"), ("9s", 9, "s")])
def test_tile_rank_and_suit(text, rank, suit):
    t = Tile.from_str(text)
    assert (t.rank, t.suit, str(t)) == (rank, suit, text)


def test_tiles_are_interned_and_immutable():
    assert Tile.from_str("5P") is Tile.from_str("5筒") is Tile.of(13)
    with pytest.raises(AttributeError):
        Tile.from_str("5p").rank = 6  # type: ignore[misc]


def test_tile_ordering_is_canonical():
    tiles = [Tile.from_str(x) for x in ("9s", "1p", "9m", "1m", "5p")]
    assert names(sorted(tiles)) == ["1m", "9m", "1p", "5p", "9s"]


def test_single_tile_field_rejects_more_than_one_tile():
    with pytest.raises(NotationError):
        Tile.from_str("55m")
    with pytest.raises(NotationError):
        Tile.from_str("")


# -- suit marks -------------------------------------------------------------------
@pytest.mark.parametrize(
    "mark, suit",
    [
        ("m", "m"), ("M", "m"), ("万", "m"), ("萬", "m"),
        ("s", "s"), ("S", "s"), ("条", "s"), ("條", "s"), ("索", "s"),
        ("p", "p"), ("P", "p"), ("筒", "p"), ("饼", "p"), ("餅", "p"), ("铜", "p"), ("銅", "p"),
    ],
)
def test_every_suit_mark(mark, suit):
    assert names(parse_tiles(f"7{mark}")) == [f"7{suit}"]
    assert parse_suit(mark) == suit
    assert parse_suit(f" {mark}\t") == suit


def test_parse_suit_rejects_unknown_marks():
    for bad in ("z", "", "mp", "东", "1m"):
        with pytest.raises(UnknownSuit) as exc:
            parse_suit(bad)
        assert exc.value.code == "unknown_suit"


def test_groups_keep_the_written_order_and_suits_may_repeat():
    assert names(parse_tiles("3m12m 9条")) == ["3m", "1m", "2m", "9s"]
    assert names(parse_tiles("1m2p1m")) == ["1m", "2p", "1m"]


def test_letters_and_characters_may_mix():
    assert names(parse_tiles("12万3m4筒5P6索7s")) == ["1m", "2m", "3m", "4p", "5p", "6s", "7s"]


def test_letters_are_case_insensitive():
    assert names(parse_tiles("1M2P3S")) == names(parse_tiles("1m2p3s")) == ["1m", "2p", "3s"]


def test_white_space_before_between_and_after_groups():
    assert names(parse_tiles(" \t1m\n 2p \t3s\n")) == ["1m", "2p", "3s"]


def test_carriage_returns_are_white_space():
    """§1 lists carriage returns among the white space (a Windows client sends CRLF)."""
    assert names(parse_tiles("\r\n123m\r\n456p\r")) == ["1m", "2m", "3m", "4p", "5p", "6p"]
    assert names(parse_tiles("1m\r2p")) == ["1m", "2p"]
    assert str(Tile.from_str("\r5m\r\n")) == "5m"
    assert parse_suit("\r\n条\r") == "s"
    assert parse_tiles("\r") == []
    assert str(parse_hand("123m\r\n456p\r\n789s\r\n11m")) == "11123m456p789s"
    with pytest.raises(MissingSuit):
        parse_tiles("12\r3m")          # not inside a group
    with pytest.raises(MissingSuit):
        parse_tiles("123\rm")


def test_empty_and_blank_strings_are_no_tiles():
    assert parse_tiles("") == []
    assert parse_tiles(" \t\n") == []


def test_format_tiles_is_canonical():
    assert format_tiles(parse_tiles("9s 321m 1s 55p")) == "123m55p19s"
    assert format_tiles([]) == ""


# -- bad input: narrow errors with stable codes quoting the bad text -------------------
@pytest.mark.parametrize(
    "text, cls, code, quoted",
    [
        ("0m", InvalidRank, "invalid_rank", "0"),
        ("10m", InvalidRank, "invalid_rank", "0"),
        ("1z", UnknownSuit, "unknown_suit", "z"),
        ("123m4x", UnknownSuit, "unknown_suit", "x"),
        ("东", UnexpectedCharacter, "unexpected_character", "东"),
        ("123m 东", UnexpectedCharacter, "unexpected_character", "东"),
        ("a", UnexpectedCharacter, "unexpected_character", "a"),
        ("１m", UnexpectedCharacter, "unexpected_character", "１"),  # full-width digit: ranks are ASCII
        ("123", MissingSuit, "missing_suit", "123"),
        ("1m2", MissingSuit, "missing_suit", "2"),
    ],
)
def test_bad_notation(text, cls, code, quoted):
    for parse in (parse_tiles, parse_hand):
        with pytest.raises(cls) as exc:
            parse(text)
        err = exc.value
        assert isinstance(err, NotationError) and isinstance(err, RuleError) and isinstance(err, ValueError)
        assert err.code == code
        assert err.text == quoted
        assert repr(quoted) in str(err)


@pytest.mark.parametrize("text", ["12 3m", "123 m", "1\t2m"])
def test_white_space_inside_a_group_is_an_error(text):
    with pytest.raises(MissingSuit) as exc:
        parse_tiles(text)
    assert exc.value.code == "missing_suit"


@pytest.mark.parametrize("text", ["m", "1mm", " p"])
def test_a_suit_mark_without_ranks_is_an_error(text):
    with pytest.raises(NotationError):
        parse_hand(text)
    with pytest.raises(NotationError) as exc:
        parse_tiles(text)
    err = exc.value
    assert err.code != NotationError.code  # a narrow, stable code
    assert err.code == type(err).code
    assert err.text == text.strip()[-1]
    assert repr(err.text) in str(err)


def test_non_string_input_is_a_notation_error():
    with pytest.raises(NotationError):
        parse_tiles(123)  # type: ignore[arg-type]
    with pytest.raises(NotationError):
        parse_suit(None)  # type: ignore[arg-type]


def test_a_fifth_copy_is_not_a_notation_error():
    # copies are a rule of §2, checked by validate/ting/score, not by the parser
    assert names(parse_tiles("11111m")) == ["1m"] * 5
