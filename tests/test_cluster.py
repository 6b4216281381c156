"""The tables API on a real Redis Cluster: 3 primaries, 3 replicas (``redis+cluster://``).

Each table lives in one slot (``{t:<id>}``), so tables spread over every
primary; every script runs on the table's node; ``check-tables`` scans every
primary; ``/readyz`` asks every primary; ``REDIS_MIN_REPLICAS`` makes a write
wait for the table's replica.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
import redis

from service.api import create_app
from service.store import keys, redis_client

pytestmark = pytest.mark.slow  # (a real server, or long runs: the fast lane leaves it out)

ROOT = Path(__file__).resolve().parent.parent
PLAYERS = ["东", "南", "西", "北"]
KONG = {"type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"}


def app_client(url, **config):
    return create_app({"TESTING": True, "REDIS_URL": url, "TABLES_PER_HOUR": 0, **config}).test_client()


def bearer(table) -> dict:
    return {"Authorization": "Bearer " + table["token"]}


def create(c) -> dict:
    r = c.post("/v1/tables", json={"players": PLAYERS})
    assert r.status_code == 201, r.get_data(as_text=True)
    return r.get_json()


def post(c, table, event, **headers):
    return c.post(f"/v1/tables/{table['id']}/events", json=event, headers={**bearer(table), **headers})


def log_of(c, table) -> list[dict]:
    r = c.get(f"/v1/tables/{table['id']}/events?limit=500", headers=bearer(table))
    assert r.status_code == 200
    return r.get_json()["events"]


def owner_port(cluster, table_id: str) -> int:
    return cluster.owner(keys.meta(table_id)).port


def test_tables_spread_over_every_primary_and_the_whole_api_works(redis_cluster, cluster_url):
    c = app_client(cluster_url)
    tables = [create(c) for _ in range(12)]
    while len({owner_port(redis_cluster, t["id"]) for t in tables}) < 3:  # ids are random: until all hold some
        tables.append(create(c))
    owners = Counter(owner_port(redis_cluster, t["id"]) for t in tables)
    assert set(owners) == {n.port for n in redis_cluster.primaries()}  # all three primaries hold tables

    for t in tables:
        assert post(c, t, {"type": "round_start"}).status_code == 201
        r = post(c, t, KONG, **{"Idempotency-Key": "k1"})
        assert r.status_code == 201 and r.get_json()["balances"][0] > 0 and sum(r.get_json()["balances"]) == 0
        again = post(c, t, KONG, **{"Idempotency-Key": "k1"})  # a replay: nothing new
        assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
        assert again.get_json() == r.get_json()
        assert post(c, t, {"type": "round_end"}, **{"If-Match": '"1"'}).status_code == 412
        assert post(c, t, {"type": "round_end"}, **{"If-Match": '"2"'}).status_code == 201
        voided = c.post(f"/v1/tables/{t['id']}/events/2/void", headers=bearer(t))
        assert voided.status_code == 201 and voided.get_json()["balances"] == [0, 0, 0, 0]
        view = c.get(f"/v1/tables/{t['id']}", headers=bearer(t)).get_json()
        assert view["version"] == 4 and view["balances"] == [0, 0, 0, 0] and len(view["rounds"]) == 1
        assert [e["voided"] for e in log_of(c, t)] == [False, True, False, False]

    gone = tables[0]
    assert c.delete(f"/v1/tables/{gone['id']}", headers=bearer(gone)).status_code == 204
    assert c.get(f"/v1/tables/{gone['id']}", headers=bearer(gone)).status_code == 404

    ready = c.get("/readyz")
    assert ready.status_code == 200 and ready.get_json()["checks"] == {"redis": "ok"}

    # check-tables finds every live table on every primary (and none of the deleted one)
    run = subprocess.run([sys.executable, "-m", "service", "check-tables"], cwd=ROOT,
                         env={**os.environ, "REDIS_URL": cluster_url}, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    reports = [json.loads(line) for line in run.stdout.splitlines()]
    assert sorted(r["id"] for r in reports) == sorted(t["id"] for t in tables[1:])
    assert all(r["ok"] and r["version"] == 4 for r in reports)


def test_an_api_keys_table_list_spans_the_primaries(redis_cluster, cluster_url):
    """The key's index lives in its own slot; the tables it lists live on every primary."""
    acme = "acme-" + "a" * 40
    c = app_client(cluster_url, API_KEYS=redis_client_config_keys(acme))
    made = []
    while len(made) < 6 or len({owner_port(redis_cluster, t["id"]) for t in made}) < 3:
        r = c.post("/v1/tables", json={"players": PLAYERS}, headers={"X-API-Key": acme})
        assert r.status_code == 201
        made.append(r.get_json())
    listed, after = [], None
    while True:
        r = c.get("/v1/tables", query_string={"limit": 4, **({"after": after} if after else {})},
                  headers={"X-API-Key": acme})
        assert r.status_code == 200, r.get_data(as_text=True)
        listed += [t["id"] for t in r.get_json()["tables"]]
        after = r.get_json()["next"]
        if after is None:
            break
    assert listed == [t["id"] for t in reversed(made)]


def redis_client_config_keys(acme: str):
    from service.config import ApiKeys

    return ApiKeys.parse(f"acme={acme}")


def test_creation_replays_and_the_rate_limit_on_the_cluster(cluster_url):
    c = app_client(cluster_url, TABLES_PER_HOUR=3)
    key = str(uuid.uuid4())
    first = c.post("/v1/tables", json={"players": PLAYERS}, headers={"Idempotency-Key": key})
    again = c.post("/v1/tables", json={"players": PLAYERS}, headers={"Idempotency-Key": key})
    assert first.status_code == again.status_code == 201
    assert again.get_json() == first.get_json() and again.headers["Idempotent-Replayed"] == "true"
    made = [c.post("/v1/tables", json={"players": PLAYERS}).status_code for _ in range(3)]
    assert made == [201, 201, 429]  # the replay did not count; the limiter's keys live on the cluster
    limiter_keys = [k for node in redis_client.primaries(redis_client.connect(cluster_url))
                    for k in node.scan_iter(match="LIMITS:*")]
    assert limiter_keys


def test_the_clients_write_limits_on_the_cluster(cluster_url):
    """On a cluster the client's hash is not in a table's slot: the store counts it with HIT before the
    APPEND (two calls), on tables of any node, and a finish shares the count."""
    c = app_client(cluster_url, CLIENT_EVENTS_PER_MINUTE=3, TABLE_EVENTS_PER_MINUTE=0)
    c.environ_base["REMOTE_ADDR"] = "10.20.30.41"  # (a client of its own: the other tests' events count for theirs)
    tables = [create(c) for _ in range(4)]
    assert [post(c, t, {"type": "round_start"}).status_code for t in tables[:2]] == [201, 201]
    assert c.post(f"/v1/tables/{tables[2]['id']}/finish", headers=bearer(tables[2])).status_code == 200
    r = post(c, tables[3], {"type": "round_start"})
    assert r.status_code == 429 and r.get_json()["limit"] == "client_events"
    assert log_of(c, tables[3]) == []  # refused: nothing written
    counted = [k for node in redis_client.primaries(redis_client.connect(cluster_url))
               for k in node.scan_iter(match=keys.client_limits("addr:10.20.30.41"))]
    assert len(counted) == 1


def test_every_script_runs_on_its_tables_node(redis_cluster, cluster_url):
    """The cluster refuses a script that reaches a key outside its node; every write and read of a table
    (the scripts included) works on tables owned by each primary, so each declares its keys."""
    from service.store.table_store import TableStore

    store = TableStore(redis_client.connect(cluster_url))
    ids: list[str] = []
    while len(ids) < 6 or len({owner_port(redis_cluster, t) for t in ids}) < 3:  # tables on every primary
        ids.append(store.create(PLAYERS, None, idempotency_key=str(uuid.uuid4()), fp="x").id)
    for t in ids:
        store.append(t, {"type": "round_start"}, idempotency_key="a", fp="a")
        store.append(t, KONG)
        store.void(t, 2)
        assert store.check(t, repair=True)["ok"]
        assert store.get(t)["version"] == 3 and store.events(t)["events"][1]["voided"]
        assert store.delete(t)
    assert sorted(store.table_ids()) == []


def test_an_undeclared_key_is_refused_by_the_cluster(redis_cluster, cluster_url):
    """What the test above relies on: a script reaching another node's key fails."""
    client = redis_client.connect(cluster_url)
    bad = client.register_script("return redis.call('GET', '{t:elsewhere}:meta')")
    t = next(f"{i:016x}" for i in range(100) if client.keyslot(keys.meta(f"{i:016x}"))
             != client.keyslot("{t:elsewhere}:meta")
             and owner_port(redis_cluster, f"{i:016x}") != redis_cluster.owner("{t:elsewhere}:meta").port)
    with pytest.raises(redis.exceptions.ResponseError, match="non local key"):
        bad(keys=[keys.meta(t)])


def test_min_replicas_waits_for_the_tables_replica_and_a_keyed_retry_replays(redis_cluster, cluster_url):
    c = app_client(cluster_url, REDIS_MIN_REPLICAS=1, REDIS_WAIT_TIMEOUT_MS=300)
    t = create(c)
    assert post(c, t, {"type": "round_start"}).status_code == 201
    replica = redis_cluster.replica_of(redis_cluster.owner(keys.meta(t["id"])))
    os.kill(replica.pid, signal.SIGSTOP)  # the replica stops acknowledging (it is not failed over: 300 ms)
    try:
        r = post(c, t, KONG, **{"Idempotency-Key": "kong-1"})
        assert r.status_code == 503 and r.get_json()["code"] == "not_replicated"
        assert int(r.headers["Retry-After"]) >= 1
        # the write is on the primary, not acknowledged; its retry waits for the replica too
        assert post(c, t, KONG, **{"Idempotency-Key": "kong-1"}).status_code == 503
    finally:
        os.kill(replica.pid, signal.SIGCONT)
    for _ in range(50):  # the thawed replica catches up
        r = post(c, t, KONG, **{"Idempotency-Key": "kong-1"})
        if r.status_code != 503:
            break
        time.sleep(0.1)
    assert r.status_code == 201 and r.headers["Idempotent-Replayed"] == "true" and r.get_json()["seq"] == 2
    assert [e["type"] for e in log_of(c, t)] == ["round_start", "kong"]  # applied once
    replica_client = redis.Redis(host="127.0.0.1", port=replica.port, single_connection_client=True)
    replica_client.execute_command("READONLY")  # a cluster replica answers reads of its slots only if asked so
    assert replica_client.llen(keys.log(t["id"])) == 2  # and the replica has it
    redis_cluster.wait_healthy()


def test_a_primary_down_degrades_readiness_and_it_recovers_after_the_fail_over(redis_cluster, cluster_url):
    """While one primary is down the instance still serves the other primaries' tables: /readyz is 200
    with the degraded primary named (not 503 on every instance), and the gauge says so."""
    c = app_client(cluster_url)
    tables = [create(c) for _ in range(6)]
    victim = redis_cluster.owner(keys.meta(tables[0]["id"]))
    replica = redis_cluster.replica_of(victim)
    elsewhere = next(t for t in tables if redis_cluster.owner(keys.meta(t["id"])) is not victim)
    victim.kill()
    try:
        down = c.get("/readyz")  # the node timeout is 1 s: nobody has taken over yet
        body = down.get_json()
        assert down.status_code == 200 and body["status"] == "degraded", body
        assert body["checks"]["redis"].startswith("degraded") and str(victim.port) in body["checks"]["redis"]
        assert 'mahjong_degraded{check="redis"} 1.0' in c.get("/metrics").get_data(as_text=True)
        assert post(c, elsewhere, {"type": "round_start"}).status_code == 201  # the others still take writes
        redis_cluster.wait_promoted(replica)
        # the client finds the new primary by itself: the table's writes land there.  A client retries as a
        # 503's Retry-After says, not in a tight loop (here every 0.2 s): redis-py (8.2) refreshes its slot map
        # after an error at most so often, and a refresh may still read the old map while the nodes gossip
        deadline = time.monotonic() + 20
        while True:
            r = post(c, tables[0], {"type": "round_start"})
            if r.status_code == 201 or time.monotonic() > deadline:
                break
            assert r.status_code == 503 and "Retry-After" in r.headers
            time.sleep(0.2)
        assert r.status_code == 201
        # ready again once the nodes agree on the new map (gossip: the node asked may lag a little)
        deadline = time.monotonic() + 10
        while c.get("/readyz").get_json()["status"] != "ok" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert c.get("/readyz").get_json() == {"status": "ok", "checks": {"redis": "ok"}}
    finally:
        victim.start()  # back as the new primary's replica
        redis_cluster.wait_healthy()
    assert all(c.get(f"/v1/tables/{t['id']}", headers=bearer(t)).status_code == 200 for t in tables)
