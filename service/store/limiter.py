"""The rate limiter's storage: the app's own Redis client, with its failures counted.

Flask-Limiter keeps its counters with the ``limits`` library, which would
open clients of its own from ``REDIS_URL``.  It reads the same URL forms, but
its cluster client connects when it is made (a worker started while no
cluster node answers could not start at all), its Sentinel URL takes no
``/db``, and its clients would re-send failed commands.  So the limiter counts
on the app's client instead (:func:`service.store.client.connect`): the
``mahjong+redis://`` storage below is ``limits``' own Redis storage (its Lua
scripts, one key per script, so every one stays on one cluster slot) over
that client, handed over in ``storage_options``.

A limiter that cannot reach Redis does not turn its limits off silently:
:func:`count_errors` counts every failed call in
``mahjong_rate_limit_storage_errors_total{operation}`` and logs a warning,
and Flask-Limiter (``in_memory_fallback_enabled``) then counts the limits in
the memory of each worker until Redis answers its ``check()`` again (it asks
after 1, 2, 4 ... 32 s): the limits still hold, per worker process.

>>> uri, options = storage_options("the client")
>>> uri, options
('mahjong+redis://', {'client': 'the client'})
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

from limits.storage import RedisStorage
from redis.cluster import RedisCluster

from .client import kept_scripts
from limits.storage.base import Storage

log = logging.getLogger("service.store")

SCHEME = "mahjong+redis"
METHODS = ("incr", "get", "get_expiry", "clear", "acquire_entry", "get_moving_window",
           "acquire_sliding_window_entry", "acquire_sliding_window_entry_and_window", "get_sliding_window",
           "clear_sliding_window", "check")

_ERRORS = None
Window = tuple[int, float, int, float]
"""A sliding window as ``limits`` reads it: (previous count, its seconds left, current count, its seconds left)."""


class SharedClientStorage(RedisStorage):
    """``limits``' Redis storage over a client made elsewhere (a ``redis.Redis`` or a ``RedisCluster``)."""

    STORAGE_SCHEME = [SCHEME]

    def __init__(self, uri: str, client: Any = None, key_prefix: str = RedisStorage.PREFIX,
                 wrap_exceptions: bool = False, **options: Any) -> None:
        if client is None:
            raise ValueError(f"a {SCHEME}:// storage needs storage_options={{'client': <redis client>}}")
        Storage.__init__(self, uri, wrap_exceptions=wrap_exceptions, **options)
        self.key_prefix = key_prefix
        self.target_server = "redis"
        self.dependency = self.dependencies["redis"].module
        self.storage = client
        self._cluster = isinstance(client, RedisCluster)
        self._kept = kept_scripts(client)
        self.initialize_storage(uri)

    def acquire_sliding_window_entry_and_window(
            self, key: str, limit: int, expiry: int, amount: int = 1,
            also_read: Sequence[tuple[str, int]] = ()) -> tuple[bool, Window, dict[str, Window]]:
        """:meth:`acquire_sliding_window_entry` and then :meth:`get_sliding_window` of the same key in one
        round trip: ``limits``' own two scripts in one pipeline (both keys of a limit share a hash tag, so
        one cluster slot), with the windows of ``also_read`` (``(key, expiry)`` of other limits) read in
        the same pipeline; answers ``(acquired, window, {key: window of also_read})``.

        A server that lost its scripts (a restart, a fail-over) gets the two calls one after the
        other, as ``limits`` makes them (they load a missing script), and nothing else is read; so
        does a cluster, whose redis-py pipelines refuse ``EVALSHA`` (and whose limits' keys are on
        other slots)."""
        if self._cluster:
            return (self.acquire_sliding_window_entry(key, limit, expiry, amount),
                    self.get_sliding_window(key, expiry), {})
        keys = self._window_keys(key)
        calls = [(self.lua_acquire_sliding_window, keys, [limit, expiry, amount]),
                 (self.lua_sliding_window, keys, [expiry]),
                 *[(self.lua_sliding_window, self._window_keys(other), [other_expiry])
                   for other, other_expiry in also_read]]
        if self._kept is not None:  # a plain Redis: on a kept connection (as the table log's writes)
            acquired, window, *others = self._kept.many(calls)
        else:
            pipe = self.get_connection().pipeline(transaction=False)
            for script, script_keys, args in calls:
                pipe.evalsha(script.sha, len(script_keys), *script_keys, *args)
            acquired, window, *others = pipe.execute(raise_on_error=False)
        missing = self.dependency.exceptions.NoScriptError
        if isinstance(acquired, missing):  # not run
            return (self.acquire_sliding_window_entry(key, limit, expiry, amount),
                    self.get_sliding_window(key, expiry), {})
        if isinstance(acquired, Exception):
            raise acquired
        if isinstance(window, Exception):
            if not isinstance(window, missing):
                raise window
            window = self.get_sliding_window(key, expiry)
        else:
            window = _window(window)
        return bool(acquired), window, {other: _window(answer) for (other, _), answer in zip(also_read, others)
                                        if not isinstance(answer, Exception)}

    def _window_keys(self, key: str) -> list[str]:
        return [self.prefixed_key(self._previous_window_key(key)), self.prefixed_key(self._current_window_key(key))]


def _window(window: Any) -> Window:
    """The answer of ``limits``' sliding window script as :meth:`RedisStorage.get_sliding_window` returns it."""
    if not window:
        return 0, 0.0, 0, 0.0
    return (int(window[0] or 0), max(0, float(window[1] or 0)) / 1000,
            int(window[2] or 0), max(0, float(window[3] or 0)) / 1000)


def storage_options(client: Any) -> tuple[str, dict[str, Any]]:
    """``(storage_uri, storage_options)`` for Flask-Limiter: counters on ``client``."""
    return f"{SCHEME}://", {"client": client}


def errors():
    """The Prometheus counter ``mahjong_rate_limit_storage_errors_total`` (made on first use)."""
    global _ERRORS
    if _ERRORS is None:
        from prometheus_client import Counter

        _ERRORS = Counter("mahjong_rate_limit_storage_errors",
                          "Calls of the rate limiter to Redis that failed (the limits are then counted in each "
                          "worker's memory until Redis answers).", ["operation"])
    return _ERRORS


def count_errors(storage: Any) -> Any:
    """Make every failed call of ``storage`` (a ``limits`` storage) a metric and a warning; returns it.

    The error still reaches Flask-Limiter (which then falls back to memory); a
    ``check()`` that answers False (Redis still away) is counted too.
    """
    counter = errors()

    def wrap(name: str, method: Callable) -> Callable:
        def counted(*args: Any, **kwargs: Any) -> Any:
            try:
                result = method(*args, **kwargs)
            except Exception as exc:
                counter.labels(name).inc()
                log.warning("rate limiter: Redis failed (%s: %s); the limits are counted in this process "
                            "until it answers", type(exc).__name__, exc)
                raise
            if name == "check" and result is False:
                counter.labels(name).inc()
                log.warning("rate limiter: Redis still does not answer; the limits are counted in this process")
            return result
        return counted

    for name in METHODS:
        method = getattr(storage, name, None)
        if method is not None:
            setattr(storage, name, wrap(name, method))
    return storage
