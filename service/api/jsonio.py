"""JSON out of the HTTP layer: orjson where it writes the bytes ``json`` would.

Every response body is compact UTF-8 JSON with the keys in insertion order
(``json.dumps(obj, ensure_ascii=False, separators=(",", ":"))``, encoded).
:func:`dumps` writes it with orjson (about 20 times faster on a ting answer)
and falls back to :mod:`json` for whatever orjson refuses, so the result and
the errors are the standard library's:

* integers beyond 64 bits, and anything orjson cannot serialize (the
  ``default`` hook raising included): :mod:`json` writes it, or raises as
  before;
* a string holding a lone surrogate: orjson refuses it, and :mod:`json`'s
  text cannot be encoded as UTF-8 either (``UnicodeEncodeError``, as before:
  the service never answers with text that is not UTF-8);
* dataclasses, dates and the like go through ``default`` (Flask's rules:
  ``asdict``, an HTTP date, ``str``), not orjson's own formats.

Two differences, about floats (no response of the service holds one): a
float may be written in another notation of the same number
(``5.960464477539063e-8`` where :mod:`json` wrote ``...e-08``), and a
non-finite one (``NaN``, ``Infinity``) is written ``null``, where :mod:`json`
wrote a token that is not JSON.

:class:`JsonProvider` is Flask's JSON provider on top of it (``jsonify``):
compact unless pretty output is asked for (debug mode, ``compact = False``),
which keeps Flask's own path.

>>> dumps({"b": [1, "中"], "a": None})
b'{"b":[1,"\\xe4\\xb8\\xad"],"a":null}'
>>> dumps({"n": 2 ** 70})  # json's turn
b'{"n":1180591620717411303424}'
>>> dumps("\\ud800")
Traceback (most recent call last):
...
UnicodeEncodeError: 'utf-8' codec can't encode character '\\ud800' in position 1: surrogates not allowed
"""

from __future__ import annotations

import json
from typing import Any, Callable

import orjson
from flask.json.provider import DefaultJSONProvider

_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def dumps(obj: Any, default: Callable[[Any], Any] | None = None) -> bytes:
    """``obj`` as compact UTF-8 JSON, keys in insertion order (see the module docstring)."""
    try:
        return orjson.dumps(obj, default=default, option=_OPTIONS)
    except orjson.JSONEncodeError:
        text = json.dumps(obj, default=default, ensure_ascii=False, separators=(",", ":"))
        return text.encode("utf-8")


class JsonProvider(DefaultJSONProvider):
    """Flask's provider with :func:`dumps` for compact responses (``jsonify``).

    ``ensure_ascii`` and ``sort_keys`` are off (the service's bodies are UTF-8,
    keys in the order the code writes them); ``loads`` and ``dumps`` with other
    arguments are Flask's own.
    """

    ensure_ascii = False
    sort_keys = False

    def response(self, *args: Any, **kwargs: Any):
        if self.compact is False or (self.compact is None and self._app.debug):
            return super().response(*args, **kwargs)
        obj = self._prepare_response_obj(args, kwargs)
        return self._app.response_class(dumps(obj, self.default) + b"\n", mimetype=self.mimetype)
