"""The ``dump_*`` functions write every answer; the response schemas document them, and agree.

For generated hands and rounds, for every operation, the body the endpoint's code writes
(``hands.*_body``, ``rounds.settle_body``: the ``dump_*`` functions of service/api/schemas.py, which
batch items use too):

* validates against the operation's response schema (``validate()`` finds nothing: no required member
  missing, no member the schema does not document, each of its documented type);
* is given back to the byte (encoded as the service encodes it, orjson) by the schema's own dump of it:
  the schema names each member as the body does;
* and, over all the bodies of a test, every member the schema documents (nested ones too) was written
  by some body: the schema documents nothing the service never writes.

So a change to a schema or to a ``dump_*`` alone fails here.  Each test also checks that its inputs
reached the shapes that differ (a 根 with its ``count``, no 大叫, stakes before and after the round's
end, ...), not only rule errors.
"""

from __future__ import annotations

from collections import Counter

import marshmallow as ma
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from marshmallow import ValidationError, fields

from service.api import hands, rounds
from service.api import schemas as s
from service.api.app import create_app
from service.api.jsonio import dumps, loads
from service.api.problems import FieldRuleError
from service.rules.errors import RuleError
from service.rules.ruleset import PRESETS
from tests.test_api_properties import hands as any_hands
from tests.test_api_properties import rulesets, tiles, ting_hands, winning_hands
from tests.test_settle_properties import rounds as valid_rounds
from tests.test_settle_properties import voids_arg

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))

OPS = {
    "validate": (s.ValidateRequest(), hands.validate_result, hands.validate_body, s.ValidateResponse()),
    "ting": (s.TingRequest(), hands.ting_result, hands.ting_body, s.TingResponse()),
    "discards": (s.DiscardsRequest(), hands.discards_result, hands.discards_body, s.DiscardsResponse()),
    "score": (s.ScoreRequest(), hands.score_result, hands.score_body, s.ScoreResponse()),
    "settle": (s.SettleRequest(), rounds.settle_result, rounds.settle_body, s.SettleResponse()),
    "shanten": (s.ShantenRequest(), hands.shanten_result, hands.shanten_body, s.ShantenResponse()),
}


WRITTEN: dict[str, Counter] = {op: Counter() for op in OPS}
"""op → the member paths its bodies were seen to write."""


def documented(schema: ma.Schema, prefix: str = "") -> set[str]:
    """The member paths a response schema documents (``waits[].patterns[].count``)."""
    out = set()
    for name, field in schema.fields.items():
        path = prefix + (field.data_key or name)
        out.add(path)
        inner = field.inner if isinstance(field, fields.List) else field
        if isinstance(inner, fields.Nested):
            out |= documented(inner.schema, path + ("[]." if inner is not field else "."))
    return out


def written(body: dict, prefix: str = "") -> set[str]:
    """The member paths of a body (objects in lists under ``name[]``)."""
    out = set()
    for name, value in body.items():
        path = prefix + name
        out.add(path)
        if isinstance(value, dict):
            out |= written(value, path + ".")
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    out |= written(item, path + "[].")
    return out


def same_body(op: str, request: dict) -> dict | None:
    """The body of ``request`` to ``op``, checked against its schema; None for a refused one."""
    load, _, body_of, response = OPS[op]
    try:
        args = load.load(request)
        body = body_of(args)
    except (ValidationError, RuleError, FieldRuleError):
        return None
    encoded = dumps(body)
    assert response.validate(loads(encoded)) == {}, (op, response.validate(loads(encoded)))
    assert dumps(response.dump(body)) == encoded, op
    WRITTEN[op].update(written(body))
    return body


def all_documented_written(op: str) -> None:
    missing = documented(OPS[op][3]) - set(WRITTEN[op])
    assert not missing, (op, missing)


def patterns_of(body: dict) -> list[dict]:
    return [p for w in body.get("waits", ()) for p in w["patterns"]] + body.get("patterns", [])


def covered(seen: Counter, *shapes: str) -> None:
    missing = [x for x in shapes if not seen[x]]
    assert not missing, (missing, seen)


visible = st.lists(tiles, max_size=4).map("".join)
with_visible = st.fixed_dictionaries({}, optional={"visible": visible, "ruleset": rulesets})


def test_validate():
    seen: Counter = Counter()

    @SETTINGS
    @given(hand=st.integers(12, 15).flatmap(any_hands), extra=with_visible)
    def check(hand, extra):
        body = same_body("validate", {"hand": hand, **extra})
        if body is not None:
            seen["problems" if body["problems"] else "no problems"] += 1
            seen["complete" if body["complete"] else "incomplete"] += 1

    check()
    covered(seen, "problems", "no problems", "complete", "incomplete")
    all_documented_written('validate')


def test_ting():
    seen: Counter = Counter()

    @SETTINGS
    @given(hand=st.one_of(any_hands(13), ting_hands(), ting_hands()), extra=with_visible)
    def check(hand, extra):
        body = same_body("ting", {"hand": hand, **extra})
        if body is not None:
            seen["waits" if body["waits"] else "no waits"] += 1
            seen["no dajiao" if body["dajiao"] is None else "dajiao"] += 1
            seen.update("count" if "count" in p else "no count" for p in patterns_of(body))

    check()
    covered(seen, "waits", "no waits", "dajiao", "no dajiao", "count", "no count")
    all_documented_written('ting')


def test_discards():
    seen: Counter = Counter()

    @SETTINGS
    @given(hand=st.one_of(any_hands(14), winning_hands()), extra=with_visible)
    def check(hand, extra):
        body = same_body("discards", {"hand": hand, **extra})
        if body is not None:
            seen["options" if body["options"] else "no options"] += 1
            seen["complete" if body["complete"] else "incomplete"] += 1
            seen.update("count" if "count" in p else "no count"
                        for o in body["options"] for p in patterns_of(o))

    check()
    covered(seen, "options", "no options", "complete", "incomplete", "count", "no count")
    all_documented_written('discards')


def test_shanten():
    seen: Counter = Counter()

    @SETTINGS
    @given(hand=st.one_of(any_hands(13), any_hands(14), ting_hands(), winning_hands()), extra=with_visible)
    def check(hand, extra):
        body = same_body("shanten", {"hand": hand, **extra})
        if body is not None:
            seen["options" if "options" in body else "tiles"] += 1
            seen["null" if body["shanten"] is None else "number"] += 1
            seen["useful" if body.get("tiles") or any(o["tiles"] for o in body.get("options", ())) else "none"] += 1

    check()
    covered(seen, "options", "tiles", "null", "number", "useful", "none")
    all_documented_written('shanten')


flags = st.fixed_dictionaries({}, optional={
    k: st.booleans() for k in ("self_drawn", "after_kong", "robbing_kong", "last_tile", "heavenly", "earthly")})


def test_score():
    seen: Counter = Counter()

    @SETTINGS
    @given(hand=st.one_of(any_hands(14), winning_hands(), winning_hands()), flags=flags,
           ruleset=st.one_of(st.none(), rulesets), data=st.data())
    def check(hand, flags, ruleset, data):
        tile = data.draw(st.sampled_from([hand["tiles"][i:i + 2] for i in range(0, len(hand["tiles"]), 2)]
                                         or ["1m"]))
        request = {"hand": hand, "win": {"tile": tile, **flags}}
        if ruleset is not None:
            request["ruleset"] = ruleset
        body = same_body("score", request)
        if body is not None:
            seen["capped" if body["capped"] else "not capped"] += 1
            seen.update("count" if "count" in p else "no count" for p in body["patterns"])

    check()
    covered(seen, "capped", "not capped", "count", "no count")
    all_documented_written('score')


def test_settle():
    seen: Counter = Counter()

    @SETTINGS
    @given(case=valid_rounds(), staked=st.booleans(), data=st.data())
    def check(case, staked, data):
        spec, m = case
        request = {"ruleset": spec, "dealer": m.dealer, "voids": voids_arg(m), "events": m.events}
        if staked:
            request["stakes"] = data.draw(st.fixed_dictionaries(
                {"coin_per_point": st.integers(1, 5),
                 "bankrolls": st.lists(st.integers(0, 500), min_size=m.n, max_size=m.n)},
                optional={"fee": st.integers(0, 3)}))
        body = same_body("settle", request)
        assert body is not None  # (valid rounds: every one settles)
        seen["transfers" if body["transfers"] else "no transfers"] += 1
        seen["ended" if body["ended"] else "playing"] += 1
        if "coins_delta" not in body:
            seen["no stakes"] += 1
        else:
            seen["coins" if body["coins_delta"] is not None else "no coins yet"] += 1

    check()
    covered(seen, "transfers", "no transfers", "ended", "playing", "no stakes", "coins", "no coins yet")
    all_documented_written('settle')


def test_rulesets_dumped_by_their_schema():
    """``GET /v1/rulesets`` is written by flask-smorest with :class:`RulesetsResponse`: every preset
    with every field, as the core stores a ruleset."""
    response = create_app({"TESTING": True}).test_client().get("/v1/rulesets")
    assert response.status_code == 200
    body = response.get_json()
    assert body == {"default": "xuezhan", "presets": {name: r.as_dict() for name, r in PRESETS.items()}}
    assert s.RulesetsResponse().validate(body) == {}
