"""Clubs on Redis: players, seasons, the tables played for a club, and the standings they make.

A club (docs/rules.md#s17) lives in one slot (``{c:<id>}``, :mod:`service.store.keys`).
Every write is read, computed here with the rules core
(:mod:`service.rules.season`), and made by one CLUB_APPLY script call that
makes it only if the club is still at the version it was read at (else it is
read and computed again): all of it or nothing, and no two writes computed on
the same version.  Reads are one READ script call (one round trip), the
standings included: they are kept up to date by each count, never refolded on
a read.

Counting a table exactly once
-----------------------------
A club's table lives in its own slot (``{t:<id>}``), so its finish (the table's
FINISH script) and its count (the club's CLUB_APPLY) are two writes in two
slots, which no script can join on a Redis Cluster.  So:

1. Before the table is created, its id is added to the club's ``uncounted``
   set (a *reservation*, with its time), so the club always knows the tables
   it may have to count.
2. The finish marks the table finished (its meta's ``finished``): that, and
   the reservation, are the pending marker, and they are written before the
   finish is acknowledged.
3. The count step (:meth:`ClubStore.count`) reads the finished table's
   summary and writes, in one CLUB_APPLY, its result (keyed by the table id),
   the new standings of its players, their histories, the notification, and
   the table's removal from ``uncounted``; a result already there is never
   counted again (the step is idempotent, keyed by the table id, and two
   steps computed on the same version cannot both be written).
4. The finish runs the count step after the table's FINISH; a finish
   retried (or racing another) runs it again, which finds it done.  A worker
   that dies between the two leaves a finished table in ``uncounted``: every
   later read or write of the club first counts the finished tables it finds
   there (:meth:`ClubStore._settle`).  A reservation whose table does not exist
   (its creation failed, the table expired or was deleted before it was
   finished) is dropped once it is a minute old.

A table counts in the season current at its ``finished_at``
(:func:`~service.rules.season.season_at`), whenever its count is made.

Merges
------
Merging player A into B makes B the player of every result A had: the results
are rewritten, the seasons A played in and the lifetime figures are refolded
from their results (in the order they were counted), and B's history is the
two joined, oldest first; A's id stays as a pointer to B (a read of A is B's
page, a seat naming A is B).  The rating of the merged player is therefore the
rating B would have had if every one of those tables had been played under one
name (the refold; other players' ratings in those seasons follow).  Two players
who sat at the same table are two people: that merge is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any

import orjson
import redis
from cryptography.exceptions import InvalidTag

from ..rules.season import (
    MIN_ROUNDS,
    ORDERS,
    Season,
    Standing,
    TableResult,
    fold,
    season_at,
    standings_table,
    step,
)
from . import keys, redis_client
from .errors import (
    Busy,
    ClubInputError,
    ClubNotFound,
    Conflict,
    Forbidden,
    IdempotencyMismatch,
    NotReplicated,
    PlayerNotFound,
    SeasonNotFound,
    StoreFull,
    TableNotFound,
    Unauthorized,
)
from .sealing import seal, unseal
from .table_store import Access, Created, TableStore

IDEMPOTENCY_TTL = 24 * 3600
MAX_RETRIES = 50
RESERVATION_MS = 60_000
"""A reservation in ``uncounted`` whose table does not exist is dropped once it is this old (ms)."""
CURRENT = "current"
"""The season id that names the club's current season in a path."""
EVENT = "season.updated"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def fold_name(name: str) -> str:
    """How names and aliases are compared (case-folded, spaces at the ends dropped)."""
    return name.strip().casefold()


def club_id_of(idempotency_key: str, owner: str | None = None) -> str:
    """The id of the club an Idempotency-Key creates (so that a retry finds it), scoped to the API key."""
    scope = b"" if owner is None else owner.encode() + b"\x00"
    return hashlib.sha256(b"club-id:" + scope + idempotency_key.encode()).hexdigest()[:16]


class _Stale(Exception):
    """The club moved on while a write was computed: read and compute again."""


@dataclass(frozen=True)
class ImportRow:
    """One row of an import: its ``line`` in the file, the evening's ``day`` (and ``label``, to tell two
    evenings of one day apart), the player as written, the total, the rounds (None: not given)."""

    line: int
    day: date
    player: str
    total: int
    rounds: int | None = None
    label: str = ""


@dataclass
class _Club:
    """A club as one read found it: its meta fields (text), and what else the read asked for."""

    id: str
    meta: dict[str, str]
    version: str
    found: list

    @property
    def owner(self) -> str | None:
        return self.meta.get("owner")

    def settings(self) -> dict:
        return {"ruleset": orjson.loads(self.meta["ruleset"]) if "ruleset" in self.meta else None,
                "stakes": orjson.loads(self.meta["stakes"]) if "stakes" in self.meta else None,
                "min_rounds": int(self.meta["min_rounds"]), "order": self.meta["order"]}


def _fields(flat: list) -> dict[str, str]:
    return {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}


def _hash_of(raw: Mapping) -> dict[str, Any]:
    """An HGETALL of JSON values, decoded."""
    return {k.decode(): orjson.loads(v) for k, v in raw.items()} if isinstance(raw, dict) else \
        {raw[i].decode(): orjson.loads(raw[i + 1]) for i in range(0, len(raw), 2)}


def _seasons(raw: Any) -> list[Season]:
    """The club's seasons, in the order they were opened."""
    found = [Season.from_dict(d) for d in _hash_of(raw).values()]
    return sorted(found, key=lambda s: int(s.id[1:]))


class ClubStore:
    """Clubs kept beside the tables (the same Redis); ``tables`` is the tables' store (a club's tables are
    tables).  ``webhooks``: whether a club an API key owns gets ``season.updated`` notifications."""

    def __init__(self, client: redis_client.Client, tables: TableStore, *, webhooks: bool = True,
                 idempotency_ttl: int = IDEMPOTENCY_TTL, min_replicas: int = 0, wait_timeout_ms: int = 1000) -> None:
        self.r = client
        self.tables = tables
        self.webhooks = webhooks
        self.idempotency_ttl = idempotency_ttl
        self.min_replicas = min_replicas
        self.wait_timeout_ms = wait_timeout_ms
        self._create = client.register_script(keys.CLUB_CREATE)
        self._apply_script = client.register_script(keys.CLUB_APPLY)
        self._reads = client.register_script(keys.READ)

    # -- Redis ---------------------------------------------------------------------------------
    def _read(self, *reads: tuple) -> list:
        """Several reads of one club at one moment, in one round trip (keys.READ; on a cluster the client
        routes it by its keys, all of the club's slot)."""
        names: list[str] = []
        encoded: list[list] = []
        for command, key, *args in reads:
            if key not in names:
                names.append(key)
            encoded.append([command, names.index(key) + 1, *args])
        return self._reads(keys=names, args=keys.args(reads=encoded))  # (registered on self.r)

    def _run(self, script, names: list, args: list, wrote=lambda result: True):
        try:
            if self.min_replicas:
                return redis_client.acknowledged(self.r, script, names, args, self.min_replicas,
                                                 self.wait_timeout_ms, wrote)
            return script(keys=names, args=args, client=self.r)
        except redis_client.NotReplicated as exc:
            raise NotReplicated(f"the write reached Redis but was not confirmed by {exc.wanted} replica(s) "
                                f"within {self.wait_timeout_ms} ms ({exc.replicas} did); it is not acknowledged: "
                                "retry") from None
        except redis.exceptions.ResponseError as exc:
            if isinstance(exc, redis.exceptions.OutOfMemoryError) or "OOM command not allowed" in str(exc):
                raise StoreFull("the store is full (its memory bound is reached): nothing was written") from None
            raise

    def _apply(self, club_id: str, version: str | None, writes: Sequence[tuple]) -> int:
        """Make ``writes`` (``(command, key, *args)``, keys of the club) if the club is at ``version`` (None:
        whatever it is): the new version; :class:`_Stale` when it moved on."""
        names = [keys.club_meta(club_id)]
        encoded = []
        for command, key, *args in writes:
            if key not in names:
                names.append(key)
            encoded.append([command, names.index(key) + 1, *(str(a) for a in args)])
        res = keys.reply(self._run(self._apply_script, names,
                                   keys.args(version=None if version is None else int(version), writes=encoded),
                                   wrote=lambda raw: keys.reply(raw)["outcome"] == b"ok"))
        if res["outcome"] == b"missing":
            raise ClubNotFound(f"no club {club_id!r}")
        if res["outcome"] == b"conflict":
            raise _Stale()
        if any(w[0] == "XADD" for w in writes):
            self._hint(club_id)
        return int(res["version"])

    def _hint(self, club_id: str) -> None:
        """Tell the webhook dispatchers that the club's outbox has a new notification (the sweep finds one
        whose hint was lost)."""
        try:
            self.r.zadd(keys.WEBHOOKS_DUE, {keys.club_box(club_id): int(time.time() * 1000)}, lt=True)
        except redis.exceptions.RedisError:
            pass

    # -- access ---------------------------------------------------------------------------------
    @staticmethod
    def _check(club_id: str, meta: Mapping[str, str], access: Access) -> None:
        """As a table's (:func:`service.store.table_store._check_access`'s reading), except that an unknown
        club is a 404 whatever the credentials (docs/api.md)."""
        if not meta:
            raise ClubNotFound(f"no club {club_id!r}")
        if access.token:
            given = _hash(access.token)
            if hmac.compare_digest(given, meta["token"]):
                return
            if hmac.compare_digest(given, meta["read_token"]):
                if access.write:
                    raise Forbidden("the club's read token cannot change the club; use its write token")
                return
            raise Unauthorized("the token is not valid for this club")
        if access.owner is not None:
            if meta.get("owner") is None or not hmac.compare_digest(meta["owner"], access.owner):
                raise ClubNotFound(f"no club {club_id!r}")
            return
        raise Unauthorized("this club needs 'Authorization: Bearer <token>' (or the X-API-Key that created it)")

    def _load(self, club_id: str, access: Access | None, *reads: tuple, settle: bool = True) -> _Club:
        """The club's meta and ``reads`` at one moment, its access checked; finished tables still to be
        counted are counted first (``settle``)."""
        for _ in range(MAX_RETRIES):
            res = self._read(("HGETALL", keys.club_meta(club_id)),
                             ("ZRANGE", keys.club_uncounted(club_id), 0, -1, "WITHSCORES"), *reads)
            meta = _fields(res[0])
            if access is not None:
                self._check(club_id, meta, access)
            elif not meta:
                raise ClubNotFound(f"no club {club_id!r}")
            pending = [(res[1][i].decode(), int(float(res[1][i + 1]))) for i in range(0, len(res[1]), 2)]
            if settle and pending and self._settle(club_id, pending):
                continue  # counted something: read again
            return _Club(club_id, meta, meta["version"], res[2:])
        raise Busy("too many concurrent writes to this club; retry")

    def _settle(self, club_id: str, pending: list[tuple[str, int]]) -> bool:
        """Count the finished tables among ``pending`` (and drop stale reservations): whether anything changed."""
        changed = False
        now = int(time.time() * 1000)
        for table_id, reserved in pending:
            outcome = self.count(club_id, table_id)
            if outcome == "counted":
                changed = True
            elif outcome == "missing" and now - reserved > RESERVATION_MS:
                self._apply(club_id, None, [("ZREM", keys.club_uncounted(club_id), table_id)])
                changed = True
        return changed

    # -- create ---------------------------------------------------------------------------------
    def create(self, name: str, *, ruleset: Mapping | None = None, stakes: Mapping | None = None,
               min_rounds: int = MIN_ROUNDS, order: str = "total", season: str = "1",
               idempotency_key: str | None = None, fp: str = "", owner: str | None = None) -> dict:
        """A new club, with its first season open; its tokens are shown here only.  An Idempotency-Key
        works as a table creation's (the id derived from it, the tokens kept sealed 24 h)."""
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}")
        for _ in range(5):
            club_id = club_id_of(idempotency_key, owner) if idempotency_key else secrets.token_hex(8)
            token, read_token = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
            record = None
            if idempotency_key:
                record = keys.fp_digest(fp) + seal(idempotency_key, "club:" + club_id, [token, read_token])
            at = _now()
            fields = {"name": name, "min_rounds": str(min_rounds), "order": order, "token": _hash(token),
                      "read_token": _hash(read_token), "created": at, "version": "0", "current": "s1",
                      "seasons": "1"}
            if ruleset is not None:
                fields["ruleset"] = _json(ruleset)
            if stakes is not None:
                fields["stakes"] = _json(stakes)
            if owner is not None:
                fields["owner"] = owner
            first = Season("s1", season, at)
            res = keys.reply(self._run(
                self._create, [keys.club_meta(club_id), keys.club_created(club_id), keys.club_seasons(club_id)],
                keys.args(meta=[x for kv in fields.items() for x in kv], season_id=first.id,
                          season=_json(first.as_dict()), created=record.hex() if record else None,
                          created_ttl=self.idempotency_ttl if record else None),
                wrote=lambda raw: keys.reply(raw)["outcome"] == b"created"))
            if res["outcome"] == b"created":
                return {**self.club(club_id, None), "token": token, "read_token": read_token}
            if idempotency_key:
                return self._replay_creation(club_id, idempotency_key, fp, res["record"])
        raise Busy("could not allocate a club id")  # pragma: no cover - 64 random bits

    def _replay_creation(self, club_id: str, idempotency_key: str, fp: str, record: bytes | None) -> dict:
        if not record:
            raise Conflict("idempotency_key_expired", "this Idempotency-Key created a club whose first response is "
                           "no longer kept (24 h): use the tokens from that response")
        if not hmac.compare_digest(record[:8], keys.fp_digest(fp)):
            raise IdempotencyMismatch("this Idempotency-Key was used with a different request")
        try:
            token, read_token = unseal(idempotency_key, "club:" + club_id, record[8:])
        except InvalidTag:
            raise IdempotencyMismatch("this Idempotency-Key was used with a different request") from None
        return {**self.club(club_id, None), "token": token, "read_token": read_token, "replayed": True}

    # -- reads ----------------------------------------------------------------------------------
    def club(self, club_id: str, access: Access | None) -> dict:
        """The club: its settings, its players (live ones, by name), its seasons and the current one."""
        c = self._load(club_id, access, ("HGETALL", keys.club_players(club_id)),
                       ("HGETALL", keys.club_seasons(club_id)))
        players, seasons = _hash_of(c.found[0]), _seasons(c.found[1])
        live = sorted(((pid, p) for pid, p in players.items() if "merged_into" not in p),
                      key=lambda item: (fold_name(item[1]["name"]), item[0]))
        return {"id": club_id, "name": c.meta["name"], **c.settings(), "created": c.meta["created"],
                "players": [self._player_view(pid, p) for pid, p in live],
                "seasons": [s.as_dict() for s in seasons], "current_season": c.meta["current"]}

    @staticmethod
    def _player_view(pid: str, p: Mapping) -> dict:
        return {"id": pid, "name": p["name"], "aliases": list(p["aliases"]), "merged": list(p.get("merged", []))}

    def _season_id(self, c: _Club, season: str) -> str:
        return c.meta["current"] if season == CURRENT else season

    def standings(self, club_id: str, access: Access | None, season: str = CURRENT, order: str | None = None) -> dict:
        """A season's standings in the club's order (or ``order``): one read of the kept standings."""
        for _ in range(MAX_RETRIES):
            reads: list[tuple[str, ...]] = [("HGETALL", keys.club_players(club_id))]
            if season != CURRENT:
                reads += [("HGET", keys.club_seasons(club_id), season),
                          ("HGETALL", keys.club_standings(club_id, season))]
            c = self._load(club_id, access, *reads)
            sid = self._season_id(c, season)
            if season == CURRENT:
                more = self._read(("HGET", keys.club_meta(club_id), "version"),
                                  ("HGET", keys.club_seasons(club_id), sid),
                                  ("HGETALL", keys.club_standings(club_id, sid)))
                if more[0].decode() != c.version:
                    continue
                found, rows = more[1], more[2]
            else:
                found, rows = c.found[1], c.found[2]
            if found is None:
                raise SeasonNotFound(f"club {club_id!r} has no season {season!r}")
            players = _hash_of(c.found[0])
            names = {pid: p["name"] for pid, p in players.items()}
            kept = [Standing.from_dict(d) for d in _hash_of(rows).values()]
            settings = c.settings()
            order = order or settings["order"]
            table = standings_table(kept, names, min_rounds=settings["min_rounds"], order=order)
            if any(s.coins is not None for s in kept):
                for row in table:
                    row.setdefault("coins", 0)
            return {"season": sid, "name": orjson.loads(found)["name"], "min_rounds": settings["min_rounds"],
                    "order": order, "players": table}
        raise Busy("too many concurrent writes to this club; retry")

    def _resolve(self, club_id: str, players: Mapping[str, Mapping], pid: str) -> str:
        """A player id of the club as it stands (a merged one: who it was merged into); PlayerNotFound."""
        p = players.get(pid)
        if p is None:
            raise PlayerNotFound(f"club {club_id!r} has no player {pid!r}")
        return p.get("merged_into", pid)

    def player(self, club_id: str, access: Access | None, pid: str) -> dict:
        """A player's page: lifetime figures, each season's (with the place in it), the history of evenings."""
        c = self._load(club_id, access, ("HGETALL", keys.club_players(club_id)),
                       ("HGETALL", keys.club_seasons(club_id)))
        players = _hash_of(c.found[0])
        pid = self._resolve(club_id, players, pid)
        seasons = _seasons(c.found[1])
        res = self._read(("HGET", keys.club_meta(club_id), "version"),
                         ("HGET", keys.club_lifetime(club_id), pid),
                         ("LRANGE", keys.club_history(club_id, pid), 0, -1),
                         *(("HGETALL", keys.club_standings(club_id, s.id)) for s in seasons))
        if res[0].decode() != c.version:  # (written between the two reads: read it all again)
            return self.player(club_id, access, pid)
        settings = c.settings()
        names = {p_id: p["name"] for p_id, p in players.items()}
        per_season = []
        for s, raw in zip(seasons, res[3:]):
            kept = _hash_of(raw)
            if pid not in kept:
                continue
            table = standings_table([Standing.from_dict(d) for d in kept.values()], names,
                                    min_rounds=settings["min_rounds"], order=settings["order"])
            row = next(r for r in table if r["player"] == pid)
            per_season.append({"season": s.id, "name": s.name, **{k: v for k, v in row.items()
                                                                  if k not in ("player", "name")}})
        lifetime = Standing.from_dict(orjson.loads(res[1])) if res[1] is not None else Standing(pid)
        history = sorted((orjson.loads(x) for x in res[2]), key=lambda e: (e["finished_at"], e["seq"]))
        return {**self._player_view(pid, players[pid]),
                "lifetime": {k: v for k, v in lifetime.as_dict().items() if k != "player"},
                "seasons": per_season,
                "history": [{k: v for k, v in e.items() if k != "seq"} for e in history]}

    # -- players --------------------------------------------------------------------------------
    @staticmethod
    def _clean_names(name: str, aliases: Iterable[str]) -> tuple[str, list[str]]:
        name = name.strip()
        out: list[str] = []
        seen = {fold_name(name)}
        for alias in aliases:
            alias = alias.strip()
            if alias and fold_name(alias) not in seen:
                seen.add(fold_name(alias))
                out.append(alias)
        return name, out

    def _taken(self, names: Mapping[str, str], wanted: Iterable[str], pid: str | None) -> None:
        for name in wanted:
            holder = names.get(fold_name(name))
            if holder is not None and holder != pid:
                raise Conflict("name_taken", f"{name!r} is already the name or an alias of player {holder}",
                               errors={"name": [f"{name!r} is taken"]})

    def add_player(self, club_id: str, access: Access, name: str, aliases: Sequence[str] = ()) -> dict:
        """A new player of the club (names and aliases are unique in a club, compared case-folded)."""
        name, aliases = self._clean_names(name, aliases)
        for _ in range(MAX_RETRIES):
            c = self._load(club_id, access, ("HGETALL", keys.club_names(club_id)))
            names = {k: v for k, v in ((k.decode(), v.decode()) for k, v in _pairs(c.found[0]))}
            self._taken(names, [name, *aliases], None)
            pid = "p" + secrets.token_hex(6)
            record = {"name": name, "aliases": aliases, "created": _now(), "merged": []}
            writes = [("HSET", keys.club_players(club_id), pid, _json(record))]
            writes += [("HSET", keys.club_names(club_id), fold_name(n), pid) for n in [name, *aliases]]
            try:
                self._apply(club_id, c.version, writes)
            except _Stale:
                continue
            return self._player_view(pid, record)
        raise Busy("too many concurrent writes to this club; retry")

    def update_player(self, club_id: str, access: Access, pid: str, name: str | None = None,
                      aliases: Sequence[str] | None = None) -> dict:
        """Rename a player and/or replace its aliases."""
        for _ in range(MAX_RETRIES):
            c = self._load(club_id, access, ("HGETALL", keys.club_players(club_id)),
                           ("HGETALL", keys.club_names(club_id)))
            players = _hash_of(c.found[0])
            pid = self._resolve(club_id, players, pid)
            record = dict(players[pid])
            new_name, new_aliases = self._clean_names(name if name is not None else record["name"],
                                                      aliases if aliases is not None else record["aliases"])
            names = {k.decode(): v.decode() for k, v in _pairs(c.found[1])}
            self._taken(names, [new_name, *new_aliases], pid)
            old = {fold_name(n) for n in [record["name"], *record["aliases"]]}
            new = {fold_name(n) for n in [new_name, *new_aliases]}
            record.update(name=new_name, aliases=new_aliases)
            writes: list[tuple] = [("HSET", keys.club_players(club_id), pid, _json(record))]
            if old - new:
                writes.append(("HDEL", keys.club_names(club_id), *sorted(old - new)))
            writes += [("HSET", keys.club_names(club_id), n, pid) for n in sorted(new - old)]
            try:
                self._apply(club_id, c.version, writes)
            except _Stale:
                continue
            return self._player_view(pid, record)
        raise Busy("too many concurrent writes to this club; retry")

    def merge(self, club_id: str, access: Access, pid: str, into: str) -> dict:
        """Merge player ``pid`` into ``into`` (see the module doc): ``into``'s page after it."""
        for _ in range(MAX_RETRIES):
            c = self._load(club_id, access, ("HGETALL", keys.club_players(club_id)),
                           ("HGETALL", keys.club_results(club_id)), ("HGETALL", keys.club_seasons(club_id)))
            players = _hash_of(c.found[0])
            pid = self._resolve(club_id, players, pid)
            if into not in players:
                raise ClubInputError("player_not_in_club", f"{into!r} is not a player of this club",
                                     errors={"into": ["not a player of this club"]})
            into = players[into].get("merged_into", into)
            if into == pid:
                raise ClubInputError("merge_into_itself", "a player cannot be merged into itself",
                                     errors={"into": ["the player being merged"]})
            stored = _hash_of(c.found[1])
            met = [rid for rid, s in stored.items() if {pid, into} <= set(TableResult.from_dict(s["result"]).players())]
            if met:
                raise ClubInputError("players_met", f"{pid} and {into} sat at the same table ({met[0]}): they are "
                                     "two people", errors={"into": [f"sat at {met[0]} with the player"]})
            writes = self._merge_writes(club_id, players, stored, _seasons(c.found[2]), pid, into, c.owner)
            try:
                self._apply(club_id, c.version, writes)
            except _Stale:
                continue
            return self.player(club_id, None, into)
        raise Busy("too many concurrent writes to this club; retry")

    def _merge_writes(self, club_id: str, players: dict, stored: dict, seasons: list[Season], pid: str, into: str,
                      owner: str | None) -> list[tuple]:
        gone, kept = players[pid], dict(players[into])
        _, kept["aliases"] = self._clean_names(kept["name"], [*kept["aliases"], gone["name"], *gone["aliases"]])
        kept["merged"] = sorted({*kept.get("merged", []), pid, *gone.get("merged", [])})
        writes: list[tuple] = [("HSET", keys.club_players(club_id), into, _json(kept)),
                               ("HSET", keys.club_players(club_id), pid,
                                _json({"name": gone["name"], "merged_into": into}))]
        for other, p in players.items():  # (earlier merges into pid now point at into)
            if p.get("merged_into") == pid:
                writes.append(("HSET", keys.club_players(club_id), other, _json({**p, "merged_into": into})))
        writes += [("HSET", keys.club_names(club_id), fold_name(n), into) for n in [gone["name"], *gone["aliases"]]]
        rewritten = {}
        affected = set()
        for rid, s in stored.items():
            result = TableResult.from_dict(s["result"])
            if pid in result.players():
                result = result.with_player(pid, into)
                affected.add(s["season"])
                rewritten[rid] = {**s, "result": result.as_dict()}
                writes.append(("HSET", keys.club_results(club_id), rid, _json(rewritten[rid])))
        every = sorted(({**s, **rewritten.get(rid, {})} for rid, s in stored.items()), key=lambda s: s["seq"])
        for season in sorted(affected):
            standings = fold(TableResult.from_dict(s["result"]) for s in every if s["season"] == season)
            key = keys.club_standings(club_id, season)
            writes.append(("DEL", key))
            writes += [("HSET", key, p_id, _json(st.as_dict())) for p_id, st in sorted(standings.items())]
            if owner is not None and self.webhooks:
                writes.append(self._notification(club_id, owner, season, None, sorted(standings)))
        lifetime = fold(TableResult.from_dict(s["result"]) for s in every)
        writes.append(("DEL", keys.club_lifetime(club_id)))
        writes += [("HSET", keys.club_lifetime(club_id), p_id, _json(st.as_dict()))
                   for p_id, st in sorted(lifetime.items())]
        history = [self._entry(TableResult.from_dict(s["result"]), s["season"], s["seq"], into,
                               s.get("imported", False))
                   for s in every if into in TableResult.from_dict(s["result"]).players()]
        writes.append(("DEL", keys.club_history(club_id, into)))
        writes.append(("DEL", keys.club_history(club_id, pid)))
        if history:
            writes.append(("RPUSH", keys.club_history(club_id, into), *(_json(e) for e in history)))
        return writes

    # -- seasons --------------------------------------------------------------------------------
    def open_season(self, club_id: str, access: Access, name: str) -> dict:
        """Open a new season: the current one ends now; tables finished from now on count in the new one."""
        for _ in range(MAX_RETRIES):
            c = self._load(club_id, access, ("HGETALL", keys.club_seasons(club_id)))
            seasons = _seasons(c.found[0])
            at = _now()
            last = seasons[-1]
            sid = f"s{int(c.meta['seasons']) + 1}"
            new = Season(sid, name, at)
            writes = [("HSET", keys.club_seasons(club_id), last.id, _json({**last.as_dict(), "ended": at})),
                      ("HSET", keys.club_seasons(club_id), sid, _json(new.as_dict())),
                      ("HSET", keys.club_meta(club_id), "current", sid, "seasons", str(int(c.meta["seasons"]) + 1))]
            try:
                self._apply(club_id, c.version, writes)
            except _Stale:
                continue
            return new.as_dict()
        raise Busy("too many concurrent writes to this club; retry")

    # -- tables ---------------------------------------------------------------------------------
    def create_table(self, club_id: str, access: Access, seats: Sequence[Mapping[str, str]], *,
                     ruleset: Any = None, dealer: int = 0, stakes: Any = None, idempotency_key: str | None = None,
                     fp: str = "", validate: Any = None) -> tuple[Created, list[dict]]:
        """A table played for the club: each seat ``{"player": id}`` (a player of this club) or
        ``{"guest": name}``; the club's ruleset and stakes unless given.  ``validate(names, ruleset,
        stakes)`` checks the table before anything is written.  The table is reserved in the club's
        ``uncounted`` before it is created (see the module doc); its owner is the club's."""
        c = self._load(club_id, access, ("HGETALL", keys.club_players(club_id)))
        players = _hash_of(c.found[0])
        names: list[str] = []
        resolved: list[dict] = []
        errors: dict[str, list[str]] = {}
        for i, seat in enumerate(seats):
            if "player" in seat:
                p = players.get(seat["player"])
                if p is None:
                    errors[f"players.{i}.player"] = ["not a player of this club"]
                    continue
                pid = p.get("merged_into", seat["player"])
                if any(r.get("player") == pid for r in resolved):
                    errors[f"players.{i}.player"] = ["this player has a seat already"]
                    continue
                resolved.append({"player": pid})
                names.append(players[pid]["name"])
            else:
                resolved.append({"guest": seat["guest"].strip()})
                names.append(seat["guest"].strip())
        if errors:
            not_in_club = any("not a player" in m[0] for m in errors.values())
            code = "player_not_in_club" if not_in_club else "player_seated_twice"
            raise ClubInputError(code, "the seats name players that are not this club's, or one player twice",
                                 errors=errors)
        settings = c.settings()
        ruleset = ruleset if ruleset is not None else (settings["ruleset"] or "xuezhan")
        stakes = stakes if stakes is not None else settings["stakes"]
        if validate is not None:
            ruleset, stakes = validate(names, ruleset, stakes)

        def reserve(table_id: str) -> None:
            self._apply(club_id, None, [("ZADD", keys.club_uncounted(club_id), "NX", int(time.time() * 1000),
                                         table_id)])

        created = self.tables.create(names, ruleset, dealer, stakes=stakes, idempotency_key=idempotency_key, fp=fp,
                                     owner=c.owner, meta={"club": club_id, "seats": _json(resolved)},
                                     reserve=reserve)
        return created, resolved

    def is_table_replay(self, club_id: str, access: Access, idempotency_key: str, fp: str) -> bool:
        """Whether this Idempotency-Key already made a table of the club from this very request (a retry that
        :meth:`create_table` answers as a replay).  The table's id is scoped to the club's owner, not to the
        caller's API key (a phone holds the club's token alone); a caller the club refuses (its read token,
        a wrong token, another key) has no replay."""
        found = self.r.hmget(keys.club_meta(club_id), "token", "read_token", "owner")
        meta = {name: v.decode() if isinstance(v, bytes) else v
                for name, v in zip(("token", "read_token", "owner"), found) if v is not None}
        try:
            self._check(club_id, meta, access)
        except (ClubNotFound, Unauthorized, Forbidden):
            return False
        return self.tables.is_creation_replay(idempotency_key, fp, meta.get("owner"))

    def table_club(self, table_id: str) -> str | None:
        """The club a table was played for (None: none)."""
        return self.tables.meta_fields(table_id, "club")[0]

    def count(self, club_id: str, table_id: str) -> str:
        """Count a finished table of the club in its season, once (see the module doc): ``counted`` (now),
        ``done`` (it was already), ``playing`` (not finished yet) or ``missing`` (no such table of the club)."""
        club, seats, finished, deleted = self.tables.meta_fields(table_id, "club", "seats", "finished", "deleted")
        if club != club_id or seats is None or deleted:
            return "missing"
        if finished is None:
            return "playing"
        try:
            summary = self.tables.summary(table_id)
        except TableNotFound:
            return "missing"
        pids = [s.get("player") for s in orjson.loads(seats)]
        for _ in range(MAX_RETRIES):
            res = self._read(("HGETALL", keys.club_meta(club_id)), ("HGETALL", keys.club_seasons(club_id)),
                             ("HGET", keys.club_results(club_id), table_id),
                             ("HMGET", keys.club_players(club_id), *(p or "-" for p in pids)))
            meta = _fields(res[0])
            if not meta:
                return "missing"
            if res[2] is not None:
                if not self._reserved_left(club_id, table_id):
                    return "done"
                try:  # (counted, but its reservation left: a count older than the reservation's removal)
                    self._apply(club_id, meta["version"], [("ZREM", keys.club_uncounted(club_id), table_id)])
                except _Stale:
                    continue
                return "done"
            current = [None if p is None else orjson.loads(raw).get("merged_into", p)
                       for p, raw in zip(pids, res[3])]
            seasons = _seasons(res[1])
            season = (season_at(seasons, finished) or seasons[0]).id
            result = TableResult.from_summary(summary, current, finished, table_id)
            before = self._standings_of(club_id, season, result.players())
            writes, _ = self._count_writes(club_id, season, result, int(meta.get("counted", 0)) + 1, before,
                                           imported=False)
            writes.append(("HSET", keys.club_meta(club_id), "counted", int(meta.get("counted", 0)) + 1))
            writes.append(("ZREM", keys.club_uncounted(club_id), table_id))
            if meta.get("owner") is not None and self.webhooks:
                writes.append(self._notification(club_id, meta["owner"], season, table_id, result.players()))
            try:
                self._apply(club_id, meta["version"], writes)
            except _Stale:
                continue
            return "counted"
        raise Busy("too many concurrent writes to this club; retry")

    def _reserved_left(self, club_id: str, table_id: str) -> bool:
        return self.r.zscore(keys.club_uncounted(club_id), table_id) is not None

    def _standings_of(self, club_id: str, season: str, players: Sequence[str]) -> tuple[dict, dict]:
        """The kept standings of ``players``: of ``season`` and lifetime (``{player: Standing}`` each)."""
        if not players:
            return {}, {}
        in_season, life = self._read(("HMGET", keys.club_standings(club_id, season), *players),
                                     ("HMGET", keys.club_lifetime(club_id), *players))
        return ({p: Standing.from_dict(orjson.loads(x)) for p, x in zip(players, in_season) if x is not None},
                {p: Standing.from_dict(orjson.loads(x)) for p, x in zip(players, life) if x is not None})

    def _count_writes(self, club_id: str, season: str, result: TableResult, seq: int,
                      before: tuple[dict, dict], *, imported: bool) -> tuple[list[tuple], tuple[dict, dict]]:
        """The writes that count ``result`` in ``season`` as the club's ``seq``-th result: the result, its
        players' new standings (of the season and lifetime, from ``before``) and histories; and the
        standings after it."""
        players = result.players()
        in_season = {**before[0], **step(before[0], result)}
        lifetime = {**before[1], **step(before[1], result)}
        writes: list[tuple] = [("HSET", keys.club_results(club_id), result.id,
                                _json({"result": result.as_dict(), "season": season, "seq": seq,
                                       "imported": imported}))]
        writes += [("HSET", keys.club_standings(club_id, season), p, _json(in_season[p].as_dict())) for p in players]
        writes += [("HSET", keys.club_lifetime(club_id), p, _json(lifetime[p].as_dict())) for p in players]
        writes += [("RPUSH", keys.club_history(club_id, p), _json(self._entry(result, season, seq, p, imported)))
                   for p in players]
        return writes, (in_season, lifetime)

    @staticmethod
    def _entry(result: TableResult, season: str, seq: int, pid: str, imported: bool) -> dict:
        """A player's history entry of a result."""
        seat = next(s for s in result.seats if s.player == pid)
        out = {"table": result.id, "finished_at": result.finished_at, "season": season, "total": seat.total,
               "rank": seat.rank, "rounds": result.rounds, "imported": imported, "seq": seq}
        return out if seat.coins is None else out | {"coins": seat.coins}

    @staticmethod
    def _notification(club_id: str, owner: str, season: str, table: str | None, players: Sequence[str]) -> tuple:
        data = {"club": club_id, "season": season, "table": table, "players": list(players), "seq": None}
        return ("XADD", keys.outbox(keys.club_box(club_id)), "*", "t", EVENT, "o", owner, "d", _json(data))

    # -- import ---------------------------------------------------------------------------------
    def import_evenings(self, club_id: str, access: Access, rows: Sequence[ImportRow],
                        errors: Mapping[str, list[str]] | None = None) -> dict:
        """Past evenings (rows of ``date, player, total``; players by name or alias) counted in the current
        season as results without rounds: all of them or none (:class:`ClubInputError` naming each bad
        row).  Each evening's id is made from its rows, so the same import again changes nothing (a replay);
        an import that repeats some evenings already imported is a 409 naming their rows.  ``errors``: the
        rows found bad when the file was read (they are named with the others)."""
        if not rows and not errors:
            raise ClubInputError("empty_import", "the import has no rows", errors={"body": ["no rows"]})
        for _ in range(MAX_RETRIES):
            c = self._load(club_id, access, ("HGETALL", keys.club_names(club_id)),
                           ("HGETALL", keys.club_players(club_id)))
            names = {k.decode(): v.decode() for k, v in _pairs(c.found[0])}
            players = _hash_of(c.found[1])
            evenings, found = _evenings(club_id, rows, names, {pid: p["name"] for pid, p in players.items()})
            found = {**(errors or {}), **found}
            if found:
                errors = dict(sorted(found.items(), key=lambda kv: (int(kv[0].split(".")[0]) if kv[0][0].isdigit()
                                                                    else 0, kv[0])))
                raise ClubInputError("bad_rows", f"{len({k.split('.')[0] for k in errors})} row(s) cannot be "
                                     "imported: nothing was", errors=errors)
            ids = sorted(evenings, key=lambda r: (evenings[r][0].finished_at, r))
            have = self._read(("HMGET", keys.club_results(club_id), *ids))[0]
            if all(x is not None for x in have):
                return {"season": orjson.loads(have[0])["season"], "evenings": len(ids), "rows": len(rows),
                        "results": ids, "replayed": True}
            again = [rid for rid, x in zip(ids, have) if x is not None]
            if again:
                raise Conflict("already_imported", "some of these evenings were imported before: nothing was",
                               errors={f"{row.line}": ["this evening was imported before"]
                                       for rid in again for row in evenings[rid][1]})
            season = c.meta["current"]
            every = sorted({p for rid in ids for p in evenings[rid][0].players()})
            before = self._standings_of(club_id, season, every)
            writes: list[tuple] = []
            counted = int(c.meta.get("counted", 0))
            for rid in ids:
                counted += 1
                more, before = self._count_writes(club_id, season, evenings[rid][0], counted, before, imported=True)
                writes += more
            writes.append(("HSET", keys.club_meta(club_id), "counted", counted))
            if c.owner is not None and self.webhooks:
                writes.append(self._notification(club_id, c.owner, season, None, every))
            try:
                self._apply(club_id, c.version, writes)
            except _Stale:
                continue
            return {"season": season, "evenings": len(ids), "rows": len(rows), "results": ids, "replayed": False}
        raise Busy("too many concurrent writes to this club; retry")


def _pairs(raw: Any) -> Iterable[tuple[bytes, bytes]]:
    """The field/value pairs of an HGETALL as the READ script answers it (a flat list)."""
    if isinstance(raw, dict):
        return raw.items()
    return ((raw[i], raw[i + 1]) for i in range(0, len(raw), 2))


def _evenings(club_id: str, rows: Sequence[ImportRow], names: Mapping[str, str], shown: Mapping[str, str]
              ) -> tuple[dict[str, tuple[TableResult, list[ImportRow]]], dict[str, list[str]]]:
    """The evenings of an import by id (made from the club and the evening's rows; ``names``: the club's names
    and aliases case-folded -> player, ``shown``: each player's name), and the errors by
    ``<line>.<column>``: an unknown player, a player twice in an evening, an evening of one player, rows of
    one evening that disagree on its rounds."""
    errors: dict[str, list[str]] = {}
    groups: dict[tuple[date, str], list[tuple[ImportRow, str]]] = {}
    for row in rows:
        pid = names.get(fold_name(row.player))
        if pid is None:
            errors.setdefault(f"{row.line}.player", []).append(f"no player or alias {row.player!r} in this club")
            continue
        group = groups.setdefault((row.day, row.label), [])
        if any(p == pid for _, p in group):
            errors.setdefault(f"{row.line}.player", []).append(
                f"{row.player!r} is in the evening of {row.day.isoformat()} twice")
            continue
        group.append((row, pid))
    out: dict[str, tuple[TableResult, list[ImportRow]]] = {}
    for (day, label), group in groups.items():
        if len(group) < 2:
            for row, _ in group:
                errors.setdefault(f"{row.line}.player", []).append(
                    f"the evening of {day.isoformat()} has one player: an evening needs two or more")
            continue
        rounds = {row.rounds for row, _ in group}
        if len(rounds) > 1:
            for row, _ in group:
                errors.setdefault(f"{row.line}.rounds", []).append(
                    f"the rows of the evening of {day.isoformat()} give different rounds")
            continue
        canon = _json([day.isoformat(), label, sorted((pid, row.total) for row, pid in group)])
        rid = "imp_" + hashlib.sha256(f"{club_id}\n{canon}".encode()).hexdigest()[:12]
        result = TableResult.imported(rid, day.isoformat() + "T00:00:00.000Z",
                                      [(pid, shown[pid], row.total) for row, pid in group],
                                      rounds=next(iter(rounds)) or 0)
        out[rid] = (result, [row for row, _ in group])
    return out, errors
