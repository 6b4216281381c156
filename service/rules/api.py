"""The public API of the rules core, re-exported by :mod:`service`."""

from .fan import Score, Win, is_win, score
from .hand import Hand, Meld, parse_hand
from .ruleset import PRESETS, Ruleset
from .settle import Settlement, Transfer, settle
from .shanten import (
    Shanten,
    ShantenOption,
    ShantenOptions,
    UsefulTile,
    shanten,
    shanten_analysis,
    shanten_options,
    useful_tiles,
)
from .stakes import CoinSettlement, Stakes, settle_coins
from .ting import DiscardAdvice, Ting, discards, ting
from .validate import Validation, validate

__all__ = [
    "Hand", "Meld", "PRESETS", "Ruleset", "Score", "Win", "Ting", "DiscardAdvice", "Validation",
    "Settlement", "Transfer", "Stakes", "CoinSettlement", "Shanten", "ShantenOption", "ShantenOptions", "UsefulTile",
    "discards", "is_win", "parse_hand", "score", "settle", "settle_coins", "shanten", "shanten_analysis",
    "shanten_options", "ting", "useful_tiles", "validate",
]
