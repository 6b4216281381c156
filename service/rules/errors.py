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

from .codes import Code


class RuleError(ValueError):
    """Base of every error raised by the rules core."""

    code = Code.RULE_ERROR

    def __init__(self, message: str, *, text: str | None = None, **context: object) -> None:
        super().__init__(message)
        self.message = message
        self.text = text
        self.context = context


# -- notation ---------------------------------------------------------------
class NotationError(RuleError):
    """Text that is not valid tile notation."""

    code = Code.BAD_NOTATION


class InvalidRank(NotationError):
    code = Code.INVALID_RANK


class UnknownSuit(NotationError):
    code = Code.UNKNOWN_SUIT


class MissingSuit(NotationError):
    code = Code.MISSING_SUIT


class UnexpectedCharacter(NotationError):
    code = Code.UNEXPECTED_CHARACTER


# -- hands ------------------------------------------------------------------
class HandError(RuleError):
    """A hand that parses but breaks a rule of docs/rules.md#s2."""

    code = Code.BAD_HAND


class HandSizeError(HandError):
    code = Code.BAD_SIZE


class TooManyCopies(HandError):
    code = Code.TOO_MANY_COPIES


class BadMeld(HandError):
    code = Code.BAD_MELD


class SuitNotInPlay(HandError):
    """A 万 tile in a three-player room (三人两房 plays 筒 and 条 only, §14.1)."""

    code = Code.SUIT_NOT_IN_PLAY


class VoidNotAllowed(HandError):
    """A 定缺 void suit in a three-player room (§14.2)."""

    code = Code.VOID_NOT_ALLOWED


# -- wins -------------------------------------------------------------------
class WinError(RuleError):
    code = Code.BAD_WIN


class NotAWin(WinError):
    code = Code.NOT_A_WIN


class WinTileNotInHand(WinError):
    code = Code.WIN_TILE_NOT_IN_HAND


class ContradictoryFlags(WinError):
    code = Code.CONTRADICTORY_FLAGS


class DianpaoPinghu(WinError):
    """A win on a discard worth 1 fan (before the cap) where ``dianpao_pinghu`` is false (§9)."""

    code = Code.DIANPAO_PINGHU


# -- rulesets ---------------------------------------------------------------
class RulesetError(RuleError):
    code = Code.BAD_RULESET


class UnknownRuleset(RulesetError):
    code = Code.UNKNOWN_RULESET


class UnknownRulesetField(RulesetError):
    code = Code.UNKNOWN_RULESET_FIELD


class BadRulesetValue(RulesetError):
    code = Code.BAD_RULESET_VALUE


# -- events -----------------------------------------------------------------
class EventError(RuleError):
    """An event that cannot happen in the round as it stands.

    ``code`` is one of the stable ids of :class:`~service.rules.codes.Code`
    (a string that is none of them raises ``ValueError``: no code is made up
    on the way); ``event`` is the 0-based index of the offending event.
    """

    def __init__(self, code: Code | str, event: int, message: str, *, text: str | None = None,
                 **context: object) -> None:
        super().__init__(f"event {event}: {message}", text=text, **context)
        self.code = Code(code)
        self.event = event
        self.reason = message
