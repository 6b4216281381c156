"""/v1/hands/*: the docs/api.md response shapes and their contents."""

from __future__ import annotations

import pytest

from service import discards, parse_hand, score, ting
from service.rules.fan import Win
from service.rules.patterns import PATTERNS

pytestmark = pytest.mark.app(store=False)

PATTERN_KEYS = {"id", "name", "name_en", "fan"}


def ok(response) -> dict:
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.mimetype == "application/json"
    return response.get_json()


def check_pattern(p: dict) -> None:
    assert set(p) in (PATTERN_KEYS, PATTERN_KEYS | {"count"})
    ref = PATTERNS[p["id"]]
    assert (p["name"], p["name_en"]) == (ref.name, ref.name_en)
    assert isinstance(p["fan"], int) and p["fan"] > 0
    assert ("count" in p) == (p["id"] == "gen")


def check_wait(w: dict) -> None:
    assert set(w) == {"tile", "fan", "points", "patterns", "remaining"}
    for p in w["patterns"]:
        check_pattern(p)


# -- validate -----------------------------------------------------------------------
def test_validate_shape(client):
    body = ok(client.post("/v1/hands/validate", json={"hand": {"tiles": "321m 456p 789s 11m"}}))
    assert set(body) == {"valid", "size", "tiles", "suits", "huazhu", "complete", "problems"}
    assert body == {
        "valid": False, "size": 11, "tiles": "11123m456p789s", "suits": ["m", "p", "s"], "huazhu": True,
        "complete": False, "problems": [body["problems"][0]],
    }
    assert set(body["problems"][0]) == {"code", "message"}
    assert body["problems"][0]["code"] == "bad_size"


def test_validate_complete_hand_with_melds(client):
    hand = {"tiles": "123345m999p66p", "melds": [{"type": "kong", "kind": "concealed", "tile": "2p"}]}
    body = ok(client.post("/v1/hands/validate", json={"hand": hand}))
    assert body["valid"] and body["complete"] and body["size"] == 14
    assert body["suits"] == ["m", "p"] and body["tiles"] == "123345m66999p"
    assert body["problems"] == []


def test_validate_suits_include_melds_and_void(client):
    hand = {"tiles": "11122233344m", "melds": [{"type": "peng", "tile": "5条"}], "void": "s"}
    body = ok(client.post("/v1/hands/validate", json={"hand": hand}))
    assert body["suits"] == ["m", "s"]
    assert body["huazhu"] is True and body["complete"] is False


def test_validate_fifth_copy_is_200_with_problem(client):
    body = ok(client.post("/v1/hands/validate", json={"hand": {"tiles": "11111m"}}))
    assert body["valid"] is False
    assert [p["code"] for p in body["problems"]] == ["bad_size", "too_many_copies"]


def test_validate_visible_counts_copies(client):
    body = ok(client.post("/v1/hands/validate", json={"hand": {"tiles": "1111234567899m"}, "visible": "1m"}))
    assert [p["code"] for p in body["problems"]] == ["too_many_copies"]


def test_validate_empty_hand(client):
    body = ok(client.post("/v1/hands/validate", json={"hand": {"tiles": ""}}))
    assert body["size"] == 0 and body["tiles"] == "" and body["suits"] == []


def test_tiles_as_list_and_chinese_marks(client):
    a = ok(client.post("/v1/hands/validate", json={"hand": {"tiles": ["1万", "2m", " 3M ", "4p"]}}))
    b = ok(client.post("/v1/hands/validate", json={"hand": {"tiles": "123m4筒"}}))
    assert a == b and a["tiles"] == "123m4p"


# -- ting ------------------------------------------------------------------------------
def test_ting_shape_and_values(client):
    body = ok(client.post("/v1/hands/ting", json={"hand": {"tiles": "1112345678999m"}}))
    assert set(body) == {"ting", "huazhu", "waits", "dajiao"}
    assert body["ting"] is True and body["huazhu"] is False
    assert [w["tile"] for w in body["waits"]] == [f"{r}m" for r in range(1, 10)]
    for w in body["waits"]:
        check_wait(w)
    assert body["dajiao"] == {"fan": 4, "points": 48}
    first = body["waits"][0]
    assert first == {
        "tile": "1m", "fan": 4, "points": 48, "remaining": 1,
        "patterns": [
            {"id": "qingyise", "name": "清一色", "name_en": "Full flush", "fan": 3},
            {"id": "gen", "name": "根", "name_en": "Root", "fan": 1, "count": 1},
        ],
    }


def test_ting_matches_core(client):
    payload = {"hand": {"tiles": "1m2m3m 456p 789p 111p 5m"}, "visible": "5m5m", "ruleset": {"cap": 2}}
    body = ok(client.post("/v1/hands/ting", json=payload))
    core = ting("1m2m3m 456p 789p 111p 5m", visible="5m5m", ruleset={"cap": 2})
    assert [(w["tile"], w["fan"], w["points"], w["remaining"]) for w in body["waits"]] == [
        (str(w.tile), w.fan, w.points, w.remaining) for w in core.waits
    ]


def test_not_ting_has_null_dajiao(client):
    body = ok(client.post("/v1/hands/ting", json={"hand": {"tiles": "123m456p789s1122m"}}))
    assert body == {"ting": False, "huazhu": True, "waits": [], "dajiao": None}


def test_ting_ruleset_changes_points(client):
    hand = {"tiles": "1112345678999m"}
    linear = ok(client.post("/v1/hands/ting", json={"hand": hand, "ruleset": "chengdu-points"}))
    capped = ok(client.post("/v1/hands/ting", json={"hand": hand, "ruleset": {"preset": "xuezhan", "cap": 3}}))
    assert linear["dajiao"]["points"] == linear["dajiao"]["fan"]  # base 1, linear
    assert capped["dajiao"] == {"fan": 3, "points": 24}


def test_ting_void(client):
    body = ok(client.post("/v1/hands/ting", json={"hand": {"tiles": "1112345678999m", "void": "万"}}))
    assert body["ting"] is False and body["huazhu"] is True


def test_ting_with_melds(client):
    hand = {
        "tiles": "2344567p",
        "melds": [{"type": "peng", "tile": "9s"}, {"type": "kong", "kind": "direct", "tile": "1s"}],
    }
    body = ok(client.post("/v1/hands/ting", json={"hand": hand}))
    assert body["ting"] is True
    for w in body["waits"]:
        check_wait(w)
    # 234p 567p + 4p, 23p 44p 567p, 234p 456p + 7p; the direct kong of 1s is a 根 (+1)
    assert [(w["tile"], w["fan"], w["points"], w["remaining"], [p["id"] for p in w["patterns"]])
            for w in body["waits"]] == [("1p", 2, 12, 4, ["pinghu", "gen"]), ("4p", 2, 12, 2, ["pinghu", "gen"]),
                                         ("7p", 2, 12, 3, ["pinghu", "gen"])]


# -- discards -------------------------------------------------------------------------------
def test_discards_shape_and_order(client):
    body = ok(client.post("/v1/hands/discards", json={"hand": {"tiles": "11122233344456m"}}))
    assert set(body) == {"options", "complete"}
    assert body["complete"] is True
    core = discards("11122233344456m")
    assert [o["discard"] for o in body["options"]] == [str(o.discard) for o in core.options]
    for o in body["options"]:
        assert set(o) == {"discard", "waits", "remaining", "dajiao"}
        assert o["remaining"] == sum(w["remaining"] for w in o["waits"])
        assert set(o["dajiao"]) == {"fan", "points"}
        for w in o["waits"]:
            check_wait(w)
    keys = [(-o["remaining"], -o["dajiao"]["points"]) for o in body["options"]]
    assert keys == sorted(keys)


def test_discards_none(client):
    body = ok(client.post("/v1/hands/discards", json={"hand": {"tiles": "1357m1357p135799s"}}))
    assert body == {"options": [], "complete": False}


# -- score ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tiles", "fan", "points", "base"),
    [
        ("23445677p345789s", 1, 6, "pinghu"),
        ("111222444m33399p", 2, 12, "duiduihu"),
        ("11333222456999s", 3, 24, "qingyise"),
        ("111222333m78999p", 3, 24, "daiyaojiu"),
        ("222555888s88855m", 4, 48, "jiangdui"),
        ("11222244p557799m", 5, 96, "longqidui"),
        ("11334466778899s", 5, 96, "qingqidui"),
        ("11123777888999p", 5, 96, "qingyaojiu"),
        ("11224444557799m", 6, 192, "qinglongqidui"),
    ],
)
def test_score_worked_examples(client, tiles, fan, points, base):
    win_tile = tiles[-2] + tiles[-1] if tiles[-2].isdigit() else None
    body = ok(client.post("/v1/hands/score", json={"hand": {"tiles": tiles}, "win": {"tile": win_tile}}))
    assert set(body) == {"fan", "raw_fan", "multiplier", "points", "capped", "patterns", "decomposition"}
    assert (body["fan"], body["points"], body["patterns"][0]["id"]) == (fan, points, base)
    for p in body["patterns"]:
        check_pattern(p)
    assert all(isinstance(g, str) for g in body["decomposition"])


def test_score_with_kong_and_flags(client):
    payload = {
        "hand": {"tiles": "123345m999p66p", "melds": [{"type": "kong", "kind": "concealed", "tile": "2p"}]},
        "win": {"tile": "6p", "self_drawn": True, "after_kong": True},
        "ruleset": {"preset": "xuezhan", "zimo": "fan", "cap": 3},
    }
    body = ok(client.post("/v1/hands/score", json=payload))
    core = score(
        parse_hand("123345m999p66p", melds=[{"type": "kong", "kind": "concealed", "tile": "2p"}]),
        Win("6p", self_drawn=True, after_kong=True),
        ruleset={"zimo": "fan", "cap": 3},
    )
    assert body["raw_fan"] == core.raw_fan == 4
    assert body["fan"] == 3 and body["capped"] is True and body["multiplier"] == 4 and body["points"] == 24
    ids = [p["id"] for p in body["patterns"]]
    assert ids == ["pinghu", "gen", "gangshanghua", "zimo"]
    assert body["decomposition"] == list(core.decomposition)


def test_score_heavenly(client):
    body = ok(client.post("/v1/hands/score", json={
        "hand": {"tiles": "23445677p345789s"}, "win": {"tile": "2p", "self_drawn": True, "heavenly": True},
    }))
    assert body["patterns"][0]["id"] == "tianhu" and body["fan"] == 6


# -- rulesets ---------------------------------------------------------------------------------------
def test_rulesets_lists_every_preset_with_every_field(client):
    from dataclasses import fields

    from service.rules.ruleset import PRESETS, Ruleset

    body = ok(client.get("/v1/rulesets"))
    assert body["default"] == "xuezhan"
    assert list(body["presets"]) == list(PRESETS)
    names = {f.name for f in fields(Ruleset)}
    for name, preset in body["presets"].items():
        assert set(preset) == names
        assert preset == PRESETS[name].as_dict()
    assert body["presets"]["chengdu-points"]["scoring"] == "linear"


@pytest.mark.parametrize(
    "override", [{"cap": None}, {"base": 1}, {"haidi": True}, {"preset": "normal", "zimo": "base"}]
)
def test_ruleset_overrides_accepted(client, override):
    ok(client.post("/v1/hands/ting", json={"hand": {"tiles": "1112345678999m"}, "ruleset": override}))


def test_score_gangshanghua_without_a_kong_is_422(client):
    # a self-drawn after_kong needs a kong among the melds (docs/rules.md#s5.1); a peng is not one
    hand = {"tiles": "123345m999p66p", "melds": [{"type": "peng", "tile": "2p"}]}
    r = client.post(
        "/v1/hands/score", json={"hand": hand, "win": {"tile": "6p", "self_drawn": True, "after_kong": True}}
    )
    assert r.status_code == 422 and r.mimetype == "application/problem+json"
    assert r.get_json()["code"] == "contradictory_flags"
    hand["melds"] = [{"type": "kong", "kind": "added", "tile": "2p"}]
    body = ok(
        client.post(
            "/v1/hands/score", json={"hand": hand, "win": {"tile": "6p", "self_drawn": True, "after_kong": True}}
        )
    )
    assert [p["id"] for p in body["patterns"]] == ["pinghu", "gen", "gangshanghua"]


def test_carriage_returns_in_hand_strings(client):
    # docs/rules.md#s1 allows \r among the white space between groups
    body = ok(
        client.post(
            "/v1/hands/validate", json={"hand": {"tiles": "123m\r\n456p\r\n789p\r\n11m\r\n", "void": "\r\ns\r"}}
        )
    )
    assert body["tiles"] == "11123m456789p" and body["size"] == 11
    r = client.post("/v1/hands/validate", json={"hand": {"tiles": "12\r3m"}})
    assert r.status_code == 422 and r.get_json()["code"] == "missing_suit"


def test_rulesets_list_the_issue_16_presets_and_fields(client):
    body = ok(client.get("/v1/rulesets"))
    assert body["presets"]["xueliu"]["mode"] == "xueliu"
    sanren = body["presets"]["sanren-liangfang"]
    assert (sanren["players"], sanren["dianpao_pinghu"], sanren["huazhu"], sanren["direct_kong"], sanren["cap"]) == (
        3, False, 0, 2, 4)
    for preset in body["presets"].values():
        assert {"players", "dianpao_pinghu", "xueliu_dajiao_winners", "jiaxinwu", "kaertiao", "yitiaolong"} <= set(
            preset
        )
    r = client.post("/v1/hands/ting", json={"hand": {"tiles": "1112345678999p"}, "ruleset": {"players": 2}})
    assert r.status_code == 422 and r.mimetype == "application/problem+json"


def test_without_huazhu_payments_no_hand_is_called_huazhu(client):
    """docs/rules.md#s7.2: with ``huazhu = 0`` (chengdu-points) there is no 花猪; a three-suit hand is
    simply not ting (found by an independent audit: the flag said true)."""
    for ruleset in ("chengdu-points", {"preset": "xuezhan", "huazhu": 0}):
        body = {"hand": {"tiles": "123m456p789s1122m"}, "ruleset": ruleset}
        t = client.post("/v1/hands/ting", json=body).get_json()
        assert (t["ting"], t["huazhu"], t["waits"], t["dajiao"]) == (False, False, [], None)
        v = client.post("/v1/hands/validate", json=body).get_json()
        assert (v["valid"], v["huazhu"], v["suits"]) == (True, False, ["m", "p", "s"])
    body = {"hand": {"tiles": "123m456p789s1122m"}, "ruleset": "xuezhan"}
    assert client.post("/v1/hands/ting", json=body).get_json()["huazhu"] is True


def test_five_melds_is_a_wrong_size_that_validate_reports(client):
    """docs/api.md: a hand that parses but has the wrong size is 200 with ``valid: false``."""
    melds = [{"type": "peng", "tile": t} for t in ("1m", "2m", "3m", "4m", "5p")]
    r = client.post("/v1/hands/validate", json={"hand": {"tiles": "99s", "melds": melds}})
    assert r.status_code == 200
    body = r.get_json()
    assert body["valid"] is False and [p["code"] for p in body["problems"]] == ["bad_size"]
    r = client.post("/v1/hands/ting", json={"hand": {"tiles": "99s", "melds": melds}})
    assert r.status_code == 422 and r.get_json()["code"] == "bad_size"
