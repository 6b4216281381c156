"""The table store against a real redis-server (started by the test session)."""

from __future__ import annotations

import json
import threading

import pytest

from service.rules.errors import EventError
from service.store import codec, keys
from service.store.errors import (
    Conflict,
    EventNotFound,
    Forbidden,
    IdempotencyMismatch,
    PreconditionFailed,
    TableNotFound,
    Unauthorized,
)
from service.store.table_store import TableStore, fingerprint

PLAYERS = ["东", "南", "西", "北"]
KONG = {"type": "kong", "seat": 1, "kind": "concealed", "tile": "5m"}


@pytest.fixture
def store(redis_client):
    return TableStore(redis_client)


@pytest.fixture
def table(store):
    t = store.create(PLAYERS, "xuezhan", dealer=0).as_dict()
    store.append(t["id"], {"type": "round_start"})
    return t


def test_create_stores_only_token_hashes(store, redis_client):
    t = store.create(PLAYERS, {"preset": "normal", "cap": 4}, dealer=2).as_dict()
    meta = redis_client.hgetall(keys.meta(t["id"]))
    assert t["token"].encode() not in meta.values()
    assert t["read_token"].encode() not in meta.values()
    assert t["version"] == 0 and t["balances"] == [0, 0, 0, 0]
    assert t["ruleset"]["cap"] == 4 and t["ruleset"]["mode"] == "normal"
    ids = {store.create(PLAYERS, None).id for _ in range(20)}
    assert len(ids) == 20


def test_every_key_shares_the_hash_tag(store, table, redis_client):
    store.append(table["id"], KONG, idempotency_key="k", fp="f")
    names = [k.decode() for k in redis_client.keys("*")]
    assert names and all(n.startswith("{t:" + table["id"] + "}:") for n in names)


def test_tokens(store, table):
    tid = table["id"]
    store.authorize(tid, table["token"], write=True)
    store.authorize(tid, table["read_token"], write=False)
    store.authorize(tid, table["token"], write=False)
    with pytest.raises(Forbidden):
        store.authorize(tid, table["read_token"], write=True)
    with pytest.raises(Unauthorized):
        store.authorize(tid, None, write=False)
    with pytest.raises(Unauthorized):  # no token: nothing said about existence
        store.authorize("0123456789abcdef", None, write=False)
    with pytest.raises(Unauthorized):
        store.authorize(tid, "x" * 43, write=False)
    other = store.create(PLAYERS, None).as_dict()
    with pytest.raises(Unauthorized):
        store.authorize(tid, other["token"], write=False)
    with pytest.raises(Unauthorized):  # an unknown id with a token: as a wrong token
        store.authorize("nope", table["token"], write=False)


def test_append_returns_transfers_and_balances(store, table):
    written = store.append(table["id"], KONG)
    assert not written.replayed
    assert written.seq == 2 and written.version == 2
    assert written.balances == [-12, 36, -12, -12]
    assert {(t["from"], t["to"], t["points"], t["reason"], t["event"]) for t in written.transfers} == {
        (0, 1, 12, "kong_concealed", 2), (2, 1, 12, "kong_concealed", 2), (3, 1, 12, "kong_concealed", 2)}
    got = store.get(table["id"])
    assert got["version"] == 2 and got["balances"] == [-12, 36, -12, -12]
    assert got["round"]["number"] == 1 and got["round"]["status"] == "playing"


def test_rejected_event_changes_nothing(store, table, redis_client):
    before = {k: redis_client.dump(k) for k in redis_client.keys("*")}
    with pytest.raises(EventError) as exc:
        store.append(table["id"], {"type": "kong", "seat": 7, "kind": "concealed", "tile": "5m"})
    assert exc.value.code == "seat_out_of_range" and exc.value.event == 2
    with pytest.raises(EventError) as exc:
        store.append(table["id"], {"type": "round_start"})
    assert exc.value.code == "round_in_progress"
    after = {k: redis_client.dump(k) for k in redis_client.keys("*")}
    assert before == after


def test_events_need_a_round(store):
    t = store.create(PLAYERS, None).as_dict()
    with pytest.raises(EventError) as exc:
        store.append(t["id"], KONG)
    assert exc.value.code == "no_round"


def test_if_match(store, table):
    with pytest.raises(PreconditionFailed) as exc:
        store.append(table["id"], KONG, if_match=0)
    assert exc.value.context["current"] == 1
    assert store.append(table["id"], KONG, if_match=1).version == 2


def test_idempotency_replays_and_rejects_other_bodies(store, table, redis_client):
    fp = fingerprint("POST", "/x", KONG)
    first = store.append(table["id"], KONG, idempotency_key="abc", fp=fp)
    again = store.append(table["id"], KONG, idempotency_key="abc", fp=fp)
    assert again.replayed and again.as_dict() == first.as_dict()
    assert redis_client.llen(keys.log(table["id"])) == 2
    with pytest.raises(IdempotencyMismatch):
        store.append(table["id"], {**KONG, "tile": "6m"}, idempotency_key="abc",
                     fp=fingerprint("POST", "/x", {**KONG, "tile": "6m"}))
    assert redis_client.ttl(keys.idem(table["id"])) == -1  # kept as long as its table (which has no TTL here)


def test_concurrent_appends_all_land_exactly_once(store, table, redis_client):
    tid = table["id"]
    errors = []

    def post(n):
        try:
            store.append(tid, {"type": "peng", "seat": n % 4, "tile": f"{n % 9 + 1}{'mps'[n // 9]}",
                               "from": (n + 1) % 4})
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=post, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert redis_client.llen(keys.log(tid)) == 17
    records = codec.read_records(redis_client.lrange(keys.log(tid), 0, -1), 1)
    assert [r["seq"] for r in records] == list(range(1, 18))
    assert sorted(r["tile"] for r in records[1:]) == sorted(f"{n % 9 + 1}{'mps'[n // 9]}" for n in range(16))
    assert store.check(tid)["ok"]


def test_concurrent_if_match_only_one_wins(store, table):
    results = []

    def post():
        try:
            store.append(table["id"], KONG, if_match=1)
            results.append("ok")
        except PreconditionFailed:
            results.append("stale")
        except EventError:
            results.append("rejected")

    threads = [threading.Thread(target=post) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count("ok") == 1 and results.count("stale") == 9


def test_void_recomputes_and_refuses_dependents(store, table):
    tid = table["id"]
    store.append(tid, {"type": "kong", "seat": 2, "kind": "direct", "tile": "3s", "from": 0})  # seq 2
    hu = {"type": "hu", "from": 2, "tile": "9p", "after_kong": True, "winners": [{"seat": 3, "fan": 1}]}
    store.append(tid, hu)  # seq 3, 杠上炮 depends on the kong
    with pytest.raises(Conflict) as exc:
        store.void(tid, 2)
    assert exc.value.code == "void_conflict"
    written = store.void(tid, 3)
    assert written.voided == 3 and written.version == 4
    assert written.balances == [-6, 0, 6, 0]
    with pytest.raises(Conflict) as exc:
        store.void(tid, 3)
    assert exc.value.code == "already_voided"
    with pytest.raises(Conflict) as exc:
        store.void(tid, 4)
    assert exc.value.code == "not_voidable"
    with pytest.raises(EventNotFound):
        store.void(tid, 99)
    listed = store.events(tid)["events"]
    assert [e["voided"] for e in listed] == [False, False, True, False]
    assert store.check(tid)["ok"]


def test_rounds_carry_balances_and_rotate_the_dealer(store):
    t = store.create(PLAYERS, "normal", dealer=0).as_dict()
    tid = t["id"]
    store.append(tid, {"type": "round_start"})
    store.append(tid, {"type": "hu", "from": 2, "tile": "5p", "winners": [{"seat": 1, "fan": 2}]})
    state = store.get(tid)
    assert state["round"]["status"] == "ended" and state["round"]["next_dealer"] == 2  # discarder rule
    assert state["rounds"][0]["deltas"] == [0, 12, -12, 0]
    with pytest.raises(EventError) as exc:
        store.append(tid, KONG)
    assert exc.value.code == "round_ended"
    store.append(tid, {"type": "round_start"})
    assert store.get(tid)["round"]["dealer"] == 2
    store.append(tid, {"type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"})
    store.append(tid, {"type": "round_end"})
    got = store.get(tid)
    assert got["balances"] == [36, 0, -24, -12] and sum(got["balances"]) == 0
    assert [r["number"] for r in got["rounds"]] == [1, 2]
    assert got["dealer"] == 2  # no win: the dealer stays


def test_events_pagination(store, table):
    for n in range(5):
        store.append(table["id"], {"type": "peng", "seat": 0, "tile": f"{n + 1}m", "from": 1})
    page = store.events(table["id"], after=0, limit=4)
    assert [e["seq"] for e in page["events"]] == [1, 2, 3, 4] and page["next"] == "4"
    page = store.events(table["id"], after=int(page["next"]), limit=4)
    assert [e["seq"] for e in page["events"]] == [5, 6] and page["next"] is None


def test_delete_removes_every_key_but_a_tombstone(store, table, redis_client):
    store.append(table["id"], KONG, idempotency_key="k", fp="f")
    assert store.delete(table["id"])
    assert redis_client.keys("*") == [keys.meta(table["id"]).encode()]
    assert set(redis_client.hgetall(keys.meta(table["id"]))) == {b"token", b"read_token", b"deleted"}
    assert 0 < redis_client.ttl(keys.meta(table["id"])) <= 24 * 3600
    assert not store.delete(table["id"])
    with pytest.raises(Unauthorized):  # a wrong token still learns nothing
        store.authorize(table["id"], "wrong", write=False)
    with pytest.raises(TableNotFound):
        store.authorize(table["id"], table["token"], write=False)
    with pytest.raises(TableNotFound):
        store.get(table["id"])


def test_check_detects_and_repairs_a_corrupt_state(store, table, redis_client):
    store.append(table["id"], KONG)
    state = json.loads(redis_client.get(keys.state(table["id"])))
    state["balances"] = [0, 0, 0, 0]
    redis_client.set(keys.state(table["id"]), json.dumps(state))
    report = store.check(table["id"], repair=True)
    assert not report["ok"] and report["repaired"]
    assert store.check(table["id"])["ok"]
    assert store.get(table["id"])["balances"] == [-12, 36, -12, -12]


def test_max_events_and_ttl(redis_client):
    store = TableStore(redis_client, max_events=6, table_ttl=3600)  # (3 of them kept for corrections)
    t = store.create(PLAYERS, None).as_dict()
    store.append(t["id"], {"type": "round_start"})
    store.append(t["id"], KONG)
    store.append(t["id"], {"type": "peng", "seat": 0, "tile": "1m", "from": 1})
    with pytest.raises(Conflict) as exc:
        store.append(t["id"], {"type": "peng", "seat": 0, "tile": "2m", "from": 1})
    assert exc.value.code == "table_full"
    for k in redis_client.keys("*"):
        assert 0 < redis_client.ttl(k) <= 3600


def test_idempotent_create_replays_the_tokens_but_stores_none(store, redis_client):
    fp = fingerprint("POST", "/v1/tables", {"players": PLAYERS})
    first = store.create(PLAYERS, None, idempotency_key="key-1", fp=fp)
    again = store.create(PLAYERS, None, idempotency_key="key-1", fp=fp)
    assert again.replayed and again.as_dict() == first.as_dict()
    assert len(redis_client.keys("*:meta")) == 1
    dump = b"".join(redis_client.dump(k) or b"" for k in redis_client.keys("*"))
    assert first.token.encode() not in dump and first.read_token.encode() not in dump
    with pytest.raises(IdempotencyMismatch):
        store.create(PLAYERS[::-1], None, idempotency_key="key-1",
                     fp=fingerprint("POST", "/v1/tables", {"players": PLAYERS[::-1]}))


def test_a_void_racing_a_delete_is_table_not_found(store, table, redis_client, at_table_read):
    """The table is deleted between reading its state and planning the void: 404, not a crash."""
    store.append(table["id"], KONG)
    at_table_read(redis_client, lambda: store.delete(table["id"]), after=True)
    with pytest.raises(TableNotFound):
        store.void(table["id"], 2)
    assert store.stream_position(table["id"]) is None  # (deleted: the void planned on its state wrote nothing)
