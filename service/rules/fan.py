"""Scoring a winning hand (RULES.md §5): best base pattern, extras, cap, points.

>>> from service.rules.hand import parse_hand
>>> s = score(parse_hand("11333222456999s"), "4s")
>>> s.fan, s.points, [p.id for p in s.patterns]
(3, 24, ['qingyise'])
>>> s = score(parse_hand("11222244p557799m"), "9m")
>>> s.fan, s.points, [p.id for p in s.patterns]
(5, 96, ['longqidui'])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .errors import ContradictoryFlags, NotAWin, WinTileNotInHand
from .hand import Hand, Meld, POW5, require_valid
from .patterns import BASE_ORDER, EXTRA_ORDER, PATTERNS, SEVEN_PAIRS_WITH_DRAGON, PatternFan
from .ruleset import XUEZHAN, Ruleset
from .shapes import (
    EVEN_KEYS, GEN_SHIFT, HAS19, NOT258, SHAPES, TRIP, YAO, _tile_flags, describe,
    describe_pairs, key_counts,
)
from .tiles import SUITS, Tile

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
        problem = self.contradiction()
        if problem:
            raise ContradictoryFlags(problem)

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
class _Ctx(NamedTuple):
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


def context(rules: Ruleset) -> _Ctx:
    """Constants derived from a ruleset, cached on the (immutable) ruleset."""
    try:
        return rules.__dict__["_ctx"]
    except KeyError:
        pass
    table = rules.fan_table
    ctx = _Ctx(
        table=table,
        base_fans={pid: PATTERNS[pid].fan(table) for pid in BASE_ORDER},
        extra_fans={pid: PATTERNS[pid].fan(table) for pid in EXTRA_ORDER},
        cap=rules.cap,
        exponential=rules.scoring == "exponential",
        base=rules.base,
        zimo_fan=rules.zimo == "fan",
        haidi=rules.haidi,
        jingoudiao=rules.jingoudiao,
        menqing=rules.menqing,
        zhongzhang=rules.zhongzhang,
    )
    object.__setattr__(rules, "_ctx", ctx)
    return ctx


def multiplier(fan: int, ctx: _Ctx) -> int:
    if ctx.exponential:
        return 1 << (fan - 1) if fan >= 1 else 0
    return fan


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


_NO_MELDS = MeldInfo(0, 0, True, False, False, 0, (), True)


def meld_info(melds: tuple[Meld, ...]) -> MeldInfo:
    if not melds:
        return _NO_MELDS
    ranks = [m.tile.rank for m in melds]
    return MeldInfo(
        n=len(melds),
        mask=sum(1 << s for s in {m.tile.suit_index for m in melds}),
        yao=all(r in (1, 9) for r in ranks),
        has19=any(r in (1, 9) for r in ranks),
        not258=any(r not in (2, 5, 8) for r in ranks),
        kongs=sum(1 for m in melds if m.type == "kong"),
        peng_tiles=tuple(m.tile.index for m in melds if m.type == "peng"),
        concealed_only=all(m.kind == "concealed" for m in melds),
    )


_TILE_FLAGS: dict[int, int] = {}


def _flags(key: int) -> int:
    f = SHAPES.get(key)
    if f is None:
        f = _TILE_FLAGS.get(key)
        if f is None:
            f = _TILE_FLAGS[key] = _tile_flags(key_counts(key))
    return f


# -- evaluation --------------------------------------------------------------
class Evaluation(NamedTuple):
    base: str
    raw_fan: int
    extras: tuple[tuple[str, int, int], ...]  # (id, fan, count)
    standard: bool


def evaluate(keys, n_concealed: int, mi: MeldInfo, sit: tuple, ctx: _Ctx) -> Evaluation | None:
    """Best base pattern and extras of a complete hand, or None if it does not win.

    ``keys``: the three suit keys of the concealed tiles; ``sit``: the flags
    ``(self_drawn, after_kong, robbing_kong, last_tile, heavenly, earthly)``.
    Suit rules (缺一门, 定缺) are the caller's.
    """
    k0, k1, k2 = keys
    standard = k0 in SHAPES and k1 in SHAPES and k2 in SHAPES
    pairs = mi.n == 0 and n_concealed == 14 and k0 in EVEN_KEYS and k1 in EVEN_KEYS and k2 in EVEN_KEYS
    if not (standard or pairs):
        return None
    f0, f1, f2 = _flags(k0), _flags(k1), _flags(k2)
    anyf = f0 | f1 | f2
    mask = mi.mask | (1 if k0 else 0) | (2 if k1 else 0) | (4 if k2 else 0)
    qing = mask in (1, 2, 4)
    gen4 = (f0 >> GEN_SHIFT) + (f1 >> GEN_SHIFT) + (f2 >> GEN_SHIFT)
    gens = gen4 + mi.kongs
    for t in mi.peng_tiles:
        if (keys[t // 9] // POW5[t % 9]) % 5 == 1:
            gens += 1

    bf = ctx.base_fans
    cands: list[str] = ["pinghu"]
    if qing:
        cands.append("qingyise")
    if standard:
        allf = f0 & f1 & f2
        trip = allf & TRIP
        yao = allf & YAO and mi.yao
        if trip:
            cands.append("duiduihu")
            if qing:
                cands.append("qingdui")
            if not (anyf & NOT258) and not mi.not258:
                cands.append("jiangdui")
        if yao:
            cands.append("daiyaojiu")
            if qing:
                cands.append("qingyaojiu")
    if pairs:
        if gen4 and bf["longqidui"] is not None:
            cands.append("qinglongqidui" if qing else "longqidui")
        else:
            cands.append("qingqidui" if qing else "qidui")
    self_drawn, after_kong, robbing_kong, last_tile, heavenly, earthly = sit
    if heavenly:
        cands.append("tianhu")
    if earthly:
        cands.append("dihu")

    ef = ctx.extra_fans
    extras: list[tuple[str, int, int]] = []
    if gens:
        extras.append(("gen", ef["gen"] * gens, gens))
    if after_kong:
        extras.append(("gangshanghua", ef["gangshanghua"], 1) if self_drawn else ("gangshangpao", ef["gangshangpao"], 1))
    if robbing_kong:
        extras.append(("qiangganghu", ef["qiangganghu"], 1))
    if self_drawn and ctx.zimo_fan:
        extras.append(("zimo", ef["zimo"], 1))
    if last_tile and ctx.haidi:
        extras.append(("haidi", ef["haidi"], 1))
    if ctx.jingoudiao and mi.n == 4:
        extras.append(("jingoudiao", ef["jingoudiao"], 1))
    if ctx.menqing and mi.concealed_only:
        extras.append(("menqing", ef["menqing"], 1))
    if ctx.zhongzhang and not (anyf & HAS19) and not mi.has19:
        extras.append(("zhongzhang", ef["zhongzhang"], 1))
    extra_total = sum(e[1] for e in extras)

    best = None
    best_rank = None
    for pid in cands:
        fan = bf[pid]
        total = fan + extra_total
        if pid in SEVEN_PAIRS_WITH_DRAGON:
            total -= ef["gen"]
        rank = (total, fan, -_BASE_INDEX[pid])
        if best_rank is None or rank > best_rank:
            best, best_rank = pid, rank
    raw = best_rank[0]
    if best in SEVEN_PAIRS_WITH_DRAGON:
        gens -= 1
        extras = [("gen", ef["gen"] * gens, gens) if e[0] == "gen" else e for e in extras]
    return Evaluation(best, raw, tuple(e for e in extras if e[1] and e[2]), standard)


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


def points_of(raw_fan: int, ctx: _Ctx) -> tuple[int, int, int, bool]:
    """``(fan, multiplier, points, capped)`` for a raw fan under the ruleset."""
    fan = raw_fan
    capped = False
    if ctx.cap is not None and fan > ctx.cap:
        fan, capped = ctx.cap, True
    mult = multiplier(fan, ctx)
    return fan, mult, ctx.base * mult, capped


def patterns_of(ev: Evaluation, ctx: _Ctx) -> tuple[PatternFan, ...]:
    out = [PatternFan(ev.base, ctx.base_fans[ev.base])]
    out.extend(PatternFan(pid, fan, count) for pid, fan, count in ev.extras)
    return tuple(p for p in out if p.fan)


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
    from .hand import parse_hand

    hand = parse_hand(hand) if isinstance(hand, str) else hand
    rules = Ruleset.from_spec(ruleset)
    if not isinstance(win, Win):
        win = Win(win)
    ctx = context(rules)
    require_valid(hand, 14)
    problem = win.contradiction(ctx.table)
    if problem:
        raise ContradictoryFlags(problem)
    if (win.heavenly or win.earthly) and hand.melds:
        raise ContradictoryFlags(
            f"{'heavenly' if win.heavenly else 'earthly'} is a win with no melds", text=str(hand)
        )
    if not hand.counts[win.tile.index]:
        raise WinTileNotInHand(
            f"the winning tile {win.tile} is not among the concealed tiles {str(hand)!r}",
            text=str(win.tile),
        )
    ev = evaluate_hand(hand, win_flags(win), ctx)
    fan, mult, points, capped = points_of(ev.raw_fan, ctx)
    return Score(fan, ev.raw_fan, mult, points, capped, patterns_of(ev, ctx), decomposition(hand, ev))


def win_flags(win: Win) -> tuple:
    return (win.self_drawn, win.after_kong, win.robbing_kong, win.last_tile, win.heavenly, win.earthly)


def suit_problem(mask: int, void: str | None) -> str | None:
    """Why a hand with these suits may not win (缺一门, 定缺), or None."""
    if mask == 0b111:
        return "the hand holds tiles of all three suits (缺一门: at most two)"
    if void is not None and mask >> SUITS.index(void) & 1:
        return f"the hand holds tiles of its void suit {void!r} (定缺)"
    return None


def evaluate_hand(hand: Hand, sit: tuple, ctx: _Ctx) -> Evaluation:
    """Evaluate a 14-size hand, raising :class:`NotAWin` with the reason when it does not win."""
    problem = suit_problem(hand.suit_mask, hand.void)
    if problem:
        raise NotAWin(f"{str(hand)!r} cannot win: {problem}", text=str(hand))
    ev = evaluate(hand.keys, len(hand.tiles), meld_info(hand.melds), sit, ctx)
    if ev is None:
        raise NotAWin(
            f"{str(hand)!r} is not a winning shape (four sets and a pair, or seven pairs)",
            text=str(hand),
        )
    return ev


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
    if ev.base in _PAIR_BASES or not ev.standard:
        return tuple(describe_pairs(hand.counts))
    kind = 1 if ev.base in _TRIP_BASES else 2 if ev.base in _YAO_BASES else 0
    groups = describe(hand.keys, kind)
    pair = groups.pop() if groups else None
    melds = [str(m.tile.rank) * m.copies + m.tile.suit for m in hand.melds]
    return tuple(groups + melds + ([pair] if pair else []))
