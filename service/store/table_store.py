"""The live table log on Redis: create, read, append, list, void, delete, verify.

Every write is one Lua script call (:mod:`service.store.keys`), so it is
all-or-nothing.  An append validates the event with the rules core (the
single source of truth) against the state at version N, and asks the script to
append only if the log is still at N; a concurrent append makes the script
answer ``conflict`` with the state it holds, and the store plans again on it
(or, under ``If-Match``, reports 412).  The state comes from the worker's
kept states (:mod:`.states`: the state after the worker's own last write to
the table, so a common append is one round trip) or else from a read of the
state stored beside the log; a kept state is checked by the script (version
and write token), and anything but a success planned on it is decided again
on a read.  An ``Idempotency-Key`` request records its key in the same
script call, so a retry can only replay it.

The store speaks the domain, not HTTP: a write answers :class:`Written` (seq,
transfers, balances, round) and a creation :class:`Created`; the HTTP layer
makes status codes, ``Location`` and ``ETag`` of them.

A table's own limits (events and voids a minute) are counted by the same
APPEND call that appends (a refused or failed write is not counted); its
answer carries what the headers need (:class:`Quota`).  So are the client's own
write limits, given as a :class:`~.charges.Charge` (every request counts, refused
ones included: they are counted first, whatever the outcome; on a Redis Cluster
by a HIT call before the APPEND, the client's hash being in another slot).

Webhooks (a transactional outbox): at a table an API key created (its meta
``owner``), the script that writes a record, a creation, a finish or a
deletion also adds its notification to the table's outbox (a stream in the
table's slot, :func:`~service.store.keys.outbox`), so an acknowledged write
always has its notification and a refused one never has.  After the script
the store adds the table to :data:`~service.store.keys.WEBHOOKS_DUE` and pushes
:data:`~service.store.keys.WEBHOOKS_WAKE` (the hint, and the wake-up of a
dispatcher waiting for work: :mod:`service.webhooks`); a crash between the
two leaves an outbox without its hint, which the dispatcher's sweep finds.
(An append on a Redis that is not a cluster writes the hint in its script: the
due set is on the same server, and the append costs no second round trip.)

Readings (where the contract is silent):

* An event's Idempotency-Key is kept as long as its table (not 24 h): a retry
  however late replays rather than records twice.  A replay is rebuilt from the
  snapshot before it and the records from there (the response the write gave
  is a function of the log up to its seq), so it costs at most
  :data:`~service.store.keys.SNAPSHOT_EVERY` steps however old it is.
* A creation's Idempotency-Key is a secret (a UUID the client generated): the
  first response is kept 24 h (never longer than the table), its tokens sealed
  with AES-GCM under a key derived from the Idempotency-Key by HKDF, which Redis
  never sees; the table id is derived from the key too, so a retry finds it.
  After a token rotation that response is gone and a retry says why (``tokens_rotated``).
* A token rotation's Idempotency-Key need not be a UUID (the replay also needs the credential the
  rotation was sent with: the old write token, or the API key): only the table's last rotation is kept
  (24 h), as an older one's tokens no longer work.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import random
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, NamedTuple

import orjson
import redis
from cryptography.exceptions import InvalidTag

from ..config import Settings
from ..rules.summary import summarize
from ..rules.table import (
    ROUND_EVENTS,
    BetweenRounds,
    CorrectionConflict,
    History,
    MissingHistory,
    TableState,
    VoidConflict,
    corrected_by,
    explain_round,
    fold,
    fold_from,
    labelled,
    refold_round,
    refold_start,
    round_info,
)
from . import charges, codec, keys, redis_client
from .charges import Charge, Quota
from .errors import (
    Busy,
    Conflict,
    EventNotFound,
    Forbidden,
    IdempotencyMismatch,
    NotReplicated,
    PreconditionFailed,
    RateLimited,
    RoundNotFound,
    StoreEvicting,
    StoreFull,
    TableNotFound,
    Unauthorized,
)
from .sealing import created_id, seal, seal_rotation, unseal, unseal_rotation
from .states import STATES_KEPT, Kept, StateCache

log = logging.getLogger("service.store")
# the retries' jitter: its own generator, so a host process's global random state is neither used nor moved
_JITTER = random.Random()

IDEMPOTENCY_TTL = 24 * 3600  # how long a keyed creation's first response (its tokens) is kept
TOMBSTONE_TTL = 24 * 3600
MAX_RETRIES = 50
ROUNDS_PAGE = 100  # ended rounds a table view lists by default
CHUNKS = (64, 256, 1024, 4096)  # log records read at a time when a void refolds (then the last again)
MINUTE_MS = 60_000
CORRECTIONS = 16
"""Records a full table keeps for mending: voids and corrections may fill the last of its room (a round_end,
which closes the open round, always fits)."""


class _Moved(Exception):
    """The log moved while a write was being planned: plan again."""


@dataclass(frozen=True)
class Access:
    """Who asks: the bearer token given (or None), whether the request writes, and the name of the
    API key it gave (or None): the key that created a table may read and write it without a token."""

    token: str | None
    write: bool
    owner: str | None = None


AUTH_FIELDS = ("token", "read_token", "deleted", "owner", "finished", "next")
"""The meta hash fields an access is checked against, in this order (see :func:`_check_access`); ``finished``
and ``next`` (the table that follows it) are what a read shows of them."""


def _check_access(table_id: str, fields, access: Access) -> None:
    """Whether ``access`` may read (or write) the table whose meta hash holds ``fields`` (:data:`AUTH_FIELDS`).

    * A bearer token: 401 unless it is one of the table's (an unknown id says no more than a
      wrong token: 401 too), 403 for the read token on a write, 404 for a deleted table.
    * No token but an API key: the key that created the table may read and write it; for any
      other key the table does not exist (404, as for an unknown id).
    * Neither: 401.

    Tokens are compared as SHA-256 digests in constant time.
    """
    if access.token:
        given = _hash(access.token)
        if fields[0] is not None and hmac.compare_digest(given, fields[0].decode()):
            pass
        elif fields[1] is not None and hmac.compare_digest(given, fields[1].decode()):
            if access.write:
                raise Forbidden("the read token cannot change the table; use the write token")
        else:
            raise Unauthorized("the token is not valid for this table (or there is no such table)")
    elif access.owner is not None:
        if fields[3] is None or not hmac.compare_digest(fields[3], access.owner.encode()):
            raise TableNotFound(f"no table {table_id!r}")
    else:
        raise Unauthorized("this table needs 'Authorization: Bearer <token>' (or the X-API-Key that created it)")
    if fields[2]:
        raise TableNotFound(f"table {table_id!r} has been deleted")


@dataclass(frozen=True)
class Created:
    """A new table as its creator sees it (the only time the tokens are shown)."""

    id: str
    token: str
    read_token: str
    players: list[str]
    ruleset: dict
    dealer: int
    version: int
    balances: list[int]
    replayed: bool = False  # a retry of the creation: the first answer again
    coins: list[int] | None = None  # with stakes (docs/rules.md#s12): each seat's bankroll

    def as_dict(self) -> dict:
        out = {"id": self.id, "token": self.token, "read_token": self.read_token, "players": self.players,
               "ruleset": self.ruleset, "dealer": self.dealer, "version": self.version,
               "balances": self.balances}
        return out if self.coins is None else out | {"coins": self.coins}


@dataclass(frozen=True)
class Followed:
    """The table that follows a finished one (:meth:`TableStore.follow`): as a creation answers it, without
    tokens (they are the followed table's, which the service keeps only as hashes)."""

    id: str
    follows: str
    players: list[str]
    ruleset: dict
    dealer: int
    version: int
    balances: list[int]
    replayed: bool = False  # a retry under the same Idempotency-Key: the first answer again
    coins: list[int] | None = None

    def as_dict(self) -> dict:
        out = {"id": self.id, "follows": self.follows, "players": self.players, "ruleset": self.ruleset,
               "dealer": self.dealer, "version": self.version, "balances": self.balances}
        return out if self.coins is None else out | {"coins": self.coins}


def next_table_id(table_id: str) -> str:
    """The id of the table that follows ``table_id``: derived from it, so that two phones starting the next
    table at once, or a retry after a lost answer, reach the same table (an id is no secret: the tokens are).

    >>> next_table_id("0123456789abcdef") == next_table_id("0123456789abcdef"), len(next_table_id("0" * 16))
    (True, 16)
    """
    return hashlib.sha256(b"mahjong-service next table:" + table_id.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Rotated:
    """A table's new tokens, from a rotation (the only time they are shown, but for its replay)."""

    token: str
    read_token: str
    replayed: bool = False  # a retry under its Idempotency-Key: the first answer again

    def as_dict(self) -> dict:
        return {"token": self.token, "read_token": self.read_token}


@dataclass(frozen=True)
class Written:
    """What a write to a table's log did: the record's seq (= the new version), the
    transfers it caused, the balances and the round after it; a void also names the
    seq it voided and the change of the balances; a correction has each seat's ``changes`` and, as
    ``round``, the round it corrected as the rounds view shows it; at a table with stakes, ``coins`` after it."""

    seq: int
    transfers: list[dict]
    balances: list[int]
    round: dict | None
    voided: int | None = None
    deltas: list[int] | None = None
    replayed: bool = False  # a retry under its Idempotency-Key: the first answer again
    coins: list[int] | None = None
    quota: Quota | None = None  # the table's own limit, when it counted this write
    changes: list[int] | None = None  # a correction: each seat's new balance less its old (``round``: the round)

    @property
    def version(self) -> int:
        return self.seq

    def as_dict(self) -> dict:
        if self.changes is not None:
            out = {"seq": self.seq, "version": self.seq, "balances": self.balances, "changes": self.changes,
                   "round": self.round}
        elif self.voided is None:
            out = {"seq": self.seq, "version": self.seq, "transfers": self.transfers,
                   "balances": self.balances, "round": self.round}
        else:
            out = {"seq": self.seq, "version": self.seq, "voided": self.voided, "transfers": self.transfers,
                   "deltas": self.deltas, "balances": self.balances, "round": self.round}
        return out if self.coins is None else out | {"coins": self.coins}


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _dumps(obj: Any) -> str:
    return codec.dumps(obj).decode()


def _sha1(stored: bytes) -> str:
    """What the APPEND script's ``redis.sha1hex`` says of a stored state (which it compares)."""
    return hashlib.sha1(stored).hexdigest()


def _matches(if_match: int | tuple[int, ...] | frozenset[int], version: int) -> bool:
    return version in if_match if isinstance(if_match, (tuple, frozenset, set)) else version == if_match


def _show(if_match: int | tuple[int, ...] | frozenset[int]) -> str:
    if isinstance(if_match, (tuple, frozenset, set)):
        if_match = tuple(sorted(if_match))
        return " or ".join(str(v) for v in if_match if v >= 0) or "a weak tag"
    return str(if_match) if if_match >= 0 else "a weak tag"


def _out_of_memory(exc: redis.exceptions.ResponseError) -> bool:
    # Redis 7 answers a script's refused write as OOM; Redis 6.2 wraps it in a script error
    return isinstance(exc, redis.exceptions.OutOfMemoryError) or "OOM command not allowed" in str(exc)


def _stakes(stored: bytes | None) -> dict | None:
    """A table's stakes as its meta hash keeps them (JSON), or None: it plays without."""
    return None if stored is None else codec.loads(stored)


def fingerprint(method: str, path: str, body: Any) -> str:
    """What an Idempotency-Key is bound to: the method, the path and the canonical body (compact UTF-8
    JSON, keys sorted)."""
    canon = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(f"{method} {path}\n".encode() + canon).hexdigest()


REPLAY_SNAPSHOT_EVERY = 64
"""A stream's replay of the log keeps the state every this many records (see ``stream_records``)."""


class Loaded(NamedTuple):
    """A table as one read found it (:meth:`TableStore._load`)."""

    state: TableState
    version: int
    hashes: tuple  # (write token hash, read token hash, owner) as stored, bytes or None
    digest: str  # SHA-1 (hex) of the stored state
    finished_at: str | None
    rounds: list  # a page of stored round summaries, when asked for
    next: str | None = None  # the table that follows it (a finished table's next: POST .../next)


STREAM_CHUNK = 200
"""Records a stream reads from the log (and sends) at a time."""


class StreamedLog:
    """The records after a seq as the stream sends them (:meth:`TableStore.stream_records`): iterate
    for lists of at most ``chunk`` records, each read and folded when it is asked for."""

    def __init__(self, store: TableStore, table_id: str, after: int, version: int, voided: frozenset[int],
                 chunk: int) -> None:
        self.store, self.table_id, self.after, self.chunk = store, table_id, after, chunk
        self.version = version  # the table's version when it was read
        self.voided = voided

    def __iter__(self) -> Iterator[list[dict]]:
        if self.after >= self.version:
            return
        store, table_id = self.store, self.table_id
        st = store.state_at(table_id, self.after)
        for first in range(self.after + 1, self.version + 1, self.chunk):
            out = []
            for rec in store.records(table_id, first, min(first + self.chunk - 1, self.version)):
                if rec.get("type") == "void":
                    st = store.state_at(table_id, rec["seq"], before=rec["target"])
                elif rec.get("type") == "correction":  # (it may rewrite a round this fold has not seen)
                    st = store.state_at(table_id, rec["seq"])
                else:
                    st.step({k: v for k, v in rec.items() if k not in ("seq", "at", "round")}, rec["seq"])
                out.append(store.streamed(rec, st, rec["seq"] in self.voided))
            yield out


class TableStore:
    """Tables kept in one Redis, a Sentinel-managed master, or a Redis Cluster (one slot per table).

    ``client`` comes from :func:`service.store.redis_client.connect`.  With
    ``min_replicas`` > 0 a write is acknowledged only once ``WAIT`` has seen it
    on that many replicas within ``wait_timeout_ms`` (else :class:`NotReplicated`).
    ``sharded_pubsub`` (default: whether ``client`` is a cluster's) makes the
    writes publish with ``SPUBLISH``.
    """

    def __init__(self, client: redis_client.Client, *, table_ttl: int = 0, max_events: int = 0,
                 idempotency_ttl: int = IDEMPOTENCY_TTL, sharded_pubsub: bool | None = None,
                 min_replicas: int = 0, wait_timeout_ms: int = 1000, states_kept: int = STATES_KEPT,
                 events_per_minute: int = 0, voids_per_minute: int = 0, webhooks: bool = True,
                 eviction_check_seconds: float = Settings.eviction_check_seconds) -> None:
        self.r = client
        # an evicting Redis would drop acknowledged writes: each write looks (at most every so often)
        self.eviction_check_seconds = eviction_check_seconds
        self._eviction: tuple[float, str | None] = (float("-inf"), None)  # (when looked, the policy if evicting)
        # the webhook notifications of the tables an API key created (off: none are written)
        self.webhooks = webhooks
        self.outbox_ttl = keys.outbox_ttl(table_ttl)
        # an append's hint goes in its script where the due set shares the node (not a cluster's slot)
        self._hint_in_script = redis_client.kind(client) != "cluster"
        self._states = StateCache(states_kept)
        # how every write announces itself on the table's channel (see keys.channel): a
        # cluster uses sharded pub/sub, so one table's messages stay on its slot's node
        if sharded_pubsub is None:
            sharded_pubsub = redis_client.publish_command(client) == keys.SPUBLISH
        self.sharded_pubsub = sharded_pubsub
        self.publish_command = keys.SPUBLISH if sharded_pubsub else keys.PUBLISH
        self.table_ttl = table_ttl
        self.max_events = max_events
        self.idempotency_ttl = idempotency_ttl
        self.min_replicas = min_replicas
        self.wait_timeout_ms = wait_timeout_ms
        # a table's own limits, a minute (0: none), counted by the APPEND script
        self.limits = {"table_events": events_per_minute, "table_voids": voids_per_minute}
        self._durable = "1" if min_replicas else ""
        self._create = client.register_script(keys.CREATE)
        self._append = client.register_script(keys.APPEND)
        self._delete = client.register_script(keys.DELETE)
        self._repair = client.register_script(keys.REPAIR)
        self._reads = client.register_script(keys.READ)
        self._finish = client.register_script(keys.FINISH)
        self._hint_script = client.register_script(keys.HINT)
        self._rotate = client.register_script(keys.ROTATE)
        self._round = client.register_script(keys.ROUND)
        self._hit = client.register_script(keys.HIT)
        self._follow = client.register_script(keys.FOLLOW)
        # the client's own write limits are counted in the APPEND script where its hash shares the server
        self._client_in_script = self._hint_in_script
        self._load_scripts()

    def _load_scripts(self) -> None:
        """Load the scripts at start (best effort: a Redis away now, a cluster made on first use, or
        one restarted later answers NOSCRIPT, and the script is loaded then), so that a pipelined
        ``EVALSHA`` and ``WAIT`` (:func:`~.redis_client.acknowledged`) finds them."""
        if redis_client.kind(self.r) == "cluster":
            return
        try:
            for script in (self._append, self._create, self._finish, self._delete, self._rotate, self._hit,
                           self._reads, self._repair, self._hint_script, self._round, self._follow):
                self.r.script_load(script.script)
        except redis.exceptions.RedisError as exc:
            log.info("the store's scripts are loaded on first use (%s)", type(exc).__name__)

    def charge(self, charge: Charge) -> None:
        """Count a request against its client's own write limits (the HIT script, one call), where no APPEND
        counts it; :class:`~.errors.RateLimited` when one refuses."""
        charges.hit(self._hit, self.r, charge)

    def _read(self, *reads: tuple) -> list:
        """Several reads (``(command, key, *args)``) at one moment, in one round trip (see keys.READ)."""
        names: list[str] = []
        listed: list = []
        for command, key, *rest in reads:
            if key not in names:
                names.append(key)
            listed.append([command, names.index(key) + 1, *rest])
        argv = keys.args(reads=listed)
        return self._reads(keys=names, args=argv, client=self.r)


    def refuse_if_evicting(self) -> None:
        """:class:`StoreEvicting` when Redis may evict keys (its ``maxmemory-policy`` is not ``noeviction``):
        an evicting Redis acknowledges writes and drops them later, silently.  The policy is looked up
        (``INFO memory`` on each primary) at most every :attr:`eviction_check_seconds`, so a change of it
        takes effect within that time."""
        looked, policy = self._eviction
        now = time.monotonic()
        if now - looked >= self.eviction_check_seconds:
            policy = redis_client.evicting(self.r)
            self._eviction = (now, policy)
        if policy is not None:
            raise StoreEvicting(f"the tables store (Redis) may evict keys when full (maxmemory-policy {policy}), "
                                "which would lose acknowledged writes: no write is taken until its operator sets "
                                "maxmemory-policy noeviction (docs/operations.md#redis); reads still work")

    def _run(self, script, keys: list, args: list, wrote=lambda result: True):
        """Run a write script (and ``WAIT`` with ``min_replicas``: ``wrote(result)`` says whether the
        result acknowledges a write, which must then be on the replicas); a Redis out of memory
        refused all of it: :class:`StoreFull`; a Redis that may evict: :class:`StoreEvicting`, not run."""
        self.refuse_if_evicting()
        try:
            if self.min_replicas:
                return redis_client.acknowledged(self.r, script, keys, args, self.min_replicas,
                                                 self.wait_timeout_ms, wrote)
            return script(keys=keys, args=args, client=self.r)
        except redis_client.NotReplicated as exc:
            raise NotReplicated(f"the write reached Redis but was not confirmed by {exc.wanted} replica(s) "
                                f"within {self.wait_timeout_ms} ms ({exc.replicas} did); it is not acknowledged: "
                                "retry with the same Idempotency-Key") from None
        except redis.exceptions.ResponseError as exc:
            if _out_of_memory(exc):
                raise StoreFull("the tables store is full (its memory bound is reached): nothing was "
                                "written; deleting tables frees room") from None
            raise

    # -- webhooks ----------------------------------------------------------------
    def _hint(self, table_id: str) -> None:
        """Tell the dispatchers that the table has a new notification (see the module doc): the table is
        due now, unless it already was.  A failure is logged, not raised: the write is acknowledged, and
        the dispatcher's sweep finds an outbox left without its hint."""
        try:
            self._hint_script(keys=[keys.WEBHOOKS_DUE, keys.WEBHOOKS_WAKE], client=self.r,
                              args=keys.args(tables=[table_id], at=int(time.time() * 1000), lt=True, wake=True))
        except redis.exceptions.RedisError as exc:
            log.warning("webhooks: the hint of table %s was not written (%s); the sweep will find it",
                        table_id, exc)

    @staticmethod
    def _notification(table_id: str, seq: int | None, version: int, record: dict | None,
                      balances: list[int]) -> str:
        """A notification's ``data``: the table, the record's seq, the version and balances after it."""
        return _dumps({"table": table_id, "seq": seq, "version": version, "record": record,
                       "balances": list(balances)})

    # -- create ------------------------------------------------------------------
    def create(self, players: list[str], ruleset: Any, dealer: int = 0, *, stakes: Any = None,
               idempotency_key: str | None = None, fp: str = "", owner: str | None = None,
               meta: Mapping[str, str] | None = None, reserve: Callable[[str], None] | None = None) -> Created:
        """A new table; its tokens are returned here only (Redis keeps their SHA-256).

        With an ``Idempotency-Key`` the table id is derived from the key, so a retry
        finds the same table; its tokens are kept (24 h, and never longer than the
        table) sealed under a key derived from the Idempotency-Key, which Redis
        never sees, so that the retry can be answered with them.  With an
        ``owner`` (an API key's name) the key is scoped to the owner and the table
        is listed in the owner's index (:meth:`tables_of`).  ``stakes`` (docs/rules.md#s12) are
        kept in the meta hash beside the players, and the state carries the coins.

        ``meta``: more fields of the table's meta hash (a club's table: its club and seats);
        ``reserve(table_id)`` is called with the id before the table is written (a club notes
        the table it will have to count, :mod:`service.store.clubs`).
        """
        state = TableState.new(players, ruleset, dealer, stakes)
        created_ttl = min(self.idempotency_ttl, self.table_ttl) if self.table_ttl else self.idempotency_ttl
        for _ in range(5):
            table_id = created_id(idempotency_key, owner) if idempotency_key else secrets.token_hex(8)
            token, read_token = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
            record = b""
            if idempotency_key:
                record = keys.fp_digest(fp) + seal(idempotency_key, table_id, [token, read_token])
            fields = {
                "players": _dumps(list(players)), "ruleset": _dumps(state.ruleset.as_dict()),
                "dealer": str(dealer), "token": _hash(token), "read_token": _hash(read_token),
                "created": _now(),
            }
            if state.stakes is not None:
                fields["stakes"] = _dumps(state.stakes.as_dict())
            if owner is not None:
                fields["owner"] = owner
            fields.update(meta or {})
            flat = [x for kv in fields.items() for x in kv]
            if reserve is not None:
                reserve(table_id)
            notify = owner is not None and self.webhooks
            res = keys.reply(self._run(
                self._create, [*keys.every(table_id), keys.outbox(table_id), keys.rotation(table_id)], keys.args(
                    state=codec.state(state.to_dict()).decode(), ttl=self.table_ttl, meta=flat,
                    created=record.hex() if record else None, created_ttl=created_ttl,
                    durable=self._durable or None, owner=owner if notify else None, outbox_ttl=self.outbox_ttl,
                    data=self._notification(table_id, None, 0, None, state.balances) if notify else None)))
            if res["outcome"] == b"created":
                if notify:
                    self._hint(table_id)
                if owner is not None:
                    self._index(owner, table_id)
                return Created(table_id, token, read_token, list(players), state.ruleset.as_dict(), dealer,
                               state.version, state.balances, coins=state.coins)
            if idempotency_key:
                replay = self._replay_creation(table_id, idempotency_key, fp, res["record"], res["meta"])
                if owner is not None:  # (listed again: a first attempt may have failed before)
                    self._index(owner, table_id)
                return replay
        raise Busy("could not allocate a table id")  # pragma: no cover - 64 random bits

    def _replay_creation(self, table_id: str, idempotency_key: str, fp: str, record: bytes | None,
                         meta: list) -> Created:
        players, ruleset, dealer, deleted, stakes, rotated = meta
        if deleted:
            raise Conflict("table_deleted", "the table this Idempotency-Key created has been deleted")
        if rotated:
            raise Conflict("tokens_rotated",
                           f"this Idempotency-Key created table {table_id}, whose tokens were rotated at "
                           f"{rotated.decode()} (POST /v1/tables/{table_id}/tokens/rotate): the tokens of the "
                           "creation's response no longer work, so they are not sent again; use the tokens the "
                           "rotation answered")
        if not record:
            raise Conflict("idempotency_key_expired",
                           "this Idempotency-Key created a table whose first response is no longer kept "
                           "(24 h): use the tokens from that response")
        if not hmac.compare_digest(record[:8], keys.fp_digest(fp)):
            raise IdempotencyMismatch("this Idempotency-Key was used with a different request")
        try:
            token, read_token = unseal(idempotency_key, table_id, record[8:])
        except InvalidTag:  # another key with the same 64-bit table id: never in practice
            raise IdempotencyMismatch("this Idempotency-Key was used with a different request") from None
        state = TableState.new(codec.loads(players), codec.loads(ruleset), int(dealer), _stakes(stakes))
        return Created(table_id, token, read_token, state.players, state.ruleset.as_dict(), state.first_dealer,
                       state.version, state.balances, replayed=True, coins=state.coins)

    def is_creation_replay(self, idempotency_key: str, fp: str, owner: str | None = None) -> bool:
        """Whether this key already created a table from this very request (its retry is a replay)."""
        key = keys.created(created_id(idempotency_key, owner))
        record = self.r.get(key)
        return bool(record) and hmac.compare_digest(record[:8], keys.fp_digest(fp))

    # -- auth ------------------------------------------------------------------------
    def authorize(self, table_id: str, token: str | Access | None, *, write: bool = False) -> None:
        """Raise unless the access (a token, or an :class:`Access`) may read or write the table (see
        :func:`_check_access`)."""
        if isinstance(token, Access):
            meta = keys.meta(table_id)
            _check_access(table_id, self.r.hmget(meta, *AUTH_FIELDS), token)
            return
        meta = keys.meta(table_id)
        _check_access(table_id, self.r.hmget(meta, *AUTH_FIELDS), Access(token, write))

    def meta_fields(self, table_id: str, *names: str) -> list[str | None]:
        """Fields of the table's meta hash (as text, None where absent), unchecked: for the store's own
        callers (a club reads the club and seats of a table it counts)."""
        found = self.r.hmget(keys.meta(table_id), *names)
        return [None if v is None else v.decode() for v in found]

    # -- read --------------------------------------------------------------------------
    def _load(self, table_id: str, access: Access | None, rounds: tuple[int, int] | None = None) -> Loaded:
        """One round trip: the table's meta fields, state and version, and a page of its rounds."""
        reads = [("HMGET", keys.meta(table_id), *AUTH_FIELDS),
                 ("GET", keys.state(table_id)), ("LLEN", keys.log(table_id))]
        if rounds:
            reads.append(("LRANGE", keys.rounds(table_id), rounds[0], rounds[0] + rounds[1]))
        res = self._read(*reads)
        fields, state, version = res[0], res[1], res[2]
        if access is not None:
            _check_access(table_id, fields, access)
        if fields[0] is None or state is None:
            raise TableNotFound(f"no table {table_id!r}")
        st = TableState.from_dict(codec.read_state(state))
        if st.version != version:  # never expected: the script writes both at once
            st = self.rebuild(table_id)[0]
        return Loaded(st, version, (fields[0], fields[1], fields[3]), _sha1(state),
                      None if fields[4] is None else fields[4].decode(), res[3] if rounds else [],
                      None if fields[5] is None else fields[5].decode())

    def get(self, table_id: str, access: Access | None = None, *, rounds_after: int = 0,
            rounds_limit: int = ROUNDS_PAGE) -> dict:
        """The table view with one page of its ended rounds: those after round ``rounds_after``,
        at most ``rounds_limit``; ``rounds_next`` is the ``rounds_after`` of the next page (or None)."""
        loaded = self._load(table_id, access, rounds=(rounds_after, rounds_limit))
        st, done = loaded.state, loaded.rounds
        # (a round's ``facts`` are the evening summary's, its ``adjusted`` a refold's: not the table view's)
        page = [{k: v for k, v in summary.items() if k not in ("facts", "adjusted")}
                for summary in codec.read_summaries(done[:rounds_limit], rounds_after + 1)]
        more = len(done) > rounds_limit
        return self._view(table_id, st, loaded.finished_at, loaded.next) | {
            "rounds": page, "rounds_next": rounds_after + rounds_limit if more else None}

    def _view(self, table_id: str, st: TableState, finished_at: str | None = None, next_id: str | None = None) -> dict:
        view = {"id": table_id, "players": st.players, "ruleset": st.ruleset.as_dict(),
                "dealer": st.dealer, "version": st.version, "balances": st.balances,
                "round": st.round_view(), "finished_at": finished_at}
        if next_id is not None:  # (a finished table that another follows)
            view["next"] = next_id
        return view if st.coins is None else view | {"coins": st.coins}

    def events(self, table_id: str, after: int = 0, limit: int = 100, access: Access | None = None) -> dict:
        fields, raw, state = self._read(("HMGET", keys.meta(table_id), *AUTH_FIELDS),
                                        ("LRANGE", keys.log(table_id), after, after + limit),
                                        ("GET", keys.state(table_id)))
        if access is not None:
            _check_access(table_id, fields, access)
        if fields[0] is None or fields[2]:
            raise TableNotFound(f"no table {table_id!r}")
        voided = set(codec.read_state(state)["voided"]) if state else set()
        items = codec.read_records(raw[:limit], after + 1)
        for it in items:
            it["voided"] = it["seq"] in voided
        nxt = str(items[-1]["seq"]) if len(raw) > limit else None
        return {"events": items, "next": nxt, "version": int(codec.read_state(state)["version"]) if state else 0}

    # -- rounds explained ------------------------------------------------------------------------
    def rounds(self, table_id: str, after: int = 0, limit: int = ROUNDS_PAGE, access: Access | None = None) -> dict:
        """The table's rounds after round ``after``, at most ``limit``, oldest first, each explained (its
        live events with the transfers each made, as corrected): ``{"rounds": [...], "next"}``.  The round
        being played is the last of them.  Two reads, whatever the table's length: the state and the
        summaries of the page, then the log of those rounds (one range) and their corrections."""
        res = self._read(("HMGET", keys.meta(table_id), *AUTH_FIELDS), ("GET", keys.state(table_id)),
                         ("LLEN", keys.log(table_id)), ("LRANGE", keys.rounds(table_id), after, after + limit))
        st, version = self._readable(table_id, res, access)
        summaries = codec.read_summaries(res[3], after + 1)
        numbers = [s["number"] for s in summaries]
        if st.playing and st.round_meta["number"] == after + len(summaries) + 1:
            numbers.append(st.round_meta["number"])
        page, more = numbers[:limit], len(numbers) > limit
        return {"rounds": self._explained(table_id, st, version, page, {s["number"]: s for s in summaries}),
                "next": str(page[-1]) if more else None}

    def round(self, table_id: str, number: int, access: Access | None = None) -> dict:
        """Round ``number`` explained, as :meth:`rounds` lists it (:class:`RoundNotFound` for no such round):
        one round trip (the ROUND script reads the state, the round's summary and its records at once)."""
        names = [keys.meta(table_id), keys.state(table_id), keys.log(table_id), keys.rounds(table_id)]
        res = keys.reply(self._round(keys=names, args=keys.args(round=number, fields=list(AUTH_FIELDS)),
                                     client=self.r))
        st, version = self._readable(table_id, [res["fields"], res["state"], res["version"]], access)
        if "records" not in res:
            raise RoundNotFound(f"table {table_id!r} has no round {number}")
        summary = None if not res["summary"] else codec.read_summary(res["summary"], number)
        first = int(res["first"])
        records = dict(enumerate(codec.read_records(res["records"], first, with_at=False), first))
        extra = res["corrections"]
        records |= {int(extra[i]): codec.read_record(extra[i + 1], int(extra[i]), with_at=False)
                    for i in range(0, len(extra), 2)}
        return self._explain(st, number, summary, records)

    @staticmethod
    def _readable(table_id: str, res: list, access: Access | None) -> tuple[TableState, int]:
        """The state a read found (``res``: the meta fields, the state and the log's length first)."""
        fields, state, version = res[0], res[1], res[2]
        if access is not None:
            _check_access(table_id, fields, access)
        if fields[0] is None or state is None:
            raise TableNotFound(f"no table {table_id!r}")
        return TableState.from_dict(codec.read_state(state)), version

    def _explained(self, table_id: str, st: TableState, version: int, numbers: list[int],
                   summaries: dict[int, dict]) -> list[dict]:
        """The rounds ``numbers`` (consecutive) explained, from their records read in one go."""
        if not numbers:
            return []
        spans = {n: (summaries[n]["first_seq"], summaries[n]["last_seq"]) if n in summaries
                 else (st.round_meta["start"], st.version) for n in numbers}
        first, last = spans[numbers[0]][0], spans[numbers[-1]][1]
        extra = sorted({c for n in numbers for c in corrected_by(st, n) if c > last})
        log = keys.log(table_id)
        res = self._read(("LLEN", log), ("LRANGE", log, first - 1, last - 1), *(("LINDEX", log, c - 1) for c in extra))
        if res[0] < version:
            raise TableNotFound(f"no table {table_id!r}")
        records = {seq: rec for seq, rec in enumerate(codec.read_records(res[1], first, with_at=False), first)}
        records |= {c: codec.read_record(raw, c, with_at=False) for c, raw in zip(extra, res[2:])}
        return [self._explain(st, n, summaries.get(n), records) for n in numbers]

    def _explain(self, st: TableState, number: int, summary: dict | None, records: dict[int, dict]) -> dict:
        """Round ``number`` explained from ``records`` (by seq: its span of the log and its corrections)."""
        lo, hi = (summary["first_seq"], summary["last_seq"]) if summary is not None else (st.round_meta["start"],
                                                                                           st.version)
        # (a round's span of the log may hold a correction of an earlier round, made while it was played:
        # that one is not this round's)
        mine = [rec for rec in (records[seq] for seq in range(lo, hi + 1))
                if rec.get("type") != "correction" or rec.get("round") == number]
        mine += [records[c] for c in corrected_by(st, number) if c > hi]
        dealer = summary["dealer"] if summary is not None else st.round.dealer
        explained = explain_round(st.ruleset, dealer, mine, st.voided, summary is not None)
        return self._round_of(st, number, summary, explained["events"], explained["voids"])

    # -- the live stream's reads --------------------------------------------------------------
    def streamed(self, record: Mapping[str, Any], st: TableState, voided: bool) -> dict:
        """A record as the stream sends it: as ``events`` lists it, plus the table's ``version`` and
        ``balances`` after it (and ``coins`` when the table's view has them).

        A ``buy_in`` record has a ``coins`` of its own (the coins bought), which the table's
        ``coins`` would hide: on the stream every record's ``coins`` is the table's bankrolls
        after it, and a buy-in's own amount travels as ``amount``.
        """
        out = {**record, "voided": voided, "version": st.version, "balances": st.balances}  # (copies: ``st``
        if st.coins is not None:                                                                   # steps on)
            out["coins"] = list(st.coins)
        if record.get("type") == "buy_in":
            out["amount"] = record["coins"]
        return out

    def stream_position(self, table_id: str) -> int | None:
        """The table's version now, or None when it is gone (deleted or expired)."""
        meta, version = self._read(("HMGET", keys.meta(table_id), "dealer", "deleted"),
                                   ("LLEN", keys.log(table_id)))
        return None if meta[0] is None or meta[1] else version

    def stream_records(self, table_id: str, after: int, chunk: int = STREAM_CHUNK) -> StreamedLog | None:
        """The records after seq ``after`` as the stream sends them, read and folded a chunk at a time.

        The balances after each record are the fold of the log up to it (what the
        write's 201 answered then); voided flags are as ``events`` lists them now.
        None when the table is gone.  What it costs is what it sends: the fold
        starts from the snapshot at or before ``after`` (at most
        :data:`~service.store.keys.SNAPSHOT_EVERY` records to step through first),
        and the records after it are read ``chunk`` at a time, as the caller asks
        for the next chunk (:class:`StreamedLog`).  A void record's frame is the
        fold without its target, from the snapshot before the target.
        """
        meta, state, version = self._read(
            ("HMGET", keys.meta(table_id), "dealer", "deleted"), ("GET", keys.state(table_id)),
            ("LLEN", keys.log(table_id)))
        if state is None or meta[0] is None or meta[1]:
            return None
        return StreamedLog(self, table_id, after, version, frozenset(codec.read_state(state)["voided"]), chunk)

    def records(self, table_id: str, first: int, last: int) -> list[dict]:
        """The records ``first`` to ``last`` (seqs, inclusive) of a log that has them."""
        log = keys.log(table_id)
        raw = self.r.lrange(log, first - 1, last - 1)
        if len(raw) != last - first + 1:  # a log only grows: it was deleted meanwhile
            raise TableNotFound(f"no table {table_id!r}")
        return codec.read_records(raw, first)

    def state_at(self, table_id: str, version: int, *, before: int | None = None,
                 found: tuple[int, bytes | None, list[dict]] | None = None) -> TableState:
        """The table's state at ``version`` (the fold of its first ``version`` records), from a snapshot.

        The fold starts from the last snapshot at or before ``version`` (with
        ``before``: before that seq, which the fold must leave out), and from an
        earlier one when a void among the records after it names a record it
        holds.  ``found`` is a snapshot's version, its stored state and the records
        after it up to ``version``, already read.
        """
        every = keys.SNAPSHOT_EVERY
        at = version - version % every if before is None else (before - 1) - (before - 1) % every
        while True:
            if found is not None:
                at, stored, records = found
                found = None
            else:
                stored = None
                if at:
                    key = keys.snapshots(table_id)
                    stored = self.r.hget(key, str(at))
                if stored is None:
                    at = 0
                records = self.records(table_id, at + 1, version) if version > at else []
            targets = {r["target"] for r in records if r.get("type") == "void"}
            low = min(targets, default=None)
            if low is not None and low <= at:  # a void of a record the snapshot holds: fold from before it
                at = (low - 1) - (low - 1) % every
                continue
            st = TableState.from_dict(codec.read_state(stored)) if stored is not None else self._empty(table_id)
            try:
                return fold_from(st, records, targets)
            except MissingHistory:  # a correction of a round that ended before the snapshot: from the start
                if not at:
                    raise
                at, found, before = 0, None, None

    def _empty(self, table_id: str) -> TableState:
        """The table's state before its first record."""
        meta = keys.meta(table_id)
        players, ruleset, dealer, stakes = self.r.hmget(meta, "players", "ruleset", "dealer", "stakes")
        if players is None:
            raise TableNotFound(f"no table {table_id!r}")
        return fold(codec.loads(players), codec.loads(ruleset), int(dealer), (), _stakes(stakes))[0]

    # -- write ---------------------------------------------------------------------------
    def append(self, table_id: str, body: Mapping[str, Any], *, if_match: int | tuple[int, ...] | None = None,
               idempotency_key: str | None = None, fp: str = "", access: Access | None = None,
               charge: Charge | None = None) -> Written:
        """Validate ``body`` against the table's state and append it; see the module doc.  ``charge``: the
        client's own limits this request counts (counted once, by the first script call)."""
        return self._write(table_id, if_match, idempotency_key, fp, access, "table_events",
                           lambda st, version: self._plan_event(st, version, body), charge=charge)

    def void(self, table_id: str, target: int, *, if_match: int | tuple[int, ...] | None = None,
             idempotency_key: str | None = None, fp: str = "", access: Access | None = None,
             charge: Charge | None = None) -> Written:
        """Append a void record for ``target``; the state is refolded without it."""
        # (planned on a read, never on a kept state: a void reads the log anyway, and a refusal,
        # its common answer, is decided on a read)
        return self._write(table_id, if_match, idempotency_key, fp, access, "table_voids",
                           lambda st, version: self._plan_void(table_id, st, version, target), use_kept=False,
                           charge=charge)

    def correct(self, table_id: str, number: int, body: Mapping[str, Any], *,
                if_match: int | tuple[int, ...] | None = None, idempotency_key: str | None = None, fp: str = "",
                access: Access | None = None, charge: Charge | None = None) -> Written:
        """Append a correction of round ``number`` (docs/rules.md#s15.2): ``body`` is ``{"events", "dealer"?,
        "voids"?, "note"?}``.  Round ``number`` unknown: :class:`RoundNotFound`; an event of it that cannot
        happen: the core's :class:`~service.rules.table.CorrectionError` (``event``: its index); a later
        round that would break: ``correction_conflict`` (``round``, ``event``: its record's seq)."""
        return self._write(table_id, if_match, idempotency_key, fp, access, "table_voids",
                           lambda st, version: self._plan_correction(table_id, st, version, number, body),
                           charge=charge)

    def finish(self, table_id: str, access: Access | None = None) -> dict:
        """Finish the table (idempotent): it takes no more events or voids and stays readable.
        409 ``round_in_progress`` while a round is being played.  Answers the table view (:meth:`get`)."""
        for _ in range(MAX_RETRIES):
            loaded = self._load(table_id, access)
            if loaded.finished_at is None:
                view = loaded.state.round_view()
                if view is not None and view["status"] == "playing":
                    raise Conflict("round_in_progress", f"round {view['number']} is still being played: end it "
                                   "(round_end) or void its events before finishing the table",
                                   current=loaded.version)
                at = _now()
                data = self._notification(table_id, None, loaded.version, None, loaded.state.balances) \
                    if self.webhooks else ""
                res = keys.reply(self._run(
                    self._finish, [keys.meta(table_id), keys.state(table_id), keys.log(table_id),
                                   keys.channel(table_id), keys.outbox(table_id)],
                    keys.args(version=loaded.version, at=at, message=codec.dumps({"finished_at": at}).decode(),
                              publish=self.publish_command, data=data or None, outbox_ttl=self.outbox_ttl),
                    wrote=lambda raw: keys.reply(raw)["outcome"] == b"ok"))
                if res["outcome"] == b"missing":
                    raise TableNotFound(f"no table {table_id!r}")
                if res["outcome"] == b"conflict":
                    continue
                if self.webhooks and int(res.get("noted") or 0):
                    self._hint(table_id)
            self._states.drop(table_id)
            return self.get(table_id)
        raise Busy("too many concurrent writes to this table; retry")

    # -- the next table ---------------------------------------------------------------------------
    def follow(self, table_id: str, access: Access, setup: Callable[[dict], dict], *,
               idempotency_key: str | None = None, fp: str = "") -> Followed:
        """Start the table that follows the finished table ``table_id`` (docs/api.md#nexttable): it takes over
        the finished table's token hashes (every phone's tokens work on it; nothing plain is kept) and its
        owner, and the finished table names it (``next``, once) and tells its streams (``event: next``).

        ``setup(old)`` answers the new table's ``players``, ``ruleset``, ``dealer`` and ``stakes`` from the
        finished table's (``old``: its players, ruleset and stakes), checked.  The write token (or the
        creating API key) of the finished table; 409 ``table_not_finished`` before it is finished, 409
        ``table_followed`` (with ``next``) when it has its next table already, unless this is a retry under
        the same ``idempotency_key`` (and request ``fp``): then the first answer again (``replayed``).

        Two writes in two slots, in an order that never shows a table that is not there: CREATE of the next
        table (its id derived from this one's: :func:`next_table_id`, so a concurrent or repeated start finds
        it), then FOLLOW names it here.  A crash between them leaves the next table unnamed; the next
        attempt finds it and names it.
        """
        meta = self.r.hmget(keys.meta(table_id), *AUTH_FIELDS, "players", "ruleset", "stakes")
        _check_access(table_id, meta, replace(access, write=True))
        if meta[0] is None or meta[6] is None:
            raise TableNotFound(f"no table {table_id!r}")
        if meta[4] is None:
            raise Conflict("table_not_finished", f"table {table_id!r} is still being played: finish it "
                           f"(POST /v1/tables/{table_id}/finish) before starting the next one")
        next_id = next_table_id(table_id)
        digest = keys.fp_digest(fp + "\n" + idempotency_key).hex() if idempotency_key else None
        if meta[5] is not None:  # named already: a retry, or another phone's
            return self._followed(table_id, meta[5].decode(), digest)
        spec = setup({"players": codec.loads(meta[6]), "ruleset": codec.loads(meta[7]), "stakes": _stakes(meta[8])})
        state = TableState.new(spec["players"], spec["ruleset"], spec["dealer"], spec["stakes"])
        owner = None if meta[3] is None else meta[3].decode()
        fields = {"players": _dumps(list(state.players)), "ruleset": _dumps(state.ruleset.as_dict()),
                  "dealer": str(state.first_dealer), "token": meta[0].decode(), "read_token": meta[1].decode(),
                  "created": _now(), "follows": table_id}
        if state.stakes is not None:
            fields["stakes"] = _dumps(state.stakes.as_dict())
        if owner is not None:
            fields["owner"] = owner
        if digest is not None:
            fields["follow_fp"] = digest
        notify = owner is not None and self.webhooks
        res = keys.reply(self._run(
            self._create, [*keys.every(next_id), keys.outbox(next_id), keys.rotation(next_id)], keys.args(
                state=codec.state(state.to_dict()).decode(), ttl=self.table_ttl,
                meta=[x for kv in fields.items() for x in kv], durable=self._durable or None,
                owner=owner if notify else None, outbox_ttl=self.outbox_ttl,
                data=self._notification(next_id, None, 0, None, state.balances) if notify else None)))
        created = res["outcome"] == b"created"
        self._name_next(table_id, next_id, meta, drop=created)
        if not created:  # a concurrent start, or an attempt that stopped before naming it
            return self._followed(table_id, next_id, digest)
        if notify:
            self._hint(next_id)
        if owner is not None:
            self._index(owner, next_id)
        return Followed(next_id, table_id, list(state.players), state.ruleset.as_dict(), state.first_dealer,
                        state.version, state.balances, coins=state.coins)

    def _name_next(self, table_id: str, next_id: str, meta: list, drop: bool) -> None:
        """The FOLLOW script: the finished table names ``next_id`` and tells its streams; refused (its tokens
        rotated, or the table deleted, since ``meta`` was read): the next table just created (``drop``) goes."""
        res = keys.reply(self._run(
            self._follow, [keys.meta(table_id), keys.state(table_id), keys.channel(table_id)],
            keys.args(next=next_id, token=meta[0].decode(), read_token=meta[1].decode(),
                      message=codec.dumps({"next": next_id}).decode(), publish=self.publish_command),
            wrote=lambda raw: keys.reply(raw)["outcome"] == b"ok"))
        outcome = res["outcome"]
        if outcome == b"ok":
            return
        if drop:
            self.delete(next_id)
        if outcome == b"taken":  # (never with a derived id: a table named by another version of the service)
            raise Conflict("table_followed", f"table {table_id!r} is followed by {res['next'].decode()!r}",
                           next=res["next"].decode())
        if outcome == b"denied":
            raise Unauthorized("the token is not valid for this table (or there is no such table)")
        raise TableNotFound(f"no table {table_id!r}")

    def _followed(self, table_id: str, next_id: str, digest: str | None) -> Followed:
        """The answer when ``table_id`` is followed already: the first answer again for a retry under the same
        Idempotency-Key and request, else 409 ``table_followed`` naming the next table."""
        found = self.r.hmget(keys.meta(next_id), "players", "ruleset", "dealer", "stakes", "follows", "follow_fp")
        players, ruleset, dealer, stakes, follows, kept = found
        if (digest is not None and kept is not None and players is not None and follows == table_id.encode()
                and hmac.compare_digest(kept, digest.encode())):
            state = TableState.new(codec.loads(players), codec.loads(ruleset), int(dealer), _stakes(stakes))
            return Followed(next_id, table_id, state.players, state.ruleset.as_dict(), state.first_dealer,
                            state.version, state.balances, replayed=True, coins=state.coins)
        raise Conflict("table_followed", f"table {table_id!r} has its next table already: {next_id!r} (open it "
                       "with the same tokens)", next=next_id)

    def summary(self, table_id: str, access: Access | None = None) -> dict:
        """The evening's summary (:mod:`service.rules.summary`): from the state and the ended rounds'
        summaries, read at one moment (never a fold of the log)."""
        fields, state, rounds = self._read(("HMGET", keys.meta(table_id), *AUTH_FIELDS),
                                           ("GET", keys.state(table_id)), ("LRANGE", keys.rounds(table_id), 0, -1))
        if access is not None:
            _check_access(table_id, fields, access)
        if fields[0] is None or state is None:
            raise TableNotFound(f"no table {table_id!r}")
        st = TableState.from_dict(codec.read_state(state))
        out = summarize(st, codec.read_summaries(rounds, 1), None if fields[4] is None else fields[4].decode(),
                        table_id=table_id).as_dict()
        return out if fields[5] is None else out | {"next": fields[5].decode()}

    def _write(self, table_id, if_match, idem_key, fp, access, limit: str, plan, use_kept: bool = True,
               charge: Charge | None = None) -> Written:
        """Plan the write against a state, then one script call appends it if the log is still there.

        The state comes from the worker's :class:`~.states.StateCache` when it holds
        the table (the common case: one round trip in all), else from a read
        (:meth:`_load`, which checks the token).  A kept state is a guess that the
        script checks (the version, the stored state's SHA-1 and the table's write
        token); a plan that a kept state refuses, a token that is not the kept
        write token, and an If-Match it does not meet are all decided again on a
        state read from Redis, so every answer but a success comes from a read.
        A conflict answers the current state: the write is planned again on it.
        An Idempotency-Key seen before is found by the script itself (it checks
        that the record the key wrote is still in the log) and replayed.
        """
        field = keys.idem_field(idem_key).hex() if idem_key else None
        digest = keys.fp_digest(fp).hex() if field else None
        kept = self._states.take(table_id) if use_kept else None
        if kept is not None and not self._may_use(kept, access, if_match):
            kept = None
        amount = self.limits.get(limit, 0)
        if charge is not None and not charge.counted and not self._client_in_script:
            # (a cluster: the client's hash is not in the table's slot.)  The node that holds it may be down
            # while the table's is up: the write goes on uncounted, as a limit whose Redis is away counts nothing
            try:
                self.charge(charge)
            except redis.exceptions.RedisError as exc:
                log.warning("the client's write limits were not counted (%s)", type(exc).__name__)
        for attempt in range(MAX_RETRIES):
            if kept is None:
                loaded = self._load(table_id, access)
                st, version, hashes, digest_of_state = loaded.state, loaded.version, loaded.hashes, loaded.digest
                guess = False
                if loaded.finished_at is not None:
                    replayed = self._replay_of(table_id, field, digest, fp, hashes, charge) if field else None
                    if replayed is not None:
                        return replayed
                    raise Conflict("table_finished", f"the table was finished at {loaded.finished_at}: it takes "
                                   "no more events", current=version)
            else:
                version, st, hashes, digest_of_state = kept
                kept, guess = None, True
            try:
                if if_match is not None and not _matches(if_match, version):
                    raise PreconditionFailed(f"the table is at version {version}, not {_show(if_match)}",
                                             current=version)
                record, new_state, written, rounds = plan(st, version)
            except _Moved:
                continue
            except Exception:
                if guess:  # refused by a kept state: decide on the state Redis holds
                    continue
                if field:  # refused now, but a retry of a write that was taken is answered as it was
                    replayed = self._replay_of(table_id, field, digest, fp, hashes, charge)
                    if replayed is not None:
                        return replayed
                raise
            stored_state = codec.state(new_state.to_dict())
            notify = self.webhooks and hashes[2] is not None  # (a table an API key created)
            args: dict[str, Any] = {
                "version": version, "record": codec.record(record).decode(), "state": stored_state.decode(),
                "message": codec.dumps(self.streamed(record, new_state, voided=False)).decode(),
                "publish": self.publish_command,
            }
            if rounds is not None:
                args["rounds"] = rounds
            if notify:
                args["outbox"] = self._notifications(table_id, record, written, rounds)
                if self.outbox_ttl:
                    args["outbox_ttl"] = self.outbox_ttl
                args["outbox_max"] = keys.OUTBOX_MAX_ENTRIES
                if self._hint_in_script:
                    args["due"], args["table"] = int(time.time() * 1000), table_id
            if digest_of_state:
                args["state_sha"] = digest_of_state
            if amount:
                args["limit"] = {"name": limit, "amount": amount, "period": MINUTE_MS}
            if self.max_events and record["type"] != "round_end":
                # a full table can still be mended (voids and corrections fill the room kept for them), and
                # a round_end (which the rules took: it closes the open round) always fits, so that a full
                # table can always end its round and be finished
                mending = record["type"] in ("void", "correction")
                args["max"] = self.max_events - (0 if mending else min(CORRECTIONS, self.max_events // 2))
            res = self._run_append(table_id, args, field, digest, hashes, charge)
            outcome = res["outcome"]
            if outcome == b"ok":
                self._states.put(table_id, Kept(version + 1, new_state, hashes, _sha1(stored_state)))
                if int(res["noted"]) == 1:  # (2: the script wrote the hint too)
                    self._hint(table_id)
                if amount:
                    written = replace(written, quota=Quota(limit, amount, int(res["remaining"]), int(res["reset"])))
                return written
            if outcome == b"replay":
                return self._replay(table_id, res["idem"], fp, int(res["from"]), res["snapshot"], res["records"])
            if outcome == b"limited":
                retry = max(1, -(-int(res["retry_ms"]) // 1000))
                raise RateLimited(f"this table takes at most {amount} {limit.split('_')[1]} a minute; "
                                  f"retry in {retry} s", limit=limit, retry_after=retry, amount=amount)
            if outcome in (b"missing", b"denied"):
                if guess:  # the kept state was another table's (deleted since): decide on a read
                    continue
                if outcome == b"missing":
                    raise TableNotFound(f"no table {table_id!r}")
                continue  # the id was given to a new table between the read and the script
            if outcome == b"finished":
                raise Conflict("table_finished", f"the table was finished at {res['at'].decode()}: it takes no more "
                               "events", current=version)
            if outcome == b"full":
                raise Conflict("table_full", f"the table has reached its limit of {self.max_events} events "
                               "(a void, a correction or a round's end can still be recorded)", current=version)
            current = int(res["version"])
            # the table is not as planned: an If-Match that does not name its version is 412; one that
            # does (a list naming it, or the same version with another stored state) plans again on it
            if if_match is not None and not _matches(if_match, current):
                raise PreconditionFailed(f"the table is at version {current}, not {_show(if_match)}",
                                         current=current)
            stored_now = res["state"]
            if use_kept and stored_now is not None:
                kept = Kept(current, TableState.from_dict(codec.read_state(stored_now)), hashes, _sha1(stored_now))
                if not self._may_use(kept, access, if_match):
                    kept = None
            if attempt:
                time.sleep(_JITTER.uniform(0, 0.002 * min(attempt, 10)))
        raise Busy("too many concurrent writes to this table; retry")

    def _notifications(self, table_id: str, record: dict, written: Written, rounds: dict | None) -> list:
        """The webhook notifications of a record: ``event.voided`` for a void, else ``event.recorded``
        and, when it ended a round, ``round.ended`` (each ``[type, data JSON]``)."""
        data = self._notification(table_id, written.seq, written.seq, {**record, "voided": False}, written.balances)
        if record.get("type") == "void":
            return [["event.voided", data]]
        if record.get("type") == "correction":
            return [["round.corrected", data]] + ([["round.ended", data]] if rounds and "push" in rounds else [])
        if rounds is not None and "push" in rounds:
            return [["event.recorded", data], ["round.ended", data]]
        return [["event.recorded", data]]

    def _run_append(self, table_id: str, args: dict, field: str | None, digest: str | None, hashes,
                    charge: Charge | None = None) -> dict:
        """One APPEND call with ``args`` and the request's key, token, durability and client's limits (when not
        counted yet): its answer by name (:class:`RateLimited` when a client's limit refused)."""
        if field:
            args |= {"idem": field, "fp": digest}
        if hashes[0]:
            args["token"] = hashes[0].decode()
        if self.min_replicas:
            args["durable"] = True
        args["ttl"], args["snapshot"] = self.table_ttl, keys.SNAPSHOT_EVERY
        names = keys.appended(table_id)
        if self._client_in_script:
            names += [keys.WEBHOOKS_DUE, keys.WEBHOOKS_WAKE]
            if charge is not None and not charge.counted:
                args["client"], args["client_ttl"] = charge.args(), keys.CLIENT_TTL_MS
                names.append(charge.key)
        res = keys.reply(self._run(self._append, names, keys.args(**args),
                                   wrote=lambda raw: keys.reply(raw)["outcome"] in (b"ok", b"replay")))
        if "client" in args:
            charge.settle(res)
        return res

    def _replay_of(self, table_id: str, field: str, digest: str, fp: str, hashes,
                   charge: Charge | None = None) -> Written | None:
        """The first answer of the write an Idempotency-Key made, or None: it made none (that is in the log).

        One APPEND call that appends nothing (its version is never the log's): the key's
        record, checked against the log entry it names, in one read of one server."""
        res = self._run_append(table_id, {"version": -1}, field, digest, hashes, charge)
        if res["outcome"] == b"replay":
            return self._replay(table_id, res["idem"], fp, int(res["from"]), res["snapshot"], res["records"])
        if res["outcome"] == b"missing":
            raise TableNotFound(f"no table {table_id!r}")
        return None

    @staticmethod
    def _may_use(kept: Kept, access: Access | None, if_match) -> bool:
        """Whether a write may be planned on a kept state: the token given is the kept write token, or
        no token and the key that created the table (anything else is decided on a read), and an
        If-Match names the kept version."""
        write_hash, _, owner = kept.hashes
        if access is not None:
            if access.token:
                if not (access.write and write_hash is not None
                        and hmac.compare_digest(_hash(access.token), write_hash.decode())):
                    return False
            elif access.owner is None or owner is None or not hmac.compare_digest(owner, access.owner.encode()):
                return False
        return if_match is None or _matches(if_match, kept.version)

    def _replay(self, table_id: str, value: bytes, fp: str, at: int, snapshot: bytes | None,
                raw: list[bytes]) -> Written:
        """The first answer to a write under an Idempotency-Key, rebuilt from what the APPEND script read
        with the key's record: the state at the snapshot version ``at`` (None: the log's start) and the
        log from there to the replayed record (at most :data:`~service.store.keys.SNAPSHOT_EVERY`)."""
        if not hmac.compare_digest(value[:8], keys.fp_digest(fp)):
            raise IdempotencyMismatch("this Idempotency-Key was used with a different request")
        seq = int(value[12:])
        records = codec.read_records(raw, at + 1)
        record = records[-1]
        before = self.state_at(table_id, seq - 1, found=(at, snapshot if at else None, records[:-1]))
        if record["type"] == "void":
            after = self.state_at(table_id, seq, before=record["target"])
            return Written(seq, [], after.balances, after.round_view(), voided=record["target"],
                           deltas=[a - b for a, b in zip(after.balances, before.balances)], replayed=True,
                           coins=after.coins)
        if record["type"] == "correction":
            return replace(self._replay_correction(table_id, record), replayed=True)
        transfers = before.step({k: v for k, v in record.items() if k not in ("seq", "at", "round")}, seq)
        return Written(seq, [t.as_dict() for t in transfers], before.balances, before.round_view(), replayed=True,
                       coins=before.coins)

    def _replay_correction(self, table_id: str, record: dict) -> Written:
        """A correction's first answer again: the log folded from its start up to the correction (a rare
        path: a retry of a correction; the fold has every summary the correction needs)."""
        seq = record["seq"]
        log = self.records(table_id, 1, seq)
        empty = self._empty(table_id)
        voided = {r["target"] for r in log if r.get("type") == "void"}
        st, summaries = fold(empty.players, empty.ruleset, empty.first_dealer, log[:-1], empty.stakes)
        history = History({s["number"]: s for s in summaries})
        number = record["round"]
        for k in (number, number + 1):
            starts = [r for r in log[:-1]
                      if r["type"] == "round_start" and r.get("round") == k and r["seq"] not in voided]
            if starts:
                history.info[k] = round_info(starts[-1], [log[c - 1] for c in corrected_by(st, k)])
        body = {k: v for k, v in record.items() if k not in ("seq", "round", "at")}
        done = st.correct(number, body, seq, history)
        info = history.info.get(number)
        voids = None if info is None else list(info.voids) or [None] * len(st.players)
        view = self._round_of(st, number, done.summaries[0] if done.summaries else None, [
            {"seq": seq, "index": i, **ev, "transfers": labelled(out)}
            for i, (ev, out) in enumerate(zip(body["events"], done.made))], voids)
        return Written(seq, view["transfers"], st.balances, view, changes=done.changes,
                       coins=None if st.coins is None else list(st.coins))

    def _plan_event(self, st: TableState, version: int, body: Mapping[str, Any]):
        seq = version + 1
        done_before = st.rounds_done
        new = st  # a fresh copy from Redis: step it in place (on error it is dropped)
        try:
            transfers = new.step(body, seq)  # raises EventError: nothing is written
        except BetweenRounds as exc:  # (an adjust during a round: the table's state forbids it)
            raise Conflict("round_in_progress", exc.reason, event=seq) from None
        record = {"seq": seq, **body, "round": new.round_meta["number"] if new.round_meta else None,
                  "at": _now()}
        rounds = None
        if new.rounds_done > done_before:
            rounds = {"push": codec.summary(new.round_summary()).decode()}
        written = Written(seq, [t.as_dict() for t in transfers], new.balances, new.round_view(),
                          coins=None if new.coins is None else list(new.coins))  # (the state is kept: copies)
        return record, new, written, rounds

    def _plan_void(self, table_id: str, st: TableState, version: int, target: int):
        """Refold the target's round (and the rounds after it) without the target.

        Only what the decision needs is read: a refusal for a seq out of range or
        already voided reads nothing, one for a void record (or a record a correction
        replaced) reads that record, and a void that a later record depends on reads
        the log from the start of the target's round up to that record.  A refold
        starts early enough to reach every correction it reads (``refold_start``).
        """
        if not 1 <= target <= version:
            raise EventNotFound(f"table {table_id!r} has no event {target}")
        if target in st.voided:
            raise Conflict("already_voided", f"event {target} is already voided")
        latest = st.round_meta
        current = latest is not None and target >= latest["start"]
        number = latest["number"] if current else None
        reads = [("LLEN", keys.log(table_id)), ("LINDEX", keys.log(table_id), target - 1)]
        if current and not st.corrections:
            reads.append(("LRANGE", keys.rounds(table_id), max(number - 2, 0), -1))
        res = self._read(*reads)
        self._still_at(table_id, version, res[0])
        record = codec.read_record(res[1], target)
        kind = record.get("type")
        if kind == "void":
            raise Conflict("not_voidable", f"event {target} is itself a void")
        replaced_by = [c for c, k in st.corrections if k == record.get("round") and c > target]
        if replaced_by and kind in (*ROUND_EVENTS, "round_end", "correction"):
            raise Conflict("void_conflict", f"event {target} was replaced by the correction {replaced_by[0]} of round "
                           f"{record['round']} (its events are those of {replaced_by[-1]}): voiding it would change "
                           "nothing; void that correction, or correct the round again", event=replaced_by[0])
        if kind == "correction":  # refold the round it corrects, from its start
            current, number = False, record["round"]
        if len(res) > 2:
            summaries = codec.read_summaries(res[2], max(number - 2, 0) + 1)
            first = latest["start"]
        elif current:
            summaries = self._rounds_from(table_id, version, min([number - 1, *(k - 1 for _, k in st.corrections)]))
            first = latest["start"]
        elif kind == "correction":
            summaries = self._rounds_from(table_id, version, min([number, *(k for _, k in st.corrections)]) - 1)
            first = None
        else:  # an ended round: the record names its round's number, its summary where it starts
            number = record["round"] or 1  # (a buy-in before the first round names none)
            summaries = self._rounds_from(table_id, version, min([number, *(k for _, k in st.corrections)]) - 1)
            base = max(min([number, *(k for _, k in st.corrections)]) - 1, 1)
            own = summaries[number - base] if number - base < len(summaries) else None
            if record["round"] is not None and own is not None and own["last_seq"] < target:
                number += 1  # a buy-in or an adjust after its round ended (and before the next): from the next round
                first = own["last_seq"] + 1
            elif own is None or not own["first_seq"] <= target <= own["last_seq"]:  # refold all
                number, summaries = 1, self._rounds_from(table_id, version, 0)
                first = 1
            else:
                first = own["first_seq"]
        base = 1 if not summaries else summaries[0]["number"]
        if current and number >= 2 and target == first:
            # voiding the latest round_start makes the round before it the latest again: refold
            # that round from its own start (its summary alone cannot give back its fold).  (An
            # earlier round's round_start always has its round's own records depending on it.)
            number -= 1
            if number - 1 < base:
                summaries = self._rounds_from(table_id, version, number - 1)
                base = 1 if not summaries else summaries[0]["number"]
        if st.corrections:  # a correction the refold reads of a round before it: refold from that round
            number = refold_start(number, st.corrections, lambda k: summaries[k - base]["last_seq"])
        prior = summaries[number - 1 - base] if number >= 2 else None
        later = summaries[number - base:] if number >= base else summaries
        # refold_round reads from just after the round before (so the buy-ins between rounds too)
        first = 1 if prior is None else prior["last_seq"] + 1
        seq = version + 1
        void = {"seq": seq, "type": "void", "target": target, "round": record.get("round"), "at": _now()}

        def log_from_round() -> Iterator[dict]:
            log = keys.log(table_id)
            start, n = first - 1, 0
            while start < version:  # the log up to the version is immutable: read it bit by bit
                end = min(start + CHUNKS[min(n, len(CHUNKS) - 1)], version)
                raw = self.r.lrange(log, start, end - 1)
                if len(raw) != end - start:  # deleted meanwhile
                    raise TableNotFound(f"no table {table_id!r}")
                yield from codec.read_records(raw, start + 1, with_at=False)
                start, n = end, n + 1
            yield void

        try:
            new, tail = refold_round(st, prior, later, log_from_round(), set(st.voided) | {target})
        except VoidConflict as exc:
            raise Conflict("void_conflict",
                           f"event {target} cannot be voided: a later event depends on it ({exc.reason})",
                           event=exc.event) from None
        delta = [a - b for a, b in zip(new.balances, st.balances)]
        written = Written(seq, [], new.balances, new.round_view(), voided=target, deltas=delta,
                          coins=None if new.coins is None else list(new.coins))
        return void, new, written, {"keep": number - 1, "items": [codec.summary(s).decode() for s in tail]}

    def _plan_correction(self, table_id: str, st: TableState, version: int, number: int, body: Mapping[str, Any]):
        """The correction applied to the state Redis holds, from what the rounds it reaches need: nothing more
        for the round being played; the summaries from the round on for an ended one; and for an earlier
        round also the round_start and live corrections of it and of the round after it (for their
        dealer and voids).  The later rounds' events are not read: their deltas stand (docs/rules.md#s15.2)."""
        latest = 0 if st.round_meta is None else st.round_meta["number"]
        if not 1 <= number <= latest:
            raise RoundNotFound(f"table {table_id!r} has no round {number}" + (
                f" (its rounds are 1-{latest})" if latest else " (no round has started)"))
        seq = version + 1
        history = None
        if number < latest or not st.playing:
            summaries = self._rounds_from(table_id, version, number)
            history = History({s["number"]: s for s in summaries})
            if number < latest:
                starts = {number: summaries[0]["first_seq"],
                          number + 1: summaries[1]["first_seq"] if len(summaries) > 1 else st.round_meta["start"]}
                wanted = {k: [start] + corrected_by(st, k) for k, start in starts.items()}
                log = keys.log(table_id)
                res = self._read(("LLEN", log), *(("LINDEX", log, at - 1) for k in starts for at in wanted[k]))
                self._still_at(table_id, version, res[0])
                raw = iter(res[1:])
                for k in starts:
                    records = [codec.read_record(next(raw), at, with_at=False) for at in wanted[k]]
                    history.info[k] = round_info(records[0], records[1:])
        record = {"seq": seq, "type": "correction", **{k: v for k, v in body.items() if k != "type"},
                  "round": number, "at": _now()}
        corrected = {k: v for k, v in record.items() if k not in ("seq", "round", "at")}
        before = {s["number"]: s for s in history.summaries.values()} if history is not None else {}
        try:
            done = st.correct(number, corrected, seq, history)  # (a fresh copy from Redis: in place)
        except CorrectionConflict as exc:
            raise Conflict("correction_conflict", exc.reason, event=exc.event, round=exc.round) from None
        rounds: dict[str, Any] = {}
        sets = [[s["number"] - 1, codec.summary(s).decode()] for s in done.summaries
                if s["number"] in before and codec.summary(s) != codec.summary(before[s["number"]])]
        if sets:
            rounds["set"] = sets
        pushed = [s for s in done.summaries if s["number"] not in before]
        if pushed:  # (the round being played, ended by its correction)
            rounds["push"] = codec.summary(pushed[0]).decode()
        info = history.info.get(number) if history is not None else None
        voids = None if info is None else list(info.voids) or [None] * len(st.players)
        view = self._round_of(st, number, done.summaries[0] if done.summaries else None, [
            {"seq": seq, "index": i, **ev, "transfers": labelled(out)}
            for i, (ev, out) in enumerate(zip(body["events"], done.made))], voids)
        written = Written(seq, view["transfers"], st.balances, view, changes=done.changes,
                          coins=None if st.coins is None else list(st.coins))
        return record, st, written, rounds or None

    @staticmethod
    def _round_of(st: TableState, number: int, summary: dict | None, events: list[dict],
                  voids: list | None = None) -> dict:
        """A round as the rounds view shows it: its summary's figures (the round view's, for the round being
        played), its live ``events`` with their transfers, all its transfers and its live corrections."""
        if summary is None:  # the round being played
            view = st.round_view()
            out = {k: view[k] for k in ("number", "dealer", "status", "voids", "deltas", "won", "left", "ended_by",
                                        "next_dealer")}
            out |= {"first_seq": st.round_meta["start"], "last_seq": None}
            coins = {k: view[k] for k in ("bankrolls", "coins_delta", "fees") if k in view}
        else:
            out = {"number": summary["number"], "dealer": summary["dealer"], "status": "ended",
                   "voids": voids if voids is not None else (
                       list(st.round.voids) if number == st.round_meta["number"] else None)}
            out |= {k: summary[k] for k in ("deltas", "won", "left", "ended_by", "next_dealer", "first_seq",
                                            "last_seq")}
            coins = {k: summary[k] for k in ("bankrolls", "coins_delta", "fees") if k in summary}
        transfers = [t for e in events for t in e["transfers"]]
        return out | {"events": events, "transfers": transfers, "corrected_by": corrected_by(st, number)} | coins

    def _rounds_from(self, table_id: str, version: int, number: int) -> list[dict]:
        """The summaries of the ended rounds from round ``number`` on (round 1: all), read with the
        log's length, which must still be ``version``."""
        length, raw = self._read(("LLEN", keys.log(table_id)),
                                 ("LRANGE", keys.rounds(table_id), max(number - 1, 0), -1))
        self._still_at(table_id, version, length)
        return codec.read_summaries(raw, max(number - 1, 0) + 1)

    @staticmethod
    def _still_at(table_id: str, version: int, length: int) -> None:
        """A plan read the log at ``length``: go on only if that is the version it started from."""
        if length < version:  # a log only grows: it was deleted meanwhile
            raise TableNotFound(f"no table {table_id!r}")
        if length > version:
            raise _Moved()

    def delete(self, table_id: str) -> bool:
        """Delete a table's keys, keeping a 24 h tombstone of its token hashes."""
        self._states.drop(table_id)  # (another worker's kept state is refused by the script: ``missing``)
        for _ in range(MAX_RETRIES):
            version, balances = -1, "null"
            if self.webhooks:  # the table.deleted notification tells the version and balances it had
                owner, state, length = self._read(("HGET", keys.meta(table_id), "owner"),
                                                  ("GET", keys.state(table_id)), ("LLEN", keys.log(table_id)))
                if owner is not None and state is not None:
                    version = length
                    balances = _dumps(TableState.from_dict(codec.read_state(state)).balances)
            res = self._run(self._delete, [*keys.every(table_id), keys.channel(table_id), keys.outbox(table_id),
                                           keys.rotation(table_id)],
                            keys.args(tombstone_ttl=TOMBSTONE_TTL, publish=self.publish_command,
                                      table=table_id if version >= 0 else None, outbox_ttl=self.outbox_ttl,
                                      version=version, balances=balances), wrote=lambda res: res > 0)
            if res == -1:  # an append came between the read and the script: read again
                continue
            if res == 2:
                self._hint(table_id)
            return bool(res)
        raise Busy("too many concurrent writes to this table; retry")

    def rotate(self, table_id: str, access: Access, *, idempotency_key: str | None = None,
               credential: str = "") -> Rotated:
        """New write and read tokens for a table, shown only here: the old ones stop working at once (every
        read and write checks the meta hash), the creation's kept first response goes (a retry of the
        creation is then ``tokens_rotated``), and the table's channel says ``rotated`` (open streams re-check
        their credentials: those of an old token end).

        Needs the write token or the API key that created the table (as a write does).  A rotation
        racing another one with the same old token: one of them wins, the other is 401 (its token is
        no longer the table's).

        Under an ``idempotency_key`` the new tokens are kept (24 h, never longer than the table) sealed
        under the key and the ``credential`` the rotation was sent with (the old write token, or the API
        key: :func:`~service.store.sealing.seal_rotation`): a retry with the same key from the same caller
        answers them again (``replayed``), the old write token being accepted for that replay only; the
        same key from another caller is :class:`IdempotencyMismatch`.  Only the table's last rotation is
        kept: after a newer one, the older one's tokens no longer work and its key replays nothing."""
        meta = keys.meta(table_id)
        try:
            _check_access(table_id, self.r.hmget(meta, *AUTH_FIELDS), replace(access, write=True))
        except Unauthorized:
            if not (idempotency_key and access.token):
                raise
            # an old write token: the script accepts it for the replay of the rotation it made, nothing else
        token, read_token = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        field = sealed = None
        if idempotency_key:
            field = keys.idem_field(idempotency_key).hex()
            sealed = seal_rotation(idempotency_key, credential, table_id, [token, read_token]).hex()
        kept = min(self.idempotency_ttl, self.table_ttl) if self.table_ttl else self.idempotency_ttl
        res = keys.reply(self._run(
            self._rotate, [meta, keys.state(table_id), keys.created(table_id), keys.channel(table_id),
                           keys.rotation(table_id)],
            keys.args(token=_hash(access.token) if access.token else None,
                      owner=None if access.token else access.owner or None, new_token=_hash(token),
                      new_read_token=_hash(read_token), publish=self.publish_command, key=field, sealed=sealed,
                      kept=kept, now=_now()),
            wrote=lambda res: keys.reply(res)["outcome"] in (b"ok", b"replay")))
        self._states.drop(table_id)
        outcome = res["outcome"]
        if outcome == b"missing":
            raise TableNotFound(f"no table {table_id!r}")
        if outcome == b"denied":
            raise Unauthorized("the token is not valid for this table (or there is no such table)")
        if outcome == b"reused":
            raise IdempotencyMismatch("this Idempotency-Key rotated this table's tokens for another caller "
                                      "(another token or API key)")
        if outcome == b"replay":
            try:
                token, read_token = unseal_rotation(idempotency_key, credential, table_id, res["tokens"])
            except InvalidTag:  # the same caller by its digest, another secret: never in practice
                raise IdempotencyMismatch("this Idempotency-Key was used with a different request") from None
            return Rotated(token, read_token, replayed=True)
        return Rotated(token, read_token)

    # -- verification ------------------------------------------------------------------------
    def rebuild(self, table_id: str) -> tuple[TableState, list[dict]]:
        """Fold the whole log (the definition of the state)."""
        meta, raw = self._read(("HGETALL", keys.meta(table_id)), ("LRANGE", keys.log(table_id), 0, -1))
        meta = dict(zip(meta[::2], meta[1::2]))
        if not meta or b"dealer" not in meta:
            raise TableNotFound(f"no table {table_id!r}")
        records = codec.read_records(raw, 1, with_at=False)
        return fold(codec.loads(meta[b"players"]), codec.loads(meta[b"ruleset"]) | {},
                    int(meta[b"dealer"]), records, _stakes(meta.get(b"stakes")))

    def check(self, table_id: str, repair: bool = False) -> dict:
        """Compare the stored state with the fold of the log; optionally write the fold back.

        Everything is read in one transaction, so a table being written meanwhile is
        checked as it stood (a later append cannot look like a mismatch); a repair
        is written only if the log has not moved since.  Raises
        :class:`TableNotFound` for a table that does not exist (or no longer does).
        """
        flat, log, state, rounds = self._read(("HGETALL", keys.meta(table_id)), ("LRANGE", keys.log(table_id), 0, -1),
                                              ("GET", keys.state(table_id)), ("LRANGE", keys.rounds(table_id), 0, -1))
        meta = dict(zip(flat[::2], flat[1::2]))
        if b"dealer" not in meta:  # unknown, expired, or a deleted table's tombstone
            raise TableNotFound(f"no table {table_id!r}")
        folded, summaries = fold(codec.loads(meta[b"players"]), codec.loads(meta[b"ruleset"]),
                                 int(meta[b"dealer"]), codec.read_records(log, 1, with_at=False),
                                 _stakes(meta.get(b"stakes")))
        stored = None if state is None else codec.read_state(state)
        ok = (stored == codec.loads(codec.dumps(folded.to_dict()))
              and codec.read_summaries(rounds, 1) == codec.loads(codec.dumps(summaries)))
        ok = ok and sum(folded.balances) == 0
        repaired = False
        if not ok and repair:
            repaired = bool(self._run(self._repair, [keys.log(table_id), keys.state(table_id),
                                                     keys.rounds(table_id)],
                                      keys.args(version=len(log), state=codec.state(folded.to_dict()).decode(),
                                                rounds=[codec.summary(s).decode() for s in summaries]),
                                      wrote=bool))
        return {"id": table_id, "version": len(log), "ok": ok, "repaired": repaired,
                "balances": folded.balances}

    # -- an API key's tables -------------------------------------------------------------------
    def _index(self, owner: str, table_id: str) -> None:
        """List a new table under its owner; prune up to two of the owner's oldest dead entries.

        (Not inside CREATE: the index lives in the owner's slot, not the table's.
        A crash between the two leaves a table unlisted, never a listed table that
        was not created.)
        """
        index = keys.owner_tables(owner)
        self.r.zadd(index, {table_id: int(time.time() * 1000)}, nx=True)
        oldest = [m.decode() for m in self.r.zrange(index, 0, 1)]
        with self.r.pipeline(transaction=False) as p:
            for tid in oldest:
                p.exists(keys.state(tid))
            alive = p.execute()
        dead = [tid for tid, ok in zip(oldest, alive) if not ok]
        if dead:
            self.r.zrem(index, *dead)

    def tables_of(self, owner: str, after: str | None = None, limit: int = 50) -> dict:
        """The owner's tables, newest first: ``{"tables": [...], "next"}``.

        ``after`` is the ``next`` of the previous page (``"<ms>-<id>"``), ``None``
        for the first page.  Tables that expired or were deleted are dropped from
        the index as they are met.
        """
        index = keys.owner_tables(owner)
        top: str = "+inf"
        skip: set[str] = set()
        if after is not None:
            ms, _, last = after.partition("-")
            top = ms
            # entries of the same millisecond that the previous page already gave
            skip = {m.decode() for m in self.r.zrevrangebyscore(index, ms, ms)}
            skip = {m for m in skip if m >= last}
        found: list[tuple[str, int, dict]] = []
        offset = 0
        while len(found) <= limit:
            want = limit + 1 - len(found) + len(skip)
            rows = self.r.zrevrangebyscore(index, top, "-inf", start=offset, num=want, withscores=True)
            batch = [(m.decode(), int(score)) for m, score in rows]
            batch = [(tid, ms) for tid, ms in batch if tid not in skip]
            views = self._summaries([tid for tid, _ in batch])
            dead = [tid for (tid, _), v in zip(batch, views) if v is None]
            if dead:
                self.r.zrem(index, *dead)
            offset += len(rows) - len(dead)
            found.extend((tid, ms, v) for (tid, ms), v in zip(batch, views) if v is not None)
            if len(rows) < want:
                break
        page = found[:limit]
        nxt = f"{page[-1][1]}-{page[-1][0]}" if len(found) > limit else None
        return {"tables": [v for _, _, v in page], "next": nxt}

    def _summaries(self, ids: list[str]) -> list[dict | None]:
        with self.r.pipeline(transaction=False) as p:
            for tid in ids:
                p.hmget(keys.meta(tid), "players", "created", "deleted")
                p.get(keys.state(tid))
                p.llen(keys.log(tid))
            res = p.execute()
        out: list[dict | None] = []
        for i, tid in enumerate(ids):
            meta, state, version = res[3 * i], res[3 * i + 1], res[3 * i + 2]
            if meta[0] is None or meta[2] or state is None:
                out.append(None)
                continue
            st = TableState.from_dict(codec.read_state(state))
            out.append({"id": tid, "players": codec.loads(meta[0]), "created": meta[1].decode(),
                        "version": version, "balances": st.balances})
        return out

    def table_ids(self):
        """The ids of the live tables (deleted tables' tombstones left out), in no order.

        On a cluster every primary is scanned (``SCAN`` sees one node's keys).
        """
        for node in redis_client.primaries(self.r):
            batch: list[str] = []
            for key in node.scan_iter(match=keys.TABLE_PATTERN, count=500):
                k = key.decode()
                batch.append(k[len("{t:"): k.index("}")])
                if len(batch) == 500:
                    yield from self._live(node, batch)
                    batch = []
            yield from self._live(node, batch)

    @staticmethod
    def _live(node: redis.Redis, ids: list[str]) -> list[str]:
        """Those of ``ids`` (keys found on ``node``) that are live tables, asked of that node in one round trip."""
        with node.pipeline(transaction=False) as p:
            for table_id in ids:
                p.hexists(keys.meta(table_id), "dealer")
            return [table_id for table_id, live in zip(ids, p.execute()) if live]
