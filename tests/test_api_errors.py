"""Every error class of the HTTP layer is RFC 9457 problem+json."""

from __future__ import annotations

import json

import pytest

from service.api import create_app
from tests.problems import problem

pytestmark = pytest.mark.app(store=False)

PROBLEM = "application/problem+json"
TING = "/v1/hands/ting"


def post_raw(client, path, data, content_type="application/json", **kw):
    return client.post(path, data=data, content_type=content_type, **kw)


# -- 400 ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "raw",
    [
        b"{bad",
        b"{\"hand\": }",
        b"",
        b"   ",
        b"\xff\xfe{}",
        b"{\"hand\": NaN}",
        b"{\"hand\": Infinity}",
        b"{\"a\": \"\\ud800\"}",
        b"[" * 100_00 + b"]" * 100_00,
        b"{} {}",
    ],
    ids=["syntax", "missing-value", "empty", "blank", "not-utf8", "nan", "infinity",
         "lone-surrogate", "too-deep", "trailing"],
)
def test_malformed_json_is_400(client, raw):
    if len(raw) > 64 * 1024:
        pytest.skip("larger than the body limit")
    body = problem(post_raw(client, TING, raw), 400, "malformed_json")
    assert "errors" not in body


@pytest.mark.parametrize("raw", [b'{"a": 1' + b"1" * 5000 + b"}", b'{"a": 1e400}', b'{"a": -1' + b"0" * 400 + b"}"],
                         ids=["huge-int", "huge-float", "huge-negative"])
def test_a_number_of_any_size_is_json_and_past_a_doubles_range_a_422_naming_it(client, raw):
    body = problem(post_raw(client, TING, raw), 422, "invalid_input")
    assert list(body["errors"]) == ["a"]


def test_paired_surrogate_escape_is_fine(client):
    # an escaped astral character is valid JSON and valid Unicode: a 422 on notation
    body = problem(post_raw(client, TING, b'{"hand": {"tiles": "\\ud83c\\udc00"}}'), 422, "unexpected_character")
    assert "🀀" in body["detail"]


# -- 404 / 405 ------------------------------------------------------------------
def test_unknown_path_is_404(client):
    body = problem(client.get("/v1/nothing/here"), 404, "not_found")
    assert body["instance"] == "/v1/nothing/here"


def test_post_to_unknown_path_is_404(client):
    problem(client.post("/v1/hands/nothing", json={}), 404, "not_found")


@pytest.mark.parametrize("method", ["get", "put", "delete", "patch"])
def test_wrong_method_is_405_with_allow(client, method):
    response = getattr(client, method)(TING)
    problem(response, 405, "method_not_allowed")
    assert "POST" in response.headers["Allow"]


def test_post_to_get_endpoint_is_405(client):
    response = client.post("/v1/rulesets", json={})
    problem(response, 405, "method_not_allowed")
    assert "GET" in response.headers["Allow"]


# -- 413 ----------------------------------------------------------------------------
def test_body_over_64k_is_413(client):
    big = json.dumps({"hand": {"tiles": "1m" * 40_000}})
    assert len(big) > 64 * 1024
    body = problem(post_raw(client, TING, big), 413, "payload_too_large")
    assert "65536" in body["detail"]


def test_body_limit_is_configurable():
    client = create_app({"TESTING": True, "MAX_CONTENT_LENGTH": 2048}).test_client()
    problem(post_raw(client, TING, json.dumps({"visible": "1m" * 1500})), 413, "payload_too_large")


def test_body_just_under_limit_is_not_413(client):
    raw = json.dumps({"hand": {"tiles": "1112345678999m"}, "x": " " * (64 * 1024 - 200)})
    assert len(raw) < 64 * 1024
    assert client.post(TING, data=raw, content_type="application/json").status_code == 422


# -- 415 ----------------------------------------------------------------------------
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml", None])
def test_non_json_content_type_is_415(client, content_type):
    headers = {} if content_type is None else {"Content-Type": content_type}
    response = client.post(TING, data=b'{"hand": {"tiles": "1112345678999m"}}', headers=headers)
    problem(response, 415, "unsupported_media_type")


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", "application/problem+json", "APPLICATION/JSON"]
)
def test_json_content_types_are_accepted(client, content_type):
    response = client.post(TING, data=b'{"hand": {"tiles": "1112345678999m"}}', headers={"Content-Type": content_type})
    assert response.status_code == 200


# -- 422 ----------------------------------------------------------------------------
def test_schema_errors_carry_field_paths(client):
    response = client.post(TING, json={"hand": {"tiles": ["1m", 3], "melds": "x"}, "bogus": 1, "visible": 5})
    body = problem(response, 422, "invalid_input")
    assert body["errors"] == {
        "hand.tiles.1": ["Not a valid string."],
        "hand.melds": ["Not a valid list."],
        "bogus": ["Unknown field."],
        "visible": ["Not a valid string."],
    }


def test_missing_body_fields(client):
    body = problem(client.post(TING, json={}), 422, "invalid_input")
    assert body["errors"] == {"hand": ["Missing data for required field."]}


@pytest.mark.parametrize("payload", [[1, 2], "hand", 3, None, True])
def test_non_object_body_is_422(client, payload):
    body = problem(post_raw(client, TING, json.dumps(payload)), 422, "invalid_input")
    assert body["errors"] == {"_schema": ["Invalid input type."]}


@pytest.mark.parametrize(
    ("payload", "path"),
    [
        ({"hand": {"tiles": "1m" * 101}}, "hand.tiles"),
        ({"hand": {"tiles": ["1m"] * 65}}, "hand.tiles"),
        ({"hand": {"tiles": ["1m" * 9]}}, "hand.tiles.0"),
        (
            {"hand": {"tiles": "1m", "melds": [{"type": "peng", "tile": "1m"}] * 9}},
            "hand.melds",
        ),  # (over the bound of 8: 5 is a wrong size, reported by the rules)
        ({"hand": {"tiles": "1m", "void": "m" * 9}}, "hand.void"),
        ({"hand": {"tiles": "1m"}, "visible": "1m" * 101}, "visible"),
        ({"hand": {"tiles": "1m"}, "ruleset": {"base": 10**7}}, "ruleset.base"),
        ({"hand": {"tiles": "1m"}, "ruleset": {"cap": 65}}, "ruleset.cap"),
        ({"hand": {"tiles": "1m"}, "ruleset": {"huazhu": -1}}, "ruleset.huazhu"),
        ({"hand": {"tiles": "1m"}, "ruleset": {"haidi": 1}}, "ruleset.haidi"),
        ({"hand": {"tiles": "1m"}, "ruleset": {"haidi": "true"}}, "ruleset.haidi"),
        ({"hand": {"tiles": "1m"}, "ruleset": {"base": 6.0}}, "ruleset.base"),
        ({"hand": {"tiles": "1m"}, "ruleset": {"base": True}}, "ruleset.base"),
        ({"hand": {"tiles": "1m"}, "ruleset": {"mode": "bloody"}}, "ruleset.mode"),
        ({"hand": {"tiles": "1m"}, "ruleset": {"bogus": 1}}, "ruleset.bogus"),
        ({"hand": {"tiles": "1m"}, "ruleset": 5}, "ruleset"),
        ({"hand": {"tiles": "1m"}, "ruleset": None}, "ruleset"),
        ({"hand": {"tiles": "1m", "melds": [{"type": "chi", "tile": "1m"}]}}, "hand.melds.0.type"),
        ({"hand": {"tiles": 123}}, "hand.tiles"),
        ({"hand": "123m"}, "hand"),
    ],
)
def test_bounds_and_types_are_422_with_path(client, payload, path):
    body = problem(client.post(TING, json=payload), 422, "invalid_input")
    assert path in body["errors"], body["errors"]


@pytest.mark.parametrize(
    ("tiles", "code", "quoted"),
    [
        ("123m0m", "invalid_rank", "0"),
        ("1z23m", "unknown_suit", "z"),
        ("123", "missing_suit", "123"),
        ("东南西北", "unexpected_character", "东"),
        ("12 3m", "missing_suit", "12"),
    ],
)
def test_notation_errors_quote_the_bad_text(client, tiles, code, quoted):
    body = problem(client.post(TING, json={"hand": {"tiles": tiles}}), 422, code)
    assert quoted in body["detail"]
    assert body["errors"] == {"hand.tiles": [body["detail"]]}
    assert body["title"] == "Invalid tile notation"


def test_notation_error_in_a_tile_list_names_the_item(client):
    body = problem(client.post(TING, json={"hand": {"tiles": ["1m", "0p"]}}), 422, "invalid_rank")
    assert list(body["errors"]) == ["hand.tiles.1"]


def test_notation_error_in_meld_void_visible_win(client):
    melds = [{"type": "peng", "tile": "5x"}]
    body = problem(client.post(TING, json={"hand": {"tiles": "1m", "melds": melds}}), 422, "unknown_suit")
    assert list(body["errors"]) == ["hand.melds.0"]
    body = problem(client.post(TING, json={"hand": {"tiles": "1m", "void": "z"}}), 422, "unknown_suit")
    assert list(body["errors"]) == ["hand.void"]
    body = problem(client.post(TING, json={"hand": {"tiles": "1m"}, "visible": "5q"}), 422, "unknown_suit")
    assert list(body["errors"]) == ["visible"]
    body = problem(
        client.post("/v1/hands/score", json={"hand": {"tiles": "1m"}, "win": {"tile": "0m"}}), 422, "invalid_rank"
    )
    assert list(body["errors"]) == ["win.tile"]


def test_meld_rule_error(client):
    melds = [{"type": "kong", "tile": "5p"}]  # a kong without kind
    body = problem(client.post(TING, json={"hand": {"tiles": "1112345678m", "melds": melds}}), 422, "bad_meld")
    assert body["title"] == "Invalid hand"


@pytest.mark.parametrize("path", ["/v1/hands/ting", "/v1/hands/discards", "/v1/hands/score"])
def test_hand_size_is_422_with_rule_code(client, path):
    payload = {"hand": {"tiles": "123m"}}
    if path.endswith("score"):
        payload["win"] = {"tile": "1m"}
    body = problem(client.post(path, json=payload), 422, "bad_size")
    assert "size 3" in body["detail"]


def test_too_many_copies_is_422(client):
    problem(client.post(TING, json={"hand": {"tiles": "1111234567899m"}, "visible": "1m"}), 422, "too_many_copies")


def test_unknown_preset_is_422_with_rule_code(client):
    body = problem(client.post(TING, json={"hand": {"tiles": "1m"}, "ruleset": "mahjong"}), 422, "unknown_ruleset")
    assert "mahjong" in body["detail"]
    body = problem(
        client.post(TING, json={"hand": {"tiles": "1m"}, "ruleset": {"preset": "mahjong"}}), 422, "invalid_input"
    )
    assert "ruleset.preset" in body["errors"]


def test_score_errors(client):
    score = "/v1/hands/score"
    problem(client.post(score, json={"hand": {"tiles": "11333222456998s"}, "win": {"tile": "4s"}}), 422, "not_a_win")
    problem(
        client.post(score, json={"hand": {"tiles": "11333222456999s"}, "win": {"tile": "7s"}}), 422,
        "win_tile_not_in_hand",
    )
    body = problem(
        client.post(score, json={"hand": {"tiles": "11333222456999s"},
                                 "win": {"tile": "4s", "robbing_kong": True, "self_drawn": True}}),
        422, "contradictory_flags",
    )
    assert body["errors"] == {"win": [body["detail"]]}
    body = problem(client.post(score, json={"hand": {"tiles": "11333222456999s"}}), 422, "invalid_input")
    assert body["errors"] == {"win": ["Missing data for required field."]}
    body = problem(client.post(score, json={"hand": {"tiles": "11333222456999s"}, "win": {}}), 422, "invalid_input")
    assert body["errors"] == {"win.tile": ["Missing data for required field."]}
    body = problem(
        client.post(score, json={"hand": {"tiles": "11333222456999s"}, "win": {"tile": "4s", "self_drawn": 1}}),
        422, "invalid_input",
    )
    assert "win.self_drawn" in body["errors"]


def test_event_error_carries_event_index_and_code(client):
    events = [
        {"type": "kong", "seat": 1, "kind": "direct", "tile": "5m", "from": 2},
        {"type": "kong", "seat": 1, "kind": "direct", "tile": "6m", "from": 1},
    ]
    body = problem(client.post("/v1/rounds/settle", json={"dealer": 0, "events": events}), 422, "self_discard")
    assert body["event"] == 1
    assert body["title"] == "Event cannot happen"
    assert body["detail"].startswith("event 1:")


# -- 500 ------------------------------------------------------------------------------
def test_internal_errors_do_not_leak(caplog):
    app = create_app({"TESTING": True})

    @app.route("/__boom")
    def boom():
        raise RuntimeError("secret internal detail /etc/passwd")

    with caplog.at_level("ERROR", logger="service.api"):
        response = app.test_client().get("/__boom", headers={"X-Request-ID": "boom-1"})
    body = problem(response, 500, "internal_error")
    text = response.get_data(as_text=True)
    assert "secret" not in text and "RuntimeError" not in text and "Traceback" not in text
    assert body["request_id"] == "boom-1"
    assert any("boom-1" in r.getMessage() and r.exc_info for r in caplog.records)


# -- request ids --------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/healthz", "/nope", TING])
def test_request_id_is_echoed(client, path):
    response = client.get(path, headers={"X-Request-ID": "abc.DEF-123_x"})
    assert response.headers["X-Request-ID"] == "abc.DEF-123_x"


@pytest.mark.parametrize("bad", ["has space", "x" * 129, "semi;colon", "ünï", "a/b"])
def test_invalid_request_id_is_replaced(client, bad):
    response = client.get("/healthz", headers={"X-Request-ID": bad})
    rid = response.headers["X-Request-ID"]
    assert rid != bad and len(rid) == 32


def test_request_id_is_generated_and_unique(client):
    ids = {client.get("/healthz").headers["X-Request-ID"] for _ in range(20)}
    assert len(ids) == 20


def test_request_id_in_problem_matches_header(client):
    response = client.post(TING, json={}, headers={"X-Request-ID": "req-42"})
    assert response.get_json()["request_id"] == "req-42" == response.headers["X-Request-ID"]


@pytest.mark.parametrize(("size", "status"), [(64 * 1024 - 1, 400), (64 * 1024, 400), (64 * 1024 + 1, 413)])
def test_chunked_body_over_limit_is_413(app, size, status):
    """No Content-Length (chunked transfer encoding): the limit applies to what is read."""
    import io

    from werkzeug.test import EnvironBuilder, run_wsgi_app

    environ = EnvironBuilder(path=TING, method="POST", content_type="application/json").get_environ()
    environ.pop("CONTENT_LENGTH", None)
    environ.update({"wsgi.input": io.BytesIO(b" " * size), "wsgi.input_terminated": True})
    app_iter, status_line, headers = run_wsgi_app(app, environ)
    body = json.loads(b"".join(app_iter))
    assert int(status_line.split()[0]) == status and headers["Content-Type"] == PROBLEM
    assert body["code"] == ("malformed_json" if status == 400 else "payload_too_large")
