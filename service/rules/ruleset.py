"""Rule variants (docs/rules.md#s5.3, §9, §13, §14): one frozen :class:`Ruleset` and named presets.

Its fields are docs/rules.md#s9's, with that section's readings (three players and
``huazhu``, ``xueliu`` and ``next_dealer``); one true/false field per pattern switch
of the registry (:data:`.patterns.SWITCHES`).

>>> Ruleset.from_preset("sanren-liangfang").players, Ruleset.from_spec({"players": 3, "huazhu": 16}).huazhu
(3, 0)

>>> r = Ruleset.from_preset("xuezhan")
>>> r.mode, r.base, r.cap
('xuezhan', 6, None)
>>> r2 = Ruleset.from_spec({"preset": "normal", "cap": 4, "zimo": "base"})
>>> r2.preset, r2.mode, r2.cap, r2.zimo
('normal', 'normal', 4, 'base')
>>> Ruleset.from_spec({"bogus": 1})
Traceback (most recent call last):
...
service.rules.errors.UnknownRulesetField: unknown ruleset field 'bogus'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from typing import Any

from .errors import BadRulesetValue, UnknownRuleset, UnknownRulesetField
from .patterns import SWITCHES

ENUMS: dict[str, tuple[str, ...]] = {
    "mode": ("xuezhan", "normal", "xueliu"),
    "fan_table": ("qq", "chengdu"),
    "scoring": ("exponential", "linear"),
    "zimo": ("none", "base", "fan"),
    "dianganghua": ("self_draw", "discard"),
    "dajiao": ("max", "min"),
    "winner_leaves": ("deferred", "forfeit"),
    "next_dealer": ("winner", "discarder"),
}
UNIT_FIELDS = ("direct_kong", "added_kong", "concealed_kong", "huazhu", "escape")
"""The fields counted in units of ``base`` points: integers 0 to :data:`MAX_UNITS`."""
FLAGS = ("huazhu_pays_winners",) + SWITCHES + ("dianpao_pinghu", "xueliu_dajiao_winners")
"""The true/false fields: the pattern switches of :data:`.patterns.SWITCHES` among them."""
PLAYERS = (4, 3)
"""The seat counts a ruleset may have: four, or three (三人两房, §14)."""
MAX_BASE = 1_000_000
MAX_UNITS = 1_000
MAX_CAP = 64


@dataclass(frozen=True)
class Ruleset:
    """Every rule variant of §9 in one immutable value.

    ``preset`` names the preset it was built from (informational).
    """

    preset: str = "xuezhan"
    mode: str = "xuezhan"
    fan_table: str = "qq"
    scoring: str = "exponential"
    base: int = 6
    cap: int | None = None
    zimo: str = "none"
    direct_kong: int = 1
    added_kong: int = 1
    concealed_kong: int = 2
    dianganghua: str = "self_draw"
    huazhu: int = 16
    huazhu_pays_winners: bool = True
    dajiao: str = "max"
    escape: int = 16
    winner_leaves: str = "deferred"
    next_dealer: str = "winner"
    # one field per switch of the pattern registry (.patterns.SWITCHES), off by default
    __annotations__.update(dict.fromkeys(SWITCHES, "bool"))
    locals().update(dict.fromkeys(SWITCHES, False))
    players: int = 4
    dianpao_pinghu: bool = True
    xueliu_dajiao_winners: bool = False
    zhahu_fan: int | None = None

    def __post_init__(self) -> None:
        for name, allowed in ENUMS.items():
            value = getattr(self, name)
            if value not in allowed:
                raise BadRulesetValue(
                    f"ruleset field {name!r} must be one of {', '.join(allowed)}; got {value!r}",
                    text=str(value), field=name,
                )
        _int_in(self, "base", 1, MAX_BASE)
        if self.cap is not None:
            _int_in(self, "cap", 1, MAX_CAP)
        if self.zhahu_fan is not None:
            _int_in(self, "zhahu_fan", 1, MAX_CAP)
        for name in UNIT_FIELDS:
            _int_in(self, name, 0, MAX_UNITS)
        for name in FLAGS:
            if not isinstance(getattr(self, name), bool):
                raise BadRulesetValue(
                    f"ruleset field {name!r} must be true or false; got {getattr(self, name)!r}",
                    text=str(getattr(self, name)), field=name,
                )
        if type(self.players) is not int or self.players not in PLAYERS:
            raise BadRulesetValue(
                f"ruleset field 'players' must be 4 or 3; got {self.players!r}",
                text=str(self.players), field="players",
            )
        if self.players == 3 and self.huazhu:
            raise BadRulesetValue(  # (from_spec and replace() set it to 0: docs/rules.md#s14.2)
                f"ruleset field 'huazhu' must be 0 with three players; got {self.huazhu!r}",
                text=str(self.huazhu), field="huazhu",
            )
        if self.preset not in PRESET_FIELDS:
            raise UnknownRuleset(
                f"unknown ruleset preset {self.preset!r} (one of {', '.join(PRESET_FIELDS)})",
                text=str(self.preset),
            )
        # The one write past the frozen __setattr__: the hash of the fields, computed once.  A ruleset
        # is the key of the per-ruleset constants (fan.context, an lru_cache) on every ting, score and
        # discard advice, and the dataclass's own __hash__ hashes all its fields each time: bench/core.py
        # measures ting from strings 1.17 times slower without it (docs/performance.md, "the ruleset's hash").
        object.__setattr__(self, "_hash", hash(tuple(getattr(self, f.name) for f in fields(self))))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined]  # (set by __post_init__)

    @classmethod
    def from_preset(cls, name: str) -> Ruleset:
        """The preset called ``name``."""
        try:
            return PRESETS[name]
        except (KeyError, TypeError):
            raise UnknownRuleset(
                f"unknown ruleset preset {name!r} (one of {', '.join(PRESET_FIELDS)})", text=str(name)
            ) from None

    @classmethod
    def from_spec(cls, spec: str | Mapping[str, Any] | Ruleset | None) -> Ruleset:
        """A preset name, ``{"preset": name, field: value, ...}``, a Ruleset, or None (xuezhan)."""
        if spec is None:
            return PRESETS["xuezhan"]
        if isinstance(spec, Ruleset):
            return spec
        if isinstance(spec, str):
            return cls.from_preset(spec)
        if not isinstance(spec, Mapping):
            raise BadRulesetValue(f"a ruleset is a preset name or an object, got {spec!r}")
        overrides = dict(spec)
        name = overrides.pop("preset", "xuezhan")
        return cls.from_preset(name).replace(**overrides)

    @property
    def zhahu(self) -> int:
        """The fan of the win a 诈胡 pays for (§15.3): ``zhahu_fan``, or when null the ``cap``, or 3."""
        if self.zhahu_fan is not None:
            return self.zhahu_fan
        return 3 if self.cap is None else self.cap

    def replace(self, **overrides: Any) -> Ruleset:
        """This ruleset with ``overrides``; with three players ``huazhu`` is 0 whatever is asked
        (docs/rules.md#s14.2)."""
        known = {f.name for f in fields(self)} - {"preset"}
        for name in overrides:
            if name not in known:
                raise UnknownRulesetField(f"unknown ruleset field {name!r}", text=str(name))
        if overrides.get("players", self.players) == 3:
            overrides["huazhu"] = 0
        return replace(self, **overrides)

    def as_dict(self) -> dict[str, Any]:
        """Every field, ``preset`` first (a fresh dict each call)."""
        return dict(_items(self))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Ruleset:
        """The inverse of :meth:`as_dict` (every field given); cached, since stored states repeat it."""
        return _from_items(tuple(sorted(data.items())))


@lru_cache(maxsize=256)
def _items(rules: Ruleset) -> tuple[tuple[str, Any], ...]:
    return tuple((f.name, getattr(rules, f.name)) for f in fields(rules))


@lru_cache(maxsize=256)
def _from_items(items: tuple) -> Ruleset:
    data = dict(items)
    preset = data.pop("preset", "xuezhan")
    return Ruleset.from_preset(preset).replace(**data)


def _int_in(rules: Ruleset, name: str, lo: int, hi: int) -> None:
    value = getattr(rules, name)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise BadRulesetValue(
            f"ruleset field {name!r} must be an integer from {lo} to {hi}; got {value!r}",
            text=str(value), field=name,
        )


PRESET_FIELDS: dict[str, dict[str, Any]] = {
    "xuezhan": {},
    "normal": {"mode": "normal", "next_dealer": "discarder"},
    "chengdu-points": {
        "mode": "normal",
        "fan_table": "chengdu",
        "scoring": "linear",
        "base": 1,
        "direct_kong": 0,
        "added_kong": 0,
        "concealed_kong": 0,
        "dianganghua": "discard",
        "huazhu": 0,
        "dajiao": "min",
    },
    "xueliu": {"mode": "xueliu"},
    "sanren-liangfang": {
        "players": 3,
        "dianpao_pinghu": False,
        "huazhu": 0,
        "direct_kong": 2,
        "cap": 4,  # the rooms' "3番封顶" (平胡 counted as 0 番 there): §9
    },
}

PRESETS: dict[str, Ruleset] = {
    name: Ruleset(preset=name, **values) for name, values in PRESET_FIELDS.items()
}
XUEZHAN = PRESETS["xuezhan"]
