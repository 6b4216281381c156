"""``POST /v1/tables/{id}/tokens/rotate`` (docs/api.md): new tokens, the old ones 401 at once (in every
worker), their open streams end with ``event: rotated``; who may rotate."""

from __future__ import annotations

import time
import uuid

import pytest

from service.api import create_app
from service.config import NO_LIMITS
from tests.problems import problem

ACME = "acme-" + "a" * 40
BETA = "beta-" + "b" * 40
KEYS = f"acme={ACME},beta={BETA}"
PLAYERS = ["东", "南", "西", "北"]
KONG = {"type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"}
APP_CONFIG = {"API_KEYS": KEYS, "STREAM_HEARTBEAT": 1}
pytestmark = pytest.mark.app(**APP_CONFIG)


def make_app(url, **config):
    return create_app({"TESTING": True, "REDIS_URL": url, **APP_CONFIG, **{var: 0 for var in NO_LIMITS}, **config})


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def table(client, **headers) -> dict:
    r = client.post("/v1/tables", json={"players": PLAYERS}, headers={"X-API-Key": ACME, **headers})
    assert r.status_code == 201
    return r.get_json()


def rotate(client, table_id, headers) -> dict:
    r = client.post(f"/v1/tables/{table_id}/tokens/rotate", headers=headers)
    assert r.status_code == 200, r.get_data(as_text=True)
    assert r.headers["Cache-Control"] == "no-store"
    return r.get_json()


def test_the_old_tokens_stop_at_once_and_the_new_ones_work(client):
    t = table(client)
    assert client.post(f"/v1/tables/{t['id']}/events", json={"type": "round_start"},
                       headers=bearer(t["token"])).status_code == 201  # (a kept state with the old token)
    new = rotate(client, t["id"], bearer(t["token"]))
    assert set(new) == {"token", "read_token"} and new["token"] != t["token"] and new["read_token"] != t["read_token"]
    for old in (t["token"], t["read_token"]):
        problem(client.get(f"/v1/tables/{t['id']}", headers=bearer(old)), 401, "unauthorized")
    problem(client.post(f"/v1/tables/{t['id']}/events", json=KONG, headers=bearer(t["token"])), 401, "unauthorized")
    problem(client.post(f"/v1/tables/{t['id']}/tokens/rotate", headers=bearer(t["token"])), 401, "unauthorized")
    assert client.post(f"/v1/tables/{t['id']}/events", json=KONG, headers=bearer(new["token"])).status_code == 201
    assert client.get(f"/v1/tables/{t['id']}", headers=bearer(new["read_token"])).get_json()["version"] == 2
    problem(client.post(f"/v1/tables/{t['id']}/events", json=KONG, headers=bearer(new["read_token"])), 403,
            "forbidden")


def test_who_may_rotate(client):
    t = table(client)
    problem(client.post(f"/v1/tables/{t['id']}/tokens/rotate", headers=bearer(t["read_token"])), 403, "forbidden")
    problem(client.post(f"/v1/tables/{t['id']}/tokens/rotate", headers={"X-API-Key": BETA}), 404, "table_not_found")
    problem(client.post(f"/v1/tables/{t['id']}/tokens/rotate"), 401, "api_key_required")
    problem(client.post("/v1/tables/0123456789abcdef/tokens/rotate", headers={"X-API-Key": ACME}), 404,
            "table_not_found")
    by_key = rotate(client, t["id"], {"X-API-Key": ACME})  # the key that created the table
    problem(client.get(f"/v1/tables/{t['id']}", headers=bearer(t["token"])), 401, "unauthorized")
    assert client.get(f"/v1/tables/{t['id']}", headers=bearer(by_key["token"])).status_code == 200
    assert client.delete(f"/v1/tables/{t['id']}", headers={"X-API-Key": ACME}).status_code == 204
    problem(client.post(f"/v1/tables/{t['id']}/tokens/rotate", headers={"X-API-Key": ACME}), 404, "table_not_found")


def test_another_workers_kept_state_does_not_let_an_old_token_write(redis_url):
    one, two = make_app(redis_url).test_client(), make_app(redis_url).test_client()
    t = table(one)
    assert one.post(f"/v1/tables/{t['id']}/events", json={"type": "round_start"},
                    headers=bearer(t["token"])).status_code == 201  # worker one keeps the state, old token's hash
    rotate(two, t["id"], bearer(t["token"]))
    problem(one.post(f"/v1/tables/{t['id']}/events", json=KONG, headers=bearer(t["token"])), 401, "unauthorized")


def test_a_creation_retried_after_a_rotation_says_the_tokens_were_rotated(client):
    key = {"Idempotency-Key": str(uuid.uuid4())}
    t = table(client, **key)
    rotate(client, t["id"], bearer(t["token"]))
    body = problem(client.post("/v1/tables", json={"players": PLAYERS}, headers={"X-API-Key": ACME, **key}), 409,
                   "tokens_rotated")
    assert f"/v1/tables/{t['id']}/tokens/rotate" in body["detail"] and "24 h" not in body["detail"]
    assert t["token"] not in body["detail"]


def rotate_keyed(client, table_id, headers, key: str):
    return client.post(f"/v1/tables/{table_id}/tokens/rotate", headers={**headers, "Idempotency-Key": key})


def test_a_rotation_retried_with_its_key_and_the_old_token_answers_the_same_new_tokens(client):
    """A phone that lost the rotation's answer sends it again as it was: the same new tokens, once."""
    t = table(client)
    key = str(uuid.uuid4())
    first = rotate_keyed(client, t["id"], bearer(t["token"]), key)
    assert first.status_code == 200 and "Idempotent-Replayed" not in first.headers
    again = rotate_keyed(client, t["id"], bearer(t["token"]), key)  # the old token: still good for this replay
    assert again.status_code == 200, again.get_data(as_text=True)
    assert again.get_json() == first.get_json()
    assert again.headers["Idempotent-Replayed"] == "true" and again.headers["Cache-Control"] == "no-store"
    new = first.get_json()
    assert client.post(f"/v1/tables/{t['id']}/events", json={"type": "round_start"},
                       headers=bearer(new["token"])).status_code == 201  # the replayed tokens are the table's
    # the old token is good for that replay only
    problem(client.post(f"/v1/tables/{t['id']}/events", json=KONG, headers=bearer(t["token"])), 401, "unauthorized")
    problem(rotate_keyed(client, t["id"], bearer(t["token"]), str(uuid.uuid4())), 401, "unauthorized")
    problem(client.post(f"/v1/tables/{t['id']}/tokens/rotate", headers=bearer(t["token"])), 401, "unauthorized")
    problem(rotate_keyed(client, t["id"], bearer(t["read_token"]), key), 401, "unauthorized")  # (not who rotated)
    # the same key with the new write token (another caller that may rotate): reused, nothing rotated
    problem(rotate_keyed(client, t["id"], bearer(new["token"]), key), 422, "idempotency_key_reused")
    assert client.get(f"/v1/tables/{t['id']}", headers=bearer(new["read_token"])).status_code == 200


def test_a_keyed_rotation_by_the_creating_api_key_replays_for_that_key_only(client):
    t = table(client)
    key = str(uuid.uuid4())
    first = rotate_keyed(client, t["id"], {"X-API-Key": ACME}, key)
    assert first.status_code == 200
    again = rotate_keyed(client, t["id"], {"X-API-Key": ACME}, key)
    assert again.status_code == 200 and again.get_json() == first.get_json()
    assert again.headers["Idempotent-Replayed"] == "true"
    problem(rotate_keyed(client, t["id"], bearer(first.get_json()["token"]), key), 422, "idempotency_key_reused")
    problem(rotate_keyed(client, t["id"], {"X-API-Key": BETA}, key), 404, "table_not_found")


def test_only_the_last_rotation_replays(client):
    """A later rotation (keyed or not) ends the replay of an earlier one: its tokens no longer work."""
    t = table(client)
    one, two = str(uuid.uuid4()), str(uuid.uuid4())
    first = rotate_keyed(client, t["id"], bearer(t["token"]), one).get_json()
    second = rotate_keyed(client, t["id"], bearer(first["token"]), two).get_json()
    assert second != first
    problem(rotate_keyed(client, t["id"], bearer(t["token"]), one), 401, "unauthorized")
    assert rotate_keyed(client, t["id"], bearer(first["token"]), two).get_json() == second
    third = rotate(client, t["id"], bearer(second["token"]))
    problem(rotate_keyed(client, t["id"], bearer(first["token"]), two), 401, "unauthorized")
    assert client.get(f"/v1/tables/{t['id']}", headers=bearer(third["read_token"])).status_code == 200


def test_a_rotation_is_replayed_only_within_its_24_hours(redis_url):
    client = make_app(redis_url).test_client()
    t = table(client)
    key = str(uuid.uuid4())
    first = rotate_keyed(client, t["id"], bearer(t["token"]), key).get_json()
    from service.store import keys, redis_client

    r = redis_client.connect(redis_url)
    kept = r.ttl(keys.rotation(t["id"]))
    assert 24 * 3600 - 60 < kept <= 24 * 3600
    assert r.hget(keys.rotation(t["id"]), "tokens") and first["token"].encode() not in r.dump(keys.rotation(t["id"]))
    r.delete(keys.rotation(t["id"]))  # (what its TTL does after 24 h)
    problem(rotate_keyed(client, t["id"], bearer(t["token"]), key), 401, "unauthorized")


def test_a_rotation_key_is_checked_like_a_writes(client):
    t = table(client)
    body = problem(rotate_keyed(client, t["id"], bearer(t["token"]), "é" * 3), 422, "invalid_input")
    assert "Idempotency-Key" in body["errors"]
    assert client.get(f"/v1/tables/{t['id']}", headers=bearer(t["token"])).status_code == 200  # nothing rotated


def test_deleting_the_table_drops_its_kept_rotation(redis_url):
    client = make_app(redis_url).test_client()
    t = table(client)
    first = rotate_keyed(client, t["id"], bearer(t["token"]), "rotate-1").get_json()
    from service.store import keys, redis_client

    assert redis_client.connect(redis_url).exists(keys.rotation(t["id"]))
    assert client.delete(f"/v1/tables/{t['id']}", headers=bearer(first["token"])).status_code == 204
    assert not redis_client.connect(redis_url).exists(keys.rotation(t["id"]))


def _events(chunks, until: float) -> tuple[list[str], bool]:
    """The ``event:`` names of the chunks a stream sends until it ends (or ``until``), and whether it ended."""
    names = []
    for chunk in chunks:
        names += [line[len("event: "):] for line in chunk.decode().splitlines() if line.startswith("event: ")]
        if time.monotonic() > until:
            return names, False
    return names, True


def until_record(chunks, within: float = 10.0) -> bytes:
    """What a stream sends until its first record (or ``within`` seconds)."""
    got, deadline = b"", time.monotonic() + within
    while b"event: record" not in got and time.monotonic() < deadline:
        got += next(chunks)
    return got


def test_a_stream_with_an_old_token_ends_with_rotated_and_one_with_the_new_token_goes_on(app, client):
    t = table(client)
    old_stream = client.get(f"/v1/tables/{t['id']}/stream", headers=bearer(t["read_token"]), buffered=False)
    assert old_stream.status_code == 200
    chunks = iter(old_stream.response)
    assert next(chunks).startswith(b"retry: 3000")
    new = rotate(client, t["id"], bearer(t["token"]))
    assert _events(chunks, time.monotonic() + 10) == (["rotated"], True)  # and then the stream ended
    old_stream.close()
    problem(client.get(f"/v1/tables/{t['id']}/stream", headers=bearer(t["read_token"])), 401, "unauthorized")

    fresh = client.get(f"/v1/tables/{t['id']}/stream", headers=bearer(new["read_token"]), buffered=False)
    chunks = iter(fresh.response)
    assert next(chunks).startswith(b"retry: 3000")
    assert client.post(f"/v1/tables/{t['id']}/events", json={"type": "round_start"},
                       headers=bearer(new["token"])).status_code == 201
    got = until_record(chunks)
    assert b"event: record" in got and b"rotated" not in got
    fresh.close()
    assert app.extensions["stream_hub"].subscribers == 0


def test_a_stream_opened_with_the_creating_key_goes_on_after_a_rotation(app, client):
    t = table(client)
    keyed = client.get(f"/v1/tables/{t['id']}/stream", headers={"X-API-Key": ACME}, buffered=False)
    assert keyed.status_code == 200
    chunks = iter(keyed.response)
    assert next(chunks).startswith(b"retry: 3000")
    new = rotate(client, t["id"], {"X-API-Key": ACME})
    assert client.post(f"/v1/tables/{t['id']}/events", json={"type": "round_start"},
                       headers=bearer(new["token"])).status_code == 201
    got = until_record(chunks)
    assert b"event: record" in got and b"rotated" not in got  # the key still may read: no end
    keyed.close()
    assert app.extensions["stream_hub"].subscribers == 0
