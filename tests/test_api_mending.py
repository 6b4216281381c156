"""Mending the record over HTTP (docs/api.md "Mending the record", docs/rules.md#s15): Flask's test client,
real Redis.

A correction (``PUT /v1/tables/{id}/rounds/{n}/events``), the rounds explained, penalties and adjusts,
the settle-up in coins, and the room a full table keeps.  Every body is checked against the OpenAPI
document's schema for it, and every table is re-folded from its log (``check``) to prove the stored
state is the fold of the log.
"""

from __future__ import annotations

import jsonschema
import pytest

from service.api import create_app
from service.api.app import openapi_dict
from service.config import NO_LIMITS
from service.store.table_store import TableStore
from tests.problems import problem

PLAYERS = ["东", "南", "西", "北"]


@pytest.fixture(scope="module")
def doc():
    return openapi_dict(create_app({"TESTING": True}))


@pytest.fixture
def store(redis_client):
    return TableStore(redis_client)


def conforms(doc, name: str, body) -> None:
    jsonschema.Draft202012Validator({"$ref": f"#/components/schemas/{name}", "components": doc["components"]}
                                    ).validate(body)


def start(dealer=None):
    return {"type": "round_start"} | ({} if dealer is None else {"dealer": dealer})


def kong(seat, kind, tile, frm=None):
    return {"type": "kong", "seat": seat, "kind": kind, "tile": tile} | ({} if frm is None else {"from": frm})


def hu(tile, seat, fan, frm=None, **flags):
    return {"type": "hu", "from": frm, "tile": tile, "winners": [{"seat": seat, "fan": fan}], **flags}


END = {"type": "round_end"}


class Table:
    def __init__(self, client, doc, **body):
        self.client, self.doc = client, doc
        r = client.post("/v1/tables", json={"players": PLAYERS, **body})
        assert r.status_code == 201, r.get_data(as_text=True)
        self.id = r.get_json()["id"]
        self.auth = {"Authorization": f"Bearer {r.get_json()['token']}"}
        self.read = {"Authorization": f"Bearer {r.get_json()['read_token']}"}
        self.url = f"/v1/tables/{self.id}"

    def post(self, *events, **headers) -> dict:
        for event in events:
            r = self.client.post(f"{self.url}/events", json=event, headers={**self.auth, **headers})
            assert r.status_code == 201, (event, r.get_data(as_text=True))
            conforms(self.doc, "EventAppended", r.get_json())
        return r.get_json()

    def refuse(self, event, status, code) -> dict:
        return problem(self.client.post(f"{self.url}/events", json=event, headers=self.auth), status, code)

    def correct(self, number, body, status=201, **headers):
        r = self.client.put(f"{self.url}/rounds/{number}/events", json=body, headers={**self.auth, **headers})
        if status != 201:
            return r
        assert r.status_code == 201, r.get_data(as_text=True)
        conforms(self.doc, "Corrected", r.get_json())
        assert r.headers["ETag"] == f'"{r.get_json()["version"]}"'
        assert r.headers["Location"] == f"{self.url}/rounds/{number}"
        return r.get_json()

    def round(self, number) -> dict:
        r = self.client.get(f"{self.url}/rounds/{number}", headers=self.read)
        assert r.status_code == 200, r.get_data(as_text=True)
        conforms(self.doc, "RoundExplained", r.get_json())
        return r.get_json()

    def rounds(self, **query) -> dict:
        r = self.client.get(f"{self.url}/rounds", headers=self.read, query_string=query)
        assert r.status_code == 200, r.get_data(as_text=True)
        conforms(self.doc, "RoundsPage", r.get_json())
        return r.get_json()

    def view(self) -> dict:
        return self.client.get(self.url, headers=self.read).get_json()

    def check(self, store):
        report = store.check(self.id)
        assert report["ok"], report
        assert report["balances"] == self.view()["balances"]


# -- corrections ----------------------------------------------------------------------------------
def test_the_forgotten_kong_is_put_where_it_happened(client, doc, store):
    """Round 1: seat 0 自摸 2 fan (12 from each); round 2 under way.  The table then remembers seat 2's
    暗杠 (12 from each) before the 自摸: the correction rewrites round 1, round 2 stands."""
    t = Table(client, doc)
    t.post(start(), hu("5p", 0, 2), END, start(dealer=0), kong(1, "concealed", "1m"))
    assert t.view()["balances"] == [24, 24, -24, -24]
    body = t.correct(1, {"events": [kong(2, "concealed", "7s"), hu("5p", 0, 2)], "note": "the 暗杠 came first"})
    assert body["seq"] == body["version"] == 6
    assert body["balances"] == [12, 12, 12, -36] and body["changes"] == [-12, -12, 36, -12]
    rnd = body["round"]
    assert (rnd["number"], rnd["status"], rnd["ended_by"], rnd["deltas"]) == (
        1,
        "ended",
        "round_end",
        [24, -24, 24, -24],
    )
    assert [(e["seq"], e["index"], e["type"]) for e in rnd["events"]] == [(6, 0, "kong"), (6, 1, "hu")]
    assert rnd["events"][0]["transfers"] == [{"from": s, "to": 2, "points": 12, "reason": "kong_concealed", "event": 6}
                                             for s in (0, 1, 3)]
    assert rnd["corrected_by"] == [6] and (rnd["first_seq"], rnd["last_seq"]) == (1, 3)
    assert t.round(1) == rnd
    # the log holds one record more: the correction, as given
    log = client.get(f"{t.url}/events?after=5", headers=t.read).get_json()["events"]
    assert [(r["seq"], r["type"], r["round"], r["note"]) for r in log] == [(6, "correction", 1, "the 暗杠 came first")]
    conforms(doc, "EventsPage", {"events": log, "next": None})
    # the summary counts the kong
    seats = client.get(f"{t.url}/summary", headers=t.read).get_json()["seats"]
    assert seats[2]["kongs"]["concealed"] == 1 and seats[1]["kongs"]["concealed"] == 1
    t.check(store)


def test_a_round_keeps_its_own_events_when_an_earlier_round_is_corrected_during_it(client, doc, store):
    """Round 2 is being played (its 暗杠 seq 5) when round 1 is corrected (seq 6), then round 2 ends: the
    correction lies in round 2's span of the log but is round 1's, so round 2 explains only its own kong."""
    t = Table(client, doc)
    t.post(start(), hu("5p", 0, 2), END, start(dealer=0), kong(1, "concealed", "1m"))
    t.correct(1, {"events": [kong(2, "concealed", "7s"), hu("5p", 0, 2)]})
    mine = [(5, None, "kong")]
    assert [(e["seq"], e.get("index"), e["type"]) for e in t.round(2)["events"]] == mine
    assert t.round(2)["corrected_by"] == [] and t.round(2)["deltas"] == [-12, 36, -12, -12]
    t.post(END)
    for rnd in (t.round(2), t.rounds()["rounds"][1]):
        assert [(e["seq"], e.get("index"), e["type"]) for e in rnd["events"]] == mine
        assert sum(tr["points"] for tr in rnd["transfers"]) == 36
    assert [(e["seq"], e["index"]) for e in t.round(1)["events"]] == [(6, 0), (6, 1)]
    t.check(store)


def test_every_round_explained(client, doc, store):
    t = Table(client, doc)
    t.post(start(), kong(1, "direct", "5m", frm=2), hu("9p", 0, 2, frm=3), END, start(dealer=0),
           {"type": "penalty", "seat": 3, "kind": "zhahu"})
    page = t.rounds()
    assert [(r["number"], r["status"]) for r in page["rounds"]] == [(1, "ended"), (2, "playing")]
    first, second = page["rounds"]
    assert [(e["seq"], e["type"]) for e in first["events"]] == [(2, "kong"), (3, "hu")]
    assert "index" not in first["events"][0]
    assert first["events"][0]["transfers"] == [{"from": 2, "to": 1, "points": 6, "reason": "kong_direct", "event": 2}]
    assert first["transfers"] == [*first["events"][0]["transfers"], *first["events"][1]["transfers"]]
    assert first["deltas"] == [12, 6, -6, -12] and first["next_dealer"] == 0 and first["corrected_by"] == []
    assert second["events"][0]["transfers"] == [
        {"from": 3, "to": s, "points": 24, "reason": "penalty", "event": 6} for s in range(3)]
    assert (second["next_dealer"], second["last_seq"], second["ended_by"]) == (None, None, None)
    assert t.rounds(limit=1) == {"rounds": [first], "next": "1"}
    assert t.rounds(cursor="1") == {"rounds": [second], "next": None}
    problem(client.get(f"{t.url}/rounds/3", headers=t.read), 404, "round_not_found")
    problem(client.get(f"{t.url}/rounds/0", headers=t.read), 404, "round_not_found")
    problem(client.get("/v1/tables/0123456789abcdef/rounds/1", headers=t.read), 401, "unauthorized")


def test_bad_corrections_change_nothing(client, doc, store):
    t = Table(client, doc)
    t.post(start(), hu("5p", 1, 1, frm=0), END, start())
    version = t.view()["version"]
    assert problem(t.correct(9, {"events": []}, status=404), 404, "round_not_found")
    assert problem(client.put("/v1/tables/0123456789abcdef/rounds/1/events", json={"events": []},
                              headers=t.auth), 401, "unauthorized")
    assert problem(t.correct(1, {"events": []}, status=412, **{"If-Match": '"2"'}), 412,
                   "version_mismatch")["version"] == version
    # an event that cannot happen: its index, its code (and the member, for a malformed one)
    body = problem(t.correct(1, {"events": [{"type": "escape", "seat": 3}, kong(1, "concealed", "3m")]}, status=422),
                   422, "round_ended")
    assert body["event"] == 1
    body = problem(t.correct(1, {"events": [kong(1, "concealed", "3m"), kong(7, "concealed", "4m")]}, status=422),
                   422, "seat_out_of_range")
    assert body["event"] == 1 and "events.1.seat" in body["errors"]
    body = problem(t.correct(1, {"events": [{"type": "round_start"}]}, status=422), 422, "bad_event")
    assert body["event"] == 0 and "events.0.type" in body["errors"]
    body = problem(t.correct(1, {"events": [hu("5p", 1, 1, frm=0) | {
        "winners": [{"seat": 1, "fan": 2, "patterns": ["qiangganghu"]}]}]}, status=422), 422, "patterns_contradict_win")
    assert body["event"] == 0
    # a later round that would break: 409 naming it and its record
    body = problem(t.correct(1, {"events": [hu("5p", 2, 1, frm=0)]}, status=409), 409, "correction_conflict")
    assert (body["round"], body["event"]) == (2, 4)
    for bad, field in [({}, "events"), ({"events": [], "x": 1}, "x"), ({"events": [], "note": "n" * 501}, "note"),
                       ({"events": [], "dealer": 4}, "dealer"), ({"events": [], "voids": ["m"]}, "voids"),
                       ({"events": [], "voids": ["x", None, None, None]}, "voids.0")]:
        assert field in problem(t.correct(1, bad, status=422), 422, "invalid_input")["errors"], bad
    assert t.view()["version"] == version
    # a finished table takes no correction
    t.post(END)
    assert client.post(f"{t.url}/finish", headers=t.auth).status_code == 200
    problem(t.correct(1, {"events": []}, status=409), 409, "table_finished")
    problem(t.correct(9, {"events": []}, status=409), 409, "table_finished")
    t.check(store)


def test_a_correction_is_idempotent_voidable_and_its_replaced_records_are_not(client, doc, store):
    t = Table(client, doc)
    t.post(start(), kong(0, "concealed", "1m"), kong(1, "concealed", "2m"))
    before = t.view()
    key = {"Idempotency-Key": "phone-1:fix-1"}
    first = t.correct(1, {"events": [kong(0, "concealed", "1m")]}, **key)
    r = client.put(f"{t.url}/rounds/1/events", json={"events": [kong(0, "concealed", "1m")]},
                   headers={**t.auth, **key})
    assert r.status_code == 201 and r.headers["Idempotent-Replayed"] == "true" and r.get_json() == first
    problem(client.put(f"{t.url}/rounds/1/events", json={"events": []}, headers={**t.auth, **key}), 422,
            "idempotency_key_reused")
    assert first["balances"] == [36, -12, -12, -12] and t.view()["round"]["status"] == "playing"
    # the records it replaced cannot be voided: it says which correction replaced them
    body = problem(client.post(f"{t.url}/events/3/void", headers=t.auth), 409, "void_conflict")
    assert body["event"] == 4 and "correction 4" in body["detail"]
    t.post(kong(2, "concealed", "3m"))  # the round goes on
    assert [(e["seq"], e.get("index")) for e in t.round(1)["events"]] == [(4, 0), (5, None)]
    # voided, the correction gives back both kongs it replaced; the kong after it stands
    r = client.post(f"{t.url}/events/4/void", headers=t.auth)
    assert r.status_code == 201 and r.get_json()["balances"] == [12, 12, 12, -36]
    assert [e["seq"] for e in t.round(1)["events"]] == [2, 3, 5]
    assert client.post(f"{t.url}/events/3/void", headers=t.auth).status_code == 201  # no longer replaced
    assert before["balances"] == [24, 24, -24, -24] and t.view()["balances"] == [24, -24, 24, -24]
    t.check(store)


def test_voiding_a_correction_gives_back_what_it_replaced(client, doc, store):
    t = Table(client, doc)
    t.post(start(), hu("5p", 0, 2), END, start(dealer=0), kong(1, "concealed", "1m"), END)
    before = t.view()
    before_rounds = t.rounds()
    t.correct(1, {"events": [kong(2, "concealed", "7s"), hu("5p", 0, 2)]})
    t.correct(1, {"events": [kong(3, "concealed", "7s"), hu("5p", 0, 2)]})
    assert t.round(1)["corrected_by"] == [7, 8]
    problem(client.post(f"{t.url}/events/7/void", headers=t.auth), 409, "void_conflict")  # replaced by 8
    r = client.post(f"{t.url}/events/8/void", headers=t.auth)
    assert r.status_code == 201 and r.get_json()["deltas"] == [0, 0, 48, -48]
    assert t.round(1)["corrected_by"] == [7]
    assert client.post(f"{t.url}/events/7/void", headers=t.auth).status_code == 201
    after = t.view()
    assert {k: v for k, v in after.items() if k != "version"} == {k: v for k, v in before.items() if k != "version"}
    assert t.rounds() == before_rounds
    t.check(store)


def test_corrections_reach_the_stream_s_log_and_the_webhooks(redis_url, store, redis_client):
    from service.store import keys

    keyed = create_app({"TESTING": True, "REDIS_URL": redis_url,
                        **{v: 0 for v in NO_LIMITS}, "API_KEYS": "acme=" + "k" * 40}).test_client()
    r = keyed.post("/v1/tables", json={"players": PLAYERS}, headers={"X-API-Key": "k" * 40})
    tid, auth = r.get_json()["id"], {"Authorization": f"Bearer {r.get_json()['token']}"}
    for event in (start(), kong(1, "concealed", "1m")):
        assert keyed.post(f"/v1/tables/{tid}/events", json=event, headers=auth).status_code == 201
    r = keyed.put(f"/v1/tables/{tid}/rounds/1/events", json={"events": [{"type": "draw", "seats": [
        {"seat": s, "status": "not_ting"} for s in range(4)]}]}, headers=auth)
    assert r.status_code == 201
    entries = redis_client.xrange(keys.outbox(tid))
    types = [e[1][b"t"].decode() for e in entries]
    assert types[-2:] == ["round.corrected", "round.ended"]
    import orjson
    data = orjson.loads(entries[-2][1][b"d"])
    assert data["seq"] == 3 and data["record"]["type"] == "correction" and data["balances"] == [0, 0, 0, 0]
    # the stream sends it from the log like any record, with the balances after it
    records = list(store.stream_records(tid, 0))
    frames = [f for chunk in records for f in chunk]
    assert [f["type"] for f in frames] == ["round_start", "kong", "correction"]
    assert frames[-1]["balances"] == [0, 0, 0, 0] and frames[1]["balances"] == [-12, 36, -12, -12]


# -- penalties, adjusts, given patterns ------------------------------------------------------------
def test_penalties_and_adjusts_at_a_table(client, doc, store):
    t = Table(client, doc, ruleset={"preset": "xuezhan", "cap": 4})
    t.post(start())
    body = t.post({"type": "penalty", "seat": 1, "kind": "zhahu"})  # the cap, 4 fan: 48 to each
    assert body["transfers"] == [{"from": 1, "to": s, "points": 48, "reason": "penalty", "event": 2} for s in (0, 2, 3)]
    t.post({"type": "penalty", "seat": 2, "kind": "xianggong"})
    assert t.refuse(hu("5p", 2, 2, frm=0), 422, "xianggong")["event"] == 4
    body = t.refuse({"type": "adjust", "transfers": [{"from": 0, "to": 1, "points": 10}]}, 409, "round_in_progress")
    assert body["event"] == 4
    t.refuse({"type": "penalty", "seat": 1, "kind": "nap"}, 422, "bad_event")
    t.post(END)
    body = t.post({"type": "adjust", "transfers": [{"from": 0, "to": 1, "points": 10}], "note": "茶水"})
    assert body["transfers"] == [{"from": 0, "to": 1, "points": 10, "reason": "adjust", "event": 5}]
    assert body["balances"] == [38, -134, 48, 48] and body["round"]["deltas"] == [48, -144, 48, 48]
    seats = client.get(f"{t.url}/summary", headers=t.read).get_json()["seats"]
    conforms(doc, "TableSummaryOfEvening", client.get(f"{t.url}/summary", headers=t.read).get_json())
    assert [s["penalties_paid"] for s in seats] == [0, 144, 0, 0]
    assert [s["adjusted"] for s in seats] == [-10, 10, 0, 0] and [s["total"] for s in seats] == [38, -134, 48, 48]
    assert client.get("/v1/rulesets").get_json()["presets"]["xuezhan"]["zhahu_fan"] is None
    t.check(store)


def test_given_patterns_are_checked_at_a_table_and_in_a_batch(client, doc):
    t = Table(client, doc)
    t.post(start(), kong(2, "added", "5m"))
    robbed = {"type": "hu", "from": 2, "tile": "5m", "winners": [{"seat": 0, "fan": 2, "patterns": ["qiangganghu"]}]}
    body = t.refuse(robbed, 422, "patterns_contradict_win")
    assert body["event"] == 3 and "robbing_kong" in body["detail"] and "winners.0.patterns.0" in body["errors"]
    assert t.post(robbed | {"robbing_kong": True})["balances"] == [12, 0, -12, 0]
    settle = {"dealer": 0, "events": [kong(2, "added", "5m"), robbed]}
    r = client.post("/v1/batch", json={"items": [{"op": "settle", **settle}]})
    result = r.get_json()["results"][0]
    assert result["status"] == 422 and result["problem"]["code"] == "patterns_contradict_win"
    assert result["problem"]["event"] == 1
    assert problem(client.post("/v1/rounds/settle", json=settle), 422, "patterns_contradict_win")["event"] == 1


def test_a_summary_with_stakes_settles_up_in_coins(client, doc):
    """Seat 3 holds 50 coins at 10 a point: 自摸 1 fan by seat 0 takes 60 from seats 1 and 2 and the 50
    seat 3 has (扣尽).  The settle-up squares the coins: seat 3 pays what it lost, 50, not its 60."""
    t = Table(client, doc, stakes={"coin_per_point": 10, "fee": 0, "bankrolls": [1000, 1000, 1000, 50]})
    t.post(start(), hu("5p", 0, 1), END)
    summary = client.get(f"{t.url}/summary", headers=t.read).get_json()
    conforms(doc, "TableSummaryOfEvening", summary)
    assert [s["coins"] for s in summary["seats"]] == [170, -60, -60, -50]
    assert summary["settle_up"] == [{"from": 1, "to": 0, "coins": 60}, {"from": 2, "to": 0, "coins": 60},
                                    {"from": 3, "to": 0, "coins": 50}]


# -- the room of a full table ----------------------------------------------------------------------
def full_table(redis_url, doc):
    """A table of MAX_TABLE_EVENTS = 40 whose open round took kongs until 409 (24 records: 16 are kept for
    mending); its client, the table and the tiles of its kongs."""
    client = create_app({"TESTING": True, "REDIS_URL": redis_url, **{v: 0 for v in NO_LIMITS},
                         "MAX_TABLE_EVENTS": 40}).test_client()
    t = Table(client, doc)
    t.post(start())
    tiles = [f"{r}{s}" for s in "mps" for r in range(1, 10)]
    kongs = 0
    while True:
        r = client.post(f"{t.url}/events", json=kong(kongs % 4, "concealed", tiles[kongs]), headers=t.auth)
        if r.status_code == 409:
            break
        assert r.status_code == 201
        kongs += 1
    assert problem(r, 409, "table_full")["version"] == 24 == 1 + kongs
    return client, t, tiles[:kongs]


def test_a_full_table_can_always_end_its_round_and_finish(redis_url, doc, store):
    """The issue's table: MAX_TABLE_EVENTS = 40, kongs until 409, then 16 voids fill it.  The round_end
    that closes the open round is still taken (it used to be 409 `table_full`, and finishing 409
    `round_in_progress`, for ever), and the table finishes."""
    client, t, _ = full_table(redis_url, doc)
    for seq in range(24, 8, -1):  # 16 voids, the latest kong first
        assert client.post(f"{t.url}/events/{seq}/void", headers=t.auth).status_code == 201
    assert t.view()["version"] == 40
    problem(client.post(f"{t.url}/events/8/void", headers=t.auth), 409, "table_full")
    problem(client.post(f"{t.url}/finish", headers=t.auth), 409, "round_in_progress")
    r = client.post(f"{t.url}/events", json=END, headers=t.auth)
    assert r.status_code == 201 and r.get_json()["version"] == 41
    problem(client.post(f"{t.url}/events", json=start(), headers=t.auth), 409, "table_full")
    problem(client.post(f"{t.url}/events", json=END, headers=t.auth), 422, "round_ended")  # (the rules say no)
    assert client.post(f"{t.url}/finish", headers=t.auth).status_code == 200
    t.check(store)


def test_corrections_take_the_room_kept_for_mending(redis_url, doc, store):
    client, t, tiles = full_table(redis_url, doc)
    t.correct(1, {"events": [kong(k % 4, "concealed", tile) for k, tile in enumerate(tiles[:-1])]})  # 25
    assert client.post(f"{t.url}/events/25/void", headers=t.auth).status_code == 201                   # 26
    for seq in range(24, 10, -1):
        assert client.post(f"{t.url}/events/{seq}/void", headers=t.auth).status_code == 201
    assert t.view()["version"] == 40
    problem(client.put(f"{t.url}/rounds/1/events", json={"events": []}, headers=t.auth), 409, "table_full")
    assert client.post(f"{t.url}/events", json=END, headers=t.auth).status_code == 201
    t.check(store)
