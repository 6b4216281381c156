"""The fan patterns of docs/rules.md#s5 and §9: stable ids, names, fan per table.

Base patterns (§5.1) compete: only the single highest applies.  Extras (§5.2)
add to it.  Each pattern's fan value depends on the ruleset's ``fan_table``;
``None`` means the pattern does not exist in that table.

>>> PATTERNS["qingyise"].name, PATTERNS["qingyise"].name_en
('清一色', 'Full flush')
>>> PATTERNS["longqidui"].fan("qq"), PATTERNS["longqidui"].fan("chengdu")
(5, None)
>>> [p for p in BASE_ORDER][:3]
['pinghu', 'duiduihu', 'qingyise']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True, slots=True)
class Pattern:
    """A scoring pattern: stable ``id``, Chinese ``name``, English ``name_en``."""

    id: str
    name: str
    name_en: str
    base: bool
    fan_qq: int
    fan_chengdu: int | None

    def fan(self, table: str) -> int | None:
        return self.fan_qq if table == "qq" else self.fan_chengdu


_DEFS = (
    # base patterns, in the order of §5.1 (the tie-break order)
    Pattern("pinghu", "平胡", "Basic win", True, 1, 1),
    Pattern("duiduihu", "对对胡", "All triplets", True, 2, 2),
    Pattern("qingyise", "清一色", "Full flush", True, 3, 3),
    Pattern("daiyaojiu", "带幺九", "Terminals in every set", True, 3, 3),
    Pattern("qidui", "七对", "Seven pairs", True, 3, 3),
    Pattern("qingdui", "清对", "Full flush all triplets", True, 4, 4),
    Pattern("jiangdui", "将对", "All 2-5-8 triplets", True, 4, 4),
    Pattern("longqidui", "龙七对", "Dragon seven pairs", True, 5, None),
    Pattern("qingqidui", "清七对", "Full flush seven pairs", True, 5, 4),
    Pattern("qingyaojiu", "清幺九", "Full flush terminals", True, 5, None),  # not in the chengdu table (§9)
    Pattern("qinglongqidui", "清龙七对", "Full flush dragon seven pairs", True, 6, None),
    Pattern("tianhu", "天胡", "Heavenly hand", True, 6, 8),
    Pattern("dihu", "地胡", "Earthly hand", True, 6, 8),
    # extras (§5.2); chengdu values per §9 (unlisted ones keep their §5.2 value)
    Pattern("gen", "根", "Root", False, 1, 1),
    Pattern("gangshanghua", "杠上花", "Win on a kong replacement", False, 1, 2),
    Pattern("gangshangpao", "杠上炮", "Win on a discard after a kong", False, 1, 0),
    Pattern("qiangganghu", "抢杠胡", "Robbing the kong", False, 1, 1),
    Pattern("zimo", "自摸加番", "Self-drawn bonus", False, 1, 1),
    Pattern("haidi", "海底捞月/海底炮", "Last tile", False, 1, 1),
    Pattern("jingoudiao", "金钩钓", "Golden hook", False, 1, 1),
    Pattern("menqing", "门清", "Concealed hand", False, 1, 1),
    Pattern("zhongzhang", "中张", "All simples", False, 1, 1),
    Pattern("jiaxinwu", "夹心五", "Five in the middle", False, 1, 1),
    Pattern("kaertiao", "卡二条", "Closed two of bamboo", False, 1, 1),
    Pattern("yitiaolong", "一条龙", "Pure straight", False, 1, 1),
)

PATTERNS: dict[str, Pattern] = {p.id: p for p in _DEFS}
BASE_ORDER: tuple[str, ...] = tuple(p.id for p in _DEFS if p.base)
EXTRA_ORDER: tuple[str, ...] = tuple(p.id for p in _DEFS if not p.base)
SEVEN_PAIRS_WITH_DRAGON = frozenset({"longqidui", "qinglongqidui"})
"""Base patterns that use one set of four identical tiles (减1根)."""


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
        if not p.base and p.id == "gen":
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
