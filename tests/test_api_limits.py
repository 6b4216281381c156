"""Limits: tables per client per hour (429), events per table, body size, page size, idle expiry."""

from __future__ import annotations

import pytest
import redis

from service.api.app import create_app

PLAYERS = {"players": ["a", "b", "c", "d"]}


def make_client(redis_url, **config):
    return create_app({"TESTING": True, "REDIS_URL": redis_url, **config}).test_client()


def test_tables_per_hour_is_enforced_with_retry_after(redis_url):
    c = make_client(redis_url, TABLES_PER_HOUR=3)
    created = [c.post("/v1/tables", json=PLAYERS) for _ in range(3)]
    assert [r.status_code for r in created] == [201] * 3
    assert "Retry-After" not in created[0].headers and created[2].headers["X-RateLimit-Remaining"] == "0"
    r = c.post("/v1/tables", json=PLAYERS)
    assert r.status_code == 429 and r.mimetype == "application/problem+json"
    assert r.get_json()["code"] == "too_many_requests"
    assert 0 < int(r.headers["Retry-After"]) <= 3600
    # the limit is per client address and only on creation
    other = c.post("/v1/tables", json=PLAYERS, environ_base={"REMOTE_ADDR": "10.9.8.7"})
    assert other.status_code == 201
    assert c.get("/healthz").status_code == 200


def test_no_limit_when_zero(redis_url):
    c = make_client(redis_url, TABLES_PER_HOUR=0)
    assert all(c.post("/v1/tables", json=PLAYERS).status_code == 201 for _ in range(5))


def _table(c):
    t = c.post("/v1/tables", json=PLAYERS).get_json()
    return t["id"], {"Authorization": "Bearer " + t["token"]}


def test_events_per_table_limit_is_a_409(redis_url):
    c = make_client(redis_url, MAX_TABLE_EVENTS=3)
    tid, auth = _table(c)
    ok = [c.post(f"/v1/tables/{tid}/events", json=ev, headers=auth).status_code for ev in (
        {"type": "round_start"},
        {"type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"},
        {"type": "kong", "seat": 1, "kind": "concealed", "tile": "2m"},
    )]
    assert ok == [201, 201, 201]
    r = c.post(f"/v1/tables/{tid}/events", json={"type": "kong", "seat": 2, "kind": "concealed", "tile": "3m"},
               headers=auth)
    assert r.status_code == 409 and r.get_json()["code"] == "table_full"
    assert c.get(f"/v1/tables/{tid}", headers=auth).get_json()["version"] == 3


def test_idle_tables_expire(redis_url):
    c = make_client(redis_url, TABLE_TTL=120)
    tid, auth = _table(c)
    c.post(f"/v1/tables/{tid}/events", json={"type": "round_start"}, headers=auth)
    r = redis.Redis.from_url(redis_url)
    table_keys = r.keys("{t:" + tid + "}*")
    assert table_keys and all(0 < r.ttl(k) <= 120 for k in table_keys)


def test_page_size_is_bounded(redis_url):
    c = make_client(redis_url)
    tid, auth = _table(c)
    assert c.get(f"/v1/tables/{tid}/events?limit=500", headers=auth).status_code == 200
    r = c.get(f"/v1/tables/{tid}/events?limit=501", headers=auth)
    assert r.status_code == 422 and "query.limit" in r.get_json()["errors"]


@pytest.mark.parametrize("path", ["/v1/tables", "/v1/hands/ting"])
def test_body_size_is_bounded(redis_url, path):
    c = make_client(redis_url)
    r = c.post(path, data=b'{"players": "' + b"x" * (65 * 1024) + b'"}', content_type="application/json")
    assert r.status_code == 413 and r.mimetype == "application/problem+json"
