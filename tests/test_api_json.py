"""JSON in and out of the HTTP layer: orjson alone (:mod:`service.api.jsonio`).

Request bodies are strict JSON (``NaN``, a byte-order mark, trailing data, lone
surrogates, bytes that are not UTF-8 and nesting past 1024 are refused with
orjson's reason, as 400 problems); response bodies are compact UTF-8 with the
keys in the order the code writes them.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from service.api import create_app
from service.api.jsonio import dumps, loads
from service.api.problems import MalformedJSON
from service.api.smorest import parse_json

# JSON values orjson and json agree on: 64-bit integers, finite floats, strings without lone surrogates
_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
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
