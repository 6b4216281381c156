"""Every Redis key and Lua script of the table store, in one place.

All of a table's keys share the hash tag ``{t:<id>}``, so a table lives in one
Redis Cluster slot and every script touches one slot.

=============================  ======  ==================================================
key                            type    holds
=============================  ======  ==================================================
``{t:<id>}:meta``              hash    players, ruleset, first dealer, stakes (if any), token hashes, created,
                                       ``owner`` (the API key that created it), ``finished`` (when)
                                       (after DELETE: only the token hashes, owner and ``deleted``, 24 h)
``{t:<id>}:log``               list    the log: one record per seq, seq n at index n - 1 (append-only;
                                       :mod:`~service.store.codec`: ``[at ms, round, event]``)
``{t:<id>}:state``             string  JSON :class:`~service.rules.table.TableState` at version = LLEN log
                                       (:func:`~service.store.codec.state`)
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
``{o:<name>}:tables``          zset    ids of the tables an API key created, scored by creation
                                       time in ms (``GET /v1/tables``; pruned lazily)
``{t:<id>}:events``            channel pub/sub: every appended record as the stream sends it, and
                                       ``deleted`` (PUBLISH, or SPUBLISH on a cluster: same slot)
``rl:...``                     -       the per-client rate limits (Flask-Limiter's, with the ``limits``
                                       library's key names under :data:`RATE_LIMIT_PREFIX`)
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

With ``REDIS_MIN_REPLICAS`` the store runs each write script and then ``WAIT``
on the same connection (:func:`service.store.redis_client.acknowledged`); a script
that *replays* an earlier write (its ``durable`` argument set) first
"touches" the table (:data:`TOUCH_FN`): a write that changes nothing but goes
to the replicas, so that the ``WAIT`` covers the write being replayed, which
may have reached the primary only.
"""

from __future__ import annotations

import hashlib


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
            snapshots(table_id), limits(table_id)]


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


SNAPSHOT_EVERY = 128
"""A version that is a multiple of this keeps its state in the table's snapshots."""
RATE_LIMIT_PREFIX = "rl"
"""The key prefix of the per-client rate limits (Flask-Limiter's ``key_prefix``)."""

PUBLISH = "PUBLISH"  # a plain Redis (the embedded 6.2 included)
SPUBLISH = "SPUBLISH"  # Redis Cluster (7.0+): the message stays on the channel's slot's shard
DELETED = "deleted"  # the message a DELETE publishes

TABLE_PATTERN = "{t:*}:meta"

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


# CREATE: a new table, unless the id is taken (then what a replay needs).
# KEYS: meta, log, state, rounds, idem, created, snapshots, limits (as every())
# ARGV[1] state JSON, ARGV[2] table TTL in seconds (0: none),
# ARGV[3] the creation's record ("" when the request has no key), ARGV[4] its TTL,
# ARGV[5] durable: "1" to touch the table when the id exists (REDIS_MIN_REPLICAS), else "",
# ARGV[6..] meta field/value pairs
# returns {1} when created, {0, record or false, {players, ruleset, dealer, deleted, stakes}} when the id exists
CREATE = TOUCH_FN + """
if redis.call('EXISTS', KEYS[1]) == 1 then
  if ARGV[5] == '1' then touch(KEYS[1]) end
  return {0, redis.call('GET', KEYS[6]), redis.call('HMGET', KEYS[1], 'players', 'ruleset', 'dealer', 'deleted', 'stakes')}
end
local fields = {}
for i = 6, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('SET', KEYS[3], ARGV[1])
-- whatever an expired table of this id left never attaches to the new one
redis.call('DEL', KEYS[2], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
if ARGV[3] ~= '' then redis.call('SET', KEYS[6], ARGV[3], 'EX', tonumber(ARGV[4])) end
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[3], ttl)
end
return {1}
"""

# APPEND: one record, atomically: incarnation check, idempotency replay, the table's rate limit,
# version check, append, state update, rounds update, snapshot, idempotency record, TTL refresh, publish.
# KEYS: meta, log, state, rounds, idem, channel, snapshots, limits (as appended())
# ARGV[1]: one JSON object (absent members: off):
#   version   the log length the record was validated against
#   record    the record as stored (JSON text, codec.record)
#   state     the new state as stored (JSON text, codec.state)
#   rounds    {"push": summary JSON text} or {"keep": n, "items": [summary JSON text, ...]} (keep the
#             first n summaries, then the items), absent: the rounds list is unchanged
#   idem      the Idempotency-Key's idem_field, hex; fp: fp_digest of the request, hex
#   ttl       the table's TTL in seconds
#   max       the largest log length this record may make (MAX_TABLE_EVENTS, less the room kept for
#             corrections for an ordinary event)
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
#   snapshot  the snapshot interval: a version that is a multiple of it keeps its state in snapshots
# returns {"ok", version, remaining, reset ms} | {"replay", idem value, snapshot version, its state or
#         false, records after it up to the replayed seq} | {"conflict", version, state JSON}
#         | {"missing"} | {"denied"} | {"finished", at} | {"full", version} | {"limited", retry ms}
# (a conflict answers the state at the current version, so that the caller can plan again without
# another round trip; a replay answers what rebuilds the first answer without a fold of the log: the
# state at the snapshot before it and the few records from there.  An idempotency record whose log
# entry is not there, or is another record (a fail-over lost the write), is not replayed: the
# request is taken as new)
APPEND = TOUCH_FN + """
local a = cjson.decode(ARGV[1])
local function unhex(h) return (h:gsub('..', function(c) return string.char(tonumber(c, 16)) end)) end
-- a deleted table keeps a tombstone meta hash (with 'deleted') but no state
if redis.call('EXISTS', KEYS[3]) == 0 then return {'missing'} end
local meta = redis.call('HMGET', KEYS[1], 'token', 'finished')
if a.token and meta[1] ~= a.token then return {'denied'} end
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
      return {'replay', rec, from, snap, redis.call('LRANGE', KEYS[2], from, seq - 1)}
    end
  end
end
if meta[2] then return {'finished', meta[2]} end
local version = redis.call('LLEN', KEYS[2])
if version ~= a.version then return {'conflict', version, redis.call('GET', KEYS[3])} end
if a.state_sha then
  local stored = redis.call('GET', KEYS[3])
  if redis.sha1hex(stored) ~= a.state_sha then return {'conflict', version, stored} end
end
if a.max and version >= a.max then return {'full', version} end
local now, start, count, previous, weighted
if a.limit then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local period, name = a.limit.period, a.limit.name
  start = now - now % period
  local w = redis.call('HMGET', KEYS[8], name .. ':w', name .. ':c', name .. ':p')
  count, previous = tonumber(w[2]) or 0, tonumber(w[3]) or 0
  local was = tonumber(w[1])
  if was ~= start then
    if was == start - period then previous = count else previous = 0 end
    count = 0
  end
  local elapsed = now - start
  weighted = previous * (period - elapsed) / period + count
  if weighted + 1 > a.limit.amount then
    local wait
    if count + 1 > a.limit.amount then  -- this window is full: into the next one, then its share
      wait = period - elapsed + math.ceil(period * math.max(0, 1 - (a.limit.amount - 1) / count))
    else  -- the previous window's share must fall enough
      wait = math.ceil(period * (1 - (a.limit.amount - 1 - count) / previous)) - elapsed
    end
    return {'limited', math.max(1, wait)}
  end
end
redis.call('RPUSH', KEYS[2], a.record)
redis.call('SET', KEYS[3], a.state)
if a.rounds then
  if a.rounds.push then
    redis.call('RPUSH', KEYS[4], a.rounds.push)
  else
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
local remaining, reset = -1, 0
if a.limit then
  local name, period = a.limit.name, a.limit.period
  redis.call('HSET', KEYS[8], name .. ':w', start, name .. ':c', count + 1, name .. ':p', previous)
  remaining = math.max(0, math.floor(a.limit.amount - weighted - 1))
  reset = period - (now - start)
end
if a.ttl and a.ttl > 0 then
  for i = 1, 5 do redis.call('EXPIRE', KEYS[i], a.ttl) end
  for i = 7, 8 do
    if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('EXPIRE', KEYS[i], a.ttl) end
  end
end
if a.message then redis.call(a.publish, KEYS[6], a.message) end
return {'ok', version + 1, remaining, reset}
"""

# FINISH: mark a table finished (read-only from then on), if its log is still at the version checked;
# its streams are told (the message: {"finished_at": at}).
# KEYS: meta, state, log, the table's channel
# ARGV[1] the version the table was checked at (no round in progress), ARGV[2] the time (ISO 8601),
# ARGV[3] the message, ARGV[4] PUBLISH or SPUBLISH
# returns {"ok", at} | {"finished", at} (it already was: when) | {"conflict"} | {"missing"}
FINISH = """
if redis.call('EXISTS', KEYS[2]) == 0 then return {'missing'} end
local done = redis.call('HGET', KEYS[1], 'finished')
if done then return {'finished', done} end
if redis.call('LLEN', KEYS[3]) ~= tonumber(ARGV[1]) then return {'conflict'} end
redis.call('HSET', KEYS[1], 'finished', ARGV[2])
redis.call(ARGV[4], KEYS[4], ARGV[3])
return {'ok', ARGV[2]}
"""

# DELETE: every key of a table, leaving a tombstone: the meta hash keeps only the
# token hashes and "deleted" for ARGV[1] seconds, so that a request for a deleted
# table is still authenticated (401 for a wrong token, 404 for a right one).
# KEYS: meta, log, state, rounds, idem, created, snapshots, limits (as every())
# ARGV[1] tombstone TTL in seconds
# KEYS[9] the table's channel, ARGV[2] PUBLISH or SPUBLISH (the message is "deleted")
# returns 1 when the table existed, else 0
DELETE = """
if redis.call('EXISTS', KEYS[3]) == 0 then return 0 end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
redis.call('HDEL', KEYS[1], 'players', 'ruleset', 'dealer', 'created', 'stakes')
redis.call('HSET', KEYS[1], 'deleted', '1')
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[1]))
redis.call(ARGV[2], KEYS[9], 'deleted')
return 1
"""

# READ: several reads at once, atomically: what MULTI/EXEC would do, except that a Redis
# at its memory bound refuses every command queued in a MULTI, and a script's reads it runs
# (so tables can still be read, and deleted, when Redis is full).
# KEYS: the keys read
# ARGV: for each read: the command, the index of its key in KEYS, the number of its other
#       arguments, then those arguments
# returns the replies, in order
READ = """
local allowed = {GET = 1, HGET = 1, HMGET = 1, HGETALL = 1, LLEN = 1, LRANGE = 1, LINDEX = 1}
local out, i = {}, 1
while i <= #ARGV do
  local name, key, n = ARGV[i], KEYS[tonumber(ARGV[i + 1])], tonumber(ARGV[i + 2])
  if not allowed[name] then return redis.error_reply('READ does not run ' .. name) end
  out[#out + 1] = redis.call(name, key, unpack(ARGV, i + 3, i + 2 + n))
  i = i + 3 + n
end
return out
"""

# REPAIR: replace a table's state and rounds with a fresh fold, if the log has not moved.
# KEYS[1] log, KEYS[2] state, KEYS[3] rounds
# ARGV[1] the log length folded, ARGV[2] state JSON, ARGV[3] JSON array of round summaries
# returns 1 when written, 0 when the log moved meanwhile
REPAIR = """
if redis.call('LLEN', KEYS[1]) ~= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('DEL', KEYS[3])
local items = cjson.decode(ARGV[3])
for i = 1, #items do redis.call('RPUSH', KEYS[3], items[i]) end
return 1
"""
