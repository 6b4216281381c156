"""Rate limits: 429 problem+json with ``Retry-After`` and ``limit`` (which one refused).

=============================  ========================  ======================================
setting (environment)          counted per               requests
=============================  ========================  ======================================
``TABLES_PER_HOUR``            client                    ``POST /v1/tables``, ``POST /v1/clubs/{id}/tables``
                                                         (a replay is free)
``CLIENT_EVENTS_PER_MINUTE``   client                    ``POST /v1/tables/{id}/events``, ``.../finish``; a
                                                         club's writes (``POST /v1/clubs``, its players,
                                                         merges, seasons, imports)
``CLIENT_VOIDS_PER_MINUTE``    client                    ``POST .../events/{seq}/void``, ``PUT .../rounds/{n}/events``
``CLIENT_READS_PER_MINUTE``    client                    ``GET /v1/tables``, ``GET /v1/tables/{id}``,
                                                         its events, rounds, summary, stream (each open);
                                                         a club, its players' pages, its standings
``TABLE_EVENTS_PER_MINUTE``    table                     ``POST /v1/tables/{id}/events``
``TABLE_VOIDS_PER_MINUTE``     table                     ``POST .../events/{seq}/void``, ``PUT .../rounds/{n}/events``
``TABLE_READS_PER_MINUTE``     table                     ``GET /v1/tables/{id}``, its events, rounds,
                                                         summary, its stream (each open)
``CLIENT_WEBHOOK_CALLS_...``   client                    every request to ``/v1/webhooks``
``CLIENT_WEBHOOK_SENDS_...``   client                    ``POST .../test``, ``.../redeliver``: a message sent
                                                         out at once (``_PER_MINUTE``, both)
=============================  ========================  ======================================

The *client* is the API key when the request gave one (``API_KEY_LIMITS`` may
set that key's own limits), else the client address (:mod:`.callers`); every
request of a client counts, refused ones included.  0 turns a limit off.

Each view declares its limits where it is defined (``@rate_limits.limited("client_events_per_minute",
"table_events_per_minute")`` under its ``@blp.route``), or declares that it has none and why
(``@rate_limits.unlimited("...")``); :data:`OTHER_VIEWS` does so for the endpoints of Flask,
flask-smorest and the companion app.  ``tests/test_api_limits.py`` walks the URL map: a new endpoint without
a declaration fails it.

Only the views that declare a limit that is on are wrapped (:func:`install`): a request to any other
endpoint does no limiter work at all.  Who counts what:

* **The store's scripts** count a table's events and voids a minute (in the APPEND that appends: a refused
  or failed write is not counted) and the client's own events and voids a minute (:mod:`service.store.charges`):
  an append counts them in its APPEND too, first, whatever its outcome, so an append with every limit on is
  one Redis call.  A request of such a view that ends before its APPEND (a malformed event, a wrong token, the
  rules' 422) is counted afterwards by the HIT script, and answered 429 instead if that refuses (as the limit
  refuses before anything else); a finish and a club's writes are counted by HIT before the view.  On a Redis
  Cluster the client's hash is not in the table's slot: the store counts it with HIT before the APPEND.
* **The** ``limits`` **library** (its sliding window counter, ``limits.strategies.SlidingWindowCounterRateLimiter``,
  on the service's Redis: :mod:`service.store.limit_storage`) counts the others: tables an hour, reads, the
  webhook endpoints' calls and sends, before the view (``hit``).  A table's reads count only the requests the
  table answered (not 401/403/404: nobody without its tokens can use them up): tested before the view, counted
  after it.
* Every limited response has the ``X-RateLimit-*`` headers of the limit closest to refusing (or of the one that
  refused), and a refused one ``Retry-After``.

* Batch items: ``CLIENT_BATCH_ITEMS_PER_MINUTE`` (per client, 600,000 by default) counts the items of
  ``POST /v1/batch``, not its requests: a JSON batch all its items at once before any is run (a refused
  envelope counts 1), an NDJSON job each read's lines before they are run (:func:`charge_batch`).  The single
  hand endpoints stay unlimited: a batch is the way to send many items, so it is what is counted.

If Redis cannot be asked, the ``limits`` library's counters are kept in each worker's memory (a warning) until
Redis answers again (checked every :data:`RECHECK_SECONDS`): they never silently turn off.  (The store's limits
need Redis anyway: without it nothing is written.)
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import limits
from flask import Flask, after_this_request, current_app, g, request
from limits.storage import MemoryStorage
from limits.strategies import SlidingWindowCounterRateLimiter

from ..config import CLIENT_LIMITS, LIMITS
from ..store import keys, limit_storage
from ..store.charges import Charge, ClientLimit
from ..store.errors import RateLimited
from . import settings
from .callers import api_key, client_key
from .problems import RateLimitExceeded, describe_store_error, respond

log = logging.getLogger("service.api")

View = TypeVar("View", bound=Callable[..., Any])

BY_THE_STORE = frozenset({"table_events_per_minute", "table_voids_per_minute"})
"""Limits the store's APPEND script counts (in the call that appends): a view declares them, the store counts
them; a view that declares one appends, and its client's own write limits are counted in the same APPEND."""
CLIENT_WRITES = frozenset({"client_events_per_minute", "client_voids_per_minute"})
"""The client's own write limits: the store's scripts count them (:mod:`service.store.charges`)."""
BY_THE_VIEW = frozenset({"client_batch_items_per_minute"})
"""Limits the view charges itself (:func:`charge_batch`: a batch counts its items, not its requests)."""
BY_THE_TABLE = frozenset({"table_reads_per_minute"})
"""The ``limits`` library's limits counted per table (the ``table_id`` of the path), and only for the requests the
table answered (not 401/403/404: nobody without its tokens can use them up); the others are counted per client."""
_NOT_ANSWERED = (401, 403, 404)
DECLARATION = "rate_limits"
"""The attribute of a view function that holds its :class:`Declared` (set by :func:`limited`, :func:`unlimited`)."""
OTHER_VIEWS: dict[str, str] = {
    "static": "Flask's static files route (the service has no static folder: every request is a 404)",
    "api-docs.openapi_json": "flask-smorest's OpenAPI document: static",
    "api-docs.openapi_swagger_ui": "flask-smorest's Swagger UI page: static",
    "web.index": "the companion app's page: a static file",
    "web.asset": "the companion app's static files",
    "web.service_worker": "the companion app's service worker: a static file",
    "web.swagger_ui": "Swagger UI's static files",
    "web.qr_code": "the companion app's QR code of a share link: at most MAX_QR_TEXT characters",
}
"""The endpoints whose views are not this layer's, each unlimited and why: Flask's, flask-smorest's and the
companion app's (:mod:`service.web` imports no other floor, so it cannot declare them itself)."""
QUOTA = "table_quota"
"""Where a view leaves the store's :class:`~service.store.charges.Quota` of a write (in ``g``)."""
COUNTED = "rate_limits_counted"
"""Where a limited request keeps what it counted (in ``g``: its :class:`_Counted`)."""
EXTENSION = "rate_limits"
"""``app.extensions`` key of the :class:`Limits` (when any limit is on)."""
RECHECK_SECONDS = 5.0
"""How often a worker counting in memory (Redis did not answer) asks Redis again."""


@dataclass(frozen=True)
class Declared:
    """What a view declares: the limits that count its requests (settings of :data:`service.config.LIMITS`),
    when a request is exempt from them, or, for a view without limits, why it has none."""

    limits: tuple[str, ...] = ()
    exempt_when: Callable[[], bool] | None = None
    unlimited: str | None = None


def limited(*names: str, exempt_when: Callable[[], bool] | None = None) -> Callable[[View], View]:
    """Declare the rate limits of a view (put it under ``@blp.route``): ``names`` are settings of
    :data:`service.config.LIMITS`; ``exempt_when`` says when a request counts against none of them."""
    unknown = [name for name in names if name not in LIMITS]
    if not names or unknown:
        raise ValueError(f"limited() takes settings of service.config.LIMITS; got {names!r}")
    return _declare(Declared(names, exempt_when))


def unlimited(reason: str) -> Callable[[View], View]:
    """Declare that a view has no rate limit, and why (a new view without a declaration fails a test)."""
    if not reason.strip():
        raise ValueError("unlimited() needs its reason")
    return _declare(Declared(unlimited=reason))


def _declare(declared: Declared) -> Callable[[View], View]:
    def mark(view: View) -> View:
        setattr(view, DECLARATION, declared)
        return view

    return mark


def declared(view: Callable[..., Any]) -> Declared | None:
    """The declaration of a view function as the app holds it (under its decorators), or None."""
    return getattr(view, DECLARATION, None) or getattr(inspect.unwrap(view), DECLARATION, None)


def limit_name(setting: str) -> str:
    """A limit's name as a 429 problem's ``limit`` says it: the setting without ``_per_...``.

    >>> limit_name("client_events_per_minute"), limit_name("tables_per_hour")
    ('client_events', 'tables_per_hour')
    """
    return setting if setting == "tables_per_hour" else setting.rsplit("_per_", 1)[0]


def install(app: Flask, client: Any, url: str) -> None:
    """Wrap each view that declares a limit that is on (for some client) with its counting; nothing is
    installed for the others, nor at all when every limit is off."""
    s = settings.current(app)
    api_keys = s.api_keys
    setting = {name: getattr(s, name) for name in LIMITS}
    keyed = {name for per_key in api_keys.limits.values() for name, value in per_key.items() if value}

    def on(name: str) -> bool:
        return bool(setting[name]) or name in keyed

    if not any(on(name) for name in LIMITS):
        return
    counters = Limits(limit_storage.storage_for(client, url), setting, api_keys)
    app.extensions[EXTENSION] = counters
    for endpoint, view in list(app.view_functions.items()):
        found = declared(view)
        if found is None or not any(on(name) for name in found.limits):
            continue
        plan = Plan(
            counted=tuple(n for n in found.limits if on(n) and n not in BY_THE_STORE | CLIENT_WRITES | BY_THE_VIEW),
            writes=tuple(n for n in found.limits if on(n) and n in CLIENT_WRITES),
            in_append=any(n in BY_THE_STORE for n in found.limits),
            exempt_when=found.exempt_when)
        app.view_functions[endpoint] = _wrapped(view, plan)


@dataclass(frozen=True)
class Plan:
    """What a limited view counts: the ``limits`` library's limits (in order), the client's own write limits
    (the store's: in the view's APPEND when ``in_append``, else by HIT before the view), and when a request is
    exempt from them."""

    counted: tuple[str, ...]
    writes: tuple[str, ...]
    in_append: bool
    exempt_when: Callable[[], bool] | None


class Limits:
    """The ``limits`` library's sliding window counters on the service's Redis, and the amounts in force.

    A storage error (Redis away) is logged and the counting goes on in the worker's memory (``limits``'
    ``MemoryStorage``) until Redis answers again (asked every :data:`RECHECK_SECONDS`)."""

    def __init__(self, storage: Any, setting: dict[str, int], api_keys: Any) -> None:
        self.storage = storage
        self.setting, self.api_keys = setting, api_keys
        self._redis = SlidingWindowCounterRateLimiter(storage)
        self._memory = SlidingWindowCounterRateLimiter(MemoryStorage())
        self._errors = storage.base_exceptions
        self._recheck: float | None = None  # (when counting in memory: when to ask Redis again)
        self._lock = threading.Lock()

    def amount(self, name: str) -> int:
        """The limit ``name`` for this request's client (its API key's own, if it has one)."""
        default = self.setting[name]
        return self.api_keys.limit(api_key(), name, default) if name in CLIENT_LIMITS else default

    def counting_limiter(self) -> SlidingWindowCounterRateLimiter:
        """The limiter counting now: on Redis, or in this worker's memory while Redis is away."""
        recheck = self._recheck
        if recheck is None:
            return self._redis
        if time.monotonic() >= recheck:
            with self._lock:
                self._recheck = time.monotonic() + RECHECK_SECONDS
            if self.storage.check():
                log.info("rate limit storage recovered: counting on Redis again")
                self._recheck = None
                return self._redis
        return self._memory

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        limiter = self.counting_limiter()
        try:
            return getattr(limiter, method)(*args, **kwargs)
        except self._errors as exc:
            if limiter is not self._redis:
                raise
            log.warning("Rate limit storage unreachable (%s) - falling back to in-memory storage until it answers",
                        type(exc).__name__)
            self._recheck = time.monotonic() + RECHECK_SECONDS
            return getattr(self._memory, method)(*args, **kwargs)

    def hit(self, item: Any, *ids: str, cost: int = 1) -> bool:
        return self._call("hit", item, *ids, cost=cost)

    def test(self, item: Any, *ids: str) -> bool:
        return self._call("test", item, *ids)

    def stats(self, item: Any, *ids: str) -> tuple[int, int]:
        """``(remaining, reset)``: what the headers say of a limit (reset: a UNIX time in s)."""
        window = self._call("get_window_stats", item, *ids)
        return window.remaining, int(window.reset_time + 1)


@functools.lru_cache(maxsize=256)
def _item(amount: int, per: str) -> Any:
    return limits.parse(f"{amount}/{per}")


class _Counted:
    """What one limited request counted: the ``limits`` library's limits (for the headers), those to count
    after the view (a table's reads), and its client's :class:`~service.store.charges.Charge`."""

    __slots__ = ("counted", "deferred", "charge")

    def __init__(self) -> None:
        self.counted: list[tuple[Any, tuple[str, ...]]] = []
        self.deferred: list[tuple[Any, tuple[str, ...]]] = []
        self.charge: Charge | None = None


def _wrapped(view: Callable[..., Any], plan: Plan) -> Callable[..., Any]:
    @functools.wraps(view)
    def limited_view(*args: Any, **kwargs: Any) -> Any:
        counters: Limits = current_app.extensions[EXTENSION]
        if plan.exempt_when is not None and plan.exempt_when():
            return view(*args, **kwargs)
        state = g.setdefault(COUNTED, _Counted())
        after_this_request(functools.partial(_after, plan, state))
        writes = [ClientLimit(limit_name(n), amount) for n in plan.writes if (amount := counters.amount(n))]
        if writes:
            state.charge = Charge(client_key(), writes)
            if not plan.in_append:
                _tables().charge(state.charge)
        for name in plan.counted:
            amount = counters.amount(name)
            if not amount:
                continue
            item = _item(amount, "hour" if name.endswith("_hour") else "minute")
            scope = limit_name(name)
            ids = (keys.RATE_LIMIT_PREFIX, _table_key() if name in BY_THE_TABLE else client_key(), scope)
            if name in BY_THE_TABLE:
                ok = counters.test(item, *ids)
                state.deferred.append((item, ids))
            else:
                ok = counters.hit(item, *ids)
            state.counted.append((item, ids))
            if not ok:
                raise _refused(counters, item, ids, scope)
        return view(*args, **kwargs)

    return limited_view


def _refused(counters: Limits, item: Any, ids: tuple[str, ...], scope: str) -> RateLimitExceeded:
    remaining, reset = counters.stats(item, *ids)
    return RateLimitExceeded(scope, str(item), {
        "X-RateLimit-Limit": str(item.amount), "X-RateLimit-Remaining": str(remaining),
        "X-RateLimit-Reset": str(reset), "Retry-After": str(int(reset - time.time()))})


def _tables() -> Any:
    return current_app.extensions["tables"]


def _after(plan: Plan, state: _Counted, response: Any) -> Any:
    """After a limited view: the client's own write limits if no script counted them (a request refused before
    its APPEND: answered 429 instead if they refuse), a table's reads if it answered, then the headers."""
    counters: Limits = current_app.extensions[EXTENSION]
    charge = state.charge
    if charge is not None and not charge.counted:
        try:
            _tables().charge(charge)
        except RateLimited as exc:
            if response.status_code >= 400:
                return respond(describe_store_error(exc))
        except Exception as exc:  # noqa: BLE001 - Redis trouble: the answer stands (it says so if it is the store's)
            log.warning("the client's write limits were not counted (%s)", type(exc).__name__)
    if response.status_code not in _NOT_ANSWERED:
        for item, ids in state.deferred:
            counters.hit(item, *ids)
    if response.status_code == 429:  # (the refusing limit's headers)
        return response
    return _tightest_in_headers(counters, state, response)


def charge() -> Charge | None:
    """The client's own write limits this request counts, for the view to hand to the store's write (its APPEND
    counts them); None when none is on."""
    state = g.get(COUNTED)
    return state.charge if state is not None else None


def charge_batch(items: int) -> None:
    """Count ``items`` batch items against the client's limit (:class:`~.problems.RateLimitExceeded`, a 429,
    when they would exceed it); nothing when no limit is on or ``items`` is 0."""
    counters: Limits | None = current_app.extensions.get(EXTENSION)
    if counters is None or items <= 0:
        return
    name = "client_batch_items_per_minute"
    amount = counters.amount(name)
    if not amount:
        return
    item, scope = _item(amount, "minute"), limit_name(name)
    ids = (keys.RATE_LIMIT_PREFIX, client_key(), scope)
    state = g.get(COUNTED)
    if state is not None and (item, ids) not in state.counted:
        state.counted.append((item, ids))
    if not counters.hit(item, *ids, cost=items):
        raise _refused(counters, item, ids, scope)


def _tightest_in_headers(counters: Limits, state: _Counted, response: Any) -> Any:
    """The ``X-RateLimit-*`` headers describe the limit closest to refusing (the first of equals): the table's
    own (the store's quota of a write), the client's own write limits, then the others in their order."""
    candidates = []
    now = int(time.time())
    quota = g.get(QUOTA)
    if quota is not None:
        candidates.append((quota.remaining, quota.limit, int(quota.reset_ms / 1000) + now))
    if state.charge is not None and state.charge.quotas:
        candidates.extend((q.remaining, q.limit, int(q.reset_ms / 1000) + now) for q in state.charge.quotas)
    try:
        for item, ids in state.counted:
            remaining, reset = counters.stats(item, *ids)
            candidates.append((remaining, item.amount, reset))
    except Exception as exc:  # noqa: BLE001 - Redis trouble: the headers of what is known
        log.warning("rate limit headers without the limits' windows (%s)", type(exc).__name__)
    if candidates:
        remaining, amount, reset = min(candidates, key=lambda c: c[0])
        response.headers["X-RateLimit-Limit"] = str(amount)
        response.headers["X-RateLimit-Remaining"] = str(remaining)
        response.headers["X-RateLimit-Reset"] = str(reset)
    return response


def _table_key() -> str:
    return "table:" + str((request.view_args or {}).get("table_id", "-"))[:64]
