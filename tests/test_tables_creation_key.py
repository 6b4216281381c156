"""A table creation's Idempotency-Key is a secret UUID (docs/api.md, "Tables")."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from service.api import create_app
from service.api.app import openapi_dict

PLAYERS = ["东", "南", "西", "北"]
ROOT = Path(__file__).resolve().parent.parent


def test_a_replay_with_another_body_counts_against_the_creation_limit(redis_url):
    """An exact retry is free (it creates nothing); the same key with another body is someone
    guessing bodies (or a bug): it counts, so guessing is as limited as creating."""
    c = create_app({"TESTING": True, "REDIS_URL": redis_url, "TABLES_PER_HOUR": 3}).test_client()
    key = {"Idempotency-Key": str(uuid.uuid4())}
    first = c.post("/v1/tables", json={"players": PLAYERS}, headers=key)             # 1 of 3
    assert first.status_code == 201
    for _ in range(5):
        again = c.post("/v1/tables", json={"players": PLAYERS}, headers=key)         # free
        assert again.status_code == 201 and again.get_json() == first.get_json()
    guess = c.post("/v1/tables", json={"players": PLAYERS[::-1]}, headers=key)       # 2 of 3
    assert guess.status_code == 422 and guess.get_json()["code"] == "idempotency_key_reused"
    assert c.post("/v1/tables", json={"players": PLAYERS}).status_code == 201        # 3 of 3
    r = c.post("/v1/tables", json={"players": PLAYERS[::-1]}, headers=key)
    assert r.status_code == 429 and int(r.headers["Retry-After"]) > 0
    assert c.post("/v1/tables", json={"players": PLAYERS}, headers=key).status_code == 201  # still free


def test_the_openapi_document_says_what_a_creation_key_must_be():
    spec = openapi_dict()
    create = spec["paths"]["/v1/tables"]["post"]
    [header] = [p for p in create["parameters"] if p["name"] == "Idempotency-Key"]
    assert header["schema"]["format"] == "uuid"
    pattern = re.compile(header["schema"]["pattern"])
    assert pattern.fullmatch(str(uuid.uuid4())) and not pattern.fullmatch(str(uuid.uuid1()))
    for words in ("UUID", "version 4 or 7", "secret", "422", "rate limit"):
        assert words in header["description"], words
    post_event = spec["paths"]["/v1/tables/{table_id}/events"]["post"]
    [event_key] = [p for p in post_event["parameters"] if p["name"] == "Idempotency-Key"]
    assert "format" not in event_key["schema"]  # an event's key is any short visible string


def test_the_readme_creates_tables_with_a_fresh_uuid():
    readme = (ROOT / "README.md").read_text()
    creations = [line for line in readme.splitlines() if "curl" in line and "/v1/tables " in line + " "
                 and "Idempotency-Key" in line]
    assert creations
    for line in creations:
        assert "Idempotency-Key: $(python3 -c 'import uuid; print(uuid.uuid4())')" in line, line
