"""Shanten (向听) and useful tiles (有效进张) (docs/rules.md#s16).

The service counts shanten suit by suit from a table (service/rules/shanten_table.py).  Here it is
checked against the definition itself, by an exchange search written below: a hand is ``k``
exchanges from ting when some ``k + 1`` draws (each keeping every tile at four copies, melds
counted) and ``k`` discards leave a win of the hand's size plus one in a pair of suits it may keep
(缺一门, never the void suit, both suits of its melds); a win is checked by a plain recursive
decomposition (sets and a pair, or seven pairs), not by the service.  The search goes to two
exchanges, so hands of shanten 0-2 are compared exactly and the others only found to be more.
"""

from __future__ import annotations

import functools
import itertools
import random

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from service import parse_hand, shanten, shanten_analysis, shanten_options, ting, useful_tiles
from service.rules.errors import HandSizeError, SuitNotInPlay, TooManyCopies, UnknownSuit, VoidNotAllowed
from service.rules.hand import Meld
from service.rules.shanten import Shanten, ShantenOptions
from service.rules.shanten_table import KEYS, ROWS, build, decode, key_counts, suit_key, suit_row
from service.rules.tiles import TILES

SETTINGS = settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


def names(tiles) -> list[tuple[str, int]]:
    return [(str(t.tile), t.remaining) for t in tiles]


# -- worked examples (docs/rules.md#s16) -------------------------------------------------------------
def test_ting_and_win():
    assert shanten("1112345678999m") == 0
    assert shanten("11122233344456m") == -1                     # 111 222 333 456 44
    assert shanten("11122233344455m") == -1


def test_one_shanten_hand_and_its_useful_tiles():
    # 123 45 678 m, 45 99 1 p: 3m/6m complete 45m (then 45p waits on 3p/6p), 9m makes 6789m a set and
    # a wait on 45m ... (every draw the exchange search finds)
    u = useful_tiles("12345m678m4599p1p")
    assert u.shanten == 1
    assert names(u.tiles) == [("3m", 3), ("6m", 3), ("9m", 4), ("3p", 4), ("6p", 4)]
    assert u.remaining == 18
    seen = useful_tiles("12345m678m4599p1p", visible="3m3m9m9m")   # two 3m, two 9m seen
    assert names(seen.tiles) == [("3m", 1), ("6m", 3), ("9m", 2), ("3p", 4), ("6p", 4)]
    assert seen.remaining == 14


def test_a_useful_tile_needs_a_copy_left():
    # every other 3m visible: no 3m left to draw, so it is not listed (it is still a useful shape)
    u = useful_tiles("12345m678m4599p1p", visible="3m3m3m")
    assert [str(t.tile) for t in u.tiles] == ["6m", "9m", "3p", "6p"]


def test_seven_pairs():
    # 11 33 m 55 77 99 p, singles 2m 4p; the 9s of a third suit must go: 2m or 4p make the sixth pair
    u = useful_tiles("1133m2m4p557799p9s")
    assert (u.shanten, names(u.tiles), u.remaining) == (1, [("2m", 3), ("4p", 3)], 6)
    assert shanten("1122m3344p5566p77p") == -1                  # seven pairs win
    assert shanten("11112222m333344p") == -1                    # four of a kind make two pairs


def test_four_copies_limit():
    # 1111m + 234 567 789p: the only wait would be a fifth 1m (死叫), so not ting but one exchange away
    assert not ting("1111m234p567p789p").ting
    assert shanten("1111m234p567p789p") == 1
    # a 碰 of 5m leaves one 5m: 5m123p456p789p waits on no 5m
    assert shanten(parse_hand("5m123p456p789p", melds=[Meld.peng("5m")])) == 1
    # a kong of 1p: 23p can no longer become 123p
    hand = parse_hand("23p555p789s55s", melds=[Meld.kong("1p", "concealed")])
    assert [str(w.tile) for w in ting(hand).waits] == ["4p"]
    assert shanten(hand) == 0 and [str(t.tile) for t in useful_tiles(hand).tiles] == ["4p"]


def test_missing_suit_and_void():
    peng = [Meld.peng("1m")]
    assert shanten(parse_hand("123p456p789p5s", melds=peng)) == 1          # 5s must go
    assert shanten(parse_hand("1122m3344p5566p7s", void="p")) == 8         # eight 筒 must go
    assert shanten("123m456p789s1122m") == 3                               # three suits: one goes
    # melds alone of three suits, or of the void suit: never ting
    three = [Meld.peng("1m"), Meld.peng("2p"), Meld.peng("3s")]
    assert shanten(parse_hand("1234p", melds=three)) is None
    assert useful_tiles(parse_hand("1234p", melds=three)) == Shanten(None, (), 0)
    assert shanten_options(parse_hand("12345p", melds=three)) == ShantenOptions(None, ())
    assert shanten(parse_hand("123p456p789p5s", melds=peng, void="m")) is None


def test_fourteen_tile_options():
    hand = parse_hand("113456m23678p", melds=[Meld.peng("9p")])
    o = shanten_options(hand)
    assert o.shanten == 0
    best = o.options[0]
    assert (str(best.discard), best.shanten, names(best.tiles), best.remaining) == ("3m", 0, [("1p", 4), ("4p", 4)], 8)
    assert [str(x.discard) for x in o.options] == ["3m", "6m", "2p", "3p", "1m", "4m", "5m", "8p", "6p", "7p"]
    # a win: -1, and each discard's 13
    o = shanten_options("11112345678999m")
    assert o.shanten == -1
    first = o.options[0]
    # after 1m, 1m is a wait of the 13 but no copy is left (the discard is seen): not listed
    assert str(first.discard) in {"1m", "9m"} and first.shanten == 0
    assert "1m" not in [str(t.tile) for t in next(x for x in o.options if str(x.discard) == "1m").tiles]


def test_three_players():
    u = useful_tiles("1234p5678p1199s2s", ruleset="sanren-liangfang")
    assert (u.shanten, names(u.tiles), u.remaining) == (
        1, [("3p", 3), ("6p", 3), ("9p", 4), ("1s", 2), ("3s", 4), ("9s", 2)], 18)
    assert shanten("123p456p789p1s5s9s1s", ruleset="sanren-liangfang") == shanten("123p456p789p1s5s9s1s")
    with pytest.raises(SuitNotInPlay):
        shanten("1234p5678p1199s1m", ruleset="sanren-liangfang")
    with pytest.raises(SuitNotInPlay):
        useful_tiles("1234p5678p1199s2s", ruleset="sanren-liangfang", visible="5m")
    with pytest.raises(VoidNotAllowed):
        shanten(parse_hand("1234p5678p1199s2s", void="m"), ruleset="sanren-liangfang")


def test_bad_input():
    with pytest.raises(HandSizeError, match="expected 13 or 14"):
        shanten("1234m")
    with pytest.raises(HandSizeError):
        shanten_analysis("123456789m123456p")
    with pytest.raises(HandSizeError, match="expected 13"):
        useful_tiles("11122233344455m")
    with pytest.raises(TooManyCopies):
        shanten("11111m23456789p")
    with pytest.raises(TooManyCopies):
        useful_tiles("1112345678999m", visible="1m1m")
    with pytest.raises(UnknownSuit):
        shanten("123456789m1234z")


def test_every_way_of_writing_a_hand():
    for text in ("12345m678m4599p1p", "1p99p45p876m54321m", "12345万678万4599筒1饼", " 12345m 678m 4599p 1p "):
        assert shanten(text) == 1
        assert names(useful_tiles(text).tiles) == [("3m", 3), ("6m", 3), ("9m", 4), ("3p", 4), ("6p", 4)]


# -- the table ---------------------------------------------------------------------------------------
def test_table_rows_equal_the_definition():
    """The shipped rows against the dynamic programme, on keys of every size."""
    rng = random.Random(7)
    for _ in range(600):
        counts = [0] * 9
        for _ in range(rng.randint(0, 14)):
            r = rng.randrange(9)
            if counts[r] < 4:
                counts[r] += 1
        assert decode(ROWS[suit_key(counts)]) == suit_row(counts), counts


@pytest.mark.slow
def test_table_is_what_build_writes():
    """Every row (``python -m service.rules.shanten_table`` writes the file from :func:`build`)."""
    assert build() == ROWS
    assert len(ROWS) == KEYS


def test_rows_never_fall():
    for key in (0, suit_key([1, 1, 1, 0, 0, 0, 0, 0, 2]), suit_key([4, 4, 4, 2, 0, 0, 0, 0, 0])):
        row = decode(ROWS[key])
        assert list(row[:5]) == sorted(row[:5]) and list(row[5:]) == sorted(row[5:])
        assert all(row[5 + j] - row[j] in (0, 1, 2) for j in range(5)), key_counts(key)


# -- the definition: an exchange search ---------------------------------------------------------------
@functools.cache
def holds_sets(counts: tuple, sets: int, pairs: int) -> bool:
    """Whether ``sets`` sets and ``pairs`` pairs can be taken from these tiles (the rest left over)."""
    if not sets and not pairs:
        return True
    i = next((i for i, c in enumerate(counts) if c), None)
    if i is None:
        return False
    c = list(counts)
    c[i] -= 1
    if holds_sets(tuple(c), sets, pairs):           # this copy left over
        return True
    c[i] += 1
    if sets and c[i] >= 3:
        c[i] -= 3
        if holds_sets(tuple(c), sets - 1, pairs):
            return True
        c[i] += 3
    if pairs and c[i] >= 2:
        c[i] -= 2
        if holds_sets(tuple(c), sets, pairs - 1):
            return True
        c[i] += 2
    if sets and i % 9 <= 6 and c[i + 1] and c[i + 2]:
        for x in (i, i + 1, i + 2):
            c[x] -= 1
        if holds_sets(tuple(c), sets - 1, pairs):
            return True
    return False


def holds_win(counts, melds: int, suits) -> bool:
    kept = tuple(c if i // 9 in suits else 0 for i, c in enumerate(counts))
    if holds_sets(kept, 4 - melds, 1):
        return True
    return melds == 0 and sum(c // 2 for c in kept) >= 7     # seven pairs (four of a kind: two)


def suit_pairs(melds, void: int | None, players: int = 4):
    meld_suits = {m.tile.index // 9 for m in melds}
    pairs = [(1, 2)] if players == 3 else [(0, 1), (0, 2), (1, 2)]
    return [p for p in pairs if void not in p and meld_suits <= set(p)]


def draws_to_win(counts, held, melds: int, pairs, limit: int) -> int | None:
    """The fewest draws after which, with as many discards as needed, the tiles hold a win (up to ``limit``)."""
    for k in range(limit + 1):
        for pair in pairs:
            for drawn in itertools.combinations_with_replacement([t for t in range(27) if t // 9 in pair], k):
                c, h = list(counts), list(held)
                for t in drawn:
                    c[t] += 1
                    h[t] += 1
                if max(h) <= 4 and holds_win(tuple(c), melds, pair):
                    return k
    return None


def brute_shanten(counts, held, melds: int, pairs, limit: int = 3) -> int | None:
    """The shanten by exchanges: ``k`` exchanges then a draw that wins is ``k + 1`` draws (None: more than
    ``limit − 1``)."""
    if not pairs:
        return None
    n = draws_to_win(counts, held, melds, pairs, limit)
    return None if n is None else n - 1


@st.composite
def near_wins(draw, size: int = 13):
    """``(counts, melds, void)``: a win in one or two suits with melds, a tile taken out (for 13), then 0-3
    tiles exchanged for others (any suit, at most four copies)."""
    rng = random.Random(draw(st.integers(0, 2 ** 32)))
    while True:
        suits = rng.sample(range(3), rng.choice((1, 2, 2)))
        counts = [0] * 27
        if rng.random() < 0.15:
            for _ in range(7):
                counts[rng.choice(suits) * 9 + rng.randrange(9)] += 2
        else:
            for _ in range(4):
                s = rng.choice(suits) * 9
                if rng.random() < 0.4:
                    counts[s + rng.randrange(9)] += 3
                else:
                    r = rng.randrange(7)
                    for x in range(3):
                        counts[s + r + x] += 1
            counts[rng.choice(suits) * 9 + rng.randrange(9)] += 2
        if max(counts) <= 4:
            break
    melds = []
    for t in range(27):
        if counts[t] >= 3 and rng.random() < 0.3:
            counts[t] -= 3
            melds.append(
                Meld.kong(TILES[t], "direct") if counts[t] == 0 and rng.random() < 0.3 else Meld.peng(TILES[t])
            )
    tiles = [t for t in range(27) for _ in range(counts[t])]
    rng.shuffle(tiles)
    if size == 13:
        tiles.pop()
    held = [0] * 27
    for m in melds:
        held[m.tile.index] += m.copies
    for t in tiles:
        held[t] += 1
    for _ in range(draw(st.sampled_from((0, 1, 1, 2, 2, 3)))):
        out = tiles.pop(rng.randrange(len(tiles)))
        held[out] -= 1
        t = rng.choice([t for t in range(27) if held[t] < 4])
        tiles.append(t)
        held[t] += 1
    counts = [0] * 27
    for t in tiles:
        counts[t] += 1
    void = draw(st.sampled_from((None, None, None, 0, 1, 2)))
    return counts, melds, void


def hand_of(counts, melds, void):
    return parse_hand([str(TILES[t]) for t in range(27) for _ in range(counts[t])], melds=melds,
                      void=None if void is None else "mps"[void])


def held_of(counts, melds) -> list[int]:
    held = list(counts)
    for m in melds:
        held[m.tile.index] += m.copies
    return held


@SETTINGS
@given(case=near_wins())
def test_shanten_matches_the_exchange_search(case):
    counts, melds, void = case
    hand = hand_of(counts, melds, void)
    held = held_of(counts, melds)
    pairs = suit_pairs(melds, void)
    ours = shanten(hand)
    expected = brute_shanten(counts, held, len(melds), pairs)
    event(f"shanten {expected}")
    if not pairs:
        assert ours is None
    elif expected is None:
        assert ours > 2
    else:
        assert ours == expected


@SETTINGS
@given(case=near_wins())
def test_useful_tiles_match_the_exchange_search(case):
    """A useful tile is one whose draw leaves a 14 one exchange closer: one draw fewer to a win."""
    counts, melds, void = case
    hand = hand_of(counts, melds, void)
    held = held_of(counts, melds)
    pairs = suit_pairs(melds, void)
    u = useful_tiles(hand)
    if not pairs or u.shanten > 1:
        return
    need = u.shanten + 1
    expected = []
    for t in range(27):
        if held[t] < 4:
            c, h = list(counts), list(held)
            c[t] += 1
            h[t] += 1
            if draws_to_win(c, h, len(melds), pairs, need - 1) == need - 1:
                expected.append((str(TILES[t]), 4 - held[t]))
    event(f"shanten {u.shanten}")
    assert names(u.tiles) == expected
    assert u.remaining == sum(left for _, left in expected)


@SETTINGS
@given(case=near_wins(size=14))
def test_fourteen_tiles_agree_with_their_thirteens(case):
    """A 14's shanten is its discards' least (−1 for a win), each option is the 13's answer with the
    discard seen, and the options come best first."""
    counts, melds, void = case
    hand = hand_of(counts, melds, void)
    o = shanten_options(hand)
    assert shanten(hand) == o.shanten
    if o.shanten is None:
        assert o.options == ()
        return
    assert [x.discard.index for x in sorted(o.options, key=lambda x: x.discard.index)] == \
        [t for t in range(27) if counts[t]]
    wins = brute_shanten(counts, held_of(counts, melds), len(melds), suit_pairs(melds, void), limit=0) == -1
    assert (o.shanten == -1) == wins
    assert o.shanten == (-1 if wins else min(x.shanten for x in o.options))
    for x in o.options:
        c = list(counts)
        c[x.discard.index] -= 1
        thirteen = hand_of(c, melds, void)
        u = useful_tiles(thirteen, visible=[x.discard])
        assert (x.shanten, x.tiles, x.remaining) == (u.shanten, u.tiles, u.remaining)
    ranks = [(x.shanten, -x.remaining, x.discard.index) for x in o.options]
    assert ranks == sorted(ranks)


@st.composite
def concealed_fourteens(draw):
    """Counts of 14 concealed tiles: one to three suits, often pairs (seven pairs then ties with sets), now
    and then a suit of a lone tile (its discard leaves the other two suits)."""
    rng = random.Random(draw(st.integers(0, 2 ** 32)))
    suits = rng.sample(range(3), rng.choice((1, 2, 2, 3)))
    counts = [0] * 27
    if len(suits) > 1 and rng.random() < 0.3:
        counts[suits.pop() * 9 + rng.randrange(9)] = 1
    while sum(counts) < 14:
        t = rng.choice(suits) * 9 + rng.randrange(9)
        add = 2 if rng.random() < 0.4 and sum(counts) < 13 else 1
        if counts[t] + add <= 4:
            counts[t] += add
    return counts


@SETTINGS
@given(counts=concealed_fourteens())
def test_concealed_fourteens_from_strings_agree_with_their_thirteens(counts):
    """Concealed tiles only, from a hand string (the options' own road: the suits a discard leaves alone
    worked out once per hand): each option is the 13's answer with the discard seen, the hand as tiles
    gives the same, the options come best first."""
    text = str(hand_of(counts, [], None))
    o = shanten_options(text)
    assert o == shanten_options(hand_of(counts, [], None))
    assert o.shanten == shanten(text)
    assert sorted(x.discard.index for x in o.options) == [t for t in range(27) if counts[t]]
    for x in o.options:
        c = list(counts)
        c[x.discard.index] -= 1
        u = useful_tiles(hand_of(c, [], None), visible=[x.discard])
        assert (x.shanten, x.tiles, x.remaining) == (u.shanten, u.tiles, u.remaining)
    ranks = [(x.shanten, -x.remaining, x.discard.index) for x in o.options]
    assert ranks == sorted(ranks)
    spelled = "".join(str(TILES[t]) for t in range(27) for _ in range(counts[t]))   # 1m1m2m...: the full parse
    assert shanten_options(spelled) == o
    event(f"suits {sum(1 for s in range(3) if any(counts[9 * s:9 * s + 9]))}")


def test_fourteen_tile_strings_that_are_not_hands():
    # read by suit groups first: what is not a suit's tiles goes to the full parse, which says what is wrong
    with pytest.raises(TooManyCopies):
        shanten_options("11111m234p567p789s")
    with pytest.raises(HandSizeError):
        shanten_options("1111m234p567p789s")
    with pytest.raises(UnknownSuit):
        shanten_options("1112m234p567p789x")
    assert shanten_options("11112345678999m") == shanten_options("9m1111234567899m")   # (the full parse)


# -- invariance -----------------------------------------------------------------------------------------
@SETTINGS
@given(case=near_wins(), order=st.permutations(range(3)), data=st.data())
def test_same_answer_whatever_the_order_or_the_suit_letters(case, order, data):
    """Tiles written in any order, and suits relabelled consistently (melds and void too), give the same
    answer (its tiles relabelled)."""
    counts, melds, void = case
    base = useful_tiles(hand_of(counts, melds, void))
    tiles = [str(TILES[t]) for t in range(27) for _ in range(counts[t])]
    shuffled = data.draw(st.permutations(tiles))
    assert useful_tiles(parse_hand(list(shuffled), melds=melds, void=None if void is None else "mps"[void])) == base

    def move(t: int) -> int:
        return order[t // 9] * 9 + t % 9

    moved = [0] * 27
    for t in range(27):
        moved[move(t)] = counts[t]
    moved_melds = [Meld(m.type, TILES[move(m.tile.index)], m.kind) for m in melds]
    other = useful_tiles(hand_of(moved, moved_melds, None if void is None else order[void]))
    assert other.shanten == base.shanten and other.remaining == base.remaining
    assert sorted((move(t.tile.index), t.remaining) for t in base.tiles) == \
        [(t.tile.index, t.remaining) for t in other.tiles]


# -- ting ---------------------------------------------------------------------------------------------
@SETTINGS
@given(case=near_wins())
def test_ting_hands_are_zero_with_their_waits(case):
    counts, melds, void = case
    hand = hand_of(counts, melds, void)
    t = ting(hand)
    u = useful_tiles(hand)
    assert (u.shanten == 0) == t.ting
    if t.ting:
        assert [(str(w.tile), w.remaining) for w in t.waits] == names(u.tiles)
        assert u.remaining == sum(w.remaining for w in t.waits)
    elif u.shanten is not None:
        assert u.shanten >= 1
