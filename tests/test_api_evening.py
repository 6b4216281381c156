"""The end of an evening through the HTTP API: finishing a table, its summary and settle-up, and the
tables an API key owns (read and written with the key alone)."""

from __future__ import annotations

import pytest

from service.api.app import create_app
from service.config import NO_LIMITS

PLAYERS = {"players": ["小李", "老王", "阿芳", "大刘"]}
KEY, OTHER = "k" * 40, "o" * 40


@pytest.fixture
def keyed(redis_url):
    return create_app({"TESTING": True, "REDIS_URL": redis_url, **{v: 0 for v in NO_LIMITS},
                       "API_KEYS": f"acme={KEY},other={OTHER}"}).test_client()


def _table(client, headers=None) -> tuple[str, dict, dict]:
    t = client.post("/v1/tables", json=PLAYERS, headers=headers or {}).get_json()
    return t["id"], {"Authorization": f"Bearer {t['token']}"}, {"Authorization": f"Bearer {t['read_token']}"}


def _post(client, tid, auth, *events):
    for event in events:
        r = client.post(f"/v1/tables/{tid}/events", json=event, headers=auth)
        assert r.status_code == 201, r.get_json()
    return r


ZIMO = {"type": "hu", "from": None, "tile": "5p", "winners": [{"seat": 1, "fan": 3}]}   # 24 from each other seat
DIANPAO = {"type": "hu", "from": 0, "tile": "6s", "winners": [{"seat": 2, "fan": 2}]}   # 12 from seat 0
KONG = {"type": "kong", "seat": 3, "kind": "concealed", "tile": "7m"}                  # 12 from each other seat


def test_a_round_in_progress_must_end_before_the_table_finishes(client):
    tid, write, read = _table(client)
    _post(client, tid, write, {"type": "round_start"}, KONG)
    r = client.post(f"/v1/tables/{tid}/finish", headers=write)
    assert r.status_code == 409 and r.get_json()["code"] == "round_in_progress"
    assert client.post(f"/v1/tables/{tid}/finish", headers=read).status_code == 403
    _post(client, tid, write, {"type": "round_end"})
    first = client.post(f"/v1/tables/{tid}/finish", headers=write)
    assert first.status_code == 200
    view = first.get_json()
    assert view["finished_at"].endswith("Z") and view["version"] == 3 and view["balances"] == [-12, -12, -12, 36]
    again = client.post(f"/v1/tables/{tid}/finish", headers=write)  # idempotent: the same moment
    assert again.status_code == 200 and again.get_json()["finished_at"] == view["finished_at"]
    assert client.get(f"/v1/tables/{tid}", headers=read).get_json()["finished_at"] == view["finished_at"]


def test_a_finished_table_refuses_events_and_voids_and_stays_readable(client):
    tid, write, read = _table(client)
    _post(client, tid, write, {"type": "round_start"}, KONG, {"type": "round_end"})
    keyed_retry = {"Idempotency-Key": "end-1", **write}
    client.post(f"/v1/tables/{tid}/events", json={"type": "round_start"}, headers=keyed_retry)
    _post(client, tid, write, {"type": "round_end"})
    assert client.post(f"/v1/tables/{tid}/finish", headers=write).status_code == 200
    for r in (client.post(f"/v1/tables/{tid}/events", json={"type": "round_start"}, headers=write),
              client.post(f"/v1/tables/{tid}/events/2/void", headers=write)):
        assert r.status_code == 409 and r.get_json()["code"] == "table_finished", r.get_json()
    # a retry of a write made before the finish still answers as it did
    replay = client.post(f"/v1/tables/{tid}/events", json={"type": "round_start"}, headers=keyed_retry)
    assert replay.status_code == 201 and replay.headers["Idempotent-Replayed"] == "true"
    assert client.get(f"/v1/tables/{tid}/events", headers=read).get_json()["events"][-1]["seq"] == 5
    assert client.get(f"/v1/tables/{tid}/summary", headers=read).status_code == 200


def test_the_summary_counts_the_evening_and_settles_it_up_in_the_fewest_payments(client):
    tid, write, read = _table(client)
    _post(client, tid, write, {"type": "round_start"}, KONG, ZIMO, DIANPAO, {"type": "round_end"})
    running = client.get(f"/v1/tables/{tid}/summary", headers=read).get_json()  # a running tally
    assert running["finished_at"] is None and running["rounds"] == 1
    seats = running["seats"]
    assert [s["total"] for s in seats] == [-12 - 24 - 12, 72 - 12, -12 - 24 + 12, 36 - 24]
    assert [s["total"] for s in seats] == client.get(f"/v1/tables/{tid}", headers=read).get_json()["balances"]
    assert [s["rank"] for s in seats] == [4, 1, 3, 2]
    assert seats[1]["wins"] == seats[1]["zimo"] == 1 and seats[2]["wins"] == 1 and seats[2]["zimo"] == 0
    assert seats[0]["dianpao_paid"] == 1 and seats[3]["kongs"] == {"direct": 0, "added": 0, "concealed": 1}
    assert seats[1]["biggest_win"] == {"round": 1, "fan": 3, "patterns": [], "points": 72}
    assert seats[0]["name"] == "小李" and seats[0]["biggest_win"] is None
    payments = running["settle_up"]
    assert len(payments) <= 3
    after = [s["total"] for s in seats]
    for p in payments:
        after[p["from"]] += p["points"]
        after[p["to"]] -= p["points"]
    assert after == [0, 0, 0, 0]
    assert client.post(f"/v1/tables/{tid}/finish", headers=write).status_code == 200
    done = client.get(f"/v1/tables/{tid}/summary", headers=read).get_json()
    assert done["finished_at"] is not None and done["settle_up"] == payments


def test_a_summary_with_stakes_has_coins_per_seat_and_per_payment(client):
    t = client.post("/v1/tables", json={**PLAYERS, "stakes": {"coin_per_point": 100, "fee": 0,
                                                              "bankrolls": [10000] * 4}}).get_json()
    tid, write = t["id"], {"Authorization": f"Bearer {t['token']}"}
    _post(client, tid, write, {"type": "round_start"}, KONG, {"type": "round_end"})
    summary = client.get(f"/v1/tables/{tid}/summary", headers=write).get_json()
    assert [s["coins"] for s in summary["seats"]] == [-1200, -1200, -1200, 3600]
    # in coins: each debtor pays what its bankroll lost (docs/rules.md#s10.1)
    assert summary["settle_up"] == [{"from": s, "to": 3, "coins": 1200} for s in range(3)]


def test_the_key_that_created_a_table_reads_and_writes_it_alone_and_no_other_key_sees_it(keyed):
    key, other = {"X-API-Key": KEY}, {"X-API-Key": OTHER}
    tid, write, _ = _table(keyed, key)
    url = f"/v1/tables/{tid}"
    assert keyed.post(f"{url}/events", json={"type": "round_start"}, headers=key).status_code == 201
    assert keyed.post(f"{url}/events", json=KONG, headers=key).get_json()["balances"] == [-12, -12, -12, 36]
    assert keyed.get(url, headers=key).get_json()["version"] == 2
    assert keyed.get(f"{url}/events", headers=key).status_code == 200
    assert keyed.get(f"{url}/summary", headers=key).status_code == 200
    for r in (keyed.get(url, headers=other), keyed.post(f"{url}/events", json=KONG, headers=other),
              keyed.get("/v1/tables/0123456789abcdef", headers=other)):
        assert r.status_code == 404 and r.get_json()["code"] == "table_not_found"  # as for an unknown table
    # the phones keep using the table's tokens
    assert keyed.post(f"{url}/events", json={"type": "round_end"}, headers=write).status_code == 201
    assert keyed.post(f"{url}/finish", headers=key).status_code == 200
    assert keyed.delete(url, headers=other).status_code == 404
    assert keyed.delete(url, headers=key).status_code == 204
