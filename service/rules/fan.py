"""Scoring a winning hand (docs/rules.md#s5): best base pattern, extras, cap, points.

Readings of docs/rules.md where it is silent (documented choices):

* 夹心五 / 卡二条: copies of a tile are alike, so "the winning tile sits in the
  middle of a 4-5-6 (1-2-3 of 条)" holds when the decomposition scored has that
  sequence in the winning tile's suit: the winning copy is taken to be its middle.
* 卡二条's "the hand's only wait was 2条" uses §4's waits of the 13 tiles before
  the win (a tile whose four copies are all in the hand and its melds is no wait;
  定缺 respected).  In discard advice, the 13 tiles left after the discard.
* Seven pairs have no sequences: the seven-pair reading of a hand has none of
  夹心五, 卡二条, 一条龙 (its standard reading, if any, competes by §3).
* ``dianpao_pinghu = false`` refuses a win that is not self-drawn (点炮, 抢杠胡,
  杠上炮, and 地胡 by discard under the chengdu table) whose total before the cap
  is 1 (``dianpao_pinghu``).  Ting and 大叫 are unchanged: a 1-fan wait is still a
  wait (the hand may win it self-drawn), valued as §4 says.
* With ``players = 3`` a 万 tile in the hand, its melds or the win tile, or a
  定缺 void, is bad input (``suit_not_in_play``, ``void_not_allowed``) here as in
  ``ting``, ``discards`` and ``validate`` (which otherwise reports rule breaches
  as problems: §14.1 says 422).

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
from itertools import product
from typing import NamedTuple

from .errors import ContradictoryFlags, DianpaoPinghu, NotAWin, WinTileNotInHand
from .hand import Hand, Meld, POW5, require_in_play, require_valid
from .patterns import BASE_ORDER, EXTRA_ORDER, PATTERNS, SEVEN_PAIRS_WITH_DRAGON, PatternFan, pattern_fan
from .ruleset import XUEZHAN, Ruleset
from .shapes import (
    DECOMPOSITIONS, EVEN_KEYS, F_123, F_456, F_LONG, F_TRIP, F_YAO, GEN_SHIFT, HAS19, NOT258, SHAPES, TRIP, YAO,
    describe_pairs, notate, suit_features, suit_flags, waits_without,
)
from .tiles import SUITS, TILES, Tile

_BASE_INDEX = {pid: i for i, pid in enumerate(BASE_ORDER)}
_TRIP_BASES = frozenset({"duiduihu", "qingdui", "jiangdui"})
_YAO_BASES = frozenset({"daiyaojiu", "qingyaojiu"})
_PAIR_BASES = frozenset({"qidui", "longqidui", "qingqidui", "qinglongqidui"})


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
    table: str
    base_fans: dict
    extra_fans: dict
    cap: int | None
    exponential: bool
    base: int
    zimo_fan: bool
    haidi: bool
    jingoudiao: bool
    menqing: bool
    zhongzhang: bool
    best: list  # candidate mask -> (base id, base fan, uses a dragon 4) ; filled lazily
    single: dict  # base id -> (PatternFan,)
    options: bool  # any extra switched on by the ruleset (zimo fan, haidi, jingoudiao, menqing, zhongzhang)
    points: tuple  # raw fan -> (fan, multiplier, points, capped), for the raw fans a hand can reach
    jiaxinwu: bool
    kaertiao: bool
    yitiaolong: bool
    runs: bool  # any of the three extras that depend on the decomposition's sequences is on
    by_discard: dict  # (facts mask, 根 count) -> a plain win by discard's value; filled lazily
    wait_parts: dict  # discard advice's waits within one suit (ting.wait_part); filled lazily, bounded
    plain: bool  # no extra but 根 (neither options nor runs): a wait's value is discard_value's
    suit_options: dict  # discard advice's options within one suit (ting.suit_options); filled lazily, bounded
    across_options: dict  # discard advice's options with waits in another suit (ting.across_option); the same


def context(rules: Ruleset) -> FanContext:
    """Constants derived from a ruleset, cached on the (immutable) ruleset."""
    try:
        return rules.__dict__["_ctx"]
    except KeyError:
        pass
    table = rules.fan_table
    base_fans = {pid: PATTERNS[pid].fan(table) for pid in BASE_ORDER}
    options = rules.zimo == "fan" or rules.haidi or rules.jingoudiao or rules.menqing or rules.zhongzhang
    runs = rules.jiaxinwu or rules.kaertiao or rules.yitiaolong
    ctx = FanContext(
        table=table,
        base_fans=base_fans,
        extra_fans={pid: PATTERNS[pid].fan(table) for pid in EXTRA_ORDER},
        cap=rules.cap,
        exponential=rules.scoring == "exponential",
        base=rules.base,
        zimo_fan=rules.zimo == "fan",
        haidi=rules.haidi,
        jingoudiao=rules.jingoudiao,
        menqing=rules.menqing,
        zhongzhang=rules.zhongzhang,
        best=[None] * 512,
        single={pid: (pattern_fan(pid, f),) for pid, f in base_fans.items() if f},
        options=options,
        points=(),
        jiaxinwu=rules.jiaxinwu,
        kaertiao=rules.kaertiao,
        yitiaolong=rules.yitiaolong,
        runs=runs,
        by_discard={},
        wait_parts={},
        plain=not (options or runs),
        suit_options={},
        across_options={},
    )
    ctx = ctx._replace(points=tuple(_points(raw, ctx) for raw in range(_MAX_RAW_FAN + 1)))
    object.__setattr__(rules, "_ctx", ctx)
    return ctx



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
_QING, _STD, _TRIP, _YAO, _J258, _PAIRS, _HAS4, _TIAN, _DI = (1 << b for b in range(9))


def _best_base(ctx: FanContext, mask: int) -> tuple[str, int, bool]:
    bf = ctx.base_fans
    cands = ["pinghu"]
    if mask & _QING:
        cands.append("qingyise")
    if mask & _STD:
        if mask & _TRIP:
            cands.append("duiduihu")
            if mask & _QING:
                cands.append("qingdui")
            if mask & _J258:
                cands.append("jiangdui")
        if mask & _YAO:
            cands.append("daiyaojiu")
            if mask & _QING and bf["qingyaojiu"] is not None:  # the chengdu table has none (§9)
                cands.append("qingyaojiu")
    if mask & _PAIRS:
        if mask & _HAS4 and bf["longqidui"] is not None:
            cands.append("qinglongqidui" if mask & _QING else "longqidui")
        else:
            cands.append("qingqidui" if mask & _QING else "qidui")
    if mask & _TIAN:
        cands.append("tianhu")
    if mask & _DI:
        cands.append("dihu")
    gen_fan = ctx.extra_fans["gen"]

    def rank(pid: str) -> tuple[int, int, int]:
        dragon = pid in SEVEN_PAIRS_WITH_DRAGON
        return (bf[pid] - (gen_fan if dragon else 0), bf[pid], -_BASE_INDEX[pid])

    best = max(cands, key=rank)
    out = (best, bf[best], best in SEVEN_PAIRS_WITH_DRAGON)
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


KAERTIAO_TILE = 19  # 2s
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
    self_drawn, after_kong, robbing_kong, last_tile, heavenly, earthly = sit
    if heavenly:
        mask |= _TIAN
    if earthly:
        mask |= _DI
    if standard and ctx.runs:
        return _evaluate_runs((k0, k1, k2), mask, gen4, anyf, mi, sit, ctx, tile, only_wait)
    best = ctx.best[mask] or _best_base(ctx, mask)
    base, fan, dragon = best
    gens = gen4 + mi.kongs - (1 if dragon else 0)
    for t in mi.peng_tiles:
        if (k0, k1, k2)[t // 9] // POW5[t % 9] % 5 == 1:
            gens += 1
    if not (gens or after_kong or robbing_kong or ctx.options):
        return _record(Evaluation, (base, fan, ctx.single[base], standard, None))
    if not (after_kong or robbing_kong or ctx.options):  # 根 alone: the common case with kongs
        gen = pattern_fan("gen", ctx.extra_fans["gen"] * gens, gens)
        return _record(Evaluation, (base, fan + gen.fan, ctx.single[base] + (gen,) if gen.fan else ctx.single[base],
                                    standard, None))
    pats = _patterns(base, gens, anyf, mi, sit, ctx)
    return _record(Evaluation, (base, sum(p.fan for p in pats), tuple(pats), standard, None))


def discard_value(k0: int, k1: int, k2: int, n_concealed: int, mi: MeldInfo, ctx: FanContext) -> tuple | None:
    """``(raw_fan, patterns, fan, points, capped)`` of a complete hand won as a plain discard (the
    valuation of a wait, §4), or None if it does not win: :func:`evaluate` and :func:`points_of`
    by a shorter road, for rulesets with no extra but 根 (``not ctx.options and not ctx.runs``).

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
    key = mask | gens << 9
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


def _patterns(base: str, gens: int, anyf: int, mi: MeldInfo, sit: tuple, ctx: FanContext, runs: tuple = ()) -> list:
    """The listed patterns of a win: its base pattern, then the extras in §5.2's order (0-fan ones left out)."""
    self_drawn, after_kong, robbing_kong, last_tile, _heavenly, _earthly = sit
    ef = ctx.extra_fans
    pats = list(ctx.single[base])
    if gens:
        pats.append(pattern_fan("gen", ef["gen"] * gens, gens))
    if after_kong:
        pats.append(pattern_fan("gangshanghua", ef["gangshanghua"]) if self_drawn
                    else pattern_fan("gangshangpao", ef["gangshangpao"]))
    if robbing_kong:
        pats.append(pattern_fan("qiangganghu", ef["qiangganghu"]))
    if self_drawn and ctx.zimo_fan:
        pats.append(pattern_fan("zimo", ef["zimo"]))
    if last_tile and ctx.haidi:
        pats.append(pattern_fan("haidi", ef["haidi"]))
    if ctx.jingoudiao and mi.n == 4:
        pats.append(pattern_fan("jingoudiao", ef["jingoudiao"]))
    if ctx.menqing and mi.concealed_only:
        pats.append(pattern_fan("menqing", ef["menqing"]))
    if ctx.zhongzhang and not (anyf & HAS19 or mi.has19):
        pats.append(pattern_fan("zhongzhang", ef["zhongzhang"]))
    for pid in runs:
        pats.append(pattern_fan(pid, ef[pid]))
    return [p for p in pats if p.fan]


def _evaluate_runs(keys: tuple, mask: int, gen4: int, anyf: int, mi: MeldInfo, sit: tuple, ctx: FanContext,
                   tile: int, only_wait: bool) -> Evaluation:
    """:func:`evaluate` for a standard shape when 夹心五, 卡二条 or 一条龙 is on.

    Those extras depend on the decomposition, so §3's "highest total over every
    decomposition" is taken over each combination of the suits' feature sets
    (with the seven-pairs reading too, when the hand also has that shape).
    Ties: the higher base-pattern fan, then §5.1's order (§3).
    """
    ef = ctx.extra_fans
    gen_fan = ef["gen"]
    best = None  # (rank, (base, fan, dragon), runs, features)
    if mask & _PAIRS:
        m = mask & ~(_STD | _TRIP | _YAO)
        b = ctx.best[m] or _best_base(ctx, m)
        best = ((b[1] - (gen_fan if b[2] else 0), b[1], -_BASE_INDEX[b[0]]), b, (), None)
    m_std = mask & ~(_PAIRS | _HAS4 | _TRIP | _YAO)
    win_suit = tile // 9 if tile >= 0 else -1
    five = ctx.jiaxinwu and tile >= 0 and tile % 9 == 4
    kaer = ctx.kaertiao and tile == KAERTIAO_TILE and only_wait
    per_suit = [suit_features(k) for k in keys]
    for feats in product(*per_suit):
        both = feats[0] & feats[1] & feats[2]
        m = m_std
        if both & F_TRIP:
            m |= _TRIP
        if both & F_YAO and mi.yao:
            m |= _YAO
        b = ctx.best[m] or _best_base(ctx, m)
        runs = []
        if five and feats[win_suit] & F_456:
            runs.append("jiaxinwu")
        if kaer and feats[2] & F_123:
            runs.append("kaertiao")
        if ctx.yitiaolong and any(f & F_LONG == F_LONG for f in feats):
            runs.append("yitiaolong")
        rank = (b[1] + sum(ef[r] for r in runs), b[1], -_BASE_INDEX[b[0]])
        if best is None or rank > best[0]:
            best = (rank, b, tuple(runs), feats)
    _rank, (base, _fan, dragon), runs, feats = best
    gens = gen4 + mi.kongs - (1 if dragon else 0)
    for t in mi.peng_tiles:
        if keys[t // 9] // POW5[t % 9] % 5 == 1:
            gens += 1
    pats = _patterns(base, gens, anyf, mi, sit, ctx, runs)
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

    @classmethod
    def _of(cls, fan, raw_fan, multiplier, points, capped, patterns, decomposition) -> "Score":
        """Build one without the frozen ``__init__``'s per-field checks (the scoring hot path)."""
        obj = object.__new__(cls)
        obj.__dict__.update(fan=fan, raw_fan=raw_fan, multiplier=multiplier, points=points,
                            capped=capped, patterns=patterns, decomposition=decomposition)
        return obj


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


def score(hand: "Hand | str", win: "Win | Tile | str", *, ruleset: "Ruleset | str | None" = None) -> Score:
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
                  win.flags, ctx, t, ctx.kaertiao and t == KAERTIAO_TILE and only_wait(hand, t))
    if ev is None:
        raise NotAWin(
            f"{str(hand)!r} is not a winning shape (four sets and a pair, or seven pairs)",
            text=str(hand),
        )
    if ev.raw_fan == 1 and not win.self_drawn and not rules.dianpao_pinghu:
        raise DianpaoPinghu(DIANPAO_PINGHU, text=str(hand))
    fan, mult, points, capped = points_of(ev.raw_fan, ctx)
    return Score._of(fan, ev.raw_fan, mult, points, capped, ev.patterns, decomposition(hand, ev))


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
