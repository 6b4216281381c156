"""The table store's errors: each a :class:`StoreError` with a stable ``code``.

The HTTP layer maps each family to a status (``service.api.problems``); the
store itself speaks no HTTP.
"""

from __future__ import annotations

from typing import Any


class StoreError(Exception):
    """Base of the store's errors; ``code`` is a stable id, ``context`` what the answer may add."""

    code = "store_error"

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context = context


class TableNotFound(StoreError):
    code = "table_not_found"


class EventNotFound(StoreError):
    code = "event_not_found"


class RoundNotFound(StoreError):
    code = "round_not_found"


class ClubNotFound(StoreError):
    code = "club_not_found"


class PlayerNotFound(StoreError):
    code = "player_not_found"


class SeasonNotFound(StoreError):
    code = "season_not_found"


CLUB_INPUT_CODES = ("player_not_in_club", "player_seated_twice", "merge_into_itself", "players_met", "bad_rows",
                    "empty_import")
"""Every code a :class:`ClubInputError` may carry."""


class ClubInputError(StoreError):
    """422: a club's request that its data refuses (a player of another club, a merge into itself, bad
    rows of an import); ``code`` is the reason's (one of :data:`CLUB_INPUT_CODES`), ``context["errors"]``
    (field path -> messages) says where."""

    def __init__(self, code: str, message: str, **context: Any) -> None:
        if code not in CLUB_INPUT_CODES:
            raise ValueError(f"not a club input code: {code!r}")
        super().__init__(message, **context)
        self.code = code


class Unauthorized(StoreError):
    code = "unauthorized"


class Forbidden(StoreError):
    code = "forbidden"


class PreconditionFailed(StoreError):
    code = "version_mismatch"


class IdempotencyMismatch(StoreError):
    code = "idempotency_key_reused"


CONFLICT_CODES = ("table_full", "table_finished", "round_in_progress", "void_conflict", "already_voided",
                  "not_voidable", "table_deleted", "idempotency_key_expired", "correction_conflict",
                  "tokens_rotated", "name_taken", "already_imported", "table_not_finished", "table_followed")
"""Every code a :class:`Conflict` may carry."""


class Conflict(StoreError):
    """409: the table's state forbids the change (a void others depend on, a full log, ...); its ``code``
    is one of :data:`CONFLICT_CODES`."""

    def __init__(self, code: str, message: str, **context: Any) -> None:
        if code not in CONFLICT_CODES:
            raise ValueError(f"not a conflict code: {code!r}")
        super().__init__(message, **context)
        self.code = code


class RateLimited(StoreError):
    """A table's own limit (events or voids a minute) refused the write; nothing was written or counted.

    ``context``: ``limit`` (its name, e.g. ``table_events``), ``retry_after`` (seconds) and
    ``amount`` (the limit)."""

    code = "too_many_requests"


class Busy(StoreError):
    code = "busy"


class NotReplicated(Busy):
    """``REDIS_MIN_REPLICAS``: the write reached the primary, but ``WAIT`` did not see it on enough
    replicas in time.  It is not acknowledged (503): a retry under the same Idempotency-Key
    replays it once it is replicated, or applies it if a fail-over lost it."""

    code = "not_replicated"


class StoreEvicting(StoreError):
    """Redis may evict keys when full (its ``maxmemory-policy`` is not ``noeviction``): it would drop
    acknowledged writes silently, so none is taken (503) until the operator sets ``noeviction``."""

    code = "store_evicting"


class StoreFull(StoreError):
    """Redis is at its memory bound (``maxmemory``, ``noeviction``): nothing was written."""

    code = "store_full"
