"""Stakes and bankrolls over HTTP (docs/api.md "Stakes", docs/rules.md#s12): Flask's test client, real Redis.

Expected coins are worked out by hand from §12 in the comments.  Every response body is
checked against the OpenAPI document's schema for it, and every table is re-folded from its
log at the end (``check``) to prove the stored state, coins included, is the fold.
"""

from __future__ import annotations

import uuid

import jsonschema
import pytest

from service.api import create_app
from service.api.app import openapi_dict
from service.store.table_store import TableStore
from tests.problems import problem

PLAYERS = ["东", "南", "西", "北"]
PROBLEM = "application/problem+json"
SEED_001 = {"coin_per_point": 200, "fee": 400, "bankrolls": [20000, 1000, 20000, 20000]}
NORMAL_ZIMO_BASE = {"preset": "normal", "zimo": "base"}   # 自摸 2 fan = 12 + 6 (自摸加底) = 18 from each


@pytest.fixture(scope="module")
def doc():
    return openapi_dict(create_app({"TESTING": True}))


@pytest.fixture
def store(redis_client):
    return TableStore(redis_client)


def conforms(doc, name: str, body) -> None:
    jsonschema.Draft202012Validator({"$ref": f"#/components/schemas/{name}", "components": doc["components"]}
                                    ).validate(body)


class Table:
    def __init__(self, client, doc, **body):
        self.client, self.doc = client, doc
        r = client.post("/v1/tables", json={"players": PLAYERS, **body})
        assert r.status_code == 201, r.get_data(as_text=True)
        self.created = r.get_json()
        conforms(doc, "TableCreated", self.created)
        self.id = self.created["id"]
        self.auth = {"Authorization": f"Bearer {self.created['token']}"}

    def post(self, event: dict, **headers) -> dict:
        r = self.client.post(f"/v1/tables/{self.id}/events", json=event, headers={**self.auth, **headers})
        assert r.status_code == 201, (event, r.get_data(as_text=True))
        conforms(self.doc, "EventAppended", r.get_json())
        return r.get_json()

    def refuse(self, event: dict, code: str, status: int = 422) -> dict:
        before = self.view()
        body = problem(self.client.post(f"/v1/tables/{self.id}/events", json=event, headers=self.auth), status, code)
        assert self.view() == before          # nothing changed
        return body

    def void(self, seq: int) -> dict:
        r = self.client.post(f"/v1/tables/{self.id}/events/{seq}/void", headers=self.auth)
        assert r.status_code == 201, r.get_data(as_text=True)
        conforms(self.doc, "EventAppended", r.get_json())
        return r.get_json()

    def view(self) -> dict:
        r = self.client.get(f"/v1/tables/{self.id}", headers=self.auth)
        assert r.status_code == 200
        conforms(self.doc, "TableView", r.get_json())
        return r.get_json()

    def log(self) -> list[dict]:
        r = self.client.get(f"/v1/tables/{self.id}/events?limit=500", headers=self.auth)
        conforms(self.doc, "EventsPage", r.get_json())
        return r.get_json()["events"]


def zimo(seat: int, fan: int) -> dict:
    return {"type": "hu", "from": None, "tile": "5p", "winners": [{"seat": seat, "fan": fan}]}


def test_seed_001_at_a_table(client, doc, store):
    t = Table(client, doc, ruleset=NORMAL_ZIMO_BASE, stakes=SEED_001)
    assert t.created["coins"] == [20000, 1000, 20000, 20000]
    start = t.post({"type": "round_start"})
    assert start["coins"] == [20000, 1000, 20000, 20000]
    assert start["round"]["coins_delta"] is None and start["round"]["fees"] is None
    end = t.post(zimo(0, 2))
    # each owes 18 × 200 = 3,600; seat 1 holds 1,000: pot 8,200, then the 400 fee where there is anything left
    assert end["balances"] == [54, -18, -18, -18]
    assert end["round"]["coins_delta"] == [7800, -1000, -4000, -4000]
    assert end["round"]["fees"] == [400, 0, 400, 400]
    assert end["coins"] == [27800, 0, 16000, 16000]
    view = t.view()
    assert view["coins"] == [27800, 0, 16000, 16000]
    (summary,) = view["rounds"]
    assert summary["bankrolls"] == SEED_001["bankrolls"]
    assert summary["coins_delta"] == [7800, -1000, -4000, -4000] and summary["fees"] == [400, 0, 400, 400]
    assert t.post({"type": "buy_in", "seat": 1, "coins": 5000})["coins"] == [27800, 5000, 16000, 16000]
    log = t.log()
    assert log[-1] == {"seq": 3, "type": "buy_in", "seat": 1, "coins": 5000, "round": 1, "at": log[-1]["at"],
                       "voided": False}
    assert store.check(t.id)["ok"]


def test_a_table_without_stakes_shows_no_coins_and_refuses_buy_ins(client, doc):
    t = Table(client, doc)
    assert "coins" not in t.created
    assert "coins" not in t.post({"type": "round_start"})
    t.post({"type": "round_end"})
    view = t.view()
    assert "coins" not in view and "coins_delta" not in view["rounds"][0]
    t.refuse({"type": "buy_in", "seat": 0, "coins": 100}, "no_stakes")


def test_multi_round_table_with_a_bankrupt_seat_a_buy_in_and_voids(client, doc, store):
    t = Table(
        client, doc, ruleset="normal", stakes={"coin_per_point": 10, "fee": 20, "bankrolls": [500, 100, 500, 500]}
    )
    # round 1: seat 0 自摸 3 fan, 24 from each = 240 coins each; seat 1 holds 100 and goes bankrupt
    t.post({"type": "round_start"})
    assert t.post(zimo(0, 3))["coins"] == [1060, 0, 240, 240]      # 500 + 580 − 20; 0 (no fee); 500 − 240 − 20
    # round 2: the bankrupt seat loses 12 to seat 2 and pays nothing; only the fees move
    t.post({"type": "round_start"})
    r2 = t.post({"type": "hu", "from": 1, "tile": "5p", "winners": [{"seat": 2, "fan": 2}]})
    assert r2["round"]["coins_delta"] == [-20, 0, -20, -20] and r2["coins"] == [1040, 0, 220, 220]
    # seat 1 buys in between rounds, then wins round 3 (12 from each: 120 coins each)
    assert t.post({"type": "buy_in", "seat": 1, "coins": 300})["coins"] == [1040, 300, 220, 220]  # seq 5
    t.post({"type": "round_start"})
    r3 = t.post(zimo(1, 2))                                                                           # seq 7
    assert r3["coins"] == [900, 640, 80, 80]
    # voiding round 3's last event reopens it: its coins and fees are undone
    v = t.void(7)
    assert v["voided"] == 7 and v["coins"] == [1040, 300, 220, 220] and v["round"]["status"] == "playing"
    assert v["round"]["coins_delta"] is None
    t.refuse({"type": "buy_in", "seat": 0, "coins": 1}, "round_in_progress")
    assert t.post(zimo(3, 1))["coins"] == [960, 220, 140, 380]                                        # seq 9
    view = t.view()
    assert [r["bankrolls"] for r in view["rounds"]] == [[500, 100, 500, 500], [1060, 0, 240, 240],
                                                       [1040, 300, 220, 220]]
    assert sum(view["coins"]) == 1600 + 300 - 20 * (3 + 3 + 4)   # the house took exactly the fees
    # voiding the buy-in takes it out of round 3: seat 1 owes 60 and holds nothing
    assert t.void(5)["coins"] == [960, 0, 140, 320]               # seat 3: 220 + 120 (the pot) − 20
    assert t.view()["rounds"][2]["bankrolls"] == [1040, 0, 220, 220]
    assert [e["voided"] for e in t.log() if e["seq"] in (5, 7)] == [True, True]
    assert store.check(t.id)["ok"]


def test_reopening_a_round_with_a_buy_in_after_it_is_a_conflict(client, doc, store):
    t = Table(client, doc, ruleset="normal", stakes={"coin_per_point": 1, "bankrolls": [50, 50, 50, 50]})
    t.post({"type": "round_start"})
    t.post(zimo(0, 1))
    t.post({"type": "buy_in", "seat": 1, "coins": 5})
    before = t.view()
    body = problem(client.post(f"/v1/tables/{t.id}/events/2/void", headers=t.auth), 409, "void_conflict")
    assert body["event"] == 3 and t.view() == before
    t.void(3)
    assert t.void(2)["coins"] == [50, 50, 50, 50]
    assert store.check(t.id)["ok"]


def test_buy_in_before_the_first_round_can_be_voided(client, doc, store):
    t = Table(client, doc, stakes={"coin_per_point": 1, "bankrolls": [0, 0, 0, 0]})
    first = t.post({"type": "buy_in", "seat": 2, "coins": 70})
    assert first["round"] is None and first["coins"] == [0, 0, 70, 0]
    t.post({"type": "round_start"})
    t.post({"type": "kong", "seat": 2, "kind": "concealed", "tile": "1s"})
    assert t.void(1)["coins"] == [0, 0, 0, 0]
    assert t.view()["round"]["bankrolls"] == [0, 0, 0, 0]
    assert store.check(t.id)["ok"]


@pytest.mark.parametrize("event, code, field", [
    ({"type": "buy_in", "seat": 0, "coins": 0}, "bad_event", "coins"),
    ({"type": "buy_in", "seat": 0, "coins": 1.5}, "bad_event", "coins"),
    ({"type": "buy_in", "seat": 0, "coins": "5"}, "bad_event", "coins"),
    ({"type": "buy_in", "seat": 0}, "bad_event", "coins"),
    ({"type": "buy_in", "seat": 0, "coins": 5, "note": 1}, "bad_event", "note"),
    ({"type": "buy_in", "seat": True, "coins": 5}, "bad_event", "seat"),
    ({"type": "buy_in", "seat": 4, "coins": 5}, "seat_out_of_range", "seat"),
    ({"type": "buy_in", "seat": 0, "coins": 10**15}, "too_many_coins", "coins"),
])
def test_malformed_buy_ins_are_refused_naming_the_member(client, doc, event, code, field):
    t = Table(client, doc, stakes={"coin_per_point": 1, "bankrolls": [1, 1, 1, 1]})
    body = t.refuse(event, code)
    assert body["event"] == 1 and field in body["errors"]


@pytest.mark.parametrize("stakes, field", [
    ({"coin_per_point": 0, "bankrolls": [1, 1, 1, 1]}, "stakes.coin_per_point"),
    ({"coin_per_point": 1.5, "bankrolls": [1, 1, 1, 1]}, "stakes.coin_per_point"),
    ({"coin_per_point": "200", "bankrolls": [1, 1, 1, 1]}, "stakes.coin_per_point"),
    ({"coin_per_point": 1, "fee": -1, "bankrolls": [1, 1, 1, 1]}, "stakes.fee"),
    ({"coin_per_point": 1, "bankrolls": [1, 1, 1]}, "stakes.bankrolls"),
    ({"coin_per_point": 1, "bankrolls": [1, 1, None, 1]}, "stakes.bankrolls.2"),
    ({"coin_per_point": 1, "bankrolls": [10**15, 1, 1, 1]}, "stakes.bankrolls"),
    ({"coin_per_point": 1}, "stakes.bankrolls"),
    ({"coin_per_point": 1, "bankrolls": [1, 1, 1, 1], "house": 1}, "stakes.house"),
    ("200", "stakes"),
])
def test_bad_stakes_are_a_clear_422_and_create_nothing(client, redis_client, stakes, field):
    body = problem(client.post("/v1/tables", json={"players": PLAYERS, "stakes": stakes}), 422, "bad_stakes")
    assert field in body["errors"], body
    assert redis_client.keys("{t:*") == []


def test_replays_give_the_coins_again(client, doc):
    key = str(uuid.uuid4())
    body = {"players": PLAYERS, "stakes": {"coin_per_point": 3, "fee": 1, "bankrolls": [9, 9, 9, 9]}}
    first = client.post("/v1/tables", json=body, headers={"Idempotency-Key": key})
    again = client.post("/v1/tables", json=body, headers={"Idempotency-Key": key})
    assert again.headers.get("Idempotent-Replayed") == "true" and again.get_json() == first.get_json()
    assert again.get_json()["coins"] == [9, 9, 9, 9]
    t = Table.__new__(Table)
    t.client, t.doc, t.id = client, doc, first.get_json()["id"]
    t.auth = {"Authorization": f"Bearer {first.get_json()['token']}"}
    written = t.post({"type": "buy_in", "seat": 3, "coins": 4}, **{"Idempotency-Key": "buy-1"})
    replay = client.post(f"/v1/tables/{t.id}/events", json={"type": "buy_in", "seat": 3, "coins": 4},
                         headers={**t.auth, "Idempotency-Key": "buy-1"})
    assert replay.headers.get("Idempotent-Replayed") == "true" and replay.get_json() == written
    assert written["coins"] == [9, 9, 9, 13] and t.view()["version"] == 1


# -- POST /v1/rounds/settle with stakes ------------------------------------------------------------
def test_settle_with_stakes(client, doc):
    body = {"ruleset": NORMAL_ZIMO_BASE, "dealer": 0, "events": [zimo(0, 2)], "stakes": SEED_001}
    r = client.post("/v1/rounds/settle", json=body)
    assert r.status_code == 200
    conforms(doc, "SettleResponse", r.get_json())
    assert r.get_json()["coins_delta"] == [7800, -1000, -4000, -4000] and r.get_json()["fees"] == [400, 0, 400, 400]
    # a round not yet ended: null; without stakes: no such members
    open_round = client.post("/v1/rounds/settle", json={**body, "ruleset": "xuezhan"}).get_json()
    assert open_round["ended"] is False and open_round["coins_delta"] is None and open_round["fees"] is None
    conforms(doc, "SettleResponse", open_round)
    plain = client.post("/v1/rounds/settle", json={k: v for k, v in body.items() if k != "stakes"}).get_json()
    assert "coins_delta" not in plain and "fees" not in plain


def test_settle_with_stakes_three_players_and_bad_stakes(client):
    events = [{"type": "escape", "seat": 2}]   # 16 units × 6 to each of the two others
    body = {"ruleset": "sanren-liangfang", "dealer": 0, "events": events,
            "stakes": {"coin_per_point": 100, "fee": 50, "bankrolls": [1000, 1000, 300]}}
    got = client.post("/v1/rounds/settle", json=body).get_json()
    # seat 2 owes 9,600 to each and holds 300: 150 each, then the fee
    assert got["deltas"] == [96, 96, -192] and got["coins_delta"] == [100, 100, -300] and got["fees"] == [50, 50, 0]
    bad = problem(client.post("/v1/rounds/settle", json={**body, "stakes": {**body["stakes"],
                                                                          "bankrolls": [1, 1, 1, 1]}}),
                  422, "bad_stakes")
    assert "stakes.bankrolls" in bad["errors"]
    problem(client.post("/v1/rounds/settle", json={**body, "stakes": {"coin_per_point": True, "bankrolls": [1, 1, 1]}}),
            422, "bad_stakes")
