"""Idempotency records in the table store, on a real Redis.

* records never outlive their table and never attach to a new one;
* they are small (the memory of 500 keyed events against 500 unkeyed ones,
  measured with ``MEMORY USAGE``), and a replay still answers exactly the first
  response, rebuilt from the log;
* a creation's kept tokens are sealed with AES-GCM under a key derived from the
  Idempotency-Key; nothing HTTP (status, Location, ETag) is stored.
"""

from __future__ import annotations

import time
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.rules.errors import EventError
from service.store import keys
from service.store.errors import Conflict, EventNotFound, IdempotencyMismatch, StoreError
from service.store.sealing import created_id, unseal
from service.store.table_store import TableStore, fingerprint
from tests.loopback import cycle

PLAYERS = ["东", "南", "西", "北"]
KONG = {"type": "kong", "seat": 1, "kind": "concealed", "tile": "5m"}


def table_keys(redis_client, table_id: str) -> list[bytes]:
    return sorted(redis_client.keys("{t:" + table_id + "}*"))


# -- item 10: records live and die with their table ------------------------------------------------
def test_idempotency_records_expire_with_their_table(redis_client):
    store = TableStore(redis_client, table_ttl=3600)
    key = str(uuid.uuid4())
    t = store.create(PLAYERS, None, idempotency_key=key, fp="create")
    store.append(t.id, {"type": "round_start"}, idempotency_key="start", fp="a")
    redis_client.expire(keys.meta(t.id), 100)  # time passes: the table's keys are down to 100 s...
    store.append(t.id, KONG, idempotency_key="kong", fp="b")  # ...and a write renews them all alike
    ttls = {k: redis_client.ttl(k) for k in table_keys(redis_client, t.id)}
    assert keys.idem(t.id).encode() in ttls and keys.created(t.id).encode() in ttls
    assert all(3590 <= ttl <= 3600 for ttl in ttls.values()), ttls


def test_a_creation_record_never_outlives_a_short_lived_table(redis_client):
    store = TableStore(redis_client, table_ttl=600)  # shorter than the 24 h a creation's answer is kept
    t = store.create(PLAYERS, None, idempotency_key=str(uuid.uuid4()), fp="create")
    assert 590 <= redis_client.ttl(keys.created(t.id)) <= 600


def test_a_table_recreated_after_expiry_inherits_no_idempotency_record(redis_client):
    """with TABLE_TTL below 24 h, an expired table re-created with the same creation
    key must not answer its old event keys as replays (that would acknowledge writes not in its log)."""
    store = TableStore(redis_client, table_ttl=1)
    key = str(uuid.uuid4())
    old = store.create(PLAYERS, None, idempotency_key=key, fp="create")
    store.append(old.id, {"type": "round_start"}, idempotency_key="start", fp="start")
    first_kong = store.append(old.id, KONG, idempotency_key="kong-1", fp="kong")
    deadline = time.monotonic() + 10
    while table_keys(redis_client, old.id):  # every key of the table expires (together)
        assert time.monotonic() < deadline, table_keys(redis_client, old.id)
        time.sleep(0.1)

    new = store.create(PLAYERS, None, idempotency_key=key, fp="create")
    assert new.id == old.id and not new.replayed and new.token != old.token
    assert not store.append(new.id, {"type": "round_start"}, idempotency_key="start", fp="start").replayed
    again = store.append(new.id, KONG, idempotency_key="kong-1", fp="kong")
    assert not again.replayed and again.seq == first_kong.seq == 2
    assert redis_client.llen(keys.log(new.id)) == 2


def test_leftovers_of_an_expired_table_never_attach_to_a_new_one(redis_client):
    """Whatever an expired table left behind (say, a record written by an older version with its own
    TTL) is wiped when a table of the same id is created."""
    store = TableStore(redis_client, table_ttl=3600)
    key = str(uuid.uuid4())
    old = store.create(PLAYERS, None, idempotency_key=key, fp="create")
    store.append(old.id, {"type": "round_start"}, idempotency_key="start", fp="start")
    redis_client.delete(keys.meta(old.id), keys.state(old.id))  # the table expired; its log, rounds, records did not
    new = store.create(PLAYERS, None, idempotency_key=key, fp="create")
    assert not new.replayed
    assert table_keys(redis_client, new.id) == sorted(k.encode() for k in (keys.meta(new.id), keys.state(new.id),
                                                                       keys.created(new.id)))
    assert not store.append(new.id, {"type": "round_start"}, idempotency_key="start", fp="start").replayed


def test_a_delete_takes_the_records_with_it(redis_client):
    store = TableStore(redis_client)
    t = store.create(PLAYERS, None, idempotency_key=str(uuid.uuid4()), fp="create")
    store.append(t.id, {"type": "round_start"}, idempotency_key="start", fp="start")
    assert store.delete(t.id)
    assert table_keys(redis_client, t.id) == [keys.meta(t.id).encode()]  # the tombstone alone


# -- item 12: compact records, exact replays --------------------------------------------------------
def _table_memory(redis_client, table_id: str) -> int:
    return sum(redis_client.memory_usage(k, samples=0) for k in redis_client.keys("{t:" + table_id + "}*"))


def test_500_keyed_events_take_at_most_twice_the_memory_of_500_unkeyed_ones(redis_client):
    store = TableStore(redis_client)
    usage = {}
    for keyed in (False, True):
        t = store.create(PLAYERS, None).id
        events = cycle()
        for _ in range(500):
            store.append(t, next(events), idempotency_key=str(uuid.uuid4()) if keyed else None, fp="x")
        usage[keyed] = _table_memory(redis_client, t)
    assert usage[True] <= 2 * usage[False], usage
    # each record: a few dozen bytes (the request's digest, 4 bytes of the record's SHA-1, the seq)
    assert usage[True] - usage[False] <= 48 * 500, usage


ACTIONS = st.lists(st.tuples(st.sampled_from("skkkhhepv"), st.integers(0, 3), st.integers(0, 40),
                             st.booleans()), min_size=5, max_size=40)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=ACTIONS, preset=st.sampled_from(["xuezhan", "normal"]))
def test_every_replay_answers_exactly_the_first_response(redis_client, actions, preset):
    """Random rounds with kongs, wins, pengs, round ends and voids (some refused), each keyed:
    every retry afterwards — the table long moved on, later voids included — returns exactly
    the first answer, and the state stays the fold of the log."""
    store = TableStore(redis_client)
    t = store.create(PLAYERS, preset).id
    answers = {}
    for n, (kind, seat, x, keyed) in enumerate(actions):
        key = f"k{n}" if keyed else None
        other = (seat + 1 + x % 3) % 4
        event = {
            "s": {"type": "round_start"},
            "k": {"type": "kong", "seat": seat, "kind": "concealed", "tile": f"{x % 9 + 1}{'mps'[x % 3]}"},
            "h": {"type": "hu", "from": other, "tile": "5p", "winners": [{"seat": seat, "fan": x % 4}]},
            "e": {"type": "round_end"},
            "p": {"type": "peng", "seat": seat, "tile": f"{x % 9 + 1}p", "from": other},
        }.get(kind)
        try:
            if event is None:
                target = x % (store.get(t)["version"] + 1) + 1
                written = store.void(t, target, idempotency_key=key, fp=f"void {target}")
            else:
                written = store.append(t, event, idempotency_key=key, fp=fingerprint("POST", "/", event))
        except (EventError, Conflict, EventNotFound):
            continue
        if key:
            answers[key] = (written, event)
    for key, (first, event) in answers.items():
        fp = f"void {first.voided}" if event is None else fingerprint("POST", "/", event)
        again = (store.void(t, first.voided, idempotency_key=key, fp=fp) if event is None
                 else store.append(t, event, idempotency_key=key, fp=fp))
        assert again.replayed and again.as_dict() == first.as_dict()
    assert store.check(t)["ok"]
    redis_client.close()


def test_a_replay_with_another_body_is_refused(redis_client):
    store = TableStore(redis_client)
    t = store.create(PLAYERS, None).id
    store.append(t, {"type": "round_start"}, idempotency_key="k", fp="one")
    with pytest.raises(IdempotencyMismatch):
        store.append(t, {"type": "round_end"}, idempotency_key="k", fp="two")


# -- item 11: the creation's tokens, sealed ----------------------------------------------------------
def test_a_creation_keeps_its_tokens_sealed_with_aes_gcm_under_the_key(redis_client):
    store = TableStore(redis_client)
    key = str(uuid.uuid4())
    t = store.create(PLAYERS, "normal", 2, idempotency_key=key, fp="create")
    assert t.id == created_id(key)
    record = redis_client.get(keys.created(t.id))
    assert t.token.encode() not in record and key.encode() not in b"".join(
        redis_client.dump(k) for k in redis_client.keys("*"))
    assert record[:8] == keys.fp_digest("create")
    assert unseal(key, t.id, record[8:]) == [t.token, t.read_token]
    again = store.create(PLAYERS, "normal", 2, idempotency_key=key, fp="create")
    assert again.replayed and again.as_dict() == t.as_dict()
    assert store.is_creation_replay(key, "create") and not store.is_creation_replay(key, "another body")
    # a forged or corrupted record gives nothing away
    redis_client.set(keys.created(t.id), record[:-1] + bytes([record[-1] ^ 1]), keepttl=True)
    with pytest.raises(StoreError):
        store.create(PLAYERS, "normal", 2, idempotency_key=key, fp="create")


# -- the store keeps no HTTP ---------------------------------------------------------
def test_the_store_keeps_domain_results_not_http(redis_client):
    store = TableStore(redis_client)
    t = store.create(PLAYERS, None, idempotency_key=str(uuid.uuid4()), fp="create")
    store.append(t.id, {"type": "round_start"}, idempotency_key="a", fp="a")
    written = store.append(t.id, KONG, idempotency_key="b", fp="b")
    store.void(t.id, 2, idempotency_key="c", fp="c")
    assert not hasattr(written, "status") and not hasattr(written, "headers")
    stored = b"".join(redis_client.dump(k) for k in redis_client.keys("*"))
    for http in (b"/v1/", b"Location", b"ETag"):
        assert http not in stored


def test_a_keyed_retry_whose_write_a_fail_over_lost_is_taken_as_new_never_as_another_events(redis_client):
    """A write reached the old primary (its answer a 503: not replicated), the fail-over promoted a
    server whose log lacks it but whose idempotency hash has its record (replication is not atomic
    across keys in a crash), and another event took its seq there. The retry must record the event
    anew, never answer the other event's seq and transfers as its own."""
    path = "/v1/tables/t/events"
    store = TableStore(redis_client)
    t = store.create(PLAYERS, "xuezhan").id
    store.append(t, {"type": "round_start"})
    at_1 = redis_client.get(keys.state(t))
    store.append(t, KONG, idempotency_key="K", fp=fingerprint("POST", path, KONG))
    redis_client.rpop(keys.log(t))  # the fail-over: the record is lost, its idempotency record is not
    redis_client.set(keys.state(t), at_1)
    other = {"type": "kong", "seat": 2, "kind": "concealed", "tile": "9p"}
    assert TableStore(redis_client).append(t, other).seq == 2  # another event takes seq 2
    retry = store.append(t, KONG, idempotency_key="K", fp=fingerprint("POST", path, KONG))
    assert not retry.replayed and retry.seq == 3
    assert {(x["to"], x["reason"]) for x in retry.transfers} == {(1, "kong_concealed")}
    again = store.append(t, KONG, idempotency_key="K", fp=fingerprint("POST", path, KONG))
    assert again.replayed and again.seq == 3 and again.transfers == retry.transfers
    assert store.check(t)["ok"]


def test_a_replay_of_an_old_event_reads_a_snapshot_and_a_few_records_not_the_log(redis_client):
    """The retry of the first event of a long table is answered from the snapshot before it and the
    records from there: what Redis sends is about a snapshot's worth, however long the log."""
    store = TableStore(redis_client)
    t = store.create(PLAYERS, None).id
    events = cycle()
    path = "/v1/tables/t/events"
    keyed = {}
    for i in range(1, 2001):
        event = next(events)
        if i % 500 == 3:
            keyed[i] = event
            store.append(t, event, idempotency_key=f"k{i}", fp=fingerprint("POST", path, event))
        else:
            store.append(t, event)
    log_bytes = sum(map(len, redis_client.lrange(keys.log(t), 0, -1)))
    for seq, event in keyed.items():
        redis_client.config_resetstat()
        replay = store.append(t, event, idempotency_key=f"k{seq}", fp=fingerprint("POST", path, event))
        sent = redis_client.info("stats")["total_net_output_bytes"]
        assert replay.replayed and replay.seq == seq
        assert sent < log_bytes / 5, (seq, sent, log_bytes)
