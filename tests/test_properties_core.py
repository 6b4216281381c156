"""Property tests of the rules core against the brute-force reference (tests/reference.py).

The reference enumerates every decomposition recursively and applies docs/rules.md
literally; the service uses per-suit lookup tables.  They must agree.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import assume, event, given, note
from hypothesis import strategies as st

from service import discards, parse_hand, score, ting, validate
from service.rules.errors import ContradictoryFlags, NotAWin
from service.rules.fan import Win, is_win
from service.rules.hand import Meld
from service.rules.patterns import HAND, REGISTRY, RUNS, SWITCHES
from service.rules.tiles import Tile
from tests import reference as ref

KINDS = ("peng", "direct", "added", "concealed")

# rank pools that make the interesting patterns likely (幺九, 将对, many decompositions)
RANK_STYLES = {
    "any": (tuple(range(9)), tuple(range(7))),
    "yao": ((0, 8), (0, 6)),
    "258": ((1, 4, 7), ()),
    "low": ((0, 1, 2, 3), (0, 1, 2)),
    "mid": ((2, 3, 4, 5, 6), (2, 3, 4)),
    "runs": ((1, 4, 8), (0, 3, 6, 0, 3, 6, 2, 4)),  # 123/456/789 runs, 5s and 2s: 夹心五, 卡二条, 一条龙
}


def to_melds(melds) -> list[Meld]:
    return [Meld(kind, Tile.from_str(ref.tile_name(tile)), k) for kind, tile, k in melds]


def service_hand(counts, melds=(), void=None):
    v = None if void is None else "mps"[void]
    return parse_hand(ref.canonical(counts), melds=to_melds(melds), void=v)


@st.composite
def winning_hands(draw, n_suits=None, melds_allowed=True):
    """A 14-size hand built from sets and a pair (or seven pairs): ``(counts, melds)``.

    Sets are drawn only among those that keep every tile at 4 copies or fewer.
    ``n_suits`` 3 asks for all three suits (a shape that would win but for 缺一门).
    """
    k = n_suits if n_suits is not None else draw(st.sampled_from([1, 2, 2]))
    suits = list(draw(st.permutations([0, 1, 2])))[:k]
    style = draw(st.sampled_from(sorted(RANK_STYLES)))
    if style == "258" and k == 1:
        style = "mid"  # one suit holds at most three triplets of 2/5/8
    trip_ranks, seq_starts = RANK_STYLES[style]
    counts = [0] * 27
    held = [0] * 27
    melds: list[tuple] = []

    def pick(options):
        assume(options)
        return draw(st.sampled_from(options))

    if draw(st.integers(0, 4)) == 0:
        # seven pairs
        for _ in range(7):
            t = pick([s * 9 + r for s in suits for r in range(9) if counts[s * 9 + r] <= 2])
            counts[t] += 2
        held = counts
    else:
        n_melds = draw(st.integers(0, 4)) if melds_allowed else 0
        meld_ranks = trip_ranks if draw(st.integers(0, 3)) else range(9)  # sometimes spoil the style
        for _ in range(n_melds):
            kind = draw(st.sampled_from(KINDS))
            need = 3 if kind == "peng" else 4
            t = pick([s * 9 + r for s in suits for r in meld_ranks if held[s * 9 + r] + need <= 4])
            melds.append(("peng", t, None) if kind == "peng" else ("kong", t, kind))
            held[t] += need
        for _ in range(4 - n_melds):
            sets = [("t", s * 9 + r) for s in suits for r in trip_ranks if held[s * 9 + r] <= 1]
            sets += [
                ("q", s * 9 + r) for s in suits for r in seq_starts if all(held[s * 9 + r + i] < 4 for i in range(3))
            ]
            kind, t = pick(sets)
            for i in (0, 0, 0) if kind == "t" else (0, 1, 2):
                counts[t + i] += 1
                held[t + i] += 1
        t = pick([s * 9 + r for s in suits for r in trip_ranks if held[s * 9 + r] <= 2])
        counts[t] += 2
        held[t] += 2
    assert max(ref.held_counts(counts, melds)) <= 4
    if n_suits is not None:
        assume(len(ref.suits_of(counts, melds)) == n_suits)
    return counts, melds


DISCARD_FLAGS = [
    {}, {"after_kong": True}, {"robbing_kong": True}, {"last_tile": True},
    {"after_kong": True, "last_tile": True}, {"robbing_kong": True, "last_tile": True},
]
SELF_DRAWN_FLAGS = [
    {"self_drawn": True}, {"self_drawn": True, "after_kong": True}, {"self_drawn": True, "last_tile": True},
    {"self_drawn": True, "after_kong": True, "last_tile": True},
]
SPECIAL_FLAGS = [{"heavenly": True, "self_drawn": True}, {"earthly": True, "self_drawn": True}]

rulesets = st.fixed_dictionaries(
    {
        "fan_table": st.sampled_from(["qq", "chengdu"]),
        "scoring": st.sampled_from(["exponential", "linear"]),
        "base": st.integers(1, 10),
        "cap": st.none() | st.integers(1, 10),
        "zimo": st.sampled_from(["none", "base", "fan"]),
        "dajiao": st.sampled_from(["max", "min"]),
        **{name: st.booleans() for name in SWITCHES},  # every pattern switch of the registry
    }
)


@st.composite
def flags_for(draw, melds, rules):
    options = DISCARD_FLAGS + SELF_DRAWN_FLAGS
    if not melds:
        options = options + SPECIAL_FLAGS
        if rules["fan_table"] == "chengdu":
            options = options + [{"earthly": True}]  # 地胡 on the dealer's first discard
    return dict(draw(st.sampled_from(options)))


def concealed_tiles(counts) -> list[int]:
    return [i for i in range(27) for _ in range(counts[i])]


# -- the most valuable one: score == brute force --------------------------------------------------------------
def check_decomposition(dec, counts, melds, base, extras=(), win_tile=None):
    """The reported decomposition uses exactly the hand's tiles and supports its base pattern and run extras."""
    held = ref.held_counts(counts, melds)
    used = Counter()
    groups = []
    for g in dec:
        c = ref.counts_of(g)
        used.update({i: x for i, x in enumerate(c) if x})
        tiles = concealed_tiles(c)
        if len(tiles) == 2:
            assert tiles[0] == tiles[1], g
            groups.append(("pair", tiles[0]))
        elif len(tiles) in (3, 4) and len(set(tiles)) == 1:
            groups.append(("trip", tiles[0]))
        else:
            assert len(tiles) == 3 and tiles[0] // 9 == tiles[2] // 9 and tiles == [tiles[0] + i for i in range(3)], g
            groups.append(("seq", tiles[0]))
    assert dict(used) == {i: x for i, x in enumerate(held) if x}
    kinds = Counter(k for k, _ in groups)
    assert (kinds["pair"], kinds["trip"] + kinds["seq"]) in ((7, 0), (1, 4)), dec
    if base in ("qidui", "longqidui", "qingqidui", "qinglongqidui"):
        assert kinds["pair"] == 7
    if base in ("duiduihu", "qingdui", "jiangdui"):
        assert kinds["seq"] == 0 and kinds["pair"] == 1
    if base in ("daiyaojiu", "qingyaojiu"):
        for k, t in groups:
            assert t % 9 in (0, 8) or (k == "seq" and t % 9 == 6), dec
    runs = {t for k, t in groups if k == "seq"}
    if "yitiaolong" in extras:
        assert any({s * 9, s * 9 + 3, s * 9 + 6} <= runs for s in range(3)), dec
    if "jiaxinwu" in extras:
        assert win_tile - 1 in runs, dec
    if "kaertiao" in extras:
        assert 18 in runs, dec


@given(data=st.data(), hand=winning_hands(), rules=rulesets)
def test_score_matches_brute_force(data, hand, rules):
    counts, melds = hand
    flags = data.draw(flags_for(melds, rules))
    tile = data.draw(st.sampled_from(concealed_tiles(counts)))
    if flags.get("self_drawn") and flags.get("after_kong") and not any(k == "kong" for k, _, _ in melds):
        # §5.1: 杠上花 is a win on one's own kong's replacement tile; with no kong it is bad input
        with pytest.raises(ContradictoryFlags):
            score(service_hand(counts, melds), Win(ref.tile_name(tile), **flags), ruleset=rules)
        return
    want = ref.best_fan(counts, melds, flags, rules, win_tile=tile)
    note(f"{ref.canonical(counts)} {melds} {flags} {rules} → {want}")
    event(f"base {want['base']}")
    event(f"run extras {sorted(want['runs'])}")
    s = score(service_hand(counts, melds), Win(ref.tile_name(tile), **flags), ruleset=rules)
    assert s.patterns[0].id == want["base"]
    assert {p.id: p.fan for p in s.patterns} == want["patterns"]
    assert (s.fan, s.raw_fan, s.capped, s.points) == (want["fan"], want["raw_fan"], want["capped"], want["points"])
    check_decomposition(s.decomposition, counts, melds, want["base"], want["patterns"], tile)


@given(hand=winning_hands(), rules=rulesets, cap=st.integers(1, 12))
def test_fan_never_exceeds_the_cap(hand, rules, cap):
    counts, melds = hand
    tile = ref.tile_name(concealed_tiles(counts)[0])
    uncapped = score(service_hand(counts, melds), tile, ruleset=dict(rules, cap=None))
    s = score(service_hand(counts, melds), tile, ruleset=dict(rules, cap=cap))
    assert s.fan <= cap and s.raw_fan >= s.fan
    assert s.capped == (s.raw_fan > cap)
    assert s.raw_fan == uncapped.raw_fan == uncapped.fan
    assert s.fan == min(uncapped.fan, cap)
    mult = 2 ** (s.fan - 1) if rules["scoring"] == "exponential" else s.fan
    assert (s.multiplier, s.points) == (mult, rules["base"] * mult)


@given(data=st.data(), hand=winning_hands(), rules=rulesets)
def test_fan_does_not_depend_on_tile_order(data, hand, rules):
    counts, melds = hand
    tiles = [ref.tile_name(i) for i in concealed_tiles(counts)]
    shuffled = data.draw(st.permutations(tiles))
    text = " ".join(shuffled) if data.draw(st.booleans()) else "".join(shuffled)
    win = Win(data.draw(st.sampled_from(tiles)))
    a = score(parse_hand(ref.canonical(counts), melds=to_melds(melds)), win, ruleset=rules)
    b = score(parse_hand(text, melds=to_melds(melds)), win, ruleset=rules)
    assert (a.fan, a.raw_fan, a.points, a.patterns) == (b.fan, b.raw_fan, b.points, b.patterns)


@given(hand=winning_hands())
def test_built_hands_are_wins(hand):
    counts, melds = hand
    h = service_hand(counts, melds)
    assert is_win(h)
    v = validate(h)
    assert v.valid and v.complete and not v.huazhu
    assert discards(h).complete


# -- three suits ---------------------------------------------------------------------------------------------
@given(data=st.data(), hand=winning_hands(n_suits=3))
def test_three_suits_never_win_nor_ting(data, hand):
    counts, melds = hand
    h = service_hand(counts, melds)
    assert not is_win(h)
    v = validate(h)
    assert v.huazhu and not v.complete and v.suits == ("m", "p", "s")
    with pytest.raises(NotAWin):
        score(h, ref.tile_name(concealed_tiles(counts)[0]))
    # any 13 that still holds three suits is not ting
    tile = data.draw(st.sampled_from(concealed_tiles(counts)))
    c13 = list(counts)
    c13[tile] -= 1
    assume(len(ref.suits_of(c13, melds)) == 3)
    r = ting(service_hand(c13, melds))
    assert (r.ting, r.huazhu, r.waits, r.dajiao) == (False, True, (), None)


# -- ting ------------------------------------------------------------------------------------------------------
@st.composite
def thirteen_tile_hands(draw):
    """Near-winning hands (a winning 14 minus one tile) and purely random ones."""
    if draw(st.integers(0, 3)):
        counts, melds = draw(winning_hands())
        tile = draw(st.sampled_from(concealed_tiles(counts)))
        counts = list(counts)
        counts[tile] -= 1
    else:
        k = draw(st.sampled_from([1, 2, 3]))
        suits = list(draw(st.permutations([0, 1, 2])))[:k]
        tiles = draw(
            st.lists(st.tuples(st.sampled_from(suits), st.integers(0, 8)), min_size=13, max_size=13)
        )
        counts = [0] * 27
        for s, r in tiles:
            counts[s * 9 + r] += 1
        assume(max(counts) <= 4)
        melds = []
    void = draw(st.none() | st.integers(0, 2))
    return counts, melds, void


@given(hand=thirteen_tile_hands(), rules=rulesets)
def test_waits_match_brute_force(hand, rules):
    counts, melds, void = hand
    note(f"{ref.canonical(counts)} {melds} void={void}")
    r = ting(service_hand(counts, melds, void), ruleset=rules)
    want = ref.waits(counts, melds, void)
    assert [w.tile.index for w in r.waits] == want  # every wait completes the hand, no other tile does
    assert r.ting == bool(want)
    assert r.huazhu == ref.huazhu(counts, melds, void)
    held = ref.held_counts(counts, melds)
    points = []
    for w in r.waits:
        c = list(counts)
        c[w.tile.index] += 1
        exp = ref.best_fan(c, melds, {}, rules, win_tile=w.tile.index, void=void)  # a plain win by discard
        assert {p.id: p.fan for p in w.patterns} == exp["patterns"]
        assert (w.fan, w.raw_fan, w.capped, w.points) == (exp["fan"], exp["raw_fan"], exp["capped"], exp["points"])
        assert w.remaining == 4 - held[w.tile.index]
        points.append(exp["points"])
    if points:
        assert r.dajiao.points == (max(points) if rules["dajiao"] == "max" else min(points))
        assert rules["cap"] is None or r.dajiao.fan <= rules["cap"]
    else:
        assert r.dajiao is None


@st.composite
def fourteen_tile_hands(draw):
    if draw(st.booleans()):
        counts, melds = draw(winning_hands())
        counts = list(counts)
        # swap one concealed tile for a random one: usually not a win any more, often one discard from ting
        out = draw(st.sampled_from(concealed_tiles(counts)))
        counts[out] -= 1
        counts[draw(st.integers(0, 26))] += 1
        assume(max(ref.held_counts(counts, melds)) <= 4)
    else:
        suits = list(draw(st.permutations([0, 1, 2])))[: draw(st.sampled_from([1, 2, 3]))]
        tiles = draw(st.lists(st.tuples(st.sampled_from(suits), st.integers(0, 8)), min_size=14, max_size=14))
        counts = [0] * 27
        for s, r in tiles:
            counts[s * 9 + r] += 1
        assume(max(counts) <= 4)
        melds = []
    return counts, melds


@given(hand=fourteen_tile_hands(), rules=rulesets, void=st.none() | st.integers(0, 2))
def test_discards_match_brute_force(hand, rules, void):
    counts, melds = hand
    note(f"{ref.canonical(counts)} {melds} void={void}")
    adv = discards(service_hand(counts, melds, void), ruleset=rules)
    assert adv.complete == ref.is_win(counts, melds, void)
    held = ref.held_counts(counts, melds)
    want = []
    for d in range(27):
        if not counts[d]:
            continue
        c13 = list(counts)
        c13[d] -= 1
        waits = [t for t in ref.waits(c13, melds, void) if held[t] < 4]  # the discarded copy is seen
        if not waits:
            continue
        pts = []
        for t in waits:
            c = list(c13)
            c[t] += 1
            pts.append(ref.best_fan(c, melds, {}, rules, win_tile=t, void=void)["points"])
        dajiao = max(pts) if rules["dajiao"] == "max" else min(pts)
        want.append((-sum(4 - held[t] for t in waits), -dajiao, d, waits))
    want.sort()
    got = [(-o.remaining, -o.dajiao.points, o.discard.index, [w.tile.index for w in o.waits]) for o in adv.options]
    assert got == want
    for o in adv.options:
        assert o.remaining == sum(w.remaining for w in o.waits)
        assert all(w.remaining == 4 - held[w.tile.index] for w in o.waits)


# -- notation ----------------------------------------------------------------------------------------------------
@st.composite
def written_hands(draw):
    """Random counts written in random notation: groups, marks, case and white space all vary."""
    counts = [0] * 27
    for t in draw(st.lists(st.integers(0, 26), max_size=20)):
        counts[t] = min(4, counts[t] + 1)
    pieces = []  # (suit, ranks) groups
    for s, suit in enumerate("mps"):
        ranks = [str(r + 1) for r in range(9) for _ in range(counts[s * 9 + r])]
        ranks = draw(st.permutations(ranks))
        while ranks:
            n = draw(st.integers(1, len(ranks)))
            pieces.append((suit, "".join(ranks[:n])))
            ranks = ranks[n:]
    pieces = draw(st.permutations(pieces))
    blank = st.text(alphabet=" \t\n\r", max_size=2)
    text = draw(blank)
    for suit, ranks in pieces:
        text += ranks + draw(st.sampled_from(ref.SUIT_MARK_ALIASES[suit])) + draw(blank)
    return counts, text


@given(written=written_hands())
def test_notation_round_trip(written):
    counts, text = written
    h = parse_hand(text)
    assert str(h) == ref.canonical(counts)  # canonical: suits m, p, s; ranks ascending
    again = parse_hand(str(h))
    assert again == h and str(again) == str(h)
    assert parse_hand(str(h).upper()) == h
    assert validate(text).tiles == ref.canonical(counts)


@given(written=written_hands(), data=st.data())
def test_white_space_inside_a_group_is_rejected(written, data):
    counts, text = written
    # put a blank between two ranks of one group (or between ranks and the suit mark)
    spots = [i for i in range(1, len(text)) if text[i - 1] in "123456789" and not text[i].isspace()]
    assume(spots)
    i = data.draw(st.sampled_from(spots))
    with pytest.raises(ValueError):
        parse_hand(text[:i] + data.draw(st.sampled_from([" ", "\t", "\n", "\r"])) + text[i:])


# -- 夹心五, 卡二条, 一条龙 (§5.2) against the brute force, on hands made for them ------------------------------
@st.composite
def run_hands(draw):
    """Winning hands built mostly from 123/456/789 runs, 4-6/1-3 shapes and pairs, often in 条.

    Returns ``(counts, melds, win tile)`` with the winning tile a 5 or a 2s when the hand has one.
    """
    suits = draw(st.sampled_from([[2], [0, 2], [1, 2], [0], [0, 1]]))
    counts = [0] * 27
    held = [0] * 27
    melds: list[tuple] = []
    for _ in range(draw(st.integers(0, 2))):
        t = draw(st.sampled_from([s * 9 + r for s in suits for r in range(9) if held[s * 9 + r] == 0]))
        kind = draw(st.sampled_from(KINDS))
        melds.append(("peng", t, None) if kind == "peng" else ("kong", t, kind))
        held[t] += 3 if kind == "peng" else 4
    starts = [0, 3, 6, 0, 3, 6, 1, 2, 4, 5]
    fixed: list[list[int]] = []
    if len(melds) <= 1 and draw(st.integers(0, 2)) == 0:        # a whole 一条龙
        s = draw(st.sampled_from(suits))
        fixed = [[s * 9 + r, s * 9 + r + 1, s * 9 + r + 2] for r in (0, 3, 6)]
    elif 2 in suits and draw(st.integers(0, 2)) == 0:            # 1-2-3 of 条 (卡二条 when 2s was the only wait)
        fixed = [[18, 19, 20]]
    for n in range(4 - len(melds)):
        s = draw(st.sampled_from(suits))
        if n < len(fixed):
            tiles = fixed[n]
        elif draw(st.integers(0, 4)):
            r = draw(st.sampled_from(starts))
            tiles = [s * 9 + r, s * 9 + r + 1, s * 9 + r + 2]
        else:
            t = s * 9 + draw(st.integers(0, 8))
            tiles = [t, t, t]
        assume(all(held[x] + tiles.count(x) <= 4 for x in tiles))
        for x in tiles:
            counts[x] += 1
            held[x] += 1
    p = draw(st.sampled_from(suits)) * 9 + draw(st.sampled_from([0, 1, 4, 8, 2, 5]))
    assume(held[p] <= 2)
    counts[p] += 2
    concealed = concealed_tiles(counts)
    special = sorted({t for t in concealed if t % 9 == 4 or t == 19})
    tile = draw(st.sampled_from(special)) if special and draw(st.integers(0, 4)) else draw(st.sampled_from(concealed))
    return counts, melds, tile


run_rulesets = st.fixed_dictionaries(
    {
        "fan_table": st.sampled_from(["qq", "chengdu"]),
        "scoring": st.sampled_from(["exponential", "linear"]),
        "base": st.integers(1, 10),
        "cap": st.none() | st.integers(2, 10),
        # the registry's switches of extras reading the sequences (on more often), and of those reading the hand
        **{p.option: st.booleans() | st.just(True) for p in REGISTRY if p.option in SWITCHES and p.reads == RUNS},
        **{p.option: st.booleans() for p in REGISTRY if p.option in SWITCHES and p.reads == HAND},
    }
)


@given(hand=run_hands(), rules=run_rulesets, data=st.data())
def test_run_extras_match_brute_force(hand, rules, data):
    counts, melds, tile = hand
    flags = dict(data.draw(st.sampled_from(DISCARD_FLAGS[:2] + SELF_DRAWN_FLAGS[:1])))
    want = ref.best_fan(counts, melds, flags, rules, win_tile=tile)
    note(f"{ref.canonical(counts)} {melds} win {ref.tile_name(tile)} {flags} {rules} → {want}")
    event(f"run extras {sorted(want['runs'])}")
    s = score(service_hand(counts, melds), Win(ref.tile_name(tile), **flags), ruleset=rules)
    assert {p.id: p.fan for p in s.patterns} == want["patterns"]
    assert (s.fan, s.raw_fan, s.capped, s.points) == (want["fan"], want["raw_fan"], want["capped"], want["points"])
    check_decomposition(s.decomposition, counts, melds, want["base"], want["patterns"], tile)


@given(hand=run_hands(), rules=run_rulesets)
def test_run_extras_count_for_ting_and_dajiao(hand, rules):
    """§5.2: the three depend only on the hand and the tile won, so each wait of §4 is valued with them."""
    counts, melds, tile = hand
    c13 = list(counts)
    c13[tile] -= 1
    r = ting(service_hand(c13, melds), ruleset=rules)
    want = ref.waits(c13, melds)
    assert [w.tile.index for w in r.waits] == want
    for w in r.waits:
        c = list(c13)
        c[w.tile.index] += 1
        exp = ref.best_fan(c, melds, {}, rules, win_tile=w.tile.index)
        event(f"wait run extras {sorted(exp['runs'])}")
        assert {p.id: p.fan for p in w.patterns} == exp["patterns"]
        assert (w.fan, w.points) == (exp["fan"], exp["points"])
