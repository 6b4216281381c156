"""The rules core's fast roads give the general roads' answers.

A hand string in canonical suit order is read per suit into its suit keys (``hand.suit_keys``) without
building a Hand; ting and discard advice of concealed hands with no 定缺, nothing visible and a ruleset
with no extra but 根 answer from memoized per-suit parts.  Anything visible takes the general road
(every candidate through ``wait_tiles`` and each wait valued on its own), and a visible tile that is none
of the waits changes no answer (only a wait's ``remaining`` counts what is visible).  So here each
answer of the fast road (the hand as a string, and as a Hand) is compared with the general road's for the
same hand with such a tile visible, and with the brute-force reference, on generated hands.
"""

from __future__ import annotations

from hypothesis import assume, event, given, note, settings
from hypothesis import strategies as st

from service import Ruleset, discards, parse_hand, ting
from service.rules.hand import suit_keys
from service.rules.tiles import TILES
from tests import reference as ref

plain_rulesets = st.fixed_dictionaries(
    {
        "fan_table": st.sampled_from(["qq", "chengdu"]),
        "scoring": st.sampled_from(["exponential", "linear"]),
        "base": st.integers(1, 10),
        "cap": st.none() | st.integers(1, 10),
        "dajiao": st.sampled_from(["max", "min"]),
    }
)


@st.composite
def concealed_counts(draw, size: int):
    """``size`` concealed tiles: near a win (sets, a pair or seven pairs, one tile changed) or random, in
    one to three suits, no count over 4."""
    suits = list(draw(st.permutations([0, 1, 2])))[: draw(st.sampled_from([1, 2, 2, 3]))]
    tiles = [s * 9 + r for s in suits for r in range(9)]
    counts = [0] * 27
    shape = draw(st.sampled_from(["sets", "sets", "pairs", "random"]))
    if shape == "pairs":
        for _ in range(7):
            t = draw(st.sampled_from([t for t in tiles if counts[t] <= 2]))
            counts[t] += 2
    elif shape == "sets":
        for _ in range(4):
            s = draw(st.sampled_from(suits)) * 9
            if draw(st.booleans()):
                counts[s + draw(st.integers(0, 8))] += 3
            else:
                r = draw(st.integers(0, 6))
                for x in range(3):
                    counts[s + r + x] += 1
        counts[draw(st.sampled_from(tiles))] += 2
    else:
        for t in draw(st.lists(st.sampled_from(tiles), min_size=14, max_size=14)):
            counts[t] += 1
    while sum(counts) > size or max(counts) > 4:
        t = draw(st.sampled_from([t for t in range(27) if counts[t]]))
        counts[t] -= 1
    while sum(counts) < size:
        t = draw(st.sampled_from([t for t in tiles if counts[t] < 4]))
        counts[t] += 1
    return counts


# -- suit keys from a string ------------------------------------------------------------------------------
@given(counts=st.lists(st.integers(0, 4), min_size=27, max_size=27), data=st.data())
def test_suit_keys_are_the_hands_keys(counts, data):
    """A string in canonical suit order, its ranks in any order within a group: the parsed hand's keys and
    size; the same string after any other spelling of it: None (the full parse reads those)."""
    groups = []
    for s, letter in enumerate("mps"):
        ranks = [str(r + 1) for r in range(9) for _ in range(counts[s * 9 + r])]
        if ranks:
            groups.append("".join(data.draw(st.permutations(ranks))) + letter)
    text = "".join(groups)
    hand = parse_hand(text)
    assert suit_keys(text) == (*hand.keys, len(hand.tiles))
    assert str(hand) == ref.canonical(counts)
    if len(groups) > 1:
        swapped = groups[1] + groups[0] + "".join(groups[2:])
        assert suit_keys(swapped) is None and parse_hand(swapped) == hand
    if text:
        assert suit_keys(text + " ") is None and suit_keys(text.upper()) is None
        assert suit_keys(text[:-1] + text[-1] + text[-1]) is None


def test_suit_keys_refuse_what_is_not_canonical_or_not_valid():
    for text in ("m", "1m2m", "12m0p", "5s1m", "11111m", "1 2m", "１m", "123m456x", "1p2p"):
        assert suit_keys(text) is None, text
    assert suit_keys("") == (0, 0, 0, 0)
    assert suit_keys("11111m") is None and parse_hand("11111m").keys is None  # (a fifth copy: the Hand tells)


def spare_tile(counts, waits) -> str:
    """A tile that is none of ``waits`` (tile indices) and that the hand holds fewer than four of: seen
    elsewhere, it changes no answer."""
    spare = [i for i in range(27) if i not in waits and counts[i] < 4]
    assume(spare)  # (always one in practice: the waits and the tiles held four times are few)
    return str(TILES[spare[0]])


# -- ting --------------------------------------------------------------------------------------------------
@settings(max_examples=400)
@given(counts=concealed_counts(13), rules=plain_rulesets)
def test_ting_by_parts_is_the_general_ting(counts, rules):
    text = ref.canonical(counts)
    note(text)
    rules = Ruleset.from_spec(rules)
    hand = parse_hand(text)
    expected = ref.waits(counts, [])
    general = ting(hand, ruleset=rules, visible=spare_tile(counts, expected))
    assert ting(text, ruleset=rules) == ting(hand, ruleset=rules) == general
    assert [w.tile.index for w in general.waits] == expected
    event(f"waits: {min(len(general.waits), 3)}")


# -- discard advice ------------------------------------------------------------------------------------------
@settings(max_examples=400)
@given(counts=concealed_counts(14), rules=plain_rulesets)
def test_discards_by_parts_are_the_general_discards(counts, rules):
    text = ref.canonical(counts)
    note(text)
    rules = Ruleset.from_spec(rules)
    hand = parse_hand(text)
    fast = discards(text, ruleset=rules)
    waits = {w.tile.index for option in fast.options for w in option.waits}
    general = discards(hand, ruleset=rules, visible=spare_tile(counts, waits))
    assert fast == discards(hand, ruleset=rules) == general
    assert general.complete == ref.is_win(counts, [])
    event(f"options: {min(len(general.options), 3)}")
