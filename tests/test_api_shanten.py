"""``POST /v1/hands/shanten`` and the batch op ``shanten`` through Flask's test client (docs/api.md,
docs/rules.md#s16): the shapes of 13 and 14 tiles, null, and the 422s, which are ting's."""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest

from service import parse_hand, shanten_options, useful_tiles

pytestmark = pytest.mark.app(store=False)

PATH = "/v1/hands/shanten"


def ok(response) -> dict:
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.mimetype == "application/json"
    return response.get_json()


def test_thirteen_tiles(client):
    body = ok(client.post(PATH, json={"hand": {"tiles": "12345m678m4599p1p"}, "visible": "3m3m"}))
    assert body == {"shanten": 1, "remaining": 16, "tiles": [
        {"tile": "3m", "remaining": 1}, {"tile": "6m", "remaining": 3}, {"tile": "9m", "remaining": 4},
        {"tile": "3p", "remaining": 4}, {"tile": "6p", "remaining": 4}]}


def test_a_ting_hand_lists_its_waits(client):
    body = ok(client.post(PATH, json={"hand": {"tiles": "1112345678999m"}}))
    assert body["shanten"] == 0
    waits = ok(client.post("/v1/hands/ting", json={"hand": {"tiles": "1112345678999m"}}))["waits"]
    assert body["tiles"] == [{"tile": w["tile"], "remaining": w["remaining"]} for w in waits]
    assert body["remaining"] == sum(w["remaining"] for w in waits)


def test_fourteen_tiles(client):
    hand = {"tiles": "113456m23678p", "melds": [{"type": "peng", "tile": "9p"}]}
    body = ok(client.post(PATH, json={"hand": hand, "ruleset": "xueliu"}))
    assert set(body) == {"shanten", "options"} and body["shanten"] == 0
    assert body["options"][0] == {"discard": "3m", "shanten": 0, "remaining": 8,
                                  "tiles": [{"tile": "1p", "remaining": 4}, {"tile": "4p", "remaining": 4}]}
    core = shanten_options(parse_hand(hand["tiles"], melds=hand["melds"]))
    assert [(o["discard"], o["shanten"], o["remaining"]) for o in body["options"]] == \
        [(str(o.discard), o.shanten, o.remaining) for o in core.options]


def test_a_win_is_minus_one(client):
    body = ok(client.post(PATH, json={"hand": {"tiles": ["1m", "1m", "1m", "2m", "2m", "2m", "3m", "3m", "3m",
                                                         "4m", "5m", "6m", "4m", "4m"]}}))
    assert body["shanten"] == -1 and len(body["options"]) == 6


def test_melds_that_can_never_be_ting_are_null(client):
    melds = [{"type": "peng", "tile": "1m"}, {"type": "peng", "tile": "2p"}, {"type": "kong", "kind": "added",
                                                                                "tile": "3s"}]
    assert ok(client.post(PATH, json={"hand": {"tiles": "1234p", "melds": melds}})) == \
        {"shanten": None, "tiles": [], "remaining": 0}
    assert ok(client.post(PATH, json={"hand": {"tiles": "12345p", "melds": melds}})) == \
        {"shanten": None, "options": []}
    void = {"tiles": "123p456p789p5s", "melds": [{"type": "peng", "tile": "1m"}], "void": "万"}
    assert ok(client.post(PATH, json={"hand": void}))["shanten"] is None


def test_three_players(client):
    body = ok(client.post(PATH, json={"hand": {"tiles": "1234p5678p1199s2s"}, "ruleset": "sanren-liangfang"}))
    assert body["shanten"] == 1 and body["remaining"] == 18
    r = client.post(PATH, json={"hand": {"tiles": "1234p5678p1199s2s"}, "ruleset": "sanren-liangfang",
                                "visible": "1m"})
    assert r.status_code == 422 and r.get_json()["code"] == "suit_not_in_play"


def without(problem: dict, *names: str) -> dict:
    return {k: v for k, v in problem.items() if k not in names}


@pytest.mark.parametrize("body", [
    {"hand": {"tiles": "11111m23456789p"}},                     # a fifth copy
    {"hand": {"tiles": "1112345678999m"}, "visible": "1m1m"},   # a fifth copy with visible
    {"hand": {"tiles": "123456789m1234z"}},                     # an unknown suit
    {"hand": {"tiles": "0m"}},                                  # a 0
    {"hand": {"tiles": ["1m", "10m"]}},
    {"hand": {"tiles": "1112345678999m", "melds": [{"type": "pong", "tile": "1m"}]}},
    {"hand": {"tiles": "1112345678999m"}, "extra": 1},
    {"hand": {"tiles": 7}},
    {"hand": {"tiles": "1112345678999m", "void": "z"}},
])
def test_bad_input_is_ting_s_422(client, body):
    r = client.post(PATH, json=body)
    assert r.status_code == 422 and r.mimetype == "application/problem+json"
    t = client.post("/v1/hands/ting", json=body)
    assert t.status_code == 422
    assert without(r.get_json(), "instance", "request_id") == without(t.get_json(), "instance", "request_id")
    assert r.get_json()["instance"] == PATH


@pytest.mark.parametrize("tiles", ["", "1234m", "123456789m123p", "123456789m123456p", "123456789m1234567p"])
def test_sizes_other_than_13_and_14_are_422(client, tiles):
    r = client.post(PATH, json={"hand": {"tiles": tiles}})
    assert r.status_code == 422
    problem = r.get_json()
    t = client.post("/v1/hands/ting", json={"hand": {"tiles": tiles}}).get_json()
    assert (problem["code"], problem["status"], problem["title"]) == (t["code"], t["status"], t["title"]) \
        == ("bad_size", 422, t["title"])
    assert "expected 13 or 14" in problem["detail"]


def test_size_13_and_14_with_melds(client):
    melds = [{"type": "kong", "kind": "concealed", "tile": "9p"}]
    assert ok(client.post(PATH, json={"hand": {"tiles": "1234567m123p", "melds": melds}}))["shanten"] == \
        useful_tiles(parse_hand("1234567m123p", melds=melds)).shanten
    assert "options" in ok(client.post(PATH, json={"hand": {"tiles": "1234567m1234p", "melds": melds}}))


# -- batches and the command line -------------------------------------------------------------------------
ITEMS = [
    {"op": "shanten", "hand": {"tiles": "12345m678m4599p1p"}, "visible": "3m3m"},
    {"op": "shanten", "hand": {"tiles": "113456m23678p", "melds": [{"type": "peng", "tile": "9p"}]}},
    {"op": "shanten", "hand": {"tiles": "1234m"}},
    {"op": "shanten", "hand": {"tiles": "1x"}},
]


def singles(client) -> list[dict]:
    out = []
    for item in ITEMS:
        r = client.post(PATH, json={k: v for k, v in item.items() if k != "op"})
        body = r.get_json()
        out.append({"status": 200, "body": body} if r.status_code == 200 else
                   {"status": r.status_code, "problem": without(body, "request_id")})
    return out


def strip(results: list[dict]) -> list[dict]:
    return [{**x, "problem": without(x["problem"], "request_id")} if "problem" in x else x for x in results]


def test_json_batch(client):
    r = client.post("/v1/batch", json={"items": ITEMS})
    assert r.status_code == 200
    results = strip(r.get_json()["results"])
    assert results == singles(client)
    assert [x["status"] for x in results] == [200, 200, 422, 422]
    assert results[2]["problem"]["instance"] == PATH


def test_ndjson_batch(client):
    data = b"".join(orjson.dumps(item) + b"\n" for item in ITEMS)
    r = client.post("/v1/batch", data=data, content_type="application/x-ndjson")
    assert r.status_code == 200 and r.mimetype == "application/x-ndjson"
    results = strip([orjson.loads(line) for line in r.get_data().splitlines()])
    assert results == singles(client)


def test_unknown_op_names_shanten_among_the_ops(client):
    r = client.post("/v1/batch", json={"items": [{"op": "shantenn", "hand": {"tiles": "1m"}}]})
    assert "shanten" in str(r.get_json())


def test_command_line(client, tmp_path):
    path = tmp_path / "items.ndjson"
    path.write_bytes(b"".join(orjson.dumps(item) + b"\n" for item in ITEMS))
    out = subprocess.run([sys.executable, "-m", "service", "score", str(path)], capture_output=True)
    lines = [orjson.loads(line) for line in out.stdout.splitlines()]
    assert [result.pop("line") for result in lines] == list(range(1, len(ITEMS) + 1))
    expected = singles(client)
    for result in expected:  # (with no request there is no origin: the CLI's problem types are relative)
        if "problem" in result:
            result["problem"]["type"] = "/problems/" + result["problem"]["code"]
    assert lines == expected
    failed = sum(result["status"] != 200 for result in expected)
    assert failed and out.returncode == 1, out.stderr  # any failed item: exit status 1
    assert f"{failed} of {len(ITEMS)}" in out.stderr.decode()
