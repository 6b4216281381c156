"""A batch's items and its body limit (docs/api.md "Batch scoring"): an item that is not an object with a
known ``op`` is its own 422 result, exactly as its NDJSON line's; a JSON batch of ``BATCH_MAX_ITEMS``
ordinary items fits ``MAX_BATCH_BYTES`` (apart from ``MAX_BODY_BYTES``); its 413 points at NDJSON."""

from __future__ import annotations

import io
import json

import orjson
import pytest

from service.api.app import create_app
from service.serving import WholeBody, body_limit

pytestmark = pytest.mark.app(store=False)

NDJSON = "application/x-ndjson"
TING = {"op": "ting", "hand": {"tiles": "1112345678999m"}}
NOT_ITEMS = [7, "ting", None, [TING], {}, {"hand": {"tiles": "1m"}}, {"op": "tingg"}, {"op": 3}]
ORDINARY = [
    TING,
    {"op": "score", "hand": {"tiles": "11122233344499p"}, "win": {"tile": "9p", "self_drawn": True}},
    {"op": "validate", "hand": {"tiles": "123456789m1123p"}},
    {"op": "discards", "hand": {"tiles": "11122233345m99p5s"}},
    {"op": "settle", "dealer": 0, "events": [
        {"type": "kong", "seat": 1, "kind": "direct", "tile": "5m", "from": 2},
        {"type": "hu", "from": 3, "tile": "5p", "winners": [{"seat": 0, "fan": 2}]}]},
]


def test_an_item_that_is_no_item_is_its_own_422_exactly_as_its_ndjson_line(client):
    r = client.post("/v1/batch", json={"items": [TING, *NOT_ITEMS, TING]})
    assert r.status_code == 200, r.get_data(as_text=True)
    results = r.get_json()["results"]
    assert [x["status"] for x in results] == [200] + [422] * len(NOT_ITEMS) + [200]
    lines = client.post("/v1/batch", data=b"".join(orjson.dumps(x) + b"\n" for x in NOT_ITEMS), content_type=NDJSON)
    expected = [json.loads(line) for line in lines.get_data().splitlines()]
    for got, want in zip(results[1:-1], expected):
        assert {**got["problem"], "request_id": None} == {**want["problem"], "request_id": None}
        assert got["problem"]["code"] == "invalid_input" and list(got["problem"]["errors"]) == ["op"]
        assert got["problem"]["instance"] == "/v1/batch"


def test_a_json_batch_of_a_thousand_ordinary_items_fits_the_default_limit(client):
    items = [ORDINARY[i % len(ORDINARY)] for i in range(1000)]
    body = orjson.dumps({"items": items})
    assert 64 * 1024 < len(body) < 1024 * 1024  # (over MAX_BODY_BYTES: a batch has its own limit)
    r = client.post("/v1/batch", data=body, content_type="application/json")
    assert r.status_code == 200, r.get_data(as_text=True)[:300]
    assert len(r.get_json()["results"]) == 1000 and {x["status"] for x in r.get_json()["results"]} == {200}
    # the single endpoints keep MAX_BODY_BYTES
    big = client.post("/v1/hands/ting", data=b'{"hand": {"tiles": "' + b"1" * 70000 + b'"}}',
                      content_type="application/json")
    assert big.status_code == 413


def test_over_max_batch_bytes_is_a_413_that_names_ndjson():
    c = create_app({"TESTING": True, "MAX_BATCH_BYTES": 4096}).test_client()
    items = [TING] * 100
    r = c.post("/v1/batch", json={"items": items})
    body = r.get_json()
    assert (r.status_code, body["code"]) == (413, "payload_too_large")
    assert "MAX_BATCH_BYTES" in body["detail"] and "application/x-ndjson" in body["detail"]
    lines = c.post("/v1/batch", data=b"".join(orjson.dumps(x) + b"\n" for x in items), content_type=NDJSON)
    assert lines.status_code == 200 and len(lines.get_data().splitlines()) == 100


def test_the_server_reads_a_batch_body_up_to_its_own_limit():
    """Under gunicorn the body is read whole before the app runs (service.serving.WholeBody): up to
    MAX_BATCH_BYTES for a JSON batch, MAX_BODY_BYTES for every other request."""
    assert body_limit("/v1/batch", 1000, 5000) == 5000 and body_limit("/v1/tables", 1000, 5000) == 1000
    seen = {}

    def app(environ, start_response):
        seen["body"] = environ["wsgi.input"].read()
        start_response("200 OK", [])
        return [b""]

    whole = WholeBody(app, 5.0, 1000, 5000)
    for path, size, read in (("/v1/batch", 4000, 4000), ("/v1/hands/ting", 4000, 1001)):
        seen.clear()
        environ = {"PATH_INFO": path, "CONTENT_LENGTH": "", "HTTP_TRANSFER_ENCODING": "chunked",
                   "CONTENT_TYPE": "application/json", "wsgi.input": io.BytesIO(b"x" * size)}
        whole(environ, lambda status, headers: None)
        assert len(seen["body"]) == read, path  # (a body over the limit: the app sees one byte more and says 413)
