"""``POST /v1/tables/{id}/next``: the table that follows a finished one (docs/api.md#nexttable), through the
Flask test client on a real Redis.

The new table takes over the finished table's tokens (every phone's tokens open it, nothing plain is kept),
the finished table names it (view, summary, stream) once, and every refusal changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import threading

import pytest

from service.api import create_app
from service.api.stream import Notice, parse_message
from service.config import NO_LIMITS
from service.store import keys
from service.store.table_store import next_table_id
from tests.problems import problem

PLAYERS = ["东", "南", "西", "北"]
STAKES = {"coin_per_point": 10, "fee": 5, "bankrolls": [500, 500, 500, 500]}


@pytest.fixture
def app(redis_url):
    return create_app({"TESTING": True, "REDIS_URL": redis_url, **{var: 0 for var in NO_LIMITS}})


@pytest.fixture
def client(app):
    return app.test_client()


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def finished_table(client, **extra) -> dict:
    """A table with one ended round (a concealed kong: [-2, -2, -2, 6] points), finished."""
    r = client.post("/v1/tables", json={"players": PLAYERS, **extra})
    assert r.status_code == 201, r.get_json()
    table = r.get_json()
    for event in ({"type": "round_start"}, {"type": "kong", "seat": 3, "kind": "concealed", "tile": "1m"},
                  {"type": "round_end"}):
        assert (
            client.post(f"/v1/tables/{table['id']}/events", json=event, headers=bearer(table["token"])).status_code
            == 201
        )
    assert client.post(f"/v1/tables/{table['id']}/finish", headers=bearer(table["token"])).status_code == 200
    return table


def start_next(client, table, body=None, token=None, **headers):
    return client.post(
        f"/v1/tables/{table['id']}/next",
        json={} if body is None else body,
        headers={**bearer(token or table["token"]), **headers},
    )


def test_the_next_table_takes_the_finished_tables_tokens_and_is_named_by_it(client, redis_client):
    old = finished_table(client, ruleset="chengdu-points")
    r = start_next(client, old)
    assert r.status_code == 201, r.get_json()
    new = r.get_json()
    assert new == {
        "id": new["id"],
        "follows": old["id"],
        "players": PLAYERS,
        "ruleset": new["ruleset"],
        "dealer": 0,
        "version": 0,
        "balances": [0, 0, 0, 0],
    }
    assert (
        new["ruleset"] == old["ruleset"] and new["ruleset"]["preset"] == "chengdu-points"
    )  # (left out: the old one's)
    assert r.headers["Location"] == f"/v1/tables/{new['id']}" and new["id"] == next_table_id(old["id"])
    assert "token" not in new and "read_token" not in new
    # every phone's tokens work on it: the write token writes, the read token reads (and may not write)
    assert (
        client.post(
            f"/v1/tables/{new['id']}/events", json={"type": "round_start"}, headers=bearer(old["token"])
        ).status_code
        == 201
    )
    assert client.get(f"/v1/tables/{new['id']}", headers=bearer(old["read_token"])).get_json()["version"] == 1
    problem(
        client.post(f"/v1/tables/{new['id']}/events", json={"type": "round_end"}, headers=bearer(old["read_token"])),
        403,
        "forbidden",
    )
    # the finished table names it, in its view and its summary (either token)
    for token in (old["token"], old["read_token"]):
        assert client.get(f"/v1/tables/{old['id']}", headers=bearer(token)).get_json()["next"] == new["id"]
        assert client.get(f"/v1/tables/{old['id']}/summary", headers=bearer(token)).get_json()["next"] == new["id"]
    assert "next" not in client.get(f"/v1/tables/{new['id']}", headers=bearer(old["token"])).get_json()
    # nothing plain is kept: the new table's meta holds the same SHA-256 digests as the old one's
    digests = [hashlib.sha256(old[k].encode()).hexdigest().encode() for k in ("token", "read_token")]
    assert redis_client.hmget(keys.meta(new["id"]), "token", "read_token") == digests
    assert not any(
        old[k].encode() in v
        for k in ("token", "read_token")
        for v in redis_client.hgetall(keys.meta(new["id"])).values()
    )


def test_the_body_overrides_the_finished_tables_players_ruleset_and_coins(client):
    old = finished_table(client, stakes=STAKES)
    same = start_next(client, old).get_json()
    assert same["coins"] == [500, 500, 500, 500]  # (the bankrolls as they were set, not as they ended)
    other = finished_table(client, stakes=STAKES)
    r = start_next(
        client, other, {"players": ["甲", "乙", "丙"], "ruleset": "sanren-liangfang", "dealer": 2, "stakes": None}
    )
    assert r.status_code == 201, r.get_json()
    body = r.get_json()
    assert body["players"] == ["甲", "乙", "丙"] and body["dealer"] == 2 and "coins" not in body
    assert body["ruleset"]["players"] == 3


def test_a_table_still_being_played_has_no_next_table(client):
    r = client.post("/v1/tables", json={"players": PLAYERS})
    table = r.get_json()
    problem(start_next(client, table), 409, "table_not_finished")
    view = client.get(f"/v1/tables/{table['id']}", headers=bearer(table["token"])).get_json()
    assert "next" not in view and view["finished_at"] is None


def test_who_may_start_the_next_table(client):
    old = finished_table(client)
    problem(start_next(client, old, token=old["read_token"]), 403, "forbidden")
    problem(start_next(client, old, token="x" * 43), 401, "unauthorized")
    problem(client.post(f"/v1/tables/{old['id']}/next", json={}), 401, "unauthorized")
    problem(client.post("/v1/tables/0123456789abcdef/next", json={}, headers=bearer(old["token"])), 401, "unauthorized")
    client.delete(f"/v1/tables/{old['id']}", headers=bearer(old["token"]))
    problem(start_next(client, old), 404, "table_not_found")
    assert client.get(f"/v1/tables/{next_table_id(old['id'])}", headers=bearer(old["token"])).status_code == 401


@pytest.mark.parametrize(
    "body, field, code",
    [
        ({"players": ["a", "b"]}, "players", "invalid_input"),
        ({"ruleset": "no-such"}, "ruleset", "unknown_ruleset"),
        ({"stakes": {"coin_per_point": 0, "fee": 0, "bankrolls": [1, 1, 1, 1]}}, "stakes.coin_per_point", "bad_stakes"),
        ({"dealer": 4}, "dealer", "invalid_input"),
        ({"players": ["a", "b", "c"]}, "players", "bad_players"),
    ],
)
def test_a_bad_body_is_refused_and_starts_nothing(client, body, field, code):
    old = finished_table(client)
    r = start_next(client, old, body)
    answer = problem(r, 422, code)
    assert field in answer["errors"], answer
    assert "next" not in client.get(f"/v1/tables/{old['id']}", headers=bearer(old["token"])).get_json()
    assert client.get(f"/v1/tables/{next_table_id(old['id'])}", headers=bearer(old["token"])).status_code == 401


def test_one_next_table_a_retry_with_its_key_replays_and_another_start_is_told_where_it_is(client):
    old = finished_table(client)
    first = start_next(client, old, {"dealer": 1}, **{"Idempotency-Key": "phone-1:next"})
    assert first.status_code == 201 and "Idempotent-Replayed" not in first.headers
    again = start_next(client, old, {"dealer": 1}, **{"Idempotency-Key": "phone-1:next"})
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.get_json() == first.get_json()
    next_id = first.get_json()["id"]
    for body, headers in (
        ({"dealer": 1}, {}),
        ({"dealer": 2}, {"Idempotency-Key": "phone-1:next"}),
        ({}, {"Idempotency-Key": "phone-2:next"}),
    ):
        answer = problem(start_next(client, old, body, **headers), 409, "table_followed")
        assert answer["next"] == next_id
    # the next table was not touched by them
    assert client.get(f"/v1/tables/{next_id}", headers=bearer(old["token"])).get_json()["dealer"] == 1


def test_two_phones_starting_the_next_table_at_once_reach_the_same_one(app):
    old = finished_table(app.test_client())
    answers: list = [None] * 8
    gate = threading.Barrier(8)

    def phone(i: int) -> None:
        c = app.test_client()
        gate.wait()
        answers[i] = start_next(c, old, {"dealer": i % 4})

    threads = [threading.Thread(target=phone, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    made = [a for a in answers if a.status_code == 201]
    assert len(made) == 1, [a.get_json() for a in answers]
    next_id = made[0].get_json()["id"]
    assert all(a.status_code == 409 and a.get_json()["next"] == next_id for a in answers if a is not made[0])
    view = app.test_client().get(f"/v1/tables/{next_id}", headers=bearer(old["token"])).get_json()
    assert view["dealer"] == made[0].get_json()["dealer"]


def test_the_finished_tables_tokens_after_a_rotation(client):
    old = finished_table(client)
    rotated = client.post(f"/v1/tables/{old['id']}/tokens/rotate", headers=bearer(old["token"])).get_json()
    problem(start_next(client, old), 401, "unauthorized")  # the old write token no longer works
    new = start_next(client, old, token=rotated["token"]).get_json()
    assert client.get(f"/v1/tables/{new['id']}", headers=bearer(rotated["read_token"])).status_code == 200
    assert client.get(f"/v1/tables/{new['id']}", headers=bearer(old["read_token"])).status_code == 401


def test_an_unnamed_next_table_is_named_by_the_next_attempt(client, redis_client):
    """A start that stopped between its two writes (the next table made, not yet named): the next attempt
    names it, and answers as for a table followed already."""
    old = finished_table(client)
    new = start_next(client, old).get_json()
    redis_client.hdel(keys.meta(old["id"]), "next")  # as if the naming had not happened
    assert "next" not in client.get(f"/v1/tables/{old['id']}", headers=bearer(old["token"])).get_json()
    assert problem(start_next(client, old), 409, "table_followed")["next"] == new["id"]
    assert client.get(f"/v1/tables/{old['id']}", headers=bearer(old["token"])).get_json()["next"] == new["id"]


def test_the_channel_message_is_an_event_next_frame():
    notice = parse_message(json.dumps({"next": "0123456789abcdef"}).encode())
    assert isinstance(notice, Notice)
    assert notice.data == b'event: next\ndata: {"next":"0123456789abcdef"}\n\n'
    finished = parse_message(b'{"finished_at":"2026-12-05T18:00:00Z"}')
    assert finished.data.startswith(b"event: finished\n")


def test_with_api_keys_the_creating_key_may_start_it_and_owns_it(redis_url):
    key = "k" * 40
    app = create_app(
        {"TESTING": True, "REDIS_URL": redis_url, "API_KEYS": f"club={key}", **{var: 0 for var in NO_LIMITS}}
    )
    client = app.test_client()
    old = finished_table_with_key(client, key)
    r = client.post(f"/v1/tables/{old['id']}/next", json={}, headers={"X-API-Key": key})
    assert r.status_code == 201, r.get_json()
    listed = [t["id"] for t in client.get("/v1/tables", headers={"X-API-Key": key}).get_json()["tables"]]
    assert listed[0] == r.get_json()["id"]
    # a phone holding only the table's token needs no key
    assert client.get(f"/v1/tables/{r.get_json()['id']}", headers=bearer(old["read_token"])).status_code == 200


def finished_table_with_key(client, key: str) -> dict:
    headers = {"X-API-Key": key}
    table = client.post("/v1/tables", json={"players": PLAYERS}, headers=headers).get_json()
    assert client.post(f"/v1/tables/{table['id']}/finish", headers=headers).status_code == 200
    return table
