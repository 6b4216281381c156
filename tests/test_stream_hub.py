"""The stream's Redis side in-process, on a real Redis: what the store publishes and reads back,
and the hub that multiplexes one pub/sub connection (plain and sharded pub/sub)."""

from __future__ import annotations

import json
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from service.api.stream import Frame, parse_message
from service.store import codec, keys
from service.store.streams import CHECK, DELETED, StreamHub, make_hub
from service.store.table_store import TableStore
from tests.served import expire_table

KONG = {"type": "kong", "seat": 0, "kind": "concealed", "tile": "5m"}


def take_until(sub, count: int, timeout: float = 10.0) -> list:
    """Items from a subscription until ``count`` frames (or DELETED) arrived (CHECKs dropped)."""
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += [x for x in sub.take(0.2) if x is not CHECK]
    return got


def streamed(store: TableStore, table_id: str, after: int):
    """What a stream opened at ``after`` sends from the log: ``(records, version)``, or None."""
    got = store.stream_records(table_id, after)
    return None if got is None else ([item for chunk in got for item in chunk], got.version)


def wait_for(read, ok, timeout: float = 10.0):
    """``read()`` once ``ok`` of it holds (polled), within ``timeout`` seconds (else AssertionError)."""
    deadline = time.monotonic() + timeout
    while not ok(value := read()):
        assert time.monotonic() < deadline, f"still {value!r} after {timeout} s"
        time.sleep(0.01)
    return value


def new_table(store: TableStore) -> tuple[str, list[dict]]:
    created = store.create(["a", "b", "c", "d"], "xuezhan")
    table_id = created.id
    replies = [store.append(table_id, {"type": "round_start"}).as_dict()]
    for seat, tile in [(0, "5m"), (1, "6m"), (2, "7p"), (0, "8s")]:
        replies.append(
            store.append(table_id, {"type": "kong", "seat": seat, "kind": "concealed", "tile": tile}).as_dict()
        )
    return table_id, replies


def test_the_append_script_publishes_the_record_with_version_and_balances(redis_client):
    store = TableStore(redis_client)
    pubsub = redis_client.pubsub()
    table_id = store.create(["a", "b", "c", "d"], "xuezhan").id
    pubsub.subscribe(keys.channel(table_id))
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"
    reply = store.append(table_id, {"type": "round_start"}).as_dict()
    message = pubsub.get_message(timeout=5)
    data = json.loads(message["data"])
    listed = store.events(table_id)["events"][0]
    assert data == {**listed, "version": reply["version"], "balances": reply["balances"]}
    store.delete(table_id)
    assert pubsub.get_message(timeout=5)["data"] == b"deleted"
    pubsub.close()


def test_records_read_back_carry_the_balances_after_each_record_voids_included(redis_client):
    store = TableStore(redis_client)
    table_id, replies = new_table(store)
    replies.append(store.void(table_id, 3).as_dict())  # voids the kong at seq 3: balances refold
    replies.append(store.append(table_id, KONG | {"tile": "9m", "seat": 3}).as_dict())
    items, version = streamed(store, table_id, 0)
    assert version == len(replies) == len(items)
    listed = store.events(table_id)["events"]
    for item, reply, row in zip(items, replies, listed):
        assert item == {**row, "version": reply["version"], "balances": reply["balances"]}
    assert items[2]["voided"] is True  # as /events lists it now
    # from the middle: the same records, the same balances
    assert streamed(store, table_id, 4) == (items[4:], version)
    assert streamed(store, table_id, version) == ([], version)
    assert store.stream_position(table_id) == version
    store.delete(table_id)
    assert streamed(store, table_id, 0) is None and store.stream_position(table_id) is None


def test_one_connection_serves_every_subscriber_in_order(redis_client):
    store = TableStore(redis_client)
    hub = make_hub(redis_client, parse_message, sharded=False, buffer=64)
    one, other = store.create(["a", "b", "c", "d"], "xuezhan").id, \
        store.create(["a", "b", "c", "d"], "xuezhan").id
    subs = [hub.subscribe(one), hub.subscribe(one), hub.subscribe(other)]
    assert hub.subscribers == 3
    assert int(redis_client.pubsub_numsub(keys.channel(one))[0][1]) == 1  # one Redis subscriber for two
    assert len([c for c in redis_client.client_list() if int(c.get("sub", 0)) > 0]) == 1  # one connection
    for body in [{"type": "round_start"}, KONG]:
        store.append(one, body)
    store.append(other, {"type": "round_start"})
    for sub in subs[:2]:
        got = take_until(sub, 2)
        assert [f.seq for f in got] == [1, 2] and all(isinstance(f, Frame) for f in got)
        assert got[1].data.startswith(b"id: 2\nevent: record\ndata: {")
    assert [f.seq for f in take_until(subs[2], 1)] == [1]
    store.delete(one)
    assert take_until(subs[0], 1) == [DELETED]
    for sub in subs:
        hub.unsubscribe(sub)
    deadline = time.monotonic() + 5
    while redis_client.pubsub_numsub(keys.channel(one))[0][1] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert redis_client.pubsub_numsub(keys.channel(one))[0][1] == 0  # nothing left in Redis
    hub.close()


def test_a_table_that_expired_ends_its_streams_as_a_deletion_does(redis_client):
    store = TableStore(redis_client)
    asked: list[str] = []

    def gone(table_id: str) -> bool:
        asked.append(table_id)
        if len(asked) == 1:  # Redis away for the first sweep: the watcher tries again
            raise redis.ConnectionError("away")
        return store.stream_position(table_id) is None

    hub = make_hub(redis_client, parse_message, sharded=False, buffer=8, gone=gone, check_every=0.2)
    try:
        expiring, kept = new_table(store)[0], new_table(store)[0]
        subs = [hub.subscribe(expiring), hub.subscribe(expiring), hub.subscribe(kept)]
        assert hub.watching
        expire_table(redis_client, expiring)
        assert take_until(subs[0], 1) == [DELETED] and take_until(subs[1], 1) == [DELETED]
        assert take_until(subs[2], 1, timeout=1.0) == []  # the other table lives on
        assert store.stream_position(kept) == 5 and store.stream_position(expiring) is None
        # one check per followed table and sweep, not one per subscriber (two subscribers, one table)
        checks = asked[1:]
        assert abs(checks.count(expiring) - checks.count(kept)) <= 1 and checks.count(kept) >= 3, asked
        for sub in subs:
            hub.unsubscribe(sub)
        after = wait_for(lambda: hub.sweeps, lambda n: n >= 1) + 1  # (a sweep begun before: let it end)
        wait_for(lambda: hub.sweeps, lambda n: n >= after)
        asked.clear()
        wait_for(lambda: hub.sweeps, lambda n: n >= after + 3)  # three more sweeps...
        assert asked == []  # ...with nothing followed: nothing read
    finally:
        hub.close()
    wait_for(lambda: hub.watching, lambda watching: not watching, timeout=1.0)  # close() stops the watcher


def test_a_failing_check_skips_one_table_and_a_stream_opened_after_the_check_stays_open(redis_client):
    store = TableStore(redis_client)
    broken, expiring = new_table(store)[0], new_table(store)[0]
    late: list = []  # a stream opened between the read that found the table gone and the end of that sweep
    left: list = []  # what that sweep left in its mailbox, as the next sweep finds it

    def gone(table_id: str) -> bool:
        if table_id == broken:
            raise redis.ResponseError("this one table's read fails")
        if store.stream_position(table_id) is not None:
            return False
        if not late:
            late.append(hub.subscribe(expiring))
        elif not left:
            left.append(list(late[0].items))
        return True

    hub = make_hub(redis_client, parse_message, sharded=False, buffer=8, gone=gone, check_every=0.2)
    try:
        first = [hub.subscribe(broken), hub.subscribe(expiring)]  # (the broken table is checked first)
        expire_table(redis_client, expiring)
        assert take_until(first[1], 1) == [DELETED]  # checked although the table before it failed
        assert take_until(late[0], 1) == [DELETED]  # ended by the next sweep...
        assert left == [[]]  # ...not by the one that read the table before it opened
        assert take_until(first[0], 1, timeout=0.5) == []
    finally:
        hub.close()


def test_a_full_mailbox_marks_its_subscriber_behind_and_no_one_else(redis_client):
    store = TableStore(redis_client)
    hub = make_hub(redis_client, parse_message, sharded=False, buffer=3)
    table_id = store.create(["a", "b", "c", "d"], "xuezhan").id
    slow, fast = hub.subscribe(table_id), hub.subscribe(table_id)
    bodies = [{"type": "round_start"}] + [KONG | {"tile": t} for t in ("1m", "2m", "3m", "4m")]
    got = []
    for body in bodies:
        store.append(table_id, body)
        got += take_until(fast, 1)  # the fast one keeps reading
    assert [f.seq for f in got] == [1, 2, 3, 4, 5] and not fast.behind
    assert slow.behind  # never read: more than 3 waited for it
    hub.close()


def test_sharded_pub_sub_publishes_and_subscribes_on_the_tables_slot(redis_client):
    version = tuple(int(x) for x in redis_client.info("server")["redis_version"].split(".")[:2])
    if version < (7, 0):
        pytest.skip(f"SPUBLISH needs Redis 7 (this is {version}); the store lane tests it on a cluster")
    store = TableStore(redis_client, sharded_pubsub=True)
    hub = make_hub(redis_client, parse_message, sharded=True, buffer=8)
    table_id = store.create(["a", "b", "c", "d"], "xuezhan").id
    sub = hub.subscribe(table_id)
    assert redis_client.execute_command("PUBSUB", "SHARDNUMSUB", keys.channel(table_id))[1] == 1
    assert redis_client.pubsub_numsub(keys.channel(table_id))[0][1] == 0  # not a plain channel
    store.append(table_id, {"type": "round_start"})
    store.delete(table_id)
    got = take_until(sub, 2)
    assert isinstance(got[0], Frame) and got[0].seq == 1 and got[1] is DELETED
    hub.close()


def test_parse_message():
    frame = parse_message(b'{"seq":3,"type":"round_end","version":3,"balances":[0,0,0,0]}')
    assert frame.seq == 3 and frame.data.endswith(b'"balances":[0,0,0,0]}\n\n')


def test_a_hub_whose_redis_is_gone_does_not_confirm_subscriptions(free_port):
    # (no retries, as the service's own clients: redis-py's default retries reconnect after a jittered
    # backoff drawn from the global ``random``, which the listener thread would go on doing after close(),
    # into a later test; Hypothesis warns when the global ``random`` changes under its strategies)
    no_retry = Retry(NoBackoff(), 0)
    hub = StreamHub(lambda: redis.Redis(port=free_port, socket_connect_timeout=0.2, retry=no_retry).pubsub(),
                    parse_message, buffer=4)
    with pytest.raises(TimeoutError):
        hub.subscribe("0123456789abcdef", timeout=0.5)
    assert hub.subscribers == 0
    hub.close()


def test_records_read_back_from_a_table_with_stakes_carry_its_coins(redis_client):
    store = TableStore(redis_client)
    table_id = store.create(["a", "b", "c", "d"], "xuezhan",
                            stakes={"coin_per_point": 200, "fee": 400, "bankrolls": [10000] * 4}).id
    replies = [store.append(table_id, e).as_dict() for e in (
        {"type": "round_start"}, KONG, {"type": "round_end"},
        {"type": "buy_in", "seat": 1, "coins": 500}, {"type": "round_start"})]
    items, version = streamed(store, table_id, 0)
    assert version == len(items) == 5
    for item, reply in zip(items, replies):
        assert item["coins"] == reply["coins"] and item["balances"] == reply["balances"]
    # round 1 ended: 36 points = 7,200 coins to seat 0, 2,400 from each other seat, then 400 fees
    assert items[2]["coins"] == [10000 + 7200 - 400, 10000 - 2400 - 400, 7200, 7200]
    assert items[3]["coins"][1] == 7200 + 500
    assert items[3]["amount"] == 500 and "amount" not in items[2]  # a buy-in's own coins (the record's)
    assert streamed(store, table_id, 3) == (items[3:], version)


def _bytes(reply: bytes | str | None) -> bytes:
    assert isinstance(reply, bytes), reply  # (the store's client answers bytes; redis-py types either, or None)
    return reply


def _replayed_from_scratch(store: TableStore, table_id: str, after: int) -> list[dict]:
    """``stream_records`` as it was first written: every void refolds the log from its start."""
    from service.rules.table import fold

    records = codec.read_records([_bytes(raw) for raw in store.r.lrange(keys.log(table_id), 0, -1)], 1)
    meta = [_bytes(v) for v in store.r.hmget(keys.meta(table_id), "players", "ruleset", "dealer")]
    voided = set(codec.read_state(_bytes(store.r.get(keys.state(table_id))))["voided"])
    players, ruleset, dealer = json.loads(meta[0]), json.loads(meta[1]), int(meta[2])
    st, _ = fold(players, ruleset, dealer, records[:after])
    out = []
    for i in range(after, len(records)):
        rec = records[i]
        if rec.get("type") == "void":
            st, _ = fold(players, ruleset, dealer, records[:i + 1])
        else:
            st.step({k: v for k, v in rec.items() if k not in ("seq", "at", "round")}, rec["seq"])
        out.append(store.streamed(rec, st, rec["seq"] in voided))
    return out


def test_a_replay_refolds_each_void_from_a_snapshot_with_the_same_records(redis_client, monkeypatch):
    # A void's frame is folded from the table's last snapshot before its target, not from the
    # log's start; what is sent must not change, voids of old records included.
    monkeypatch.setattr(keys, "SNAPSHOT_EVERY", 4)
    store = TableStore(redis_client)
    table_id = store.create(["a", "b", "c", "d"], "xuezhan").id
    kongs = []  # the seqs of the kongs not voided
    for round_number in range(4):
        store.append(table_id, {"type": "round_start"})
        for seat, tile in [(0, "5m"), (1, "6m"), (2, "7p"), (3, "8s"), (0, "9p")]:
            kongs.append(store.append(table_id, {"type": "kong", "seat": seat, "kind": "concealed",
                                                 "tile": tile}).as_dict()["seq"])
        store.void(table_id, kongs.pop())  # the latest record
        store.void(table_id, kongs.pop(-2))  # one a little older
        if round_number >= 2:
            store.void(table_id, kongs.pop(0))  # one of the first round, voided rounds later
        store.append(table_id, {"type": "round_end"})
    version = store.stream_position(table_id)
    assert version == 38
    for after in range(version + 1):
        got = streamed(store, table_id, after)
        assert got is not None and got[1] == version
        assert got[0] == _replayed_from_scratch(store, table_id, after), after
    # and with fewer steps: each void refolds a few records, not the log up to it
    from service.rules.table import TableState

    steps = {"count": 0}
    step = TableState.step

    def counted(self, *args, **kwargs):
        steps["count"] += 1
        return step(self, *args, **kwargs)

    monkeypatch.setattr(TableState, "step", counted)
    counts = []
    for replay in (lambda: streamed(store, table_id, 0), lambda: _replayed_from_scratch(store, table_id, 0)):
        steps["count"] = 0
        replay()
        counts.append(steps["count"])
    assert counts[0] < counts[1], counts  # 76 and 152 here; 7,214 and 188,750 for 2,000 records, 750 voids
