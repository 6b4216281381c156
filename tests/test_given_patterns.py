"""Given patterns must agree with the win (docs/rules.md#s15.1): ``patterns_contradict_win``.

Worked examples from the rule, then properties: the patterns a win's flags call for are always
accepted, and one more pattern that says the win happened another way is always refused.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.rules.errors import EventError
from service.rules.settle import settle

ADDED_5M = {"type": "kong", "seat": 2, "kind": "added", "tile": "5m"}
DIRECT_5M = {"type": "kong", "seat": 2, "kind": "direct", "tile": "5m", "from": 1}
CONCEALED_5M_BY_0 = {"type": "kong", "seat": 0, "kind": "concealed", "tile": "5m"}


def hu(frm, patterns, fan=2, seat=0, tile="6m", **flags):
    return {"type": "hu", "from": frm, "tile": tile, "winners": [{"seat": seat, "fan": fan, "patterns": patterns}],
            **flags}


def refusal(events, ruleset="xuezhan", dealer=0) -> EventError:
    with pytest.raises(EventError) as exc:
        settle(events, dealer=dealer, ruleset=ruleset)
    assert exc.value.code == "patterns_contradict_win"
    return exc.value


def test_the_issues_example_is_refused_naming_the_pattern_and_the_flag():
    """A 抢杠胡 chip without the robbing_kong flag used to pay as a plain win with the kong kept."""
    exc = refusal([ADDED_5M, hu(2, ["qiangganghu"], tile="5m")])
    assert exc.event == 1
    assert "qiangganghu" in exc.reason and "robbing_kong" in exc.reason
    assert exc.context["field"] == "winners.0.patterns.0"


def test_robbing_the_kong_needs_its_pattern_once_patterns_are_given():
    exc = refusal([ADDED_5M, hu(2, ["qingyise"], tile="5m", robbing_kong=True)])
    assert "robbing_kong" in exc.reason and "qiangganghu" in exc.reason
    # listed with its flag: 2 fan = 12 from the robbed seat, whose kong (6 from each of three) is reversed
    s = settle([ADDED_5M, hu(2, ["qingyise", "qiangganghu"], tile="5m", robbing_kong=True)], dealer=0)
    assert s.deltas == (12, 0, -12, 0)


def test_gangshangpao_is_asked_for_only_where_it_is_worth_fan():
    """Under the chengdu table 杠上炮 is worth 0: a 杠上炮 win need not list it (§15.1's "if")."""
    events = [DIRECT_5M, hu(2, ["qingyise"], fan=3, after_kong=True)]
    assert settle(events, dealer=0, ruleset="chengdu-points").deltas == (3, 0, -3, 0)
    refusal(events)  # worth 1 fan under the qq table: it must be listed
    # listed: 4 fan = 48, and the discarder passes its kong's 6 on (呼叫转移)
    s = settle([DIRECT_5M, hu(2, ["qingyise", "gangshangpao"], fan=4, after_kong=True)], dealer=0)
    assert s.deltas == (54, -6, -48, 0)


@pytest.mark.parametrize("pattern, flags, frm, ruleset", [
    ("gangshanghua", {"after_kong": True}, 2, "xuezhan"),     # after a kong, but on a discard: 杠上炮
    ("gangshangpao", {}, None, "xuezhan"),                    # self-drawn, no kong
    ("haidi", {}, 2, {"preset": "xuezhan", "haidi": True}),   # not the last tile
    ("zimo", {}, 2, {"preset": "xuezhan", "zimo": "fan"}),    # 自摸加番 on a discard
    ("tianhu", {}, None, "xuezhan"),                          # not heavenly
    ("dihu", {}, 2, "chengdu-points"),                        # not earthly
])
def test_a_pattern_that_says_the_win_happened_otherwise_is_refused(pattern, flags, frm, ruleset):
    events = [CONCEALED_5M_BY_0] if flags.get("after_kong") and frm is None else []
    if flags.get("after_kong"):
        events = [{"type": "kong", "seat": frm, "kind": "concealed", "tile": "5m"}]
    exc = refusal(events + [hu(frm, ["qingyise", pattern], **flags)], ruleset=ruleset)
    assert pattern in exc.reason and exc.context["field"] == "winners.0.patterns.1"


def test_only_if_patterns_need_not_be_listed():
    """海底 and 自摸加番 are "only with" their flag: the flag alone asks for nothing (the fan given says all)."""
    rules = {"preset": "xuezhan", "haidi": True, "zimo": "fan"}
    s = settle([hu(None, ["qingyise"], last_tile=True)], dealer=0, ruleset=rules)
    assert s.deltas == (36, -12, -12, -12)


def test_heavenly_and_earthly_need_theirs():
    exc = refusal([hu(None, ["qingyise"], heavenly=True)])
    assert "heavenly" in exc.reason and "tianhu" in exc.reason
    exc = refusal([hu(None, ["qingyise"], seat=1, earthly=True)])
    assert "earthly" in exc.reason and "dihu" in exc.reason
    assert settle([hu(None, ["tianhu"], fan=6, heavenly=True)], dealer=0).deltas == (576, -192, -192, -192)


def test_no_patterns_no_check():
    """A winner given by fan alone (or with an empty list) says nothing of how it won."""
    for patterns in ([], None):
        winner = {"seat": 0, "fan": 2} | ({} if patterns is None else {"patterns": patterns})
        s = settle([ADDED_5M, {"type": "hu", "from": 2, "tile": "5m", "robbing_kong": True, "winners": [winner]}],
                   dealer=0)
        assert s.deltas == (12, 0, -12, 0)


def test_a_hand_given_is_scored_and_never_contradicts():
    """Patterns are only given with a fan: a hand's patterns come from the hand and the flags."""
    s = settle([ADDED_5M, {"type": "hu", "from": 2, "tile": "5m", "robbing_kong": True,
                           "winners": [{"seat": 0, "hand": {"tiles": "345678m11122299p"}}]}], dealer=0)
    assert s.winners == (0,) and s.deltas[0] > 0


# -- properties ----------------------------------------------------------------------------
HOW = ("qiangganghu", "gangshanghua", "gangshangpao", "haidi", "zimo", "tianhu", "dihu")

# one situation per way of winning: (events before, the hu's discarder, its flags, the patterns it calls for)
SITUATIONS = [
    ([], 2, {}, set()),
    ([], None, {}, set()),
    ([ADDED_5M], 2, {"robbing_kong": True, "tile": "5m"}, {"qiangganghu"}),
    ([CONCEALED_5M_BY_0], None, {"after_kong": True}, {"gangshanghua"}),
    ([{"type": "kong", "seat": 2, "kind": "concealed", "tile": "5m"}], 2, {"after_kong": True}, {"gangshangpao"}),
    ([], 2, {"last_tile": True}, set()),
    ([], None, {"heavenly": True}, {"tianhu"}),
    ([], None, {"earthly": True, "seat": 1}, {"dihu"}),
]
# the patterns each situation may list besides those it calls for
ALLOWED = [set(), {"zimo"}, set(), {"zimo"}, set(), {"haidi"}, {"zimo"}, {"zimo"}]
RULES = {"preset": "xuezhan", "haidi": True, "zimo": "fan"}


@given(st.integers(0, len(SITUATIONS) - 1), st.sets(st.sampled_from(HOW)), st.sampled_from(["qingyise", "pinghu"]))
def test_patterns_are_refused_exactly_when_they_disagree_with_the_flags(which, extra, base):
    before, frm, flags, called = SITUATIONS[which]
    flags = dict(flags)
    seat, tile = flags.pop("seat", 0), flags.pop("tile", "6m")
    listed = sorted(called | extra) + [base]
    events = before + [hu(frm, listed, fan=6, seat=seat, tile=tile, **flags)]
    agrees = called <= set(listed) and set(listed) - {base} <= called | ALLOWED[which]
    try:
        settle(events, dealer=0, ruleset=RULES)
    except EventError as exc:
        assert exc.code == "patterns_contradict_win" and not agrees, exc
    else:
        assert agrees
