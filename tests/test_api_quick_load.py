"""The hand requests' ``quick_load`` gives exactly what marshmallow's ``load`` gives, or declines.

Bodies are generated around the schema (the right members and wrong ones, the
right types and wrong ones, strings at and past their bounds, valid and
invalid notation and preset names): for each, either ``quick_load`` declines
(None: marshmallow decides, as for every error of the schema) or it returns
the very result of ``load``, or raises the very same rule error (code, field
path, message).
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, strategies as st
from marshmallow import ValidationError

from service.api import schemas as s
from service.api.problems import FieldRuleError
from service.rules.events import MAX_HAND_CHARS, MAX_SUIT_CHARS
from service.rules.ruleset import PRESETS

SCHEMAS = (s.TingRequest(), s.ValidateRequest(), s.DiscardsRequest(), s.ScoreRequest())

_junk = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.floats(allow_nan=False), st.just([]),
                  st.just({}), st.just([{"type": "peng", "tile": "1m"}]))
_hand_text = st.one_of(
    st.sampled_from(["1112345678999m", "2344567p345789s", "123m456p789s11m2p", "1m", "", "11122233344456m",
                     "1112345678999x", "五万", "1m" * 100, "1" * MAX_HAND_CHARS + "m", "1" * (MAX_HAND_CHARS + 1)]),
    st.text(alphabet="123456789mps万筒条 ,", max_size=30),
)
_suit = st.one_of(st.none(), st.sampled_from(["m", "p", "s", "万", "x", "", "mm", "m" * MAX_SUIT_CHARS,
                                              "m" * (MAX_SUIT_CHARS + 1)]))
_preset = st.one_of(st.sampled_from(list(PRESETS) + ["", "nope", "XUEZHAN", "x" * 64, "x" * 65]), st.text(max_size=8))


@st.composite
def _bodies(draw):
    hand: dict = {}
    if draw(st.integers(0, 9)):
        hand["tiles"] = draw(st.one_of(_hand_text, _hand_text, _junk, st.lists(st.sampled_from(["1m", "2p"]))))
    if draw(st.booleans()):
        hand["melds"] = draw(st.one_of(st.just([]), st.just([]), _junk))
    if draw(st.booleans()):
        hand["void"] = draw(st.one_of(_suit, _suit, _junk))
    if draw(st.integers(0, 9)) == 0:
        hand[draw(st.sampled_from(["extra", "Tiles", "meld"]))] = 1
    body: dict = {"hand": hand if draw(st.integers(0, 9)) else draw(_junk)}
    if draw(st.integers(0, 9)) == 0:
        del body["hand"]
    if draw(st.booleans()):
        body["ruleset"] = draw(st.one_of(_preset, _preset, _junk, st.just({"preset": "xuezhan"})))
    if draw(st.booleans()):
        body["visible"] = draw(st.one_of(_hand_text, _hand_text, _junk, st.just("x" * 201)))
    if draw(st.booleans()):
        body["win"] = draw(st.one_of(_wins(), _wins(), _junk))
    if draw(st.integers(0, 9)) == 0:
        body[draw(st.sampled_from(["extra", "Hand"]))] = draw(_junk)
    return body if draw(st.integers(0, 19)) else draw(_junk)


_FLAGS = ("self_drawn", "after_kong", "robbing_kong", "last_tile", "heavenly", "earthly")


@st.composite
def _wins(draw):
    win: dict = {}
    if draw(st.integers(0, 9)):
        win["tile"] = draw(st.one_of(st.sampled_from(["9m", "5m", "1m", "5p", "x", "", "五万", "9" * 16, "9" * 17]),
                                     _junk))
    for flag in draw(st.lists(st.sampled_from(_FLAGS), max_size=3)):
        win[flag] = draw(st.one_of(st.booleans(), st.booleans(), _junk))
    if draw(st.integers(0, 9)) == 0:
        win["extra"] = True
    return win


def _outcome(fn, body):
    try:
        return "ok", fn(body)
    except FieldRuleError as exc:
        return "rule", (exc.path, exc.error.code, str(exc))
    except ValidationError as exc:
        return "invalid", exc.messages


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda x: type(x).__name__)
@given(body=_bodies())
@example(body={"hand": {"tiles": "1112345678999m"}})
@example(body={"hand": {"tiles": "1112345678999m", "melds": [], "void": None}, "ruleset": "xuezhan",
               "visible": "5m5m"})
@example(body={"hand": {"tiles": "1112345678999x"}, "ruleset": "nope"})  # the ruleset's error first
@example(body={"hand": {"tiles": "1112345678999m"}, "visible": ""})
@example(body={"hand": {"tiles": "1112345678999m", "void": ""}})
# each bound, at and past it
@example(body={"hand": {"tiles": "1112345678999m", "void": "m" * MAX_SUIT_CHARS}})
@example(body={"hand": {"tiles": "1112345678999m", "void": "m" * (MAX_SUIT_CHARS + 1)}})
@example(body={"hand": {"tiles": "1" * MAX_HAND_CHARS}})
@example(body={"hand": {"tiles": "1" * (MAX_HAND_CHARS + 1)}})
@example(body={"hand": {"tiles": "1112345678999m"}, "ruleset": "x" * 64})
@example(body={"hand": {"tiles": "1112345678999m"}, "ruleset": "x" * 65})
@example(body={"hand": {"tiles": "1112345678999m"}, "visible": "5m" * 100})
@example(body={"hand": {"tiles": "1112345678999m"}, "visible": "5m" * 100 + "5"})
@example(body={"hand": {"tiles": "1112345678999m", "melds": [{"type": "peng", "tile": "1m"}]}})
@example(body={"hand": {"tiles": "1112345678999m"}, "visible": None})
@example(body={"hand": {"tiles": "1112345678999m"}, "ruleset": None})
@example(body={"hand": {"tiles": "1112345678999m9m"}, "win": {"tile": "9m", "self_drawn": True}})
@example(body={"hand": {"tiles": "1112345678999m9m"}, "win": {"tile": "9" * 16, "self_drawn": 1}})
@example(body={"hand": {"tiles": "1112345678999m9m"}, "win": {"tile": "9" * 17}})
@example(body={"hand": {"tiles": "1112345678999m9m"}, "win": {"tile": "9m", "earthly": True, "last_tile": False}})
@example(body={"hand": {"tiles": "1112345678999m9m"}, "win": {"tile": "9m", "extra": True}})
@example(body={"hand": {"tiles": "1112345678999m9m"}, "win": {"tile": "x", "heavenly": True, "earthly": True}})
@example(body={"hand": {"tiles": "1112345678999m9m"}, "win": {"tile": "9m", "heavenly": True, "earthly": True},
               "ruleset": "nope"})
def test_quick_load_is_load_or_declines(schema, body):
    quick = _outcome(schema.quick_load, body)
    if quick == ("ok", None):
        return  # declined: load decides
    assert quick == _outcome(schema.load, body)


def test_the_common_bodies_are_taken():
    """The bodies of bench/load_ting.py and of most clients do take the quick path."""
    ting = s.TingRequest()
    for body in ({"hand": {"tiles": "1112345678999m"}},
                 {"hand": {"tiles": "2344567p345789s", "melds": [], "void": "m"}, "ruleset": "xuezhan",
                  "visible": "5m"}):
        assert ting.quick_load(body) == ting.load(body)
    score = s.ScoreRequest()
    body = {"hand": {"tiles": "1112345678999m9m"}, "win": {"tile": "9m", "self_drawn": True}, "ruleset": "xueliu"}
    assert score.quick_load(body) == score.load(body) and score.quick_load(body) is not None
    assert score.quick_load({"hand": {"tiles": "1112345678999m9m"}}) is None  # no win: marshmallow's error
