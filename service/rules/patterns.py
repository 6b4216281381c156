"""The fan patterns (docs/rules.md#s5, their fan per table §9): one registry, one entry per pattern.

Each :class:`Pattern` holds everything the rules core knows of it: its id and
names, its fan in each fan table (``None``: the table has no such pattern),
the ruleset option that turns it on (none: always on), what it requires of
the hand and its test.  Everything else is derived from :data:`REGISTRY`:
the ruleset's switches (:data:`SWITCHES`, :mod:`.ruleset`), the base pattern
chosen for a hand (a filter over the base patterns, :mod:`.fan`), the extras
counted (a loop over the extras the ruleset turns on), whether ting and
discard advice may value a wait by the hand's facts alone (no extra reading
the hand is on: :func:`.fan.context`), the companion app's pattern table and
options (:func:`as_json`) and the property tests' rulesets.

A new pattern is one more entry here (its rules in docs/rules.md#s5).

>>> PATTERNS["qingyise"].name, PATTERNS["qingyise"].name_en
('清一色', 'Full flush')
>>> PATTERNS["longqidui"].fan("qq"), PATTERNS["longqidui"].fan("chengdu")
(5, None)
>>> [p for p in BASE_ORDER][:3]
['pinghu', 'duiduihu', 'qingyise']
>>> SWITCHES
('haidi', 'jingoudiao', 'menqing', 'zhongzhang', 'jiaxinwu', 'kaertiao', 'yitiaolong')
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from .shapes import F_123, F_456, F_LONG, HAS19

# -- what a base pattern may require of a hand's shape (bits of one mask, docs/rules.md#s5.1) --
FLUSH = 1 << 0       # one suit only (清)
STANDARD = 1 << 1    # four sets and a pair
TRIPLETS = 1 << 2    # ... every set a triplet (or kong)
TERMINALS = 1 << 3   # ... a 1 or a 9 in every set and the pair
ONLY258 = 1 << 4     # every tile a 2, 5 or 8
PAIRS = 1 << 5       # seven pairs
FOUR = 1 << 6        # ... one of them four identical tiles
HEAVENLY = 1 << 7    # the dealer's initial hand
EARTHLY = 1 << 8     # a non-dealer's first draw (or the dealer's first discard, chengdu)
FACT_BITS = 9
"""The number of shape facts: a base pattern's choice is looked up per ruleset by their mask."""

# -- what an extra reads (docs/rules.md#s5.2) --
COUNTED = "counted"      # 根: counted by the hand's sets of four (fan.py counts them)
SITUATION = "situation"  # only the situation flags of the win (self-drawn, after a kong, ...)
HAND = "hand"            # the hand: its tiles and melds, whatever the decomposition
RUNS = "runs"            # the sequences of the decomposition scored (§3: the best one is taken)


class WinFacts(NamedTuple):
    """What an extra's test may read of a win.

    The situation flags first (an extra that reads :data:`SITUATION` reads
    only those); then the hand: ``keys`` the concealed tiles' three suit keys
    (base 5, rank 1 the lowest digit: :mod:`.shapes`), ``flags`` the union of
    their shape flags (``HAS19``, ...), the melds (``melds`` their number,
    ``concealed_melds`` whether all are concealed kongs, ``meld_19`` whether
    one is of a 1 or a 9); then what :data:`RUNS` extras read: ``tile`` the
    winning tile's index (-1: not known), ``only_wait`` whether it was the
    hand's only wait (when the pattern asked, see :attr:`Pattern.asks_wait`),
    ``runs`` per suit the feature set of the decomposition (``F_123``, ...).
    """

    self_drawn: bool = False
    after_kong: bool = False
    robbing_kong: bool = False
    last_tile: bool = False
    heavenly: bool = False
    earthly: bool = False
    keys: tuple = (0, 0, 0)
    flags: int = 0
    melds: int = 0
    concealed_melds: bool = True
    meld_19: bool = False
    tile: int = -1
    only_wait: bool = False
    runs: tuple = (0, 0, 0)


def _never(_facts: WinFacts) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class Pattern:
    """A scoring pattern: stable ``id``, Chinese ``name``, English ``name_en``, its fan per table.

    A base pattern (``base``) names the shape facts it ``requires``
    (``takes_gen``: it uses one set of four, which is then no 根); an extra
    says what it ``reads`` and its ``test``.  ``option`` is the ruleset field
    that turns it on and ``on`` the value that does (``None``: always on);
    ``asks_wait(tile)``: whether its test reads ``only_wait`` for a win on
    ``tile`` (computing it costs the hand's waits).
    """

    id: str
    name: str
    name_en: str
    base: bool
    fan_qq: int
    fan_chengdu: int | None
    requires: int = 0
    takes_gen: bool = False
    reads: str = SITUATION
    test: Callable[[WinFacts], bool] = _never
    option: str | None = None
    on: bool | str = True
    asks_wait: Callable[[int], bool] | None = None

    def fan(self, table: str) -> int | None:
        return self.fan_qq if table == "qq" else self.fan_chengdu

    def enabled(self, rules: object) -> bool:
        """Whether the ruleset ``rules`` counts this pattern (its option, if any, is on)."""
        return self.option is None or getattr(rules, self.option) == self.on


KAERTIAO_TILE = 19  # 2s


def _jiaxinwu(f: WinFacts) -> bool:
    return f.tile >= 0 and f.tile % 9 == 4 and bool(f.runs[f.tile // 9] & F_456)


def _kaertiao(f: WinFacts) -> bool:
    return f.tile == KAERTIAO_TILE and f.only_wait and bool(f.runs[2] & F_123)


def _yitiaolong(f: WinFacts) -> bool:
    return any(r & F_LONG == F_LONG for r in f.runs)


REGISTRY: tuple[Pattern, ...] = (
    # base patterns (§5.1), in its order (the tie-break order)
    Pattern("pinghu", "平胡", "Basic win", True, 1, 1),
    Pattern("duiduihu", "对对胡", "All triplets", True, 2, 2, requires=STANDARD | TRIPLETS),
    Pattern("qingyise", "清一色", "Full flush", True, 3, 3, requires=FLUSH),
    Pattern("daiyaojiu", "带幺九", "Terminals in every set", True, 3, 3, requires=STANDARD | TERMINALS),
    Pattern("qidui", "七对", "Seven pairs", True, 3, 3, requires=PAIRS),
    Pattern("qingdui", "清对", "Full flush all triplets", True, 4, 4, requires=STANDARD | TRIPLETS | FLUSH),
    Pattern("jiangdui", "将对", "All 2-5-8 triplets", True, 4, 4, requires=STANDARD | TRIPLETS | ONLY258),
    Pattern("longqidui", "龙七对", "Dragon seven pairs", True, 5, None, requires=PAIRS | FOUR, takes_gen=True),
    Pattern("qingqidui", "清七对", "Full flush seven pairs", True, 5, 4, requires=PAIRS | FLUSH),
    Pattern("qingyaojiu", "清幺九", "Full flush terminals", True, 5, None, requires=STANDARD | TERMINALS | FLUSH),
    Pattern("qinglongqidui", "清龙七对", "Full flush dragon seven pairs", True, 6, None,
            requires=PAIRS | FOUR | FLUSH, takes_gen=True),
    Pattern("tianhu", "天胡", "Heavenly hand", True, 6, 8, requires=HEAVENLY),
    Pattern("dihu", "地胡", "Earthly hand", True, 6, 8, requires=EARTHLY),
    # extras (§5.2), in its order (the order they are listed in); chengdu values per §9
    Pattern("gen", "根", "Root", False, 1, 1, reads=COUNTED),
    Pattern("gangshanghua", "杠上花", "Win on a kong replacement", False, 1, 2,
            test=lambda f: f.after_kong and f.self_drawn),
    Pattern("gangshangpao", "杠上炮", "Win on a discard after a kong", False, 1, 0,
            test=lambda f: f.after_kong and not f.self_drawn),
    Pattern("qiangganghu", "抢杠胡", "Robbing the kong", False, 1, 1, test=lambda f: f.robbing_kong),
    Pattern("zimo", "自摸加番", "Self-drawn bonus", False, 1, 1, test=lambda f: f.self_drawn,
            option="zimo", on="fan"),
    Pattern("haidi", "海底捞月/海底炮", "Last tile", False, 1, 1, test=lambda f: f.last_tile, option="haidi"),
    Pattern("jingoudiao", "金钩钓", "Golden hook", False, 1, 1, reads=HAND, test=lambda f: f.melds == 4,
            option="jingoudiao"),
    Pattern("menqing", "门清", "Concealed hand", False, 1, 1, reads=HAND, test=lambda f: f.concealed_melds,
            option="menqing"),
    Pattern("zhongzhang", "中张", "All simples", False, 1, 1, reads=HAND,
            test=lambda f: not (f.flags & HAS19 or f.meld_19), option="zhongzhang"),
    Pattern("jiaxinwu", "夹心五", "Five in the middle", False, 1, 1, reads=RUNS, test=_jiaxinwu, option="jiaxinwu"),
    Pattern("kaertiao", "卡二条", "Closed two of bamboo", False, 1, 1, reads=RUNS, test=_kaertiao,
            option="kaertiao", asks_wait=lambda tile: tile == KAERTIAO_TILE),
    Pattern("yitiaolong", "一条龙", "Pure straight", False, 1, 1, reads=RUNS, test=_yitiaolong, option="yitiaolong"),
)

PATTERNS: dict[str, Pattern] = {p.id: p for p in REGISTRY}
BASE_ORDER: tuple[str, ...] = tuple(p.id for p in REGISTRY if p.base)
EXTRA_ORDER: tuple[str, ...] = tuple(p.id for p in REGISTRY if not p.base)
SWITCHES: tuple[str, ...] = tuple(p.option for p in REGISTRY if p.option is not None and p.on is True)
"""The ruleset's true/false fields that turn a pattern on (each off by default)."""
SEVEN_PAIRS_WITH_DRAGON = frozenset(p.id for p in REGISTRY if p.takes_gen)
"""Base patterns that use one set of four identical tiles (减1根)."""


def base_candidates(mask: int, table: str) -> list[Pattern]:
    """The base patterns a hand with the shape facts ``mask`` qualifies for under the fan table."""
    return [p for p in REGISTRY if p.base and p.requires & mask == p.requires and p.fan(table) is not None]


def extras_on(rules: object) -> tuple[Pattern, ...]:
    """The extras the ruleset counts, in §5.2's order (根 included)."""
    return tuple(p for p in REGISTRY if not p.base and p.enabled(rules))


def as_json(tables: tuple[str, ...] = ("qq", "chengdu")) -> str:
    """The pattern table the companion app is served (``/web/patterns.json``): one JSON object a line,
    each pattern's id, names, whether a base pattern, its fan per table, and the ruleset ``option``
    that turns it on with the value ``on`` that does (``option`` null: always counted).

    >>> row = json.loads(as_json())[2]
    >>> row["id"], row["name"], row["base"], row["fan"], row["option"]
    ('qingyise', '清一色', True, {'qq': 3, 'chengdu': 3}, None)
    >>> json.loads(as_json())[17]["option"], json.loads(as_json())[17]["on"]
    ('zimo', 'fan')
    """
    rows = [json.dumps({"id": p.id, "name": p.name, "name_en": p.name_en, "base": p.base,
                        "fan": {table: p.fan(table) for table in tables}, "option": p.option, "on": p.on},
                       ensure_ascii=False, separators=(",", ":"))
            for p in REGISTRY]
    return "[\n" + ",\n".join(rows) + "\n]\n"


class PatternFan(NamedTuple):
    """A pattern as scored in one hand: its fan total and, for 根, its count.

    (An immutable record; a NamedTuple because ting builds many of them.)

    >>> PatternFan("gen", 2, 2).as_dict()
    {'id': 'gen', 'name': '根', 'name_en': 'Root', 'fan': 2, 'count': 2}
    """

    id: str
    fan: int
    count: int = 1

    @property
    def pattern(self) -> Pattern:
        """The pattern's definition: its names, base or extra.

        >>> PatternFan("qingyise", 2).pattern.name_en
        'Full flush'
        """
        return PATTERNS[self.id]

    def as_dict(self) -> dict:
        p = PATTERNS[self.id]
        out = {"id": p.id, "name": p.name, "name_en": p.name_en, "fan": self.fan}
        if p.reads == COUNTED and not p.base:
            out["count"] = self.count
        return out


_PF_CACHE: dict[tuple[str, int, int], PatternFan] = {}


def pattern_fan(pid: str, fan: int, count: int = 1) -> PatternFan:
    """An interned :class:`PatternFan` (scoring builds the same few again and again)."""
    key = (pid, fan, count)
    pf = _PF_CACHE.get(key)
    if pf is None:
        pf = _PF_CACHE[key] = PatternFan(pid, fan, count)
    return pf
