"""Every Redis key and Lua script of the table store, in one place.

All of a table's keys share the hash tag ``{t:<id>}``, so a table lives in one
Redis Cluster slot and every script touches one slot.

=============================  ======  ==================================================
key                            type    holds
=============================  ======  ==================================================
``{t:<id>}:meta``              hash    players, ruleset, first dealer, stakes (if any), token hashes, created,
                                       ``owner`` (the API key that created it), ``finished`` (when),
                                       ``rotated`` (when its tokens were last rotated), ``next`` (the
                                       table that follows it: FOLLOW), ``follows`` (the table it follows)
                                       and ``follow_fp`` (its creation's request, hex :func:`fp_digest`)
                                       (after DELETE: only the token hashes, owner and ``deleted``, 24 h)
``{t:<id>}:log``               list    the log: one record per seq, seq n at index n - 1 (append-only;
                                       :mod:`~service.store.codec`: ``[at ms, round, type, values...]``)
``{t:<id>}:state``             string  JSON :class:`~service.rules.table.TableState` at version = LLEN log
                                       (:func:`~service.store.codec.state`: compact, ``"form": 2``)
``{t:<id>}:rounds``            list    summaries of the table's ended rounds (round n at index n - 1;
                                       positional arrays, :func:`~service.store.codec.summary`)
``{t:<id>}:snapshots``         hash    field n (a multiple of :data:`SNAPSHOT_EVERY`) = the state at
                                       version n, as stored then: what a replay or a stream open folds
                                       from (a prefix of the log never changes, so neither do they)
``{t:<id>}:idem``              hash    the table's Idempotency-Key records: field = the key's
                                       :func:`idem_field` (16 bytes), value = :func:`fp_digest` of
                                       the request (8 bytes), the first 4 bytes of the SHA-1 of the
                                       record it wrote, then its seq (decimal)
``{t:<id>}:limits``            hash    the table's own rate limits (events, voids a minute): per limit
                                       ``<name>:w`` the current window's start (ms), ``<name>:c`` its
                                       count, ``<name>:p`` the previous window's count
``{t:<id>}:created``           string  a keyed creation's record: :func:`fp_digest` of the request,
                                       then its tokens sealed with AES-GCM under a key derived
                                       from the Idempotency-Key (24 h at most)
``{t:<id>}:rotation``          hash    the table's last rotation under an Idempotency-Key (``ROTATE``): ``key``
                                       the key's :func:`idem_field`, ``by`` who rotated (the old write
                                       token's SHA-256, or ``key:<owner>``), ``tokens`` the new tokens sealed
                                       under the key and that credential (24 h at most)
``{o:<name>}:tables``          zset    ids of the tables an API key created, scored by creation
                                       time in ms (``GET /v1/tables``; pruned lazily)
``{t:<id>}:outbox``            stream  the table's webhook notifications (tables with an ``owner`` only),
                                       written by the same script as the write they announce; an entry:
                                       ``t`` its type, ``o`` the owner, ``d`` its ``data`` (JSON).  Not a
                                       key of :func:`every`: it outlives a DELETE (its ``table.deleted``);
                                       its TTL is :func:`outbox_ttl` of the table's
``{t:<id>}:lanes``             hash    per webhook id: where its deliveries of this table stand (JSON
                                       :class:`~service.webhooks.outbox.Lane`: the last entry delivered or
                                       dead-lettered, the attempts at the next one, when to retry)
``{t:<id>}:lease``             string  the dispatcher visiting the table (its token; 5 s)
``{t:<id>}:lease:<hook>``      string  the dispatcher delivering the table's entries to one webhook
``{o:<name>}:webhooks``        hash    an API key's webhooks: id → JSON registration (its secret sealed)
``{o:<name>}:webhook-status``  hash    ``<id>:ok`` / ``<id>:dead`` (ms of the last delivery, of the last
                                       dead letter), ``<id>:dead-count``, ``<id>:last`` (JSON: the last attempt),
                                       ``<id>:logged`` (the number of the webhook's last delivery logged)
``{o:<name>}:dead:<hook>``     list    a webhook's dead letters, newest first (at most 1000)
``{o:<name>}:deliveries:<hook>``  hash  a webhook's deliveries log: delivery id (its ``webhook-id``) → JSON
                                       (the delivery as listed, its outbox entry ``e`` and notification ``d``)
``{o:<name>}:delivery-order:<hook>``  zset  the same ids, scored by their number (the newest
                                       :data:`~service.webhooks.registry.DELIVERIES_KEPT` kept)
``{wh}:due``                   zset    table ids with webhook work, scored by when (ms) a dispatcher
                                       should visit them (the hint; :mod:`service.webhooks`)
``{wh}:wake``                  list    at most one element: there is webhook work (a dispatcher waiting for
                                       work blocks on it with ``BLPOP``; a hint that makes a table due
                                       sooner pushes it)
``{wh}:outboxes``              hash    the outboxes as the last sweep found them: ``outboxes``, ``entries``,
                                       ``longest``, ``oldest`` (ms of the oldest entry; 0: none), ``at`` (ms)
``{t:<id>}:events``            channel pub/sub: every appended record as the stream sends it, and
                                       ``deleted``, ``rotated``, ``{"finished_at"}``, ``{"next"}``
                                       (PUBLISH, or SPUBLISH on a cluster: same slot)
``rl:client:<client>``         hash    a client's own write limits (events, voids a minute; :func:`client_limits`),
                                       counted by the APPEND script (or HIT): fields as the table's ``limits``
                                       hash; it expires two minutes after its last write
``LIMITS:{LIMITER/rl/...}``    -       the other per-client limits and the tables' reads (the ``limits``
                                       library's sliding window counters, its key names under
                                       :data:`RATE_LIMIT_PREFIX`; :mod:`service.api.rate_limits`)
=============================  ======  ==================================================

The version of a table is the length of its log; the state stored beside the
log is always the fold of the log up to that version (``python -m service
check-tables`` re-folds and verifies).

Idempotency records belong to their table: they live as long as it does
(every write renews the TTL of all its keys alike, the ``idem`` hash
included), go with a DELETE, and a CREATE wipes whatever an expired table of
the same id left.  An event's record is 24 bytes and a few of overhead, not
its response: a replay rebuilds the first response from the snapshot before
it and the records from there to its seq (at most :data:`SNAPSHOT_EVERY`),
which is what it was computed from.

Writes that add data start with a command Redis refuses when it is out of
memory (``maxmemory``, ``noeviction``), so a full Redis refuses the whole script
and never runs half of it; DELETE starts with ``DEL``, so it still works then.
Reads that must see one moment go through the READ script rather than
MULTI/EXEC, which a full Redis refuses altogether.

Every key a script touches is passed in KEYS (a Redis Cluster routes a script
by its KEYS and refuses one that reaches a key of another node; within the
node it would not check, so ``tests/test_store_keys.py`` reads the scripts for
it), and all of them are one table's, so one slot's.

Scripts: one convention
-----------------------
Every script takes its keys in KEYS, in the order stated above it, and its arguments as **one JSON
object of named members in ARGV[1]** (``local a = cjson.decode(ARGV[1])``; :func:`args` writes it,
leaving out a member that is off, so a script tests ``if a.owner then``); bytes that are not text
travel as hex (:data:`UNHEX_FN`).  A script that answers more than one value answers **a flat list of
names and values**, ``{'outcome', 'ok', 'version', 3, ...}`` (Lua's ``false`` is a nil reply there),
which the store reads by name (:func:`reply`); one that answers a single value answers it alone.
(A number crosses cjson as a double: exact for every integer the store sends, ms times included.)

With ``REDIS_MIN_REPLICAS`` the store runs each write script and then ``WAIT``
on the same connection (:func:`service.store.redis_client.acknowledged`); a script
that *replays* an earlier write (its ``durable`` argument set) first
"touches" the table (:data:`TOUCH_FN`): a write that changes nothing but goes
to the replicas, so that the ``WAIT`` covers the write being replayed, which
may have reached the primary only.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson


def tag(table_id: str) -> str:
    return "{t:" + table_id + "}"


def meta(table_id: str) -> str:
    return tag(table_id) + ":meta"


def log(table_id: str) -> str:
    return tag(table_id) + ":log"


def state(table_id: str) -> str:
    return tag(table_id) + ":state"


def rounds(table_id: str) -> str:
    return tag(table_id) + ":rounds"


def snapshots(table_id: str) -> str:
    return tag(table_id) + ":snapshots"


def limits(table_id: str) -> str:
    return tag(table_id) + ":limits"


def idem(table_id: str) -> str:
    return tag(table_id) + ":idem"


def created(table_id: str) -> str:
    return tag(table_id) + ":created"


def rotation(table_id: str) -> str:
    """The table's last rotation under an Idempotency-Key (kept 24 h): its key's field, who rotated, the new
    tokens sealed (see ``ROTATE``)."""
    return tag(table_id) + ":rotation"


def idem_field(key: str) -> bytes:
    """The field of an Idempotency-Key in its table's ``idem`` hash (Redis never sees the key).

    >>> len(idem_field("phone-1:evt-7")), idem_field("a") == idem_field("b")
    (16, False)
    """
    return hashlib.sha256(b"idempotency-key:" + key.encode()).digest()[:16]


def fp_digest(fingerprint: str) -> bytes:
    """8 bytes that tell two requests under one Idempotency-Key apart (see ``fingerprint``).

    >>> len(fp_digest("POST /v1/tables {}"))
    8
    """
    return hashlib.sha256(b"request:" + fingerprint.encode()).digest()[:8]


def every(table_id: str) -> list[str]:
    """Every key a live table may have (meta first)."""
    return [meta(table_id), log(table_id), state(table_id), rounds(table_id), idem(table_id), created(table_id),
            snapshots(table_id), limits(table_id)]


def appended(table_id: str) -> list[str]:
    """The keys of the APPEND script, in its order."""
    return [meta(table_id), log(table_id), state(table_id), rounds(table_id), idem(table_id), channel(table_id),
            snapshots(table_id), limits(table_id), outbox(table_id)]


CLUB_BOX = "c:"
"""The prefix of a club's outbox id (a *box*: ``c:<club id>``); a table's box is its id."""


def box_tag(box: str) -> str:
    """The hash tag of an outbox's owner: a table's (a table id) or a club's (``c:<club id>``).

    >>> box_tag("0123456789abcdef"), box_tag("c:0123456789abcdef")
    ('{t:0123456789abcdef}', '{c:0123456789abcdef}')
    """
    return "{" + box + "}" if box.startswith(CLUB_BOX) else tag(box)


def outbox(table_id: str) -> str:
    """The table's webhook notifications (a stream in the table's slot); a club's, for ``c:<club id>``."""
    return box_tag(table_id) + ":outbox"


def lanes(table_id: str) -> str:
    """Per webhook, where its deliveries of the table (or club) stand."""
    return box_tag(table_id) + ":lanes"


def lease(table_id: str, hook: str | None = None) -> str:
    """The lease of a dispatcher visiting the table (or club), or (``hook``) delivering it to one webhook.

    >>> lease("0123456789abcdef"), lease("0123456789abcdef", "wh_1"), lease("c:0123456789abcdef")
    ('{t:0123456789abcdef}:lease', '{t:0123456789abcdef}:lease:wh_1', '{c:0123456789abcdef}:lease')
    """
    return box_tag(table_id) + ":lease" + ("" if hook is None else ":" + hook)


def alive(box: str) -> str:
    """The key whose existence says that an outbox's owner is still there: a table's state, a club's meta.

    >>> alive("0123456789abcdef"), alive("c:0123456789abcdef")
    ('{t:0123456789abcdef}:state', '{c:0123456789abcdef}:meta')
    """
    return club_meta(box[len(CLUB_BOX):]) if box.startswith(CLUB_BOX) else state(box)


def box_of_outbox(name: str) -> str:
    """The box of an outbox key (what :func:`outbox` was given).

    >>> box_of_outbox("{t:0123456789abcdef}:outbox"), box_of_outbox("{c:0123456789abcdef}:outbox")
    ('0123456789abcdef', 'c:0123456789abcdef')
    """
    inner = name[1: name.index("}")]
    return inner[len("t:"):] if inner.startswith("t:") else inner


def webhooks(owner: str) -> str:
    """An API key's webhook registrations (its own slot)."""
    return "{o:" + owner + "}:webhooks"


def webhook_status(owner: str) -> str:
    """How an API key's webhooks' deliveries went."""
    return "{o:" + owner + "}:webhook-status"


def dead_letters(owner: str, hook: str) -> str:
    """A webhook's dead letters."""
    return "{o:" + owner + "}:dead:" + hook


def deliveries(owner: str, hook: str) -> str:
    """A webhook's deliveries log: delivery id → the delivery (JSON)."""
    return "{o:" + owner + "}:deliveries:" + hook


def delivery_order(owner: str, hook: str) -> str:
    """The order of a webhook's deliveries log (delivery id → its number)."""
    return "{o:" + owner + "}:delivery-order:" + hook


WEBHOOKS_DUE = "{wh}:due"
"""Tables with webhook work, scored by when to visit them (ms)."""
WEBHOOKS_WAKE = "{wh}:wake"
"""At most one element: there is webhook work (what an idle dispatcher blocks on)."""
WEBHOOKS_OUTBOXES = "{wh}:outboxes"
"""The outboxes' figures as the last sweep found them (``/metrics``)."""
OUTBOX_PATTERN = "{t:*}:outbox"
CLUB_OUTBOX_PATTERN = "{c:*}:outbox"
OUTBOX_MAX_ENTRIES = 10_000
"""About the most entries an outbox keeps (``XADD MAXLEN ~``): past it an append drops the oldest ones,
delivered or not (a webhook that far behind at one table loses what was dropped)."""
OUTBOX_MIN_TTL = 7 * 24 * 3600
"""An outbox with a TTL keeps at least this long (longer than the retry budget's default day)."""


def outbox_ttl(table_ttl: int) -> int:
    """The TTL (s) of a table's outbox: the table's, but at least :data:`OUTBOX_MIN_TTL`; 0: none.

    >>> outbox_ttl(0), outbox_ttl(60), outbox_ttl(30 * 24 * 3600)
    (0, 604800, 2592000)
    """
    return max(table_ttl, OUTBOX_MIN_TTL) if table_ttl else 0


def owner_tables(owner: str) -> str:
    """The index of an API key's tables (its own slot: written beside, not inside, CREATE)."""
    return "{o:" + owner + "}:tables"


def channel(table_id: str) -> str:
    """The table's pub/sub channel (hash-tagged: a sharded channel lives on the table's slot).

    >>> channel("0123456789abcdef")
    '{t:0123456789abcdef}:events'
    """
    return tag(table_id) + ":events"


def table_of_channel(name: str) -> str:
    """>>> table_of_channel("{t:0123456789abcdef}:events")
    '0123456789abcdef'
    """
    return name[len("{t:"): name.index("}")]


def client_limits(client: str) -> str:
    """A client's own write limits (events, voids a minute): a hash of sliding window counters.

    No hash tag: on a Redis Cluster it is in a slot of its own (the APPEND script cannot reach it there,
    and the store counts it with HIT before the APPEND); elsewhere the APPEND script counts it.

    >>> client_limits("addr:10.0.0.1")
    'rl:client:addr:10.0.0.1'
    """
    return RATE_LIMIT_PREFIX + ":client:" + client


SNAPSHOT_EVERY = 128
"""A version that is a multiple of this keeps its state in the table's snapshots."""
RATE_LIMIT_PREFIX = "rl"
"""The key prefix of the per-client rate limits (the ``limits`` library's first identifier, and the clients'
own write limits: :func:`client_limits`)."""

PUBLISH = "PUBLISH"  # a plain Redis (the embedded 6.2 included)
SPUBLISH = "SPUBLISH"  # Redis Cluster (7.0+): the message stays on the channel's slot's shard
DELETED = "deleted"  # the message a DELETE publishes
ROTATED = "rotated"  # the message a ROTATE publishes (the table's tokens changed)

TABLE_PATTERN = "{t:*}:meta"


def args(**named: Any) -> list[bytes]:
    """A script's arguments (see the module doc): ARGV[1], the named members (None: left out) as one JSON
    object.

    >>> args(version=3, owner=None, meta=["a", "b"])
    [b'{"version":3,"meta":["a","b"]}']
    """
    return [orjson.dumps({name: value for name, value in named.items() if value is not None})]


def reply(raw: list) -> dict[str, Any]:
    """A script's answer read by name (see the module doc): its flat list of names and values.

    >>> reply([b"outcome", b"ok", b"version", 4, b"state", None])
    {'outcome': b'ok', 'version': 4, 'state': None}
    """
    return {raw[i].decode(): raw[i + 1] for i in range(0, len(raw) - 1, 2)}


ARGS = """
local a = cjson.decode(ARGV[1])
"""
UNHEX_FN = """
local function unhex(h) return (h:gsub('..', function(c) return string.char(tonumber(c, 16)) end)) end
"""

# touch(key): a write that changes nothing but is replicated (so that this connection's WAIT covers every
# write before it), and that a full Redis still runs (PEXPIRE and PERSIST are not refused for memory).
# The key must exist; its TTL is kept (none stays none).
TOUCH_FN = """
local function touch(key)
  local ttl = redis.call('PTTL', key)
  if ttl > 0 then
    redis.call('PEXPIRE', key, ttl)
  else
    redis.call('PEXPIRE', key, 3153600000000)
    redis.call('PERSIST', key)
  end
end
"""

# TOUCH: make the replicas' WAIT cover a table's earlier writes (a replay found by a read).
# KEYS[1] state
# returns 1, or 0 when the table does not exist
TOUCH = TOUCH_FN + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
touch(KEYS[1])
return 1
"""


# window(l, w, now): one more hit of a sliding window counter (the weighted count of the previous window
# and this one), kept in three hash fields <name>:w (the window's start, ms), <name>:c (its count) and
# <name>:p (the previous window's count), as read by HMGET (fields(l)) into w.
# l: {name, amount, period (ms)}; now: ms.  Answers the field/value pairs to HSET when one more fits, the
# remaining count after it and the ms to the window's end; or nil and the ms to wait before one more fits.
WINDOW_FN = """
local function fields(l) return l.name .. ':w', l.name .. ':c', l.name .. ':p' end
local function window(l, w, now)
  local period = l.period
  local start = now - now % period
  local count, previous = tonumber(w[2]) or 0, tonumber(w[3]) or 0
  local was = tonumber(w[1])
  if was ~= start then
    if was == start - period then previous = count else previous = 0 end
    count = 0
  end
  local elapsed = now - start
  local weighted = previous * (period - elapsed) / period + count
  if weighted + 1 > l.amount then
    local wait
    if count + 1 > l.amount then  -- this window is full: into the next one, then its share
      wait = period - elapsed + math.ceil(period * math.max(0, 1 - (l.amount - 1) / count))
    else  -- the previous window's share must fall enough
      wait = math.ceil(period * (1 - (l.amount - 1 - count) / previous)) - elapsed
    end
    return nil, math.max(1, wait)
  end
  return {l.name .. ':w', start, l.name .. ':c', count + 1, l.name .. ':p', previous},
         math.max(0, math.floor(l.amount - weighted - 1)), period - elapsed
end
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
"""

# client(key, limits, now): count one hit of each of a client's limits in its hash (KEYS[...] passed as key
# by every caller), all or none: answers the quota ({remaining, reset ms, ...} in the limits' order), or nil,
# the refusing limit's name and the ms to wait (nothing counted)
CLIENT_FN = """
local function client(limits, w, now)
  local writes, quota = {}, {}
  for i = 1, #limits do
    local set, remaining, reset = window(limits[i], {w[3 * i - 2], w[3 * i - 1], w[3 * i]}, now)
    if not set then return nil, limits[i].name, remaining end
    for j = 1, #set do writes[#writes + 1] = set[j] end
    quota[#quota + 1] = remaining
    quota[#quota + 1] = reset
  end
  return writes, quota
end
local function client_fields(limits)
  local names = {}
  for i = 1, #limits do
    local c, n, p = fields(limits[i])
    names[#names + 1], names[#names + 2], names[#names + 3] = c, n, p
  end
  return names
end
"""
CLIENT_TTL_MS = 2 * 60_000
"""How long a client's own limits hash outlives its last write (two windows of a minute)."""

# HIT: count one request against a client's own write limits (events or voids a minute) where the APPEND
# script does not (a finish, a club's write, a request refused before its append; on a Redis Cluster, every
# one: the client's hash is not in the table's slot).
# KEYS[1] the client's limits hash (client_limits())
# a: limits ([{name, amount, period (ms)}, ...]), ttl (ms: the hash's)
# answers {outcome: "ok", client: {remaining, reset (ms), ...} in the limits' order} |
#         {outcome: "limited", limit: the name, retry_ms} (nothing counted)
HIT = WINDOW_FN + CLIENT_FN + ARGS + """
local writes, quota, wait = client(a.limits, redis.call('HMGET', KEYS[1], unpack(client_fields(a.limits))), clock())
if not writes then return {'outcome', 'limited', 'limit', quota, 'retry_ms', wait} end
redis.call('HSET', KEYS[1], unpack(writes))
redis.call('PEXPIRE', KEYS[1], a.ttl)
return {'outcome', 'ok', 'client', quota}
"""


# CREATE: a new table, unless the id is taken (then what a replay needs).
# KEYS: meta, log, state, rounds, idem, created, snapshots, limits (as every()), KEYS[9] outbox
# KEYS[10] the table's rotation record (rotation())
# a: state (JSON text), ttl (the table's, s; 0: none), meta (its field/value pairs), created (the
#    creation's record, hex; absent: the request has no key) and created_ttl (s), durable (true: touch the
#    table when the id exists: REDIS_MIN_REPLICAS), owner (the API key's name; absent: none; with an owner
#    the table.created notification, data: its JSON, is added to the outbox; the outbox is never wiped: an
#    earlier table of this id may still have notifications to deliver), outbox_ttl (s; 0: none)
# answers {outcome: "created"} | {outcome: "exists", record: the creation's record or false,
#          meta: {players, ruleset, dealer, deleted, stakes, rotated}} ("rotated": when the table's tokens
#          were last rotated, or false)
CREATE = TOUCH_FN + UNHEX_FN + ARGS + """
if redis.call('EXISTS', KEYS[1]) == 1 then
  if a.durable then touch(KEYS[1]) end
  return {'outcome', 'exists', 'record', redis.call('GET', KEYS[6]),
          'meta', redis.call('HMGET', KEYS[1], 'players', 'ruleset', 'dealer', 'deleted', 'stakes', 'rotated')}
end
redis.call('HSET', KEYS[1], unpack(a.meta))
redis.call('SET', KEYS[3], a.state)
-- whatever an expired table of this id left never attaches to the new one
redis.call('DEL', KEYS[2], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[10])
if a.created then redis.call('SET', KEYS[6], unhex(a.created), 'EX', a.created_ttl) end
if a.ttl > 0 then
  redis.call('EXPIRE', KEYS[1], a.ttl)
  redis.call('EXPIRE', KEYS[3], a.ttl)
end
if a.owner then
  redis.call('XADD', KEYS[9], '*', 't', 'table.created', 'o', a.owner, 'd', a.data)
  if a.outbox_ttl > 0 then redis.call('EXPIRE', KEYS[9], a.outbox_ttl) end
end
return {'outcome', 'created'}
"""

# APPEND: one record, atomically: the client's own limits, incarnation check, idempotency replay, the
# table's rate limit, version check, append, state update, rounds update, snapshot, idempotency record, TTL
# refresh, publish.
# KEYS: meta, log, state, rounds, idem, channel, snapshots, limits, outbox (as appended()), and on a Redis
# that is not a cluster KEYS[10] WEBHOOKS_DUE, KEYS[11] WEBHOOKS_WAKE (there the hint is written by the
# script itself) and KEYS[12] the client's limits hash (client_limits(); with ``client`` only)
# a (absent members: off):
#   version   the log length the record was validated against
#   record    the record as stored (JSON text, codec.record)
#   state     the new state as stored (JSON text, codec.state)
#   rounds    {"push": summary JSON text} or {"keep": n, "items": [summary JSON text, ...]} (keep the
#             first n summaries, then the items), and/or {"set": [[index, summary JSON text], ...]} (each
#             replaces the summary at that 0-based index; before any push), absent: the rounds list is unchanged
#   idem      the Idempotency-Key's idem_field, hex; fp: fp_digest of the request, hex
#   ttl       the table's TTL in seconds
#   max       the largest log length this record may make (MAX_TABLE_EVENTS, less the room kept for
#             mending for an ordinary event; absent for a round_end, which always fits)
#   message   what to publish on the channel once appended; publish: PUBLISH or SPUBLISH
#   durable   true: touch the table before answering a replay (REDIS_MIN_REPLICAS)
#   token     SHA-256 (hex) of the write token the record was validated for: "denied" when the meta
#             hash names another (the id now holds another table)
#   state_sha SHA-1 (hex) of the stored state the record was validated against: a conflict unless the
#             state stored now is that very state (a state a worker kept after a write that a fail-over
#             lost may have the version of another write made since)
#   limit     {"name", "amount", "period"} (period in ms): the table's own limit for this kind of write
#             (events or voids), a sliding window counter in the limits hash; a refused write is not
#             counted
#   client    [{"name", "amount", "period"}, ...]: the client's own limits of this kind of write (events or
#             voids), counted in KEYS[12] first, whatever the outcome (every request of a client counts);
#             one that refuses answers "limited" and nothing is counted or written
#   snapshot  the snapshot interval: a version that is a multiple of it keeps its state in snapshots
#   outbox    [[type, data JSON], ...]: the webhook notifications of the record, added to the outbox
#             (in order) when the table has an owner; outbox_ttl: the outbox's TTL in seconds (0: none);
#             outbox_max: about the most entries it keeps (XADD MAXLEN ~; absent: no bound);
#             due (ms) and table (its id): the hint, ZADD LT into KEYS[10] and, when that made the
#             table due sooner, the wake-up pushed on KEYS[11] (not on a cluster: another slot)
# answers {outcome: "ok", version, remaining, reset (ms), noted: 1 when notifications were added (2: and
#         hinted) else 0} | {outcome: "replay", idem: the idem value, from: the snapshot's version, snapshot:
#         its state or false, records: those after it up to the replayed seq} | {outcome: "conflict",
#         version, state (JSON)} | {outcome: "missing"} | {outcome: "denied"} | {outcome: "finished", at}
#         | {outcome: "full", version} | {outcome: "limited", limit: the refusing limit's name, retry_ms};
#         with ``client`` counted, every answer ends with client: {remaining, reset (ms), ...} in its order
# (a conflict answers the state at the current version, so that the caller can plan again without
# another round trip; a replay answers what rebuilds the first answer without a fold of the log: the
# state at the snapshot before it and the few records from there.  An idempotency record whose log
# entry is not there, or is another record (a fail-over lost the write), is not replayed: the
# request is taken as new)
APPEND = TOUCH_FN + UNHEX_FN + WINDOW_FN + CLIENT_FN + ARGS + """
local now, quota
if a.client then
  now = clock()
  local writes, got, wait = client(a.client, redis.call('HMGET', KEYS[12], unpack(client_fields(a.client))), now)
  if not writes then return {'outcome', 'limited', 'limit', got, 'retry_ms', wait} end
  redis.call('HSET', KEYS[12], unpack(writes))
  redis.call('PEXPIRE', KEYS[12], a.client_ttl)
  quota = got
end
local function append()
-- a deleted table keeps a tombstone meta hash (with 'deleted') but no state
if redis.call('EXISTS', KEYS[3]) == 0 then return {'outcome', 'missing'} end
local meta = redis.call('HMGET', KEYS[1], 'token', 'finished', 'owner')
if a.token and meta[1] ~= a.token then return {'outcome', 'denied'} end
local field
if a.idem then
  field = unhex(a.idem)
  local rec = redis.call('HGET', KEYS[5], field)
  if rec then
    local seq = tonumber(string.sub(rec, 13))
    local entry = seq and redis.call('LINDEX', KEYS[2], seq - 1)
    if entry and unhex(redis.sha1hex(entry):sub(1, 8)) == string.sub(rec, 9, 12) then
      if a.durable then touch(KEYS[3]) end
      local every = a.snapshot or 0
      local from = 0
      if every > 0 then from = math.floor((seq - 1) / every) * every end
      local snap = false
      if from > 0 then snap = redis.call('HGET', KEYS[7], tostring(from)) end
      if not snap then from = 0 end
      return {'outcome', 'replay', 'idem', rec, 'from', from, 'snapshot', snap,
              'records', redis.call('LRANGE', KEYS[2], from, seq - 1)}
    end
  end
end
if meta[2] then return {'outcome', 'finished', 'at', meta[2]} end
local version = redis.call('LLEN', KEYS[2])
if version ~= a.version then
  return {'outcome', 'conflict', 'version', version, 'state', redis.call('GET', KEYS[3])}
end
if a.state_sha then
  local stored = redis.call('GET', KEYS[3])
  if redis.sha1hex(stored) ~= a.state_sha then return {'outcome', 'conflict', 'version', version, 'state', stored} end
end
if a.max and version >= a.max then return {'outcome', 'full', 'version', version} end
local counted, remaining, reset = nil, -1, 0
if a.limit then
  now = now or clock()
  counted, remaining, reset = window(a.limit, redis.call('HMGET', KEYS[8], fields(a.limit)), now)
  if not counted then return {'outcome', 'limited', 'limit', a.limit.name, 'retry_ms', remaining} end
end
redis.call('RPUSH', KEYS[2], a.record)
redis.call('SET', KEYS[3], a.state)
if a.rounds then
  if a.rounds.set then
    for i = 1, #a.rounds.set do redis.call('LSET', KEYS[4], a.rounds.set[i][1], a.rounds.set[i][2]) end
  end
  if a.rounds.push then
    redis.call('RPUSH', KEYS[4], a.rounds.push)
  elseif a.rounds.keep then
    if a.rounds.keep == 0 then redis.call('DEL', KEYS[4]) else redis.call('LTRIM', KEYS[4], 0, a.rounds.keep - 1) end
    for i = 1, #a.rounds.items do redis.call('RPUSH', KEYS[4], a.rounds.items[i]) end
  end
end
if a.snapshot and (version + 1) % a.snapshot == 0 then
  redis.call('HSET', KEYS[7], tostring(version + 1), a.state)
end
if field then
  redis.call('HSET', KEYS[5], field, unhex(a.fp) .. unhex(redis.sha1hex(a.record):sub(1, 8)) .. tostring(version + 1))
end
if counted then redis.call('HSET', KEYS[8], unpack(counted)) end
if a.ttl and a.ttl > 0 then
  for i = 1, 5 do redis.call('EXPIRE', KEYS[i], a.ttl) end
  for i = 7, 8 do
    if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('EXPIRE', KEYS[i], a.ttl) end
  end
end
if a.message then redis.call(a.publish, KEYS[6], a.message) end
local noted = 0
if a.outbox and meta[3] then
  for i = 1, #a.outbox do
    if a.outbox_max then
      redis.call('XADD', KEYS[9], 'MAXLEN', '~', a.outbox_max, '*', 't', a.outbox[i][1], 'o', meta[3],
                 'd', a.outbox[i][2])
    else
      redis.call('XADD', KEYS[9], '*', 't', a.outbox[i][1], 'o', meta[3], 'd', a.outbox[i][2])
    end
  end
  if a.outbox_ttl and a.outbox_ttl > 0 then redis.call('EXPIRE', KEYS[9], a.outbox_ttl) end
  noted = 1
  if a.due then
    if redis.call('ZADD', KEYS[10], 'LT', 'CH', a.due, a.table) > 0 then  -- (due from now on: wake a dispatcher)
      redis.call('LPUSH', KEYS[11], 1)
      redis.call('LTRIM', KEYS[11], 0, 0)
    end
    noted = 2
  end
end
return {'outcome', 'ok', 'version', version + 1, 'remaining', remaining, 'reset', reset, 'noted', noted}
end
local out = append()
if quota then
  out[#out + 1] = 'client'
  out[#out + 1] = quota
end
return out
"""

# FINISH: mark a table finished (read-only from then on), if its log is still at the version checked;
# its streams are told (the message: {"finished_at": at}).
# KEYS: meta, state, log, the table's channel, outbox
# a: version (the table was checked at it: no round in progress), at (the time, ISO 8601), message,
#    publish (PUBLISH or SPUBLISH), data (the table.finished notification's JSON, added to the outbox when
#    the table has an owner; absent: none), outbox_ttl (s; 0: none)
# answers {outcome: "ok", at, noted: 1 when notified else 0} | {outcome: "finished", at: when it already
#         was} | {outcome: "conflict"} | {outcome: "missing"}
FINISH = ARGS + """
if redis.call('EXISTS', KEYS[2]) == 0 then return {'outcome', 'missing'} end
local done = redis.call('HGET', KEYS[1], 'finished')
if done then return {'outcome', 'finished', 'at', done} end
if redis.call('LLEN', KEYS[3]) ~= a.version then return {'outcome', 'conflict'} end
redis.call('HSET', KEYS[1], 'finished', a.at)
redis.call(a.publish, KEYS[4], a.message)
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner and a.data then
  redis.call('XADD', KEYS[5], '*', 't', 'table.finished', 'o', owner, 'd', a.data)
  if a.outbox_ttl > 0 then redis.call('EXPIRE', KEYS[5], a.outbox_ttl) end
  return {'outcome', 'ok', 'at', a.at, 'noted', 1}
end
return {'outcome', 'ok', 'at', a.at, 'noted', 0}
"""

# DELETE: every key of a table, leaving a tombstone: the meta hash keeps only the
# token hashes and "deleted" for a while, so that a request for a deleted
# table is still authenticated (401 for a wrong token, 404 for a right one).
# KEYS: meta, log, state, rounds, idem, created, snapshots, limits (as every()), KEYS[9] the table's
# channel, KEYS[10] the outbox, KEYS[11] the table's rotation record (rotation())
# a: tombstone_ttl (s), publish (PUBLISH or SPUBLISH; the message is "deleted"), table (the table's id;
#    absent: no notification), outbox_ttl (s; 0: none), version (the table was read at it) and balances
#    (JSON, then): a table with an owner gets its table.deleted notification (its version and balances as
#    they were), which the outbox keeps after the table is gone; a table whose log moved since it was read
#    is not deleted (-1)
# answers 0 when there was no table, 1 when it was deleted, 2 when it was deleted and notified, -1: moved
DELETE = ARGS + """
if redis.call('EXISTS', KEYS[3]) == 0 then return 0 end
local owner = a.table and redis.call('HGET', KEYS[1], 'owner')
local data
if owner then
  if redis.call('LLEN', KEYS[2]) ~= a.version then return -1 end
  data = '{"table":' .. cjson.encode(a.table) .. ',"seq":null,"version":' .. string.format('%d', a.version)
    .. ',"record":null,"balances":' .. a.balances .. '}'
end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[11])
redis.call('HDEL', KEYS[1], 'players', 'ruleset', 'dealer', 'created', 'stakes', 'rotated')
redis.call('HSET', KEYS[1], 'deleted', '1')
redis.call('EXPIRE', KEYS[1], a.tombstone_ttl)
redis.call(a.publish, KEYS[9], 'deleted')
if owner then
  redis.call('XADD', KEYS[10], '*', 't', 'table.deleted', 'o', owner, 'd', data)
  if a.outbox_ttl > 0 then redis.call('EXPIRE', KEYS[10], a.outbox_ttl) end
  return 2
end
return 1
"""

# ROTATE: new tokens for a table; the old ones stop working at once, the creation's kept first
# response (its tokens) is dropped, the meta hash says when ("rotated": a retry of the creation says
# what happened), and the channel says "rotated" (streams re-check their credentials).
# Under an Idempotency-Key the rotation is kept (KEYS[5], for ``kept`` seconds): the key's field, who rotated
# (the old write token's SHA-256, or "key:" and the owner's name) and the new tokens sealed; the same key
# from the same caller replays them (the old write token is accepted for that replay only), from another
# caller that may rotate it is "reused" (one that may not is refused as without a key).  A rotation
# without a key drops the kept one (its tokens no longer work).
# KEYS: meta, state, created, channel, rotation
# a: token (SHA-256, hex, of the write token the caller gave; absent: the caller is the owner's API key),
#    owner (the owner's name; absent: a token), new_token and new_read_token (the new tokens' SHA-256),
#    publish (PUBLISH or SPUBLISH), key (the Idempotency-Key's field, hex; absent: none), sealed (the new
#    tokens sealed, hex), kept (how long the rotation is kept, s), now (RFC 3339)
# answers {outcome: "ok"} | {outcome: "replay", tokens: the kept tokens sealed} | {outcome: "reused"} (the
#          key was another caller's) | {outcome: "missing"} (no table, or not the owner's) |
#          {outcome: "denied"} (the write token is not, or no longer, the table's)
ROTATE = TOUCH_FN + UNHEX_FN + ARGS + """
if redis.call('EXISTS', KEYS[2]) == 0 then return {'outcome', 'missing'} end
if not a.token and not a.owner then return {'outcome', 'denied'} end
local by = a.token or ('key:' .. a.owner)
local field = a.key and unhex(a.key)
local reused = false
if field then
  local kept = redis.call('HMGET', KEYS[5], 'key', 'by', 'tokens')
  if kept[1] == field then
    if kept[2] == by then
      touch(KEYS[5])  -- (REDIS_MIN_REPLICAS: this connection's WAIT then covers the rotation it replays)
      return {'outcome', 'replay', 'tokens', kept[3]}
    end
    reused = true
  end
end
local meta = redis.call('HMGET', KEYS[1], 'token', 'owner')
if a.token and meta[1] ~= a.token then return {'outcome', 'denied'} end
if a.owner and meta[2] ~= a.owner then return {'outcome', 'missing'} end
if reused then return {'outcome', 'reused'} end
redis.call('HSET', KEYS[1], 'token', a.new_token, 'read_token', a.new_read_token, 'rotated', a.now)
redis.call('DEL', KEYS[3], KEYS[5])
if field then
  redis.call('HSET', KEYS[5], 'key', field, 'by', by, 'tokens', unhex(a.sealed))
  redis.call('EXPIRE', KEYS[5], a.kept)
end
redis.call(a.publish, KEYS[4], 'rotated')
return {'outcome', 'ok'}
"""

# FOLLOW: a finished table names the table that follows it (``next``), once: a second, other next table
# is refused ("taken"); the same one again is "ok" (a retry: the channel is told again).  The next table
# was created first (CREATE, in its own slot) with this table's token hashes, read before: the script
# checks that they are still this table's (a rotation between the two leaves the next table unnamed:
# "denied", and the store deletes it).  The channel is told ({"next": id}).
# KEYS: meta, state, the table's channel
# a: next (the next table's id), token and read_token (the hashes the next table took), message (what to
#    publish), publish (PUBLISH or SPUBLISH)
# answers {outcome: "ok"} | {outcome: "taken", next: the table named before} | {outcome: "unfinished"} |
#         {outcome: "denied"} | {outcome: "missing"}
FOLLOW = ARGS + """
if redis.call('EXISTS', KEYS[2]) == 0 then return {'outcome', 'missing'} end
local meta = redis.call('HMGET', KEYS[1], 'token', 'read_token', 'finished', 'next')
if meta[1] ~= a.token or meta[2] ~= a.read_token then return {'outcome', 'denied'} end
if not meta[3] then return {'outcome', 'unfinished'} end
if meta[4] and meta[4] ~= a.next then return {'outcome', 'taken', 'next', meta[4]} end
redis.call('HSET', KEYS[1], 'next', a.next)
redis.call(a.publish, KEYS[3], a.message)
return {'outcome', 'ok'}
"""

# -- the webhook dispatcher's scripts (service/webhooks/dispatcher.py) --------------------------------------
# A lease is a string holding its dispatcher's random token, with a PX expiry: taken with SET NX PX,
# renewed and released only by its holder (these scripts), so that a dispatcher that lost it (it
# stalled past the expiry, another took over) changes nothing.

# RENEW: KEYS[1] a lease; a: token (the holder's), ms (the new expiry)
# answers 1 when renewed, 0 when the lease is not (or no longer) the holder's
RENEW = ARGS + """
if redis.call('GET', KEYS[1]) ~= a.token then return 0 end
redis.call('PEXPIRE', KEYS[1], a.ms)
return 1
"""

# RELEASE: KEYS[1] a lease; a: token (the holder's)
# answers 1 when released, 0 when it was not the holder's
RELEASE = ARGS + """
if redis.call('GET', KEYS[1]) ~= a.token then return 0 end
redis.call('DEL', KEYS[1])
return 1
"""

# ADVANCE: where one webhook's deliveries of a table stand, written by the holder of its lane lease.
# KEYS[1] the lane's lease, KEYS[2] lanes, KEYS[3] outbox
# a: token (the holder's), hook (the webhook's id), lane (JSON)
# answers 1 when written, 0 when the lease is not the holder's, 2 when the outbox is gone (nothing to do)
# (the lanes hash expires with the outbox)
ADVANCE = ARGS + """
if redis.call('GET', KEYS[1]) ~= a.token then return 0 end
local ttl = redis.call('PTTL', KEYS[3])
if ttl == -2 then return 2 end
redis.call('HSET', KEYS[2], a.hook, a.lane)
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1
"""

# TRIM: drop the outbox entries every webhook is done with, and the lanes of webhooks that are gone;
# an outbox left empty whose table is gone goes, with its lanes.
# KEYS[1] the visit's lease, KEYS[2] outbox, KEYS[3] lanes, KEYS[4] the table's state
# a: token (the holder's), keep (the first entry id to keep; absent: trim nothing), gone (the webhook ids
#    whose lanes to drop; absent: none)
# answers the entries left, or -1 when the lease is not the holder's
TRIM = ARGS + """
if redis.call('GET', KEYS[1]) ~= a.token then return -1 end
if a.keep then redis.call('XTRIM', KEYS[2], 'MINID', a.keep) end
if a.gone and #a.gone > 0 then redis.call('HDEL', KEYS[3], unpack(a.gone)) end
local left = redis.call('XLEN', KEYS[2])
if left == 0 and redis.call('EXISTS', KEYS[4]) == 0 then redis.call('DEL', KEYS[2], KEYS[3]) end
return left
"""

# READ: several reads at once, atomically: what MULTI/EXEC would do, except that a Redis
# at its memory bound refuses every command queued in a MULTI, and a script's reads it runs
# (so tables can still be read, and deleted, when Redis is full).
# KEYS: the keys read
# a: reads (for each read: [command, the index of its key in KEYS, its other arguments...])
# answers the replies, in order
READ = ARGS + """
local allowed = {GET = 1, HGET = 1, HMGET = 1, HGETALL = 1, LLEN = 1, LRANGE = 1, LINDEX = 1, ZRANGE = 1}
local out = {}
for i = 1, #a.reads do
  local read = a.reads[i]
  local name, key = read[1], KEYS[read[2]]
  if not allowed[name] then return redis.error_reply('READ does not run ' .. name) end
  out[i] = redis.call(name, key, unpack(read, 3))
end
return out
"""

# ROUND: what explaining one round reads, at one moment and in one round trip (GET .../rounds/{n}): the
# table's access fields and state, the log's length, the round's summary, and the round's records: the
# log from its round_start to the record that ended it (the latest round being played: to the end) and
# its live corrections recorded after that (the state lists them, "corrections": [[seq, round], ...]).
# KEYS: meta, state, log, rounds
# a: round (its number), fields (the meta fields to answer)
# answers fields, state, version (the log's length), and for a round there is: summary (or false: the
# round being played), first (its round_start's seq), records (the log from there), corrections (a flat
# list: seq, record, ...)
ROUND = ARGS + """
local fields = redis.call('HMGET', KEYS[1], unpack(a.fields))
local state = redis.call('GET', KEYS[2])
local version = redis.call('LLEN', KEYS[3])
local out = {'fields', fields, 'state', state, 'version', version}
if not state then return out end
local n = a.round
local summary = false
if n >= 1 then summary = redis.call('LINDEX', KEYS[4], n - 1) end
local st = cjson.decode(state)
local first, last
if summary then
  local s = cjson.decode(summary)
  first, last = s[7], s[8]
elseif type(st.round_meta) == 'table' and st.round_meta.number == n then
  first, last = st.round_meta.start, version
else
  return out
end
local extra = {}
if type(st.corrections) == 'table' then
  for _, c in ipairs(st.corrections) do
    if c[2] == n and c[1] > last then
      extra[#extra + 1] = c[1]
      extra[#extra + 1] = redis.call('LINDEX', KEYS[3], c[1] - 1)
    end
  end
end
out[#out + 1] = 'summary'
out[#out + 1] = summary
out[#out + 1] = 'first'
out[#out + 1] = first
out[#out + 1] = 'records'
out[#out + 1] = redis.call('LRANGE', KEYS[3], first - 1, last - 1)
out[#out + 1] = 'corrections'
out[#out + 1] = extra
return out
"""

# REPAIR: replace a table's state and rounds with a fresh fold, if the log has not moved.
# KEYS[1] log, KEYS[2] state, KEYS[3] rounds
# a: version (the log length folded), state (JSON), rounds (the round summaries, each JSON)
# answers 1 when written, 0 when the log moved meanwhile
REPAIR = ARGS + """
if redis.call('LLEN', KEYS[1]) ~= a.version then return 0 end
redis.call('SET', KEYS[2], a.state)
redis.call('DEL', KEYS[3])
for i = 1, #a.rounds do redis.call('RPUSH', KEYS[3], a.rounds[i]) end
return 1
"""

# REGISTER: a new webhook of an API key, unless the key has its most already.
# KEYS[1] the key's webhooks; a: id (the webhook's), registration (JSON), most
# answers 1 when registered, 0 when the key has `most` webhooks already
REGISTER = ARGS + """
if redis.call('HLEN', KEYS[1]) >= a.most then return 0 end
redis.call('HSET', KEYS[1], a.id, a.registration)
return 1
"""

# UNREGISTER: a webhook, its status, its dead letters and its deliveries log (its lanes in the tables'
# slots are dropped by the dispatcher's next TRIM of each table).
# KEYS[1] the key's webhooks, KEYS[2] their status, KEYS[3] the webhook's dead letters, KEYS[4] its
# deliveries, KEYS[5] their order; a: id (the webhook's)
# answers 1 when it existed, else 0
UNREGISTER = ARGS + """
if redis.call('HDEL', KEYS[1], a.id) == 0 then return 0 end
redis.call('HDEL', KEYS[2], a.id .. ':ok', a.id .. ':dead', a.id .. ':dead-count', a.id .. ':last', a.id .. ':logged')
redis.call('DEL', KEYS[3], KEYS[4], KEYS[5])
return 1
"""

# REVISE: a webhook's registration replaced (a PATCH, a secret's rotation), unless it changed since it was read.
# KEYS[1] the key's webhooks; a: id (the webhook's), was (its registration as read), registration (the new one)
# answers 1 when replaced, 0 when the webhook is gone, -1 when it changed meanwhile (read it again)
REVISE = ARGS + """
local now = redis.call('HGET', KEYS[1], a.id)
if not now then return 0 end
if now ~= a.was then return -1 end
redis.call('HSET', KEYS[1], a.id, a.registration)
return 1
"""

# HINT: tables with webhook work, and the wake-up of a dispatcher waiting for work.
# KEYS[1] WEBHOOKS_DUE, KEYS[2] WEBHOOKS_WAKE
# a: tables (their ids), at (ms: when to visit them), lt (true: only where that is earlier than the score they
#    have), wake (true: push the wake-up, keeping one, when a table's score changed: one already due as soon
#    needs no wake-up, a dispatcher waits at most ``poll`` for it)
# answers the number of tables whose score changed
HINT = ARGS + """
local changed = 0
for i = 1, #a.tables do
  if a.lt then
    changed = changed + redis.call('ZADD', KEYS[1], 'LT', 'CH', a.at, a.tables[i])
  else
    changed = changed + redis.call('ZADD', KEYS[1], 'CH', a.at, a.tables[i])
  end
end
if a.wake and changed > 0 then
  redis.call('LPUSH', KEYS[2], 1)
  redis.call('LTRIM', KEYS[2], 0, 0)
end
return changed
"""

# NOTE: what delivery attempts of a webhook did, unless the webhook is gone meanwhile.
# KEYS[1] the key's webhooks, KEYS[2] their status, KEYS[3] the webhook's dead letters, KEYS[4] its deliveries,
# KEYS[5] their order
# a: id (the webhook's), attempt (JSON: its last_delivery), outcome ("ok", "failed", "test" or "dead": the
#    notification is dead-lettered), dead_letter (JSON, when "dead"), kept (the dead letters kept),
#    deliveries ([[delivery id, JSON], ...]: written into the deliveries log, a new id numbered after the
#    webhook's last; absent: none) and logged (the deliveries kept: the lowest numbered go)
# (the times of the last "ok" and "dead", whose order makes the status, are this Redis's clock, and each
# is later than the other one's: the dispatchers that note them may run on hosts whose clocks differ,
# two outcomes may come in one ms, and a fail-over may put the clock back)
# answers 1, or 0 when the webhook no longer exists
NOTE = ARGS + """
if redis.call('HEXISTS', KEYS[1], a.id) == 0 then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local was = redis.call('HMGET', KEYS[2], a.id .. ':ok', a.id .. ':dead')
if a.attempt then redis.call('HSET', KEYS[2], a.id .. ':last', a.attempt) end
if a.outcome == 'ok' then
  redis.call('HSET', KEYS[2], a.id .. ':ok', math.max(now, (tonumber(was[2]) or 0) + 1))
end
if a.outcome == 'dead' then
  redis.call('LPUSH', KEYS[3], a.dead_letter)
  redis.call('LTRIM', KEYS[3], 0, a.kept - 1)
  redis.call('HSET', KEYS[2], a.id .. ':dead', math.max(now, (tonumber(was[1]) or 0) + 1))
  redis.call('HINCRBY', KEYS[2], a.id .. ':dead-count', 1)
end
if a.deliveries then
  for i = 1, #a.deliveries do
    local d = a.deliveries[i]
    if not redis.call('ZSCORE', KEYS[5], d[1]) then
      local number = redis.call('HINCRBY', KEYS[2], a.id .. ':logged', 1)
      redis.call('ZADD', KEYS[5], number, d[1])
    end
    redis.call('HSET', KEYS[4], d[1], d[2])
  end
  local over = redis.call('ZCARD', KEYS[5]) - a.logged
  if over > 0 then
    local old = redis.call('ZRANGE', KEYS[5], 0, over - 1)
    redis.call('ZREMRANGEBYRANK', KEYS[5], 0, over - 1)
    redis.call('HDEL', KEYS[4], unpack(old))
  end
end
return 1
"""


# -- clubs (service/store/clubs.py) ---------------------------------------------------------------
# All of a club's keys share the hash tag {c:<id>} (one slot); a club has no TTL.
#
# =============================  ======  ==================================================
# key                            type    holds
# =============================  ======  ==================================================
# {c:<id>}:meta                  hash    name, ruleset and stakes (JSON, or absent), min_rounds, order,
#                                        token hashes, owner, created, version (every write adds 1),
#                                        current (the current season's id), seasons (how many)
# {c:<id>}:created               string  a keyed creation's record (as a table's ``created``, 24 h)
# {c:<id>}:players               hash    player id -> JSON {"name", "aliases", "created", "merged"} (a merged
#                                        player: {"name", "merged_into"})
# {c:<id>}:names                 hash    a live player's name or alias, case-folded -> its id
# {c:<id>}:seasons               hash    season id (s1, s2, ...) -> JSON :class:`~service.rules.season.Season`
# {c:<id>}:standings:<season>    hash    player id -> JSON :class:`~service.rules.season.Standing` (that season)
# {c:<id>}:lifetime              hash    player id -> JSON Standing (every season)
# {c:<id>}:results               hash    result id (a table's id, an import's evening id) -> JSON {"result":
#                                        TableResult, "season", "seq" (the club's version it was counted at)}
# {c:<id>}:history:<player>      list    the player's evenings, in the order counted (JSON entries)
# {c:<id>}:uncounted             zset    the club's tables not counted yet, scored by when they were
#                                        reserved (ms): a finished one is counted by the next finish, read
#                                        or write of the club (service/store/clubs.py)
# {c:<id>}:outbox, :lanes, :lease  -     the club's webhook notifications (season.updated), as a table's:
#                                        the box ``c:<id>`` (:func:`outbox`)
# =============================  ======  ==================================================
def club_tag(club_id: str) -> str:
    return "{c:" + club_id + "}"


def club_meta(club_id: str) -> str:
    return club_tag(club_id) + ":meta"


def club_created(club_id: str) -> str:
    return club_tag(club_id) + ":created"


def club_players(club_id: str) -> str:
    return club_tag(club_id) + ":players"


def club_names(club_id: str) -> str:
    return club_tag(club_id) + ":names"


def club_seasons(club_id: str) -> str:
    return club_tag(club_id) + ":seasons"


def club_standings(club_id: str, season: str) -> str:
    """>>> club_standings("0123456789abcdef", "s2")
    '{c:0123456789abcdef}:standings:s2'
    """
    return club_tag(club_id) + ":standings:" + season


def club_lifetime(club_id: str) -> str:
    return club_tag(club_id) + ":lifetime"


def club_results(club_id: str) -> str:
    return club_tag(club_id) + ":results"


def club_history(club_id: str, player: str) -> str:
    return club_tag(club_id) + ":history:" + player


def club_uncounted(club_id: str) -> str:
    return club_tag(club_id) + ":uncounted"


def club_box(club_id: str) -> str:
    """The box of a club's webhook outbox (see :func:`outbox`)."""
    return CLUB_BOX + club_id


# CLUB_CREATE: a new club with its first season, unless the id is taken (then what a replay needs).
# KEYS[1] meta, KEYS[2] created, KEYS[3] seasons
# a: meta (its field/value pairs), season_id (the first season's) and season (its JSON), created (the
#    creation's record, hex; absent: the request has no Idempotency-Key) and created_ttl (s)
# answers {outcome: "created"} | {outcome: "exists", record: the creation's record or false}
CLUB_CREATE = UNHEX_FN + ARGS + """
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {'outcome', 'exists', 'record', redis.call('GET', KEYS[2])}
end
redis.call('HSET', KEYS[1], unpack(a.meta))
redis.call('HSET', KEYS[3], a.season_id, a.season)
if a.created then redis.call('SET', KEYS[2], unhex(a.created), 'EX', a.created_ttl) end
return {'outcome', 'created'}
"""

# CLUB_APPLY: a club's write, computed by the store from what it read at the club's version: the
# writes are made only if the club is still at that version, all of them or none, and the version
# moves on by one.
# KEYS[1] the club's meta, KEYS[2..] every other key the writes name (all the club's)
# a: version (the version the writes were computed at; absent: whatever it is now), writes (a list of
#    [command, index of its key in KEYS, its other arguments (strings)...]; the commands: HSET, HDEL, DEL,
#    RPUSH, ZADD, ZREM, XADD)
# answers {outcome: "ok", version: the new one} | {outcome: "conflict", version: the one now} |
#         {outcome: "missing"} (no such club)
# (every write is checked before any is made, and the first is the version's HINCRBY, which Redis refuses
# when it is out of memory: a full Redis refuses the script before it changed anything)
CLUB_APPLY = ARGS + """
local version = tonumber(redis.call('HGET', KEYS[1], 'version'))
if not version then return {'outcome', 'missing'} end
if a.version and version ~= a.version then return {'outcome', 'conflict', 'version', version} end
local allowed = {HSET = 1, HDEL = 1, DEL = 1, RPUSH = 1, ZADD = 1, ZREM = 1, XADD = 1}
for i = 1, #a.writes do
  local w = a.writes[i]
  if not allowed[w[1]] then return redis.error_reply('CLUB_APPLY does not run ' .. tostring(w[1])) end
  if not KEYS[w[2]] then return redis.error_reply('CLUB_APPLY: no key ' .. tostring(w[2])) end
end
local now = redis.call('HINCRBY', KEYS[1], 'version', 1)
for i = 1, #a.writes do
  local w = a.writes[i]
  local k = w[2]
  redis.call(w[1], KEYS[k], unpack(w, 3))
end
return {'outcome', 'ok', 'version', now}
"""
