"""Scoring a winning hand (docs/rules.md#s5): best base pattern, extras, cap, points.

The patterns themselves are the registry's (:mod:`.patterns`); this module finds
which hold.  The readings where the rules are silent are docs/rules.md's own:
the extras' in docs/rules.md#s5.2 ("Readings"), ``dianpao_pinghu``'s in
docs/rules.md#s4 and #s9, three players' bad input in docs/rules.md#s14.1.

>>> from service.rules.hand import parse_hand
>>> s = score(parse_hand("11333222456999s"), "4s")
>>> s.fan, s.points, [p.id for p in s.patterns]
(3, 24, ['qingyise'])
>>> s = score(parse_hand("11222244p557799m"), "9m")
>>> s.fan, s.points, [p.id for p in s.patterns]
(5, 96, ['longqidui'])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from itertools import product
from typing import NamedTuple

from .errors import ContradictoryFlags, DianpaoPinghu, NotAWin, WinTileNotInHand
from .hand import POW5, Hand, Meld, require_in_play, require_valid
from .patterns import (
    BASE_ORDER,
    COUNTED,
    EARTHLY,
    EXTRA_ORDER,
    FACT_BITS,
    FLUSH,
    FOUR,
    HAND,
    HEAVENLY,
    ONLY258,
    PAIRS,
    PATTERNS,
    RUNS,
    STANDARD,
    TERMINALS,
    TRIPLETS,
    PatternFan,
    WinFacts,
    base_candidates,
    extras_on,
    pattern_fan,
)
from .ruleset import XUEZHAN, Ruleset
from .shapes import (
    DECOMPOSITIONS,
    EVEN_KEYS,
    F_TRIP,
    F_YAO,
    GEN_SHIFT,
    MEMO_LIMIT,
    NOT258,
    SHAPES,
    TRIP,
    YAO,
    describe_pairs,
    notate,
    suit_features,
    suit_flags,
    waits_without,
)
from .tiles import SUITS, TILES, Tile

_BASE_INDEX = {pid: i for i, pid in enumerate(BASE_ORDER)}
# the decomposition reported for a base pattern (decomposition()): pairs, all triplets, or 幺九 in every set
_PAIR_BASES = frozenset(pid for pid in BASE_ORDER if PATTERNS[pid].requires & PAIRS)
_TRIP_BASES = frozenset(pid for pid in BASE_ORDER if PATTERNS[pid].requires & TRIPLETS)
_YAO_BASES = frozenset(pid for pid in BASE_ORDER if PATTERNS[pid].requires & TERMINALS)


# -- the situation of a win ------------------------------------------------
@dataclass(frozen=True)
class Win:
    """How a hand won: the winning tile and the situational flags of §5.1.

    Flags that contradict each other raise :class:`ContradictoryFlags`.

    >>> Win("5p", self_drawn=True, after_kong=True).tile
    Tile('5p')
    >>> Win("5p", robbing_kong=True, self_drawn=True)
    Traceback (most recent call last):
    ...
    service.rules.errors.ContradictoryFlags: robbing_kong is a win on another player's tile; it cannot be self_drawn
    """

    tile: Tile
    self_drawn: bool = False
    after_kong: bool = False
    robbing_kong: bool = False
    last_tile: bool = False
    heavenly: bool = False
    earthly: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.tile, Tile):
            object.__setattr__(self, "tile", Tile.from_str(self.tile))
        for name in ("self_drawn", "after_kong", "robbing_kong", "last_tile", "heavenly", "earthly"):
            if not isinstance(getattr(self, name), bool):
                raise ContradictoryFlags(f"flag {name} must be true or false", text=name)
        # Only the table-independent rules here: earthly by discard is legal under
        # the chengdu table (docs/rules.md#s5.1, §9); score() re-checks with the real table.
        problem = self.contradiction("chengdu")
        if problem:
            raise ContradictoryFlags(problem)
        object.__setattr__(self, "flags", (self.self_drawn, self.after_kong, self.robbing_kong,
                                           self.last_tile, self.heavenly, self.earthly))

    flags: tuple = field(init=False, repr=False, compare=False, default=())
    """``(self_drawn, after_kong, robbing_kong, last_tile, heavenly, earthly)``."""

    def contradiction(self, fan_table: str = "qq") -> str | None:
        """Why the flags cannot all hold, or None."""
        if self.robbing_kong and self.self_drawn:
            return "robbing_kong is a win on another player's tile; it cannot be self_drawn"
        if self.robbing_kong and self.after_kong:
            return "a win by discard may carry after_kong or robbing_kong, not both"
        if self.heavenly and self.earthly:
            return "heavenly and earthly cannot both hold"
        special = "heavenly" if self.heavenly else "earthly" if self.earthly else None
        if special:
            if self.after_kong or self.robbing_kong or self.last_tile:
                return f"{special} carries no other flag"
            if self.heavenly and not self.self_drawn:
                return "heavenly is the dealer's self-drawn initial hand (self_drawn must be true)"
            if self.earthly and not self.self_drawn and fan_table != "chengdu":
                return "earthly is a self-drawn win (by discard only under the chengdu fan table)"
        return None


DISCARD_WIN = (False, False, False, False, False, False)
"""Situation flags of a plain win by discard (the ting/大叫 valuation)."""


# -- per-ruleset constants ---------------------------------------------------
class FanContext(NamedTuple):
    """What scoring needs of a ruleset, derived once from it and the pattern registry (:func:`context`)."""

    table: str
    base_fans: dict
    extra_fans: dict
    cap: int | None
    exponential: bool
    base: int
    best: list  # fact mask -> (base id, base fan, uses a set of four); filled lazily
    single: dict  # base id -> (PatternFan,)
    points: tuple  # raw fan -> (fan, multiplier, points, capped), for the raw fans a hand can reach
    extras: tuple  # the extras the ruleset counts but 根 (patterns.Pattern), in §5.2's order
    by_sit: dict  # situation flags -> whether an extra reading only them holds (for every combination)
    hand: bool  # an extra reading the hand (not only the situation) is on: every win lists its extras
    run_extras: tuple  # the extras on that read the decomposition's sequences
    runs: bool  # any run_extras: a standard hand's decompositions are compared (§3)
    asks_wait: tuple  # per winning tile: whether an extra on reads "the hand's only wait" (only_wait)
    waits_asked: bool  # any(asks_wait)
    plain: bool  # no extra but 根 can hold for a plain win by discard: a wait's value is discard_value's
    by_discard: dict  # (facts mask, 根 count) -> a plain win by discard's value; filled lazily
    wait_parts: dict  # discard advice's waits within one suit (ting.wait_part); filled lazily, bounded
    suit_options: dict  # discard advice's options within one suit (ting.suit_options); filled lazily, bounded
    across_options: dict  # discard advice's options with waits in another suit (ting.across_option); the same
    dajiao: dict  # a 13-size hand's 大叫 points (ting.dajiao_points) by the hand's value; filled lazily, bounded
    wins: dict  # a 14-size hand's win (hand_win) by the hand's value, the tile and the situation; the same


_SITUATIONS = tuple(product((False, True), repeat=6))


@lru_cache(maxsize=64)
def context(rules: Ruleset, without: str | None = None) -> FanContext:
    """Constants derived from a ruleset and the pattern registry, one per ruleset (``without``: the
    extra of that id left out, as :mod:`.settle` leaves 自摸加番 out of a win the kong's feeder pays)."""
    table = rules.fan_table
    base_fans = {pid: PATTERNS[pid].fan(table) for pid in BASE_ORDER}
    extra_fans = {pid: PATTERNS[pid].fan(table) for pid in EXTRA_ORDER}
    extras = tuple(p for p in extras_on(rules) if p.reads != COUNTED and p.id != without)
    sit_extras = [p for p in extras if p.reads not in (HAND, RUNS)]
    by_sit = {sit: any(p.test(WinFacts(*sit)) for p in sit_extras) for sit in _SITUATIONS}
    hand = any(p.reads in (HAND, RUNS) for p in extras)
    run_extras = tuple(p for p in extras if p.reads == RUNS)
    asks_wait = tuple(any(p.asks_wait is not None and p.asks_wait(t) for p in extras) for t in range(27))
    ctx = FanContext(
        table=table,
        base_fans=base_fans,
        extra_fans=extra_fans,
        cap=rules.cap,
        exponential=rules.scoring == "exponential",
        base=rules.base,
        best=[None] * (1 << FACT_BITS),
        single={pid: (pattern_fan(pid, f),) for pid, f in base_fans.items() if f},
        points=(),
        extras=extras,
        by_sit=by_sit,
        hand=hand,
        run_extras=run_extras,
        runs=bool(run_extras),
        asks_wait=asks_wait,
        waits_asked=any(asks_wait),
        plain=not (hand or by_sit[DISCARD_WIN]),
        by_discard={},
        wait_parts={},
        suit_options={},
        across_options={},
        dajiao={},
        wins={},
    )
    return ctx._replace(points=tuple(_points(raw, ctx) for raw in range(_MAX_RAW_FAN + 1)))


# -- melds ---------------------------------------------------------------
class MeldInfo(NamedTuple):
    n: int
    mask: int
    yao: bool  # every meld's tile is a 1 or a 9
    has19: bool
    not258: bool
    kongs: int
    peng_tiles: tuple[int, ...]
    concealed_only: bool


NO_MELDS = MeldInfo(0, 0, True, False, False, 0, (), True)


def meld_info(melds: tuple[Meld, ...]) -> MeldInfo:
    if not melds:
        return NO_MELDS
    mask = kongs = 0
    yao = concealed_only = True
    has19 = not258 = False
    pengs = []
    for m in melds:
        tile = m.tile
        rank = tile.rank
        mask |= 1 << tile.index // 9
        if rank == 1 or rank == 9:
            has19 = True
        else:
            yao = False
        if rank != 2 and rank != 5 and rank != 8:
            not258 = True
        if m.type == "kong":
            kongs += 1
        else:
            pengs.append(tile.index)
        if m.kind != "concealed":
            concealed_only = False
    return _record(MeldInfo, (len(melds), mask, yao, has19, not258, kongs, tuple(pengs), concealed_only))


# -- evaluation --------------------------------------------------------------
# Which base patterns a hand qualifies for is a function of a few facts; the
# best of them (§3's tie-break included) is looked up per ruleset by this mask.
_QING, _STD, _TRIP, _YAO, _J258, _PAIRS, _HAS4, _TIAN, _DI = (
    FLUSH, STANDARD, TRIPLETS, TERMINALS, ONLY258, PAIRS, FOUR, HEAVENLY, EARTHLY)


def _best_base(ctx: FanContext, mask: int) -> tuple[str, int, bool]:
    """The base pattern of a hand with the shape facts ``mask``: the best of the registry's base patterns
    it qualifies for (§3's tie-break: the higher fan net of a 根 it uses, the higher fan, §5.1's order)."""
    bf = ctx.base_fans
    gen_fan = ctx.extra_fans["gen"]

    def rank(p) -> tuple[int, int, int]:
        return (bf[p.id] - (gen_fan if p.takes_gen else 0), bf[p.id], -_BASE_INDEX[p.id])

    best = max(base_candidates(mask, ctx.table), key=rank)
    out = (best.id, bf[best.id], best.takes_gen)
    ctx.best[mask] = out
    return out


class Evaluation(NamedTuple):
    base: str
    raw_fan: int
    patterns: tuple[PatternFan, ...]
    standard: bool
    features: tuple[int, int, int] | None = None
    """Per suit, the feature set of the decomposition scored, when a run extra (夹心五, 卡二条,
    一条龙) chose it; None: any decomposition with the base pattern will do."""


_record = tuple.__new__
"""Builds a record (a NamedTuple) from all its fields without its Python-level ``__new__``: the hot paths."""


def evaluate(k0: int, k1: int, k2: int, n_concealed: int, mi: MeldInfo, sit: tuple, ctx: FanContext,
             tile: int = -1, only_wait: bool = False) -> Evaluation | None:
    """Best base pattern, total fan and patterns of a complete hand, or None if it does not win.

    ``k0..k2``: the suit keys of the concealed tiles; ``sit``: the flags
    ``(self_drawn, after_kong, robbing_kong, last_tile, heavenly, earthly)``;
    ``tile``: the winning tile's index and ``only_wait``: whether it was the
    hand's only wait (both only for 夹心五 and 卡二条).  Suit rules (缺一门,
    定缺) are the caller's.
    """
    f0 = SHAPES.get(k0)
    f1 = SHAPES.get(k1)
    f2 = SHAPES.get(k2)
    standard = f0 is not None and f1 is not None and f2 is not None
    pairs = mi.n == 0 and n_concealed == 14 and k0 in EVEN_KEYS and k1 in EVEN_KEYS and k2 in EVEN_KEYS
    if standard:
        mask = _STD
        allf = f0 & f1 & f2
        if allf & TRIP:
            mask |= _TRIP
        if allf & YAO and mi.yao:
            mask |= _YAO
    elif pairs:
        mask = 0
        f0, f1, f2 = suit_flags(k0), suit_flags(k1), suit_flags(k2)
    else:
        return None
    anyf = f0 | f1 | f2
    suits = mi.mask | (1 if k0 else 0) | (2 if k1 else 0) | (4 if k2 else 0)
    if suits == 1 or suits == 2 or suits == 4:
        mask |= _QING
    if not (anyf & NOT258 or mi.not258):
        mask |= _J258
    gen4 = (f0 >> GEN_SHIFT) + (f1 >> GEN_SHIFT) + (f2 >> GEN_SHIFT)
    if pairs:
        mask |= _PAIRS | (_HAS4 if gen4 else 0)
    if sit[4]:  # heavenly
        mask |= _TIAN
    if sit[5]:  # earthly
        mask |= _DI
    if standard and ctx.runs:
        return _evaluate_runs((k0, k1, k2), mask, gen4, anyf, mi, sit, ctx, tile, only_wait)
    best = ctx.best[mask] or _best_base(ctx, mask)
    base, fan, dragon = best
    gens = gen4 + mi.kongs - (1 if dragon else 0)
    for t in mi.peng_tiles:
        if (k0, k1, k2)[t // 9] // POW5[t % 9] % 5 == 1:
            gens += 1
    extras = ctx.hand or ctx.by_sit[sit]
    if not (gens or extras):
        return _record(Evaluation, (base, fan, ctx.single[base], standard, None))
    if not extras:  # 根 alone: the common case with kongs
        gen = pattern_fan("gen", ctx.extra_fans["gen"] * gens, gens)
        return _record(Evaluation, (base, fan + gen.fan, ctx.single[base] + (gen,) if gen.fan else ctx.single[base],
                                    standard, None))
    pats = _patterns(base, gens, _facts(sit, (k0, k1, k2), anyf, mi, tile, only_wait), ctx)
    return _record(Evaluation, (base, sum(p.fan for p in pats), tuple(pats), standard, None))


_MISSING = object()


def hand_win(hand: Hand, tile: int, sit: tuple, ctx: FanContext) -> tuple[int, tuple[str, ...]] | None:
    """``(raw fan, pattern ids)`` of a valid 14-size hand (no count over 4) won on ``tile`` (one of its
    concealed tiles) in the situation ``sit`` (:func:`evaluate`'s flags), or None when it is not a
    winning shape; suit rules (缺一门, 定缺) are the caller's.

    :func:`evaluate` of the hand (with :func:`only_wait` where an extra asks it), a function of the
    hand's value (its concealed tiles, which its suit keys give, its melds and its void), the tile and
    the situation: memoized per ruleset (bounded), as a round's wins are settled again (a round
    re-read, corrected, or checked before it is sent), as :func:`.ting.dajiao_points` is.
    """
    key = (hand.keys, hand.melds, hand.void, tile, sit)
    memo = ctx.wins
    value = memo.get(key, _MISSING)
    if value is _MISSING:
        k0, k1, k2 = hand.keys  # (a valid hand: no count over 4)
        evn = evaluate(k0, k1, k2, len(hand.tiles), meld_info(hand.melds), sit, ctx, tile,
                       ctx.asks_wait[tile] and only_wait(hand, tile))
        value = None if evn is None else (evn.raw_fan, tuple([p.id for p in evn.patterns]))
        if len(memo) >= MEMO_LIMIT:  # (a bounded memo: a full one is emptied)
            memo.clear()
        memo[key] = value
    return value


def discard_value(k0: int, k1: int, k2: int, n_concealed: int, mi: MeldInfo, ctx: FanContext) -> tuple | None:
    """``(raw_fan, patterns, fan, points, capped)`` of a complete hand won as a plain discard (the
    valuation of a wait, §4), or None if it does not win: :func:`evaluate` and :func:`points_of`
    by a shorter road, for rulesets where no extra but 根 can hold for such a win (``ctx.plain``).

    The value is a function of the hand's facts (the mask of :func:`evaluate` and its 根 count),
    looked up per ruleset once computed.
    """
    f0 = SHAPES.get(k0)
    f1 = SHAPES.get(k1)
    f2 = SHAPES.get(k2)
    pairs = mi.n == 0 and n_concealed == 14 and k0 in EVEN_KEYS and k1 in EVEN_KEYS and k2 in EVEN_KEYS
    if f0 is not None and f1 is not None and f2 is not None:
        allf = f0 & f1 & f2
        mask = _STD | (_TRIP if allf & TRIP else 0) | (_YAO if allf & YAO and mi.yao else 0)
    elif pairs:
        mask = 0
        f0, f1, f2 = suit_flags(k0), suit_flags(k1), suit_flags(k2)
    else:
        return None
    suits = mi.mask | (1 if k0 else 0) | (2 if k1 else 0) | (4 if k2 else 0)
    if suits == 1 or suits == 2 or suits == 4:
        mask |= _QING
    if not ((f0 | f1 | f2) & NOT258 or mi.not258):
        mask |= _J258
    gens = (f0 >> GEN_SHIFT) + (f1 >> GEN_SHIFT) + (f2 >> GEN_SHIFT)
    if pairs:
        mask |= _PAIRS | (_HAS4 if gens else 0)
    if mi.n:
        gens += mi.kongs
        for t in mi.peng_tiles:
            if (k0, k1, k2)[t // 9] // POW5[t % 9] % 5 == 1:
                gens += 1
    key = mask | gens << FACT_BITS
    value = ctx.by_discard.get(key)
    if value is None:
        base, raw, dragon = ctx.best[mask] or _best_base(ctx, mask)
        gens -= 1 if dragon else 0
        patterns = ctx.single[base]
        if gens:
            gen = pattern_fan("gen", ctx.extra_fans["gen"] * gens, gens)
            if gen.fan:
                raw += gen.fan
                patterns = patterns + (gen,)
        fan, _mult, points, capped = points_of(raw, ctx)
        value = ctx.by_discard[key] = (raw, patterns, fan, points, capped)
    return value


def _facts(sit: tuple, keys: tuple, anyf: int, mi: MeldInfo, tile: int, only_wait: bool,
           runs: tuple = (0, 0, 0)) -> WinFacts:
    return _record(WinFacts, sit + (keys, anyf, mi.n, mi.concealed_only, mi.has19, tile, only_wait, runs))


def _patterns(base: str, gens: int, facts: WinFacts, ctx: FanContext, runs: tuple = ()) -> list:
    """The listed patterns of a win: its base pattern, then the extras on that hold, in §5.2's order
    (0-fan ones left out); ``runs``: the ids of the run extras that hold on the decomposition scored."""
    ef = ctx.extra_fans
    pats = list(ctx.single[base])
    if gens:
        pats.append(pattern_fan("gen", ef["gen"] * gens, gens))
    for p in ctx.extras:
        if p.id in runs if p.reads == RUNS else p.test(facts):
            pats.append(pattern_fan(p.id, ef[p.id]))
    return [p for p in pats if p.fan]


def _evaluate_runs(keys: tuple, mask: int, gen4: int, anyf: int, mi: MeldInfo, sit: tuple, ctx: FanContext,
                   tile: int, only_wait: bool) -> Evaluation:
    """:func:`evaluate` for a standard shape when an extra reading the decomposition's sequences is on
    (§3: the highest total over every decomposition, taken over each combination of the suits'
    feature sets, with the seven-pairs reading too when the hand also has that shape; ties: the higher
    base-pattern fan, then §5.1's order)."""
    ef = ctx.extra_fans
    gen_fan = ef["gen"]
    best = None  # (rank, (base, fan, dragon), runs, features)
    if mask & _PAIRS:
        m = mask & ~(_STD | _TRIP | _YAO)
        b = ctx.best[m] or _best_base(ctx, m)
        best = ((b[1] - (gen_fan if b[2] else 0), b[1], -_BASE_INDEX[b[0]]), b, (), None)
    m_std = mask & ~(_PAIRS | _HAS4 | _TRIP | _YAO)
    head = sit + (keys, anyf, mi.n, mi.concealed_only, mi.has19, tile, only_wait)
    per_suit = [suit_features(k) for k in keys]
    for feats in product(*per_suit):
        both = feats[0] & feats[1] & feats[2]
        m = m_std
        if both & F_TRIP:
            m |= _TRIP
        if both & F_YAO and mi.yao:
            m |= _YAO
        b = ctx.best[m] or _best_base(ctx, m)
        facts = _record(WinFacts, head + (feats,))
        runs = [p.id for p in ctx.run_extras if p.test(facts)]
        rank = (b[1] + sum(ef[r] for r in runs), b[1], -_BASE_INDEX[b[0]])
        if best is None or rank > best[0]:
            best = (rank, b, tuple(runs), feats)
    _rank, (base, _fan, dragon), runs, feats = best
    gens = gen4 + mi.kongs - (1 if dragon else 0)
    for t in mi.peng_tiles:
        if keys[t // 9] // POW5[t % 9] % 5 == 1:
            gens += 1
    pats = _patterns(base, gens, _record(WinFacts, head + (feats or (0, 0, 0),)), ctx, runs)
    return Evaluation(base, sum(p.fan for p in pats), tuple(pats), True,
                      feats if runs and feats is not None else None)


# -- the public score ----------------------------------------------------------
@dataclass(frozen=True)
class Score:
    """A scored win: ``fan`` after the cap, ``raw_fan`` before, points = base × multiplier."""

    fan: int
    raw_fan: int
    multiplier: int
    points: int
    capped: bool
    patterns: tuple[PatternFan, ...]
    decomposition: tuple[str, ...]


_MAX_RAW_FAN = 40  # well above any hand's total (a table, not a limit: larger fans are computed)


class Points(NamedTuple):
    """What a raw fan is worth under a ruleset (§5.3)."""

    fan: int
    multiplier: int
    points: int
    capped: bool


def points_of(raw_fan: int, ctx: FanContext) -> Points:
    """``(fan, multiplier, points, capped)`` for a raw fan: the cap, then 2^(fan−1) or fan (§5.3)."""
    return ctx.points[raw_fan] if 0 <= raw_fan <= _MAX_RAW_FAN else _points(raw_fan, ctx)


def _points(raw_fan: int, ctx: FanContext) -> Points:
    fan = ctx.cap if ctx.cap is not None and raw_fan > ctx.cap else raw_fan
    mult = ((1 << (fan - 1)) if fan >= 1 else 0) if ctx.exponential else fan
    return Points(fan, mult, ctx.base * mult, fan != raw_fan)


def score(hand: Hand | str, win: Win | Tile | str, *, ruleset: Ruleset | str | None = None) -> Score:
    """Score a 14-size winning hand (the winning tile included in ``hand``).

    ``win`` is a :class:`Win` or just the winning tile (a plain win by discard).

    >>> from service.rules.hand import parse_hand, Meld
    >>> h = parse_hand("123345m999p66p", melds=[Meld.kong("2p", "concealed")])
    >>> s = score(h, "6p")
    >>> s.fan, s.points, [(p.id, p.fan) for p in s.patterns], s.decomposition
    (2, 12, [('pinghu', 1), ('gen', 1)], ('123m', '345m', '999p', '2222p', '66p'))
    >>> score(parse_hand("11333222456999s"), Win("4s", self_drawn=True), ruleset={"zimo": "fan", "cap": 3}).capped
    True
    """
    if not isinstance(hand, Hand):
        from .hand import parse_hand

        hand = parse_hand(hand)
    rules = XUEZHAN if ruleset is None else Ruleset.from_spec(ruleset)
    if not isinstance(win, Win):
        win = Win(win)
    ctx = context(rules)
    if hand.size != 14 or hand.max_held > 4:
        require_valid(hand, 14)
    if rules.players == 3:
        require_in_play(hand, 3, (win.tile,))
    if win.heavenly or win.earthly or win.robbing_kong:
        problem = win.contradiction(ctx.table)
        if problem:
            raise ContradictoryFlags(problem)
        if (win.heavenly or win.earthly) and hand.melds:
            raise ContradictoryFlags(
                f"{'heavenly' if win.heavenly else 'earthly'} is a win with no melds", text=str(hand)
            )
    if win.after_kong and win.self_drawn and not _has_kong(hand):
        raise ContradictoryFlags(GANGSHANGHUA_NEEDS_KONG, text=str(hand))
    if not hand.counts[win.tile.index]:
        raise WinTileNotInHand(
            f"the winning tile {win.tile} is not among the concealed tiles {str(hand)!r}",
            text=str(win.tile),
        )
    mask = hand.suit_mask
    if mask == 7 or hand.void is not None:
        problem = suit_problem(mask, hand.void)
        if problem:
            raise NotAWin(f"{str(hand)!r} cannot win: {problem}", text=str(hand))
    k0, k1, k2 = hand.keys
    t = win.tile.index
    ev = evaluate(k0, k1, k2, len(hand.tiles), meld_info(hand.melds) if hand.melds else NO_MELDS,
                  win.flags, ctx, t, ctx.asks_wait[t] and only_wait(hand, t))
    if ev is None:
        raise NotAWin(
            f"{str(hand)!r} is not a winning shape (four sets and a pair, or seven pairs)",
            text=str(hand),
        )
    if ev.raw_fan == 1 and not win.self_drawn and not rules.dianpao_pinghu:
        raise DianpaoPinghu(DIANPAO_PINGHU, text=str(hand))
    fan, mult, points, capped = points_of(ev.raw_fan, ctx)
    return Score(fan, ev.raw_fan, mult, points, capped, ev.patterns, decomposition(hand, ev))


DIANPAO_PINGHU = (
    "a win on a discard (点炮, 抢杠胡, 杠上炮) worth 1 fan cannot happen under this ruleset "
    "(dianpao_pinghu = false: a 平胡 may only be won self-drawn)"
)
GANGSHANGHUA_NEEDS_KONG = (
    "after_kong on a self-drawn win (杠上花) needs a kong among the hand's melds: "
    "it is a win on the replacement tile of one's own kong"
)


def _has_kong(hand: Hand) -> bool:
    return any(m.type == "kong" for m in hand.melds)


def only_wait(hand: Hand, tile: int) -> bool:
    """Whether ``tile`` was the only wait (§4) of the 13 tiles a 14-size hand had before it."""
    void = -1 if hand.void is None else SUITS.index(hand.void)
    return waits_without(hand.keys, len(hand.tiles), len(hand.melds), hand.held, hand.suit_mask, void,
                         tile) == [tile]


def suit_problem(mask: int, void: str | None) -> str | None:
    """Why a hand with these suits may not win (缺一门, 定缺), or None."""
    if mask == 0b111:
        return "the hand holds tiles of all three suits (缺一门: at most two)"
    if void is not None and mask >> SUITS.index(void) & 1:
        return f"the hand holds tiles of its void suit {void!r} (定缺)"
    return None


def is_win(hand: Hand) -> bool:
    """Whether a 14-size hand is a legal win (shape, 缺一门 and 定缺).

    >>> from service.rules.hand import parse_hand
    >>> is_win(parse_hand("11122233344455m")), is_win(parse_hand("11m22m33m44p55p66s77s"))
    (True, False)
    """
    keys = hand.keys
    if keys is None or hand.size != 14:
        return False
    mask = hand.suit_mask
    if mask == 7 or (hand.void is not None and mask >> SUITS.index(hand.void) & 1):
        return False
    k0, k1, k2 = keys
    if k0 in SHAPES and k1 in SHAPES and k2 in SHAPES:
        return True
    return not hand.melds and k0 in EVEN_KEYS and k1 in EVEN_KEYS and k2 in EVEN_KEYS


def decomposition(hand: Hand, ev: Evaluation) -> tuple[str, ...]:
    """The groups of the reported decomposition: concealed sets, melds, then the pair.

    The decomposition is one that has the chosen base pattern (all triplets for
    对对胡, a 1 or 9 in every group for 带幺九, pairs for the seven-pair family).
    """
    if ev.base in _PAIR_BASES or not ev.standard:
        return tuple(describe_pairs(hand.counts))
    kind = 1 if ev.base in _TRIP_BASES else 2 if ev.base in _YAO_BASES else 0
    groups: list[str] = []
    pair = None
    for s, key in enumerate(hand.keys):
        if key:
            if ev.features is None:
                sets, p = DECOMPOSITIONS[key][kind][s]
            else:  # the decomposition a run extra (夹心五, 卡二条, 一条龙) was scored on
                sets, p = notate(s, *suit_features(key)[ev.features[s]])
            groups += sets
            if p is not None:
                pair = p
    if hand.melds:
        groups += [_MELD_NOTE[m.tile.index][m.copies] for m in hand.melds]
    if pair is not None:
        groups.append(pair)
    return tuple(groups)


_MELD_NOTE = [{3: str(t.rank) * 3 + t.suit, 4: str(t.rank) * 4 + t.suit} for t in TILES]
