"""The public API of the rules core, re-exported by :mod:`service`."""

from .fan import Score, Win, is_win, score
from .hand import Hand, Meld, parse_hand
from .ruleset import PRESETS, Ruleset
from .ting import DiscardAdvice, Ting, discards, ting
from .validate import Validation, validate

try:  # settlement lands in its own module
    from .settle import settle
except ImportError:  # pragma: no cover
    settle = None

__all__ = [
    "Hand", "Meld", "PRESETS", "Ruleset", "Score", "Win", "Ting", "DiscardAdvice", "Validation",
    "discards", "is_win", "parse_hand", "score", "settle", "ting", "validate",
]
