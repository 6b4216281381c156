"""Webhooks' registrations: an API key's webhooks, their secrets, their delivery status and deliveries log.

What a registration is, how its notifications travel and what the delivery
guarantees: :mod:`service.webhooks`.

Secrets
-------
The service signs with each webhook's secret, so it must be able to read it:
Redis keeps it sealed with AES-256-GCM under a key derived (HKDF-SHA256) from
the SHA-256 digest of the owner's API key, which only the service's
configuration holds (``API_KEYS``), bound to the owner and the webhook id.  A
copy of Redis alone (a dump, a replica, a backup) does not give the secrets
away; the service's configuration does.  An API key replaced under the same
name leaves its webhooks' secrets unreadable: their deliveries fail
(``secret_unreadable``) until they are registered again.

A rotation (:meth:`Registry.rotate_secret`) makes a new secret and keeps the
one it replaces, sealed the same way, for :data:`PREVIOUS_SECRET_MS` (24 h):
until then every delivery carries two signatures (``v1,<new> v1,<previous>``
in ``webhook-signature``), so a receiver verifies with either.  A second
rotation within the 24 h replaces the previous secret with the one it
replaces.

Changes (``PATCH``)
-------------------
A registration keeps, beside what it takes (``events``, ``tables``), from when
it takes it: a notification is sent to a webhook only if the webhook took it
when it was written (its outbox entry's time, by the Redis clock; on a Redis
Cluster, whose nodes' clocks may differ a little, a change counts from
:data:`~.outbox.CLOCK_SLACK_MS` before it, as a registration always does).  So an event type or a table
added by a change is sent
from the change on (nothing written before it), one taken away is not sent
from then on (its notifications still waiting included), and a webhook
disabled (``enabled: false``) is sent nothing; re-enabled, it is sent what is
written from then on: nothing written before, while it was disabled or before
(as Stripe does for a disabled endpoint).  A new ``url`` gets whatever the
webhook has not been given yet.  A change reaches the dispatchers within
:data:`~.dispatcher.HOOKS_FOR` (a second): a delivery may follow the webhook as
it was until then.

The deliveries log
------------------
Each notification the dispatcher sends a webhook is a **delivery** (its id is
its ``webhook-id``, the same on every attempt), kept in the webhook's log with
its status (``delivered``, ``retrying``, ``dead``), its attempts, its last
response and the notification itself, the newest :data:`DELIVERIES_KEPT`.  A
``retrying`` delivery the webhook no longer takes (disabled, or changed) is
listed as ``dead``: nothing retries it.  A run of successes is written into the
log at most once a second by a lane job (and when it ends), a failure at once.
A redelivery (:meth:`Registry.redeliver`) sends a logged delivery again, from
the notification the log keeps (the outbox may have dropped it since), with the
same ``webhook-id``; it counts as an attempt of that delivery, one whose failure
is not retried.  Test messages (``POST …/test``) are not logged.
"""

from __future__ import annotations

import base64
import functools
import os
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
import redis
from cryptography.exceptions import InvalidTag

from ..store import codec, keys, redis_client
from ..store.sealing import seal_secret, unseal_secret
from .delivery import Attempt, Lookup, LookupTimeout, Sender, TargetRefused, deliver, resolve, sign
from .outbox import CLOCK_SLACK_MS, id_parts, message_body

EVENTS = ("event.recorded", "event.voided", "round.ended", "round.corrected", "table.created", "table.finished",
          "table.deleted", "season.updated")
MAX_WEBHOOKS = 20
"""Webhooks one API key may have."""
MAX_TABLES = 100
"""Table ids a webhook's filter may name."""
DEAD_KEPT = 1000
"""Dead letters kept per webhook (the newest)."""
DELIVERIES_KEPT = 500
"""Deliveries a webhook's log keeps (the newest): each about 200 bytes and its notification (370 on average)."""
PREVIOUS_SECRET_MS = 24 * 3600 * 1000
"""How long a rotated-out secret goes on signing beside the new one."""
REVISIONS = 8
"""Times a change reads a registration again when it changed meanwhile (then :class:`Busy`)."""
KEEP = object()
"""A member a change leaves as it is (``tables`` may be changed to None)."""
SECRET_PREFIX = "whsec_"
SECRETS_KEPT = 4096
"""Webhook secrets a process keeps unsealed."""
REGISTRATION_LOOKUP_S = 5.0
"""Seconds a registration waits for its URL's host to resolve (then 422, as for a host that does not)."""


def now_ms() -> int:
    return int(time.time() * 1000)


def new_secret() -> str:
    """A Standard Webhooks secret: ``whsec_`` and 24 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(os.urandom(24)).decode()




@dataclass(frozen=True)
class Webhook:
    """One registration, as Redis keeps it (see the module doc for what the ``*_from`` members say)."""

    id: str
    owner: str
    url: str
    events: tuple[str, ...]
    tables: tuple[str, ...] | None  # None: every table of the owner
    created: str
    created_ms: int
    sealed: str  # the secret, sealed (:func:`seal_secret`)
    enabled: bool = True
    since_ms: int = 0  # enabled again then (Redis ms): nothing written before is sent
    others_from_ms: int = 0  # a table without a start of its own is taken from then (0: its creation)
    table_from: Mapping[str, int] = field(default_factory=dict)  # table id -> taken from (ms)
    event_from: Mapping[str, int] = field(default_factory=dict)  # event type -> taken from (ms)
    previous: str | None = None  # the rotated-out secret, sealed, signing too until previous_until_ms
    previous_until_ms: int = 0

    def sees(self, table_id: str) -> bool:
        return self.tables is None or table_id in self.tables

    def takes(self, table_id: str, kind: str, written_ms: int) -> bool:
        """Whether the webhook, as it is now, is sent a notification of type ``kind`` of ``table_id`` written
        at ``written_ms`` (its outbox entry's time): one it took when it was written (the module doc).

        >>> hook = Webhook("wh_1", "acme", "https://x/", ("event.recorded",), None, "", 10_000, "",
        ...                event_from={"event.recorded": 50_000})
        >>> hook.takes("t", "event.recorded", 50_000), hook.takes("t", "event.recorded", 49_999)
        (True, False)
        >>> hook.takes("t", "round.ended", 60_000), replace(hook, enabled=False).takes("t", "event.recorded", 60_000)
        (False, False)
        """
        if not self.enabled or kind not in self.events or not self.sees(table_id):
            return False
        start = max(self.since_ms, self.event_from.get(kind, 0), self.table_from.get(table_id, self.start_ms()))
        return written_ms >= start

    def start_ms(self) -> int:
        """From when a table without a start of its own is taken: the webhook's registration (less
        :data:`~.outbox.CLOCK_SLACK_MS`, as its lanes start), or the change that made it take every table."""
        return self.others_from_ms or self.created_ms - CLOCK_SLACK_MS

    def revised(self, now: int, url: str | None = None, events: Iterable[str] | None = None,
                tables: Any = KEEP, enabled: bool | None = None) -> Webhook:
        """The webhook after a change made at ``now`` (Redis ms; see the module doc).

        >>> hook = Webhook("wh_1", "acme", "https://x/", ("event.recorded",), ("a",), "", 10_000, "")
        >>> wider = hook.revised(50_000, events=["event.recorded", "round.ended"], tables=["a", "b"])
        >>> dict(wider.event_from), dict(wider.table_from)
        ({'round.ended': 50000}, {'a': 9000, 'b': 50000})
        >>> every = wider.revised(90_000, tables=None)
        >>> every.tables, dict(every.table_from), every.others_from_ms
        (None, {'a': 9000, 'b': 50000}, 90000)
        >>> back = hook.revised(50, enabled=False).revised(700, enabled=True)
        >>> back.enabled, back.since_ms
        (True, 700)
        """
        out = self
        if url is not None:
            out = replace(out, url=url)
        if events is not None:
            kinds = tuple(dict.fromkeys(events))
            starts = {k: now for k in kinds if k not in self.events}  # (one kept keeps its start)
            starts |= {k: self.event_from[k] for k in kinds if k in self.events and k in self.event_from}
            out = replace(out, events=kinds, event_from=starts)
        ids = KEEP if tables is KEEP else None if tables is None else tuple(dict.fromkeys(tables))
        if ids is not KEEP and ids != self.tables:
            default = self.start_ms()
            if ids is None:  # every table: those listed keep their start, the others start now
                out = replace(out, tables=None, others_from_ms=now,
                              table_from={t: self.table_from.get(t, default) for t in self.tables or ()})
            else:
                out = replace(out, tables=ids, table_from={
                    t: (self.table_from.get(t, default) if self.sees(t) else now) for t in ids})
        if enabled is not None and enabled != self.enabled:
            out = replace(out, enabled=enabled, since_ms=now if enabled else self.since_ms)
        return out

    def stored(self) -> bytes:
        found: dict[str, Any] = {
            "url": self.url, "events": list(self.events), "tables": None if self.tables is None else list(self.tables),
            "created": self.created, "created_ms": self.created_ms, "secret": self.sealed}
        optional = {"enabled": self.enabled if not self.enabled else None, "since": self.since_ms or None,
                    "others_from": self.others_from_ms or None, "table_from": dict(self.table_from) or None,
                    "event_from": dict(self.event_from) or None, "previous": self.previous,
                    "previous_until": self.previous_until_ms or None}
        return orjson.dumps(found | {k: v for k, v in optional.items() if v is not None})

    @classmethod
    def load(cls, owner: str, hook_id: str, raw: bytes | str) -> Webhook:
        d = orjson.loads(raw)
        return cls(hook_id, owner, d["url"], tuple(d["events"]), None if d["tables"] is None else tuple(d["tables"]),
                   d["created"], int(d["created_ms"]), d["secret"], bool(d.get("enabled", True)),
                   int(d.get("since", 0)), int(d.get("others_from", 0)), dict(d.get("table_from") or {}),
                   dict(d.get("event_from") or {}), d.get("previous"), int(d.get("previous_until", 0)))


def delivery_record(message_id: str, kind: str, table_id: str, seq: int | None, entry_id: str, data: bytes | str,
                    status: str, attempts: int, attempt: dict) -> str:
    """A delivery as its webhook's log keeps it (JSON): what ``GET …/deliveries`` lists, and its outbox entry
    (``e``) and notification (``d``, its ``data`` as written) for a redelivery.  ``attempt``: the last attempt's
    view (:meth:`Registry.attempt`)."""
    return orjson.dumps({
        "id": message_id, "type": kind, "table": table_id, "seq": seq, "status": status, "attempts": attempts,
        "last_response": {k: attempt[k] for k in ("at", "status", "error", "duration_ms")},
        "created": codec.iso(id_parts(entry_id)[0]), "e": entry_id,
        "d": data.decode() if isinstance(data, bytes) else data}).decode()


class TooManyWebhooks(Exception):
    """The API key has :data:`MAX_WEBHOOKS` webhooks already."""


class DeliveryNotFound(LookupError):
    """No such delivery in the webhook's log (never made, or no longer kept)."""


class Busy(RuntimeError):
    """A registration that kept changing while a change was made (:data:`REVISIONS` times)."""


class NotTheOwnersTable(ValueError):
    """A table filter names tables that are not the key's (``.indexes``: where)."""

    def __init__(self, indexes: list[int]) -> None:
        super().__init__(indexes)
        self.indexes = indexes


@functools.lru_cache(maxsize=SECRETS_KEPT)
def _unsealed(digest: str, owner: str, hook_id: str, sealed: str) -> str | None:
    """A webhook's secret (None: it cannot be read with ``digest``), unsealed once per process."""
    try:
        return unseal_secret(digest, owner, hook_id, sealed)
    except (InvalidTag, ValueError):
        return None


class Registry:
    """The webhooks of API keys, kept in each key's slot.

    ``digests`` maps an API key's name to the SHA-256 digest (hex) of the key, which seals its
    webhooks' secrets (see the module doc).
    """

    def __init__(self, client: redis_client.Client, digests: Mapping[str, str], *,
                 allow_private: bool = False, lookup_timeout: float = REGISTRATION_LOOKUP_S,
                 lookup: Lookup | None = None) -> None:
        self.r = client
        self.lookup = lookup  # how a registration resolves its URL's host (None: socket.getaddrinfo)
        self.digests = dict(digests)
        self.allow_private = allow_private
        self.lookup_timeout = lookup_timeout
        self._register = client.register_script(keys.REGISTER)
        self._unregister = client.register_script(keys.UNREGISTER)
        self._revise = client.register_script(keys.REVISE)
        self._note = client.register_script(keys.NOTE)

    # the API's side
    def create(self, owner: str, url: str, events: Iterable[str], tables: list[str] | None) -> tuple[dict, str]:
        """A new webhook of ``owner``: its view and its secret (shown only now).  :class:`TargetRefused`
        for a URL it cannot send to, :class:`NotTheOwnersTable`, :class:`TooManyWebhooks`."""
        self._check_url(url)
        if tables is not None:
            self._check_tables(owner, tables)
        hook_id = "wh_" + secrets.token_hex(8)
        secret = new_secret()
        key = keys.webhooks(owner)
        created_ms = redis_client.clock_ms(self.r, key)
        hook = Webhook(hook_id, owner, url, tuple(dict.fromkeys(events)),
                       None if tables is None else tuple(dict.fromkeys(tables)), codec.iso(created_ms), created_ms,
                       seal_secret(self.digests[owner], owner, hook_id, secret))
        argv = keys.args(id=hook_id, registration=hook.stored().decode(), most=MAX_WEBHOOKS)
        done = self._register(keys=[key], args=argv)
        if not done:
            raise TooManyWebhooks(f"an API key has at most {MAX_WEBHOOKS} webhooks")
        return self._view(hook, {}), secret

    def _check_url(self, url: str) -> None:
        try:
            resolve(url, self.allow_private, timeout=self.lookup_timeout, lookup=self.lookup)
        except LookupTimeout as exc:  # (a request is not held by a resolver that does not answer)
            raise TargetRefused(str(exc)) from None

    def _check_tables(self, owner: str, tables: list[str]) -> None:
        wrong = []
        for i, table_id in enumerate(tables):
            meta = keys.meta(table_id)
            found_owner, dealer = self.r.hmget(meta, "owner", "dealer")
            if dealer is None or found_owner is None or redis_client.text(found_owner) != owner:
                wrong.append(i)
        if wrong:
            raise NotTheOwnersTable(wrong)

    def update(self, owner: str, hook_id: str, *, url: str | None = None, events: Iterable[str] | None = None,
               tables: Any = KEEP, enabled: bool | None = None) -> dict | None:
        """Change a webhook (what a ``PATCH`` names; the module doc says what a change does): its view, or None
        when there is no such webhook.  The same checks as :meth:`create` (:class:`TargetRefused`,
        :class:`NotTheOwnersTable`); a table already in the webhook's list is not checked again (the key may
        have deleted it since: it stays until the list is changed without it)."""
        if url is not None:
            self._check_url(url)
        if tables is not KEEP and tables is not None:
            hook = self.webhook(owner, hook_id)
            if hook is None:
                return None
            self._check_tables_at(owner, tables, skip=set(hook.tables or ()))
        hook = self._change(owner, hook_id, lambda h, now: h.revised(now, url, events, tables, enabled))
        return None if hook is None else self.get(owner, hook_id)

    def _check_tables_at(self, owner: str, tables: list[str], skip: set[str]) -> None:
        checked = [(i, t) for i, t in enumerate(tables) if t not in skip]
        try:
            self._check_tables(owner, [t for _, t in checked])
        except NotTheOwnersTable as exc:
            raise NotTheOwnersTable([checked[i][0] for i in exc.indexes]) from None

    def rotate_secret(self, owner: str, hook_id: str) -> tuple[dict, str] | None:
        """A new secret for the webhook (the one it replaces signs too for :data:`PREVIOUS_SECRET_MS`): the
        webhook's view and the new secret, or None when there is no such webhook."""
        secret = new_secret()
        digest = self.digests[owner]

        def rotated(hook: Webhook, now: int) -> Webhook:
            return replace(hook, sealed=seal_secret(digest, owner, hook.id, secret), previous=hook.sealed,
                           previous_until_ms=now + PREVIOUS_SECRET_MS)

        hook = self._change(owner, hook_id, rotated)
        if hook is None:
            return None
        return self._view(hook, self._states(owner, hook_id)), secret

    def _change(self, owner: str, hook_id: str, change: Any) -> Webhook | None:
        """Replace the registration with ``change(webhook, now)`` (now: the owner's Redis clock, ms, less the
        cluster's slack: the module doc), unless
        it changed meanwhile (then again, :data:`REVISIONS` times at most); the new webhook, or None: gone."""
        key = keys.webhooks(owner)
        slack = CLOCK_SLACK_MS if redis_client.kind(self.r) == "cluster" else 0  # (the module doc)
        for _ in range(REVISIONS):
            raw = self.r.hget(key, hook_id)
            if raw is None:
                return None
            hook = change(Webhook.load(owner, hook_id, raw), redis_client.clock_ms(self.r, key) - slack)
            done = int(self._revise(keys=[key], args=keys.args(id=hook_id, was=redis_client.text(raw),
                                                               registration=hook.stored().decode())))
            if done == 1:
                return hook
            if done == 0:
                return None
        raise Busy("the webhook kept changing while it was being changed; retry")

    def all(self, owner: str) -> list[dict]:
        """The owner's webhooks, oldest first, with their status."""
        key, status = keys.webhooks(owner), keys.webhook_status(owner)

        def read(r: redis.Redis) -> list:
            with r.pipeline(transaction=False) as p:
                p.hgetall(key)
                p.hgetall(status)
                return p.execute()

        found, states = redis_client.on_node(self.r, key, read)
        states = {k.decode(): v for k, v in states.items()}
        hooks = sorted((Webhook.load(owner, k.decode(), v) for k, v in found.items()), key=lambda h: h.created_ms)
        return [self._view(h, states) for h in hooks]

    _STATUS_FIELDS = ("ok", "dead", "dead-count", "last")

    def _states(self, owner: str, hook_id: str) -> dict[str, bytes | str]:
        fields = self.r.hmget(keys.webhook_status(owner), *(f"{hook_id}:{f}" for f in self._STATUS_FIELDS))
        return {f"{hook_id}:{f}": v for f, v in zip(self._STATUS_FIELDS, fields) if v is not None}

    def get(self, owner: str, hook_id: str) -> dict | None:
        key, status = keys.webhooks(owner), keys.webhook_status(owner)

        def read(r: redis.Redis) -> list:
            with r.pipeline(transaction=False) as p:
                p.hget(key, hook_id)
                p.hmget(status, *(f"{hook_id}:{f}" for f in self._STATUS_FIELDS))
                return p.execute()

        raw, fields = redis_client.on_node(self.r, key, read)
        if raw is None:
            return None
        states = {f"{hook_id}:{f}": v for f, v in zip(self._STATUS_FIELDS, fields) if v is not None}
        return self._view(Webhook.load(owner, hook_id, raw), states)

    def webhook(self, owner: str, hook_id: str) -> Webhook | None:
        key = keys.webhooks(owner)
        raw = self.r.hget(key, hook_id)
        return None if raw is None else Webhook.load(owner, hook_id, raw)

    def delete(self, owner: str, hook_id: str) -> bool:
        return bool(self._unregister(keys=[keys.webhooks(owner), *self._logs(owner, hook_id)],
                                     args=keys.args(id=hook_id)))

    @staticmethod
    def _logs(owner: str, hook_id: str) -> list[str]:
        """The keys of a webhook's status, dead letters and deliveries log (NOTE's KEYS[2:])."""
        return [keys.webhook_status(owner), keys.dead_letters(owner, hook_id), keys.deliveries(owner, hook_id),
                keys.delivery_order(owner, hook_id)]

    def dead_letters(self, owner: str, hook_id: str, limit: int = 100) -> list[dict]:
        """The webhook's newest dead letters."""
        key = keys.dead_letters(owner, hook_id)
        return [orjson.loads(x) for x in self.r.lrange(key, 0, limit - 1)]

    def deliveries(self, owner: str, hook_id: str, before: int | None, limit: int) -> dict | None:
        """A page of the webhook's deliveries log, newest first: ``{"deliveries", "next"}`` (``before``: the
        ``next`` of the page before, else None; ``next``: None at the end), or None: no such webhook."""
        key, order, log_key = keys.webhooks(owner), keys.delivery_order(owner, hook_id), keys.deliveries(owner, hook_id)
        top = "+inf" if before is None else f"({before}"

        def read(r: redis.Redis) -> list:
            with r.pipeline(transaction=False) as p:
                p.hget(key, hook_id)
                p.zrevrangebyscore(order, top, "-inf", start=0, num=limit + 1, withscores=True)
                return p.execute()

        raw, numbered = redis_client.on_node(self.r, key, read)
        if raw is None:
            return None
        hook = Webhook.load(owner, hook_id, raw)
        page = numbered[:limit]
        found = self.r.hmget(log_key, *[m for m, _ in page]) if page else []
        listed = [self._delivery_view(hook, orjson.loads(x)) for x in found if x is not None]
        more = len(numbered) > limit
        return {"deliveries": listed, "next": str(int(page[-1][1])) if more else None}

    @staticmethod
    def _delivery_view(hook: Webhook, stored: dict) -> dict:
        status = stored["status"]
        if status == "retrying" and not hook.takes(stored["table"], stored["type"], id_parts(stored["e"])[0]):
            status = "dead"  # (disabled, or changed: nothing retries it)
        return {"id": stored["id"], "type": stored["type"], "table": stored["table"], "seq": stored["seq"],
                "status": status, "attempts": stored["attempts"], "last_response": stored["last_response"],
                "created": stored["created"]}

    def redeliver(self, owner: str, hook_id: str, delivery_id: str, timeout: float) -> dict | None:
        """Send a logged delivery again now (one attempt, the same ``webhook-id``) and record it: the delivery
        as listed after it, or None when there is no such webhook (:class:`DeliveryNotFound`: no such
        delivery in its log).  A success makes it ``delivered`` (and the webhook ``ok``); a failure leaves its
        status as it was (nothing retries a redelivery)."""
        hook = self.webhook(owner, hook_id)
        if hook is None:
            return None
        raw = self.r.hget(keys.deliveries(owner, hook_id), delivery_id)
        if raw is None:
            raise DeliveryNotFound(f"no delivery {delivery_id!r} in the log of webhook {hook_id!r} (it keeps the "
                                   f"newest {DELIVERIES_KEPT})")
        stored = orjson.loads(raw)
        body = message_body(stored["type"], stored["e"], stored["d"])
        tried = self.attempt(hook, stored["id"], body, stored["type"], stored["table"], stored["seq"],
                             stored["attempts"] + 1, timeout)
        ok = tried["result"].ok
        record = delivery_record(stored["id"], stored["type"], stored["table"], stored["seq"], stored["e"],
                                 stored["d"], "delivered" if ok else stored["status"], stored["attempts"] + 1,
                                 tried["view"])
        if not self.note(hook, tried["view"], "ok" if ok else "test", deliveries=[(stored["id"], record)]):
            return None
        return self._delivery_view(hook, orjson.loads(record))

    @staticmethod
    def _view(hook: Webhook, states: Mapping[str, bytes | str]) -> dict:
        def number(name: str) -> int:
            value = states.get(f"{hook.id}:{name}")
            return int(value) if value is not None else 0

        last = states.get(f"{hook.id}:last")
        previous = hook.previous_until_ms if hook.previous is not None and hook.previous_until_ms > now_ms() else None
        return {"id": hook.id, "url": hook.url, "events": list(hook.events),
                "tables": None if hook.tables is None else list(hook.tables), "enabled": hook.enabled,
                "created": hook.created, "status": "failing" if number("dead") > number("ok") else "ok",
                "last_delivery": None if last is None else orjson.loads(last),
                "dead_letters": number("dead-count"),
                "previous_secret_expires": None if previous is None else codec.iso(previous)}

    # the dispatcher's side
    def hooks_of(self, owner: str) -> tuple[list[Webhook], int, set[str]]:
        """The owner's webhooks, the owner's Redis clock (ms) when they were read, and the ids of those
        that are ``failing``."""
        key, status = keys.webhooks(owner), keys.webhook_status(owner)

        def read(r: redis.Redis) -> list:
            with r.pipeline(transaction=False) as p:
                p.time()
                p.hgetall(key)
                p.hgetall(status)
                return p.execute()

        (sec, usec), found, states = redis_client.on_node(self.r, key, read)
        states = {k.decode(): v for k, v in states.items()}
        hooks = [Webhook.load(owner, k.decode(), v) for k, v in found.items()]
        failing = {h.id for h in hooks
                   if int(states.get(f"{h.id}:dead", 0)) > int(states.get(f"{h.id}:ok", 0))}
        return hooks, int(sec) * 1000 + int(usec) // 1000, failing

    def signing_secrets(self, hook: Webhook) -> list[str] | None:
        """The secrets that sign the webhook's deliveries (its own, then the one a rotation replaced, for
        :data:`PREVIOUS_SECRET_MS`), or None: its own cannot be read (its API key is not configured, or
        changed)."""
        digest = self.digests.get(hook.owner)
        current = None if digest is None else _unsealed(digest, hook.owner, hook.id, hook.sealed)
        if current is None:
            return None
        previous = None
        if hook.previous is not None and now_ms() < hook.previous_until_ms:
            previous = _unsealed(digest, hook.owner, hook.id, hook.previous)
        return [current] if previous is None else [current, previous]

    def note(self, hook: Webhook, attempt: dict | None, outcome: str, dead_letter: dict | None = None,
             deliveries: Iterable[tuple[str, str]] = ()) -> bool:
        """Record attempts: the last one (``attempt``, its view; None: none new) and its ``outcome`` (ok, failed,
        test, dead), and ``deliveries`` (``(id, delivery_record)``) into the deliveries log; False when the
        webhook is gone."""
        logged = [list(d) for d in deliveries]
        args = keys.args(id=hook.id, attempt=None if attempt is None else orjson.dumps(attempt).decode(),
                         outcome=outcome, kept=DEAD_KEPT,
                         dead_letter=orjson.dumps(dead_letter).decode() if dead_letter is not None else None,
                         deliveries=logged or None, logged=DELIVERIES_KEPT)
        return bool(self._note(keys=[keys.webhooks(hook.owner), *self._logs(hook.owner, hook.id)], args=args))

    def test(self, owner: str, hook_id: str, timeout: float) -> dict | None:
        """Send a signed ``webhook.test`` message to the webhook now (one attempt) and record it as its last
        delivery; the webhook's view, or None when there is no such webhook."""
        hook = self.webhook(owner, hook_id)
        if hook is None:
            return None
        at = now_ms()
        message_id = f"msg_test_{hook.id}_{at}"
        body = (f'{{"type":"webhook.test","timestamp":"{codec.iso(at)}","data":{{"table":null,"seq":null,'
                f'"version":null,"record":null,"balances":null}}}}')
        attempt = self.attempt(hook, message_id, body, "webhook.test", None, None, 1, timeout)
        self.note(hook, attempt["view"], "test")
        return self.get(owner, hook_id)

    def attempt(self, hook: Webhook, message_id: str, body: str, kind: str, table: str | None, seq: int | None,
                number: int, timeout: float, sender: Sender | None = None) -> dict:
        """One signed delivery of ``body``: ``{"result": Attempt, "view": its last_delivery}`` (``sender``: the
        lane job's, with the dispatcher's ``allow_private``; None: one connection for this attempt)."""
        signing = self.signing_secrets(hook)
        if signing is None:
            result = Attempt(False, None, "secret_unreadable: the webhook's API key is not configured as it was "
                                          "(register the webhook again)", 0)
        else:
            headers = sign(signing, message_id, body)
            result = sender.post(body.encode(), headers, timeout) if sender is not None else \
                deliver(hook.url, body.encode(), headers, timeout, self.allow_private)
        view = {"at": codec.iso(now_ms()), "id": message_id, "type": kind, "table": table, "seq": seq,
                "attempt": number, "ok": result.ok, "status": result.status, "error": result.error,
                "duration_ms": result.ms}
        return {"result": result, "view": view}
