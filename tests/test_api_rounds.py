"""/v1/rounds/settle: request loading, response shape, event errors."""

from __future__ import annotations

import pytest

from service.api import create_app
from service.api.schemas import SettleRequest
from service.rules.ruleset import Ruleset

SETTLE = "/v1/rounds/settle"


@pytest.fixture(scope="module")
def client():
    return create_app({"TESTING": True}).test_client()


def settle(client, events, dealer=0, **extra):
    return client.post(SETTLE, json={"dealer": dealer, "events": events, **extra})


def test_settle_shape(client):
    events = [
        {"type": "kong", "seat": 1, "kind": "direct", "tile": "5m", "from": 2},
        {"type": "hu", "from": 3, "tile": "5p", "winners": [{"seat": 0, "fan": 2}]},
    ]
    response = settle(client, events)
    assert response.status_code == 200, response.get_data(as_text=True)
    body = response.get_json()
    assert set(body) == {"deltas", "transfers", "winners", "ended", "next_dealer"}
    assert body["deltas"] == [12, 6, -6, -12]
    assert body["transfers"] == [
        {"from": 2, "to": 1, "points": 6, "reason": "kong_direct", "event": 0},
        {"from": 3, "to": 0, "points": 12, "reason": "dianpao", "event": 1},
    ]
    assert body["winners"] == [0] and body["ended"] is False and body["next_dealer"] is None
    assert sum(body["deltas"]) == 0


def test_settle_normal_mode_ends_with_first_hu(client):
    events = [{"type": "hu", "from": 2, "tile": "5p",
               "winners": [{"seat": 1, "hand": {"tiles": "23445677p345789s"}}]}]
    body = settle(client, events, ruleset="normal").get_json()
    assert body["ended"] is True and body["next_dealer"] == 2  # normal: the discarder deals
    assert body["deltas"] == [0, 6, -6, 0]


def test_settle_zimo_with_hand_and_ruleset_object(client):
    events = [{"type": "hu", "from": None, "tile": "4s",
               "winners": [{"seat": 0, "hand": {"tiles": "11333222456999s", "melds": []}}]}]
    body = settle(client, events, ruleset={"preset": "xuezhan", "zimo": "base"}).get_json()
    assert body["deltas"] == [90, -30, -30, -30]
    assert {t["reason"] for t in body["transfers"]} == {"zimo"}


def test_settle_draw_and_escape(client):
    events = [
        {"type": "draw", "seats": [
            {"seat": 0, "status": "ting", "dajiao_fan": 2},
            {"seat": 1, "status": "not_ting"},
            {"seat": 2, "status": "huazhu"},
            {"seat": 3, "hand": {"tiles": "1112345678999m"}},
        ]},
    ]
    response = settle(client, events)
    assert response.status_code == 200, response.get_data(as_text=True)
    body = response.get_json()
    assert body["ended"] is True and body["next_dealer"] == 0
    assert sum(body["deltas"]) == 0
    body = settle(client, [{"type": "escape", "seat": 2}]).get_json()
    assert body["deltas"] == [96, 96, -288, 96]


def test_settle_voids(client):
    events = [{"type": "hu", "from": 2, "tile": "5p",
               "winners": [{"seat": 1, "hand": {"tiles": "23445677p345789s"}}]}]
    response = settle(client, events, voids=[None, "s", None, None])
    assert response.status_code == 422
    body = response.get_json()
    assert body["code"] == "not_a_win" and body["event"] == 0
    response = settle(client, events, voids=[None, "x", None, None])
    assert response.get_json()["errors"] == {"voids.1": [response.get_json()["detail"]]}


def test_empty_round(client):
    body = settle(client, []).get_json()
    assert body == {"deltas": [0, 0, 0, 0], "transfers": [], "winners": [], "ended": False, "next_dealer": None}


@pytest.mark.parametrize(
    ("events", "code", "index"),
    [
        ([{"type": "kong", "seat": 1, "kind": "direct", "tile": "5m", "from": 1}], "self_discard", 0),
        ([{"type": "peng", "seat": 0, "tile": "5m", "from": 1},
          {"type": "hu", "from": 1, "tile": "5p", "winners": [{"seat": 0, "fan": 1}, {"seat": 0, "fan": 2}]}],
         "duplicate_winner", 1),
        ([{"type": "hu", "from": 1, "tile": "5p", "winners": [{"seat": 0, "hand": {"tiles": "123m"}}]}],
         "bad_hand", 0),
        ([{"type": "hu", "from": 1, "tile": "5p", "winners": [{"seat": 0, "hand": {"tiles": "12x"}}]}],
         "bad_hand", 0),
        ([{"type": "escape", "seat": 0}, {"type": "kong", "seat": 1, "kind": "concealed", "tile": "5m"}],
         "round_ended", 1),
    ],
)
def test_event_errors(client, events, code, index):
    response = settle(client, events)
    assert response.status_code == 422 and response.mimetype == "application/problem+json"
    body = response.get_json()
    assert (body["code"], body["event"]) == (code, index), body
    assert body["type"].endswith("/" + code)


@pytest.mark.parametrize(
    ("payload", "path"),
    [
        ({"events": []}, "dealer"),
        ({"dealer": 4, "events": []}, "dealer"),
        ({"dealer": 0}, "events"),
        ({"dealer": 0, "events": [{"type": "chi"}]}, "events.0.type"),
        ({"dealer": 0, "events": [{}]}, "events.0.type"),
        ({"dealer": 0, "events": [5]}, "events.0"),
        ({"dealer": 0, "events": [{"type": "kong", "seat": 5, "kind": "direct", "tile": "5m"}]}, "events.0.seat"),
        ({"dealer": 0, "events": [{"type": "kong", "seat": 1, "kind": "x", "tile": "5m"}]}, "events.0.kind"),
        ({"dealer": 0, "events": [{"type": "peng", "seat": 1, "tile": "5m"}]}, "events.0.from"),
        ({"dealer": 0, "events": [{"type": "hu", "tile": "5m", "winners": []}]}, "events.0.winners"),
        ({"dealer": 0, "events": [{"type": "hu", "tile": "5m", "winners": [{"seat": 0}]}]}, "events.0.winners.0.fan"),
        ({"dealer": 0, "events": [{"type": "hu", "tile": "5m", "winners": [{"seat": 0, "fan": 2, "hand": {"tiles": ""}}]}]},
         "events.0.winners.0.fan"),
        ({"dealer": 0, "events": [{"type": "hu", "tile": "5m", "winners": [{"seat": 0, "fan": 0}]}]},
         "events.0.winners.0.fan"),
        ({"dealer": 0, "events": [{"type": "hu", "tile": "5m", "winners": [{"seat": 0, "fan": 2, "patterns": ["x"]}]}]},
         "events.0.winners.0.patterns.0"),
        ({"dealer": 0, "events": [{"type": "hu", "tile": "5m", "last_tile": "yes", "winners": [{"seat": 0, "fan": 2}]}]},
         "events.0.last_tile"),
        ({"dealer": 0, "events": [{"type": "draw", "seats": [{"seat": 0, "status": "ting"}]}]},
         "events.0.seats.0.dajiao_fan"),
        ({"dealer": 0, "events": [{"type": "draw", "seats": [{"seat": 0, "status": "not_ting", "dajiao_fan": 2}]}]},
         "events.0.seats.0.dajiao_fan"),
        ({"dealer": 0, "events": [{"type": "draw", "seats": [{"seat": 0, "status": "huazhu"}] * 5}]}, "events.0.seats"),
        ({"dealer": 0, "events": [{"type": "escape", "seat": 0, "bogus": True}]}, "events.0.bogus"),
        ({"dealer": 0, "events": [{"type": "escape", "seat": 0}] * 201}, "events"),
        ({"dealer": 0, "events": [], "voids": ["m"]}, "voids"),
    ],
)
def test_schema_errors(client, payload, path):
    response = client.post(SETTLE, json=payload)
    assert response.status_code == 422
    body = response.get_json()
    assert body["code"] == "invalid_input"
    assert path in body["errors"], body["errors"]


def test_loaded_events_have_the_api_keys():
    data = SettleRequest().load({
        "dealer": 1,
        "events": [
            {"type": "peng", "seat": 0, "tile": "5m", "from": 2},
            {"type": "kong", "seat": 0, "kind": "added", "tile": "5m"},
            {"type": "hu", "tile": "5p", "winners": [{"seat": 1, "hand": {"tiles": ["1m"]}}, {"seat": 2, "fan": 3}]},
            {"type": "draw", "seats": [{"seat": 0, "status": "ting", "dajiao_fan": 2}, {"seat": 3, "status": "huazhu"}]},
            {"type": "escape", "seat": 3, "last_four": True},
        ],
    })
    assert data["ruleset"] == Ruleset.from_preset("xuezhan") and data["dealer"] == 1
    peng, kong, hu, draw, escape = data["events"]
    assert peng == {"type": "peng", "seat": 0, "tile": "5m", "from": 2}
    assert kong == {"type": "kong", "seat": 0, "kind": "added", "tile": "5m", "from": None}
    assert hu == {
        "type": "hu", "from": None, "tile": "5p",
        "winners": [{"seat": 1, "hand": {"tiles": ["1m"], "melds": [], "void": None}}, {"seat": 2, "fan": 3}],
        "after_kong": False, "robbing_kong": False, "last_tile": False, "heavenly": False, "earthly": False,
    }
    assert draw == {"type": "draw", "seats": [{"seat": 0, "status": "ting", "dajiao_fan": 2},
                                              {"seat": 3, "status": "huazhu"}]}
    assert escape == {"type": "escape", "seat": 3, "last_four": True}
