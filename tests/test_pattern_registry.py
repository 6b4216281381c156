"""The pattern registry (service/rules/patterns.py) is the one place a pattern lives.

A made-up optional extra, 小小 (+1 fan when the hand has no meld and every tile is a 1, 2 or 3), is added
to a copy of the package by editing only ``patterns.py``; in a fresh interpreter on that copy, ting,
discard advice, score, settle, the ruleset's fields and the app's pattern table all honour it: off by
default, on with ``{"xiaoxiao": true}``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from service.rules.fan import context
from service.rules.patterns import HAND, PATTERNS, REGISTRY, RUNS, SITUATION, SWITCHES, base_candidates
from service.rules.ruleset import XUEZHAN, Ruleset

ROOT = Path(__file__).resolve().parent.parent

XIAOXIAO = '''
    Pattern("xiaoxiao", "小小", "Little ones", False, 1, 1, reads=HAND, option="xiaoxiao",
            test=lambda f: f.melds == 0 and all(k < 125 for k in f.keys)),  # (ranks 1-3: the three lowest digits)
'''
LAST_ENTRY = 'reads=RUNS, test=_yitiaolong, option="yitiaolong"),\n'

CHECKS = r'''
import json, sys
import service
from service import Ruleset, discards, score, settle, ting
from service.rules.hand import parse_hand
from service.rules.patterns import PATTERNS, SWITCHES
from service.api import create_app

assert service.__file__.startswith(sys.argv[1]), service.__file__   # the copy, not the work tree
ON = {"xiaoxiao": True}
out = {"switches": list(SWITCHES), "default": Ruleset.from_spec(None).xiaoxiao,
       "on": Ruleset.from_spec(ON).xiaoxiao}

# score: a hand of 1-3s with no meld, and one with a 4
def ids(s):
    return [p.id for p in s.patterns]
small = score("11122233m112233p", "3p")
small_on = score("11122233m112233p", "3p", ruleset=ON)
big_on = score("11122233m223344p", "4p", ruleset=ON)
melded_on = score(parse_hand("22233m112233p", melds=[{"type": "peng", "tile": "1m"}]), "3p", ruleset=ON)
out["score"] = [[small.raw_fan, ids(small)], [small_on.raw_fan, ids(small_on)], [big_on.raw_fan, ids(big_on)],
                [melded_on.raw_fan, ids(melded_on)]]

# ting: every wait valued by the pattern (the fast path of a ruleset without hand extras must not apply)
def waits(t):
    return {str(w.tile): [w.raw_fan, [p.id for p in w.patterns]] for w in t.waits}
out["ting"] = [waits(ting("1112223m112233p")), waits(ting("1112223m112233p", ruleset=ON))]

# discard advice: the options' waits and 大叫
def advice(a):
    return {str(o.discard): [o.dajiao.points, {str(w.tile): w.raw_fan for w in o.waits}] for o in a.options}
out["discards"] = [advice(discards("11122233m112233p")), advice(discards("11122233m112233p", ruleset=ON))]

# settle: a win by discard with its hand
def round_(rules):
    events = [{"type": "hu", "from": 1, "tile": "3p", "winners": [{"seat": 0, "hand": {"tiles": "11122233m112233p"}}]}]
    s = settle(events, dealer=0, ruleset=rules)
    return [s.deltas[0], [t.points for t in s.transfers]]
out["settle"] = [round_(None), round_(ON)]

# the service: the app's pattern table and the rooms' fields, and the HTTP score
client = create_app({"TESTING": True}).test_client()
served = client.get("/web/patterns.json").get_json()
out["served"] = [p for p in served if p["id"] == "xiaoxiao"]
out["room"] = client.get("/v1/rulesets").get_json()["presets"]["xuezhan"].get("xiaoxiao")
r = client.post("/v1/hands/score", json={"hand": {"tiles": "11122233m112233p"}, "win": {"tile": "3p"}, "ruleset": ON})
out["http_score"] = [r.status_code, [p["id"] for p in r.get_json().get("patterns", [])]]
print(json.dumps(out))
'''


def test_a_new_optional_pattern_is_one_entry_in_the_registry(tmp_path):
    copy = tmp_path / "tree"
    shutil.copytree(ROOT / "service", copy / "service", ignore=shutil.ignore_patterns("__pycache__"))
    patterns = copy / "service" / "rules" / "patterns.py"
    text = patterns.read_text(encoding="utf-8")
    assert text.count(LAST_ENTRY) == 1
    patterns.write_text(text.replace(LAST_ENTRY, LAST_ENTRY + XIAOXIAO), encoding="utf-8")
    changed = [p.relative_to(copy).as_posix() for p in (copy / "service").rglob("*")
               if p.is_file() and p.read_bytes() != (ROOT / p.relative_to(copy)).read_bytes()]
    assert changed == ["service/rules/patterns.py"]

    env = dict(os.environ, PYTHONPATH=str(copy))
    done = subprocess.run([sys.executable, "-c", CHECKS, str(copy)], cwd=copy, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])

    # the ruleset: a switch of its own, off by default
    assert out["switches"][-1] == "xiaoxiao" and out["default"] is False and out["on"] is True
    # score: +1 fan where it holds (no meld, every tile 1-3), nothing where it does not
    (off_fan, off_ids), (on_fan, on_ids), big, melded = out["score"]
    assert "xiaoxiao" not in off_ids
    assert on_fan == off_fan + 1 and on_ids == off_ids + ["xiaoxiao"]
    assert "xiaoxiao" not in big[1] and "xiaoxiao" not in melded[1]
    # ting: each wait of 1-3 gains it, a wait on a 4 does not
    off, on = out["ting"]
    assert off.keys() == on.keys() and any(t[0] in "123" for t in on) and any(t[0] not in "123" for t in on)
    for tile, (fan, pats) in on.items():
        holds = tile[0] in "123"
        assert fan == off[tile][0] + holds and ("xiaoxiao" in pats) == holds, (tile, on, off)
    # discard advice: the same in each option's waits, and its 大叫 follows
    off, on = out["discards"]
    assert off.keys() == on.keys()
    gained = 0
    for d, (dajiao, ws) in on.items():
        for tile, fan in ws.items():
            assert fan == off[d][1][tile] + (tile[0] in "123" and d[0] not in "456789"), (d, tile)
            gained += fan - off[d][1][tile]
        assert dajiao >= off[d][0]
    assert gained > 0
    # settle: the winner's points double (one fan more, exponential scoring)
    (off_delta, off_pts), (on_delta, on_pts) = out["settle"]
    assert on_pts == [2 * p for p in off_pts] and on_delta == 2 * off_delta > 0
    # the service: the app's pattern table lists it with its option; the rooms have the field, off
    assert out["served"] == [{"id": "xiaoxiao", "name": "小小", "name_en": "Little ones", "base": False,
                              "fan": {"qq": 1, "chengdu": 1}, "option": "xiaoxiao", "on": True}]
    assert out["room"] is False
    assert out["http_score"][0] == 200 and "xiaoxiao" in out["http_score"][1]


def test_everything_about_patterns_is_derived_from_the_registry():
    """The switches are the options of the registry; the ruleset has each, off; ting's fast path is off
    exactly when an extra reading the hand (or holding on a plain discard) is on."""
    assert SWITCHES == tuple(p.option for p in REGISTRY if p.option is not None and p.on is True)
    assert all(getattr(XUEZHAN, name) is False for name in SWITCHES)
    assert context(XUEZHAN).plain
    for p in REGISTRY:
        if p.option in SWITCHES:
            ctx = context(Ruleset.from_spec({p.option: True}))
            assert ctx.plain == (p.reads == SITUATION), p.id
            assert ctx.runs == (p.reads == RUNS) and ctx.hand == (p.reads in (HAND, RUNS)), p.id
    assert context(Ruleset.from_spec({"zimo": "fan"})).plain  # (自摸加番 never holds on a discard)
    assert context(Ruleset.from_spec({"kaertiao": True})).asks_wait == tuple(t == 19 for t in range(27))


def test_the_base_pattern_is_a_filter_over_the_registry():
    """Which base patterns a shape qualifies for: those whose requirements its facts meet, in the table."""
    from service.rules.patterns import FLUSH, FOUR, PAIRS, STANDARD, TRIPLETS

    ids = lambda mask, table="qq": [p.id for p in base_candidates(mask, table)]  # noqa: E731
    assert ids(STANDARD) == ["pinghu"]
    assert ids(STANDARD | TRIPLETS | FLUSH) == ["pinghu", "duiduihu", "qingyise", "qingdui"]
    assert ids(PAIRS | FOUR | FLUSH) == ["pinghu", "qingyise", "qidui", "longqidui", "qingqidui", "qinglongqidui"]
    assert ids(PAIRS | FOUR | FLUSH, "chengdu") == ["pinghu", "qingyise", "qidui", "qingqidui"]
    assert PATTERNS["longqidui"].takes_gen and not PATTERNS["qidui"].takes_gen
