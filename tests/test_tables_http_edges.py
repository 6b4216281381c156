"""Small HTTP edges of the tables API."""

from __future__ import annotations

import pytest

from service.api import create_app
from service.store.embedded import free_port

PLAYERS = ["东", "南", "西", "北"]
PROBLEM = "application/problem+json"


def _table(client) -> dict:
    r = client.post("/v1/tables", json={"players": PLAYERS})
    assert r.status_code == 201
    return r.get_json()


def test_delete_answers_204_without_a_body_or_content_type(client):
    t = _table(client)
    r = client.delete(f"/v1/tables/{t['id']}", headers={"Authorization": f"Bearer {t['token']}"})
    assert r.status_code == 204 and r.data == b""
    assert "Content-Type" not in r.headers


def test_not_modified_has_no_content_type(client):
    t = _table(client)
    r = client.get(f"/v1/tables/{t['id']}", headers={"Authorization": f"Bearer {t['token']}",
                                                      "If-None-Match": '"0"'})
    assert r.status_code == 304 and r.data == b"" and "Content-Type" not in r.headers
    assert r.headers["ETag"] == '"0"'


@pytest.mark.parametrize("method, path", [
    ("POST", "/v1//tables"), ("GET", "//v1/tables/0123456789abcdef"), ("GET", "/v1/tables//0123456789abcdef"),
    ("POST", "/v1/hands//ting"), ("GET", "/v1/tables/"),
])
def test_odd_slashes_are_problems_never_redirects(client, method, path):
    r = client.open(path, method=method, json={"players": PLAYERS} if method == "POST" else None)
    assert r.status_code == 404, (r.status_code, r.headers.get("Location"))
    assert r.mimetype == PROBLEM and "Location" not in r.headers
    assert r.get_json()["code"] == "not_found"


def test_a_table_id_with_a_trailing_newline_is_not_an_id():
    """A malformed id is refused before Redis is asked: with no Redis listening, a well-formed id
    is 503 (the store is down) while the same id with a trailing newline is refused at once (401, as
    any id that is no table's)."""
    down = create_app({"TESTING": True, "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
                       "TABLES_PER_HOUR": 0}).test_client()
    auth = {"Authorization": "Bearer " + "x" * 43}
    assert down.get("/v1/tables/0123456789abcdef", headers=auth).status_code == 503
    r = down.get("/v1/tables/0123456789abcdef%0A", headers=auth)
    assert r.status_code == 401 and r.get_json()["code"] == "unauthorized"
