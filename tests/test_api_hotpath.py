"""The hot path (service/api/hotpath.py) answers exactly as Flask does, or leaves the request to Flask.

Two apps side by side, one with the hot path and one without (``HOT_PATH =
False``), get the same requests: the status, the header list, the body bytes,
the access-log line (all but the duration) and the metrics' increments must be
the same, for generated bodies around the schema (most of them errors, which
the hot path leaves to Flask) and for the common ones (which it answers).
"""

from __future__ import annotations

import json
import logging

import pytest
from flask import signals
from hypothesis import HealthCheck, example, given, settings, strategies as st
from prometheus_client import REGISTRY

from service.api import create_app
from tests.test_api_quick_load import _bodies

KEY = "acme-" + "a" * 40
PATHS = ("/v1/hands/validate", "/v1/hands/ting", "/v1/hands/discards", "/v1/hands/score")
COMMON = {"hand": {"tiles": "1112345678999m"}}


class Spy:
    """Counts the requests that reach Flask behind the hot path."""

    def __init__(self, app) -> None:
        self.layer = app.extensions["hot_path"]
        self.inner, self.calls = self.layer.wsgi_app, 0
        self.layer.wsgi_app = self

    def __call__(self, environ, start_response):
        self.calls += 1
        return self.inner(environ, start_response)


@pytest.fixture(scope="module")
def apps():
    return create_app({"TESTING": True}), create_app({"TESTING": True, "HOT_PATH": False})


@pytest.fixture(scope="module")
def keyed_apps():
    config = {"TESTING": True, "API_KEYS": f"acme={KEY}"}
    return create_app(config), create_app({**config, "HOT_PATH": False})


def _metrics(path: str) -> dict:
    out = {}
    for status in ("200", "400", "401", "413", "415", "422"):
        out[status] = REGISTRY.get_sample_value(
            "mahjong_http_requests_total", {"endpoint": path, "method": "POST", "status": status}) or 0.0
        out["key" + status] = REGISTRY.get_sample_value(
            "mahjong_api_key_requests_total", {"api_key": "acme", "endpoint": path, "status": status}) or 0.0
    out["seconds"] = REGISTRY.get_sample_value(
        "mahjong_http_request_duration_seconds_count", {"endpoint": path, "method": "POST"}) or 0.0
    return out


class Lines(logging.Handler):
    """The log lines of a request: an access line's fields but its duration, else the message."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        fields = dict(getattr(record, "fields", {}) or {"message": record.getMessage()})
        fields.pop("duration_ms", None)
        self.records.append(fields)


def _exchange(app, path: str, data: bytes, headers: dict) -> tuple:
    """What one request gives: status, headers, body, the access lines and the metrics' increments."""
    lines = Lines()
    logger = logging.getLogger("service.access")
    logger.addHandler(lines)
    level = logger.level
    logger.setLevel(logging.INFO)
    before = _metrics(path)
    try:
        response = app.test_client().post(path, data=data, headers=headers)
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)
    after = _metrics(path)
    delta = {k: after[k] - before[k] for k in after}
    return response.status, response.headers.to_wsgi_list(), response.get_data(), lines.records, delta


def _same(pair, path, data, headers) -> None:
    hot, flask = (_exchange(app, path, data, {"X-Request-ID": "r-1", **headers}) for app in pair)
    assert hot == flask


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(path=st.sampled_from(PATHS), body=_bodies(),
       content_type=st.sampled_from(["application/json"] * 4 + ["application/json; charset=utf-8", "text/plain"]))
@example(path="/v1/hands/ting", body=COMMON, content_type="application/json")
@example(path="/v1/hands/ting", body=COMMON, content_type="text/plain")
@example(path="/v1/hands/ting", body=COMMON, content_type="application/json; charset=utf-8")
@example(path="/v1/hands/discards", body={"hand": {"tiles": "11122233344456m"}, "ruleset": "xueliu"},
         content_type="application/json")
@example(path="/v1/hands/validate", body={"hand": {"tiles": "1112345678999m", "void": "p"}, "visible": "1m"},
         content_type="application/json")
@example(path="/v1/hands/score", body={"hand": {"tiles": "1112345678999m9m"}, "win": {"tile": "9m", "last_tile": True}},
         content_type="application/json")
@example(path="/v1/hands/score", body={"hand": {"tiles": "1112345678999m5m"}, "win": {"tile": "9m"}},
         content_type="application/json")
def test_answers_as_flask_does(apps, path, body, content_type):
    _same(apps, path, json.dumps(body, ensure_ascii=False).encode(), {"Content-Type": content_type})


_PADDED = b'{"hand": {"tiles": "1112345678999m"}}'


@pytest.mark.parametrize("data", [b"", b"{", b"NaN", b'{"hand": {"tiles": "1m"}}  ', b"[]", b"x" * 70000,
                                  '{"hand": {"tiles": "五万"}}'.encode(),
                                  _PADDED + b" " * (64 * 1024 - len(_PADDED)),  # at the limit: 200
                                  _PADDED + b" " * (64 * 1024 + 1 - len(_PADDED))])  # past it: 413
def test_bodies_at_the_edges_are_answered_alike(apps, data):
    _same(apps, "/v1/hands/ting", data, {"Content-Type": "application/json"})


@pytest.mark.parametrize("declared", ["+37", " 37", "3_7", "٣٧"])
def test_a_content_length_werkzeug_would_not_read_goes_to_flask(declared):
    app = create_app({"TESTING": True})
    spy = Spy(app)
    data = json.dumps(COMMON).encode()
    assert len(data) == 37
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/v1/hands/ting", "CONTENT_TYPE": "application/json",
               "CONTENT_LENGTH": declared}
    app.test_client().open(environ_overrides=environ, data=data, content_type="application/json")
    assert spy.calls == 1


def test_no_request_id_or_an_invalid_one_gets_a_fresh_one(apps):
    hot = apps[0].test_client()
    for headers in ({}, {"X-Request-ID": "bad id"}):
        response = hot.post("/v1/hands/ting", json=COMMON, headers=headers)
        assert response.status_code == 200 and len(response.headers["X-Request-ID"]) == 32


@pytest.mark.parametrize("headers", [{}, {"X-API-Key": "x" * 40}, {"X-API-Key": KEY}])
def test_api_keys_alike(keyed_apps, headers):
    _same(keyed_apps, "/v1/hands/ting", json.dumps(COMMON).encode(), {"Content-Type": "application/json", **headers})


def test_the_common_body_never_reaches_flask_and_errors_do():
    app = create_app({"TESTING": True})
    spy, client = Spy(app), app.test_client()
    assert client.post("/v1/hands/ting", json=COMMON).status_code == 200
    assert client.post("/v1/hands/validate", json={**COMMON, "ruleset": "xuezhan", "visible": "5m"}).status_code == 200
    assert client.post("/v1/hands/score", json={"hand": {"tiles": "1112345678999m9m"},
                                                "win": {"tile": "9m"}}).status_code == 200
    assert spy.calls == 0
    assert client.post("/v1/hands/ting", json={"hand": {"tiles": "1m" * 8}}).status_code == 422  # a rule error
    assert client.post("/v1/hands/score", json=COMMON).status_code == 422  # no win: marshmallow's error
    assert client.get("/v1/hands/ting").status_code == 405
    assert spy.calls == 3


def test_it_steps_aside_for_what_it_would_skip():
    # a hook it does not know, installed before it: it is not installed
    assert create_app({"TESTING": True, "CORS_ORIGINS": "https://example.org"}).extensions["hot_path"] is None
    # a hook added afterwards, a signal receiver, pretty JSON: Flask answers from then on
    for change in ("hook", "signal", "debug"):
        app = create_app({"TESTING": True})
        spy = Spy(app)
        seen = []
        if change == "hook":
            app.after_request(lambda response: seen.append(response.status_code) or response)
        elif change == "debug":
            app.debug = True
        receiver = lambda sender, **kw: seen.append("started")  # noqa: E731
        if change == "signal":
            signals.request_started.connect(receiver, app)
        try:
            response = app.test_client().post("/v1/hands/ting", json=COMMON)
        finally:
            signals.request_started.disconnect(receiver, app)
        assert response.status_code == 200 and spy.calls == 1, change
        if change == "debug":
            assert response.get_data().startswith(b"{\n")
        else:
            assert seen == [200] if change == "hook" else seen == ["started"]
