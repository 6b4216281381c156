"""What docs/api.md says of a webhook's registration body is what the service takes: ``url`` and ``events``
required, ``tables`` optional."""

from __future__ import annotations

from pathlib import Path

from service.api import create_app
from service.api.app import openapi_dict
from tests.problems import problem

ROOT = Path(__file__).resolve().parent.parent
KEY = "acme-" + "k" * 40


def test_the_reference_says_events_is_required_and_the_service_requires_it(redis_url):
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    section = api[api.index("### Webhooks"):api.index("### Errors")]
    assert "`url` and `events` are required" in section and "`tables` is optional" in section
    assert set(openapi_dict()["components"]["schemas"]["CreateWebhookRequest"]["required"]) == {"url", "events"}
    client = create_app({"TESTING": True, "REDIS_URL": redis_url, "API_KEYS": f"acme={KEY}"}).test_client()
    body = problem(client.post("/v1/webhooks", json={"url": "https://backend.example/mahjong"},
                               headers={"X-API-Key": KEY}), 422, "invalid_input")
    assert list(body["errors"]) == ["events"]
    body = problem(client.post("/v1/webhooks", json={"url": "https://backend.example/mahjong", "events": []},
                               headers={"X-API-Key": KEY}), 422, "invalid_input")
    assert list(body["errors"]) == ["events"]
