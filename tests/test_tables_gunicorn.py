"""The tables API under the real server: ``python -m service serve --workers 2``.

Concurrency across processes (If-Match, Idempotency-Key), durability across a
service restart and a ``kill -9`` of Redis, and the embedded redis-server's
life cycle when ``REDIS_URL`` is unset.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.service_process import (  # noqa: F401
    PLAYERS,
    ROOT,
    Service,
    append,
    free_port,
    new_table,
    redis_servers_on,
    request,
    service_env,
)

pytestmark = pytest.mark.slow  # (a real server, or long runs: the fast lane leaves it out)

KONG = {"type": "kong", "seat": 1, "kind": "concealed", "tile": "5m"}
N = 20


@pytest.fixture(scope="module")
def service(redis_server, tmp_path_factory):
    """One service on the session's Redis for the concurrency tests."""
    if not redis_server.running:
        redis_server.start()
    srv = Service(free_port(), service_env(REDIS_URL=redis_server.url),
                  tmp_path_factory.mktemp("service") / "service.log").start()
    try:
        yield srv
    finally:
        srv.stop()


def all_events(srv, t, auth) -> list[dict]:
    out, after = [], 0
    while True:
        status, _, page = srv.request("GET", f"/v1/tables/{t['id']}/events?after={after}&limit=100",
                                      headers=auth)
        assert status == 200, page
        out += page["events"]
        if page["next"] is None:
            return out
        after = page["next"]


def at_once(n, fn):
    """Run ``fn(i)`` for i < n in n threads released together; the results in order."""
    barrier = threading.Barrier(n)
    out: list = [None] * n

    def run(i):
        barrier.wait()
        try:
            out[i] = fn(i)
        except Exception as exc:  # reported by the caller's assertions
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    return out


# -- (a) If-Match across workers -----------------------------------------------------------------
def test_concurrent_writes_with_one_if_match_exactly_one_wins(service):
    t, auth = new_table(service)
    append(service, t, auth, {"type": "round_start"})
    events = [{"type": "kong", "seat": i % 4, "kind": "concealed", "tile": f"{i % 9 + 1}{'ms'[i // 9 % 2]}"}
              for i in range(N)]
    results = at_once(N, lambda i: service.request("POST", f"/v1/tables/{t['id']}/events", events[i],
                                                   {**auth, "If-Match": '"1"'}))
    statuses = [r[0] for r in results]
    assert sorted(statuses) == [201] + [412] * (N - 1), statuses
    winner = statuses.index(201)
    for status, headers, body in results:
        if status == 412:
            assert body["code"] == "version_mismatch" and body["version"] == 2 and headers["etag"] == '"2"'
    log = all_events(service, t, auth)
    assert len(log) == 2 and log[1]["seq"] == 2
    assert {k: log[1][k] for k in events[winner]} == events[winner]
    status, headers, view = service.request("GET", f"/v1/tables/{t['id']}", headers=auth)
    assert view["version"] == 2 and headers["etag"] == '"2"'
    assert view["balances"] == results[winner][2]["balances"] and sum(view["balances"]) == 0


# -- (b) Idempotency-Key across workers ------------------------------------------------------------
@pytest.mark.parametrize("conditional", [False, True], ids=["plain", "with-if-match"])
def test_concurrent_retries_with_one_idempotency_key_record_one_event(service, conditional):
    t, auth = new_table(service)
    append(service, t, auth, {"type": "round_start"})
    event = {"type": "hu", "from": 2, "tile": "5p", "winners": [{"seat": 1, "fan": 3}]}
    headers = {**auth, "Idempotency-Key": f"retry-storm-{conditional}"}
    if conditional:
        headers["If-Match"] = '"1"'
    results = at_once(N, lambda i: service.request("POST", f"/v1/tables/{t['id']}/events", event, headers))
    assert [r[0] for r in results] == [201] * N, [r if not isinstance(r, tuple) else r[2] for r in results]
    bodies = [r[2] for r in results]
    assert all(b == bodies[0] for b in bodies)
    assert bodies[0]["seq"] == 2 and bodies[0]["balances"] == [0, 24, -24, 0]
    assert {r[1]["etag"] for r in results} == {'"2"'}
    assert len({r[1]["location"] for r in results}) == 1
    assert sum(1 for r in results if r[1].get("idempotent-replayed") != "true") == 1  # one was the original
    log = all_events(service, t, auth)
    assert [e["seq"] for e in log] == [1, 2] and log[1]["type"] == "hu"
    assert service.request("GET", f"/v1/tables/{t['id']}", headers=auth)[2]["version"] == 2


# -- (c) durability -----------------------------------------------------------------------------------------
def wait_until_ok(srv, method, path, body=None, headers=None, timeout=20):
    """Retry while the service answers 503 (Redis coming back); never anything but 503 before success."""
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        try:
            status, h, data = srv.request(method, path, body, headers, timeout=5)
        except OSError as exc:  # pragma: no cover - reported if it persists
            status, h, data = None, {}, repr(exc)
        if status in (200, 201):
            return status, h, data, seen
        assert status == 503, (status, data)  # never a 500
        assert int(h["retry-after"]) > 0 and data["code"] in ("store_unavailable", "busy")
        seen.append(status)
        if time.monotonic() > deadline:
            pytest.fail(f"{method} {path} still failing after {timeout} s: {data}")
        time.sleep(0.2)


def test_acknowledged_events_survive_a_service_restart_and_a_redis_kill(redis_server, redis_url, tmp_path):
    srv = Service(free_port(), service_env(REDIS_URL=redis_url), tmp_path / "service.log").start()
    try:
        t, auth = new_table(srv, ruleset="normal")
        acked = [
            {"type": "round_start", "dealer": 1},
            {"type": "kong", "seat": 0, "kind": "concealed", "tile": "7s"},
            {"type": "kong", "seat": 2, "kind": "direct", "tile": "3m", "from": 1},
            {"type": "hu", "from": 3, "tile": "5p", "winners": [{"seat": 1, "fan": 2}]},
            {"type": "round_start"},
            {"type": "hu", "from": None, "tile": "9s", "winners": [{"seat": 2, "fan": 1}]},
        ]
        for ev in acked:
            append(srv, t, auth, ev)
        _, _, before = srv.request("GET", f"/v1/tables/{t['id']}", headers=auth)
        assert before["version"] == 6 and before["balances"] == [30, -12, 12, -30]
        log_before = all_events(srv, t, auth)

        assert srv.stop() == 0
        srv.start()
        status, _, after = srv.request(
            "GET", f"/v1/tables/{t['id']}", headers={"Authorization": "Bearer " + t["read_token"]}
        )
        assert status == 200 and after == before
        assert all_events(srv, t, auth) == log_before

        # one more acknowledged write, then Redis dies without a chance to save anything
        acked.append({"type": "round_start"})
        last = append(srv, t, auth, acked[-1], **{"Idempotency-Key": "before-the-crash"})
        redis_server.kill()
        try:
            for method, path, body in (("GET", f"/v1/tables/{t['id']}", None),
                                       ("POST", f"/v1/tables/{t['id']}/events", {"type": "round_end"}),
                                       ("POST", "/v1/tables", {"players": PLAYERS})):
                status, h, data = srv.request(method, path, body, auth)
                assert status == 503 and data["code"] == "store_unavailable" and int(h["retry-after"]) > 0, data
            assert srv.request("GET", "/readyz")[0] == 503
        finally:
            redis_server.start()  # same port, same data directory: the AOF is replayed
        _, _, view, _ = wait_until_ok(srv, "GET", f"/v1/tables/{t['id']}", headers=auth)
        assert view["version"] == 7 and view["balances"] == before["balances"]
        assert view["round"]["number"] == 3 and view["rounds"] == before["rounds"]
        log = all_events(srv, t, auth)
        assert [{k: v for k, v in e.items() if k not in ("seq", "at", "round", "voided")} for e in log] == acked
        assert log[:6] == log_before
        # the idempotency record survived too: the retry replays, nothing new is recorded
        status, h, data, _ = wait_until_ok(srv, "POST", f"/v1/tables/{t['id']}/events", acked[-1],
                                           {**auth, "Idempotency-Key": "before-the-crash"})
        assert status == 201 and data == last and h["idempotent-replayed"] == "true"
        # and the service takes new writes again
        status, _, data, _ = wait_until_ok(srv, "POST", f"/v1/tables/{t['id']}/events",
                                           {"type": "kong", "seat": 3, "kind": "concealed", "tile": "1p"}, auth)
        assert data["seq"] == 8 and sum(data["balances"]) == 0
        assert srv.request("GET", "/readyz")[0] == 200
    finally:
        if not redis_server.running:
            redis_server.start()
        srv.stop()


# -- (d) the embedded redis-server --------------------------------------------------------------------------
def gone(data_dir: Path, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while redis_servers_on(data_dir):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_serve_without_redis_url_runs_an_embedded_redis_that_keeps_tables(tmp_path):
    data = (tmp_path / "redis-data").resolve()
    srv = Service(free_port(), service_env(REDIS_DATA_DIR=str(data)), tmp_path / "service.log")
    srv.start()
    try:
        assert len(redis_servers_on(data)) == 1
        t, auth = new_table(srv)
        append(srv, t, auth, {"type": "round_start"})
        b = append(srv, t, auth, {"type": "kong", "seat": 3, "kind": "concealed", "tile": "6p"})
        assert b["balances"] == [-12, -12, -12, 36]
        _, _, before = srv.request("GET", f"/v1/tables/{t['id']}", headers=auth)
        assert srv.stop() == 0
        assert gone(data), "the embedded redis-server outlived the service"
        assert list(data.rglob("*.aof*")), "no append-only file in REDIS_DATA_DIR"

        srv.start()
        assert len(redis_servers_on(data)) == 1
        status, _, after = srv.request(
            "GET", f"/v1/tables/{t['id']}", headers={"Authorization": "Bearer " + t["read_token"]}
        )
        assert status == 200 and after == before
        assert append(srv, t, auth, {"type": "round_end"})["version"] == 3
    finally:
        srv.stop()
    assert gone(data), "the embedded redis-server outlived the service"
