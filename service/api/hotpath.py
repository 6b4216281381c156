"""The hot path: the stateless hand operations' success, answered in front of Flask.

``POST /v1/hands/validate``, ``/ting``, ``/discards`` and ``/score`` are the service's
busiest, cheapest requests: the rules core answers a ting in a few µs, while
Flask's per-request machinery alone (request and app contexts, URL adapter and
matching, hooks, signals, the response object) costs about twice what the bare
json + ``ting`` app spends in all (``bench/http_inprocess.py``; README,
"Performance").  So a WSGI layer in front of the Flask app answers the
requests it can answer by itself, with the same parts the views use:

* the body: ``Content-Type: application/json`` exactly, a ``Content-Length``
  within ``MAX_CONTENT_LENGTH``, decoded by :func:`.smorest.parse_json_body`;
* the arguments: the schema's :meth:`~.schemas._HandRequest.quick_load` (the
  common body: a hand string, a preset name, ``visible`` or a win);
* the answer: the view's own body function (:data:`.hands.HOT_PATH`), written
  as ``jsonify`` writes it (:func:`.jsonio.dumps`, a final newline);
* the request id (:func:`.observe.request_id`), one access-log line and the
  metrics (:func:`.observe.record`), and with API keys on, the key's check and
  its metric (:func:`.clients.count_per_key`).

**Everything else goes to Flask, body included, and Flask answers as it always
did**: another path, method or content type, no ``Content-Length`` or one over
the limit, a body that does not decode or that ``quick_load`` does not take, a
rule error or any other exception, an API key missing or unknown.  So every
error is Flask's problem+json, logged and counted by Flask's hooks, and a
request is logged and counted once, by whichever answered it.

It answers only while it skips nothing: every Flask hook these requests would
run (the app's and the ``hands`` blueprint's before/after/teardown hooks and
URL value preprocessors, the app-context teardowns) must be one whose work it
does itself or that does nothing to its answers (each such hook carries a
``hot_path`` attribute saying which), no Flask request signal may have a
receiver, and ``jsonify`` must be compact.  A hook added afterwards (CORS is
one) or a signal connected turns it off for the requests from then on.
``HOT_PATH = False`` in the Flask config does not install it.  The tests
compare its answers, logs and metrics with Flask's on generated bodies.
"""

from __future__ import annotations

import io
import time
from typing import Any, Callable, Iterable

from flask import Flask, signals

from .clients import count_per_key
from .jsonio import JsonProvider, dumps
from .observe import REQUEST_ID_HEADER, record, request_id
from .smorest import parse_json_body

BLUEPRINT = "hands"
_HOOK_DICTS = ("before_request_funcs", "after_request_funcs", "teardown_request_funcs", "url_value_preprocessors")
_SIGNALS = (
    signals.request_started, signals.request_finished, signals.request_tearing_down,
    signals.got_request_exception, signals.appcontext_pushed, signals.appcontext_popped,
    signals.appcontext_tearing_down,
)


def _hooks(app: Flask) -> tuple[Callable, ...]:
    """The hooks a request to the ``hands`` blueprint runs, in a comparable form."""
    found: list[Callable] = []
    for name in _HOOK_DICTS:
        hooks = getattr(app, name)
        found.extend(hooks.get(None, ()))
        found.extend(hooks.get(BLUEPRINT, ()))
    found.extend(app.teardown_appcontext_funcs)
    return tuple(found)


def unknown_hooks(app: Flask) -> list[Callable]:
    """The hooks whose work the hot path would skip (empty: it may answer)."""
    return [f for f in _hooks(app) if not getattr(f, "hot_path", None)]


class HotPath:
    """WSGI layer in front of ``wsgi_app``: answers ``routes`` when it can (see the module)."""

    def __init__(self, app: Flask, wsgi_app: Any, routes: dict[str, tuple[Any, Callable[[dict], dict]]]) -> None:
        self.app, self.wsgi_app, self.routes = app, wsgi_app, routes
        self.hooks = _hooks(app)

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        route = self.routes.get(environ.get("PATH_INFO", ""))
        if route is not None and environ.get("REQUEST_METHOD") == "POST" \
                and environ.get("CONTENT_TYPE") == "application/json":
            answer = self.answer(environ, route)
            if answer is not None:
                headers, body = answer
                start_response("200 OK", headers)
                return [body]
        return self.wsgi_app(environ, start_response)

    def active(self) -> bool:
        """Whether answering now skips none of Flask's work (see the module)."""
        app = self.app
        provider = app.json
        return (
            _hooks(app) == self.hooks
            and not any(s.receivers for s in _SIGNALS)
            and type(provider) is JsonProvider
            and not (provider.compact is False or (provider.compact is None and app.debug))
        )

    def answer(self, environ: dict, route: tuple[Any, Callable[[dict], dict]]) -> tuple[list, bytes] | None:
        """The headers and body of a 200, or None (Flask answers; the body is left for it)."""
        start = time.perf_counter()
        if not self.active():
            return None
        app = self.app
        declared = environ.get("CONTENT_LENGTH") or ""
        if not (declared.isascii() and declared.isdigit()):  # digits only, as werkzeug reads it
            return None
        length = int(declared)
        limit = app.config.get("MAX_CONTENT_LENGTH")
        if length <= 0 or (limit is not None and length > limit):
            return None
        raw = environ["wsgi.input"].read(length)
        environ["wsgi.input"] = io.BytesIO(raw)  # Flask reads it again if it answers
        if len(raw) != length:
            return None
        keys = app.extensions.get("api_keys")
        name = None
        if keys:
            given = environ.get("HTTP_X_API_KEY")
            name = keys.name_of(given) if given is not None else None
            if name is None:
                return None  # Flask says why (401)
        schema, body_of = route
        try:
            args = schema.quick_load(parse_json_body(raw))
            if args is None:
                return None
            body = dumps(body_of(args), app.json.default) + b"\n"
        except Exception:  # noqa: BLE001 - any error, a rule's or a bug: Flask answers, logs and counts it
            return None
        rid = request_id(environ)
        rule = environ["PATH_INFO"]
        record(rule, "POST", rule, 200, time.perf_counter() - start, rid)
        if keys:
            count_per_key(name, rule, 200)
        return [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                (REQUEST_ID_HEADER, rid)], body


def install(app: Flask) -> HotPath | None:
    """Put the hot path in front of ``app.wsgi_app`` (unless ``HOT_PATH`` is false or a hook
    it cannot stand in for is installed); ``app.extensions["hot_path"]`` is it, or None."""
    from .hands import HOT_PATH

    layer = None
    if app.config.get("HOT_PATH", True) and not unknown_hooks(app):
        routes = {
            rule.rule: HOT_PATH[rule.endpoint]
            for rule in app.url_map.iter_rules()
            if rule.endpoint in HOT_PATH and "POST" in (rule.methods or ()) and not rule.arguments
        }
        layer = HotPath(app, app.wsgi_app, routes)
        app.wsgi_app = layer  # type: ignore[method-assign]
    app.extensions["hot_path"] = layer
    return layer
