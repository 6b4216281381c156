"""A client's own write limits (events, voids a minute), counted by the store's scripts.

``CLIENT_EVENTS_PER_MINUTE`` and ``CLIENT_VOIDS_PER_MINUTE`` count every request
of a client to the endpoints that declare them, refused ones included.  An
append (an event, a void, a correction) counts them in its APPEND script, in
the one call that appends (:data:`~service.store.keys.APPEND`, its ``client``
argument), so that an append with every limit on is one Redis call.  Where no
APPEND runs (a finish, a club's write, a request refused before its append) the
HIT script counts them, one call; on a Redis Cluster the client's hash is in a
slot of its own, not the table's, so the store counts it with HIT before the
APPEND (two calls there).

A :class:`Charge` is what one request counts: built by the HTTP layer, counted
once by whichever script runs first (its :attr:`Charge.quotas` then say where
each limit stands, for the ``X-RateLimit-*`` headers).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import keys
from .errors import RateLimited

MINUTE_MS = 60_000


@dataclass(frozen=True)
class Quota:
    """Where a limit stands after a request it counted: ``limit`` a minute, ``remaining`` before it
    refuses, the window's end in ``reset_ms`` from now."""

    name: str
    limit: int
    remaining: int
    reset_ms: int


@dataclass(frozen=True)
class ClientLimit:
    """One of a client's own write limits: its name (``client_events``, ``client_voids``) and amount a minute."""

    name: str
    amount: int


class Charge:
    """What one request counts against its client's own write limits; :attr:`quotas` is None until a
    script counted it (then one :class:`Quota` per limit, in order; none when a limit refused it)."""

    __slots__ = ("key", "limits", "quotas")

    def __init__(self, client: str, limits: Iterable[ClientLimit]) -> None:
        self.key = keys.client_limits(client)
        self.limits = tuple(limits)
        self.quotas: tuple[Quota, ...] | None = None

    @property
    def counted(self) -> bool:
        return self.quotas is not None

    def args(self) -> list[dict[str, Any]]:
        """The limits as the scripts take them (``client`` of APPEND, ``limits`` of HIT)."""
        return [{"name": lim.name, "amount": lim.amount, "period": MINUTE_MS} for lim in self.limits]

    def settle(self, res: dict[str, Any]) -> None:
        """Read a script's answer (by name): the quotas when it counted, :class:`RateLimited` when one of
        the client's limits refused (nothing counted)."""
        if res.get("outcome") == b"limited" and res.get("limit", b"").decode() in self.names:
            name = res["limit"].decode()
            amount = next(lim.amount for lim in self.limits if lim.name == name)
            retry = max(1, -(-int(res["retry_ms"]) // 1000))
            self.quotas = ()  # (decided: not counted again)
            raise RateLimited(f"rate limit {amount} per 1 minute ({name}) reached: this client may send at most "
                              f"{amount} {name.split('_')[1]} a minute; retry in {retry} s",
                              limit=name, retry_after=retry, amount=amount)
        raw = res.get("client")
        if raw is not None:
            self.quotas = tuple(Quota(lim.name, lim.amount, int(raw[2 * i]), int(raw[2 * i + 1]))
                                for i, lim in enumerate(self.limits))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(lim.name for lim in self.limits)


def hit(script: Any, client: Any, charge: Charge) -> None:
    """Count ``charge`` with the HIT script (one call; see the module doc); :class:`RateLimited` when a limit
    refuses."""
    res = keys.reply(script(keys=[charge.key], args=keys.args(limits=charge.args(), ttl=keys.CLIENT_TTL_MS),
                            client=client))
    charge.settle(res)
