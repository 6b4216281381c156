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

**Appends.** ``POST /v1/tables/{id}/events`` (a table's commonest request) is
answered here too, while the ``tables`` blueprint has no hook it does not
mirror and ``tables.post_event`` is the view it was at install.  With rate
limits on, Flask-Limiter's hooks there say they are mirrored when
:class:`~.limits.AppendLimits` does their work for an append (not behind
trusted proxies, nor with a Flask-Limiter configured otherwise): it counts
the request's limits before asking the store (the client's hit, the table's
test) and after (the table's hit) and gives the ``X-RateLimit-*`` headers;
while the limiter counts in memory (Redis away) Flask answers.  The request must look
like the common one: a table id as the view takes it, ``Authorization: Bearer
<token>`` with a token of the form the service gives, an ``Idempotency-Key``
the view accepts or none, one strong ``If-Match: "<version>"`` or none, and
the JSON body as above; then it asks the store exactly as the view does
(:meth:`~service.store.tables.TableStore.append`, the event checked by the
rules in the store) and answers its :class:`~service.store.tables.Written` as
``_written`` does (201, ``Location``, ``ETag``, ``Idempotent-Replayed``).  Once
the store has been asked it is never asked again for the request: when it
refuses or fails (every error: 401, 403, 404, 409, 412, 422, 503, ...) or the
answer cannot be written here, the request goes to Flask with the store's
outcome in the environ (:data:`.tables.APPEND_OUTCOME`), and the view raises
that error (or answers that outcome) instead of calling the store, so a write
is made once and every error is Flask's problem+json, logged and counted by
Flask (its duration from the hot path's start, :data:`.observe.STARTED`).
Likewise once the limits were counted: a limit refusing (429), Redis failing,
the store refusing, the table's hit failing, the request goes to Flask with
what Redis answered the limiter (:data:`.limits.LIMITS_OUTCOME`), and
Flask-Limiter's same calls for it are answered from that, not counted again.
"""

from __future__ import annotations

import io
import re
import time
from typing import Any, Callable, Iterable

from flask import Flask, signals

from ..store.tables import Access, fingerprint
from .clients import count_per_key
from .jsonio import JsonProvider, dumps
from .limits import LIMITS_OUTCOME
from .observe import REQUEST_ID_HEADER, STARTED, record, request_id
from .smorest import parse_json_body
from .tables import _IDEM_KEY, APPEND_OUTCOME

BLUEPRINT = "hands"
TABLES = "tables"
APPEND_ENDPOINT = "tables.post_event"
APPEND_RULE = "/v1/tables/<table_id>/events"
_APPEND_PATH = re.compile(r"/v1/tables/([0-9a-f]{16})/events")  # a table id as the view's _TABLE_ID takes it
# the token as werkzeug reads it from "Bearer <token>": a scheme in any case, one space, a token of the
# characters the service's tokens have (secrets.token_urlsafe); anything else goes to Flask
_BEARER = re.compile(r"(?ai)bearer ([a-z0-9_-]+)")
_VERSION_TAG = re.compile(r'(?a)"([0-9]{1,40})"')  # If-Match: one strong tag naming a version
_HOOK_DICTS = ("before_request_funcs", "after_request_funcs", "teardown_request_funcs", "url_value_preprocessors")
_SIGNALS = (
    signals.request_started, signals.request_finished, signals.request_tearing_down,
    signals.got_request_exception, signals.appcontext_pushed, signals.appcontext_popped,
    signals.appcontext_tearing_down,
)


_ASK_FLASK: Any = object()


def _key_name(keys: Any, environ: dict, token_stands: bool) -> Any:
    """:func:`.clients._check_api_key` as the hot path needs it: the name of the request's API key;
    None when it needs none (keys are off, or ``token_stands``: a table's bearer token was given and
    no key); :data:`_ASK_FLASK` when Flask must answer (a missing or unknown key: 401)."""
    if not keys:
        return None
    given = environ.get("HTTP_X_API_KEY")
    if given is None:
        return None if token_stands else _ASK_FLASK
    name = keys.name_of(given)
    return _ASK_FLASK if name is None else name


def _hooks(app: Flask, blueprint: str = BLUEPRINT) -> tuple[Callable, ...]:
    """The hooks a request to ``blueprint`` runs, in a comparable form."""
    found: list[Callable] = []
    for name in _HOOK_DICTS:
        hooks = getattr(app, name)
        found.extend(hooks.get(None, ()))
        found.extend(hooks.get(blueprint, ()))
    found.extend(app.teardown_appcontext_funcs)
    return tuple(found)


def unknown_hooks(app: Flask, blueprint: str = BLUEPRINT) -> list[Callable]:
    """The hooks whose work the hot path would skip for ``blueprint`` (empty: it may answer)."""
    return [f for f in _hooks(app, blueprint) if not getattr(f, "hot_path", None)]


class HotPath:
    """WSGI layer in front of ``wsgi_app``: answers ``routes`` when it can (see the module)."""

    def __init__(self, app: Flask, wsgi_app: Any, routes: dict[str, tuple[Any, Callable[[dict], dict]]],
                 appends: bool = False) -> None:
        self.app, self.wsgi_app, self.routes = app, wsgi_app, routes
        self.hooks = _hooks(app)
        # appends: the tables blueprint's hooks and the view as they were at install (None: not answered)
        self.append_view = app.view_functions.get(APPEND_ENDPOINT) if appends else None
        self.table_hooks = _hooks(app, TABLES)

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        route = self.routes.get(path)
        if route is not None and environ.get("REQUEST_METHOD") == "POST" \
                and environ.get("CONTENT_TYPE") == "application/json":
            answer = self.answer(environ, route)
            if answer is not None:
                headers, body = answer
                start_response("200 OK", headers)
                return [body]
        elif self.append_view is not None and environ.get("REQUEST_METHOD") == "POST" \
                and environ.get("CONTENT_TYPE") == "application/json":
            table = _APPEND_PATH.fullmatch(path)
            if table is not None:
                answer = self.append(environ, table[1])
                if answer is not None:
                    headers, body = answer
                    start_response("201 CREATED", headers)
                    return [body]
        return self.wsgi_app(environ, start_response)

    def active(self, blueprint: str = BLUEPRINT) -> bool:
        """Whether answering now skips none of Flask's work for ``blueprint`` (see the module)."""
        app = self.app
        provider = app.json
        return (
            (_hooks(app) == self.hooks if blueprint == BLUEPRINT else
             _hooks(app, TABLES) == self.table_hooks and app.view_functions.get(APPEND_ENDPOINT) is self.append_view)
            and not any(s.receivers for s in _SIGNALS)
            and type(provider) is JsonProvider
            and not (provider.compact is False or (provider.compact is None and app.debug))
        )

    def _body(self, environ: dict) -> bytes | None:
        """The request body as werkzeug would read it for the view, or None (Flask reads it)."""
        declared = environ.get("CONTENT_LENGTH") or ""
        if not (declared.isascii() and declared.isdigit()):  # digits only, as werkzeug reads it
            return None
        if "HTTP_TRANSFER_ENCODING" in environ:  # werkzeug may ignore the length: Flask reads it
            return None
        length = int(declared)
        limit = self.app.config.get("MAX_CONTENT_LENGTH")
        if length <= 0 or (limit is not None and length > limit):
            return None
        raw = environ["wsgi.input"].read(length)
        environ["wsgi.input"] = io.BytesIO(raw)  # Flask reads it again if it answers
        if len(raw) != length:
            return None
        return raw

    def answer(self, environ: dict, route: tuple[Any, Callable[[dict], dict]]) -> tuple[list, bytes] | None:
        """The headers and body of a 200, or None (Flask answers; the body is left for it)."""
        start = time.perf_counter()
        if not self.active():
            return None
        app = self.app
        raw = self._body(environ)
        if raw is None:
            return None
        keys = app.extensions.get("api_keys")
        name = _key_name(keys, environ, token_stands=False)
        if name is _ASK_FLASK:
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


    def append(self, environ: dict, table_id: str) -> tuple[list, bytes] | None:
        """The headers and body of a 201 to an append, or None (Flask answers: the body is left for it,
        and once the store was asked, its outcome under :data:`.tables.APPEND_OUTCOME`)."""
        start = time.perf_counter()
        if not self.active(TABLES):
            return None
        app = self.app
        store = app.extensions.get("tables")
        if store is None:
            return None  # 503 (Flask)
        limits = app.extensions.get("append_limits")  # (rate limits on: the limiter's hooks say it mirrors them)
        if limits is not None and not limits.ready():
            return None  # (counting in memory, or another strategy: Flask-Limiter counts)
        authorization = environ.get("HTTP_AUTHORIZATION")
        bearer = _BEARER.fullmatch(authorization) if authorization is not None else None
        if bearer is None:
            return None
        keys = app.extensions.get("api_keys")
        name = _key_name(keys, environ, token_stands=True)
        if name is _ASK_FLASK:
            return None  # Flask says why (401)
        raw = self._body(environ)
        if raw is None:
            return None
        idempotency_key = environ.get("HTTP_IDEMPOTENCY_KEY")
        if idempotency_key is not None and not _IDEM_KEY.match(idempotency_key):
            return None  # 422 (Flask)
        if_match = None
        if "HTTP_IF_MATCH" in environ:
            tag = _VERSION_TAG.fullmatch(environ["HTTP_IF_MATCH"])
            if tag is None:
                return None  # another form, or a malformed one: Flask reads it
            if_match = frozenset((int(tag[1]),))
        try:
            event = parse_json_body(raw)
        except Exception:  # noqa: BLE001 - 400 (Flask)
            return None
        path = environ["PATH_INFO"]
        counted = None
        if limits is not None:  # the limiter's check before the view (a refusal, a failure: Flask answers)
            counted = limits.admit(environ, table_id, name)
            if counted is None:
                environ[STARTED] = start
                return None
        try:  # the view's call, made once for the request (see the module)
            written = store.append(table_id, event, if_match=if_match, idempotency_key=idempotency_key,
                                   fp=fingerprint("POST", path, event) if idempotency_key else "",
                                   access=Access(bearer[1], write=True))
        except Exception as exc:  # noqa: BLE001 - every refusal and failure: Flask raises it and answers
            environ[APPEND_OUTCOME], environ[STARTED] = exc, start
            if counted is not None:
                environ[LIMITS_OUTCOME] = counted["_rate_limit_record"]
            return None
        try:
            body = dumps(written.as_dict(), app.json.default) + b"\n"
        except Exception:  # noqa: BLE001 - Flask writes it (or says why it cannot)
            environ[APPEND_OUTCOME], environ[STARTED] = written, start
            if counted is not None:
                environ[LIMITS_OUTCOME] = counted["_rate_limit_record"]
            return None
        limited = ()
        if counted is not None:  # the limiter's work after the view: the table's hit, the headers
            limited = limits.finish(environ, counted)
            if limited is None:
                environ[APPEND_OUTCOME], environ[STARTED] = written, start
                return None
        rid = request_id(environ)
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                   ("Location", f"/v1/tables/{table_id}/events?after={written.seq - 1}&limit=1"),
                   ("ETag", f'"{written.version}"')]
        if written.replayed:
            headers.append(("Idempotent-Replayed", "true"))
        headers.extend(limited)
        headers.append((REQUEST_ID_HEADER, rid))
        record(APPEND_RULE, "POST", path, 201, time.perf_counter() - start, rid)
        if keys:
            count_per_key(name, APPEND_RULE, 201)
        return headers, body


def install(app: Flask) -> HotPath | None:
    """Put the hot path in front of ``app.wsgi_app`` (unless ``HOT_PATH`` is false or a hook
    it cannot stand in for is installed for both the hand operations and the appends);
    ``app.extensions["hot_path"]`` is it, or None."""
    from .hands import HOT_PATH

    layer = None
    hands = not unknown_hooks(app)
    appends = not unknown_hooks(app, TABLES) and any(
        rule.endpoint == APPEND_ENDPOINT and rule.rule == APPEND_RULE and "POST" in (rule.methods or ())
        for rule in app.url_map.iter_rules())
    if app.config.get("HOT_PATH", True) and (hands or appends):
        routes = {
            rule.rule: HOT_PATH[rule.endpoint]
            for rule in app.url_map.iter_rules()
            if hands and rule.endpoint in HOT_PATH and "POST" in (rule.methods or ()) and not rule.arguments
        }
        layer = HotPath(app, app.wsgi_app, routes, appends=appends)
        app.wsgi_app = layer  # type: ignore[method-assign]
    app.extensions["hot_path"] = layer
    return layer
