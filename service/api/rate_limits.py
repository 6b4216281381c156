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

* The client limits and the table's reads are Flask-Limiter's (its public
  decorators, put on each view that declares them by :func:`install`, a sliding
  window counter, counters on the service's Redis:
  :mod:`service.store.limit_storage`).  A table's reads count only the
  requests the table answered (not 401/403/404), so that nobody without its
  tokens can use them up.  Flask-Limiter runs only for the endpoints that
  declare one of its limits (a request filter).
* A table's events and voids a minute are counted by the store's APPEND script
  in the same call that appends (:mod:`service.store.table_store`): a refused
  or failed write is not counted, and an append with the default limits on
  makes three Redis calls in all (the client's hit and its window for the
  headers, then the APPEND).
* Every limited response has the ``X-RateLimit-*`` headers of the limit closest
  to refusing (or of the one that refused), and a refused one ``Retry-After``.

* Batch items: ``CLIENT_BATCH_ITEMS_PER_MINUTE`` (per client, 600,000 by default) counts the items of
  ``POST /v1/batch``, not its requests: a JSON batch all its items at once before any is run (Flask-
  Limiter's ``cost``; a refused envelope counts 1), an NDJSON job each read's lines before they are run
  (:func:`charge_batch`, the same limit called on a plain function).  The single hand endpoints stay
  unlimited: a batch is the way to send many items, so it is what is counted.

If Redis cannot be asked, Flask-Limiter logs a warning and counts its limits
in each worker's memory until Redis answers again (``in_memory_fallback``):
they never silently turn off.  (A table's own limits need Redis anyway: without
it nothing is written.)
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from flask import Flask, current_app, g, request

from ..config import CLIENT_LIMITS, LIMITS
from ..store import keys, limit_storage
from . import settings
from .callers import api_key, client_key

View = TypeVar("View", bound=Callable[..., Any])

BY_THE_STORE = frozenset({"table_events_per_minute", "table_voids_per_minute"})
"""Limits the store's APPEND script counts (in the call that appends): a view declares them, nothing wraps it."""
BY_THE_VIEW = frozenset({"client_batch_items_per_minute"})
"""Limits the view charges itself (:func:`charge_batch`: a batch counts its items, not its requests)."""
BY_THE_TABLE = frozenset({"table_reads_per_minute"})
"""Flask-Limiter's limits counted per table (the ``table_id`` of the path), and only for the requests the table
answered (not 401/403/404: nobody without its tokens can use them up); the others are counted per client."""
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
"""Where a view leaves the store's :class:`~service.store.table_store.Quota` of a write (in ``g``)."""
BATCH_COST = "batch_items"
"""Where :func:`charge_batch` leaves the number of items it counts (in ``g``)."""
CHARGE = "batch_charge"
"""``app.extensions`` key of the batch items' limit (a plain function under Flask-Limiter's shared limit)."""


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
    """Install the configured limits on ``app``: each view's declared ones (none configured: nothing is
    installed)."""
    s = settings.current(app)
    api_keys = s.api_keys
    setting = {name: getattr(s, name) for name in LIMITS}
    if not any(setting.values()) and not any(api_keys.limits.values()):
        return
    limiter = None

    @app.after_request
    def _limits_in_headers(response):
        # (registered before the limiter: after_request hooks run in reverse, so this runs after its own)
        if response.status_code not in (429, 503):  # Retry-After means something only there
            response.headers.pop("Retry-After", None)
        return _tightest_in_headers(limiter, response)

    if not any(v for name, v in setting.items() if name not in BY_THE_STORE) and not any(api_keys.limits.values()):
        return  # only the table's own limits: the store counts them
    from flask_limiter import Limiter

    storage_uri, storage_options = limit_storage.storage_for(client, url)
    limiter = Limiter(
        client_key, app=app, storage_uri=storage_uri, storage_options=storage_options,
        strategy="sliding-window-counter", key_prefix=keys.RATE_LIMIT_PREFIX, headers_enabled=True,
        swallow_errors=True, in_memory_fallback_enabled=True,
    )
    app.extensions["rate_limits"] = limiter

    def current(name: str) -> int:
        return api_keys.limit(api_key(), name, setting[name]) if name in CLIENT_LIMITS else setting[name]

    shared: dict[tuple, Any] = {}  # one shared limit per setting (and exemption): its views count together

    def decorator(name: str, exempt_when: Callable[[], bool] | None) -> Any:
        if (name, exempt_when) not in shared:
            per = {"key_func": _table_key, "deduct_when": _answered} if name in BY_THE_TABLE else \
                {"key_func": client_key}
            shared[name, exempt_when] = limiter.shared_limit(
                lambda: f"{current(name)}/{'hour' if name.endswith('_hour') else 'minute'}", scope=limit_name(name),
                exempt_when=lambda: current(name) == 0 or (exempt_when is not None and exempt_when()), **per)
        return shared[name, exempt_when]

    counted: set[str] = set()  # the endpoints Flask-Limiter counts (it is not run for the others)
    for endpoint, view in list(app.view_functions.items()):
        found = declared(view)
        names = [name for name in found.limits if name not in BY_THE_STORE] if found is not None else []
        if names:
            counted.add(endpoint)
        for name in names:
            if name not in BY_THE_VIEW:
                app.view_functions[endpoint] = view = decorator(name, found.exempt_when)(view)
    limiter.request_filter(lambda: request.endpoint not in counted)
    items = "client_batch_items_per_minute"
    app.extensions[CHARGE] = limiter.shared_limit(
        lambda: f"{current(items)}/minute", scope=limit_name(items), key_func=client_key,
        cost=lambda: g.get(BATCH_COST, 1), exempt_when=lambda: current(items) == 0)(_count_items)


def charge_batch(items: int) -> None:
    """Count ``items`` batch items against the client's limit (RateLimitExceeded, a 429, when they would
    exceed it); nothing when no limit is installed or ``items`` is 0."""
    charge = current_app.extensions.get(CHARGE)
    if charge is None or items <= 0:
        return
    setattr(g, BATCH_COST, items)
    charge()


def _count_items() -> None:
    """What Flask-Limiter's batch limit decorates: the count is its ``cost``, the call is the check."""


def _tightest_in_headers(limiter: Any, response: Any) -> Any:
    """The ``X-RateLimit-*`` headers describe the limit closest to refusing.

    Flask-Limiter's headers describe the first limit of the request when none is
    breached; the table's own limit of a write (the store's quota) may be
    closer: a client pacing itself on ``Remaining`` must not meet a 429 with
    hundreds "remaining".  A refused request keeps the refusing limit's headers.
    """
    if response.status_code == 429:
        return response
    candidates = []
    quota = g.get(QUOTA)
    if quota is not None:
        candidates.append((quota.remaining, quota.limit, int(quota.reset_ms / 1000) + _now()))
    try:
        for lim in limiter.current_limits if limiter is not None else ():
            candidates.append((lim.remaining, lim.limit.amount, lim.reset_at))
    except Exception:  # noqa: BLE001 - Redis trouble: Flask-Limiter's own headers stay
        return response
    if len(candidates) > 1 or (quota is not None and candidates):
        remaining, amount, reset = min(candidates, key=lambda c: c[0])  # the first of equals
        response.headers["X-RateLimit-Limit"] = str(amount)
        response.headers["X-RateLimit-Remaining"] = str(remaining)
        response.headers["X-RateLimit-Reset"] = str(reset)
    return response


def _now() -> int:
    import time

    return int(time.time())


def _table_key() -> str:
    return "table:" + str((request.view_args or {}).get("table_id", "-"))[:64]


def _answered(response: Any) -> bool:
    return response.status_code not in _NOT_ANSWERED
