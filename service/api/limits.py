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
"""

from __future__ import annotations

import logging
import time
from functools import lru_cache, partial
from math import floor, inf
from typing import Any, Callable

from flask import Flask, current_app, g, has_request_context, request
from limits.strategies import SlidingWindowCounterRateLimiter
from limits.util import WindowStats

from ..config import CLIENT_LIMITS, LIMITS, ApiKeys
from .clients import api_key, client_key

log = logging.getLogger(__name__)

READS = ("tables.get_table", "tables.list_events", "tables.list_tables")
TABLE_READS = ("tables.get_table", "tables.list_events")
EVENTS = ("tables.post_event",)
VOIDS = ("tables.void_event",)
CREATE = "tables.create_table"
_NOT_ANSWERED = (401, 403, 404)


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
        strategy="sliding-window-counter", key_prefix="rl", headers_enabled=True, swallow_errors=True,
        in_memory_fallback_enabled=True,
    )
    limiter_storage.count_errors(limiter.storage)
    # Flask-Limiter makes its strategy from a name; the same strategy, reusing its windows (a private
    # attribute: tests/test_api_limits.py checks that it is the one in use)
    limiter._limiter = WindowReusingSlidingWindowCounter(limiter.storage)

    def current(name: str) -> int:
        return keys.limit(api_key(), name, setting[name]) if name in CLIENT_LIMITS else setting[name]

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
                ahead[item.key_for("rl", _table_key(), name)] = item.get_expiry()
        if ahead:
            g._rate_limit_to_test = ahead

    app.before_request_funcs.setdefault("tables", []).append(_read_ahead)  # before the limiter's, moved below
    _scope_to_blueprint(app, limiter, "tables")
    # first in the list: after_request hooks run in reverse, so it runs after the limiter's
    app.after_request_funcs.setdefault("tables", []).insert(0, partial(_tightest_limit_in_headers, limiter))


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
        acquired, window, read = self.storage.acquire_sliding_window_entry_and_window(  # type: ignore[attr-defined]
            key, item.amount, item.get_expiry(), cost, [(k, e) for k, e in ahead.items() if k != key])
        _seen(key, window)
        if read:
            g._rate_limit_read_ahead = read
        return acquired

    def test(self, item: Any, *identifiers: str, cost: int = 1) -> bool:
        key = item.key_for(*identifiers)
        window = getattr(g, "_rate_limit_read_ahead", {}).pop(key, None) if has_request_context() else None
        if window is None:
            window = self.storage.get_sliding_window(key, item.get_expiry())  # type: ignore[attr-defined]
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


def _ahead() -> dict[str, int]:
    """The limits this request will test after a hit (``{key: expiry}``, set by :func:`_read_ahead`)."""
    return g.__dict__.pop("_rate_limit_to_test", {}) if has_request_context() else {}


def _seen(key: str, window: tuple | None = None) -> tuple | None:
    """Remember ``window`` of the limit ``key`` for this request (given one), or answer the one remembered."""
    if not has_request_context():
        return None
    windows = g.__dict__.setdefault("_rate_limit_windows", {})
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
