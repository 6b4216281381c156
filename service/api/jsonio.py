"""JSON in and out of the HTTP layer: orjson, and only orjson.

* :func:`loads` reads a request body as strict JSON (:class:`NotJson`, a
  ``ValueError``, with orjson's reason: malformed text, ``NaN``/``Infinity``,
  lone surrogates, bytes that are not UTF-8, a byte-order mark, trailing data,
  nesting past 1024; the views answer it with a 400 ``malformed_json``:
  :func:`service.api.smorest.parse_json`);
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
"""

from __future__ import annotations

from typing import Any

import orjson
from flask.json.provider import JSONProvider


class NotJson(ValueError):
    """A body that is not strict JSON (the message says why)."""


def loads(raw: bytes | str) -> Any:
    """A request body as strict JSON, or :class:`NotJson` saying why not."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if not raw.strip():
            raise NotJson("the request body is empty; a JSON object is expected") from None
        raise NotJson(f"invalid JSON: {exc}") from None


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
