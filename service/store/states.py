"""The table states a worker has seen, so that a write can skip reading the state first.

An entry (:class:`Kept`) is the state of a table after ``version`` records, the
hashes of its tokens and the SHA-1 of the state as stored.  It is only a guess:
the APPEND script appends only if the log is still at that version, the state
stored is that very state (its SHA-1) and the table's write token is still the
one whose hash the entry names (the same table, not another of the same id),
and otherwise answers the state it holds now.  An entry is *taken* for a write
(a plan steps the state in place) and put back, one version on, once the
script has appended; a write that fails leaves none.  Bounded: the least
recently put entry goes first.

>>> cache = StateCache(size=1)
>>> cache.put("a", Kept(1, None, (b"h", b"r"), "sha"))
>>> cache.put("b", Kept(2, None, (b"h", b"r"), "sha"))
>>> cache.take("a") is None, cache.take("b").version, cache.take("b")
(True, 2, None)
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .lru import Lru

STATES_KEPT = 2048  # table states a store (a worker) keeps between writes


class Kept(NamedTuple):
    version: int
    state: Any  # a service.rules.table.TableState
    hashes: tuple  # (write token hash, read token hash) as stored, bytes
    digest: str  # SHA-1 (hex) of the stored state


class StateCache:
    """A bounded map table id → :class:`Kept` (an :class:`~service.store.lru.Lru`), safe to share between
    threads (greenlets): an entry is taken out for a write, and put back after it."""

    def __init__(self, size: int = STATES_KEPT) -> None:
        self.size = size
        self._entries: Lru[str, Kept] = Lru(size)

    def take(self, table_id: str) -> Kept | None:
        return self._entries.pop(table_id)

    def put(self, table_id: str, kept: Kept) -> None:
        self._entries.put(table_id, kept)

    def drop(self, table_id: str) -> None:
        self._entries.pop(table_id)

    def __len__(self) -> int:
        return len(self._entries)
