"""Rate limits: 429 problem+json with ``Retry-After`` and ``limit`` (which one refused).

=============================  ========================  ======================================
setting (environment)          counted per               requests
=============================  ========================  ======================================
``TABLES_PER_HOUR``            client                    ``POST /v1/tables``, ``POST /v1/clubs/{id}/tables``
                                                         (a replay is free)
``CLIENT_EVENTS_PER_MINUTE``   client                    ``POST /v1/tables/{id}/events``, ``.../finish``; a
                                                         club's writes (``POST /v1/clubs``, its players,
                                                         merges, seasons, imports)
``CLIENT_VOIDS_PER_MINUTE``    client                    ``POST .../events/{seq}/void``
``CLIENT_READS_PER_MINUTE``    client                    ``GET /v1/tables``, ``GET /v1/tables/{id}``,
                                                         its events, its summary, its stream (each open);
                                                         a club, its players' pages, its standings
``TABLE_EVENTS_PER_MINUTE``    table                     ``POST /v1/tables/{id}/events``
``TABLE_VOIDS_PER_MINUTE``     table                     ``POST .../events/{seq}/void``
``TABLE_READS_PER_MINUTE``     table                     ``GET /v1/tables/{id}``, its events, its summary,
                                                         its stream (each open)
=============================  ========================  ======================================

The *client* is the API key when the request gave one (``API_KEY_LIMITS`` may
set that key's own limits), else the client address (:mod:`.callers`); every
request of a client counts, refused ones included.  0 turns a limit off.

* The client limits and the table's reads are Flask-Limiter's (its public
  decorators on the views, a sliding window counter, counters on the service's
  Redis: :mod:`service.store.limit_storage`).  A table's reads count only the
  requests the table answered (not 401/403/404), so that nobody without its
  tokens can use them up.  Flask-Limiter runs only for the table endpoints (a
  request filter): the stateless hand endpoints are not limited.
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

from typing import Any, Callable

from flask import Flask, current_app, g, request

from ..config import CLIENT_LIMITS, LIMITS, ApiKeys
from ..store import keys, limit_storage
from .callers import api_key, client_key

CREATE = ("tables.create_table", "clubs.create_club_table")
EVENTS = ("tables.post_event", "tables.finish_table", "clubs.create_club", "clubs.add_player", "clubs.update_player",
          "clubs.merge_player", "clubs.open_season", "clubs.import_evenings")
VOIDS = ("tables.void_event",)
TABLE_READS = ("tables.get_table", "tables.list_events", "tables.list_rounds", "tables.get_summary", "stream.stream_table")
READS = (*TABLE_READS, "tables.list_tables", "clubs.get_club", "clubs.get_player", "clubs.get_standings")
LIMITED_BLUEPRINTS = frozenset({"tables", "stream", "batch", "clubs"})
_NOT_ANSWERED = (401, 403, 404)
QUOTA = "table_quota"
"""Where a view leaves the store's :class:`~service.store.table_store.Quota` of a write (in ``g``)."""
BATCH_COST = "batch_items"
"""Where :func:`charge_batch` leaves the number of items it counts (in ``g``)."""
CHARGE = "batch_charge"
"""``app.extensions`` key of the batch items' limit (a plain function under Flask-Limiter's shared limit)."""


def limit_name(setting: str) -> str:
    """A limit's name as a 429 problem's ``limit`` says it: the setting without ``_per_...``.

    >>> limit_name("client_events_per_minute"), limit_name("tables_per_hour")
    ('client_events', 'tables_per_hour')
    """
    return setting if setting == "tables_per_hour" else setting.rsplit("_per_", 1)[0]


def install(app: Flask, client: Any, url: str) -> None:
    """Install the configured limits on ``app`` (none configured: nothing is installed)."""
    api_keys: ApiKeys = app.config.get("API_KEYS") or ApiKeys()
    setting = {name: int(app.config.get(var, 0) or 0) for name, (var, _, _) in LIMITS.items()}
    if not any(setting.values()) and not any(api_keys.limits.values()):
        return
    limiter = None

    @app.after_request
    def _limits_in_headers(response):
        # (registered before the limiter: after_request hooks run in reverse, so this runs after its own)
        if response.status_code not in (429, 503):  # Retry-After means something only there
            response.headers.pop("Retry-After", None)
        return _tightest_in_headers(limiter, response)

    if not any(v for name, v in setting.items() if name not in ("table_events_per_minute", "table_voids_per_minute")) \
            and not any(api_keys.limits.values()):
        return  # only the table's own limits: the store counts them
    from flask_limiter import Limiter

    storage_uri, storage_options = limit_storage.storage_for(client, url)
    limiter = Limiter(
        client_key, app=app, storage_uri=storage_uri, storage_options=storage_options,
        strategy="sliding-window-counter", key_prefix=keys.RATE_LIMIT_PREFIX, headers_enabled=True,
        swallow_errors=True, in_memory_fallback_enabled=True,
    )
    limiter.request_filter(lambda: request.blueprint not in LIMITED_BLUEPRINTS)
    app.extensions["rate_limits"] = limiter

    def current(name: str) -> int:
        return api_keys.limit(api_key(), name, setting[name]) if name in CLIENT_LIMITS else setting[name]

    def limit(endpoints: tuple[str, ...], name: str, key_func: Callable[[], str], *,
              exempt: Callable[[], bool] = lambda: False, **kwargs: Any) -> None:
        per = "hour" if name.endswith("_hour") else "minute"
        decorate = limiter.shared_limit(
            lambda: f"{current(name)}/{per}", scope=limit_name(name), key_func=key_func,
            exempt_when=lambda: current(name) == 0 or exempt(), **kwargs)
        for endpoint in endpoints:
            if endpoint in app.view_functions:
                app.view_functions[endpoint] = decorate(app.view_functions[endpoint])

    items = "client_batch_items_per_minute"
    app.extensions[CHARGE] = limiter.shared_limit(
        lambda: f"{current(items)}/minute", scope=limit_name(items), key_func=client_key,
        cost=lambda: g.get(BATCH_COST, 1), exempt_when=lambda: current(items) == 0)(_count_items)
    limit(CREATE, "tables_per_hour", client_key, exempt=_is_create_replay)
    limit(EVENTS, "client_events_per_minute", client_key)
    limit(VOIDS, "client_voids_per_minute", client_key)
    limit(READS, "client_reads_per_minute", client_key)
    limit(TABLE_READS, "table_reads_per_minute", _table_key,
          deduct_when=lambda response: response.status_code not in _NOT_ANSWERED)


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


def _is_create_replay() -> bool:
    """A retried table creation (its Idempotency-Key already made a table from this very
    request) replays the first response: it creates nothing, so it does not count against
    the limit.  The same key with another body counts (it could be guessing)."""
    from .table_views import creation_fingerprint, creation_key

    store = current_app.extensions.get("tables")
    if store is None:
        return False
    try:
        key = creation_key()
        return key is not None and store.is_creation_replay(key, creation_fingerprint(), api_key())
    except Exception:  # noqa: BLE001 - not a valid key (the view refuses it) or Redis trouble (503): counted
        return False
