"""Bounds on what a table costs, on a real Redis.

* a full Redis (``maxmemory``, ``noeviction``) answers 507 problem+json and
  writes nothing (no half write); a delete still works and frees room;
* a refused void reads only the target's round, not the whole log;
* ``GET /v1/tables/{id}`` lists the ended rounds a page at a time.
"""

from __future__ import annotations

import uuid

import pytest

from service.api import create_app
from service.config import NO_LIMITS
from service.store import keys
from service.store.errors import Conflict, EventNotFound
from service.store.table_store import TableStore
from tests.loopback import cycle

PLAYERS = ["东", "南", "西", "北"]
PROBLEM = "application/problem+json"


@pytest.fixture
def http(redis_url):
    # (rate limits off: 300 events to one table; the limits have their own tests)
    return create_app({"TESTING": True, "REDIS_URL": redis_url, **{var: 0 for var in NO_LIMITS}}).test_client()


def _table(http, **headers) -> tuple[dict, dict]:
    r = http.post("/v1/tables", json={"players": PLAYERS}, headers=headers)
    assert r.status_code == 201, r.get_data(as_text=True)
    t = r.get_json()
    return t, {"Authorization": f"Bearer {t['token']}"}


def _post(http, t, auth, event, **headers):
    return http.post(f"/v1/tables/{t['id']}/events", json=event, headers={**auth, **headers})


# -- a full Redis --------------------------------------------------------------------------------
def test_a_full_redis_is_507_and_writes_nothing(http, redis_client):
    t, auth = _table(http)
    other, other_auth = _table(http)
    assert _post(http, t, auth, {"type": "round_start"}).status_code == 201
    assert _post(http, t, auth, {"type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"}).status_code == 201
    before = {k: redis_client.dump(k) for k in redis_client.keys("{t:" + t["id"] + "}*")}
    redis_client.config_set("maxmemory-policy", "noeviction")
    redis_client.config_set("maxmemory", "1")  # every write that adds data is refused from now on
    try:
        refused = [
            _post(http, t, auth, {"type": "kong", "seat": 1, "kind": "concealed", "tile": "2m"}),
            _post(http, t, auth, {"type": "round_end"}, **{"Idempotency-Key": "k1"}),
            http.post(f"/v1/tables/{t['id']}/events/2/void", headers=auth),
            http.post("/v1/tables", json={"players": PLAYERS}),
            http.post("/v1/tables", json={"players": PLAYERS}, headers={"Idempotency-Key": str(uuid.uuid4())}),
        ]
        for r in refused:
            assert r.status_code == 507 and r.mimetype == PROBLEM, r.get_data(as_text=True)
            assert r.get_json()["code"] == "store_full" and "Retry-After" not in r.headers
        assert {k: redis_client.dump(k) for k in redis_client.keys("{t:" + t["id"] + "}*")} == before  # no half write
        assert len(redis_client.keys("{t:*}:meta")) == 2
        assert http.get(f"/v1/tables/{t['id']}", headers=auth).status_code == 200  # reads still work
        # deleting still works (and frees room)
        assert http.delete(f"/v1/tables/{other['id']}", headers=other_auth).status_code == 204
    finally:
        redis_client.config_set("maxmemory", "0")
    assert TableStore(redis_client).check(t["id"])["ok"]
    assert _post(http, t, auth, {"type": "round_end"}, **{"Idempotency-Key": "k1"}).status_code == 201


# -- a refused void reads little ------------------------------------------------------------------
def _bytes_sent(redis_client, action) -> int:
    """What Redis sent its clients while ``action`` ran (nothing else talks to it meanwhile)."""
    redis_client.config_resetstat()
    action()
    return redis_client.info("stats")["total_net_output_bytes"]


def test_a_refused_void_reads_only_its_round_not_the_whole_log(redis_client):
    store = TableStore(redis_client)
    t = store.create(PLAYERS, None).id
    events = cycle()
    for _ in range(1200):  # 300 rounds
        store.append(t, next(events))
    log_bytes = sum(map(len, redis_client.lrange(keys.log(t), 0, -1)))
    store.append(t, {"type": "round_start"})                                                 # 1201
    store.append(t, {"type": "kong", "seat": 2, "kind": "direct", "tile": "3s", "from": 0})   # 1202
    store.append(t, {"type": "hu", "from": 2, "tile": "9p", "after_kong": True,
                     "winners": [{"seat": 3, "fan": 1}]})                                     # 1203: 杠上炮

    def refuse(target: int, code: str):
        def run():
            with pytest.raises(Conflict) as exc:
                store.void(t, target)
            assert exc.value.code == code
        return run

    sent = {"depended on": _bytes_sent(redis_client, refuse(1202, "void_conflict"))}
    store.void(t, 1203)                                                                        # 1204
    sent["a void record"] = _bytes_sent(redis_client, refuse(1204, "not_voidable"))
    sent["already voided"] = _bytes_sent(redis_client, refuse(1203, "already_voided"))
    sent["out of range"] = _bytes_sent(redis_client, lambda: pytest.raises(EventNotFound, store.void, t, 1205))
    # (a refusal reads the state, ~2 KB, and the target's round; the log is ~46 KB, stored compactly)
    assert all(n < log_bytes / 10 for n in sent.values()), (log_bytes, sent)
    # in an earlier round: that round's records up to the one that depends on it, and the summaries
    # of the rounds after it (their balances are taken out of the table's; ~85 bytes each with their
    # facts), never their records
    old_round = _bytes_sent(redis_client, refuse(597, "void_conflict"))  # round 150's round_start
    assert old_round < log_bytes / 2, (log_bytes, old_round)
    assert store.check(t)["ok"]


def test_voids_in_earlier_rounds_refold_from_there_and_agree_with_the_whole_fold(redis_client):
    store = TableStore(redis_client)
    t = store.create(PLAYERS, "normal").id
    events = cycle()
    for _ in range(40):
        store.append(t, next(events))
    for target in (38, 22, 23, 3, 2):  # kongs of rounds 10, 6 and 1 (the direct kong first, then its pair)
        written = store.void(t, target)
        assert written.voided == target
        report = store.check(t)
        assert report["ok"] and report["balances"] == written.balances
    view = store.get(t)
    assert [r["number"] for r in view["rounds"]] == list(range(1, 11))
    assert view["rounds"][0]["deltas"] == [0, 0, 0, 0]


def test_voiding_the_latest_round_start_reopens_the_round_before_it_as_the_fold_does(redis_client):
    store = TableStore(redis_client)
    t = store.create(PLAYERS, "xuezhan").id
    store.append(t, {"type": "round_start"})
    store.append(t, {"type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"})
    store.append(t, {"type": "round_end"})
    store.append(t, {"type": "round_start"})                                           # seq 4
    store.append(t, {"type": "kong", "seat": 1, "kind": "concealed", "tile": "2m"})  # seq 5
    store.void(t, 5)
    written = store.void(t, 4)  # round 2 is gone: round 1, ended, is the latest round again
    assert written.round is not None and (written.round["number"], written.round["status"]) == (1, "ended")
    assert written.balances == [36, -12, -12, -12]
    report = store.check(t)
    assert report["ok"] and report["balances"] == written.balances
    view = store.get(t)
    assert view["round"] == written.round and [r["number"] for r in view["rounds"]] == [1]
    store.append(t, {"type": "round_start"})  # and the next round is round 2 again
    assert store.get(t)["round"]["number"] == 2 and store.check(t)["ok"]


# -- the table view pages its ended rounds ---------------------------------------------------------
def test_the_table_view_pages_its_ended_rounds(http):
    t, auth = _table(http)
    for _ in range(150):
        _post(http, t, auth, {"type": "round_start"})
        _post(http, t, auth, {"type": "round_end"})
    url = f"/v1/tables/{t['id']}"
    whole = http.get(url, headers=auth).get_json()
    assert [r["number"] for r in whole["rounds"]] == list(range(1, 101)) and whole["rounds_next"] == 100
    page = http.get(url + "?rounds_after=100", headers=auth).get_json()
    assert [r["number"] for r in page["rounds"]] == list(range(101, 151)) and page["rounds_next"] is None
    page = http.get(url + "?rounds_after=147&rounds_limit=2", headers=auth).get_json()
    assert [r["number"] for r in page["rounds"]] == [148, 149] and page["rounds_next"] == 149
    assert {k: v for k, v in page.items() if k not in ("rounds", "rounds_next")} == {
        k: v for k, v in whole.items() if k not in ("rounds", "rounds_next")}
    assert http.get(url + "?rounds_after=150", headers=auth).get_json()["rounds"] == []
    for q in ("?rounds_limit=0", "?rounds_limit=501", "?rounds_after=-1", "?rounds_after=x"):
        r = http.get(url + q, headers=auth)
        assert r.status_code == 422 and r.mimetype == PROBLEM and r.get_json()["errors"], q


def test_the_openapi_document_lists_507_for_every_write():
    from service.api.app import openapi_dict

    paths = openapi_dict()["paths"]
    for path, method in (("/v1/tables", "post"), ("/v1/tables/{table_id}/events", "post"),
                         ("/v1/tables/{table_id}/events/{seq}/void", "post")):
        assert "507" in paths[path][method]["responses"], path
    query = {p["name"] for p in paths["/v1/tables/{table_id}"]["get"]["parameters"] if p["in"] == "query"}
    assert query == {"rounds_after", "rounds_limit"}
