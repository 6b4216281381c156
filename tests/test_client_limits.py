"""A client's own write limits (events, voids a minute) counted by the store's scripts
(service/store/charges.py): in the APPEND that appends, once per request whatever its outcome, or by HIT where
no APPEND runs."""

from __future__ import annotations

import pytest

from service.store import keys
from service.store.charges import Charge, ClientLimit
from service.store.errors import RateLimited
from service.store.table_store import TableStore
from tests.test_api_limits import round_trips

PLAYERS = ["a", "b", "c", "d"]
KONGS = [{"type": "kong", "seat": i % 4, "kind": "concealed", "tile": f"{i % 9 + 1}m"} for i in range(8)]


def charge(amount: int, client: str = "addr:10.0.0.1") -> Charge:
    return Charge(client, [ClientLimit("client_events", amount)])


def evalsha_calls(redis_client) -> int:
    return redis_client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)


def test_an_append_counts_the_clients_limit_in_its_one_call(redis_client):
    store = TableStore(redis_client, events_per_minute=100)
    t = store.create(PLAYERS, None).id
    store.append(t, {"type": "round_start"})  # (the worker keeps the state: the next append is one call)
    c = charge(5)
    written = []
    before = evalsha_calls(redis_client)
    assert round_trips(lambda: written.append(store.append(t, KONGS[0], charge=c))) == 1
    assert evalsha_calls(redis_client) == before + 1
    assert [(q.name, q.limit, q.remaining) for q in c.quotas] == [("client_events", 5, 4)]
    assert written[0].quota.remaining == 98  # the table's, from the same call
    assert 55_000 < redis_client.pttl(keys.client_limits("addr:10.0.0.1")) <= 120_000


def test_a_retried_append_counts_the_client_once(redis_client):
    """A worker whose kept state is stale meets a conflict and plans again: the client counted once."""
    one, other = TableStore(redis_client), TableStore(redis_client)
    t = one.create(PLAYERS, None).id
    one.append(t, {"type": "round_start"}, charge=charge(2))   # counted: 1 of 2
    other.append(t, KONGS[0])                                    # the log moves under `one`'s kept state
    c = charge(2)
    assert one.append(t, KONGS[1], charge=c).seq == 3            # a conflict, then the append: 2 of 2
    assert c.quotas[0].remaining == 0
    with pytest.raises(RateLimited) as refused:
        one.append(t, KONGS[2], charge=charge(2))
    assert refused.value.context["limit"] == "client_events" and refused.value.context["retry_after"] >= 1
    assert one.get(t)["version"] == 3  # the refused write wrote nothing


def test_every_outcome_counts_and_a_refusal_counts_nothing(redis_client):
    """A write the table's own limit refuses counts against the client (the script counts the client first);
    one the client's limit refuses is not counted, and writes nothing."""
    store = TableStore(redis_client, events_per_minute=1)
    t = store.create(PLAYERS, None).id
    store.append(t, {"type": "round_start"}, charge=charge(3))
    with pytest.raises(RateLimited) as by_the_table:
        store.append(t, KONGS[0], charge=charge(3))
    assert by_the_table.value.context["limit"] == "table_events"
    store.charge(charge(3))  # (HIT: a finish, a club's write) the third
    before = redis_client.hgetall(keys.client_limits("addr:10.0.0.1"))
    for _ in range(2):
        with pytest.raises(RateLimited) as by_the_client:
            store.append(t, KONGS[0], charge=charge(3))
        assert by_the_client.value.context["limit"] == "client_events"
    assert redis_client.hgetall(keys.client_limits("addr:10.0.0.1")) == before  # refusals are not counted
    assert store.get(t)["version"] == 1
    other = charge(3, client="addr:10.0.0.2")  # another client is limited by its own count only
    with pytest.raises(RateLimited) as again:
        store.append(t, KONGS[0], charge=other)
    assert again.value.context["limit"] == "table_events" and other.quotas[0].remaining == 2
