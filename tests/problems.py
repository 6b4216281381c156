"""What every problem answer of the service must be (RFC 9457 problem+json), checked in one place."""

from __future__ import annotations

from service.api.problems import PROBLEM_JSON, PROBLEMS_PATH

ORIGIN = "http://localhost"
"""The origin of Flask's test client's requests: a problem's ``type`` starts with it (no ``PUBLIC_URL``)."""


def problem(response, status: int, code: str) -> dict:
    """Assert that a Flask test response is the problem ``code`` with ``status``; its body."""
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == PROBLEM_JSON, response.mimetype
    body = response.get_json(force=True)
    assert body["code"] == code, body
    assert body["type"] == ORIGIN + PROBLEMS_PATH + code and body["status"] == status
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    assert body["request_id"] == response.headers["X-Request-ID"]
    assert body["instance"].startswith("/")
    return body
