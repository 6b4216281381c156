"""POST /v1/batch through Flask's test client, the NDJSON line reader, the rate limit and `score` (the CLI).

The item-by-item equality with the single endpoints is test_batch_differential.py's; here: the
envelope and its errors, the envelope's ruleset, NDJSON lines that are no item, lines cut across
reads, the item limit per client, the documented statuses, and the command line as a program.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.api import batch_items, create_app
from service.api.app import openapi_dict

pytestmark = pytest.mark.app(store=False)

ROOT = Path(__file__).resolve().parent.parent
NDJSON = "application/x-ndjson"
TING = {"op": "ting", "hand": {"tiles": "1112345678999m"}}
BAD_TING = {"op": "ting", "hand": {"tiles": "12x"}}
SCORE = {"op": "score", "hand": {"tiles": "11122233344455m"}, "win": {"tile": "5m"}}


def lines_of(response) -> list[dict]:
    assert response.status_code == 200 and response.mimetype == NDJSON, response.get_data(as_text=True)
    return [json.loads(line) for line in response.get_data().splitlines()]


def ndjson(*lines) -> bytes:
    return b"".join((line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n" for line in lines)


# -- the JSON envelope ---------------------------------------------------------------------------
def test_one_bad_item_does_not_fail_the_others(client):
    r = client.post("/v1/batch", json={"items": [TING, BAD_TING, SCORE]})
    assert r.status_code == 200 and r.mimetype == "application/json"
    results = r.get_json()["results"]
    assert [x["status"] for x in results] == [200, 422, 200]
    assert results[0]["body"] == client.post("/v1/hands/ting", json={"hand": TING["hand"]}).get_json()
    problem = results[1]["problem"]
    assert problem["instance"] == "/v1/hands/ting" and problem["errors"] == {"hand.tiles": [problem["detail"]]} \
        or problem["code"] == "bad_tile", problem
    assert set(results[1]) == {"status", "problem"} and set(results[0]) == {"status", "body"}


def test_an_empty_batch_answers_no_result(client):
    assert client.post("/v1/batch", json={"items": []}).get_json() == {"results": []}


@pytest.mark.parametrize("body, errors", [
    ([TING], {"_schema": ["Invalid input type."]}),
    ({}, {"items": ["Missing data for required field."]}),
    ({"items": {}}, {"items": ["Not a valid list."]}),
    ({"items": [], "extra": 1}, {"extra": ["Unknown field."]}),
])
def test_a_malformed_envelope_is_a_422_for_the_whole_request(client, body, errors):
    r = client.post("/v1/batch", json=body)
    assert r.status_code == 422 and r.mimetype == "application/problem+json"
    problem = r.get_json()
    assert problem["code"] == "invalid_input" and problem["errors"] == errors and problem["instance"] == "/v1/batch"


def test_more_items_than_batch_max_items_is_a_422():
    c = create_app({"TESTING": True, "BATCH_MAX_ITEMS": 3}).test_client()
    assert c.post("/v1/batch", json={"items": [TING] * 3}).status_code == 200
    r = c.post("/v1/batch", json={"items": [TING] * 4})
    assert r.status_code == 422 and r.get_json()["errors"] == {"items": ["Longer than maximum length 3."]}


def test_what_the_envelope_refuses_before_reading_it(client):
    r = client.post("/v1/batch", data=b"{", content_type="application/json")
    assert (r.status_code, r.get_json()["code"]) == (400, "malformed_json")
    r = client.post("/v1/batch", data=b"{}", content_type="text/plain")
    assert (r.status_code, r.get_json()["code"]) == (415, "unsupported_media_type")
    assert "application/x-ndjson" in r.get_json()["detail"]
    small = create_app({"TESTING": True, "MAX_BATCH_BYTES": 2048}).test_client()
    r = small.post("/v1/batch", json={"items": [TING] * 100})
    assert (r.status_code, r.get_json()["code"]) == (413, "payload_too_large")
    assert "application/x-ndjson" in r.get_json()["detail"]


def test_the_envelope_ruleset_is_that_of_every_item_without_one(client):
    capped = {"preset": "xuezhan", "cap": 2}
    items = [TING, {**TING, "ruleset": "xueliu"}, SCORE]
    results = client.post("/v1/batch", json={"ruleset": capped, "items": items}).get_json()["results"]
    for item, result in zip(items, results):
        body = {k: v for k, v in item.items() if k != "op"}
        single = client.post(batch_items.OPS[item["op"]].path, json={"ruleset": capped, **body}).get_json()
        assert result == {"status": 200, "body": single}
    assert results[2]["body"]["fan"] == 2 and results[2]["body"]["capped"] is True  # the envelope's cap
    plain = client.post("/v1/batch", json={"items": items}).get_json()["results"]
    assert plain[1] == results[1] and plain[2]["body"]["capped"] is False  # the item's own ruleset wins


def test_a_bad_envelope_ruleset_fails_the_whole_request(client):
    r = client.post("/v1/batch", json={"ruleset": {"cap": 0}, "items": [TING]})
    assert r.status_code == 422 and list(r.get_json()["errors"]) == ["ruleset.cap"]
    r = client.post("/v1/batch", json={"ruleset": "nope", "items": [TING]})
    assert r.status_code == 422 and r.get_json()["code"] == "unknown_ruleset"


def test_a_ruleset_object_loads_once_and_every_refusal_is_still_marshmallows():
    from service.api.schemas import TingRequest

    schema, hand = TingRequest(), {"tiles": "1112345678999m"}
    first = schema.load({"hand": hand, "ruleset": {"cap": 1}})["ruleset"]
    assert schema.load({"hand": hand, "ruleset": {"cap": 1}})["ruleset"] is first
    with pytest.raises(Exception) as refused:  # true is not 1, whatever Python's == says
        schema.load({"hand": hand, "ruleset": {"cap": True}})
    assert "cap" in str(refused.value)


# -- NDJSON ---------------------------------------------------------------------------------------
def test_ndjson_answers_a_line_per_item_in_order(client):
    body = ndjson(TING, BAD_TING, b"", b"   ", SCORE, b"not json", [1], {"op": "x"}, {"hand": {}})
    results = lines_of(client.post("/v1/batch", data=body, content_type=NDJSON))
    assert [x["status"] for x in results] == [200, 422, 200, 400, 422, 422, 422]
    single = client.post("/v1/hands/ting", data=b"not json", content_type="application/json").get_json()
    assert results[3]["problem"] | {"instance": "/v1/hands/ting", "request_id": single["request_id"]} == single
    assert results[4]["problem"]["errors"] == {"op": ["An item is an object whose `op` names an operation."]}
    assert results[5]["problem"]["errors"] == {
        "op": ["Must be one of: validate, ting, discards, score, settle, shanten."]
    }
    assert results[6]["problem"]["errors"] == {"op": ["Missing data for required field."]}
    assert {x["problem"]["instance"] for x in results[3:]} == {"/v1/batch"}


def test_ndjson_without_a_last_newline_and_with_crlf(client):
    body = json.dumps(TING).encode() + b"\r\n" + json.dumps(SCORE).encode()
    assert [x["status"] for x in lines_of(client.post("/v1/batch", data=body, content_type=NDJSON))] == [200, 200]
    assert client.post("/v1/batch", data=b"", content_type=NDJSON).get_data() == b""


def test_a_line_longer_than_max_body_bytes_is_that_lines_413_and_the_job_goes_on():
    c = create_app({"TESTING": True, "MAX_CONTENT_LENGTH": 1024}).test_client()
    long = json.dumps({**TING, "visible": "1m" * 1000}).encode()
    body = ndjson(TING, long, TING) * 30  # (the job itself is larger than MAX_CONTENT_LENGTH: no matter)
    results = lines_of(c.post("/v1/batch", data=body, content_type=NDJSON))
    assert [x["status"] for x in results] == [200, 413, 200] * 30
    assert results[1]["problem"]["code"] == "payload_too_large" and str(len(long)) in results[1]["problem"]["detail"]


@settings(max_examples=60, deadline=None)
@given(lines=st.lists(st.one_of(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")),
                                st.just(b"x" * 70)), max_size=30),
       size=st.integers(1, 50), last_newline=st.booleans())
def test_the_lines_are_the_same_whatever_the_reads(lines, size, last_newline):
    """Lines cut across reads (any read size) come out whole; a line over the limit is its length only."""
    data = b"\n".join(lines) + (b"\n" if last_newline and lines else b"")
    stream = io.BytesIO(data)
    got = [line for piece in batch_items.pieces(stream.read, 64, size) for line in piece]
    expected = data.split(b"\n")
    if expected and expected[-1] == b"":
        expected.pop()
    assert got == [line if len(line) <= 64 else batch_items.TooLong(len(line)) for line in expected]
    assert sum(batch_items.piece_bytes(piece) for piece in batch_items.pieces(io.BytesIO(data).read, 64, size)) \
        == len(data) + (0 if data.endswith(b"\n") or not data else 1)


# -- the item limit per client --------------------------------------------------------------------
def limited(redis_url, **config):
    return create_app({"TESTING": True, "REDIS_URL": redis_url, **config}).test_client()


def test_a_batch_counts_its_items_against_the_client_limit(redis_url):
    c = limited(redis_url, CLIENT_BATCH_ITEMS_PER_MINUTE=5)
    first = c.post("/v1/batch", json={"items": [TING] * 3})
    assert first.status_code == 200 and first.headers["X-RateLimit-Remaining"] == "2"
    r = c.post("/v1/batch", json={"items": [TING] * 3})  # 3 more than the 2 left: all refused, none run
    assert r.status_code == 429 and r.get_json()["limit"] == "client_batch_items" and "Retry-After" in r.headers
    assert c.post("/v1/batch", json={"items": [TING] * 2}).status_code == 200
    assert c.post("/v1/batch", json={"items": [TING]}).status_code == 429
    for _ in range(3):  # the single endpoints are not limited
        assert c.post("/v1/hands/ting", json={"hand": TING["hand"]}).status_code == 200


def test_an_ndjson_job_stops_at_the_client_limit_with_a_429_line(redis_url):
    c = limited(redis_url, CLIENT_BATCH_ITEMS_PER_MINUTE=2500)
    body = ndjson(*[TING] * 3000)  # about 1,300 lines a 64 KiB read: the second read passes the limit
    results = lines_of(c.post("/v1/batch", data=body, content_type=NDJSON))
    answered, last = results[:-1], results[-1]
    assert 0 < len(answered) < 2500 and {x["status"] for x in answered} == {200}
    assert last["status"] == 429 and last["problem"]["limit"] == "client_batch_items"
    assert last["problem"]["instance"] == "/v1/batch"
    r = c.post("/v1/batch", json={"items": [TING]})  # the refused read was not counted: its lines were not run
    assert r.status_code == 200 and r.headers["X-RateLimit-Remaining"] == str(2500 - len(answered) - 1)


def test_a_refused_envelope_counts_one_item_and_a_key_may_have_its_own_limit(redis_url):
    key = "k" * 40
    c = limited(redis_url, CLIENT_BATCH_ITEMS_PER_MINUTE=2, API_KEYS=f"acme={key}",
                API_KEY_LIMITS="acme:CLIENT_BATCH_ITEMS_PER_MINUTE=10")
    anonymous = limited(redis_url, CLIENT_BATCH_ITEMS_PER_MINUTE=2)
    assert anonymous.post("/v1/batch", json={"items": "x"}).status_code == 422
    assert anonymous.post("/v1/batch", json={"items": [TING]}).status_code == 200
    assert anonymous.post("/v1/batch", json={"items": [TING]}).status_code == 429
    headers = {"X-API-Key": key}
    assert c.post("/v1/batch", json={"items": [TING] * 10}, headers=headers).status_code == 200
    assert c.post("/v1/batch", json={"items": [TING]}, headers=headers).status_code == 429


def test_zero_turns_the_batch_limit_off(redis_url):
    c = limited(redis_url, CLIENT_BATCH_ITEMS_PER_MINUTE=0)
    assert all(c.post("/v1/batch", json={"items": [TING] * 50}).status_code == 200 for _ in range(3))


# -- the document ----------------------------------------------------------------------------------
def test_every_answer_of_the_batch_is_documented(redis_url):
    doc = openapi_dict()
    operation = doc["paths"]["/v1/batch"]["post"]
    assert operation["operationId"] == "runBatch"
    c = limited(redis_url, CLIENT_BATCH_ITEMS_PER_MINUTE=20, MAX_BATCH_BYTES=4096, API_KEYS="acme=" + "k" * 40)
    key = {"X-API-Key": "k" * 40}
    seen = set()
    for response in (
        c.post("/v1/batch", json={"items": [TING, BAD_TING]}, headers=key),
        c.post("/v1/batch", data=ndjson(TING, b"{"), content_type=NDJSON, headers=key),
        c.post("/v1/batch", json={"items": [TING]}),
        c.post("/v1/batch", data=b"{", content_type="application/json", headers=key),
        c.post("/v1/batch", data=b"{}", content_type="text/plain", headers=key),
        c.post("/v1/batch", json={"items": [TING] * 200}, headers=key),
        c.post("/v1/batch", json={"items": {"op": 1}}, headers=key),
        c.post("/v1/batch", json={"items": [TING] * 30}, headers=key),
    ):
        status = str(response.status_code)
        seen.add(response.status_code)
        assert status in operation["responses"], (status, response.get_data(as_text=True))
        content = operation["responses"][status]["content"]
        if response.status_code >= 400:
            assert response.mimetype == "application/problem+json" and list(content) == ["application/problem+json"]
        else:
            assert response.mimetype in content
    assert seen == {200, 400, 401, 413, 415, 422, 429}
    item = doc["components"]["schemas"]["BatchItem"]
    assert item["discriminator"]["propertyName"] == "op"
    assert set(item["discriminator"]["mapping"]) == set(batch_items.OPS)


def test_the_documented_results_match_what_a_batch_answers(client):
    import jsonschema

    doc = openapi_dict()
    validator = jsonschema.Draft202012Validator({"$ref": "#/components/schemas/BatchResponse",
                                                 "components": doc["components"]})
    example = doc["paths"]["/v1/batch"]["post"]["requestBody"]["content"]["application/json"]["example"]
    body = client.post("/v1/batch", json=example).get_json()
    validator.validate(body)
    assert {x["status"] for x in body["results"]} == {200, 422}
    request = jsonschema.Draft202012Validator({"$ref": "#/components/schemas/BatchRequest",
                                               "components": doc["components"]})
    request.validate(example)


# -- the command line ------------------------------------------------------------------------------
ITEMS = [TING, BAD_TING, SCORE, {"op": "discards", "hand": {"tiles": "11122233344456m"}},
         {"op": "validate", "hand": {"tiles": "123m"}},
         {"op": "settle", "dealer": 0, "events": [{"type": "hu", "from": 1, "tile": "5p",
                                                   "winners": [{"seat": 0, "fan": 2}]}]},
         {"op": "settle", "dealer": 0, "events": [{"type": "peng", "seat": 9, "tile": "5p", "from": 1}]}]


def score(args, data: bytes, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "service", "score", *args], input=data, cwd=ROOT,
                          capture_output=True, timeout=120, **kwargs)


def _as_on_the_command_line(result: dict) -> dict:
    """A result of ``POST /v1/batch`` as the command line gives it: no request id, a relative type."""
    if "problem" not in result:
        return result
    problem = {k: v for k, v in result["problem"].items() if k != "request_id"}
    return {**result, "problem": {**problem, "type": problem["type"].removeprefix("http://localhost")}}


def test_score_answers_as_the_ndjson_endpoint_with_one_job_or_two(client, tmp_path):
    """The same results as the endpoint, each with the number of its input line (blank lines count); exit
    status 1 (some items fail) and their count on stderr."""
    body = ndjson(*ITEMS, b"oops", b"", [2]) * 400  # some 3,600 items: several pieces
    path = tmp_path / "items.ndjson"
    path.write_bytes(body)
    over_http = [_as_on_the_command_line(x) for x in lines_of(client.post("/v1/batch", data=body, content_type=NDJSON))]
    one = score([str(path)], b"")
    two = score([str(path), "--jobs", "2"], b"")
    piped = score(["-"], body)
    assert one.returncode == two.returncode == piped.returncode == 1, (one.stderr, two.stderr)
    assert one.stdout == two.stdout == piped.stdout
    results = [json.loads(line) for line in one.stdout.splitlines()]
    assert [{k: v for k, v in r.items() if k != "line"} for r in results] == over_http
    assert len(over_http) == (len(ITEMS) + 2) * 400
    per_copy = len(ITEMS) + 3  # (the items, "oops", a blank line, [2])
    expected_lines = [copy * per_copy + i for copy in range(400) for i in (*range(1, len(ITEMS) + 2), len(ITEMS) + 3)]
    assert [r["line"] for r in results] == expected_lines and list(results[0]) == ["line", "status", "body"]
    lines = body.split(b"\n")
    assert lines[results[-1]["line"] - 1] == b"[2]" and lines[results[1]["line"] - 1] == json.dumps(BAD_TING).encode()
    failed = sum(1 for r in results if r["status"] != 200)
    assert failed == 4 * 400 and one.stderr == two.stderr == piped.stderr == (
        f"python -m service score: {failed} of {len(results)} items failed\n".encode())


def test_score_exits_0_when_every_item_is_answered_and_says_nothing_on_stderr():
    run = score(["-"], ndjson(TING, SCORE))
    assert run.returncode == 0 and run.stderr == b""
    assert [json.loads(line)["line"] for line in run.stdout.splitlines()] == [1, 2]
    one_bad = score(["-"], ndjson(TING, BAD_TING))
    assert one_bad.returncode == 1 and one_bad.stderr == b"python -m service score: 1 of 2 items failed\n"


def test_score_help_shows_an_item_that_scores():
    helped = subprocess.run([sys.executable, "-m", "service", "score", "--help"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert helped.returncode == 0
    [example] = [line.strip() for line in helped.stdout.splitlines() if line.strip().startswith('{"op"')]
    run = score(["-"], example.encode() + b"\n")
    assert run.returncode == 0 and json.loads(run.stdout)["status"] == 200
    assert "Exit status" in helped.stdout and '"line": 1' in helped.stdout


def test_score_refuses_what_it_cannot_read(tmp_path):
    missing = score([str(tmp_path / "nope.ndjson")], b"")
    assert missing.returncode == 2 and b"nope.ndjson" in missing.stderr and missing.stdout == b""
    assert score(["-", "--jobs", "0"], b"").returncode == 2


def test_score_draws_a_progress_bar_on_a_terminal_only(tmp_path):
    path = tmp_path / "items.ndjson"
    path.write_bytes(ndjson(*ITEMS) * 50)
    piped = score([str(path)], b"")  # stderr a pipe: no bar, only the count of failures
    assert piped.stderr == f"python -m service score: 100 of {len(ITEMS) * 50} items failed\n".encode()
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a terminal 120 wide
    proc = subprocess.Popen([sys.executable, "-m", "service", "score", str(path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    bar = []

    def read_terminal() -> None:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the program ended: its terminal closed
                return
            if not chunk:
                return
            bar.append(chunk)

    reader = threading.Thread(target=read_terminal)
    reader.start()
    out, _ = proc.communicate(timeout=120)
    reader.join(timeout=30)
    os.close(leader)
    bar = b"".join(bar)
    assert proc.returncode == 1 and len(out.splitlines()) == len(ITEMS) * 50
    total = len(ITEMS) * 50
    # items counted as integers, out of the file's items: "350/350 [..., 1234.56item/s]", no "k" scaling
    assert b"score" in bar and b"100%" in bar and f"{total}/{total}".encode() in bar, bar
    assert b"item/s" in bar and b"B/s" not in bar and b"0.35k" not in bar, bar
