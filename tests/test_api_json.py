"""JSON in and out of the HTTP layer: orjson gives what :mod:`json` gave, bytes and errors alike.

Responses (:func:`service.api.jsonio.dumps`, Flask's ``jsonify``) are compared
byte for byte with ``json.dumps(..., ensure_ascii=False, separators=(",", ":"))``;
request bodies (:func:`service.api.smorest.parse_json_body`) with the
:mod:`json`-only parser, value *and type* for what decodes (``1``, ``1.0`` and
``True`` are not the same answer) and the problem's detail for what does not.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import example, given, strategies as st

from service.api import create_app
from service.api.jsonio import dumps
from service.api.problems import MalformedJSON
from service.api.smorest import parse_json_body, parse_json_body_stdlib

# strings with what JSON encoders trip on: non-ASCII, controls, quotes, U+2028, lone surrogates
_chars = st.one_of(st.characters(), st.sampled_from("\x00\x1f\x7f\"\\/\u2028\u2029中\U0001F600\ud800\udfff"))
_text = st.text(_chars, max_size=12)
_scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1), st.integers(), st.integers(min_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False), _text,
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_text, inner, max_size=4)),
    max_leaves=20,
)


def _stdlib_bytes(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _outcome(fn, value):
    try:
        return "ok", fn(value)
    except Exception as exc:  # noqa: BLE001 - compared, not swallowed
        return "raised", type(exc)


@given(_values)
@example({"b": 1, "a": [1.0, -0.0, 1e16, 5e-324, 5.960464477539063e-08, "中"]})
@example({"big": 2**70, "neg": -(2**63) - 1})
@example(["\ud800"])
def test_dumps_writes_what_json_wrote(value):
    ours, theirs = _outcome(dumps, value), _outcome(_stdlib_bytes, value)
    if ours[0] == theirs[0] == "ok" and _has_float(value):
        # a float may be written in another notation of the same number (5.960464477539063e-8
        # where json wrote ...e-08): the same text once decoded, types included
        assert _typed(json.loads(ours[1])) == _typed(json.loads(theirs[1]))
    else:
        assert ours == theirs


def _has_float(value):
    return any(kind == "float" for kind, _ in _typed(value))


def test_dumps_keys_and_text_as_given():
    assert dumps({"z": 1, "a": {"y": "四川", "b": None}}) == '{"z":1,"a":{"y":"四川","b":null}}'.encode()
    # non-string keys as json writes them
    assert dumps({1: "a", True: "b", None: "c"}) == b'{"1":"b","null":"c"}'


def test_non_finite_floats_are_null():
    """The one documented difference: json wrote the non-JSON token NaN."""
    assert dumps([math.nan, math.inf, -math.inf]) == b"[null,null,null]"


def test_jsonify_is_compact_utf8_with_a_final_newline():
    app = create_app({"TESTING": True})
    with app.test_request_context():
        response = app.json.response({"b": "中", "a": [1, 2]})
        assert response.get_data() == '{"b":"中","a":[1,2]}\n'.encode()
        assert response.mimetype == "application/json"
        with pytest.raises(UnicodeEncodeError):  # as before: never a body that is not UTF-8
            app.json.response({"a": "\ud800"})
    app.debug = True  # pretty output stays Flask's own
    with app.test_request_context():
        assert app.json.response({"a": 1}).get_data() == b'{\n  "a": 1\n}\n'


# -- request bodies ---------------------------------------------------------------------
def _decode(fn, raw):
    try:
        return "ok", _typed(fn(raw))
    except MalformedJSON as exc:
        return "malformed", exc.detail


def _typed(value):
    """The value as a flat list of tokens, every scalar tagged by its type (1, 1.0 and True
    differ); iterative, for bodies nested deeper than the recursion limit."""
    out, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            out.append(("{", len(item)))
            for k, v in reversed(list(item.items())):
                stack.extend((v, k))
        elif isinstance(item, list):
            out.append(("[", len(item)))
            stack.extend(reversed(item))
        elif isinstance(item, float) and math.isnan(item):
            out.append(("float", "nan"))
        else:
            out.append((type(item).__name__, item))
    return out


@st.composite
def _bodies(draw):
    """JSON texts (escaped or not), some broken: a byte changed, cut, or one of the tricky tokens."""
    value = draw(_values)
    text = json.dumps(value, ensure_ascii=draw(st.booleans()))
    raw = text.encode("utf-8", "surrogatepass")
    how = draw(st.sampled_from(("as is", "as is", "mutate", "cut", "splice")))
    if how == "mutate" and raw:
        i = draw(st.integers(0, len(raw) - 1))
        raw = raw[:i] + bytes([draw(st.integers(0, 255))]) + raw[i + 1:]
    elif how == "cut" and raw:
        raw = raw[: draw(st.integers(0, len(raw) - 1))]
    elif how == "splice":
        token = draw(st.sampled_from((
            b"NaN", b"-Infinity", b"1e400", b"-1e400", b"1e-400", b"\xef\xbb\xbf", b"\xed\xa0\x80", b"\xff",
            b'"\\ud800"', b'"\\udc00\\ud800"', b'"\\ud83d\\ude00"', b"12345678901234567890", b"-9223372036854775809",
            b"9223372036854775807", b"1.0", b"-0", b"-0.0", b"0.1e1", b"1E+2", b" ", b"\t\r\n", b"[" * 1100,
            b"{}", b",", b"01", b"1.", b".5", b"\x00", b'"\x1f"', b"true", b"nul",
        )))
        i = draw(st.integers(0, len(raw)))
        raw = raw[:i] + token + raw[i:]
    return raw


@given(_bodies())
@example(b"[" * 1100 + b"]" * 1100)
@example(b"123456789012345678901234567890")
@example(b'{"a": 1, "a": 2.0}')
@example(b"\xef\xbb\xbf{}")
@example(b"  ")
def test_bodies_decode_as_json_decodes_them(raw):
    assert _decode(parse_json_body, raw) == _decode(parse_json_body_stdlib, raw)
