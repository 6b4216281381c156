"""Errors of the rules core.

Every error is a :class:`ValueError` subclass with a stable ``code`` (the id
clients see in problem+json bodies) and a readable message that quotes the
offending input.  Narrow subclasses let callers catch exactly what they mean.

>>> from service.rules.tiles import Tile
>>> try:
...     Tile.from_str("0m")
... except InvalidRank as exc:
...     print(exc.code, "-", exc)
invalid_rank - invalid rank '0' in '0m' (ranks are 1-9)
"""

from __future__ import annotations


class RuleError(ValueError):
    """Base of every error raised by the rules core."""

    code = "rule_error"

    def __init__(self, message: str, *, text: str | None = None, **context: object) -> None:
        super().__init__(message)
        self.message = message
        self.text = text
        self.context = context


# -- notation ---------------------------------------------------------------
class NotationError(RuleError):
    """Text that is not valid tile notation."""

    code = "bad_notation"


class InvalidRank(NotationError):
    code = "invalid_rank"


class UnknownSuit(NotationError):
    code = "unknown_suit"


class MissingSuit(NotationError):
    code = "missing_suit"


class UnexpectedCharacter(NotationError):
    code = "unexpected_character"


# -- hands ------------------------------------------------------------------
class HandError(RuleError):
    """A hand that parses but breaks a rule of RULES.md §2."""

    code = "bad_hand"


class HandSizeError(HandError):
    code = "bad_size"


class TooManyCopies(HandError):
    code = "too_many_copies"


class BadMeld(HandError):
    code = "bad_meld"


# -- wins -------------------------------------------------------------------
class WinError(RuleError):
    code = "bad_win"


class NotAWin(WinError):
    code = "not_a_win"


class WinTileNotInHand(WinError):
    code = "win_tile_not_in_hand"


class ContradictoryFlags(WinError):
    code = "contradictory_flags"


# -- rulesets ---------------------------------------------------------------
class RulesetError(RuleError):
    code = "bad_ruleset"


class UnknownRuleset(RulesetError):
    code = "unknown_ruleset"


class UnknownRulesetField(RulesetError):
    code = "unknown_ruleset_field"


class BadRulesetValue(RulesetError):
    code = "bad_ruleset_value"


# -- events -----------------------------------------------------------------
class EventError(RuleError):
    """An event that cannot happen in the round as it stands.

    ``code`` is one of the stable ids listed in :mod:`service.rules.settle`;
    ``event`` is the 0-based index of the offending event.
    """

    def __init__(self, code: str, event: int, message: str, **context: object) -> None:
        super().__init__(f"event {event}: {message}", **context)
        self.code = code
        self.event = event
        self.reason = message
