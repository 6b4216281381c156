"""/healthz, /readyz, /metrics, the access log and the app factory's config."""

from __future__ import annotations

import json
import logging
import re

import pytest

from service.api import create_app, settings
from service.api.ops import register_readiness_check

pytestmark = pytest.mark.app(store=False, fresh=True)


def test_healthz(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.get_json() == {"status": "ok"}


def test_readyz_without_checks(client):
    assert client.get("/readyz").get_json() == {"status": "ok", "checks": {}}


def test_readyz_runs_registered_checks(app, client):
    assert app.extensions["readiness_checks"] == []

    def redis():
        return True

    register_readiness_check(app, redis)
    app.extensions["readiness_checks"].append(lambda: None)
    body = client.get("/readyz").get_json()
    assert body["status"] == "ok" and body["checks"]["redis"] == "ok"


def test_readyz_failure_is_503_problem(app, client):
    def broken():
        raise ConnectionError("redis at 10.0.0.1:6379 refused password hunter2")

    register_readiness_check(app, broken, name="redis")
    register_readiness_check(app, lambda: False, name="other")
    response = client.get("/readyz")
    assert response.status_code == 503 and response.mimetype == "application/problem+json"
    body = response.get_json()
    assert body["code"] == "not_ready"
    assert body["checks"] == {"redis": "failed: ConnectionError", "other": "failed"}
    assert "hunter2" not in response.get_data(as_text=True)


def _sample(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_metrics_count_requests_by_endpoint_method_status(client):
    before = client.get("/metrics").get_data(as_text=True)
    client.post("/v1/hands/ting", json={"hand": {"tiles": "1112345678999m"}})
    client.post("/v1/hands/ting", json={})
    client.get("/no/such/path/12345")
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.mimetype == "text/plain"
    after = response.get_data(as_text=True)
    name = "mahjong_http_requests_total"
    for labels, delta in (
        ({"endpoint": "/v1/hands/ting", "method": "POST", "status": "200"}, 1),
        ({"endpoint": "/v1/hands/ting", "method": "POST", "status": "422"}, 1),
        ({"endpoint": "<unmatched>", "method": "GET", "status": "404"}, 1),
    ):
        assert _sample(after, name, **labels) - _sample(before, name, **labels) == delta, labels
    assert "/no/such/path" not in after
    hist = "mahjong_http_request_duration_seconds_count"
    assert _sample(after, hist, endpoint="/v1/hands/ting", method="POST") >= 2


def test_one_json_access_log_line_per_request(client, caplog):
    with caplog.at_level(logging.INFO, logger="service.access"):
        client.post("/v1/hands/ting?token=secret", json={"hand": {"tiles": "1112345678999m"}},
                    headers={"X-Request-ID": "log-1", "Authorization": "Bearer secret"})
    records = [r for r in caplog.records if r.name == "service.access"]
    assert len(records) == 1
    from service.logs import JsonFormatter

    text = JsonFormatter().format(records[0])  # the line as written
    line = json.loads(text)
    assert {"method", "path", "status", "duration_ms", "request_id"} <= set(line)
    assert (line["method"], line["path"], line["status"], line["request_id"]) == (
        "POST",
        "/v1/hands/ting",
        200,
        "log-1",
    )
    assert line["logger"] == "service.access" and line["level"] == "INFO"
    assert isinstance(line["duration_ms"], float)
    assert "secret" not in text and "1112345678999m" not in text


def test_json_formatter_merges_json_messages():
    from service.logs import JsonFormatter

    record = logging.LogRecord("service.access", logging.INFO, __file__, 1, '{"status": 200}', None, None)
    out = json.loads(JsonFormatter().format(record))
    assert out["status"] == 200 and out["level"] == "INFO" and out["logger"] == "service.access"
    record = logging.LogRecord("service.api", logging.WARNING, __file__, 1, "plain %s", ("text",), None)
    assert json.loads(JsonFormatter().format(record))["message"] == "plain text"


def test_config_from_environment(monkeypatch):
    monkeypatch.setenv("MAX_BODY_BYTES", "4096")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    app = create_app()
    assert app.config["MAX_CONTENT_LENGTH"] == 4096 and settings.current(app).redis_url == "redis://127.0.0.1:1/0"
    assert create_app({"MAX_CONTENT_LENGTH": 100}).config["MAX_CONTENT_LENGTH"] == 100


def test_bad_environment_is_a_clear_error(monkeypatch):
    from service.config import ConfigError

    monkeypatch.setenv("MAX_BODY_BYTES", "lots")
    with pytest.raises(ConfigError, match="MAX_BODY_BYTES"):
        create_app()


def test_docs_ui(client):
    response = client.get("/docs")
    assert response.status_code == 200 and b"swagger-ui" in response.data
    assert b"/openapi.json" in response.data


def test_head_and_options(client):
    assert client.head("/healthz").status_code == 200
    response = client.options("/v1/hands/ting")
    assert response.status_code == 200 and "POST" in response.headers["Allow"]


def test_metric_labels_stay_bounded(client):
    """Unknown methods and paths fold into one label value each: no series per client whim."""
    for method in ("FOO", "BAR1", "PROPFIND"):
        client.open("/v1/hands/ting", method=method)
    client.get("/no/such/path/" + "x" * 50)
    text = client.get("/metrics").get_data(as_text=True)
    assert 'method="OTHER"' in text and 'endpoint="<unmatched>"' in text
    assert "FOO" not in text and "PROPFIND" not in text and "x" * 50 not in text
