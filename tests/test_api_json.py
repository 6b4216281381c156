"""JSON in and out of the HTTP layer: orjson (and, to name a number orjson refused, the standard library).

Request bodies are strict JSON (``NaN``, a byte-order mark, trailing data, lone
surrogates, bytes that are not UTF-8 and nesting past 1024 are refused with
orjson's reason, as 400 problems; a number past a double's range is valid JSON out of range:
422); response bodies are compact UTF-8 with the
keys in the order the code writes them.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.api import create_app
from service.api.jsonio import OUT_OF_RANGE, NotJson, OutOfRange, dumps, loads
from service.api.problems import InvalidInput, MalformedJSON
from service.api.smorest import parse_json

# JSON values orjson and json agree on: 64-bit integers, finite floats, strings without lone surrogates
_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
                     st.floats(allow_nan=False, allow_infinity=False), _text)
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(_text, inner, max_size=4)),
                       max_leaves=20)


@given(_values)
def test_a_value_goes_out_and_comes_back_as_json_reads_it(value):
    raw = dumps(value)
    assert loads(raw) == json.loads(raw.decode()) == value or value != value  # (-0.0 == 0.0 is fine)
    assert b"\n" not in raw and b": " not in raw and b", " not in raw  # compact


def test_keys_and_text_as_given():
    assert dumps({"z": 1, "a": {"y": "四川", "b": None}}) == '{"z":1,"a":{"y":"四川","b":null}}'.encode()


@pytest.mark.parametrize("raw, reason", [
    (b'{"a": NaN}', "unexpected character"),
    (b"\xef\xbb\xbf{}", "byte order mark"),
    (b"{} x", "unexpected content after document"),
    (b'"\\ud800"', "surrogate"),
    (b"\xff", "utf-8"),
    (b"[" * 1100 + b"]" * 1100, "depth limit"),
    (b"  ", "empty"),
])
def test_what_is_not_strict_json_is_refused_with_the_reason(raw, reason):
    with pytest.raises(MalformedJSON) as exc:
        parse_json(raw)
    assert reason in exc.value.detail.lower()


def test_a_malformed_body_is_a_400_problem_and_jsonify_is_compact_utf8():
    app = create_app({"TESTING": True})
    client = app.test_client()
    r = client.post("/v1/hands/ting", data=b'{"hand": NaN}', content_type="application/json")
    assert r.status_code == 400 and r.mimetype == "application/problem+json"
    assert r.get_json()["code"] == "malformed_json" and "unexpected character" in r.get_json()["detail"]
    with app.test_request_context():
        response = app.json.response({"b": "中", "a": [1, 2]})
        assert response.get_data() == '{"b":"中","a":[1,2]}'.encode()
        assert response.mimetype == "application/json"


@pytest.mark.parametrize("raw, path", [
    (b'{"hand": {"tiles": "1112345678999m"}, "win": {"tile": 1e400}}', "win.tile"),
    (b'{"hand": {"tiles": "1112345678999m", "melds": [{"type": "peng", "tile": -1E+999}]}, "win": {"tile": "9m"}}',
     "hand.melds.0.tile"),
    (b'{"hand": {"tiles": "11123456789999m"}, "win": {"tile": "9m"}, "ruleset": {"cap": 1' + b"0" * 400 + b"}}",
     "ruleset.cap"),
    (b"1e400", "_schema"),
])
def test_a_number_past_a_doubles_range_is_valid_json_out_of_range_422_naming_it(raw, path):
    """JSON allows numbers of any size; orjson refuses those past a double's: the body is still JSON, with a
    member out of range (422 naming it), not malformed (400)."""
    client = create_app({"TESTING": True}).test_client()
    r = client.post("/v1/hands/score", data=raw, content_type="application/json")
    assert r.status_code == 422 and r.mimetype == "application/problem+json", r.get_data(as_text=True)
    body = r.get_json()
    assert body["code"] == "invalid_input" and list(body["errors"]) == [path], body
    assert "out of range" in body["errors"][path][0]


def test_an_ndjson_line_with_a_number_out_of_range_is_that_lines_422():
    client = create_app({"TESTING": True}).test_client()
    lines = b'{"op": "validate", "hand": {"tiles": 1e400}}\n{"op": "validate", "hand": {"tiles": "1m"}}\n'
    r = client.post("/v1/batch", data=lines, content_type="application/x-ndjson")
    results = [json.loads(line) for line in r.get_data().splitlines()]
    assert results[0]["status"] == 422 and list(results[0]["problem"]["errors"]) == ["hand.tiles"], results[0]
    assert results[1]["status"] == 200


@pytest.mark.parametrize("raw", [b'{"a": 1e400, "b": NaN}', b'{"a": 1e400,}', b'[1e400'])
def test_a_number_out_of_range_in_text_that_is_not_json_leaves_it_malformed(raw):
    with pytest.raises(MalformedJSON):
        parse_json(raw)
    with pytest.raises(NotJson):
        loads(raw)


def test_loads_names_the_member_out_of_range_and_parse_json_makes_it_the_422():
    with pytest.raises(OutOfRange) as exc:
        loads(b'{"a": [1, {"b": 2e999}]}')
    assert exc.value.member == "a.1.b" and not isinstance(exc.value, NotJson)
    with pytest.raises(InvalidInput) as problem:
        parse_json(b'{"a": [1, {"b": 2e999}]}')
    assert problem.value.errors == {"a.1.b": [OUT_OF_RANGE]}
