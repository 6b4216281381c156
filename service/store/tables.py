"""The live table log on Redis: create, read, append, list, void, delete, verify.

Every write is one Lua script call (:mod:`service.store.keys`), so it is
all-or-nothing.  The hot path reads the state stored at version N, validates
the event against it with the rules core (the single source of truth), and asks
the script to append only if the log is still at N; a concurrent append makes
the script answer ``conflict`` and the store retries (or, under ``If-Match``,
reports 412).  An ``Idempotency-Key`` request stores its first response in the
same script call, so a retry can only replay it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping

import redis

from ..rules.table import TableState, VoidConflict, fold
from . import keys

IDEMPOTENCY_TTL = 24 * 3600
TOMBSTONE_TTL = 24 * 3600
MAX_RETRIES = 50


class StoreError(Exception):
    """Base of the store's errors; ``code`` is a stable id."""

    code = "store_error"

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context = context


class TableNotFound(StoreError):
    code = "table_not_found"


class EventNotFound(StoreError):
    code = "event_not_found"


class Unauthorized(StoreError):
    code = "unauthorized"


class Forbidden(StoreError):
    code = "forbidden"


class PreconditionFailed(StoreError):
    code = "version_mismatch"


class IdempotencyMismatch(StoreError):
    code = "idempotency_key_reused"


class Conflict(StoreError):
    """409: the table's state forbids the change (a void others depend on, a full log, ...)."""

    def __init__(self, code: str, message: str, **context: Any) -> None:
        super().__init__(message, **context)
        self.code = code


class Busy(StoreError):
    code = "busy"


@dataclass(frozen=True)
class Access:
    """Who asks: the bearer token given (or None) and whether the request writes."""

    token: str | None
    write: bool


def _check_token(table_id: str, hashes, access: Access) -> None:
    """401 without a token, 404 for an unknown table, 401 for a token that is not this
    table's, 403 for the read token on a write.

    No token says nothing about whether a table exists.  Tokens are compared as
    SHA-256 digests in constant time.
    """
    if not access.token:
        raise Unauthorized("this table needs 'Authorization: Bearer <token>'")
    if hashes[0] is None:
        raise TableNotFound(f"no table {table_id!r}")
    given = _hash(access.token)
    if hmac.compare_digest(given, hashes[0].decode()):
        pass
    elif hmac.compare_digest(given, hashes[1].decode()):
        if access.write:
            raise Forbidden("the read token cannot change the table; use the write token")
    else:
        raise Unauthorized("the token is not valid for this table")
    if len(hashes) > 2 and hashes[2]:
        raise TableNotFound(f"table {table_id!r} has been deleted")


@dataclass(frozen=True)
class Reply:
    """A write's response: what the client sees, and whether it was a replay."""

    status: int
    body: dict
    headers: dict
    replayed: bool = False


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _keystream(secret: str, n: int) -> bytes:
    return hashlib.shake_256(b"mahjong-idempotency-v1:" + secret.encode()).digest(n)


def _seal(secret: str, text: str) -> str:
    """Encrypt ``text`` under a key derived from ``secret`` (an Idempotency-Key Redis never sees)."""
    data = text.encode()
    return bytes(a ^ b for a, b in zip(data, _keystream(secret, len(data)))).hex()


def _unseal(secret: str, sealed: str) -> str:
    data = bytes.fromhex(sealed)
    return bytes(a ^ b for a, b in zip(data, _keystream(secret, len(data)))).decode()


def _matches(if_match: "int | tuple[int, ...]", version: int) -> bool:
    return version in if_match if isinstance(if_match, tuple) else version == if_match


def _show(if_match: "int | tuple[int, ...]") -> str:
    if isinstance(if_match, tuple):
        return " or ".join(str(v) for v in if_match if v >= 0) or "a weak tag"
    return str(if_match) if if_match >= 0 else "a weak tag"


def _created_id(idempotency_key: str) -> str:
    """The id of the table an Idempotency-Key creates (so that a retry finds it)."""
    return hashlib.sha256(b"table-id:" + idempotency_key.encode()).hexdigest()[:16]


def fingerprint(method: str, path: str, body: Any) -> str:
    """What an Idempotency-Key is bound to: the method, the path and the canonical body."""
    canon = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(f"{method} {path}\n{canon}".encode()).hexdigest()


class TableStore:
    """Tables kept in one Redis (or one Redis Cluster slot per table)."""

    def __init__(self, client: redis.Redis, *, table_ttl: int = 0, max_events: int = 0,
                 idempotency_ttl: int = IDEMPOTENCY_TTL) -> None:
        self.r = client
        self.table_ttl = table_ttl
        self.max_events = max_events
        self.idempotency_ttl = idempotency_ttl
        self._create = client.register_script(keys.CREATE)
        self._append = client.register_script(keys.APPEND)
        self._delete = client.register_script(keys.DELETE)
        self._repair = client.register_script(keys.REPAIR)

    # -- create ------------------------------------------------------------------
    def create(self, players: list[str], ruleset: Any, dealer: int = 0, *,
               idempotency_key: str | None = None, fp: str = "") -> Reply:
        """A new table; its tokens are returned here only (Redis keeps their SHA-256).

        With an ``Idempotency-Key`` the table id is derived from the key, so a retry
        finds the same table; its first response is kept encrypted with a key
        derived from the Idempotency-Key (which Redis never sees), so the tokens
        can be replayed without being stored in the clear.
        """
        state = TableState.new(players, ruleset, dealer)
        for _ in range(5):
            table_id = _created_id(idempotency_key) if idempotency_key else secrets.token_hex(8)
            token, read_token = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
            body = {"id": table_id, "token": token, "read_token": read_token, "players": list(players),
                    "ruleset": state.ruleset.as_dict(), "dealer": dealer, "version": 0,
                    "balances": [0, 0, 0, 0]}
            reply = Reply(201, body, {"Location": f"/v1/tables/{table_id}"})
            stored = ""
            if idempotency_key:
                stored = _dumps({"fp": fp, "sealed": _seal(idempotency_key, _dumps(
                    {"status": reply.status, "body": reply.body, "headers": reply.headers}))})
            fields = {
                "players": _dumps(list(players)), "ruleset": _dumps(state.ruleset.as_dict()),
                "dealer": str(dealer), "token": _hash(token), "read_token": _hash(read_token),
                "created": _now(),
            }
            flat = [x for kv in fields.items() for x in kv]
            idem = keys.idem(table_id, idempotency_key or "")
            res = self._create(keys=[keys.meta(table_id), keys.state(table_id), idem, keys.idems(table_id)],
                               args=[_dumps(state.to_dict()), self.table_ttl, stored,
                                     self.idempotency_ttl, *flat])
            if res[0] == 1:
                return reply
            if idempotency_key:
                if not res[1]:
                    if self.r.hget(keys.meta(table_id), "deleted"):
                        raise Conflict("table_deleted", "the table this Idempotency-Key created has been deleted")
                    raise Conflict("idempotency_key_expired",
                                   "this Idempotency-Key created a table whose first response is no longer kept "
                                   "(24 h): use the tokens from that response")
                rec = json.loads(res[1])
                if rec["fp"] != fp:
                    raise IdempotencyMismatch("this Idempotency-Key was used with a different request")
                first = json.loads(_unseal(idempotency_key, rec["sealed"]))
                return Reply(first["status"], first["body"], first["headers"], replayed=True)
        raise Busy("could not allocate a table id")  # pragma: no cover - 64 random bits

    # -- auth ------------------------------------------------------------------------
    def authorize(self, table_id: str, token: str | None, *, write: bool) -> None:
        """401 without a valid token of this table, 403 for the read token on a write, 404 if unknown."""
        _check_token(table_id, self.r.hmget(keys.meta(table_id), "token", "read_token", "deleted"),
                     Access(token, write))

    # -- read --------------------------------------------------------------------------
    def _load(self, table_id: str, access: "Access | None", idem: str | None = None,
              rounds: bool = False) -> tuple[TableState, int, bytes | None, list]:
        """One round trip: token hashes, state, version, a stored idempotent reply, rounds."""
        with self.r.pipeline(transaction=True) as p:
            p.hmget(keys.meta(table_id), "token", "read_token", "deleted")
            p.get(keys.state(table_id))
            p.llen(keys.log(table_id))
            if idem:
                p.get(idem)
            if rounds:
                p.lrange(keys.rounds(table_id), 0, -1)
            res = p.execute()
        hashes, state, version = res[0], res[1], res[2]
        if access is not None:
            _check_token(table_id, hashes, access)
        if hashes[0] is None or state is None:
            raise TableNotFound(f"no table {table_id!r}")
        st = TableState.from_dict(json.loads(state))
        if st.version != version:  # never expected: the script writes both at once
            st = self.rebuild(table_id)[0]
        return st, version, res[3] if idem else None, res[-1] if rounds else []

    def get(self, table_id: str, access: "Access | None" = None) -> dict:
        st, _, _, done = self._load(table_id, access, rounds=True)
        return self._view(table_id, st) | {"rounds": [json.loads(x) for x in done]}

    def _view(self, table_id: str, st: TableState) -> dict:
        return {"id": table_id, "players": st.players, "ruleset": st.ruleset.as_dict(),
                "dealer": st.dealer, "version": st.version, "balances": st.balances,
                "round": st.round_view()}

    def events(self, table_id: str, after: int = 0, limit: int = 100, access: "Access | None" = None) -> dict:
        with self.r.pipeline(transaction=True) as p:
            p.hmget(keys.meta(table_id), "token", "read_token", "deleted")
            p.lrange(keys.log(table_id), after, after + limit)
            p.get(keys.state(table_id))
            hashes, raw, state = p.execute()
        if access is not None:
            _check_token(table_id, hashes, access)
        if hashes[0] is None or hashes[2]:
            raise TableNotFound(f"no table {table_id!r}")
        voided = set(json.loads(state)["voided"]) if state else set()
        items = [json.loads(x) for x in raw[:limit]]
        for it in items:
            it["voided"] = it["seq"] in voided
        nxt = items[-1]["seq"] if len(raw) > limit else None
        return {"events": items, "next": nxt}

    # -- write ---------------------------------------------------------------------------
    def append(self, table_id: str, body: Mapping[str, Any], *, if_match: "int | tuple[int, ...] | None" = None,
               idempotency_key: str | None = None, fp: str = "", access: "Access | None" = None) -> Reply:
        """Validate ``body`` against the table's state and append it; see the module doc."""
        return self._write(table_id, if_match, idempotency_key, fp, access,
                           lambda st, version: self._plan_event(table_id, st, version, body))

    def void(self, table_id: str, target: int, *, if_match: "int | tuple[int, ...] | None" = None,
             idempotency_key: str | None = None, fp: str = "", access: "Access | None" = None) -> Reply:
        """Append a void record for ``target``; the state is refolded without it."""
        return self._write(table_id, if_match, idempotency_key, fp, access,
                           lambda st, version: self._plan_void(table_id, st, version, target))

    def _write(self, table_id, if_match, idem_key, fp, access, plan) -> Reply:
        idem = keys.idem(table_id, idem_key) if idem_key else keys.idem(table_id, "")
        for attempt in range(MAX_RETRIES):
            st, version, prior, _ = self._load(table_id, access, idem if idem_key else None)
            if prior is not None:
                return self._replay(prior, fp)
            if if_match is not None and not _matches(if_match, version):
                raise PreconditionFailed(f"the table is at version {version}, not {_show(if_match)}",
                                         current=version)
            record, new_state, reply, rounds_mode, rounds_payload = plan(st, version)
            stored = ""
            if idem_key:
                stored = _dumps({"fp": fp, "status": reply.status, "body": reply.body,
                                 "headers": reply.headers})
            res = self._append(
                keys=[keys.meta(table_id), keys.log(table_id), keys.state(table_id),
                      keys.rounds(table_id), idem, keys.idems(table_id)],
                args=[version, _dumps(record), _dumps(new_state.to_dict()), rounds_mode,
                      rounds_payload, stored, self.idempotency_ttl, self.table_ttl, self.max_events],
            )
            outcome = res[0].decode()
            if outcome == "ok":
                return reply
            if outcome == "replay":
                return self._replay(res[1], fp)
            if outcome == "missing":
                raise TableNotFound(f"no table {table_id!r}")
            if outcome == "full":
                raise Conflict("table_full", f"the table has reached its limit of {self.max_events} events",
                               current=version)
            current = int(res[1])
            if if_match is not None:
                raise PreconditionFailed(f"the table is at version {current}, not {_show(if_match)}",
                                         current=current)
            time.sleep(random.uniform(0, 0.002 * min(attempt + 1, 10)))
        raise Busy("too many concurrent writes to this table; retry")

    def _replay(self, raw: bytes, fp: str) -> Reply:
        rec = json.loads(raw)
        if rec["fp"] != fp:
            raise IdempotencyMismatch("this Idempotency-Key was used with a different request")
        return Reply(rec["status"], rec["body"], rec["headers"], replayed=True)

    def _plan_event(self, table_id: str, st: TableState, version: int, body: Mapping[str, Any]):
        seq = version + 1
        done_before = st.rounds_done
        new = st  # a fresh copy from Redis: step it in place (on error it is dropped)
        transfers = new.step(body, seq)  # raises EventError: nothing is written
        record = {"seq": seq, **body, "round": new.round_meta["number"] if new.round_meta else None,
                  "at": _now()}
        mode, payload = "none", ""
        if new.rounds_done > done_before:
            mode, payload = "push", _dumps(new.round_summary())
        reply = Reply(201, {"seq": seq, "version": seq, "transfers": [t.as_dict() for t in transfers],
                            "balances": new.balances, "round": new.round_view()},
                      {"Location": f"/v1/tables/{table_id}/events?after={seq - 1}&limit=1", "ETag": f'"{seq}"'})
        return record, new, reply, mode, payload

    def _plan_void(self, table_id: str, st: TableState, version: int, target: int):
        if not 1 <= target <= version:
            raise EventNotFound(f"table {table_id!r} has no event {target}")
        records = [json.loads(x) for x in self.r.lrange(keys.log(table_id), 0, version - 1)]
        if len(records) != version:  # a log only grows: it was deleted meanwhile
            raise TableNotFound(f"no table {table_id!r}")
        if records[target - 1].get("type") == "void":
            raise Conflict("not_voidable", f"event {target} is itself a void")
        if target in st.voided:
            raise Conflict("already_voided", f"event {target} is already voided")
        seq = version + 1
        record = {"seq": seq, "type": "void", "target": target, "at": _now()}
        try:
            new, summaries = fold(st.players, st.ruleset, st.first_dealer, records + [record])
        except VoidConflict as exc:
            raise Conflict("void_conflict",
                           f"event {target} cannot be voided: a later event depends on it ({exc.reason})",
                           event=exc.event) from None
        delta = [a - b for a, b in zip(new.balances, st.balances)]
        reply = Reply(201, {"seq": seq, "version": seq, "voided": target, "transfers": [],
                            "deltas": delta, "balances": new.balances, "round": new.round_view()},
                      {"Location": f"/v1/tables/{table_id}/events?after={seq - 1}&limit=1", "ETag": f'"{seq}"'})
        return record, new, reply, "replace", _dumps([_dumps(s) for s in summaries])

    def delete(self, table_id: str) -> bool:
        """Delete a table's keys, keeping a 24 h tombstone of its token hashes."""
        return bool(self._delete(keys=[keys.meta(table_id), keys.log(table_id), keys.state(table_id),
                                       keys.rounds(table_id), keys.idems(table_id)], args=[TOMBSTONE_TTL]))

    # -- verification ------------------------------------------------------------------------
    def rebuild(self, table_id: str) -> tuple[TableState, list[dict]]:
        """Fold the whole log (the definition of the state)."""
        meta = self.r.hgetall(keys.meta(table_id))
        if not meta or b"dealer" not in meta:
            raise TableNotFound(f"no table {table_id!r}")
        records = [json.loads(x) for x in self.r.lrange(keys.log(table_id), 0, -1)]
        return fold(json.loads(meta[b"players"]), json.loads(meta[b"ruleset"]) | {},
                    int(meta[b"dealer"]), records)

    def check(self, table_id: str, repair: bool = False) -> dict:
        """Compare the stored state with the fold of the log; optionally write the fold back.

        Everything is read in one transaction, so a table being written meanwhile is
        checked as it stood (a later append cannot look like a mismatch); a repair
        is written only if the log has not moved since.  Raises
        :class:`TableNotFound` for a table that does not exist (or no longer does).
        """
        with self.r.pipeline(transaction=True) as p:
            p.hgetall(keys.meta(table_id))
            p.lrange(keys.log(table_id), 0, -1)
            p.get(keys.state(table_id))
            p.lrange(keys.rounds(table_id), 0, -1)
            meta, log, state, rounds = p.execute()
        if b"dealer" not in meta:  # unknown, expired, or a deleted table's tombstone
            raise TableNotFound(f"no table {table_id!r}")
        folded, summaries = fold(json.loads(meta[b"players"]), json.loads(meta[b"ruleset"]),
                                 int(meta[b"dealer"]), [json.loads(x) for x in log])
        stored = None if state is None else json.loads(state)
        ok = stored == json.loads(_dumps(folded.to_dict())) and [json.loads(x) for x in rounds] == json.loads(
            _dumps(summaries))
        ok = ok and sum(folded.balances) == 0
        repaired = False
        if not ok and repair:
            repaired = bool(self._repair(keys=[keys.log(table_id), keys.state(table_id), keys.rounds(table_id)],
                                         args=[len(log), _dumps(folded.to_dict()),
                                               _dumps([_dumps(s) for s in summaries])]))
        return {"id": table_id, "version": len(log), "ok": ok, "repaired": repaired,
                "balances": folded.balances}

    def created_with(self, idempotency_key: str) -> bool:
        """Whether a table created with this Idempotency-Key exists (its retry is a replay)."""
        return bool(self.r.exists(keys.state(_created_id(idempotency_key))))

    def table_ids(self):
        """The ids of the live tables (deleted tables' tombstones left out), in no order."""
        batch: list[str] = []
        for key in self.r.scan_iter(match=keys.TABLE_PATTERN, count=500):
            k = key.decode()
            batch.append(k[len("{t:"): k.index("}")])
            if len(batch) == 500:
                yield from self._live(batch)
                batch = []
        yield from self._live(batch)

    def _live(self, ids: list[str]) -> list[str]:
        with self.r.pipeline(transaction=False) as p:
            for table_id in ids:
                p.hexists(keys.meta(table_id), "dealer")
            return [table_id for table_id, live in zip(ids, p.execute()) if live]
