"""A worker's kept table states (one round trip per append) and the compact stored forms.

Two :class:`TableStore` objects on one Redis stand for two workers: each keeps
the states it has seen, so each one's kept state goes stale when the other
writes.  A stale state must never be what an event is validated against.
"""
from __future__ import annotations

import json

import pytest

from service.store import keys
from service.store.errors import Forbidden, PreconditionFailed, TableNotFound, Unauthorized
from service.store.table_store import Access, TableStore

PLAYERS = ["东", "南", "西", "北"]
KONG = {"type": "kong", "seat": 1, "kind": "concealed", "tile": "5m"}


def _script_calls(redis_client) -> int:
    """EVALSHA commands the server has run (the store's every read and write is a script)."""
    stats = redis_client.info("commandstats")
    return sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("evalsha", "eval"))


def test_an_append_on_a_kept_state_is_one_round_trip(redis_client):
    store = TableStore(redis_client)
    store.append(store.create(PLAYERS, "xuezhan").id, {"type": "round_start"})  # (the scripts loaded)
    t = store.create(PLAYERS, "xuezhan")
    w = Access(t.token, write=True)
    before = _script_calls(redis_client)
    store.append(t.id, {"type": "round_start"}, access=w)  # reads the state (READ), appends, keeps it
    assert _script_calls(redis_client) - before == 2
    before = _script_calls(redis_client)
    for tile in "1234":
        store.append(t.id, {**KONG, "tile": tile + "m"}, access=w)
    assert _script_calls(redis_client) - before == 4
    assert store.check(t.id)["ok"]


def test_a_stale_kept_state_is_replanned_on_the_current_one(redis_clients):
    a, b = TableStore(redis_clients()), TableStore(redis_clients())
    t = a.create(PLAYERS, "xuezhan")
    a.append(t.id, {"type": "round_start"})            # a keeps version 1 (a round playing)
    b.append(t.id, {"type": "round_end"})              # version 2: no round playing
    # on a's kept state this is refused (a round is in progress); on the table's it is valid
    w = a.append(t.id, {"type": "round_start", "dealer": 3})
    assert w.seq == 3 and w.round["number"] == 2 and w.round["dealer"] == 3
    b.append(t.id, {**KONG, "seat": 2, "tile": "6m"})  # b's kept state is at 2: conflict, replanned
    w = a.append(t.id, KONG)                           # a's kept state is at 3: conflict, replanned
    assert w.seq == 5 and w.balances == [-24, 24, 24, -24]
    assert a.check(t.id)["ok"] and a.check(t.id)["version"] == 5


def test_an_if_match_naming_the_current_version_is_planned_again_not_refused(redis_clients):
    # a's kept state is at 1; b moves the table to 2.  If-Match "1", "2" names the table's version:
    # the write is planned again on version 2 and lands; If-Match "1" alone is 412 at version 3.
    a, b = TableStore(redis_clients()), TableStore(redis_clients())
    t = a.create(PLAYERS, "xuezhan")
    a.append(t.id, {"type": "round_start"})
    b.append(t.id, KONG)
    w = a.append(t.id, {**KONG, "tile": "6m"}, if_match=(1, 2))
    assert w.seq == 3 and w.balances == [-24, 72, -24, -24]
    b.append(t.id, {**KONG, "tile": "7m"})  # version 4; a keeps 3
    with pytest.raises(PreconditionFailed) as e:
        a.append(t.id, {**KONG, "tile": "8m"}, if_match=3)
    assert e.value.context["current"] == 4
    assert a.check(t.id)["ok"] and a.check(t.id)["version"] == 4


def test_an_if_match_of_the_version_with_another_stored_state_is_planned_again(redis_client):
    # same version, other bytes (a fail-over that lost a write, or check-tables --repair writing the
    # state anew): the write is not refused as "at version 2, not 2", it is planned on the state stored
    a = TableStore(redis_client)
    t = a.create(PLAYERS, "xuezhan")
    a.append(t.id, {"type": "round_start"})
    a.append(t.id, KONG)  # a keeps version 2
    raw = redis_client.get(keys.state(t.id))
    redis_client.set(keys.state(t.id), json.dumps(json.loads(raw)))  # same state, other bytes
    w = a.append(t.id, {**KONG, "tile": "6m"}, if_match=2)
    assert w.seq == 3 and a.check(t.id)["ok"]


def test_an_event_a_stale_state_accepts_is_refused_on_the_current_one(redis_clients):
    a, b = TableStore(redis_clients()), TableStore(redis_clients())
    t = a.create(PLAYERS, "xuezhan")
    a.append(t.id, {"type": "round_start"})  # a keeps version 1
    b.append(t.id, {"type": "round_end"})
    from service.rules.errors import EventError
    with pytest.raises(EventError):           # valid on a's kept state, not on the table's
        a.append(t.id, KONG)
    assert a.check(t.id)["version"] == 2


def test_a_kept_state_of_a_table_deleted_and_made_again_under_its_id_is_not_used(redis_client, redis_clients):
    """A keyed creation derives the id from the key: once the first table is gone (its tombstone
    expired), the key makes a new table of the same id, at the same version as the kept state."""
    a, b = TableStore(redis_clients()), TableStore(redis_clients())
    first = a.create(PLAYERS, "xuezhan", idempotency_key="k", fp="f")
    a.append(first.id, {"type": "round_start", "dealer": 0})  # a keeps version 1 of the first table
    redis_client.delete(*keys.every(first.id))                      # gone, tombstone and all
    second = b.create(PLAYERS, "xuezhan", idempotency_key="k", fp="f")
    assert second.id == first.id and second.token != first.token
    b.append(second.id, {"type": "round_start", "dealer": 2})  # version 1 too, another round
    w = a.append(second.id, KONG)
    assert w.seq == 2 and w.round["dealer"] == 2  # validated on the second table's state
    assert a.check(second.id)["ok"]
    with pytest.raises(Unauthorized):             # and the first table's token is no longer valid
        a.append(second.id, KONG, access=Access(first.token, write=True))


def test_tokens_are_checked_with_a_kept_state(redis_client):
    store = TableStore(redis_client)
    t = store.create(PLAYERS, "xuezhan")
    store.append(t.id, {"type": "round_start"}, access=Access(t.token, write=True))  # kept
    with pytest.raises(Forbidden):
        store.append(t.id, KONG, access=Access(t.read_token, write=True))
    with pytest.raises(Unauthorized):
        store.append(t.id, KONG, access=Access("nope", write=True))
    with pytest.raises(Unauthorized):
        store.append(t.id, KONG, access=Access(None, write=True))
    assert store.append(t.id, KONG, access=Access(t.token, write=True)).seq == 2


def test_a_kept_state_of_a_deleted_table_is_not_found(redis_client, redis_clients):
    a, b = TableStore(redis_clients()), TableStore(redis_clients())
    t = a.create(PLAYERS, "xuezhan")
    a.append(t.id, {"type": "round_start"}, access=Access(t.token, write=True))
    assert b.delete(t.id)
    with pytest.raises(TableNotFound):
        a.append(t.id, KONG, access=Access(t.token, write=True))
    with pytest.raises(Unauthorized):
        a.append(t.id, KONG, access=Access("nope", write=True))
    assert redis_client.keys("{t:" + t.id + "}:*") == [keys.meta(t.id).encode()]  # the tombstone only


def test_an_idempotent_retry_replays_with_a_stale_kept_state(redis_clients):
    a, b = TableStore(redis_clients()), TableStore(redis_clients())
    t = a.create(PLAYERS, "xuezhan")
    b.append(t.id, {"type": "round_start"})
    first = b.append(t.id, KONG, idempotency_key="once", fp="f")
    a.append(t.id, {"type": "kong", "seat": 2, "kind": "concealed", "tile": "6m"})  # a keeps version 3
    b.append(t.id, {"type": "round_end"})
    again = a.append(t.id, KONG, idempotency_key="once", fp="f")  # refused on a's state: a read replays it
    assert again.replayed and again.as_dict() == first.as_dict()


def test_kept_states_are_bounded(redis_client):
    """A store keeps the states of the tables it wrote last, ``states_kept`` of them: an append to one of
    those is one round trip, to an older one two (it reads the state first)."""
    store = TableStore(redis_client, states_kept=3)
    ids = [store.create(PLAYERS, "xuezhan").id for _ in range(5)]
    for tid in ids:
        store.append(tid, {"type": "round_start"})
    calls = []
    for tid in reversed(ids):  # the three kept (each put back on top), then the two that were not
        before = _script_calls(redis_client)
        store.append(tid, KONG)
        calls.append(_script_calls(redis_client) - before)
    assert calls == [1, 1, 1, 2, 2]


# -- the stored forms ---------------------------------------------------------------------------
def test_records_and_summaries_are_stored_compactly_and_read_back_whole(redis_client):
    store = TableStore(redis_client)
    t = store.create(PLAYERS, "xuezhan")
    store.append(t.id, {"type": "round_start"})
    store.append(t.id, {"type": "hu", "from": 2, "tile": "9p", "winners": [{"seat": 3, "fan": 1}]})
    store.append(t.id, {"type": "round_end"})
    raw = redis_client.lrange(keys.log(t.id), 0, -1)
    assert all(r.startswith(b"[") for r in raw) and b'"seq"' not in b"".join(raw)
    assert redis_client.lrange(keys.rounds(t.id), 0, -1)[0].startswith(b"[")
    events = store.events(t.id)["events"]
    assert [e["seq"] for e in events] == [1, 2, 3]
    assert events[1] | {"at": None} == {"seq": 2, "type": "hu", "from": 2, "tile": "9p",
                                        "winners": [{"seat": 3, "fan": 1}], "round": 1, "at": None,
                                        "voided": False}
    assert store.get(t.id)["rounds"][0]["number"] == 1
    assert store.check(t.id)["ok"]


# -- the write scripts' kept connections (service.store.redis_client.Scripts) --------------------------
def test_a_kept_state_of_a_lost_write_is_not_used_at_the_same_version(redis_client, redis_clients):
    """A write that a fail-over lost (acknowledged without REDIS_MIN_REPLICAS) leaves its worker a kept
    state at a version that another write may reach since: the script compares the stored state
    itself, not only the version, so the next event is validated against the table's real state."""
    a, b = TableStore(redis_clients()), TableStore(redis_clients())
    t = a.create(PLAYERS, "xuezhan")
    a.append(t.id, {"type": "round_start"})
    at_1 = redis_client.get(keys.state(t.id))
    a.append(t.id, KONG)                          # version 2; a keeps the state after it
    redis_client.rpop(keys.log(t.id))                   # ... and the fail-over loses it
    redis_client.set(keys.state(t.id), at_1)
    b.append(t.id, {**KONG, "seat": 2, "tile": "6m"})  # another version 2
    w = a.append(t.id, {**KONG, "seat": 3, "tile": "7m"})
    assert w.seq == 3 and w.balances == [-24, -24, 24, 24]  # seats 2 and 3 made the kongs, not 1
    assert a.check(t.id)["ok"]


