"""Validating a hand (docs/rules.md#s2): size, copies, suits, 花猪, completeness.

>>> v = validate("123m456p789s11m")
>>> v.valid, v.size, v.tiles, v.suits, v.huazhu, v.complete
(False, 11, '11123m456p789s', ('m', 'p', 's'), True, False)
>>> [p.code for p in v.problems]
['bad_size']
>>> validate("11122233344455m").complete
True
"""

from __future__ import annotations

from dataclasses import dataclass

from .fan import is_win
from .hand import Hand, Problem, hand_problems, parse_hand, require_in_play
from .ruleset import Ruleset
from .tiles import SUITS
from .ting import visible_counts


@dataclass(frozen=True, slots=True)
class Validation:
    valid: bool
    size: int
    tiles: str
    suits: tuple[str, ...]
    huazhu: bool
    complete: bool
    problems: tuple[Problem, ...]


def validate(hand: Hand | str, *, ruleset: Ruleset | str | None = None, visible=None) -> Validation:
    """Check a hand against §2. Notation errors raise; rule breaches are reported.

    ``valid`` means size 13 or 14 and at most 4 copies of any tile (``visible``
    included).  Three suits or a void-suit tile make a hand a 花猪 (reported in
    ``huazhu``), which is legal to hold but can neither win nor be ting; under a
    ruleset with ``huazhu = 0`` (``chengdu-points``) there is no 花猪 (§7.2):
    such a hand is reported ``huazhu: false`` (it still cannot win).
    ``complete``: size 14 and a legal win.

    >>> validate("123m456p789s1122m", ruleset="chengdu-points").huazhu
    False
    """
    hand = parse_hand(hand)
    rules = Ruleset.from_spec(ruleset)  # the rules of §2 do not vary, but a bad ruleset is still an error
    visible_tiles = visible_counts(visible)[1]
    require_in_play(hand, rules.players, visible_tiles)  # three players: a 万 tile or a void is bad input (§14)
    problems = hand_problems(hand, visible_tiles)
    return Validation(
        valid=not problems,
        size=hand.size,
        tiles=str(hand),
        suits=tuple(s for i, s in enumerate(SUITS) if hand.suit_mask >> i & 1),
        huazhu=hand.huazhu and rules.huazhu != 0,
        complete=not problems and is_win(hand),
        problems=tuple(problems),
    )
