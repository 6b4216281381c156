"""One small cache type for the per-process memos that :func:`functools.lru_cache` does not fit (an entry
taken out, or replaced when it is stale): a bounded map whose least recently put entry goes first.

>>> seen = Lru(2)
>>> seen.put("a", 1); seen.put("b", 2); seen.put("a", 3); seen.put("c", 4)
>>> seen.get("a"), seen.get("b"), seen.pop("c"), len(seen)
(3, None, 4, 1)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Lru(Generic[K, V]):
    """A map of at most ``size`` entries (0: it keeps none), safe to share between threads (greenlets)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        return self._entries.get(key)

    def put(self, key: K, value: V) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def pop(self, key: K) -> V | None:
        with self._lock:
            return self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)
