"""A problem's ``type`` is a page describing its code (``GET /problems/{code}``): every code the service may
answer has one, generated from the registries of codes; ``PUBLIC_URL`` or the request's origin starts it;
a query parameter at fault is named as one."""

from __future__ import annotations

import re

import pytest

from service.api import create_app, settings
from service.api.contract import all_codes
from service.api.problem_types import registry
from service.api.problems import MEANINGS
from service.config import ConfigError, Settings
from service.rules.codes import Code
from tests.problems import problem

pytestmark = pytest.mark.app(store=False)

NOT_A_WIN = {"hand": {"tiles": "11122233345m99p5s"}, "win": {"tile": "5s"}}


def test_a_problems_type_is_a_page_that_describes_its_code(client):
    body = problem(client.post("/v1/hands/score", json=NOT_A_WIN), 422, "not_a_win")
    assert body["type"] == "http://localhost/problems/not_a_win"
    path = body["type"].removeprefix("http://localhost")
    described = client.get(path, headers={"Accept": "application/json"})
    assert described.status_code == 200 and described.mimetype == "application/json"
    assert described.get_json() == {"type": body["type"], "code": "not_a_win", "title": body["title"],
                                    "statuses": [422], "meaning": Code.NOT_A_WIN.meaning}
    page = client.get(path)  # a browser's Accept (or none): HTML
    assert page.status_code == 200 and page.mimetype == "text/html" and "Accept" in page.headers["Vary"]
    html = page.get_data(as_text=True)
    assert "<h1><code>not_a_win</code></h1>" in html and "缺一门" in html and "(422)" in html
    browser = client.get(path, headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert browser.mimetype == "text/html"


def test_every_code_the_service_may_answer_has_a_page_with_a_meaning_of_its_own(client):
    """The pages come from the registries: the rules core's codes with their meanings, the HTTP layer's
    from MEANINGS; no code is left with its title alone."""
    codes = all_codes()
    assert set(registry()) == set(codes)
    for code in codes:
        described = registry()[code]
        assert described.meaning and described.meaning != described.title, code
        assert described.statuses and all(400 <= s < 600 for s in described.statuses), code
    assert set(MEANINGS) == set(codes) - {c.value for c in Code}, "MEANINGS: one per HTTP-layer code, no other"
    for code in ("store_evicting", "tokens_rotated", "invalid_input"):
        r = client.get(f"/problems/{code}", headers={"Accept": "application/json"})
        assert r.status_code == 200 and r.get_json()["meaning"] == MEANINGS[code]


def test_a_code_no_problem_has_is_not_found(client):
    problem(client.get("/problems/no_such_code"), 404, "not_found")
    problem(client.get("/problems/<script>"), 404, "not_found")


def test_the_html_page_escapes_and_marks_up_the_meaning(client):
    html = client.get("/problems/version_mismatch").get_data(as_text=True)
    assert "<code>If-Match</code>" in html and "`" not in html.split("<body>")[1]


def test_public_url_starts_the_type_behind_a_proxy():
    app = create_app({"TESTING": True, "PUBLIC_URL": "https://mahjong.example/api"})
    r = app.test_client().post("/v1/hands/score", json=NOT_A_WIN)
    assert r.get_json()["type"] == "https://mahjong.example/api/problems/not_a_win"
    described = app.test_client().get("/problems/not_a_win", headers={"Accept": "application/json"})
    assert described.get_json()["type"] == "https://mahjong.example/api/problems/not_a_win"


@pytest.mark.parametrize("raw, url", [("https://mahjong.example/", "https://mahjong.example"),
                                      ("http://10.0.0.2:8000/mj", "http://10.0.0.2:8000/mj")])
def test_public_url_setting(raw, url):
    assert Settings.from_env({"PUBLIC_URL": raw}).public_url == url
    assert settings.current(create_app({"TESTING": True, "PUBLIC_URL": raw})).public_url == url
    assert Settings().with_config({"PUBLIC_URL": url}).with_env({"HOST": "0.0.0.0"}).public_url == url


@pytest.mark.parametrize("raw", ["mahjong.example", "ftp://x", "https://x/?a=1", "https://x/#top"])
def test_public_url_must_be_an_http_url(raw):
    with pytest.raises(ConfigError, match="PUBLIC_URL"):
        Settings.from_env({"PUBLIC_URL": raw})


def test_a_query_parameter_at_fault_is_named_as_one_not_as_a_body(redis_url):
    key = "acme-" + "k" * 40
    c = create_app({"TESTING": True, "REDIS_URL": redis_url, "API_KEYS": f"acme={key}"}).test_client()
    body = problem(c.get("/v1/tables?limit=500", headers={"X-API-Key": key}), 422, "invalid_input")
    assert list(body["errors"]) == ["query.limit"]
    assert "query parameter" in body["detail"] and "body" not in body["detail"]
    body = problem(c.post("/v1/tables", json={"players": ["a", "b", "c", "d"]},
                          headers={"X-API-Key": key, "Idempotency-Key": "not-a-uuid"}), 422, "invalid_input")
    assert list(body["errors"]) == ["Idempotency-Key"] and re.match(r"a header is invalid", body["detail"])
    body = problem(c.post("/v1/hands/ting", json={"hand": 3}, headers={"X-API-Key": key}), 422, "invalid_input")
    assert list(body["errors"]) == ["hand"] and body["detail"].startswith("the request body does not match")
