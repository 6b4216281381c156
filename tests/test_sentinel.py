"""The tables API over Redis Sentinel (``redis+sentinel://.../mymaster``): a primary, a replica, three
sentinels.  A running ``serve`` follows a fail-over (SIGKILL of the master, the replica promoted)
without a restart; a graceful fail-over too; readiness means "connected to the current master"."""

from __future__ import annotations

import time
import uuid

import pytest
import redis

from service.api import create_app
from tests.service_process import Service, free_port, service_env

pytestmark = pytest.mark.slow  # (a real server, or long runs: the fast lane leaves it out)

PLAYERS = {"players": ["a", "b", "c", "d"]}
KONG = {"type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"}


def test_the_api_and_readiness_over_sentinel(redis_sentinel):
    c = create_app({"TESTING": True, "REDIS_URL": redis_sentinel.url, "TABLES_PER_HOUR": 10,
                    "REDIS_MIN_REPLICAS": 1}).test_client()
    t = c.post("/v1/tables", json=PLAYERS).get_json()
    auth = {"Authorization": "Bearer " + t["token"]}
    assert c.post(f"/v1/tables/{t['id']}/events", json={"type": "round_start"}, headers=auth).status_code == 201
    r = c.post(f"/v1/tables/{t['id']}/events", json=KONG, headers={**auth, "Idempotency-Key": "k"})
    again = c.post(f"/v1/tables/{t['id']}/events", json=KONG, headers={**auth, "Idempotency-Key": "k"})
    assert r.status_code == again.status_code == 201 and again.get_json() == r.get_json()
    assert c.get(f"/v1/tables/{t['id']}", headers=auth).get_json()["version"] == 2
    ready = c.get("/readyz")
    assert ready.status_code == 200 and ready.get_json()["checks"] == {"redis": "ok"}
    # with REDIS_MIN_REPLICAS=1 the write was acknowledged once the replica had it
    replica = next(s for s in redis_sentinel.servers if s.port != redis_sentinel.master_port())
    assert redis.Redis.from_url(replica.url).exists("{t:" + t["id"] + "}:log")


def test_the_clients_write_limits_over_sentinel(redis_sentinel):
    """Over Sentinel the APPEND counts the client's limits in its one call; with REDIS_MIN_REPLICAS the count
    reaches the replica with the write (one EVALSHA and its WAIT)."""
    c = create_app({"TESTING": True, "REDIS_URL": redis_sentinel.url, "TABLES_PER_HOUR": 0,
                    "CLIENT_EVENTS_PER_MINUTE": 2, "REDIS_MIN_REPLICAS": 1}).test_client()
    tables = [c.post("/v1/tables", json=PLAYERS).get_json() for _ in range(3)]
    client = {"REMOTE_ADDR": "10.20.30.40"}  # (a client of its own: the other tests' events count for theirs)
    answers = [c.post(f"/v1/tables/{t['id']}/events", json={"type": "round_start"}, environ_base=client,
                      headers={"Authorization": "Bearer " + t["token"]}) for t in tables]
    assert [r.status_code for r in answers] == [201, 201, 429]
    assert answers[2].get_json()["limit"] == "client_events" and answers[1].headers["X-RateLimit-Remaining"] == "0"
    replica = next(s for s in redis_sentinel.servers if s.port != redis_sentinel.master_port())
    assert redis.Redis.from_url(replica.url).exists("rl:client:addr:10.20.30.40")


def test_a_graceful_fail_over_is_followed(redis_sentinel):
    c = create_app({"TESTING": True, "REDIS_URL": redis_sentinel.url, "TABLES_PER_HOUR": 0}).test_client()
    t = c.post("/v1/tables", json=PLAYERS).get_json()
    auth = {"Authorization": "Bearer " + t["token"]}
    old = redis_sentinel.master_port()
    sentinel = redis.Redis(port=redis_sentinel.sentinel_ports[0])
    sentinel.execute_command("SENTINEL", "FAILOVER", redis_sentinel.NAME)
    new = redis_sentinel.wait_failover(old)
    statuses = []
    for _ in range(100):  # the old master's connections were closed or answer READONLY: 503, then the new one
        r = c.post(f"/v1/tables/{t['id']}/events", json={"type": "round_start"},
                   headers={**auth, "Idempotency-Key": "start"})
        statuses.append(r.status_code)
        if r.status_code == 201:
            break
        assert r.status_code == 503 and r.headers["Retry-After"]
        time.sleep(0.1)
    assert statuses[-1] == 201 and new != old
    assert c.get("/readyz").status_code == 200
    redis_sentinel.wait_healthy()


def test_serve_follows_a_master_killed_by_sigkill(redis_sentinel, tmp_path):
    srv = Service(free_port(), service_env(REDIS_URL=redis_sentinel.url), tmp_path / "service.log").start()
    try:
        status, _, t = srv.request("POST", "/v1/tables", PLAYERS)
        assert status == 201
        auth = {"Authorization": "Bearer " + t["token"]}
        assert srv.request("POST", f"/v1/tables/{t['id']}/events", {"type": "round_start"}, auth)[0] == 201
        master = redis_sentinel.master()
        replica_ports = {s.port for s in redis_sentinel.servers} - {master.port}
        assert redis.Redis(port=master.port).wait(1, 5000) >= 1  # the replica has the table
        master.kill()
        key = str(uuid.uuid4())
        deadline = time.monotonic() + 60
        while True:
            try:
                status, headers, body = srv.request("POST", f"/v1/tables/{t['id']}/events", KONG,
                                                    {**auth, "Idempotency-Key": key}, timeout=5)
            except OSError:
                status = None
            if status == 201:
                break
            assert status in (None, 503), body
            assert time.monotonic() < deadline, "no write landed within 60 s of the master's death"
            time.sleep(0.1)
        assert body["seq"] == 2
        assert redis_sentinel.master_port() in replica_ports  # the replica was promoted
        assert srv.request("GET", "/readyz")[0] == 200
        status, _, view = srv.request("GET", f"/v1/tables/{t['id']}", headers=auth)
        assert status == 200 and view["version"] == 2 and sum(view["balances"]) == 0
    finally:
        srv.stop()
        for s in redis_sentinel.servers:
            s.start()  # the old master comes back and the sentinels make it a replica
        redis_sentinel.wait_healthy()
