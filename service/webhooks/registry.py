"""Webhooks' registrations: an API key's webhooks, their secrets and their delivery status.

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

"""

from __future__ import annotations

import base64
import functools
import os
import secrets
import time
from dataclasses import dataclass
from typing import Iterable, Mapping

import orjson
import redis
from cryptography.exceptions import InvalidTag

from .delivery import Attempt, Lookup, LookupTimeout, Sender, TargetRefused, deliver, resolve, sign
from ..store import codec, keys, redis_client
from ..store.sealing import seal_secret, unseal_secret

EVENTS = ("event.recorded", "event.voided", "round.ended", "round.corrected", "table.created", "table.finished",
          "table.deleted", "season.updated")
MAX_WEBHOOKS = 20
"""Webhooks one API key may have."""
MAX_TABLES = 100
"""Table ids a webhook's filter may name."""
DEAD_KEPT = 1000
"""Dead letters kept per webhook (the newest)."""
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
    """One registration, as Redis keeps it."""

    id: str
    owner: str
    url: str
    events: tuple[str, ...]
    tables: tuple[str, ...] | None  # None: every table of the owner
    created: str
    created_ms: int
    sealed: str  # the secret, sealed (:func:`seal_secret`)

    def sees(self, table_id: str) -> bool:
        return self.tables is None or table_id in self.tables

    def stored(self) -> bytes:
        return orjson.dumps({"url": self.url, "events": list(self.events),
                             "tables": None if self.tables is None else list(self.tables),
                             "created": self.created, "created_ms": self.created_ms, "secret": self.sealed})

    @classmethod
    def load(cls, owner: str, hook_id: str, raw: bytes) -> "Webhook":
        d = orjson.loads(raw)
        return cls(hook_id, owner, d["url"], tuple(d["events"]), None if d["tables"] is None else tuple(d["tables"]),
                   d["created"], int(d["created_ms"]), d["secret"])


class TooManyWebhooks(Exception):
    """The API key has :data:`MAX_WEBHOOKS` webhooks already."""


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

    def __init__(self, client: "redis_client.Client", digests: Mapping[str, str], *,
                 allow_private: bool = False, lookup_timeout: float = REGISTRATION_LOOKUP_S,
                 lookup: Lookup | None = None) -> None:
        self.r = client
        self.lookup = lookup  # how a registration resolves its URL's host (None: socket.getaddrinfo)
        self.digests = dict(digests)
        self.allow_private = allow_private
        self.lookup_timeout = lookup_timeout
        self._register = client.register_script(keys.REGISTER)
        self._unregister = client.register_script(keys.UNREGISTER)
        self._note = client.register_script(keys.NOTE)


    # the API's side
    def create(self, owner: str, url: str, events: Iterable[str], tables: list[str] | None) -> tuple[dict, str]:
        """A new webhook of ``owner``: its view and its secret (shown only now).  :class:`TargetRefused`
        for a URL it cannot send to, :class:`NotTheOwnersTable`, :class:`TooManyWebhooks`."""
        try:
            resolve(url, self.allow_private, timeout=self.lookup_timeout, lookup=self.lookup)
        except LookupTimeout as exc:  # (a request is not held by a resolver that does not answer)
            raise TargetRefused(str(exc)) from None
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
        done = self._register(keys=[key], args=argv, client=self.r)
        if not done:
            raise TooManyWebhooks(f"an API key has at most {MAX_WEBHOOKS} webhooks")
        return self._view(hook, {}), secret

    def _check_tables(self, owner: str, tables: list[str]) -> None:
        wrong = []
        for i, table_id in enumerate(tables):
            meta = keys.meta(table_id)
            found_owner, dealer = self.r.hmget(meta, "owner", "dealer")
            if dealer is None or found_owner is None or found_owner.decode() != owner:
                wrong.append(i)
        if wrong:
            raise NotTheOwnersTable(wrong)

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

    def get(self, owner: str, hook_id: str) -> dict | None:
        key, status = keys.webhooks(owner), keys.webhook_status(owner)

        def read(r: redis.Redis) -> list:
            with r.pipeline(transaction=False) as p:
                p.hget(key, hook_id)
                p.hmget(status, *(f"{hook_id}:{f}" for f in ("ok", "dead", "dead-count", "last")))
                return p.execute()

        raw, fields = redis_client.on_node(self.r, key, read)
        if raw is None:
            return None
        states = {f"{hook_id}:{f}": v for f, v in zip(("ok", "dead", "dead-count", "last"), fields) if v is not None}
        return self._view(Webhook.load(owner, hook_id, raw), states)

    def webhook(self, owner: str, hook_id: str) -> Webhook | None:
        key = keys.webhooks(owner)
        raw = self.r.hget(key, hook_id)
        return None if raw is None else Webhook.load(owner, hook_id, raw)

    def delete(self, owner: str, hook_id: str) -> bool:
        key, status, dead = keys.webhooks(owner), keys.webhook_status(owner), keys.dead_letters(owner, hook_id)
        argv = keys.args(id=hook_id)
        return bool(self._unregister(keys=[key, status, dead], args=argv, client=self.r))

    def dead_letters(self, owner: str, hook_id: str, limit: int = 100) -> list[dict]:
        """The webhook's newest dead letters."""
        key = keys.dead_letters(owner, hook_id)
        return [orjson.loads(x) for x in self.r.lrange(key, 0, limit - 1)]

    @staticmethod
    def _view(hook: Webhook, states: Mapping[str, bytes]) -> dict:
        def number(name: str) -> int:
            value = states.get(f"{hook.id}:{name}")
            return int(value) if value is not None else 0

        last = states.get(f"{hook.id}:last")
        return {"id": hook.id, "url": hook.url, "events": list(hook.events),
                "tables": None if hook.tables is None else list(hook.tables), "created": hook.created,
                "status": "failing" if number("dead") > number("ok") else "ok",
                "last_delivery": None if last is None else orjson.loads(last),
                "dead_letters": number("dead-count")}

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

    def secret(self, hook: Webhook) -> str | None:
        """The webhook's secret, or None: it cannot be read (its API key is not configured, or changed)."""
        digest = self.digests.get(hook.owner)
        return None if digest is None else _unsealed(digest, hook.owner, hook.id, hook.sealed)

    def note(self, hook: Webhook, attempt: dict, outcome: str, dead_letter: dict | None = None) -> bool:
        """Record an attempt (``outcome``: ok, failed, dead); False when the webhook is gone."""
        key, status, dead = (keys.webhooks(hook.owner), keys.webhook_status(hook.owner),
                             keys.dead_letters(hook.owner, hook.id))
        args = keys.args(id=hook.id, attempt=orjson.dumps(attempt).decode(), outcome=outcome, kept=DEAD_KEPT,
                         dead_letter=orjson.dumps(dead_letter).decode() if dead_letter is not None else None)
        return bool(self._note(keys=[key, status, dead], args=args, client=self.r))

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
        secret = self.secret(hook)
        if secret is None:
            result = Attempt(False, None, "secret_unreadable: the webhook's API key is not configured as it was "
                                          "(register the webhook again)", 0)
        else:
            headers = sign(secret, message_id, body)
            result = sender.post(body.encode(), headers, timeout) if sender is not None else \
                deliver(hook.url, body.encode(), headers, timeout, self.allow_private)
        view = {"at": codec.iso(now_ms()), "id": message_id, "type": kind, "table": table, "seq": seq,
                "attempt": number, "ok": result.ok, "status": result.status, "error": result.error,
                "duration_ms": result.ms}
        return {"result": result, "view": view}
