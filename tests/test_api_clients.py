"""Who the client is: trusted proxies (TRUSTED_PROXIES, PROXY_HEADER) and CORS (CORS_ORIGINS)."""

from __future__ import annotations

import pytest

from service.api import create_app
from service.api.callers import client_for_forwarded
from service.config import ConfigError, Settings, TrustedProxies

PLAYERS = {"players": ["a", "b", "c", "d"]}


def creations(redis_url, *, per_hour=1, **config):
    """A client whose creation limit shows which address the service saw (1 table per address)."""
    return create_app({"TESTING": True, "REDIS_URL": redis_url, "TABLES_PER_HOUR": per_hour, **config}).test_client()


def status(c, peer: str, **headers) -> int:
    return c.post("/v1/tables", json=PLAYERS, headers=headers, environ_base={"REMOTE_ADDR": peer}).status_code


def test_without_trusted_proxies_forwarding_headers_are_ignored(redis_url):
    c = creations(redis_url)
    assert status(c, "10.0.0.1", **{"X-Forwarded-For": "1.1.1.1"}) == 201
    # a client cannot escape its limit by claiming another address
    assert status(c, "10.0.0.1", **{"X-Forwarded-For": "2.2.2.2"}) == 429
    assert status(c, "10.0.0.1", Forwarded="for=3.3.3.3") == 429


def test_a_count_of_proxies_uses_proxyfix(redis_url):
    c = creations(redis_url, TRUSTED_PROXIES="1")
    assert status(c, "10.0.0.1", **{"X-Forwarded-For": "1.1.1.1"}) == 201
    assert status(c, "10.0.0.1", **{"X-Forwarded-For": "2.2.2.2"}) == 201  # another client behind the proxy
    assert status(c, "10.0.0.9", **{"X-Forwarded-For": "1.1.1.1"}) == 429  # the same client again
    # a spoofed first hop does not help: the proxy appended the real address last
    assert status(c, "10.0.0.1", **{"X-Forwarded-For": "9.9.9.9, 1.1.1.1"}) == 429


def test_trusted_cidrs_skip_their_own_hops(redis_url):
    c = creations(redis_url, TRUSTED_PROXIES="10.0.0.0/8, 192.168.1.1")
    assert status(c, "10.0.0.1", **{"X-Forwarded-For": "7.7.7.7, 192.168.1.1"}) == 201
    assert status(c, "10.2.3.4", **{"X-Forwarded-For": "7.7.7.7"}) == 429  # the same client
    assert status(c, "10.0.0.1", **{"X-Forwarded-For": "6.6.6.6, 7.7.7.7"}) == 429  # its address is the last untrusted
    # from a peer that is not a trusted proxy the header is ignored: the peer is the client
    assert status(c, "5.5.5.5", **{"X-Forwarded-For": "4.4.4.4"}) == 201
    assert status(c, "5.5.5.5", **{"X-Forwarded-For": "3.3.3.3"}) == 429


def test_the_forwarded_header_when_chosen(redis_url):
    c = creations(redis_url, TRUSTED_PROXIES="10.0.0.0/8", PROXY_HEADER="forwarded")
    assert status(c, "10.0.0.1", Forwarded='for="[2001:db8::1]:4711";proto=https') == 201
    assert status(c, "10.0.0.1", Forwarded='for="[2001:db8::1]"') == 429  # the same client, without a port
    assert status(c, "10.0.0.1", Forwarded="for=192.0.2.1:8080") == 201
    assert status(c, "10.0.0.1", Forwarded="for=192.0.2.1, for=10.0.0.7") == 429  # a trusted hop is skipped
    # X-Forwarded-For is then ignored (a proxy that sets one header does not strip the other)
    assert status(c, "10.0.0.1", **{"X-Forwarded-For": "8.8.8.8"}) == 201
    assert status(c, "10.0.0.1", **{"X-Forwarded-For": "8.8.4.4"}) == 429


def test_forwarded_parsing():
    assert client_for_forwarded('for=192.0.2.43, for="[2001:db8:cafe::17]:4711"') == ["192.0.2.43", "2001:db8:cafe::17"]
    assert client_for_forwarded("proto=https;for=198.51.100.17:8080;by=203.0.113.60") == ["198.51.100.17"]
    assert client_for_forwarded("by=1.2.3.4") == []


@pytest.mark.parametrize("bad", ["0", "11", "10.0.0.0/33", "proxy.example", "1,2"])
def test_bad_trusted_proxies_are_refused(bad):
    with pytest.raises(ConfigError):
        Settings.from_env({"TRUSTED_PROXIES": bad})


def test_proxy_settings_parse():
    assert TrustedProxies.parse("2").count == 2
    assert not TrustedProxies.parse("")
    with pytest.raises(ConfigError):
        TrustedProxies.parse("1", "x-real-ip")


# -- CORS -----------------------------------------------------------------------------------------
ORIGIN = "https://scores.example"


@pytest.fixture
def cors(redis_url):
    return create_app({"TESTING": True, "REDIS_URL": redis_url, "CORS_ORIGINS": ORIGIN, "TABLES_PER_HOUR": 0,
                       "API_KEYS": "acme=" + "k" * 40}).test_client()


def test_preflight_allows_the_api_headers(cors):
    r = cors.options("/v1/tables/0123456789abcdef/events", headers={
        "Origin": ORIGIN, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, if-match, idempotency-key, x-api-key, "
                                          "x-request-id, if-none-match"})
    assert r.status_code == 200  # a preflight needs no API key
    assert r.headers["Access-Control-Allow-Origin"] == ORIGIN
    allowed = {h.strip().lower() for h in r.headers["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "content-type", "if-match", "if-none-match", "idempotency-key", "x-api-key",
            "x-request-id"} <= allowed
    assert "POST" in r.headers["Access-Control-Allow-Methods"]


def test_responses_expose_the_headers_a_client_needs(cors):
    r = cors.post("/v1/tables", json=PLAYERS, headers={"Origin": ORIGIN, "X-API-Key": "k" * 40})
    assert r.status_code == 201 and r.headers["Access-Control-Allow-Origin"] == ORIGIN
    exposed = {h.strip() for h in r.headers["Access-Control-Expose-Headers"].split(",")}
    assert {"ETag", "Location", "Retry-After", "X-Request-ID", "Idempotent-Replayed", "X-RateLimit-Limit",
            "X-RateLimit-Remaining", "X-RateLimit-Reset"} <= exposed
    # errors too (a browser must be able to read the problem)
    r = cors.post("/v1/tables", json=PLAYERS, headers={"Origin": ORIGIN})
    assert r.status_code == 401 and r.headers["Access-Control-Allow-Origin"] == ORIGIN


def test_other_origins_get_no_cors_headers(cors, redis_url):
    r = cors.options("/v1/hands/ting", headers={"Origin": "https://evil.example",
                                                "Access-Control-Request-Method": "POST"})
    assert "Access-Control-Allow-Origin" not in r.headers
    plain = create_app({"TESTING": True, "REDIS_URL": redis_url}).test_client()
    r = plain.post("/v1/hands/ting", json={"hand": {"tiles": "1112345678999m"}}, headers={"Origin": ORIGIN})
    assert r.status_code == 200 and "Access-Control-Allow-Origin" not in r.headers


@pytest.mark.parametrize("bad", ["scores.example", "https://scores.example/path", "ftp://x"])
def test_bad_origins_are_refused(bad):
    with pytest.raises(ConfigError):
        Settings.from_env({"CORS_ORIGINS": bad})
