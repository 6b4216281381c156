"""Every status an operation really answers is listed for it in the OpenAPI document.

Each operation is driven into each of its outcomes through the Flask test client (with API keys,
low rate limits, a full table, a stale version...), and every status seen must be one the
document lists for that operation with the problem schema: a client generated from the document
knows every answer it can get.
"""

from __future__ import annotations

import json
import uuid

import pytest

from service.api import create_app
from service.api.app import openapi_dict

KEY = "acme=" + "k" * 40 + ",other=" + "o" * 40
OTHER_KEY = "o" * 40
HEADERS = {"X-API-Key": "k" * 40}
PLAYERS = {"players": ["a", "b", "c", "d"]}
DOC = openapi_dict()
OPERATIONS = {op["operationId"]: op for item in DOC["paths"].values() for m, op in item.items() if m != "parameters"}


pytestmark = pytest.mark.app(limits=True, API_KEYS=KEY, MAX_TABLE_EVENTS=8, TABLES_PER_HOUR=8, TABLE_READS_PER_MINUTE=6,
                            TABLE_EVENTS_PER_MINUTE=3, TABLE_VOIDS_PER_MINUTE=1, CLIENT_READS_PER_MINUTE=0,
                            CLIENT_EVENTS_PER_MINUTE=0, CLIENT_VOIDS_PER_MINUTE=0, MAX_CONTENT_LENGTH=4096)


class Seen:
    def __init__(self) -> None:
        self.by_operation: dict[str, set[int]] = {}

    def __call__(self, operation: str, response) -> object:
        self.by_operation.setdefault(operation, set()).add(response.status_code)
        documented = OPERATIONS[operation]["responses"]
        status = str(response.status_code)
        assert status in documented, (operation, status, response.get_data(as_text=True))
        if response.status_code >= 400:
            assert response.mimetype == "application/problem+json"
            answer = documented[status] if "content" in documented[status] else DOC["components"]["responses"][
                documented[status]["$ref"].rsplit("/", 1)[1]]
            schema = answer["content"]["application/problem+json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/Problem"}, schema
            code = response.get_json()["code"]
            assert code in answer["x-problem-codes"], (operation, status, code)
        return response


def test_every_answer_is_documented(client):
    seen = Seen()
    big = json.dumps({"x": "y" * 5000})
    for op, path, body in (
        ("validateHand", "/v1/hands/validate", {"hand": {"tiles": "1m"}}),
        ("tingHand", "/v1/hands/ting", {"hand": {"tiles": "1112345678999m"}}),
        ("discardAdvice", "/v1/hands/discards", {"hand": {"tiles": "11122233344456m"}}),
        ("scoreHand", "/v1/hands/score", {"hand": {"tiles": "11122233344455m"}, "win": {"tile": "5m"}}),
        ("settleRound", "/v1/rounds/settle", {"dealer": 0, "events": []}),
    ):
        seen(op, client.post(path, json=body, headers=HEADERS))
        seen(op, client.post(path, json=body))
        seen(op, client.post(path, data=b"{", content_type="application/json", headers=HEADERS))
        seen(op, client.post(path, data=b"{}", content_type="text/plain", headers=HEADERS))
        seen(op, client.post(path, data=big, content_type="application/json", headers=HEADERS))
        seen(op, client.post(path, json={"bogus": 1}, headers=HEADERS))
    seen("getRulesets", client.get("/v1/rulesets", headers=HEADERS))
    seen("getRulesets", client.get("/v1/rulesets"))

    idem = str(uuid.uuid4())
    t = seen(
        "createTable", client.post("/v1/tables", json=PLAYERS, headers={**HEADERS, "Idempotency-Key": idem})
    ).get_json()
    seen("createTable", client.post("/v1/tables", json=PLAYERS))
    seen("createTable", client.post("/v1/tables", json={"players": []}, headers=HEADERS))
    seen("createTable", client.post("/v1/tables", data=b"{", content_type="application/json", headers=HEADERS))
    seen("createTable", client.post("/v1/tables", data=b"{}", content_type="text/plain", headers=HEADERS))
    seen("createTable", client.post("/v1/tables", data=big, content_type="application/json", headers=HEADERS))
    seen("createTable", client.post("/v1/tables", json={"players": ["x", "b", "c", "d"]},
                                    headers={**HEADERS, "Idempotency-Key": idem}))  # another body: 422
    other = client.post("/v1/tables", json=PLAYERS, headers=HEADERS).get_json()
    url, write, read = f"/v1/tables/{t['id']}", {"Authorization": f"Bearer {t['token']}"}, \
        {"Authorization": f"Bearer {t['read_token']}"}

    for body in ({"type": "round_start"}, {"type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"}):
        seen("postEvent", client.post(url + "/events", json=body, headers=write))
    seen("postEvent", client.post(url + "/events", json={"type": "round_end"}))
    seen("postEvent", client.post(url + "/events", json={"type": "round_end"}, headers=read))
    seen("postEvent", client.post("/v1/tables/0123456789abcdef/events", json={"type": "round_end"}, headers=write))
    seen("postEvent", client.post(url + "/events", json={"type": "round_end"}, headers={"X-API-Key": OTHER_KEY}))
    seen("postEvent", client.post(url + "/events", json={"type": "bogus"}, headers=write))
    seen("postEvent", client.post(url + "/events", json={"type": "round_end"}, headers={**write, "If-Match": '"1"'}))
    seen("postEvent", client.post(url + "/events", data=b"{", content_type="application/json", headers=write))
    seen("postEvent", client.post(url + "/events", data=b"{}", content_type="text/plain", headers=write))
    seen("postEvent", client.post(url + "/events", data=big, content_type="application/json", headers=write))
    seen("voidEvent", client.post(url + "/events/2/void", headers=write))
    seen("voidEvent", client.post(url + "/events/2/void", headers=write))          # already voided: 409
    seen("voidEvent", client.post(url + "/events/9/void", headers=write))          # no such event: 404
    seen("voidEvent", client.post(url + "/events/1/void", headers={**write, "If-Match": '"1"'}))
    seen("voidEvent", client.post(url + "/events/1/void", headers={**write, "If-Match": "x"}))
    seen("voidEvent", client.post(url + "/events/1/void"))
    seen("voidEvent", client.post(url + "/events/1/void", headers=read))
    for _ in range(3):  # (refused: not counted)
        seen("voidEvent", client.post(url + "/events/1/void", headers=write))      # the table's 1 void: 429
    seen("postEvent", client.post(url + "/events", json={"type": "round_end"}, headers=write))  # the 4th record
    seen(
        "postEvent", client.post(url + "/events", json={"type": "round_start"}, headers=write)
    )  # full (room kept for corrections): 409
    o_url, o_write = f"/v1/tables/{other['id']}", {"Authorization": f"Bearer {other['token']}"}
    for body in ({"type": "round_start"}, {"type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"},
                 {"type": "kong", "seat": 1, "kind": "concealed", "tile": "2m"}, {"type": "round_end"}):
        seen("postEvent", client.post(o_url + "/events", json=body, headers=o_write))  # the 4th: 429 (3 a minute)

    seen("getTable", client.get(url, headers=read))
    seen("getTable", client.get(url, headers={**read, "If-None-Match": '"4"'}))
    seen("getTable", client.get(url))
    seen("getTable", client.get("/v1/tables/0123456789abcdef", headers=read))
    seen("getTable", client.get(url, headers={"X-API-Key": OTHER_KEY}))  # another key's table: 404
    seen("listEvents", client.get(url + "/events", headers=read))
    seen("listEvents", client.get(url + "/events?limit=0", headers=read))
    seen("listEvents", client.get(url + "/events", headers={"Authorization": "Bearer nope"}))
    seen("listEvents", client.get("/v1/tables/0123456789abcdef/events", headers=read))
    seen("listEvents", client.get(url + "/events", headers={"X-API-Key": OTHER_KEY}))  # another key's: 404
    for _ in range(4):
        seen("getTable", client.get(url, headers=read))                            # the table's 6 reads: 429
    seen("listEvents", client.get(url + "/events", headers=read))
    seen("listTables", client.get("/v1/tables", headers=HEADERS))
    seen("listTables", client.get("/v1/tables"))
    seen("listTables", client.get("/v1/tables?limit=0", headers=HEADERS))
    seen(
        "deleteTable",
        client.delete(f"/v1/tables/{other['id']}", headers={"Authorization": f"Bearer {other['read_token']}"}),
    )
    seen("deleteTable", client.delete(f"/v1/tables/{other['id']}"))
    seen(
        "deleteTable", client.delete(f"/v1/tables/{other['id']}", headers={"Authorization": f"Bearer {other['token']}"})
    )
    seen(
        "deleteTable", client.delete(f"/v1/tables/{other['id']}", headers={"Authorization": f"Bearer {other['token']}"})
    )
    seen("deleteTable", client.delete(url, headers=write))
    seen("createTable", client.post("/v1/tables", json=PLAYERS, headers={**HEADERS, "Idempotency-Key": idem}))
    for _ in range(2):
        seen("createTable", client.post("/v1/tables", json=PLAYERS, headers=HEADERS))  # 8 an hour: 429
    seen("healthz", client.get("/healthz"))
    seen("readyz", client.get("/readyz"))
    seen("metrics", client.get("/metrics"))

    # the outcomes above did happen (the scenario is not silently weaker than it reads)
    assert seen.by_operation["postEvent"] >= {201, 400, 401, 403, 404, 409, 412, 413, 415, 422, 429}
    assert seen.by_operation["voidEvent"] >= {201, 401, 403, 404, 409, 412, 422, 429}
    assert seen.by_operation["getTable"] >= {200, 304, 401, 404, 429}
    assert seen.by_operation["listEvents"] >= {200, 401, 404, 422, 429}
    assert seen.by_operation["createTable"] >= {201, 400, 401, 409, 413, 415, 422, 429}
    assert seen.by_operation["deleteTable"] >= {204, 401, 403, 404}
    assert seen.by_operation["listTables"] >= {200, 401, 422}
    assert seen.by_operation["settleRound"] >= {200, 400, 401, 413, 415, 422}


def test_store_trouble_is_documented(free_port):
    dead = create_app({"TESTING": True, "REDIS_URL": f"redis://127.0.0.1:{free_port}/0"}).test_client()
    seen = Seen()
    seen("getTable", dead.get("/v1/tables/0123456789abcdef", headers={"Authorization": "Bearer x"}))
    seen("createTable", dead.post("/v1/tables", json=PLAYERS))
    seen("readyz", dead.get("/readyz"))
    assert seen.by_operation == {"getTable": {503}, "createTable": {503}, "readyz": {503}}
    no_keys = create_app({"TESTING": True, "REDIS_URL": f"redis://127.0.0.1:{free_port}/0"}).test_client()
    seen("listTables", no_keys.get("/v1/tables"))
    assert seen.by_operation["listTables"] == {404}
