"""Ting (听牌), waits, 大叫 and discard advice (docs/rules.md#s4).

>>> from service.rules.hand import parse_hand
>>> r = ting(parse_hand("1112345678999m"))
>>> r.ting, [str(w.tile) for w in r.waits]
(True, ['1m', '2m', '3m', '4m', '5m', '6m', '7m', '8m', '9m'])
>>> r.dajiao
Dajiao(fan=4, points=48)
>>> best = discards(parse_hand("11122233344456m")).options[0]
>>> str(best.discard), [str(w.tile) for w in best.waits], best.remaining
('2m', ['2m', '3m', '4m', '5m', '6m', '7m'], 13)
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import NamedTuple

from .fan import DISCARD_WIN, NO_MELDS, FanContext, context, discard_value, evaluate, is_win, meld_info, points_of
from .hand import POW5, POW_OF, SUIT_OF, Hand, count_tiles, parse_hand, require_in_play, require_valid, suit_keys
from .patterns import PatternFan
from .ruleset import XUEZHAN, Ruleset
from .shapes import (
    DISCARD_MEMO,
    EVEN_KEYS,
    GEN_SHIFT,
    HAS19,
    INFO_MEMO,
    MEMO_LIMIT,
    NOT258,
    SHAPES,
    TRIP,
    WAITS,
    YAO,
    present_ranks,
    suit_discards,
    suit_info,
    wait_tiles,
)
from .tiles import SUITS, TILES, Tile, parse_tiles

_record = tuple.__new__  # builds a record (a NamedTuple) from all its fields: the hot paths


class Wait(NamedTuple):
    """A tile that completes the hand, valued as a plain win by discard (immutable record)."""

    tile: Tile
    fan: int
    points: int
    patterns: tuple[PatternFan, ...]
    remaining: int
    raw_fan: int
    capped: bool


class Dajiao(NamedTuple):
    """大叫: the highest (or, with ``dajiao = min``, lowest) points over the waits."""

    fan: int
    points: int


@dataclass(frozen=True)
class Ting:
    ting: bool
    huazhu: bool
    waits: tuple[Wait, ...]
    dajiao: Dajiao | None


@dataclass(frozen=True, slots=True)
class DiscardOption:
    discard: Tile
    waits: tuple[Wait, ...]
    remaining: int
    dajiao: Dajiao


@dataclass(frozen=True, slots=True)
class DiscardAdvice:
    options: tuple[DiscardOption, ...]
    complete: bool
    """The 14 tiles already win."""


def _value_waits(keys, n_concealed: int, mi, tiles: list[int], ctx: FanContext, held, vis,
                 only: bool | None = None) -> list[Wait]:
    """Each wait valued as a plain win by discard; ``remaining`` = 4 − held − visible.

    ``only``: whether the hand has a single wait (for 卡二条); default: ``tiles`` is all of them.
    """
    out = []
    k0, k1, k2 = keys
    n = n_concealed + 1
    if ctx.plain:  # no extra but 根 can hold: the value is the hand's facts' (discard_value)
        for t in tiles:
            add = POW_OF[t]
            raw, patterns, fan, points, capped = discard_value(
                k0 + add if t < 9 else k0, k1 + add if 9 <= t < 18 else k1, k2 + add if t >= 18 else k2, n, mi, ctx)
            out.append(_record(Wait, (TILES[t], fan, points, patterns, 4 - held[t] - vis[t], raw, capped)))
        return out
    single = len(tiles) == 1 if only is None else only
    for t in tiles:
        add = POW_OF[t]
        s = SUIT_OF[t]
        _base, raw, patterns, _std, _feats = evaluate(
            k0 + add if s == 0 else k0, k1 + add if s == 1 else k1, k2 + add if s == 2 else k2,
            n, mi, DISCARD_WIN, ctx, t, single)
        fan, _mult, points, capped = points_of(raw, ctx)
        out.append(_record(Wait, (TILES[t], fan, points, patterns, 4 - held[t] - vis[t], raw, capped)))
    return out


def dajiao_of(waits: list[Wait], rules_dajiao: str) -> Dajiao | None:
    """The first wait with the highest points (``dajiao = min``: the lowest), as a :class:`Dajiao`."""
    if not waits:
        return None
    w = waits[0] if len(waits) == 1 else (max if rules_dajiao == "max" else min)(waits, key=_points)
    return _record(Dajiao, (w[1], w[2]))  # (max and min keep the first of equals)


_points = itemgetter(2)      # Wait.points
_remaining = itemgetter(4)   # Wait.remaining


_NO_TILES = (0,) * 27


def dajiao_points(hand: Hand, ctx: FanContext, rules_dajiao: str) -> int | None:
    """大叫 points of a valid 13-size hand (None when it is not ting), as :func:`ting` gives them.

    A function of the hand's value (its concealed tiles, which its suit keys give, its melds and its
    void): memoized per ruleset (bounded), as a draw's hands are settled again (a round re-read,
    corrected, or checked before it is sent).
    """
    key = (hand.keys, hand.melds, hand.void, rules_dajiao)
    memo = ctx.dajiao
    points = memo.get(key, _MISSING)
    if points is _MISSING:
        points = _dajiao_points(hand, ctx, rules_dajiao)
        if len(memo) >= MEMO_LIMIT:  # (a bounded memo: a full one is emptied)
            memo.clear()
        memo[key] = points
    return points


def _dajiao_points(hand: Hand, ctx: FanContext, rules_dajiao: str) -> int | None:
    """:func:`dajiao_points` computed."""
    tiles = wait_tiles(hand.keys, len(hand.tiles), len(hand.melds), hand.held, hand.suit_mask, _void_index(hand))
    if not tiles:
        return None
    mi = meld_info(hand.melds)
    if ctx.plain:  # the points alone, by discard_value (as _value_waits values them)
        k0, k1, k2 = hand.keys
        n = len(hand.tiles) + 1
        points = [discard_value(k0 + POW_OF[t] if t < 9 else k0, k1 + POW_OF[t] if 9 <= t < 18 else k1,
                                k2 + POW_OF[t] if t >= 18 else k2, n, mi, ctx)[3] for t in tiles]
        return max(points) if rules_dajiao == "max" else min(points)
    waits = _value_waits(hand.keys, len(hand.tiles), mi, tiles, ctx, hand.held, _NO_TILES)
    return dajiao_of(waits, rules_dajiao).points


def visible_counts(visible) -> tuple[tuple[int, ...], tuple[Tile, ...]]:
    """``visible`` (None, a hand string or tiles) as counts and as tiles."""
    if not visible:
        return _NO_TILES, ()
    if isinstance(visible, str):
        tiles = tuple(parse_tiles(visible))
    else:
        tiles = tuple(t if isinstance(t, Tile) else Tile.from_str(t) for t in visible)
    return count_tiles(tiles), tiles


def _void_index(hand: Hand) -> int:
    return -1 if hand.void is None else SUITS.index(hand.void)


def ting(hand: Hand | str, *, ruleset: Ruleset | str | None = None, visible=None) -> Ting:
    """Ting of a 13-size hand: each wait with fan, points, patterns and ``remaining``.

    ``visible``: tiles seen elsewhere (a hand string or tiles), for ``remaining``.

    >>> r = ting("1m2m3m 456p 789p 111p 5m", visible="5m5m")
    >>> [(str(w.tile), w.fan, w.points, w.remaining) for w in r.waits]
    [('5m', 1, 6, 1)]
    >>> ting("123m456p789s1122m").ting   # three suits: 花猪, never ting
    False
    >>> t = ting("123m456p789s1122m", ruleset="chengdu-points")   # huazhu 0: no 花猪, just not ting
    >>> t.ting, t.huazhu
    (False, False)
    """
    parts = _concealed(hand)
    if parts is None and not isinstance(hand, Hand):
        hand = parse_hand(hand)
        parts = _concealed(hand)
    rules = XUEZHAN if ruleset is None else Ruleset.from_spec(ruleset)
    ctx = context(rules)
    if parts is not None and parts[3] == 13 and ctx.plain and not visible and (rules.players != 3 or not parts[0]):
        return _ting_by_parts(parts[0], parts[1], parts[2], ctx, rules)
    if not isinstance(hand, Hand):  # (a hand string in canonical suit order, not for the road above)
        hand = parse_hand(hand)
    vis, vis_tiles = visible_counts(visible) if visible else (_NO_TILES, ())
    if hand.size != 13 or hand.max_held > 4 or vis_tiles:
        require_valid(hand, 13, vis_tiles)
    if rules.players == 3:
        require_in_play(hand, 3, vis_tiles)
    return _ting_of_hand(hand, ctx, rules, vis)


def _concealed(hand: Hand | str | object) -> tuple[int, int, int, int] | None:
    """``(k0, k1, k2, n)`` (:func:`~.hand.suit_keys`) of a hand of concealed tiles only, with no 定缺 and
    no count over 4, given as a hand string in canonical suit order or as a :class:`Hand`; else None."""
    if type(hand) is str:
        return suit_keys(hand)
    if isinstance(hand, Hand) and not hand.melds and hand.void is None and hand.keys is not None:
        k0, k1, k2 = hand.keys
        return k0, k1, k2, len(hand.tiles)
    return None


def _ting_of_hand(hand: Hand, ctx: FanContext, rules: Ruleset, vis) -> Ting:
    """:func:`ting` of a valid 13-size hand, any ruleset, melds, 定缺 and visible tiles (counts ``vis``)."""
    tiles = wait_tiles(hand.keys, len(hand.tiles), len(hand.melds), hand.held, hand.suit_mask,
                       -1 if hand.void is None else SUITS.index(hand.void))
    if not tiles:
        return Ting(False, hand.huazhu and rules.huazhu != 0, (), None)  # huazhu 0: no 花猪 (§7.2)
    mi = meld_info(hand.melds) if hand.melds else NO_MELDS
    waits = _value_waits(hand.keys, len(hand.tiles), mi, tiles, ctx, hand.held, vis)
    return Ting(True, False, tuple(waits), dajiao_of(waits, rules.dajiao))


def _ting_by_parts(k0: int, k1: int, k2: int, ctx: FanContext, rules: Ruleset) -> Ting:
    """:func:`ting` of 13 concealed tiles (suit keys ``k0..k2``, no count over 4), no 定缺, nothing
    visible, under a ruleset with no extra but 根 (``ctx.plain``): what :func:`_ting_of_hand` answers.

    A suit's waits need the two other suits complete, and their values depend on those suits' facts
    alone: each suit's waits are one memoized answer (:func:`wait_part`, as discard advice reads
    them), joined in suit order, the 大叫 the first best of the parts'; then the seven pairs' wait (the
    13's one odd count), valued on its own.  Three suits: 花猪, no wait (:func:`~.shapes.wait_tiles`).
    """
    if k0 and k1 and k2:
        return Ting(False, rules.huazhu != 0, (), None)  # huazhu 0: no 花猪 (§7.2)
    c0, w0, o0 = INFO_MEMO.get(k0) or suit_info(k0)
    c1, w1, o1 = INFO_MEMO.get(k1) or suit_info(k1)
    c2, w2, o2 = INFO_MEMO.get(k2) or suit_info(k2)
    highest = rules.dajiao == "max"
    waits = ()
    dajiao = None
    if w0 and c1 and c2:
        part = wait_part(ctx, 0, k0, -1, _facts(k1, k2), k1, k2)
        if part is not None:
            waits = part[0]
            dajiao = part[2] if highest else part[3]
    if w1 and c0 and c2:
        part = wait_part(ctx, 1, k1, -1, _facts(k0, k2), k0, k2)
        if part is not None:
            waits += part[0]
            best = part[2] if highest else part[3]
            if dajiao is None or (best[1] > dajiao[1] if highest else best[1] < dajiao[1]):  # (the first of equals)
                dajiao = best
    if w2 and c0 and c1:
        part = wait_part(ctx, 2, k2, -1, _facts(k0, k1), k0, k1)
        if part is not None:
            waits += part[0]
            best = part[2] if highest else part[3]
            if dajiao is None or (best[1] > dajiao[1] if highest else best[1] < dajiao[1]):
                dajiao = best
    if len(o0) + len(o1) + len(o2) == 1:  # seven pairs: 6 pairs and the one odd count's tile (held 1 or 3)
        t = o0[0] if o0 else 9 + o1[0] if o1 else 18 + o2[0]
        with_pair = _pair_wait(waits, (k0, k1, k2), t, (k0, k1, k2)[t // 9] // POW5[t % 9] % 5, ctx)
        if with_pair is not waits:
            waits = with_pair
            dajiao = dajiao_of(waits, rules.dajiao)
    if not waits:
        return Ting(False, False, (), None)
    return Ting(True, False, waits, dajiao)


def discards(hand: Hand | str, *, ruleset: Ruleset | str | None = None, visible=None) -> DiscardAdvice:
    """Discard advice for a 14-size hand: the discards that leave it ting, best first.

    Best = most tiles remaining, then highest 大叫 points, then canonical tile order.

    >>> adv = discards("11122233345m99p 5s")
    >>> [str(o.discard) for o in adv.options], adv.complete
    (['5s'], False)
    """
    parts = _concealed(hand)
    if parts is None and not isinstance(hand, Hand):
        hand = parse_hand(hand)
        parts = _concealed(hand)
    rules = XUEZHAN if ruleset is None else Ruleset.from_spec(ruleset)
    ctx = context(rules)
    if parts is not None and parts[3] == 14 and ctx.plain and not visible and (rules.players != 3 or not parts[0]):
        return _advice_by_parts(parts[:3], ctx, rules.dajiao == "max")
    if not isinstance(hand, Hand):  # (a hand string in canonical suit order, not for the road above)
        hand = parse_hand(hand)
    vis, vis_tiles = visible_counts(visible) if visible else (_NO_TILES, ())
    if hand.size != 14 or hand.max_held > 4 or vis_tiles:
        require_valid(hand, 14, vis_tiles)
    if rules.players == 3:
        require_in_play(hand, 3, vis_tiles)
    return DiscardAdvice(_options(hand, ctx, vis, rules.dajiao), is_win(hand))


def _options(hand: Hand, ctx: FanContext, vis, rules_dajiao: str) -> tuple[DiscardOption, ...]:
    """The options of a valid 14-size hand, any ruleset, melds, 定缺 and visible tiles (counts ``vis``),
    best first: each candidate discard's 13 through :func:`~.shapes.wait_tiles` and its waits valued."""
    plain = ctx.plain
    highest = rules_dajiao == "max"
    out = []
    keys = hand.keys
    held = hand.held
    n = len(hand.tiles) - 1
    n_melds = len(hand.melds)
    void_suit = _void_index(hand)
    mi = meld_info(hand.melds)
    meld_mask = mi.mask
    n1 = n + 1
    k0, k1, k2 = keys
    for d in _candidates(hand):
        take = POW_OF[d]
        k = (k0 - take, k1, k2) if d < 9 else (k0, k1 - take, k2) if d < 18 else (k0, k1, k2 - take)
        mask = meld_mask | (1 if k[0] else 0) | (2 if k[1] else 0) | (4 if k[2] else 0)
        # held (the discard is seen): a tile held four times, the discard's copy included, is no wait
        tiles = wait_tiles(k, n, n_melds, held, mask, void_suit)
        if not tiles:
            continue
        only = len(tiles) == 1
        if ctx.waits_asked and held[d] == 4:  # an extra asks whether the 13 left have a single wait (§4)
            held13 = list(held)
            held13[d] -= 1
            only = len(wait_tiles(k, n, n_melds, held13, mask, void_suit)) == 1
        if plain:  # the waits, their remaining sum and their 大叫 in one pass (as _value_waits, dajiao_of)
            waits = []
            remaining = 0
            best = None
            for t in tiles:
                add = POW_OF[t]
                raw, patterns, fan, points, capped = discard_value(
                    k[0] + add if t < 9 else k[0], k[1] + add if 9 <= t < 18 else k[1],
                    k[2] + add if t >= 18 else k[2], n1, mi, ctx)
                left = 4 - held[t] - vis[t]
                remaining += left
                if best is None or (points > best if highest else points < best):  # (the first of equals)
                    best, best_fan = points, fan
                waits.append(_record(Wait, (TILES[t], fan, points, patterns, left, raw, capped)))
            dajiao = _record(Dajiao, (best_fan, best))
        else:
            waits = _value_waits(k, n, mi, tiles, ctx, held, vis, only)
            remaining = sum(map(_remaining, waits))
            dajiao = dajiao_of(waits, rules_dajiao)
        out.append(((-remaining, -dajiao[1], d), DiscardOption(TILES[d], tuple(waits), remaining, dajiao)))
    out.sort()  # best first: most remaining, then highest 大叫 points, then tile order (d is unique)
    return tuple([option for _rank, option in out])


_OTHERS = ((1, 2), (0, 2), (0, 1))


def _advice_by_parts(keys: tuple, ctx: FanContext, highest: bool) -> DiscardAdvice:
    """Discard advice for 14 concealed tiles (suit keys ``keys``), no 定缺, nothing visible and a ruleset
    with no extra but 根: what :func:`_options` and :func:`~.fan.is_win` answer.

    The candidates are :func:`_candidates`': per suit, the ranks whose removal leaves the suit with
    waits (when the other two suits decompose) or complete (when another has waits), and the seven
    pairs' ones.  A suit's discards that leave waits in that suit alone are one memoized answer
    (:func:`suit_options`); a discard that leaves the suit complete adds the waits of the other suits
    (:func:`wait_part`), and one that leaves a single odd count the seven pairs' wait
    (:func:`_with_pair_wait`), in suit order.  (With no melds, a suit with no tiles has no waits:
    wait_tiles' 缺一门 rule needs no test here but the 花猪 one.)
    """
    k0, k1, k2 = keys
    infos = (INFO_MEMO.get(k0) or suit_info(k0), INFO_MEMO.get(k1) or suit_info(k1), INFO_MEMO.get(k2) or suit_info(k2))
    odd = len(infos[0][2]) + len(infos[1][2]) + len(infos[2][2])
    three = bool(k0 and k1 and k2)  # (the 13 left are 花猪 unless a suit empties: no wait in the suit emptied)
    # the 14 win (is_win): four sets and a pair, or seven pairs (no odd count), in at most two suits
    complete = not three and (infos[0][0] and infos[1][0] and infos[2][0] or odd == 0 and (
        k0 in EVEN_KEYS and k1 in EVEN_KEYS and k2 in EVEN_KEYS))
    out = []
    for s in range(3):
        ks = keys[s]
        if not ks:
            continue
        y, z = _OTHERS[s]
        cy, wy, _oy = infos[y]
        cz, wz, _oz = infos[z]
        waiting, whole = DISCARD_MEMO.get(ks) or suit_discards(ks)
        own = (suit_options(ctx, s, ks, keys[y], keys[z], highest)
               if waiting and cy and cz and not three else ())
        across = whole and (wy and cz or wz and cy)
        # seven pairs: 13 with one odd count wait on it (no odd count in the 14: any discard; two: theirs)
        pair_ranks = infos[s][2] if odd == 2 else present_ranks(ks) if odd == 0 else ()
        if not (across or pair_ranks):
            if own:
                out += own
            continue
        mixed = set(pair_ranks)
        if across:
            mixed.update(whole)
        by_rank = {}
        for ranked in own:
            r = ranked[0][2] - 9 * s
            if r in mixed:
                by_rank[r] = ranked
            else:
                out.append(ranked)
        for r in mixed:
            rest = ks - POW5[r]
            if three and rest:
                continue
            own_r = by_rank.get(r)
            part_y = part_z = None
            if across and rest in SHAPES:
                ky = keys[y]
                kz = keys[z]
                if own_r is None and r not in pair_ranks and not (wy and cz and wz and cy):
                    # the waits of one other suit alone: its part's, as they are
                    ranked = (across_option(ctx, y, ky, _facts(rest, kz), rest, kz, 9 * s + r, highest) if wy and cz
                              else across_option(ctx, z, kz, _facts(rest, ky), rest, ky, 9 * s + r, highest))
                    if ranked is not None:
                        out.append(ranked)
                    continue
                if wy and cz:
                    part_y = wait_part(ctx, y, ky, -1, _facts(rest, kz), rest, kz)
                if wz and cy:
                    part_z = wait_part(ctx, z, kz, -1, _facts(rest, ky), rest, ky)
            if r in pair_ranks:
                if own_r is None and part_y is None and part_z is None:  # the seven pairs' wait alone
                    d = 9 * s + r
                    ranked = _pair_option(keys, d, d if odd == 0 else _other_odd(infos, d), ctx)
                    if ranked is not None:
                        out.append(ranked)
                    continue
            else:
                if part_y is None and part_z is None:
                    if own_r is not None:
                        out.append(own_r)
                    continue
                if own_r is None and (part_y is None or part_z is None):  # the waits of one other suit, as they are
                    d = 9 * s + r
                    waits, remaining, hi, lo = part_z if part_y is None else part_y
                    dajiao = hi if highest else lo
                    out.append(((-remaining, -dajiao[1], d), DiscardOption(TILES[d], waits, remaining, dajiao)))
                    continue
            parts = [None if part_y is None else part_y[0], None if part_z is None else part_z[0]]
            parts.insert(s, None if own_r is None else own_r[1].waits)  # (suit order)
            waits = ()
            for found in parts:
                if found is not None:
                    waits += found
            d = 9 * s + r
            if r in pair_ranks:  # the 13's one odd count: the discard's (none in the 14) or the other one
                waits = _with_pair_wait(waits, keys, d, d if odd == 0 else _other_odd(infos, d), ctx)
            if waits:
                out.append(_ranked_option(d, waits, highest))
    if not out:
        return DiscardAdvice((), complete)
    if len(out) == 1:
        return DiscardAdvice((out[0][1],), complete)
    out.sort()  # best first: most remaining, then highest 大叫 points, then tile order (d is unique)
    return DiscardAdvice(tuple(map(_option, out)), complete)


_option = itemgetter(1)  # (rank, option) -> option


def _pair_option(keys: tuple, d: int, t: int, ctx: FanContext) -> tuple | None:
    """``(rank, option)`` of discarding tile ``d`` from 14 concealed tiles (keys ``keys``) when the 13 left
    have seven pairs' wait ``t`` (their one odd count) and no other: as :func:`_with_pair_wait` and
    :func:`_ranked_option` make it from no wait (None: all four copies of ``t`` held)."""
    held = keys[t // 9] // POW5[t % 9] % 5  # (the 14's copies)
    if held >= 4:
        return None
    k = list(keys)
    k[d // 9] -= POW5[d % 9]
    k[t // 9] += POW5[t % 9]
    raw, patterns, fan, points, capped = discard_value(k[0], k[1], k[2], 14, NO_MELDS, ctx)
    left = 4 - held
    wait = _record(Wait, (TILES[t], fan, points, patterns, left, raw, capped))
    return (-left, -points, d), DiscardOption(TILES[d], (wait,), left, _record(Dajiao, (fan, points)))


def _other_odd(infos: tuple, d: int) -> int:
    """Of the two tiles held an odd number of times (``infos``: the suits' :func:`~.shapes.suit_info`),
    the one that is not ``d``."""
    odd = [9 * x + o for x in range(3) for o in infos[x][2]]
    return odd[odd[0] == d]


def across_option(ctx: FanContext, x: int, kx: int, facts: int, ky: int, kz: int, d: int,
                  highest: bool) -> tuple | None:
    """``(rank, option)`` of discarding tile ``d`` (from suit ``y`` or ``z``) when the 13 left have waits in
    suit ``x`` alone, its key ``kx`` and the two other suits (keys ``ky``, ``kz``, ``facts``:
    ``_facts(ky, kz)``) complete: the waits of :func:`wait_part` as they are (None: no wait).

    A function of ``(x, kx, facts, d, highest)``: memoized per ruleset (bounded), the options shared.
    """
    key = ((((kx * 512 + facts) * 4 + x) * 32 + d) * 2) + highest
    memo = ctx.across_options
    found = memo.get(key, _MISSING)
    if found is _MISSING:
        part = wait_part(ctx, x, kx, -1, facts, ky, kz)
        if part is None:
            found = None
        else:
            waits, remaining, hi, lo = part
            dajiao = hi if highest else lo
            found = ((-remaining, -dajiao[1], d), DiscardOption(TILES[d], waits, remaining, dajiao))
        if len(memo) >= MEMO_LIMIT:  # (a bounded memo: a full one is emptied)
            memo.clear()
        memo[key] = found
    return found


def suit_options(ctx: FanContext, s: int, ks: int, ky: int, kz: int, highest: bool) -> tuple:
    """``(rank, option)`` (as :func:`_options` ranks them) of each discard from suit ``s`` (key ``ks`` of
    the 14) whose 13 have waits in suit ``s``, the two other suits (keys ``ky``, ``kz``) complete: the
    waits of that suit alone (:func:`wait_part`), for each rank whose removal leaves the suit with waits.

    The answer is a function of ``(s, ks, _facts(ky, kz), highest)``, as a part's: memoized per ruleset
    (bounded).  The options are immutable: shared by the answers that list them.
    """
    facts = _facts(ky, kz)
    key = ((ks * 512 + facts) * 4 + s) * 2 + highest
    memo = ctx.suit_options
    found = memo.get(key)
    if found is None:
        out = []
        base = 9 * s
        for r in (DISCARD_MEMO.get(ks) or suit_discards(ks))[0]:
            part = wait_part(ctx, s, ks - POW5[r], r, facts, ky, kz)
            if part is not None:
                waits, remaining, hi, lo = part
                dajiao = hi if highest else lo
                out.append(((-remaining, -dajiao[1], base + r),
                            DiscardOption(TILES[base + r], waits, remaining, dajiao)))
        found = tuple(out)
        if len(memo) >= MEMO_LIMIT:  # (a bounded memo: a full one is emptied)
            memo.clear()
        memo[key] = found
    return found


_FACTS = TRIP | YAO
_TILE_FACTS = HAS19 | NOT258


def _facts(ky: int, kz: int) -> int:
    """What the value of a wait in a third suit depends on, of two complete suits (keys ``ky``, ``kz``):
    their joint shape facts, their tile facts, their 根, whether both are empty, whether both are even."""
    fy = SHAPES[ky]
    fz = SHAPES[kz]
    return ((fy & fz & _FACTS) | ((fy | fz) & _TILE_FACTS) | ((fy >> GEN_SHIFT) + (fz >> GEN_SHIFT)) << 4
            | (0 if ky or kz else 128) | (256 if ky in EVEN_KEYS and kz in EVEN_KEYS else 0))


def _with_pair_wait(waits: tuple, keys: tuple, d: int, t: int, ctx: FanContext) -> tuple:
    """``waits`` of the 13 left by discarding tile ``d`` from 14 (keys ``keys``), with seven pairs' wait
    ``t`` (the 13's one odd count) added as :func:`_pair_wait` adds it (held: the 14's copies)."""
    k13 = list(keys)
    k13[d // 9] -= POW5[d % 9]
    return _pair_wait(waits, k13, t, keys[t // 9] // POW5[t % 9] % 5, ctx)


def _pair_wait(waits: tuple, k13, t: int, held: int, ctx: FanContext) -> tuple:
    """``waits`` of 13 concealed tiles (keys ``k13``) with seven pairs' wait ``t`` (their one odd count)
    added unless all four copies are held (``held``: the copies counted as seen) or it is a wait
    already, in tile order: the same tuple when nothing is added."""
    if held >= 4:
        return waits
    for w in waits:
        if w[0].index == t:
            return waits
    s = t // 9
    add = POW5[t % 9]
    raw, patterns, fan, points, capped = discard_value(
        k13[0] + add if s == 0 else k13[0], k13[1] + add if s == 1 else k13[1], k13[2] + add if s == 2 else k13[2],
        14, NO_MELDS, ctx)
    wait = _record(Wait, (TILES[t], fan, points, patterns, 4 - held, raw, capped))
    return tuple(sorted(waits + (wait,), key=_tile_index)) if waits else (wait,)


def _tile_index(wait: Wait) -> int:
    return wait[0].index


def _ranked_option(d: int, waits: tuple, highest: bool) -> tuple:
    """``(rank, option)`` of discarding tile ``d`` with these waits: the first best 大叫 (as dajiao_of)."""
    remaining = 0
    best = None
    for w in waits:
        remaining += w[4]
        if best is None or (w[2] > best[2] if highest else w[2] < best[2]):
            best = w
    dajiao = _record(Dajiao, (best[1], best[2]))
    return (-remaining, -best[2], d), DiscardOption(TILES[d], waits, remaining, dajiao)


_MISSING = object()


def wait_part(ctx: FanContext, x: int, kx: int, dr: int, facts: int, ky: int, kz: int) -> tuple | None:
    """``(waits, remaining, highest 大叫, lowest 大叫)`` of the waits in suit ``x`` of 13 concealed
    tiles whose two other suits (keys ``ky``, ``kz``) are complete, for a ruleset with no extra but 根
    (None: no wait, every one held four times).

    ``kx``: suit ``x``'s key of the 13; ``dr``: the rank discarded from suit ``x`` (-1: from another
    suit), so that suit ``x`` of the 14 held is ``kx`` plus ``dr``; ``facts``: ``_facts(ky, kz)``.
    The answer is a function of ``(x, kx, dr, facts)`` (a wait's value, :func:`~.fan.discard_value`,
    depends on the suits' facts alone, whatever their order): memoized per ruleset (bounded).  The
    records are immutable: shared by the answers that list them.
    """
    key = ((kx * 16 + dr + 1) * 512 + facts) * 4 + x
    memo = ctx.wait_parts
    part = memo.get(key, _MISSING)
    if part is _MISSING:
        waits = []
        remaining = 0
        hi = lo = None
        base = 9 * x
        for w in WAITS[kx]:
            held = kx // POW5[w] % 5 + (1 if w == dr else 0)  # (held: the 14's copies, the discard's included)
            if held >= 4:
                continue
            raw, patterns, fan, points, capped = discard_value(kx + POW5[w], ky, kz, 14, NO_MELDS, ctx)
            left = 4 - held
            remaining += left
            wait = _record(Wait, (TILES[base + w], fan, points, patterns, left, raw, capped))
            if hi is None or points > hi[2]:  # (the first of equals)
                hi = wait
            if lo is None or points < lo[2]:
                lo = wait
            waits.append(wait)
        part = (tuple(waits), remaining, _record(Dajiao, (hi[1], hi[2])), _record(Dajiao, (lo[1], lo[2]))) \
            if waits else None
        if len(memo) >= MEMO_LIMIT:  # (a bounded memo: a full one is emptied)
            memo.clear()
        memo[key] = part
    return part


def _candidates(hand: Hand) -> list[int]:
    """The discards that may leave the hand with waits (a superset of those that do), in tile order.

    Discard search per suit: only the discarded tile's suit changes, so a discard from one suit
    can leave waits in that suit only when the other suits decompose, and waits in another suit
    only when what its suit keeps decomposes (:func:`~.shapes.suit_discards` lists those ranks of
    a suit key); seven pairs need exactly one odd count among the 13 left.
    """
    k0, k1, k2 = hand.keys
    c0, w0, o0 = INFO_MEMO.get(k0) or suit_info(k0)
    c1, w1, o1 = INFO_MEMO.get(k1) or suit_info(k1)
    c2, w2, o2 = INFO_MEMO.get(k2) or suit_info(k2)
    found: list[int] = []
    if k0:
        waiting, whole = DISCARD_MEMO.get(k0) or suit_discards(k0)
        if c1 and c2:
            found += waiting
        if whole and (w1 and c2 or w2 and c1):
            found += whole
    if k1:
        waiting, whole = DISCARD_MEMO.get(k1) or suit_discards(k1)
        if c0 and c2 and waiting:
            found += [9 + r for r in waiting]
        if whole and (w0 and c2 or w2 and c0):
            found += [9 + r for r in whole]
    if k2:
        waiting, whole = DISCARD_MEMO.get(k2) or suit_discards(k2)
        if c0 and c1 and waiting:
            found += [18 + r for r in waiting]
        if whole and (w0 and c1 or w1 and c0):
            found += [18 + r for r in whole]
    if not hand.melds and len(hand.tiles) == 14:
        odd = len(o0) + len(o1) + len(o2)
        if odd == 2:
            found += o0
            found += [9 + r for r in o1]
            found += [18 + r for r in o2]
        elif not odd:
            counts = hand.counts
            found += [t for t in range(27) if counts[t]]
    return sorted(set(found))
