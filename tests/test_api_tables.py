"""The live-table HTTP API (docs/api.md "Tables" and "Events", docs/rules.md#s10) through the Flask test client.

Every write is checked through the API itself: a rejected request must leave
the table exactly as it was (same version, ETag, balances, rounds and log).
"""

from __future__ import annotations

import re
import threading
import time

import pytest

from service.api import create_app
from service.config import NO_LIMITS
from tests.problems import problem

PLAYERS = ["东", "南", "西", "北"]
TABLES = "/v1/tables"
PROBLEM = "application/problem+json"
KONG0 = {"type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"}
KONG1 = {"type": "kong", "seat": 1, "kind": "concealed", "tile": "2m"}


# -- fixtures and helpers ----------------------------------------------------------------
@pytest.fixture
def app(redis_url):
    # (every rate limit off: this test makes many requests from one address; the limits have their own tests)
    return create_app({"TESTING": True, "REDIS_URL": redis_url, **{var: 0 for var in NO_LIMITS}})


@pytest.fixture
def client(app):
    return app.test_client()


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def create(client, players=PLAYERS, **extra):
    """A new table; the 201 body (with its tokens)."""
    r = client.post(TABLES, json={"players": players, **extra})
    assert r.status_code == 201, r.get_data(as_text=True)
    return r.get_json()


def post(client, table, event, token=None, **headers):
    return client.post(f"{TABLES}/{table['id']}/events", json=event,
                       headers={**bearer(token or table["token"]), **headers})


def ok(client, table, event, **headers) -> dict:
    """Append ``event``; assert a 201 whose transfers name its seq and match the balance change."""
    before = view(client, table)
    r = post(client, table, event, **headers)
    assert r.status_code == 201, (event, r.get_data(as_text=True))
    body = r.get_json()
    assert set(body) >= {"seq", "version", "transfers", "balances", "round"}
    assert body["seq"] == body["version"] == before["version"] + 1
    assert r.headers["ETag"] == f'"{body["version"]}"'
    change = [0, 0, 0, 0]
    for t in body["transfers"]:
        assert t["event"] == body["seq"]  # a table's transfers name the seq, not a round index
        assert t["points"] > 0 and t["from"] != t["to"]
        change[t["from"]] -= t["points"]
        change[t["to"]] += t["points"]
    assert [a + d for a, d in zip(before["balances"], change)] == body["balances"]
    assert sum(body["balances"]) == 0
    return body


def view(client, table, token=None) -> dict:
    r = client.get(f"{TABLES}/{table['id']}", headers=bearer(token or table["token"]))
    assert r.status_code == 200, r.get_data(as_text=True)
    body = r.get_json()
    assert r.headers["ETag"] == f'"{body["version"]}"'
    assert sum(body["balances"]) == 0
    return body


def events(client, table, token=None, limit=100) -> list[dict]:
    """The whole log, following ``next``."""
    out, after = [], 0
    while True:
        r = client.get(f"{TABLES}/{table['id']}/events?after={after}&limit={limit}",
                       headers=bearer(token or table["token"]))
        assert r.status_code == 200, r.get_data(as_text=True)
        page = r.get_json()
        out += page["events"]
        if page["next"] is None:
            return out
        assert page["next"] == str(page["events"][-1]["seq"])
        after = page["next"]


def snapshot(client, table) -> tuple[dict, list[dict]]:
    return view(client, table), events(client, table)


def playing(client, preset="xuezhan", dealer=0, **start) -> dict:
    """A table with round 1 started."""
    t = create(client, ruleset=preset, dealer=dealer)
    ok(client, t, {"type": "round_start", **start})
    return t


# -- create ------------------------------------------------------------------------------
def test_create_returns_tokens_location_and_defaults(client):
    r = client.post(TABLES, json={"players": PLAYERS})
    assert r.status_code == 201 and r.mimetype == "application/json"
    t = r.get_json()
    assert {"id", "token", "read_token", "players", "ruleset", "version", "balances"} <= set(t)
    assert re.fullmatch(r"[0-9a-f]{16}", t["id"])
    assert r.headers["Location"].endswith(f"/v1/tables/{t['id']}")
    assert t["token"] != t["read_token"] and len(t["token"]) >= 32 and len(t["read_token"]) >= 32
    assert t["players"] == PLAYERS and t["version"] == 0 and t["balances"] == [0, 0, 0, 0]
    presets = client.get("/v1/rulesets").get_json()["presets"]
    assert t["ruleset"] == presets["xuezhan"]  # omitted: xuezhan, every field
    got = view(client, t)
    assert got["id"] == t["id"] and got["players"] == PLAYERS and got["ruleset"] == t["ruleset"]
    assert got["version"] == 0 and got["balances"] == [0, 0, 0, 0]
    assert got["round"] is None and got["rounds"] == [] and got["dealer"] == 0
    assert "token" not in got and "read_token" not in got  # tokens are shown only at creation
    other = create(client)
    assert other["id"] != t["id"] and other["token"] != t["token"]


def test_create_with_ruleset_object_preset_name_and_dealer(client):
    presets = client.get("/v1/rulesets").get_json()["presets"]
    t = create(client, ruleset={"preset": "normal", "cap": 4, "zimo": "base"}, dealer=2)
    assert t["ruleset"] == presets["normal"] | {"cap": 4, "zimo": "base"}
    assert t["ruleset"]["next_dealer"] == "discarder" and t["ruleset"]["mode"] == "normal"
    got = view(client, t)
    assert got["ruleset"] == t["ruleset"] and got["dealer"] == 2
    assert ok(client, t, {"type": "round_start"})["round"]["dealer"] == 2
    c = create(client, ruleset="chengdu-points")
    assert c["ruleset"] == presets["chengdu-points"] and c["ruleset"]["base"] == 1
    # the table's ruleset is the one that scores: chengdu-points kongs pay nothing, fan 2 is 2 points
    ok(client, c, {"type": "round_start"})
    assert ok(client, c, KONG0)["transfers"] == []
    assert ok(client, c, {"type": "hu", "from": 1, "tile": "5p",
                          "winners": [{"seat": 2, "fan": 2}]})["balances"] == [0, -2, 2, 0]


@pytest.mark.parametrize("body, field", [
    ({"players": PLAYERS[:2]}, "players"),
    ({"players": PLAYERS + ["五"]}, "players"),
    ({"players": ["a", "b", "", "d"]}, "players.2"),
    ({"players": ["a", "b", "c", "x" * 41]}, "players.3"),
    ({"players": ["a", "b", "c", 4]}, "players.3"),
    ({"players": "abcd"}, "players"),
    ({}, "players"),
    ({"players": PLAYERS, "dealer": 4}, "dealer"),
    ({"players": PLAYERS, "dealer": "1"}, "dealer"),
    ({"players": PLAYERS, "ruleset": {"preset": "normal", "bogus": 1}}, "ruleset.bogus"),
    ({"players": PLAYERS, "ruleset": {"cap": 0}}, "ruleset.cap"),
    ({"players": PLAYERS, "bogus": True}, "bogus"),
])
def test_create_rejects_bad_input(client, redis_client, body, field):
    body = problem(client.post(TABLES, json=body), 422, "invalid_input")
    assert field in body["errors"], body["errors"]
    assert redis_client.keys("{t:*") == []  # no table was created


def test_create_rejects_an_unknown_preset_malformed_json_and_other_content(client, redis_client):
    body = problem(client.post(TABLES, json={"players": PLAYERS, "ruleset": "mahjong-x"}), 422, "unknown_ruleset")
    assert "ruleset" in body["errors"]
    problem(client.post(TABLES, data=b'{"players": [', content_type="application/json"), 400, "malformed_json")
    problem(client.post(TABLES, data=b'{"players": ["a","b","c","d"]}', content_type="text/plain"),
            415, "unsupported_media_type")
    assert redis_client.keys("{t:*") == []


# -- get ---------------------------------------------------------------------------------
def test_get_with_either_token_etag_and_if_none_match(client):
    t = create(client)
    url = f"{TABLES}/{t['id']}"
    w, r = client.get(url, headers=bearer(t["token"])), client.get(url, headers=bearer(t["read_token"]))
    assert w.status_code == r.status_code == 200 and w.get_json() == r.get_json()
    assert w.headers["ETag"] == '"0"'
    ok(client, t, {"type": "round_start"})
    r = client.get(url, headers=bearer(t["read_token"]))
    assert r.headers["ETag"] == '"1"' and r.get_json()["version"] == 1
    nm = client.get(url, headers={**bearer(t["read_token"]), "If-None-Match": '"1"'})
    assert nm.status_code == 304 and nm.data == b"" and nm.headers["ETag"] == '"1"'
    weak = client.get(url, headers={**bearer(t["read_token"]), "If-None-Match": 'W/"1"'})
    assert weak.status_code == 304  # If-None-Match compares weakly
    stale = client.get(url, headers={**bearer(t["read_token"]), "If-None-Match": '"0"'})
    assert stale.status_code == 200 and stale.get_json()["version"] == 1
    # a 304 still needs a token of this table
    problem(client.get(url, headers={"If-None-Match": '"1"'}), 401, "unauthorized")


# -- events: every type, rounds, balances --------------------------------------------------
def test_every_event_type_and_round_summaries(client):
    t = create(client)  # xuezhan, dealer 0
    b = ok(client, t, {"type": "round_start", "voids": ["s", None, "m", None]})
    assert b["seq"] == 1 and b["transfers"] == [] and b["balances"] == [0, 0, 0, 0]
    assert b["round"] == {"number": 1, "dealer": 0, "status": "playing", "voids": ["s", None, "m", None],
                          "won": [], "left": [], "deltas": [0, 0, 0, 0], "ended_by": None,
                          "next_dealer": None, "events": 0}
    assert ok(client, t, {"type": "peng", "seat": 1, "tile": "3p", "from": 0})["transfers"] == []
    b = ok(client, t, {"type": "kong", "seat": 1, "kind": "added", "tile": "3p"})
    assert sorted((x["from"], x["points"], x["reason"]) for x in b["transfers"]) == [
        (0, 6, "kong_added"), (2, 6, "kong_added"), (3, 6, "kong_added")]
    b = ok(client, t, {"type": "kong", "seat": 2, "kind": "direct", "tile": "7s", "from": 3})
    assert b["transfers"] == [{"from": 3, "to": 2, "points": 6, "reason": "kong_direct", "event": 4}]
    assert ok(client, t, KONG0)["balances"] == [30, 6, -12, -24]
    b = ok(client, t, {"type": "hu", "from": 3, "tile": "5p", "winners": [{"seat": 2, "fan": 2}]})
    assert b["transfers"] == [{"from": 3, "to": 2, "points": 12, "reason": "dianpao", "event": 6}]
    assert b["round"]["won"] == [2] and b["round"]["status"] == "playing"  # 血战: the round goes on
    b = ok(client, t, {"type": "hu", "from": None, "tile": "4s", "winners": [{"seat": 1, "fan": 1}]})
    assert b["balances"] == [24, 18, 0, -42] and {x["reason"] for x in b["transfers"]} == {"zimo"}
    b = ok(client, t, {"type": "draw", "seats": [{"seat": 0, "status": "ting", "dajiao_fan": 2},
                                                 {"seat": 3, "status": "not_ting"}]})
    assert b["transfers"] == [{"from": 3, "to": 0, "points": 12, "reason": "dajiao", "event": 8}]
    assert b["balances"] == [36, 18, 0, -54]
    assert b["round"]["status"] == "ended" and b["round"]["ended_by"] == "draw"
    assert b["round"]["next_dealer"] == 2 and b["round"]["won"] == [2, 1] and b["round"]["events"] == 7

    b = ok(client, t, {"type": "round_start"})
    assert b["round"]["number"] == 2 and b["round"]["dealer"] == 2 and b["round"]["deltas"] == [0, 0, 0, 0]
    b = ok(client, t, {"type": "escape", "seat": 1, "last_four": False})
    assert b["round"]["deltas"] == [96, -288, 96, 96] and b["balances"] == [132, -270, 96, 42]
    assert b["round"]["ended_by"] == "escape" and b["round"]["left"] == [1] and b["round"]["next_dealer"] == 2

    b = ok(client, t, {"type": "round_start", "dealer": 3})
    assert b["round"]["dealer"] == 3 and b["round"]["number"] == 3
    ok(client, t, {"type": "kong", "seat": 2, "kind": "concealed", "tile": "9s"})
    b = ok(client, t, {"type": "round_end"})
    assert b["transfers"] == [] and b["balances"] == [120, -282, 132, 30]
    assert b["round"]["status"] == "ended" and b["round"]["ended_by"] == "round_end"
    assert b["round"]["next_dealer"] == 3

    got = view(client, t)
    assert got["version"] == 13 and got["balances"] == [120, -282, 132, 30] and got["dealer"] == 3
    assert got["round"] == b["round"]
    assert got["rounds"] == [
        {"number": 1, "dealer": 0, "deltas": [36, 18, 0, -54], "won": [2, 1], "left": [], "ended_by": "draw",
         "next_dealer": 2, "first_seq": 1, "last_seq": 8},
        {"number": 2, "dealer": 2, "deltas": [96, -288, 96, 96], "won": [], "left": [1], "ended_by": "escape",
         "next_dealer": 2, "first_seq": 9, "last_seq": 10},
        {"number": 3, "dealer": 3, "deltas": [-12, -12, 36, -12], "won": [], "left": [], "ended_by": "round_end",
         "next_dealer": 3, "first_seq": 11, "last_seq": 13},
    ]
    # balances carry across rounds: they are the sum of the rounds' deltas
    assert [sum(col) for col in zip(*(r["deltas"] for r in got["rounds"]))] == got["balances"]
    log = events(client, t)
    assert [e["seq"] for e in log] == list(range(1, 14))
    assert [e["round"] for e in log] == [1] * 8 + [2] * 2 + [3] * 3
    assert log[3]["type"] == "kong" and log[3]["tile"] == "7s" and log[3]["from"] == 3
    assert not any(e["voided"] for e in log) and all(e["at"] for e in log)


def test_hands_are_scored_and_round_voids_apply_to_them(client):
    t = playing(client, voids=[None, "m", "p", None])
    win = {"tiles": "23445677p345789s"}  # 平胡, 1 fan = 6
    b = ok(client, t, {"type": "hu", "from": 0, "tile": "5p", "winners": [{"seat": 1, "hand": win}]})
    assert b["balances"] == [-6, 6, 0, 0]
    # seat 2's 定缺 is p (from round_start): the same hand cannot win for it
    before = snapshot(client, t)
    r = post(client, t, {"type": "hu", "from": 0, "tile": "4s",
                         "winners": [{"seat": 2, "hand": {"tiles": "23445677p345789s"}}]})
    assert problem(r, 422, "not_a_win")["event"] == 3
    assert snapshot(client, t) == before


def test_winner_rule_dealer_rotation(client):
    t = create(client, ruleset="xuezhan", dealer=0)
    assert ok(client, t, {"type": "round_start"})["round"]["dealer"] == 0
    ok(client, t, {"type": "hu", "from": 2, "tile": "5p", "winners": [{"seat": 1, "fan": 1}]})
    ok(client, t, {"type": "hu", "from": None, "tile": "6p", "winners": [{"seat": 3, "fan": 1}]})
    assert ok(client, t, {"type": "round_end"})["round"]["next_dealer"] == 1  # the first winner
    assert view(client, t)["dealer"] == 1
    assert ok(client, t, {"type": "round_start"})["round"]["dealer"] == 1
    b = ok(
        client, t, {"type": "hu", "from": 0, "tile": "5p", "winners": [{"seat": 2, "fan": 1}, {"seat": 3, "fan": 2}]}
    )
    assert b["round"]["deltas"] == [-18, 0, 6, 12] and b["balances"] == [-24, 6, -6, 24]
    assert ok(client, t, {"type": "round_end"})["round"]["next_dealer"] == 0  # 一炮多响: the discarder
    assert ok(client, t, {"type": "round_start"})["round"]["dealer"] == 0
    b = ok(client, t, {"type": "draw", "seats": [{"seat": s, "status": "not_ting"} for s in range(4)]})
    assert b["round"]["next_dealer"] == 0 and b["round"]["ended_by"] == "draw"  # 流局: the dealer stays
    assert ok(client, t, {"type": "round_start", "dealer": 3})["round"]["dealer"] == 3  # dice
    ok(client, t, {"type": "round_end"})
    assert view(client, t)["dealer"] == 3  # no win: the explicit dealer stays
    assert ok(client, t, {"type": "round_start"})["round"]["dealer"] == 3
    rounds = view(client, t)["rounds"]
    assert [(r["dealer"], r["next_dealer"]) for r in rounds] == [(0, 1), (1, 0), (0, 0), (3, 3)]


def test_discarder_rule_dealer_rotation(client):
    t = create(client, ruleset="normal", dealer=0)
    ok(client, t, {"type": "round_start"})
    b = ok(client, t, {"type": "hu", "from": 2, "tile": "5p", "winners": [{"seat": 1, "fan": 1}]})
    assert b["round"]["status"] == "ended" and b["round"]["ended_by"] == "hu"  # 普通场: the first hu ends it
    assert b["round"]["next_dealer"] == 2  # 点炮者坐庄
    assert ok(client, t, {"type": "round_start"})["round"]["dealer"] == 2
    b = ok(client, t, {"type": "hu", "from": None, "tile": "5p", "winners": [{"seat": 3, "fan": 1}]})
    assert b["round"]["next_dealer"] == 3  # self-drawn: the winner
    assert ok(client, t, {"type": "round_start"})["round"]["dealer"] == 3
    b = ok(
        client, t, {"type": "hu", "from": 1, "tile": "5p", "winners": [{"seat": 0, "fan": 1}, {"seat": 2, "fan": 1}]}
    )
    assert b["round"]["next_dealer"] == 1
    assert ok(client, t, {"type": "round_start"})["round"]["dealer"] == 1
    b = ok(client, t, {"type": "draw", "seats": [{"seat": s, "status": "not_ting"} for s in range(4)]})
    assert b["round"]["next_dealer"] == 1
    got = view(client, t)
    assert got["dealer"] == 1 and [r["next_dealer"] for r in got["rounds"]] == [2, 3, 1, 1]
    assert got["balances"] == [sum(c) for c in zip(*(r["deltas"] for r in got["rounds"]))]
    assert got["balances"] == [-6 + 6, 6 - 6 - 12, -6 - 6 + 6, 18 - 0]


# -- rejections ------------------------------------------------------------------------------
R = {"type": "round_start"}
E = {"type": "round_end"}
HU21 = {"type": "hu", "from": 2, "tile": "5p", "winners": [{"seat": 1, "fan": 1}]}

REJECTIONS = [
    ("xuezhan", [], KONG0, "no_round"),
    ("xuezhan", [], E, "no_round"),
    ("normal", [R, HU21], KONG0, "round_ended"),
    ("xuezhan", [R, E], E, "round_ended"),
    ("xuezhan", [R, E], HU21, "round_ended"),
    ("xuezhan", [R], R, "round_in_progress"),
    ("xuezhan", [R, KONG0], {"type": "round_start", "dealer": 2}, "round_in_progress"),
    ("xuezhan", [R, HU21], {"type": "kong", "seat": 1, "kind": "concealed", "tile": "9s"}, "seat_not_in_round"),
    ("xuezhan", [R, HU21], {"type": "hu", "from": 1, "tile": "5p", "winners": [{"seat": 3, "fan": 1}]},
     "seat_not_in_round"),
    ("xuezhan", [R], {"type": "peng", "seat": 0, "tile": "5m", "from": 0}, "self_discard"),
    ("xuezhan", [R], {"type": "hu", "from": 1, "tile": "5p", "winners": [{"seat": 1, "fan": 1}]}, "self_discard"),
    ("xuezhan", [R], {"type": "hu", "from": 2, "tile": "1p",
                      "winners": [{"seat": 1, "hand": {"tiles": "12345678p123456s"}}]}, "not_a_win"),
    ("xuezhan", [R, {"type": "kong", "seat": 0, "kind": "concealed", "tile": "5m"}],
     {"type": "peng", "seat": 1, "tile": "5m", "from": 2}, "too_many_copies"),
    ("xuezhan", [R], {"type": "hu", "from": None, "tile": "5p", "winners": [{"seat": 1, "fan": 1}],
                      "after_kong": True}, "kong_required"),
    ("xuezhan", [R, KONG0], {"type": "hu", "from": 2, "tile": "5p", "winners": [{"seat": 1, "fan": 1}],
                             "after_kong": True}, "kong_required"),
    ("xuezhan", [R], {**HU21, "heavenly": True}, "contradictory_flags"),
    ("xuezhan", [R], {"type": "hu", "from": None, "tile": "5p", "winners": [{"seat": 0, "fan": 1}],
                      "earthly": True}, "contradictory_flags"),
    ("xuezhan", [R], {"type": "draw", "seats": [{"seat": s, "status": "not_ting"} for s in range(3)]}, "bad_seats"),
    ("xuezhan", [R], {"type": "draw", "seats": [{"seat": 0, "status": "not_ting"}] * 2}, "bad_seats"),
    ("xuezhan", [R, HU21], {"type": "draw", "seats": [{"seat": s, "status": "not_ting"} for s in range(4)]},
     "bad_seats"),
    ("xuezhan", [R, {"type": "peng", "seat": 1, "tile": "3p", "from": 0}],
     {"type": "kong", "seat": 1, "kind": "added", "tile": "5m"}, "no_peng"),
    ("xuezhan", [], {"type": "round_start", "voids": ["x", None, None, None]}, "bad_event"),
    ("xuezhan", [R], {"type": "peng", "seat": 0, "tile": "0m", "from": 1}, "bad_event"),
    ("xuezhan", [R], {"type": "kong", "seat": 0, "kind": "concealed", "tile": "5m", "from": 1}, "bad_event"),
]


@pytest.mark.parametrize("preset, setup, event, code", REJECTIONS,
                         ids=[f"{c}-{i}" for i, (_, _, _, c) in enumerate(REJECTIONS)])
def test_rule_rejection_is_422_with_code_and_seq_and_stores_nothing(client, preset, setup, event, code):
    t = create(client, ruleset=preset)
    for e in setup:
        ok(client, t, e)
    before = snapshot(client, t)
    r = post(client, t, event, **{"Idempotency-Key": "rejected-1"})
    body = problem(r, 422, code)
    assert body["event"] == len(setup) + 1  # the seq it would have had
    assert body["title"] == "Event cannot happen" and body["instance"] == f"{TABLES}/{t['id']}/events"
    assert snapshot(client, t) == before
    # the seq was not used: the next good write takes it
    in_play = before[0]["round"] is not None and before[0]["round"]["status"] == "playing"
    assert ok(client, t, E if in_play else R)["seq"] == len(setup) + 1


@pytest.mark.parametrize(("event", "code", "field"), [
    ({}, "bad_event", "type"),
    ({"type": "mahjong"}, "bad_event", "type"),
    ({"type": 7}, "bad_event", "type"),
    ({"type": "kong", "seat": "1", "kind": "concealed", "tile": "5m"}, "bad_event", "seat"),
    ({"type": "kong", "seat": 4, "kind": "concealed", "tile": "5m"}, "seat_out_of_range", "seat"),
    ({"type": "kong", "seat": 0, "kind": "sideways", "tile": "5m"}, "bad_event", "kind"),
    ({"type": "peng", "seat": 0, "tile": "5m"}, "bad_event", "from"),
    ({"type": "round_start", "dealer": 4}, "seat_out_of_range", "dealer"),
    ({"type": "round_start", "dealer": True}, "bad_event", "dealer"),
    ({"type": "round_start", "voids": ["m", "p"]}, "bad_event", "voids"),
    ({"type": "round_start", "voids": ["m", "p", "s", "x"]}, "bad_event", "voids.3"),
    ({"type": "round_start", "bogus": 1}, "bad_event", "bogus"),
    ({"type": "round_end", "extra": 1}, "bad_event", "extra"),
    ({"type": "hu", "from": 2, "tile": "5p", "winners": []}, "bad_event", "winners"),
    ({"type": "hu", "from": 2, "tile": "5p", "winners": [{"seat": 1, "fan": 0}]}, "bad_event", "winners.0.fan"),
    ({"type": "hu", "from": 2, "tile": "5p", "winners": [{"seat": 1, "fan": 1}], "after_kong": "yes"},
     "bad_event", "after_kong"),
    ({"type": "draw", "seats": [{"seat": 0, "status": "maybe"}]}, "bad_event", "seats.0.status"),
    ({"type": "escape", "seat": 1, "last_four": 1}, "bad_event", "last_four"),
    ({"type": "kong", "seat": 0, "kind": "concealed", "tile": "5m", "seq": 99}, "bad_event", "seq"),
    ([KONG0], "bad_event", "_schema"),
    ("kong", "bad_event", "_schema"),
    (5, "bad_event", "_schema"),
])
def test_malformed_events_are_the_rules_422_with_errors(client, event, code, field):
    """The rules core decides what an event is: a malformed one is a 422 with a stable code,
    ``event`` (the seq it would have had) and ``errors`` naming the member; nothing is stored."""
    t = playing(client)
    before = snapshot(client, t)
    body = problem(post(client, t, event), 422, code)
    assert body["event"] == view(client, t)["version"] + 1
    assert list(body["errors"]) == [field], body["errors"]
    assert snapshot(client, t) == before


def test_a_malformed_event_needs_the_write_token_first(client):
    """The token is checked in the same read as the state the event is checked against:
    without the write token, a malformed event says nothing about the table."""
    t = playing(client)
    problem(post(client, t, {"type": "mahjong"}, token="not-a-token"), 401, "unauthorized")
    problem(post(client, t, {"type": "mahjong"}, token=t["read_token"]), 403, "forbidden")


def test_malformed_json_is_400_and_other_content_types_415(client):
    t = playing(client)
    url = f"{TABLES}/{t['id']}/events"
    before = snapshot(client, t)
    for raw in (b'{"type": "round_end"', b"", b"\xff\xfe", b'{"type": NaN}', b"[1,]"):
        problem(client.post(url, data=raw, content_type="application/json", headers=bearer(t["token"])),
                400, "malformed_json")
    for ctype in ("text/plain", "application/x-www-form-urlencoded", None):
        kwargs = {"content_type": ctype} if ctype else {}
        problem(client.post(url, data=b'{"type": "round_end"}', headers=bearer(t["token"]), **kwargs),
                415, "unsupported_media_type")
    assert snapshot(client, t) == before
    # a charset parameter is still JSON
    r = client.post(url, data=b'{"type": "round_end"}', content_type="application/json; charset=utf-8",
                    headers=bearer(t["token"]))
    assert r.status_code == 201


# -- tokens ----------------------------------------------------------------------------------
def endpoints(t):
    tid = t["id"]
    return [
        ("GET", f"{TABLES}/{tid}", None, False),
        ("GET", f"{TABLES}/{tid}/events", None, False),
        ("POST", f"{TABLES}/{tid}/events", KONG1, True),
        ("POST", f"{TABLES}/{tid}/events/2/void", None, True),
        ("DELETE", f"{TABLES}/{tid}", None, True),
    ]


def more_endpoints(t):
    """The table's other operations: its stream, rounds and summary (reads), finishing it and rotating its
    tokens (writes)."""
    tid = t["id"]
    return [
        ("GET", f"{TABLES}/{tid}/stream", None, False),
        ("GET", f"{TABLES}/{tid}/rounds", None, False),
        ("GET", f"{TABLES}/{tid}/summary", None, False),
        ("POST", f"{TABLES}/{tid}/finish", None, True),
        ("POST", f"{TABLES}/{tid}/tokens/rotate", None, True),
    ]


def call(client, method, url, body, headers):
    if body is None:
        response = client.open(url, method=method, headers=headers)
    else:
        response = client.open(url, method=method, json=body, headers=headers)
    if response.mimetype == "text/event-stream":  # a stream that opened never ends: it is not read here
        response.close()
        pytest.fail(f"{method} {url} opened a stream")
    return response


def test_tokens(client):
    t = playing(client)
    ok(client, t, KONG0)
    other = playing(client)
    before = snapshot(client, t)
    for method, url, body, write in endpoints(t):
        r = call(client, method, url, body, {})
        problem(r, 401, "unauthorized")
        assert r.headers["WWW-Authenticate"].startswith("Bearer")
        for bad in ("Bearer " + "x" * 43, "Bearer ", "Basic " + t["token"], t["token"],
                    "Bearer " + other["token"], "Bearer " + other["read_token"]):
            r = call(client, method, url, body, {"Authorization": bad})
            problem(r, 401, "unauthorized")
            assert "WWW-Authenticate" in r.headers
        r = call(client, method, url, body, bearer(t["read_token"]))
        if write:
            problem(r, 403, "forbidden")
        else:
            assert r.status_code == 200
    assert snapshot(client, t) == before
    # the scheme is case-insensitive; the write token reads too
    assert client.get(f"{TABLES}/{t['id']}", headers={"Authorization": "bearer " + t["token"]}).status_code == 200
    # and this table's tokens never work on the other table
    for method, url, body, _write in endpoints(other):
        for tok in (t["token"], t["read_token"]):
            problem(call(client, method, url, body, bearer(tok)), 401, "unauthorized")


@pytest.mark.parametrize("tid", ["0123456789abcdef", "ABCDEF0123456789", "0123456789abcde", "0123456789abcdef0",
                                 "not-a-table"])
def test_an_unknown_or_malformed_table_is_answered_as_a_wrong_token_is(client, tid):
    """A token that is not an existing table's says no more about an unknown id than about a known one:
    401, as for a wrong token of a real table, on every operation of a table (docs/api.md, credentials)."""
    t = create(client)
    fake = {"id": tid, "token": t["token"], "read_token": t["read_token"]}
    for method, url, body, _ in endpoints(fake) + more_endpoints(fake):
        for tok in (t["token"], t["read_token"], "x" * 43):
            problem(call(client, method, url, body, bearer(tok)), 401, "unauthorized")
        wrong = call(client, method, f"/v1/tables/{t['id']}" + url.split(tid, 1)[1], body, bearer("x" * 43))
        problem(wrong, 401, "unauthorized")
        assert wrong.get_json()["detail"] == call(client, method, url, body, bearer("x" * 43)).get_json()["detail"]
        # without a token the answer says nothing about whether such a table exists
        r = call(client, method, url, body, {})
        problem(r, 401, "unauthorized")
        assert "WWW-Authenticate" in r.headers


# -- If-Match ------------------------------------------------------------------------------------
def test_if_match(client):
    t = playing(client)  # version 1
    before = snapshot(client, t)
    for stale in ('"0"', '"2"', '"17"'):
        r = post(client, t, KONG0, **{"If-Match": stale})
        body = problem(r, 412, "version_mismatch")
        assert body["version"] == 1 and r.headers["ETag"] == '"1"'
    assert snapshot(client, t) == before
    for bad in ("abc", '"x"', '"1', '"-1"', '"1"x', ",", '"1", "y"', 'W/"z"', 'W/""', '""', "", "W/", '*, "1"'):
        body = problem(post(client, t, KONG0, **{"If-Match": bad}), 422, "invalid_input")
        assert "If-Match" in body["errors"]
    assert snapshot(client, t) == before
    # Werkzeug parses the header: it reads an unquoted tag as that tag
    assert problem(post(client, t, KONG0, **{"If-Match": "7"}), 412, "version_mismatch")["version"] == 1
    # a list matches if any of its tags does (RFC 9110); a long version is just stale
    assert problem(post(client, t, KONG0, **{"If-Match": '"0", "7"'}), 412, "version_mismatch")["version"] == 1
    assert problem(post(client, t, KONG0, **{"If-Match": '"' + "9" * 20 + '"'}), 412,
                   "version_mismatch")["version"] == 1
    assert snapshot(client, t) == before
    # the precondition comes before the event's content is looked at (RFC 9110 §13.2.2): a stale
    # If-Match refuses even a malformed event, and the same event with the current version is a 422
    assert problem(post(client, t, {"type": "kong", "seat": 9}, **{"If-Match": '"0"'}), 412,
                   "version_mismatch")["version"] == 1
    problem(post(client, t, {"type": "kong", "seat": 9}, **{"If-Match": '"1"'}), 422, "bad_event")
    # a weak tag never matches If-Match (strong comparison): 412 with the current version
    r = post(client, t, KONG0, **{"If-Match": 'W/"1"'})
    assert problem(r, 412, "version_mismatch")["version"] == 1
    assert snapshot(client, t) == before
    b = ok(client, t, KONG0, **{"If-Match": '"1"'})
    assert b["version"] == 2
    # "*" matches any existing table
    assert ok(client, t, {"type": "kong", "seat": 1, "kind": "concealed", "tile": "2m"},
              **{"If-Match": "*"})["version"] == 3
    # void takes If-Match too
    r = client.post(f"{TABLES}/{t['id']}/events/2/void", headers={**bearer(t["token"]), "If-Match": '"1"'})
    assert problem(r, 412, "version_mismatch")["version"] == 3
    r = client.post(f"{TABLES}/{t['id']}/events/2/void", headers={**bearer(t["token"]), "If-Match": '"3"'})
    assert r.status_code == 201 and r.get_json()["version"] == 4


# -- Idempotency-Key ------------------------------------------------------------------------------
def test_idempotent_retry_replays_the_first_response(client):
    t = playing(client)
    key = {"Idempotency-Key": "phone-1:evt-7"}
    first = post(client, t, KONG0, **key)
    assert first.status_code == 201 and "Idempotent-Replayed" not in first.headers
    after_first = snapshot(client, t)
    for body in (KONG0, dict(reversed(list(KONG0.items())))):  # key order does not matter
        again = post(client, t, body, **key)
        assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
        assert again.get_json() == first.get_json()
        assert again.headers["ETag"] == first.headers["ETag"] == '"2"'
        assert again.headers["Location"] == first.headers["Location"]
    assert snapshot(client, t) == after_first
    # still the first response after the table has moved on
    ok(client, t, KONG1)
    moved = snapshot(client, t)
    again = post(client, t, KONG0, **key)
    assert again.status_code == 201 and again.get_json() == first.get_json() and again.headers["ETag"] == '"2"'
    # even with the If-Match the first request carried (now stale)
    kong2 = {"type": "kong", "seat": 2, "kind": "concealed", "tile": "3m"}
    cond = post(client, t, kong2, **{"Idempotency-Key": "cond", "If-Match": '"3"'})
    assert cond.status_code == 201
    again = post(client, t, kong2, **{"Idempotency-Key": "cond", "If-Match": '"3"'})
    assert again.status_code == 201 and again.get_json() == cond.get_json()
    assert view(client, t)["version"] == moved[0]["version"] + 1 == 4


def test_idempotency_key_with_another_body_is_422(client):
    t = playing(client)
    first = post(client, t, KONG0, **{"Idempotency-Key": "k"})
    assert first.status_code == 201
    before = snapshot(client, t)
    for other in (KONG1, {**KONG0, "tile": "2m"}, {"type": "round_end"}):
        problem(post(client, t, other, **{"Idempotency-Key": "k"}), 422, "idempotency_key_reused")
    # the same key on the void endpoint is another request too
    r = client.post(f"{TABLES}/{t['id']}/events/2/void", headers={**bearer(t["token"]), "Idempotency-Key": "k"})
    problem(r, 422, "idempotency_key_reused")
    assert snapshot(client, t) == before


def test_idempotency_keys_are_per_table(client):
    a, b = playing(client), playing(client)
    ra = post(client, a, KONG0, **{"Idempotency-Key": "shared"})
    rb = post(client, b, KONG0, **{"Idempotency-Key": "shared"})
    assert ra.status_code == rb.status_code == 201
    assert "Idempotent-Replayed" not in rb.headers and rb.headers["Location"].startswith(f"{TABLES}/{b['id']}/")
    assert view(client, a)["version"] == view(client, b)["version"] == 2
    rb2 = post(client, b, KONG1, **{"Idempotency-Key": "other"})
    assert rb2.status_code == 201 and view(client, a)["version"] == 2


@pytest.mark.parametrize("key", ["", "a b", "x" * 129, "tab\tkey"])
def test_bad_idempotency_key_is_422(client, key):
    t = playing(client)
    before = snapshot(client, t)
    body = problem(post(client, t, KONG0, **{"Idempotency-Key": key}), 422, "invalid_input")
    assert "Idempotency-Key" in body["errors"]
    assert snapshot(client, t) == before


@pytest.mark.parametrize("key", [
    "create-1", "create-1-0f9c2d7e-table-one-abcdefgh",         # long enough once, not a UUID
    "0f9c2d7e-1b2c-11ee-8c90-0242ac120002",                      # version 1 (time and MAC)
    "6fa459ea-ee8a-3ca4-894e-db77e160355e",                      # version 3 (a name's MD5)
    "00000000-0000-0000-0000-000000000000",                      # the nil UUID
    "{b3a1f8e2-4c7d-4e5f-9a6b-1c2d3e4f5a6b}", "urn:uuid:b3a1f8e2-4c7d-4e5f-9a6b-1c2d3e4f5a6b",
    "b3a1f8e24c7d4e5f9a6b1c2d3e4f5a6b",                           # not in the canonical form
    "b3a1f8e2-4c7d-4e5f-7a6b-1c2d3e4f5a6b",                      # not the RFC 9562 variant
    "b3a1f8e2-4c7d-4e5f-9a6b-1c2d3e4f5a6b0",
])
def test_a_table_creating_key_must_be_a_uuid_v4_or_v7(client, redis_client, key):
    """The key alone finds the table again (and replays its tokens): only a random UUID will do."""
    r = client.post(TABLES, json={"players": PLAYERS}, headers={"Idempotency-Key": key})
    body = problem(r, 422, "invalid_input")
    assert body["errors"] == {"Idempotency-Key": ["a UUID of version 4 or 7"]}
    assert not redis_client.keys("{t:*")


def test_a_creation_key_may_be_any_uuid_v4_or_v7_in_either_case(client):
    import uuid

    v4 = uuid.uuid4()
    v7 = "01890a5d-ac96-774b-bcce-b302099a8057"  # RFC 9562 appendix A.6
    for key in (str(v4), v7):
        assert client.post(TABLES, json={"players": PLAYERS}, headers={"Idempotency-Key": key}).status_code == 201
    again = client.post(TABLES, json={"players": PLAYERS}, headers={"Idempotency-Key": str(v4).upper()})
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"  # one UUID, any case


def test_idempotent_create_replays_the_same_table_and_tokens(client, redis_client):
    body = {"players": PLAYERS, "ruleset": "normal", "dealer": 1}
    first = client.post(TABLES, json=body, headers={"Idempotency-Key": "4f1c7a52-8d3e-4b6a-9c1f-0e2d3c4b5a69"})
    assert first.status_code == 201 and "Idempotent-Replayed" not in first.headers
    again = client.post(
        TABLES,
        json=dict(reversed(list(body.items()))),
        headers={"Idempotency-Key": "4f1c7a52-8d3e-4b6a-9c1f-0e2d3c4b5a69"},
    )
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.get_json() == first.get_json() and again.headers["Location"] == first.headers["Location"]
    t = again.get_json()
    assert view(client, t)["dealer"] == 1 and view(client, t, t["read_token"])["version"] == 0  # the tokens work
    assert len(redis_client.keys("{t:*}:meta")) == 1
    problem(
        client.post(
            TABLES, json={**body, "dealer": 2}, headers={"Idempotency-Key": "4f1c7a52-8d3e-4b6a-9c1f-0e2d3c4b5a69"}
        ),
        422,
        "idempotency_key_reused",
    )
    other = client.post(TABLES, json=body, headers={"Idempotency-Key": "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"})
    assert other.status_code == 201 and other.get_json()["id"] != t["id"]


# -- void ---------------------------------------------------------------------------------------
def void(client, table, seq, token=None, **headers):
    return client.post(f"{TABLES}/{table['id']}/events/{seq}/void",
                       headers={**bearer(token or table["token"]), **headers})


def test_void_recomputes_balances(client):
    t = playing(client)
    ok(client, t, KONG0)                                                         # 2
    ok(client, t, {"type": "kong", "seat": 2, "kind": "direct", "tile": "3s", "from": 1})  # 3
    b = ok(client, t, {"type": "hu", "from": 3, "tile": "5p", "winners": [{"seat": 1, "fan": 3}]})  # 4
    assert b["balances"] == [36, -12 - 6 + 24, -12 + 6, -12 - 24]
    r = void(client, t, 2)
    assert r.status_code == 201 and r.headers["ETag"] == '"5"'
    body = r.get_json()
    assert body["seq"] == body["version"] == 5 and body["voided"] == 2 and body["transfers"] == []
    assert body["balances"] == [0, -6 + 24, 6, -24]
    assert body["deltas"] == [-36, 12, 12, 12]
    assert [a - d for a, d in zip(body["balances"], body["deltas"])] == b["balances"]
    assert body["round"]["deltas"] == body["balances"]
    got = view(client, t)
    assert got["version"] == 5 and got["balances"] == body["balances"]
    log = events(client, t)
    assert [e["voided"] for e in log] == [False, True, False, False, False]
    assert log[4]["type"] == "void" and log[4]["target"] == 2
    # a void's retry with its Idempotency-Key replays instead of saying "already voided"
    r1 = void(client, t, 3, **{"Idempotency-Key": "undo-3"})
    assert r1.status_code == 201
    r2 = void(client, t, 3, **{"Idempotency-Key": "undo-3"})
    assert r2.status_code == 201 and r2.get_json() == r1.get_json() and r2.headers["Idempotent-Replayed"] == "true"
    assert view(client, t)["version"] == 6 and view(client, t)["balances"] == [0, 24, 0, -24]


def test_void_refusals(client):
    t = playing(client)
    ok(client, t, {"type": "kong", "seat": 2, "kind": "direct", "tile": "3s", "from": 0})  # 2
    ok(client, t, {"type": "hu", "from": 2, "tile": "9p", "after_kong": True,
                   "winners": [{"seat": 3, "fan": 1}]})  # 3: 杠上炮 needs the kong
    before = snapshot(client, t)
    body = problem(void(client, t, 2), 409, "void_conflict")
    assert body["event"] == 3  # the record that depends on it
    body = problem(void(client, t, 1), 409, "void_conflict")  # the round's start
    assert snapshot(client, t) == before
    for seq in (0, 4, 99):
        problem(void(client, t, seq), 404, "event_not_found")
    assert client.post(f"{TABLES}/{t['id']}/events/x/void", headers=bearer(t["token"])).status_code == 404
    assert snapshot(client, t) == before
    assert void(client, t, 3).status_code == 201
    after = snapshot(client, t)
    problem(void(client, t, 3), 409, "already_voided")
    problem(void(client, t, 4), 409, "not_voidable")  # a void record itself
    assert snapshot(client, t) == after
    # the kong no longer has a dependent: now it can go
    assert void(client, t, 2).get_json()["balances"] == [0, 0, 0, 0]


def test_void_in_an_earlier_round_updates_its_summary(client):
    t = playing(client)
    ok(client, t, KONG0)                        # 2
    ok(client, t, {"type": "round_end"})        # 3
    ok(client, t, {"type": "round_start"})      # 4
    ok(client, t, KONG1)                        # 5
    assert view(client, t)["balances"] == [24, 24, -24, -24]
    b = void(client, t, 2).get_json()
    assert b["balances"] == [-12, 36, -12, -12] and b["deltas"] == [-36, 12, 12, 12]
    assert b["round"]["number"] == 2  # the current round is unchanged
    got = view(client, t)
    assert got["rounds"][0]["deltas"] == [0, 0, 0, 0] and got["balances"] == [-12, 36, -12, -12]


# -- listing --------------------------------------------------------------------------------------
def test_events_pagination(client):
    t = playing(client)
    for n in range(6):
        ok(client, t, {"type": "peng", "seat": n % 4, "tile": f"{n + 1}s", "from": (n + 1) % 4})
    url = f"{TABLES}/{t['id']}/events"
    h = bearer(t["read_token"])
    p1 = client.get(url + "?limit=3", headers=h).get_json()
    assert [e["seq"] for e in p1["events"]] == [1, 2, 3] and p1["next"] == "3"
    p2 = client.get(url + "?after=3&limit=3", headers=h).get_json()
    assert [e["seq"] for e in p2["events"]] == [4, 5, 6] and p2["next"] == "6"
    p3 = client.get(url + "?after=6&limit=3", headers=h).get_json()
    assert [e["seq"] for e in p3["events"]] == [7] and p3["next"] is None
    assert client.get(url + "?after=7", headers=h).get_json() == {"events": [], "next": None}
    whole = client.get(url, headers=h).get_json()
    assert [e["seq"] for e in whole["events"]] == list(range(1, 8)) and whole["next"] is None
    assert whole["events"][0]["type"] == "round_start" and whole["events"][0]["round"] == 1
    assert {k: whole["events"][1][k] for k in ("type", "seat", "tile", "from")} == {
        "type": "peng", "seat": 0, "tile": "1s", "from": 1}
    assert whole["events"] == p1["events"] + p2["events"] + p3["events"]
    for q in ("?limit=0", "?limit=501", "?after=-1", "?after=x"):
        assert problem(client.get(url + q, headers=h), 422, "invalid_input")["errors"]


# -- delete ---------------------------------------------------------------------------------------
def test_delete(client):
    t = playing(client)
    ok(client, t, KONG0)
    other = playing(client)
    problem(client.delete(f"{TABLES}/{t['id']}", headers=bearer(t["read_token"])), 403, "forbidden")
    problem(client.delete(f"{TABLES}/{t['id']}", headers=bearer(other["token"])), 401, "unauthorized")
    assert view(client, t)["version"] == 2
    r = client.delete(f"{TABLES}/{t['id']}", headers=bearer(t["token"]))
    assert r.status_code == 204 and r.data == b""
    for method, url, body, write in endpoints(t):
        for tok in (t["token"],) if write else (t["token"], t["read_token"]):
            problem(call(client, method, url, body, bearer(tok)), 404, "table_not_found")
        # a deleted table's id is no oracle either: another table's token is still refused
        problem(call(client, method, url, body, bearer(other["token"])), 401, "unauthorized")
    assert view(client, other)["version"] == 1  # only that table went


def test_idempotent_create_of_a_deleted_table_is_not_recreated(client):
    body = {"players": PLAYERS}
    first = client.post(TABLES, json=body, headers={"Idempotency-Key": "c0ffee00-1234-4567-89ab-cdef01234567"})
    assert first.status_code == 201
    t = first.get_json()
    assert client.delete(f"{TABLES}/{t['id']}", headers=bearer(t["token"])).status_code == 204
    again = client.post(TABLES, json=body, headers={"Idempotency-Key": "c0ffee00-1234-4567-89ab-cdef01234567"})
    problem(again, 409, "table_deleted")
    problem(client.get(f"{TABLES}/{t['id']}", headers=bearer(t["token"])), 404, "table_not_found")


# -- the store is down ------------------------------------------------------------------------------
def test_redis_down_is_503_with_retry_after_never_500(client, redis_server):
    t = playing(client)
    ok(client, t, KONG0)
    assert client.get("/readyz").status_code == 200
    redis_server.stop()
    try:
        requests = endpoints(t) + [("POST", TABLES, {"players": PLAYERS}, True)]
        for method, url, body, _ in requests:
            for headers in (bearer(t["token"]), {}):
                r = call(client, method, url, body, headers)
                problem(r, 503, "store_unavailable")
                assert int(r.headers["Retry-After"]) > 0
        ready = client.get("/readyz")
        assert ready.status_code == 503 and ready.mimetype == PROBLEM
        assert ready.get_json()["checks"]["redis"].startswith("failed")
        assert client.get("/healthz").status_code == 200  # liveness does not depend on Redis
    finally:
        redis_server.start()
    deadline = time.monotonic() + 10
    while (ready := client.get("/readyz")).status_code != 200:  # pooled connections may need a retry
        assert ready.status_code == 503 and time.monotonic() < deadline
        time.sleep(0.1)
    got = view(client, t)
    assert got["version"] == 2 and got["balances"] == [36, -12, -12, -12]
    assert ok(client, t, KONG1)["version"] == 3


def test_no_store_configured_is_503(redis_url):
    c = create_app({"TESTING": True, "REDIS_URL": "", "TABLES_PER_HOUR": 0}).test_client()
    r = c.post(TABLES, json={"players": PLAYERS})
    problem(r, 503, "store_unavailable")
    assert int(r.headers["Retry-After"]) > 0
    problem(c.get(f"{TABLES}/0123456789abcdef"), 503, "store_unavailable")


# -- two writers ----------------------------------------------------------------------------------------
def test_two_phones_at_once_both_land(app, client):
    t = playing(client)
    results = []
    barrier = threading.Barrier(8)

    def phone(n):
        c = app.test_client()
        barrier.wait()
        r = post(c, t, {"type": "kong", "seat": n % 3, "kind": "concealed", "tile": f"{n + 1}p"})
        results.append((r.status_code, r.get_json()))

    threads = [threading.Thread(target=phone, args=(n,)) for n in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(s for s, _ in results) == [201] * 8
    assert sorted(b["seq"] for _, b in results) == list(range(2, 10))
    log = events(client, t)
    assert sorted(e["tile"] for e in log[1:]) == [f"{n + 1}p" for n in range(8)]
    got = view(client, t)
    # seats 0 and 1 made 3 kongs, seat 2 made 2: 36 per own kong, 12 per other's
    assert got["version"] == 9 and got["balances"] == [48, 48, 0, -96]


def test_retry_overlapping_its_conditional_original_replays_instead_of_412(app, client, redis_url, at_table_read):
    """A phone times out and retries (same Idempotency-Key, same If-Match) while its first request is
    still being handled: whatever the interleaving, the retry must answer with the first response.

    The interleaving is forced: the original commits right after the retry has looked up its key
    and before the retry reads the table's version.  The retry goes to another worker (an app of its
    own), which keeps no state of the table: it reads it.
    """
    t = playing(client)
    headers = {"Idempotency-Key": "slow-network", "If-Match": '"1"'}
    other = create_app({"TESTING": True, "REDIS_URL": redis_url, **{var: 0 for var in NO_LIMITS}})
    originals = []

    def original_commits() -> None:
        th = threading.Thread(target=lambda: originals.append(post(app.test_client(), t, KONG0, **headers)))
        th.start()
        th.join()

    at_table_read(other.extensions["redis"], original_commits)
    retry = post(other.test_client(), t, KONG0, **headers)
    original = originals[0]
    assert original.status_code == 201 and "Idempotent-Replayed" not in original.headers
    assert retry.status_code == 201, retry.get_data(as_text=True)
    assert retry.get_json() == original.get_json() and retry.headers["Idempotent-Replayed"] == "true"
    assert view(client, t)["version"] == 2


def test_a_write_racing_a_delete_is_not_acknowledged(app, client, redis_client, at_table_read):
    """The table is deleted after a write has read it and before the write is stored: the write
    must not be answered 201 (it would be acknowledged and lost), and nothing may be left behind.

    The interleaving is forced at the store's read, as a slow request would meet it.
    """
    t = create(client)  # version 0: the first event of a fresh table
    deleted = []

    def delete() -> None:
        th = threading.Thread(target=lambda: deleted.append(
            app.test_client().delete(f"{TABLES}/{t['id']}", headers=bearer(t["token"])).status_code))
        th.start()
        th.join()

    at_table_read(app.extensions["redis"], delete, after=True)
    r = post(client, t, {"type": "round_start"})
    assert deleted == [204]
    problem(r, 404, "table_not_found")
    leftovers = redis_client.keys("{t:" + t["id"] + "}:*")
    assert sorted(leftovers) == [("{t:" + t["id"] + "}:meta").encode()]  # only the tombstone


def test_if_match_list_accepts_any_of_its_versions(client):
    t = playing(client)  # version 1
    assert ok(client, t, KONG0, **{"If-Match": '"0", "1"'})["version"] == 2


def test_a_chunked_event_body_over_the_limit_is_413(client):
    """werkzeug cuts a body without Content-Length at the limit; it must still be refused."""
    import io

    from werkzeug.test import EnvironBuilder, run_wsgi_app

    t = playing(client)
    before = snapshot(client, t)
    body = b'{"type": "round_end"}' + b" " * (70 * 1024)
    environ = EnvironBuilder(path=f"{TABLES}/{t['id']}/events", method="POST", content_type="application/json",
                             headers=bearer(t["token"])).get_environ()
    environ.pop("CONTENT_LENGTH", None)
    environ.update({"wsgi.input": io.BytesIO(body), "wsgi.input_terminated": True})
    app_iter, status_line, headers = run_wsgi_app(client.application, environ)
    b"".join(app_iter)
    assert int(status_line.split()[0]) == 413 and headers["Content-Type"] == "application/problem+json"
    assert snapshot(client, t) == before


def test_store_refusing_writes_is_503_not_500(client, redis_client):
    """Redis refusing writes (MISCONF, READONLY, MASTERDOWN...) is the store being unavailable;
    out of memory is 507 (tests/test_store_limits.py)."""
    t = playing(client)
    redis_client.config_set("min-replicas-to-write", "1")  # no replica: Redis refuses every write (NOREPLICAS)
    try:
        resp = post(client, t, KONG0)
        assert resp.status_code == 503 and resp.headers["Retry-After"]
        assert resp.get_json()["code"] == "store_unavailable"
    finally:
        redis_client.config_set("min-replicas-to-write", "0")


def test_a_create_retry_does_not_count_against_the_hourly_limit(redis_url):
    from service.api.app import create_app

    c = create_app({"TESTING": True, "REDIS_URL": redis_url, "TABLES_PER_HOUR": 2}).test_client()
    key = {"Idempotency-Key": "0b5e4c1a-2f3d-4e6b-a7c8-9d0e1f2a3b4c"}
    first = c.post(TABLES, json={"players": PLAYERS}, headers=key)
    assert first.status_code == 201
    for _ in range(4):  # the phone lost the answer and keeps retrying
        again = c.post(TABLES, json={"players": PLAYERS}, headers=key)
        assert again.status_code == 201 and again.get_json() == first.get_json()
    assert c.post(TABLES, json={"players": PLAYERS}).status_code == 201  # quota: 1 of 2 used before
    assert c.post(TABLES, json={"players": PLAYERS}).status_code == 429
