"""Where the ``limits`` library counts: a storage on the service's Redis (:func:`storage_for`).

The per-client limits other than the clients' own write limits (which the
store's scripts count: :mod:`.charges`), and a table's reads, are ``limits``'
sliding window counters (:mod:`service.api.rate_limits`):

* a plain Redis or a Sentinel-managed master: ``limits``' Redis storage over
  the service's own connection pool (``connection_pool``), so the limits use
  the same connections, timeouts and master as the table store;
* a Redis Cluster: ``limits``' cluster storage, made on first use
  (:class:`LazyClusterStorage`): it reads the cluster's slot map when it is
  made, and a worker must start even while the cluster is away (it answers 503
  until the cluster answers).

>>> import redis
>>> client = redis.Redis()
>>> storage_for(client, "redis://localhost:6379/0").get_connection().connection_pool is client.connection_pool
True
>>> type(storage_for(None, "redis+cluster://10.0.0.1:7000,10.0.0.2:7000")).__name__
'LazyClusterStorage'
"""

from __future__ import annotations

import threading
from typing import Any

from limits.storage import RedisClusterStorage, RedisStorage, Storage
from limits.storage.base import MovingWindowSupport, SlidingWindowCounterSupport
from redis.backoff import NoBackoff
from redis.retry import Retry

from . import redis_client

LAZY_CLUSTER = "mahjong+cluster"


def storage_for(client: Any, url: str) -> Storage:
    """A ``limits`` storage counting on the Redis that ``url`` names (``client``'s connections, but on a
    cluster)."""
    if redis_client.parse(url).kind == "cluster":
        return LazyClusterStorage(LAZY_CLUSTER + "://" + url.split("://", 1)[1])
    return RedisStorage("redis://", connection_pool=client.connection_pool)


class LazyClusterStorage(Storage, MovingWindowSupport, SlidingWindowCounterSupport):
    """``limits``' :class:`~limits.storage.RedisClusterStorage`, made on its first use.

    Every call is the cluster storage's own; it is made (from the same URI, as
    ``redis+cluster://``, without re-sending failed commands) the first time
    one is asked of it, and until then nothing connects.
    """

    STORAGE_SCHEME = [LAZY_CLUSTER]

    def __init__(self, uri: str, wrap_exceptions: bool = False, **options: Any) -> None:
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)
        self._uri = "redis+cluster://" + uri.split("://", 1)[1]
        self._options = {"retry": Retry(NoBackoff(), 0), **options}
        self._storage: RedisClusterStorage | None = None
        self._lock = threading.Lock()

    @property
    def cluster(self) -> RedisClusterStorage:
        if self._storage is None:
            with self._lock:
                if self._storage is None:
                    self._storage = RedisClusterStorage(self._uri, **self._options)
        return self._storage

    @property
    def base_exceptions(self) -> type[Exception] | tuple[type[Exception], ...]:
        import redis

        return (redis.RedisError, redis.exceptions.RedisClusterException)

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        return self.cluster.incr(key, expiry, amount)

    def get(self, key: str) -> int:
        return self.cluster.get(key)

    def get_expiry(self, key: str) -> float:
        return self.cluster.get_expiry(key)

    def check(self) -> bool:
        try:
            return self.cluster.check()
        except Exception:  # noqa: BLE001 - not made: the cluster does not answer
            return False

    def reset(self) -> int | None:
        return self.cluster.reset()

    def clear(self, key: str) -> None:
        self.cluster.clear(key)

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        return self.cluster.acquire_entry(key, limit, expiry, amount)

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        return self.cluster.get_moving_window(key, limit, expiry)

    def acquire_sliding_window_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        return self.cluster.acquire_sliding_window_entry(key, limit, expiry, amount)

    def get_sliding_window(self, key: str, expiry: int) -> tuple[int, float, int, float]:
        return self.cluster.get_sliding_window(key, expiry)

    def clear_sliding_window(self, key: str, expiry: int) -> None:
        self.cluster.clear_sliding_window(key, expiry)
