"""/v1/rounds/settle: request loading, response shape, event errors."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.app(store=False)

SETTLE = "/v1/rounds/settle"


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
        ({"dealer": 0, "events": {"type": "escape", "seat": 0}}, "events"),
        ({"dealer": 0, "events": [{"type": "escape", "seat": 0}] * 201}, "events"),
        ({"dealer": 0, "events": [], "voids": ["m"]}, "voids"),
    ],
)
def test_request_schema_errors(client, payload, path):
    response = client.post(SETTLE, json=payload)
    assert response.status_code == 422
    body = response.get_json()
    assert body["code"] == "invalid_input" and "event" not in body
    assert path in body["errors"], body["errors"]


KONG = {"type": "kong", "seat": 1, "kind": "concealed", "tile": "5m"}


@pytest.mark.parametrize(
    ("event", "code", "path"),
    [
        ({"type": "chi"}, "bad_event", "type"),
        ({}, "bad_event", "type"),
        (5, "bad_event", ""),
        ([KONG], "bad_event", ""),
        ({"type": "kong", "seat": 5, "kind": "direct", "tile": "5m", "from": 0}, "seat_out_of_range", "seat"),
        ({"type": "kong", "seat": "1", "kind": "concealed", "tile": "5m"}, "bad_event", "seat"),
        ({"type": "kong", "seat": 1, "kind": "x", "tile": "5m"}, "bad_event", "kind"),
        ({"type": "kong", "seat": 1, "kind": "concealed", "tile": "5m", "from": 2}, "bad_event", "from"),
        ({"type": "kong", "seat": 1, "kind": "concealed", "tile": 7}, "bad_event", "tile"),
        ({"type": "kong", "seat": 1, "kind": "concealed", "tile": "0m"}, "bad_event", "tile"),
        ({"type": "peng", "seat": 1, "tile": "5m"}, "bad_event", "from"),
        ({"type": "hu", "tile": "5m", "winners": []}, "bad_event", "winners"),
        ({"type": "hu", "tile": "5m", "winners": {"seat": 0, "fan": 2}}, "bad_event", "winners"),
        ({"type": "hu", "tile": "5m", "winners": [{"seat": 0}]}, "bad_event", "winners.0"),
        (
            {"type": "hu", "tile": "5m", "winners": [{"seat": 0, "fan": 2, "hand": {"tiles": ""}}]},
            "bad_event",
            "winners.0",
        ),
        ({"type": "hu", "tile": "5m", "winners": [{"seat": 0, "fan": 0}]}, "bad_event", "winners.0.fan"),
        (
            {"type": "hu", "tile": "5m", "winners": [{"seat": 0, "fan": 2, "patterns": ["x"]}]},
            "bad_event",
            "winners.0.patterns.0",
        ),
        ({"type": "hu", "tile": "5m", "winners": [{"seat": 0, "fan": 2, "bogus": 1}]}, "bad_event", "winners.0.bogus"),
        (
            {"type": "hu", "tile": "5m", "winners": [{"seat": 0, "hand": {"tiles": "1m", "x": 1}}]},
            "bad_event",
            "winners.0.hand.x",
        ),
        (
            {"type": "hu", "tile": "5m", "winners": [{"seat": 0, "hand": {"tiles": "1m" * 101}}]},
            "bad_event",
            "winners.0.hand.tiles",
        ),
        (
            {"type": "hu", "tile": "5m", "winners": [{"seat": 0, "hand": {"tiles": "1m", "melds": [{"type": 1}]}}]},
            "bad_event",
            "winners.0.hand.melds.0.tile",
        ),
        (
            {"type": "hu", "tile": "5m", "winners": [{"seat": 0, "hand": {"tiles": "12x"}}]},
            "bad_hand",
            "winners.0.hand",
        ),
        (
            {"type": "hu", "tile": "5m", "last_tile": "yes", "winners": [{"seat": 0, "fan": 2}]},
            "bad_event",
            "last_tile",
        ),
        ({"type": "hu", "tile": "5m", "last_tile": None, "winners": [{"seat": 0, "fan": 2}]}, "bad_event", "last_tile"),
        ({"type": "draw", "seats": [{"seat": 0, "status": "ting"}]}, "bad_event", "seats.0.dajiao_fan"),
        (
            {"type": "draw", "seats": [{"seat": 0, "status": "not_ting", "dajiao_fan": 2}]},
            "bad_event",
            "seats.0.dajiao_fan",
        ),
        ({"type": "draw", "seats": [{"seat": 0, "status": "maybe"}]}, "bad_event", "seats.0.status"),
        ({"type": "escape", "seat": 0, "bogus": True}, "bad_event", "bogus"),
        ({"type": "escape", "seat": 0, "seats": None}, "bad_event", "seats"),
    ],
)
def test_event_schema_errors_name_the_event_and_the_member(client, event, code, path):
    """A malformed event is the rules core's error: its index in `event`, the member in `errors`."""
    response = settle(client, [KONG, event])
    assert response.status_code == 422 and response.mimetype == "application/problem+json"
    body = response.get_json()
    assert (body["code"], body["event"]) == (code, 1), body
    assert list(body["errors"]) == ["events.1" + (f".{path}" if path else "")], body["errors"]


def test_a_draw_listing_five_seats_names_its_event(client):
    """a schema error inside an event of /v1/rounds/settle carries `event` like any other."""
    five = {"type": "draw", "seats": [{"seat": s % 4, "status": "not_ting"} for s in range(5)]}
    body = settle(client, [KONG, KONG | {"seat": 2, "tile": "6m"}, five]).get_json()
    assert (body["status"], body["code"], body["event"]) == (422, "bad_seats", 2), body
