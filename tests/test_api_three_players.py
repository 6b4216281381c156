"""Three-player tables (三人两房, docs/rules.md#s14) end to end over HTTP.

Flask's test client on a real Redis for the refusals and the worked example; then a real
``python -m service serve`` for a three-player table with stakes, a void and a restart of the
service.  Expected points and coins are worked out by hand in the comments (base 6, cap 4).
"""

from __future__ import annotations

import pytest

from tests.problems import problem
from tests.service_process import Service, free_port, service_env

THREE = ["东", "南", "西"]
PROBLEM = "application/problem+json"
DIRECT_5P = {"type": "kong", "seat": 0, "kind": "direct", "tile": "5p", "from": 1}


def new_table(client, **body) -> tuple[str, dict]:
    r = client.post("/v1/tables", json={"players": THREE, "ruleset": "sanren-liangfang", **body})
    assert r.status_code == 201, r.get_data(as_text=True)
    t = r.get_json()
    return f"/v1/tables/{t['id']}", {"Authorization": f"Bearer {t['token']}"}


@pytest.mark.parametrize("body, code, field", [
    ({"players": THREE + ["北"], "ruleset": "sanren-liangfang"}, "bad_players", "players"),
    ({"players": THREE, "ruleset": "xuezhan"}, "bad_players", "players"),
    ({"players": THREE}, "bad_players", "players"),
    ({"players": THREE, "ruleset": {"preset": "xueliu", "players": 3}, "dealer": 3}, "seat_out_of_range", "dealer"),
    ({"players": THREE, "ruleset": "sanren-liangfang",
      "stakes": {"coin_per_point": 1, "bankrolls": [1, 1, 1, 1]}}, "bad_stakes", "stakes.bankrolls"),
])
def test_creation_names_as_many_seats_as_the_ruleset(client, redis_client, body, code, field):
    got = problem(client.post("/v1/tables", json=body), 422, code)
    assert field in got["errors"]
    assert redis_client.keys("{t:*") == []


def test_section_14_worked_example_at_a_table_over_http(client):
    url, auth = new_table(client)
    view = client.get(url, headers=auth).get_json()
    assert view["players"] == THREE and view["balances"] == [0, 0, 0] and view["ruleset"]["players"] == 3
    post = lambda ev: client.post(f"{url}/events", json=ev, headers=auth)  # noqa: E731
    assert post({"type": "round_start"}).get_json()["round"]["deltas"] == [0, 0, 0]
    assert post(DIRECT_5P).get_json()["balances"] == [12, -12, 0]                 # 2 units from the discarder
    problem(post({"type": "hu", "from": 2, "tile": "6p", "winners": [{"seat": 1, "fan": 1}]}), 422, "dianpao_pinghu")
    assert post({"type": "hu", "from": 2, "tile": "6p",
                 "winners": [{"seat": 1, "fan": 2}]}).get_json()["balances"] == [12, 0, -12]
    end = post({"type": "hu", "from": None, "tile": "9s", "winners": [{"seat": 0, "fan": 5}]}).get_json()
    assert end["balances"] == [60, 0, -60]                                        # 6 × 8 from seat 2 alone
    assert end["round"]["status"] == "ended" and end["round"]["next_dealer"] == 1
    assert [len(x) for x in (end["round"]["deltas"], end["round"]["voids"])] == [3, 3]


@pytest.mark.parametrize("event, code", [
    ({"type": "round_start", "voids": ["m", None, None]}, "void_not_allowed"),
    ({"type": "round_start", "voids": [None, None, None, None]}, "bad_event"),
    ({"type": "round_start", "dealer": 3}, "seat_out_of_range"),
    ({"type": "kong", "seat": 3, "kind": "concealed", "tile": "1p"}, "seat_out_of_range"),
    ({"type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"}, "suit_not_in_play"),
    ({"type": "hu", "from": None, "tile": "5万", "winners": [{"seat": 0, "fan": 2}]}, "suit_not_in_play"),
    ({"type": "draw", "seats": [{"seat": s, "status": "not_ting"} for s in range(4)]}, "seat_out_of_range"),
])
def test_a_fourth_seat_a_wan_tile_or_a_void_is_a_clear_422(client, event, code):
    url, auth = new_table(client)
    if event["type"] != "round_start":
        client.post(f"{url}/events", json={"type": "round_start"}, headers=auth)
    before = client.get(url, headers=auth).get_json()
    problem(client.post(f"{url}/events", json=event, headers=auth), 422, code)
    assert client.get(url, headers=auth).get_json() == before


# -- a real server: a three-player table with stakes, a void, a restart --------------------------------
@pytest.mark.slow  # (a real server: the fast lane leaves it out)
def test_three_player_table_with_stakes_a_void_and_a_restart(redis_url, tmp_path):
    srv = Service(free_port(), service_env(REDIS_URL=redis_url), tmp_path / "service.log").start()
    try:
        status, _, t = srv.request("POST", "/v1/tables", {
            "players": THREE, "ruleset": "sanren-liangfang",
            "stakes": {"coin_per_point": 10, "fee": 5, "bankrolls": [1000, 1000, 300]}})
        assert status == 201 and t["coins"] == [1000, 1000, 300] and t["balances"] == [0, 0, 0]
        auth = {"Authorization": "Bearer " + t["token"]}
        url = f"/v1/tables/{t['id']}"

        def post(event):
            status, _, body = srv.request("POST", f"{url}/events", event, auth)
            assert status == 201, (event, body)
            return body

        post({"type": "round_start"})
        post(DIRECT_5P)                                                    # [12, -12, 0]
        post({"type": "kong", "seat": 2, "kind": "concealed", "tile": "9s"})  # 12 from each: [0, -24, 24]
        status, _, refused = srv.request("POST", f"{url}/events", {"type": "buy_in", "seat": 0, "coins": 5}, auth)
        assert status == 422 and refused["code"] == "round_in_progress"
        voided = srv.request("POST", f"{url}/events/3/void", None, auth)
        assert voided[0] == 201 and voided[2]["balances"] == [12, -12, 0] and voided[2]["deltas"] == [12, 12, -24]
        post({"type": "hu", "from": 2, "tile": "6p", "winners": [{"seat": 1, "fan": 2}]})   # [12, 0, -12]
        end = post({"type": "hu", "from": None, "tile": "9s", "winners": [{"seat": 0, "fan": 4}]})
        # 48 from seat 2 (seat 1 has won and left): deltas [60, 0, -60]; seat 2 owes 600, holds 300
        assert end["balances"] == [60, 0, -60] and end["round"]["coins_delta"] == [295, -5, -300]
        assert end["coins"] == [1295, 995, 0] and end["round"]["fees"] == [5, 5, 0]
        post({"type": "buy_in", "seat": 2, "coins": 200})
        _, _, before = srv.request("GET", url, headers=auth)
        _, _, log_before = srv.request("GET", f"{url}/events?limit=100", headers=auth)
        assert before["coins"] == [1295, 995, 200] and before["rounds"][0]["bankrolls"] == [1000, 1000, 300]

        assert srv.stop() == 0
        srv.start()
        status, _, after = srv.request("GET", url, headers={"Authorization": "Bearer " + t["read_token"]})
        assert status == 200 and after == before
        assert srv.request("GET", f"{url}/events?limit=100", headers=auth)[2] == log_before
        # the table goes on after the restart: round 2 (dealer seat 1, the first winner), and a void of the buy-in
        assert post({"type": "round_start"})["round"]["dealer"] == 1
        # seat 1 leaves: 16 units (96 points) to each other seat, 960 coins each; it holds 995, shared
        # 497 each and the coin left to the lower seat (equal remainders), then the fee
        escaped = post({"type": "escape", "seat": 1})
        assert escaped["balances"] == [156, -192, 36] and escaped["coins"] == [1295 + 498 - 5, 0, 200 + 497 - 5]
        status, _, body = srv.request("POST", f"{url}/events/{len(log_before['events'])}/void", None, auth)
        assert status == 201, body
        # without the buy-in seat 2 starts round 2 with nothing: the same pot, then the fee
        assert body["voided"] == 7 and body["coins"] == [1788, 0, 497 - 5]
        assert body["balances"] == [156, -192, 36] and body["deltas"] == [0, 0, 0]
        _, _, view = srv.request("GET", url, headers=auth)
        assert view["coins"] == body["coins"] and [r["bankrolls"] for r in view["rounds"]] == [
            [1000, 1000, 300], [1295, 995, 0]]
    finally:
        srv.stop()
