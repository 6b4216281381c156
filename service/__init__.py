"""Sichuan (Chengdu) mahjong scoring: the public Python API.

Importing :mod:`service` loads only the pure rules core (no Flask, no Redis).

>>> from service import parse_hand, validate, ting, discards, score, Ruleset
>>> ting("2344567p345789s").ting
True
"""

from .rules.api import (
    Ruleset,
    Stakes,
    Validation,
    discards,
    is_win,
    parse_hand,
    score,
    settle,
    settle_coins,
    shanten,
    shanten_analysis,
    shanten_options,
    ting,
    useful_tiles,
    validate,
)

__all__ = ["Ruleset", "Stakes", "Validation", "discards", "is_win", "parse_hand", "score", "settle",
           "settle_coins", "shanten", "shanten_analysis", "shanten_options", "ting", "useful_tiles", "validate"]
