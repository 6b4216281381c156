"""JSON in and out of the HTTP layer: orjson (the standard library only names a number orjson refused).

* :func:`loads` reads a request body as strict JSON (:class:`NotJson`, a
  ``ValueError``, with orjson's reason: malformed text, ``NaN``/``Infinity``,
  lone surrogates, bytes that are not UTF-8, a byte-order mark, trailing data,
  nesting past 1024; the views answer it with a 400 ``malformed_json``:
  :func:`service.api.smorest.parse_json`).  A number that JSON allows but orjson
  refuses (past a double's range, such as ``1e400``: orjson reads every number
  that is not a 64-bit integer as a double) is valid JSON with a value out of
  range: :class:`OutOfRange` naming its member (:func:`out_of_range`), which the
  views answer with a 422 ``invalid_input``;
* :func:`dumps` writes a response body as compact UTF-8 JSON, keys in insertion
  order (orjson refuses what is not JSON, such as an integer past 64 bits or a
  key that is not a string: nothing the service answers holds one);
* :class:`JsonProvider` is Flask's JSON provider on top of them (``jsonify``).

>>> dumps({"b": [1, "中"], "a": None})
b'{"b":[1,"\\xe4\\xb8\\xad"],"a":null}'
>>> loads(b'{"a": NaN}')
Traceback (most recent call last):
...
service.api.jsonio.NotJson: invalid JSON: unexpected character, expected a JSON value: line 1 column 7 (char 6)
>>> loads(b'{"hand": {"melds": [{"tile": 1e400}]}}')
Traceback (most recent call last):
...
service.api.jsonio.OutOfRange: hand.melds.0.tile: a number out of range (past a double's, about 1.8e308)
>>> out_of_range(b'[1, 2e999]'), out_of_range(b'{"a": NaN}'), out_of_range(b'{"a": 1}')
('1', None, None)
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
from flask.json.provider import JSONProvider

OUT_OF_RANGE = "a number out of range (past a double's, about 1.8e308)"


class NotJson(ValueError):
    """A body that is not strict JSON (the message says why)."""


class OutOfRange(ValueError):
    """A body that is JSON, but with a number past a double's range (orjson refuses it): ``member`` is
    where (its path, ``a.b.0``; ``_schema`` for the body itself)."""

    def __init__(self, member: str) -> None:
        super().__init__(f"{member}: {OUT_OF_RANGE}")
        self.member = member


def loads(raw: bytes | str) -> Any:
    """A request body as strict JSON: :class:`NotJson` saying why not, or :class:`OutOfRange` naming a
    number out of range."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if not raw.strip():
            raise NotJson("the request body is empty; a JSON object is expected") from None
        where = out_of_range(raw)
        if where is not None:
            raise OutOfRange(where) from None
        raise NotJson(f"invalid JSON: {exc}") from None


class _OutOfRange:
    """Stands for a number past a double's range in :func:`out_of_range`'s reading."""


def _number(text: str, kind: type) -> Any:
    try:
        return _OutOfRange if not math.isfinite(float(text)) else kind(text)
    except ValueError:  # (an integer past Python's digit limit for int(): out of any range)
        return _OutOfRange


def out_of_range(raw: bytes | str) -> str | None:
    """The path (``a.b.0``; ``_schema`` for the body itself) of the first number past a double's range
    in ``raw``, if ``raw`` is JSON that orjson refused only for such numbers; else None.

    Read again with the standard library's parser, which takes a number of any size (its
    ``parse_float``/``parse_int`` hooks mark those out of range), on the error path only: any other
    reason to refuse the text (``NaN``, text that is no JSON) leaves it malformed.
    """
    def constant(name: str) -> Any:
        raise ValueError(name)

    try:
        value = json.loads(raw, parse_float=lambda t: _number(t, float), parse_int=lambda t: _number(t, int),
                           parse_constant=constant)
    except (ValueError, RecursionError):
        return None

    def find(node: Any, path: str) -> str | None:
        if node is _OutOfRange:
            return path or "_schema"
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, item in items:
            found = find(item, f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
        return None

    try:
        return find(value, "")
    except RecursionError:  # (nested deeper than this reading goes: left to orjson's answer)
        return None


def dumps(obj: Any) -> bytes:
    """``obj`` as compact UTF-8 JSON, keys in insertion order.

    With orjson's default options: every body's keys are strings, and ``OPT_NON_STR_KEYS`` (which
    converts other keys) nearly doubles the cost of encoding an answer.
    """
    return orjson.dumps(obj)


class JsonProvider(JSONProvider):
    """Flask's JSON provider (``jsonify``, ``request.get_json``) with orjson: compact UTF-8, keys in
    the order the code writes them."""

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        return dumps(obj).decode()

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return loads(s)
