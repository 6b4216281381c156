"""The new rooms (血流成河, 三人两房, the run extras) through the existing HTTP endpoints: answers, never a 5xx.

Three-player tables end to end over HTTP (three names, seats 0-2, voids, coins, a restart) are in
tests/test_api_three_players.py.
"""

from __future__ import annotations

import pytest

from tests.problems import problem

PLAYERS = ["东", "南", "西", "北"]
PROBLEM = "application/problem+json"


def test_settle_section_13_and_14_examples_over_http(client):
    body = client.post("/v1/rounds/settle", json={"ruleset": "xueliu", "dealer": 0, "events": [
        {"type": "kong", "seat": 0, "kind": "concealed", "tile": "5m"},
        {"type": "hu", "from": None, "tile": "3s", "winners": [{"seat": 1, "fan": 2}]},
        {"type": "hu", "from": 0, "tile": "4s", "winners": [{"seat": 1, "fan": 1}]},
        {"type": "kong", "seat": 1, "kind": "concealed", "tile": "9p"},
        {"type": "draw", "seats": [{"seat": 0, "status": "not_ting"}, {"seat": 2, "status": "ting", "dajiao_fan": 2},
                                   {"seat": 3, "status": "huazhu"}]}]}).get_json()
    assert body["deltas"] == [54, 174, 84, -312] and body["next_dealer"] == 1 and body["winners"] == [1]
    body = client.post("/v1/rounds/settle", json={"ruleset": "sanren-liangfang", "dealer": 0, "voids": [None] * 3,
                                                  "events": [
        {"type": "kong", "seat": 0, "kind": "direct", "tile": "5p", "from": 1},
        {"type": "hu", "from": 2, "tile": "3s", "winners": [{"seat": 1, "fan": 2}]},
        {"type": "hu", "from": None, "tile": "6s", "winners": [{"seat": 0, "fan": 5}]}]}).get_json()
    assert body["deltas"] == [60, 0, -60] and body["ended"] and body["next_dealer"] == 1


@pytest.mark.parametrize(
    "payload, status, code",
    [
        (
            {"dealer": 0, "events": [{"type": "kong", "seat": 3, "kind": "concealed", "tile": "5p"}]},
            422,
            "seat_out_of_range",
        ),
        ({"dealer": 3, "events": []}, 422, "seat_out_of_range"),
        ({"dealer": 0, "voids": ["p", None, None], "events": []}, 422, "void_not_allowed"),
        ({"dealer": 0, "voids": [None] * 4, "events": []}, 422, "bad_event"),
        ({"dealer": 0, "events": [{"type": "peng", "seat": 0, "tile": "5m", "from": 1}]}, 422, "suit_not_in_play"),
        (
            {"dealer": 0, "events": [{"type": "hu", "from": 2, "tile": "3s", "winners": [{"seat": 1, "fan": 1}]}]},
            422,
            "dianpao_pinghu",
        ),
    ],
)
def test_settle_three_player_refusals(client, payload, status, code):
    body = problem(client.post("/v1/rounds/settle", json={"ruleset": "sanren-liangfang", **payload}), status, code)
    assert body["event"] == 0


def test_settle_xueliu_refusals(client):
    events = [{"type": "hu", "from": None, "tile": "5p", "winners": [{"seat": 1, "fan": 1}]},
              {"type": "peng", "seat": 1, "tile": "7s", "from": 0}]
    body = problem(client.post("/v1/rounds/settle", json={"ruleset": "xueliu", "dealer": 0, "events": events}),
                   422, "claim_after_win")
    assert body["event"] == 1


@pytest.mark.parametrize("path, body, code", [
    ("/v1/hands/score", {"hand": {"tiles": "123m456789p11p555p"}, "win": {"tile": "5p"}}, "suit_not_in_play"),
    ("/v1/hands/ting", {"hand": {"tiles": "1112345678999p", "void": "s"}}, "void_not_allowed"),
    ("/v1/hands/discards", {"hand": {"tiles": "123m456789p11p555p"}}, "suit_not_in_play"),
    ("/v1/hands/validate", {"hand": {"tiles": "1112345678999p"}, "visible": "5m"}, "suit_not_in_play"),
    ("/v1/hands/score", {"hand": {"tiles": "23445677p345789s"}, "win": {"tile": "7p"}}, "dianpao_pinghu"),
])
def test_hands_under_three_players(client, path, body, code):
    problem(client.post(path, json={**body, "ruleset": "sanren-liangfang"}), 422, code)


def test_hands_with_the_run_extras(client):
    body = client.post("/v1/hands/score", json={"hand": {"tiles": "123456789m45699p"}, "win": {"tile": "5p"},
                                                "ruleset": {"jiaxinwu": True, "yitiaolong": True}}).get_json()
    assert [(p["id"], p["name"], p["fan"]) for p in body["patterns"]] == [
        ("pinghu", "平胡", 1), ("jiaxinwu", "夹心五", 1), ("yitiaolong", "一条龙", 1)]
    body = client.post("/v1/hands/ting", json={"hand": {"tiles": "234567888m1399s"},
                                               "ruleset": {"preset": "sanren-liangfang", "kaertiao": True}})
    assert body.status_code == 422      # 万 in a three-player room
    body = client.post("/v1/hands/ting", json={"hand": {"tiles": "234567888p1399s"},
                                               "ruleset": {"preset": "sanren-liangfang", "kaertiao": True}}).get_json()
    assert [(w["tile"], [p["id"] for p in w["patterns"]]) for w in body["waits"]] == [("2s", ["pinghu", "kaertiao"])]


def test_a_table_whose_ruleset_seats_three_is_refused_with_four_names(client):
    body = problem(client.post("/v1/tables", json={"players": PLAYERS, "ruleset": "sanren-liangfang"}), 422,
                   "bad_players")
    assert "3 players" in body["detail"]


def test_a_xueliu_table_end_to_end(client):
    r = client.post("/v1/tables", json={"players": PLAYERS, "ruleset": "xueliu"})
    assert r.status_code == 201
    table = r.get_json()
    auth = {"Authorization": f"Bearer {table['token']}"}
    url = f"/v1/tables/{table['id']}/events"
    for event in [{"type": "round_start"},
                  {"type": "kong", "seat": 0, "kind": "concealed", "tile": "5m"},
                  {"type": "hu", "from": None, "tile": "3s", "winners": [{"seat": 1, "fan": 2}]},
                  {"type": "hu", "from": 0, "tile": "4s", "winners": [{"seat": 1, "fan": 1}]},
                  {"type": "kong", "seat": 1, "kind": "concealed", "tile": "9p"}]:
        assert client.post(url, json=event, headers=auth).status_code == 201
    problem(client.post(url, json={"type": "peng", "seat": 1, "tile": "7s", "from": 0}, headers=auth), 422,
            "claim_after_win")
    r = client.post(url, json={"type": "draw", "seats": [
        {"seat": 0, "status": "not_ting"}, {"seat": 2, "status": "ting", "dajiao_fan": 2},
        {"seat": 3, "status": "huazhu"}]}, headers=auth)
    assert r.status_code == 201 and r.get_json()["balances"] == [54, 174, 84, -312]
    view = client.get(f"/v1/tables/{table['id']}", headers=auth).get_json()
    assert view["ruleset"]["mode"] == "xueliu" and view["rounds"][0]["next_dealer"] == 1
    assert view["rounds"][0]["won"] == [1]
    # void the second win (6 from seat 0 to seat 1): the refold keeps every later record valid
    r = client.post(f"/v1/tables/{table['id']}/events/4/void", headers=auth)
    assert r.status_code == 201, r.get_data(as_text=True)
    assert r.get_json()["balances"] == [60, 168, 84, -312]
