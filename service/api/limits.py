"""Rate limits (Flask-Limiter on the tables' Redis): 429 problem+json with ``Retry-After``.

=============================  ========================  ======================================
setting (environment)          counted per               requests
=============================  ========================  ======================================
``TABLES_PER_HOUR``            client                    ``POST /v1/tables`` (a replay is free)
``CLIENT_EVENTS_PER_MINUTE``   client                    ``POST /v1/tables/{id}/events``
``CLIENT_VOIDS_PER_MINUTE``    client                    ``POST .../events/{seq}/void``
``CLIENT_READS_PER_MINUTE``    client                    ``GET /v1/tables``, ``GET /v1/tables/{id}``,
                                                         ``GET /v1/tables/{id}/events``
``TABLE_EVENTS_PER_MINUTE``    table                     ``POST /v1/tables/{id}/events``
``TABLE_VOIDS_PER_MINUTE``     table                     ``POST .../events/{seq}/void``
``TABLE_READS_PER_MINUTE``     table                     ``GET /v1/tables/{id}``, ``GET .../events``
=============================  ========================  ======================================

The *client* is the API key when the request gave one (``API_KEY_LIMITS`` may
set that key's own limits), else the client address (see
:mod:`service.api.clients`); every request of a client counts, refused ones
included.  A table's limits count only requests that the table answered (not
401/403/404), so that nobody without its tokens can use them up.  0 turns a limit off.  Windows are sliding (Flask-Limiter's
``sliding-window-counter``): a refused request gets ``Retry-After`` (seconds)
and every limited response the ``X-RateLimit-*`` headers (of the limit closest
to refusing, or the one that refused).  The counters live
on the app's own Redis client (:mod:`service.store.limiter`: one client, so on
a cluster or behind Sentinel they follow the same topology).  If Redis cannot
be asked, each failure is counted (``mahjong_rate_limit_storage_errors_total``)
and logged as a warning, and the limits are counted in each worker's memory
until Redis answers again (Flask-Limiter's in-memory fallback): they never
silently turn off.

An event or a read checks a client limit and a table limit: the client's hit
goes to Redis with the window read after it and the window of the table limit
tested next (one pipeline), the table's count after the answer is the second
round trip, and the headers come from the windows the request saw
(:class:`WindowReusingSlidingWindowCounter`): two round trips, where Flask-Limiter
alone makes five.

Flask-Limiter hooks every request of an app; its bookkeeping costs about
100 µs a request even where no limit applies, so its hooks are moved to the
``tables`` blueprint (:func:`_scope_to_blueprint`): the stateless hand
endpoints, the hot path, never run them.

**Appends on the hot path** (:mod:`.hotpath`): an append's limits are the
client's and the table's events a minute, and Flask-Limiter's work for it is
the client's hit, the table's test, after the answer the table's hit, and the
headers.  :class:`AppendLimits` (``app.extensions["append_limits"]``) does
that work in front of Flask for the hot path, with the same strategy object
(its ``hit``, ``test`` and ``get_window_stats``), the same limits (the same
settings, per-key values and keys) in the same order, and the headers as
:func:`_tightest_limit_in_headers` leaves them.  It is made (and the
limiter's hooks carry a ``hot_path`` attribute) only when Flask-Limiter's
configuration is the one it mirrors (:func:`_mirrorable`), and it answers
only while that holds (:meth:`AppendLimits.ready`: not while the limiter counts
in memory).  Whatever the limits said to a request the hot path leaves to
Flask (a limit refused, Redis failed, the store refused), the strategy's
calls to Redis and their answers (or errors) go along in the environ
(:data:`LIMITS_OUTCOME`) and the strategy answers Flask-Limiter's same calls
for that request from them: nothing is counted twice, and Flask-Limiter
decides (429, in-memory fallback, a logged failure) as if it had made them.
"""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar
from functools import lru_cache, partial
from math import floor, inf
from typing import Any, Callable

from flask import Flask, current_app, g, has_request_context, request
from limits.strategies import SlidingWindowCounterRateLimiter
from limits.util import WindowStats

from ..config import CLIENT_LIMITS, LIMITS, ApiKeys, TrustedProxies
from .clients import api_key, client_key

log = logging.getLogger(__name__)

READS = ("tables.get_table", "tables.list_events", "tables.list_tables")
TABLE_READS = ("tables.get_table", "tables.list_events")
EVENTS = ("tables.post_event",)
VOIDS = ("tables.void_event",)
CREATE = "tables.create_table"
_NOT_ANSWERED = (401, 403, 404)
KEY_PREFIX = "rl"
LIMITS_OUTCOME = "service.hot_path.limits_outcome"
"""The environ key under which the hot path hands Flask what Redis answered to the limiter's calls it
made for this very request (``{(operation, key): answer or exception}``), when it leaves the request to
Flask after counting: the strategy answers the same calls from it (see the module).  (No header can set
it: a server puts the headers under ``HTTP_`` names.)"""
_HOT: ContextVar[dict | None] = ContextVar("service_rate_limits_hot_path", default=None)


def install(app: Flask, url: str) -> None:
    """Install the configured limits (none configured: nothing is installed)."""
    keys: ApiKeys = app.config.get("API_KEYS") or ApiKeys()
    setting = {name: int(app.config.get(var, 0) or 0) for name, (var, _, _) in LIMITS.items()}
    if not any(setting.values()) and not any(keys.limits.values()):
        return
    from flask_limiter import Limiter

    @app.after_request
    def _retry_after_only_when_refused(response):
        # Flask-Limiter adds Retry-After to every response; it means something only on 429/503.
        # (Registered before the limiter, so it runs after the limiter's own hook.)
        if response.status_code not in (429, 503):
            response.headers.pop("Retry-After", None)
        return response

    _retry_after_only_when_refused.hot_path = "no effect: its 200s carry no Retry-After"  # type: ignore[attr-defined]

    from ..store import limiter as limiter_storage

    storage_uri, storage_options = limiter_storage.storage_options(app.extensions["redis"])
    limiter = Limiter(
        client_key, app=app, storage_uri=storage_uri, storage_options=storage_options,
        strategy="sliding-window-counter", key_prefix=KEY_PREFIX, headers_enabled=True, swallow_errors=True,
        in_memory_fallback_enabled=True,
    )
    limiter_storage.count_errors(limiter.storage)
    # Flask-Limiter makes its strategy from a name; the same strategy, reusing its windows (a private
    # attribute: tests/test_api_limits.py checks that it is the one in use)
    limiter._limiter = WindowReusingSlidingWindowCounter(limiter.storage)

    def current_for(name: str, key: str | None) -> int:
        return keys.limit(key, name, setting[name]) if name in CLIENT_LIMITS else setting[name]

    def current(name: str) -> int:
        return current_for(name, api_key())

    def rate(name: str, per: str) -> tuple[Callable[[], str], Callable[[], bool]]:
        return (lambda: f"{current(name)}/{per}"), (lambda: current(name) == 0)

    def wrap(endpoints: tuple[str, ...], name: str, per: str, key_func: Callable[[], str], **kwargs: Any) -> None:
        value, off = rate(name, per)
        decorate = limiter.shared_limit(value, scope=name, key_func=key_func, exempt_when=off, **kwargs)
        for endpoint in endpoints:
            app.view_functions[endpoint] = decorate(app.view_functions[endpoint])

    answered = {"deduct_when": lambda response: response.status_code not in _NOT_ANSWERED}
    tested: dict[str, list[str]] = {}  # endpoint -> its table limits, tested before the view (counted after)
    value, off = rate("tables_per_hour", "hour")
    app.view_functions[CREATE] = limiter.limit(
        value, key_func=client_key, methods=["POST"],
        exempt_when=lambda: off() or _is_create_replay(),
    )(app.view_functions[CREATE])
    wrap(EVENTS, "client_events_per_minute", "minute", client_key)
    wrap(VOIDS, "client_voids_per_minute", "minute", client_key)
    wrap(READS, "client_reads_per_minute", "minute", client_key)
    wrap(EVENTS, "table_events_per_minute", "minute", _table_key, **answered)
    wrap(VOIDS, "table_voids_per_minute", "minute", _table_key, **answered)
    wrap(TABLE_READS, "table_reads_per_minute", "minute", _table_key, **answered)
    for endpoints, name in ((EVENTS, "table_events_per_minute"), (VOIDS, "table_voids_per_minute"),
                            (TABLE_READS, "table_reads_per_minute")):
        for endpoint in endpoints:
            tested.setdefault(endpoint, []).append(name)

    def _read_ahead() -> None:
        """The keys of the table limits that Flask-Limiter will test after the client's hit (as it makes
        them: its ``key_prefix``, the limit's key function and shared scope), read with that hit."""
        ahead = {}
        for name in tested.get(request.endpoint or "", ()):
            if setting[name]:
                item = _item(f"{setting[name]}/minute")
                ahead[item.key_for(KEY_PREFIX, _table_key(), name)] = item.get_expiry()
        if ahead:
            g._rate_limit_to_test = ahead

    app.before_request_funcs.setdefault("tables", []).append(_read_ahead)  # before the limiter's, moved below
    _scope_to_blueprint(app, limiter, "tables")
    # first in the list: after_request hooks run in reverse, so it runs after the limiter's
    app.after_request_funcs.setdefault("tables", []).insert(0, partial(_tightest_limit_in_headers, limiter))

    proxies = app.config.get("TRUSTED_PROXIES")
    if isinstance(proxies, str):
        proxies = TrustedProxies.parse(proxies, app.config.get("PROXY_HEADER"))
    if not proxies and _mirrorable(app, limiter):  # (behind proxies the client address is ProxyFix's)
        app.extensions["append_limits"] = AppendLimits(limiter, setting, current_for)
        _mark_hooks(app, limiter, _read_ahead)


def _tightest_limit_in_headers(limiter: Any, response: Any) -> Any:
    """The ``X-RateLimit-*`` headers describe the limit closest to refusing.

    Flask-Limiter's headers describe the first limit of the request when none is
    breached: for an event, the client's 600 a minute, while the table's 120 a
    minute would refuse first (a client pacing itself on ``Remaining`` got 429
    with hundreds "remaining").  A refused request keeps the breached limit's.
    """
    if response.status_code == 429 or "X-RateLimit-Limit" not in response.headers:
        return response  # (no headers yet: the limiter's hooks did not run before this one)
    try:
        limits = limiter.current_limits
        if len(limits) > 1:
            tightest = min(limits, key=lambda lim: lim.remaining)  # the first of equals: the limiter's own
            response.headers["X-RateLimit-Limit"] = str(tightest.limit.amount)
            response.headers["X-RateLimit-Remaining"] = str(tightest.remaining)
            response.headers["X-RateLimit-Reset"] = str(tightest.reset_at)
    except Exception as exc:  # Redis trouble: the limiter's own headers stay
        log.warning("rate limit headers: %s", exc)
    return response


class WindowReusingSlidingWindowCounter(SlidingWindowCounterRateLimiter):
    """``limits``' sliding window counter that remembers, for the request, each window it saw.

    Flask-Limiter asks Redis for a limit's window once more for the
    ``X-RateLimit-*`` headers, after the hit (or test) that already went there
    (and :func:`_tightest_limit_in_headers` for every other limit of the
    request).  Here a hit reads the window after it in the same round trip
    (:meth:`~service.store.limiter.SharedClientStorage.acquire_sliding_window_entry_and_window`),
    a test keeps the window it read, and :meth:`get_window_stats` answers from
    what this request last saw of that limit: the headers cost no round trip.
    Out of a request (the ``flask limiter`` commands), every call asks Redis.
    """

    def hit(self, item: Any, *identifiers: str, cost: int = 1) -> bool:
        key = item.key_for(*identifiers)
        ahead = _ahead()
        acquired, window, read = _storage_call(
            "hit", key, self.storage.acquire_sliding_window_entry_and_window,  # type: ignore[attr-defined]
            key, item.amount, item.get_expiry(), cost, [(k, e) for k, e in ahead.items() if k != key])
        _seen(key, window)
        if read:
            state = _state()
            if state is not None:
                state["_rate_limit_read_ahead"] = read
        return acquired

    def test(self, item: Any, *identifiers: str, cost: int = 1) -> bool:
        key = item.key_for(*identifiers)
        state = _state()
        window = state.get("_rate_limit_read_ahead", {}).pop(key, None) if state is not None else None
        if window is None:
            window = _storage_call("window", key, self.storage.get_sliding_window,  # type: ignore[attr-defined]
                                   key, item.get_expiry())
        _seen(key, window)
        previous_count, previous_expires_in, current_count, _ = window
        return self._weighted_count(item, previous_count, previous_expires_in, current_count) < item.amount - cost + 1

    def get_window_stats(self, item: Any, *identifiers: str) -> WindowStats:
        window = _seen(item.key_for(*identifiers))
        if window is None:
            return super().get_window_stats(item, *identifiers)
        # as SlidingWindowCounterRateLimiter.get_window_stats computes it from the window it reads
        previous_count, previous_expires_in, current_count, current_expires_in = window
        remaining = max(0, item.amount - floor(
            self._weighted_count(item, previous_count, previous_expires_in, current_count)))
        now = time.time()
        if not (previous_count or current_count):
            return WindowStats(now, remaining)
        expiry = item.get_expiry()
        previous_reset_in = previous_expires_in % (expiry / previous_count) if previous_count else inf
        current_reset_in = current_expires_in % expiry if current_count else inf
        return WindowStats(now + min(previous_reset_in, current_reset_in), remaining)


@lru_cache(maxsize=64)
def _item(value: str) -> Any:
    from limits import parse

    return parse(value)


def _state() -> dict | None:
    """Where the strategy keeps what it saw for the request: the hot path's (:class:`AppendLimits`),
    else Flask's ``g``; None out of a request."""
    hot = _HOT.get()
    if hot is not None:
        return hot
    return g.__dict__ if has_request_context() else None


def _storage_call(operation: str, key: str, call: Callable, *args: Any) -> Any:
    """``call(*args)``, a call of the strategy to Redis for the limit ``key``: on the hot path, its answer
    (or error) is recorded for Flask; in a request the hot path left to Flask after making that call,
    answered from the record (see :data:`LIMITS_OUTCOME`)."""
    hot = _HOT.get()
    if hot is not None:
        record = hot["_rate_limit_record"]
        try:
            answer = call(*args)
        except Exception as exc:
            record[(operation, key)] = exc
            raise
        record[(operation, key)] = answer
        return answer
    if has_request_context():
        recorded = request.environ.get(LIMITS_OUTCOME)
        if recorded and (operation, key) in recorded:
            answer = recorded.pop((operation, key))
            if isinstance(answer, BaseException):
                raise answer
            return answer
    return call(*args)


def _ahead() -> dict[str, int]:
    """The limits this request will test after a hit (``{key: expiry}``, set by :func:`_read_ahead`)."""
    state = _state()
    return state.pop("_rate_limit_to_test", {}) if state is not None else {}


def _seen(key: str, window: tuple | None = None) -> tuple | None:
    """Remember ``window`` of the limit ``key`` for this request (given one), or answer the one remembered."""
    state = _state()
    if state is None:
        return None
    windows = state.setdefault("_rate_limit_windows", {})
    if window is None:
        return windows.get(key)
    windows[key] = window
    return window


def _table_key() -> str:
    return "table:" + str((request.view_args or {}).get("table_id", "-"))[:64]


def _is_create_replay() -> bool:
    """A retried table creation (its Idempotency-Key already made a table from this very
    request) replays the first response: it creates nothing, so it does not count against
    the limit.  The same key with another body counts (it could be guessing)."""
    from . import tables

    store = current_app.extensions.get("tables")
    if store is None:
        return False
    try:
        key = tables.creation_key()
        return key is not None and store.is_creation_replay(key, tables.creation_fingerprint(), api_key())
    except Exception:  # not a valid key (the view refuses it) or Redis trouble (503 follows): counted
        return False


def _scope_to_blueprint(app: Flask, limiter: Any, blueprint: str) -> None:
    """Run Flask-Limiter's request hooks for one blueprint only.

    Flask-Limiter hooks every request of the app; its bookkeeping costs about
    100 µs a request even where no limit applies (the stateless hand endpoints,
    the hot path).  Every limit is on the ``tables`` blueprint, so its hooks
    move there.  (If a Flask-Limiter release changes its hooks, nothing moves:
    the limits still hold, only slower.)
    """
    def owned(func: Any) -> bool:
        return getattr(func, "__self__", None) is limiter or (
            isinstance(func, partial) and bool(func.args) and func.args[0] is limiter
        )

    for hooks in (app.before_request_funcs, app.after_request_funcs, app.teardown_request_funcs):
        mine = [f for f in hooks.get(None, []) if owned(f)]
        if mine:
            hooks[None] = [f for f in hooks[None] if not owned(f)]
            hooks.setdefault(blueprint, []).extend(mine)


_CLIENT_EVENTS, _TABLE_EVENTS = "client_events_per_minute", "table_events_per_minute"


class AppendLimits:
    """Flask-Limiter's work for an append (``tables.post_event``), for the hot path (see the module).

    :meth:`admit` is the limiter's check before the view (the limits in its
    order, the client's hit reading the table's window ahead, the table's
    test), :meth:`finish` its work after a 201 (the table's hit, the headers
    of the limit closest to refusing); both with the limiter's own strategy
    object, its state kept for the request as in Flask's ``g``.
    """

    def __init__(self, limiter: Any, setting: dict[str, int], current_for: Callable[[str, str | None], int]) -> None:
        self.limiter, self.setting, self.current_for = limiter, setting, current_for
        self.strategy = limiter._limiter

    def ready(self) -> bool:
        """Whether the limiter would count this append on Redis with this strategy (else Flask answers)."""
        limiter = self.limiter
        return (not limiter._storage_dead and limiter.enabled and limiter._limiter is self.strategy
                and not limiter._request_filters)

    def admit(self, environ: dict, table_id: str, key_name: str | None) -> dict | None:
        """Count the append as the limiter does before the view; the request's state, or None when a
        limit refused or Redis failed (then what Redis answered is in ``environ[LIMITS_OUTCOME]``)."""
        client = f"key:{key_name}" if key_name else f"addr:{environ.get('REMOTE_ADDR') or '-'}"
        table = "table:" + table_id[:64]
        limits = []
        for name, identity, deduct in ((_CLIENT_EVENTS, client, False), (_TABLE_EVENTS, table, True)):
            value = self.current_for(name, key_name)
            if value:  # 0: exempt
                limits.append((_item(f"{value}/minute"), (KEY_PREFIX, identity, name), deduct))
        limits.sort(key=lambda lim: lim[0])  # Flask-Limiter's order (stable)
        state: dict[str, Any] = {"_rate_limit_record": {}, "limits": limits}
        if self.setting[_TABLE_EVENTS]:  # _read_ahead
            item = _item(f"{self.setting[_TABLE_EVENTS]}/minute")
            state["_rate_limit_to_test"] = {item.key_for(KEY_PREFIX, table, _TABLE_EVENTS): item.get_expiry()}
        token = _HOT.set(state)
        try:
            for item, args, deduct in limits:
                if not (self.strategy.test if deduct else self.strategy.hit)(item, *args):
                    environ[LIMITS_OUTCOME] = state["_rate_limit_record"]
                    return None  # refused: Flask-Limiter says so (from the record)
        except Exception:  # noqa: BLE001 - Redis failed: Flask-Limiter falls back to memory (from the record)
            environ[LIMITS_OUTCOME] = state["_rate_limit_record"]
            return None
        finally:
            _HOT.reset(token)
        return state

    def finish(self, environ: dict, state: dict) -> list[tuple[str, str]] | None:
        """After a 201: the table's hit and the ``X-RateLimit-*`` headers; None when the hit failed (then
        Flask answers, with the record in ``environ[LIMITS_OUTCOME]``)."""
        limits = state["limits"]
        token = _HOT.set(state)
        try:
            try:
                for item, args, deduct in limits:
                    if deduct:  # deduct_when: a 201 is answered
                        self.strategy.hit(item, *args)
            except Exception:  # noqa: BLE001 - Flask-Limiter logs it (from the record)
                environ[LIMITS_OUTCOME] = state["_rate_limit_record"]
                return None
            if not limits:
                return []
            # the limiter's header limit: the first (all are shared), then the tightest (the first of equals)
            stats = [self.strategy.get_window_stats(item, *args) for item, args, _ in limits]
            first = min(range(len(limits)), key=lambda i: stats[i][1]) if len(limits) > 1 else 0
            return [("X-RateLimit-Limit", str(limits[first][0].amount)),
                    ("X-RateLimit-Remaining", str(stats[first][1])),
                    ("X-RateLimit-Reset", str(int(stats[first][0] + 1)))]
        finally:
            _HOT.reset(token)


def _mirrorable(app: Flask, limiter: Any) -> bool:
    """Whether Flask-Limiter's work for an append is what :class:`AppendLimits` does: the two shared event
    limits as :func:`install` made them, and nothing else of Flask-Limiter's that would apply to it."""
    from flask_limiter.constants import HeaderNames
    from flask_limiter.util import get_qualified_name

    try:
        manager = limiter.limit_manager
        name = get_qualified_name(app.view_functions[EVENTS[0]])
        groups = list(manager._decorated_limits.get(name, ()))
        expected = [(_CLIENT_EVENTS, client_key, False), (_TABLE_EVENTS, _table_key, True)]
        return (
            isinstance(limiter._limiter, WindowReusingSlidingWindowCounter)
            and limiter._key_prefix == KEY_PREFIX and limiter._fail_on_first_breach
            and limiter._headers_enabled and limiter._retry_after != "http-date"
            and [limiter._header_mapping.get(h) for h in (HeaderNames.LIMIT, HeaderNames.REMAINING,
                                                           HeaderNames.RESET)] == [
                "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"]
            and not limiter._on_breach and not limiter._meta_limits and not limiter._request_filters
            and not manager.application_limits and not manager.default_limits
            and not manager._route_exemptions and not manager.has_hints(EVENTS[0])
            and not manager.blueprint_limits(app, "tables")
            and len(groups) == len(expected) and all(
                lim.scope == scope and lim.shared and lim.key_function is key and bool(lim.deduct_when) is deduct
                and lim.cost == 1 and not lim.per_method and not lim.methods and not lim.meta_limits
                and not lim.on_breach
                for lim, (scope, key, deduct) in zip(groups, expected))
        )
    except Exception:  # noqa: BLE001 - another Flask-Limiter: Flask answers
        log.warning("rate limits: appends are not answered by the hot path", exc_info=True)
        return False


def _mark_hooks(app: Flask, limiter: Any, read_ahead: Callable) -> None:
    """Say on each of the limiter's hooks for ``tables`` that the hot path does its work for an append
    (:func:`.hotpath.unknown_hooks`); the bound methods are wrapped to carry it."""
    why = "done by the hot path for an append: AppendLimits (service/api/limits.py)"
    read_ahead.hot_path = why  # type: ignore[attr-defined]

    def marked(func: Any) -> Any:
        if isinstance(func, partial):
            func.hot_path = why  # type: ignore[attr-defined]
            return func
        if getattr(func, "__self__", None) is limiter:
            def hook(*args: Any) -> Any:
                return func(*args)
            hook.hot_path, hook.__wrapped__ = why, func  # type: ignore[attr-defined]
            return hook
        return func

    for hooks in (app.before_request_funcs, app.after_request_funcs, app.teardown_request_funcs):
        if "tables" in hooks:
            hooks["tables"] = [marked(f) for f in hooks["tables"]]
