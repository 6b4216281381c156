"""Every Redis key and Lua script of the table store, in one place.

All of a table's keys share the hash tag ``{t:<id>}``, so a table lives in one
Redis Cluster slot and every script touches one slot.

=============================  ======  ==================================================
key                            type    holds
=============================  ======  ==================================================
``{t:<id>}:meta``              hash    players, ruleset, first dealer, stakes (if any), token hashes, created
                                       (after DELETE: only the token hashes and ``deleted``, 24 h)
``{t:<id>}:log``               list    the log: one record per seq, seq n at index n - 1 (append-only;
                                       :mod:`~service.store.codec`: ``[at ms, round, event]``, or
                                       a JSON object in the earlier form)
``{t:<id>}:state``             string  JSON :class:`~service.rules.table.TableState` at version = LLEN log
                                       (:func:`~service.store.codec.state`)
``{t:<id>}:rounds``            list    summaries of the table's ended rounds (round n at index n - 1;
                                       positional arrays, :func:`~service.store.codec.summary`)
``{t:<id>}:idem``              hash    the table's Idempotency-Key records: field = the key's
                                       :func:`idem_field` (16 bytes), value = :func:`fp_digest` of
                                       the request (8 bytes) then the seq it wrote (decimal)
``{t:<id>}:created``           string  a keyed creation's record: :func:`fp_digest` of the request,
                                       then its tokens sealed with AES-GCM under a key derived
                                       from the Idempotency-Key (24 h at most)
``{o:<name>}:tables``          zset    ids of the tables an API key created, scored by creation
                                       time in ms (``GET /v1/tables``; pruned lazily)
``{t:<id>}:events``            channel pub/sub: every appended record as the stream sends it, and
                                       ``deleted`` (PUBLISH, or SPUBLISH on a cluster: same slot)
``rl:...``                     -       rate-limit counters (Flask-Limiter's storage)
=============================  ======  ==================================================

The version of a table is the length of its log; the state stored beside the
log is always the fold of the log up to that version (``python -m service
check-tables`` re-folds and verifies).

Idempotency records belong to their table: they live as long as it does
(every write renews the TTL of all its keys alike, the ``idem`` hash
included), go with a DELETE, and a CREATE wipes whatever an expired table of
the same id left.  An event's record is 24 bytes and a few of overhead, not
its response: a replay rebuilds the first response from the log (the seq it
names, folded from the records before it), which is what it was computed from.

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
on the same connection (:func:`service.store.client.acknowledged`); a script
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
    return [meta(table_id), log(table_id), state(table_id), rounds(table_id), idem(table_id), created(table_id)]


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
# KEYS: meta, log, state, rounds, idem, created (as every())
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
redis.call('DEL', KEYS[2], KEYS[4], KEYS[5], KEYS[6])
if ARGV[3] ~= '' then redis.call('SET', KEYS[6], ARGV[3], 'EX', tonumber(ARGV[4])) end
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[3], ttl)
end
return {1}
"""

# APPEND: one record, atomically: incarnation check, idempotency replay check, version check,
# append, state update, rounds update, idempotency record, TTL refresh.
# KEYS: meta, log, state, rounds, idem
# ARGV[1] expected version (the log length the record was validated against)
# ARGV[2] record JSON
# ARGV[3] new state JSON
# ARGV[4] rounds mode: "none" | "push" (ARGV[5] is one summary)
#         | "splice" (ARGV[5] is {"keep": n, "items": [summary JSON, ...]}: keep the first n, then the items)
# ARGV[5] rounds payload
# ARGV[6] idem field, or "" when the request has no key
# ARGV[7] fp_digest of the request (with a key)
# ARGV[8] table TTL in seconds (0: none)
# ARGV[9] maximum log length (0: none)
# KEYS[6] the table's channel, ARGV[10] the message to publish on it once appended ("" none),
# ARGV[11] PUBLISH or SPUBLISH
# ARGV[12] durable: "1" to touch the table before a replay (REDIS_MIN_REPLICAS), else ""
# ARGV[13] the SHA-256 (hex) of the table's write token as the caller knows it, or "": the record was
#          validated against a state of that table, not of another table of the same id (one created
#          after it was deleted or expired): "denied" when the meta hash names another token
# ARGV[14] the SHA-1 (hex) of the stored state the record was validated against, or "": a conflict
#          unless the state stored now is that very state (a stronger check than the version: a
#          state a worker kept after a write that a fail-over lost may have the version of another
#          write made since)
# returns {"ok", version} | {"replay", idem value} | {"conflict", version, state JSON} | {"missing"}
#         | {"denied"} | {"full", version}
# (a conflict answers the state at the current version, so that the caller can validate again
# without another round trip)
APPEND = TOUCH_FN + """
-- a deleted table keeps a tombstone meta hash (with 'deleted') but no state
if redis.call('EXISTS', KEYS[3]) == 0 then return {'missing'} end
if ARGV[13] ~= '' and redis.call('HGET', KEYS[1], 'token') ~= ARGV[13] then return {'denied'} end
if ARGV[6] ~= '' then
  local rec = redis.call('HGET', KEYS[5], ARGV[6])
  if rec then
    if ARGV[12] == '1' then touch(KEYS[3]) end
    return {'replay', rec}
  end
end
local version = redis.call('LLEN', KEYS[2])
if version ~= tonumber(ARGV[1]) then return {'conflict', tostring(version), redis.call('GET', KEYS[3])} end
if ARGV[14] ~= '' then
  local stored = redis.call('GET', KEYS[3])
  if redis.sha1hex(stored) ~= ARGV[14] then return {'conflict', tostring(version), stored} end
end
local max = tonumber(ARGV[9])
if max > 0 and version >= max then return {'full', tostring(version)} end
redis.call('RPUSH', KEYS[2], ARGV[2])
redis.call('SET', KEYS[3], ARGV[3])
if ARGV[4] == 'push' then
  redis.call('RPUSH', KEYS[4], ARGV[5])
elseif ARGV[4] == 'splice' then
  local splice = cjson.decode(ARGV[5])
  if splice.keep == 0 then redis.call('DEL', KEYS[4]) else redis.call('LTRIM', KEYS[4], 0, splice.keep - 1) end
  for i = 1, #splice.items do redis.call('RPUSH', KEYS[4], splice.items[i]) end
end
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[5], ARGV[6], ARGV[7] .. tostring(version + 1))
end
local ttl = tonumber(ARGV[8])
if ttl > 0 then
  for i = 1, 5 do redis.call('EXPIRE', KEYS[i], ttl) end
end
if ARGV[10] ~= '' then redis.call(ARGV[11], KEYS[6], ARGV[10]) end
return {'ok', tostring(version + 1)}
"""

# DELETE: every key of a table, leaving a tombstone: the meta hash keeps only the
# token hashes and "deleted" for ARGV[1] seconds, so that a request for a deleted
# table is still authenticated (401 for a wrong token, 404 for a right one).
# KEYS: meta, log, state, rounds, idem, created (as every())
# ARGV[1] tombstone TTL in seconds
# KEYS[7] the table's channel, ARGV[2] PUBLISH or SPUBLISH (the message is "deleted")
# returns 1 when the table existed, else 0
DELETE = """
if redis.call('EXISTS', KEYS[3]) == 0 then return 0 end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
redis.call('HDEL', KEYS[1], 'players', 'ruleset', 'dealer', 'created', 'stakes')
redis.call('HSET', KEYS[1], 'deleted', '1')
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[1]))
redis.call(ARGV[2], KEYS[7], 'deleted')
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
