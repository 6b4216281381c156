"""API keys (docs/api.md "API keys"): X-API-Key on /v1/, 401 problems, the caller's tables,
creation keys scoped to the key, per-key metrics, per-key limits, `api-key new`, only digests kept."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from service.api import create_app
from service.config import ApiKeys, ConfigError, Settings, hash_api_key
from tests.problems import problem

ROOT = Path(__file__).resolve().parent.parent
ACME = "acme-" + "a" * 40
BETA = "beta-" + "b" * 40
KEYS = f"acme={ACME},beta={BETA}"
PLAYERS = {"players": ["东", "南", "西", "北"]}
TING = {"hand": {"tiles": "1112345678999m"}}
pytestmark = pytest.mark.app(API_KEYS=KEYS)


def key(k: str) -> dict:
    return {"X-API-Key": k}


# -- configuration -------------------------------------------------------------------------
def test_only_digests_are_kept():
    keys = ApiKeys.parse(KEYS)
    assert keys.name_of(ACME) == "acme" and keys.name_of(BETA) == "beta" and keys.name_of("x" * 40) is None
    assert set(keys.names) == {hash_api_key(ACME), hash_api_key(BETA)}
    assert ACME not in repr(keys) and ACME not in repr(Settings.from_env({"API_KEYS": KEYS}))
    # a key may be given by its digest alone
    assert ApiKeys.parse(f"acme=sha256:{hash_api_key(ACME)}").name_of(ACME) == "acme"


@pytest.mark.parametrize("bad", ["acme=short", "acme", f"a b={ACME}", f"acme={ACME},acme={BETA}",
                                 f"acme={ACME},beta={ACME}", f"acme={'x' * 20} {'y' * 20}"])
def test_bad_api_keys_are_refused_without_echoing_the_key(bad):
    with pytest.raises(ConfigError) as info:
        Settings.from_env({"API_KEYS": bad})
    assert ACME not in str(info.value) and "x" * 20 not in str(info.value)


def test_per_key_limits_name_configured_keys_and_client_settings():
    keys = Settings.from_env({"API_KEYS": KEYS, "API_KEY_LIMITS": "acme:TABLES_PER_HOUR=600"}).api_keys
    assert keys.limit("acme", "tables_per_hour", 60) == 600 and keys.limit("beta", "tables_per_hour", 60) == 60
    for bad in ("nobody:TABLES_PER_HOUR=1", "acme:TABLE_EVENTS_PER_MINUTE=1", "acme:TABLES_PER_HOUR=x"):
        with pytest.raises(ConfigError):
            Settings.from_env({"API_KEYS": KEYS, "API_KEY_LIMITS": bad})


def test_api_key_new_prints_a_fresh_key_that_the_service_accepts():
    runs = [subprocess.run([sys.executable, "-m", "service", "api-key", "new", "acme"], cwd=ROOT,
                           capture_output=True, text=True, timeout=60, check=True).stdout for _ in range(2)]
    entries = [next(line.strip() for line in out.splitlines() if line.strip().startswith("acme=mk_"))
               for out in runs]
    assert entries[0] != entries[1]  # fresh each time
    fresh = entries[0].split("=", 1)[1]
    assert len(fresh) >= 32
    assert ApiKeys.parse(entries[0]).name_of(fresh) == "acme"
    digest = next(line.strip() for line in runs[0].splitlines() if "sha256:" in line)
    assert ApiKeys.parse(digest).name_of(fresh) == "acme"
    bad = subprocess.run([sys.executable, "-m", "service", "api-key", "new", "no spaces"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2


# -- the check ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("method", "path", "body"), [
    ("post", "/v1/hands/ting", TING), ("get", "/v1/rulesets", None), ("post", "/v1/tables", PLAYERS),
    ("get", "/v1/tables", None), ("post", "/v1/rounds/settle", {"dealer": 0, "events": []}),
])
def test_v1_calls_need_a_valid_key(client, method, path, body):
    kwargs = {"json": body} if body is not None else {}
    r = getattr(client, method)(path, **kwargs)
    assert problem(r, 401, "api_key_required")["request_id"] == r.headers["X-Request-ID"]
    assert r.headers["WWW-Authenticate"] == 'ApiKey header="X-API-Key"'
    problem(getattr(client, method)(path, headers=key("x" * 40), **kwargs), 401, "api_key_invalid")
    assert getattr(client, method)(path, headers=key(ACME), **kwargs).status_code in (200, 201)


def test_public_endpoints_need_no_key(client):
    for path in ("/healthz", "/readyz", "/metrics", "/openapi.json"):
        assert client.get(path).status_code == 200, path


def test_a_table_token_stands_in_for_the_key(client):
    t = client.post("/v1/tables", json=PLAYERS, headers=key(ACME)).get_json()
    phone = {"Authorization": f"Bearer {t['token']}"}
    assert client.post(f"/v1/tables/{t['id']}/events", json={"type": "round_start"}, headers=phone).status_code == 201
    assert (
        client.get(f"/v1/tables/{t['id']}", headers={"Authorization": f"Bearer {t['read_token']}"}).status_code == 200
    )
    # no token and no key: the key is asked for; a wrong key with a token is still refused
    problem(client.get(f"/v1/tables/{t['id']}"), 401, "api_key_required")
    problem(client.get(f"/v1/tables/{t['id']}", headers={**phone, **key("x" * 40)}), 401, "api_key_invalid")
    # a token does not open the stateless endpoints
    problem(client.post("/v1/hands/ting", json=TING, headers=phone), 401, "api_key_required")


def test_without_api_keys_the_service_is_open_and_has_no_table_list(redis_url):
    c = create_app({"TESTING": True, "REDIS_URL": redis_url, "TABLES_PER_HOUR": 0}).test_client()
    assert c.post("/v1/hands/ting", json=TING).status_code == 200
    assert c.post("/v1/tables", json=PLAYERS).status_code == 201
    problem(c.get("/v1/tables"), 404, "not_found")
    problem(c.get("/v1/tables", headers=key(ACME)), 404, "not_found")


# -- the caller's tables --------------------------------------------------------------------------
def test_list_is_the_callers_tables_newest_first_in_pages(client):
    mine = [client.post("/v1/tables", json={"players": [f"p{i}", "b", "c", "d"]}, headers=key(ACME)).get_json()
            for i in range(5)]
    theirs = client.post("/v1/tables", json=PLAYERS, headers=key(BETA)).get_json()
    auth = {"Authorization": f"Bearer {mine[1]['token']}"}
    client.post(f"/v1/tables/{mine[1]['id']}/events", json={"type": "round_start"}, headers=auth)
    client.post(f"/v1/tables/{mine[1]['id']}/events",
                json={"type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"}, headers=auth)
    client.delete(f"/v1/tables/{mine[3]['id']}", headers={"Authorization": f"Bearer {mine[3]['token']}"})

    seen, after, pages = [], None, 0
    while True:
        r = client.get("/v1/tables", query_string={"limit": 2, **({"after": after} if after else {})},
                       headers=key(ACME))
        assert r.status_code == 200, r.get_data(as_text=True)
        page = r.get_json()
        assert len(page["tables"]) <= 2
        seen.extend(page["tables"])
        pages += 1
        after = page["next"]
        if after is None:
            break
    expected = [t["id"] for t in reversed(mine) if t is not mine[3]]
    assert [t["id"] for t in seen] == expected and pages == 2
    row = next(t for t in seen if t["id"] == mine[1]["id"])
    assert row["players"] == ["p1", "b", "c", "d"] and row["version"] == 2
    assert row["balances"] == [36, -12, -12, -12] and row["created"].endswith("Z")
    assert [t["id"] for t in client.get("/v1/tables", headers=key(BETA)).get_json()["tables"]] == [theirs["id"]]
    for bad in ({"limit": 0}, {"limit": 101}, {"after": "yesterday"}):
        assert problem(client.get("/v1/tables", query_string=bad, headers=key(ACME)), 422, "invalid_input")


def test_creation_keys_are_scoped_to_the_api_key(client):
    idem = str(uuid.uuid4())
    a1 = client.post("/v1/tables", json=PLAYERS, headers={**key(ACME), "Idempotency-Key": idem})
    a2 = client.post("/v1/tables", json=PLAYERS, headers={**key(ACME), "Idempotency-Key": idem})
    b1 = client.post("/v1/tables", json=PLAYERS, headers={**key(BETA), "Idempotency-Key": idem})
    assert (a1.status_code, a2.status_code, b1.status_code) == (201, 201, 201)
    assert a2.headers.get("Idempotent-Replayed") == "true" and a2.get_json() == a1.get_json()
    assert b1.get_json()["id"] != a1.get_json()["id"] and "Idempotent-Replayed" not in b1.headers
    assert [t["id"] for t in client.get("/v1/tables", headers=key(BETA)).get_json()["tables"]] == [b1.get_json()["id"]]


# -- metrics and limits per key ------------------------------------------------------------------
def test_metrics_count_per_key_name_only(client):
    client.post("/v1/hands/ting", json=TING, headers=key(ACME))
    client.post("/v1/hands/ting", json=TING, headers=key("x" * 40))
    text = client.get("/metrics").get_data(as_text=True)
    lines = [line for line in text.splitlines() if line.startswith("mahjong_api_key_requests_total{")]
    assert any('api_key="acme"' in line and 'endpoint="/v1/hands/ting"' in line and 'status="200"' in line
               for line in lines), lines
    assert any('api_key="-"' in line and 'status="401"' in line for line in lines), lines
    labels = {line.split('api_key="')[1].split('"')[0] for line in lines}
    # bounded by the configurations (of every app this process made): names, never a key given
    assert "-" in labels and not labels & {ACME, "x" * 40} and all(len(label) <= 64 for label in labels)
    assert ACME not in text and "x" * 40 not in text


def test_limits_count_per_key_and_can_be_set_per_key(redis_url):
    c = create_app({"TESTING": True, "REDIS_URL": redis_url, "API_KEYS": KEYS, "TABLES_PER_HOUR": 2,
                    "API_KEY_LIMITS": "beta:TABLES_PER_HOUR=3"}).test_client()
    statuses = {name: [c.post("/v1/tables", json=PLAYERS, headers=key(k)).status_code for _ in range(4)]
                for name, k in (("acme", ACME), ("beta", BETA))}
    assert statuses == {"acme": [201, 201, 429, 429], "beta": [201, 201, 201, 429]}
