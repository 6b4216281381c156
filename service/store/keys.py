"""Every Redis key and Lua script of the table store, in one place.

All of a table's keys share the hash tag ``{t:<id>}``, so a table lives in one
Redis Cluster slot and every script touches one slot.

=============================  ======  ==================================================
key                            type    holds
=============================  ======  ==================================================
``{t:<id>}:meta``              hash    players, ruleset, first dealer, token hashes, created
                                       (after DELETE: only the token hashes and ``deleted``, 24 h)
``{t:<id>}:log``               list    the log: one JSON record per seq (append-only)
``{t:<id>}:state``             string  JSON :class:`~service.rules.table.TableState` at version = LLEN log
``{t:<id>}:rounds``            list    JSON summaries of the table's ended rounds
``{t:<id>}:idem:<sha256>``     string  JSON first response to an Idempotency-Key (24 h)
``{t:<id>}:idems``             set     names of the idempotency keys (for delete)
``rl:...``                     -       rate-limit counters (Flask-Limiter's storage)
=============================  ======  ==================================================

The version of a table is the length of its log; the state stored beside the
log is always the fold of the log up to that version (``python -m service
check-tables`` re-folds and verifies).
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


def idem(table_id: str, key: str) -> str:
    return tag(table_id) + ":idem:" + hashlib.sha256(key.encode()).hexdigest()


def idems(table_id: str) -> str:
    return tag(table_id) + ":idems"


TABLE_PATTERN = "{t:*}:meta"


# CREATE: a new table, unless the id is taken (then the stored first response, if any).
# KEYS[1] meta, KEYS[2] state, KEYS[3] idem, KEYS[4] idems
# ARGV[1] state JSON, ARGV[2] table TTL in seconds (0: none),
# ARGV[3] idempotency record ("" when the request has no key), ARGV[4] idempotency TTL,
# ARGV[5..] meta field/value pairs
# returns {1} when created, {0, record or false} when the id exists
CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return {0, redis.call('GET', KEYS[3])} end
local fields = {}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('SET', KEYS[2], ARGV[1])
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[3], ARGV[3], 'EX', tonumber(ARGV[4]))
  redis.call('SADD', KEYS[4], KEYS[3])
end
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[2], ttl)
  if ARGV[3] ~= '' then redis.call('EXPIRE', KEYS[4], ttl) end
end
return {1}
"""

# APPEND: one record, atomically: idempotency replay check, version check,
# append, state update, rounds update, idempotency record, TTL refresh.
# KEYS[1] meta, KEYS[2] log, KEYS[3] state, KEYS[4] rounds, KEYS[5] idem (may be unused), KEYS[6] idems
# ARGV[1] expected version (the log length the record was validated against)
# ARGV[2] record JSON
# ARGV[3] new state JSON
# ARGV[4] rounds mode: "none" | "push" (ARGV[5] is one summary) | "replace" (ARGV[5] is a JSON array)
# ARGV[5] rounds payload
# ARGV[6] idempotency record JSON, or "" when the request has no key
# ARGV[7] idempotency TTL in seconds
# ARGV[8] table TTL in seconds (0: none)
# ARGV[9] maximum log length (0: none)
# returns {"ok", version} | {"replay", record} | {"conflict", version} | {"missing"} | {"full", version}
APPEND = """
-- a deleted table keeps a tombstone meta hash (with 'deleted') but no state
if redis.call('EXISTS', KEYS[3]) == 0 then return {'missing'} end
if ARGV[6] ~= '' then
  local rec = redis.call('GET', KEYS[5])
  if rec then return {'replay', rec} end
end
local version = redis.call('LLEN', KEYS[2])
if version ~= tonumber(ARGV[1]) then return {'conflict', tostring(version)} end
local max = tonumber(ARGV[9])
if max > 0 and version >= max then return {'full', tostring(version)} end
redis.call('RPUSH', KEYS[2], ARGV[2])
redis.call('SET', KEYS[3], ARGV[3])
if ARGV[4] == 'push' then
  redis.call('RPUSH', KEYS[4], ARGV[5])
elseif ARGV[4] == 'replace' then
  redis.call('DEL', KEYS[4])
  local items = cjson.decode(ARGV[5])
  for i = 1, #items do redis.call('RPUSH', KEYS[4], items[i]) end
end
if ARGV[6] ~= '' then
  redis.call('SET', KEYS[5], ARGV[6], 'EX', tonumber(ARGV[7]))
  redis.call('SADD', KEYS[6], KEYS[5])
end
local ttl = tonumber(ARGV[8])
if ttl > 0 then
  for i = 1, 4 do redis.call('EXPIRE', KEYS[i], ttl) end
  redis.call('EXPIRE', KEYS[6], ttl)
end
return {'ok', tostring(version + 1)}
"""

# DELETE: every key of a table, leaving a tombstone: the meta hash keeps only the
# token hashes and "deleted" for ARGV[1] seconds, so that a request for a deleted
# table is still authenticated (401 for a wrong token, 404 for a right one).
# KEYS[1] meta, KEYS[2] log, KEYS[3] state, KEYS[4] rounds, KEYS[5] idems
# ARGV[1] tombstone TTL in seconds
# returns 1 when the table existed, else 0
DELETE = """
if redis.call('EXISTS', KEYS[3]) == 0 then return 0 end
local names = redis.call('SMEMBERS', KEYS[5])
for i = 1, #names do redis.call('DEL', names[i]) end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
redis.call('HDEL', KEYS[1], 'players', 'ruleset', 'dealer', 'created')
redis.call('HSET', KEYS[1], 'deleted', '1')
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[1]))
return 1
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
