"""``GET /v1/tables/{id}/stream`` in-process (Flask's test client on the session Redis): what a
request leaves behind in the process's hub once its response is closed."""

from __future__ import annotations

from service.api import create_app
from service.config import NO_LIMITS


def _table(client) -> dict:
    response = client.post("/v1/tables", json={"players": ["东", "南", "西", "北"]})
    assert response.status_code == 201
    return response.get_json()


def test_a_head_request_leaves_no_subscriber_behind(app):
    # HEAD runs the GET view; its body (the frames generator) is never iterated, so the
    # generator's own cleanup never ran and each HEAD left a subscriber in the hub for good.
    client = app.test_client()
    table = _table(client)
    headers = {"Authorization": f"Bearer {table['read_token']}"}
    for _ in range(3):
        response = client.head(f"/v1/tables/{table['id']}/stream", headers=headers)
        assert response.status_code == 200 and response.mimetype == "text/event-stream"
        assert response.get_data() == b""
        response.close()
    assert app.extensions["stream_hub"].subscribers == 0


def test_a_closed_stream_leaves_no_subscriber_behind(app):
    client = app.test_client()
    table = _table(client)
    headers = {"Authorization": f"Bearer {table['read_token']}"}
    response = client.get(f"/v1/tables/{table['id']}/stream", headers=headers, buffered=False)
    assert response.status_code == 200
    assert app.extensions["stream_hub"].subscribers == 1
    response.close()  # the client went away
    assert app.extensions["stream_hub"].subscribers == 0
    response = client.get(f"/v1/tables/{table['id']}/stream", headers=headers, buffered=False)
    assert next(iter(response.response)).startswith(b"retry: 3000\n")
    response.close()
    assert app.extensions["stream_hub"].subscribers == 0


def test_a_table_has_at_most_stream_max_per_table_streams_per_worker(redis_url):
    # Without a bound, one read token (shown to a room, or leaked) could hold every
    # connection of a worker with streams of one table.
    app = create_app({"TESTING": True, "REDIS_URL": redis_url, "STREAM_MAX_PER_TABLE": 2,
                      **{var: 0 for var in NO_LIMITS}})
    try:
        client = app.test_client()
        table, other = _table(client), _table(client)
        headers = {"Authorization": f"Bearer {table['read_token']}", "X-Request-ID": "r-1"}
        url = f"/v1/tables/{table['id']}/stream"
        held = [client.get(url, headers=headers, buffered=False) for _ in range(2)]
        assert [r.status_code for r in held] == [200, 200]
        refused = client.get(url, headers=headers)
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "30"
        assert refused.mimetype == "application/problem+json"
        assert refused.get_json()["code"] == "too_many_streams"
        # another table is not affected; a closed stream frees its place
        response = client.get(f"/v1/tables/{other['id']}/stream",
                              headers={"Authorization": f"Bearer {other['read_token']}"}, buffered=False)
        assert response.status_code == 200
        response.close()
        held.pop().close()
        again = client.get(url, headers=headers, buffered=False)
        assert again.status_code == 200
        again.close()
        for response in held:
            response.close()
        assert app.extensions["stream_hub"].subscribers == 0
    finally:
        app.extensions["stream_hub"].close()


def test_the_stream_bound_is_a_setting():
    from service.config import Settings

    assert Settings().stream_max_per_table == 32
    assert Settings.from_env({"STREAM_MAX_PER_TABLE": "5"}).stream_max_per_table == 5
