"""The public API of the rules core, re-exported by :mod:`service`."""

from .fan import Score, Win, is_win, score
from .hand import Hand, Meld, parse_hand
from .ruleset import PRESETS, Ruleset
from .ting import DiscardAdvice, Ting, discards, ting
from .validate import Validation, validate

from .settle import Settlement, Transfer, settle
from .stakes import CoinSettlement, Stakes, settle_coins

__all__ = [
    "Hand", "Meld", "PRESETS", "Ruleset", "Score", "Win", "Ting", "DiscardAdvice", "Validation",
    "Settlement", "Transfer", "Stakes", "CoinSettlement",
    "discards", "is_win", "parse_hand", "score", "settle", "settle_coins", "ting", "validate",
]
