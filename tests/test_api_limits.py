"""Limits: tables per client per hour (429), events per table, body size, page size, idle expiry."""

from __future__ import annotations

import pytest

from service.api.app import create_app
from tests.problems import problem

PLAYERS = {"players": ["a", "b", "c", "d"]}


def make_client(redis_url, **config):
    return create_app({"TESTING": True, "REDIS_URL": redis_url, **config}).test_client()


def test_tables_per_hour_is_enforced_with_retry_after(redis_url):
    c = make_client(redis_url, TABLES_PER_HOUR=3)
    created = [c.post("/v1/tables", json=PLAYERS) for _ in range(3)]
    assert [r.status_code for r in created] == [201] * 3
    assert "Retry-After" not in created[0].headers and created[2].headers["X-RateLimit-Remaining"] == "0"
    r = c.post("/v1/tables", json=PLAYERS)
    assert r.status_code == 429 and r.mimetype == "application/problem+json"
    assert r.get_json()["code"] == "too_many_requests"
    assert 0 < int(r.headers["Retry-After"]) <= 3600
    # the limit is per client address and only on creation
    other = c.post("/v1/tables", json=PLAYERS, environ_base={"REMOTE_ADDR": "10.9.8.7"})
    assert other.status_code == 201
    assert c.get("/healthz").status_code == 200


def test_no_limit_when_zero(redis_url):
    c = make_client(redis_url, TABLES_PER_HOUR=0)
    assert all(c.post("/v1/tables", json=PLAYERS).status_code == 201 for _ in range(5))


def _table(c):
    t = c.post("/v1/tables", json=PLAYERS).get_json()
    return t["id"], {"Authorization": "Bearer " + t["token"]}


def test_a_full_table_refuses_events_but_takes_corrections(redis_url):
    """MAX_TABLE_EVENTS keeps room for corrections: ordinary events stop short of it (409 table_full),
    while voids and a round's end may fill the last of it; a refused round end is the rules' 422."""
    c = make_client(redis_url, MAX_TABLE_EVENTS=6)  # (room kept: half of it, at most 16)
    tid, auth = _table(c)
    url = f"/v1/tables/{tid}/events"
    ok = [c.post(url, json=ev, headers=auth).status_code for ev in (
        {"type": "round_start"},
        {"type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"},
        {"type": "kong", "seat": 1, "kind": "concealed", "tile": "2m"},
    )]
    assert ok == [201, 201, 201]
    r = c.post(url, json={"type": "kong", "seat": 2, "kind": "concealed", "tile": "3m"}, headers=auth)
    assert r.status_code == 409 and r.get_json()["code"] == "table_full" and r.get_json()["version"] == 3
    assert c.post(f"{url}/3/void", headers=auth).status_code == 201                   # the last mistake: 4
    assert c.post(url, json={"type": "round_end"}, headers=auth).status_code == 201   # the round's end: 5
    r = c.post(url, json={"type": "round_end"}, headers=auth)                         # the rules say no first
    assert r.status_code == 422 and r.get_json()["code"] == "round_ended"
    assert c.post(f"{url}/2/void", headers=auth).status_code == 201                   # 6: full
    r = c.post(f"{url}/5/void", headers=auth)  # (reopening the round: the rules allow it, the room does not)
    assert r.status_code == 409 and r.get_json()["code"] == "table_full"
    assert c.get(f"/v1/tables/{tid}", headers=auth).get_json()["version"] == 6


def test_idle_tables_expire(redis_url, redis_client):
    c = make_client(redis_url, TABLE_TTL=120)
    tid, auth = _table(c)
    c.post(f"/v1/tables/{tid}/events", json={"type": "round_start"}, headers=auth)
    table_keys = redis_client.keys("{t:" + tid + "}*")
    assert table_keys and all(0 < redis_client.ttl(k) <= 120 for k in table_keys)


def test_page_size_is_bounded(redis_url):
    c = make_client(redis_url)
    tid, auth = _table(c)
    assert c.get(f"/v1/tables/{tid}/events?limit=500", headers=auth).status_code == 200
    r = c.get(f"/v1/tables/{tid}/events?limit=501", headers=auth)
    assert r.status_code == 422 and "query.limit" in r.get_json()["errors"]


@pytest.mark.parametrize("path", ["/v1/tables", "/v1/hands/ting"])
def test_body_size_is_bounded(redis_url, path):
    c = make_client(redis_url)
    r = c.post(path, data=b'{"players": "' + b"x" * (65 * 1024) + b'"}', content_type="application/json")
    assert r.status_code == 413 and r.mimetype == "application/problem+json"


# -- write and read limits per table and per client ---------------------------------
OFF = {var: 0 for var in ("TABLES_PER_HOUR", "CLIENT_EVENTS_PER_MINUTE", "CLIENT_VOIDS_PER_MINUTE",
                          "CLIENT_READS_PER_MINUTE", "TABLE_EVENTS_PER_MINUTE", "TABLE_VOIDS_PER_MINUTE",
                          "TABLE_READS_PER_MINUTE")}
KONGS = [{"type": "kong", "seat": i % 4, "kind": "concealed", "tile": f"{i % 9 + 1}{'mps'[i // 9]}"} for i in range(12)]


def limited(redis_url, **limits):
    return make_client(redis_url, **{**OFF, **limits})


def refused(r, per: str) -> None:
    assert r.status_code == 429 and r.mimetype == "application/problem+json", r.get_data(as_text=True)
    body = r.get_json()
    assert body["code"] == "too_many_requests" and per in body["detail"]
    # (a sliding window: until the weighted count lets one more in, at most two windows away)
    assert 0 < int(r.headers["Retry-After"]) <= 120


def test_events_per_table(redis_url):
    c = limited(redis_url, TABLE_EVENTS_PER_MINUTE=3)
    (tid, auth), (other, other_auth) = _table(c), _table(c)
    url = f"/v1/tables/{tid}/events"
    ok = [c.post(url, json=ev, headers=auth).status_code for ev in [{"type": "round_start"}, *KONGS[:2]]]
    assert ok == [201, 201, 201]
    refused(c.post(url, json=KONGS[2], headers=auth), "minute")
    assert c.get(f"/v1/tables/{tid}", headers=auth).get_json()["version"] == 3  # nothing written
    # another table of the same client is not limited by this one
    assert c.post(f"/v1/tables/{other}/events", json={"type": "round_start"}, headers=other_auth).status_code == 201


def test_a_tables_limit_counts_only_what_the_table_answered(redis_url):
    """Requests without the table's token (401/403/404) do not use up its limits."""
    c = limited(redis_url, TABLE_EVENTS_PER_MINUTE=2, TABLE_READS_PER_MINUTE=2)
    tid, auth = _table(c)
    read = {"Authorization": "Bearer not-this-tables-token"}
    for _ in range(5):
        assert c.post(f"/v1/tables/{tid}/events", json={"type": "round_start"}, headers=read).status_code == 401
        assert c.get(f"/v1/tables/{tid}", headers=read).status_code == 401
    assert c.post(f"/v1/tables/{tid}/events", json={"type": "round_start"}, headers=auth).status_code == 201
    assert c.get(f"/v1/tables/{tid}", headers=auth).status_code == 200
    assert c.get(f"/v1/tables/{tid}/events", headers=auth).status_code == 200
    refused(c.get(f"/v1/tables/{tid}", headers=auth), "minute")  # reads: the table and its events together


def test_each_stream_open_is_one_of_the_tables_reads(redis_url):
    """Opening a table's stream counts against TABLE_READS_PER_MINUTE like a read of the table: an open
    beyond the limit is a 429 problem naming the limit (so that opens, each a read of the log and a
    subscription, cannot be repeated without bound), and so is a read after the opens used the limit up.
    Opens refused without the table's token do not count (docs/api.md, rate limits)."""
    app = create_app({"TESTING": True, "REDIS_URL": redis_url, **OFF, "TABLE_READS_PER_MINUTE": 3})
    try:
        c = app.test_client()
        (tid, auth), (other, other_auth) = _table(c), _table(c)
        url = f"/v1/tables/{tid}/stream"
        assert c.get(url, headers={"Authorization": "Bearer not-this-tables-token"}).status_code == 401
        opened = [c.get(url + query, headers=auth, buffered=False) for query in ("", "", "?after=0")]
        assert [r.status_code for r in opened] == [200, 200, 200]
        for r in opened:
            r.close()
        for path in (url, url + "?after=0", f"/v1/tables/{tid}"):
            refused_read = c.get(path, headers=auth, buffered=False)
            if refused_read.status_code == 200:  # (an open stream never ends: do not read it)
                refused_read.close()
                pytest.fail(f"{path} was answered 200 beyond the table's reads")
            body = problem(refused_read, 429, "too_many_requests")
            assert body["limit"] == "table_reads" and 0 < int(refused_read.headers["Retry-After"]) <= 120
        assert app.extensions["stream_hub"].subscribers == 0  # a refused open subscribed nothing
        # another table's stream is not limited by this one's
        response = c.get(f"/v1/tables/{other}/stream", headers=other_auth, buffered=False)
        assert response.status_code == 200
        response.close()
    finally:
        hub = app.extensions.get("stream_hub")
        if hub is not None:
            hub.close()


def test_voids_per_table_and_per_client(redis_url):
    c = limited(redis_url, TABLE_VOIDS_PER_MINUTE=1, CLIENT_VOIDS_PER_MINUTE=3)
    tables = [_table(c) for _ in range(3)]
    for tid, auth in tables:
        for ev in [{"type": "round_start"}, *KONGS[:2]]:
            assert c.post(f"/v1/tables/{tid}/events", json=ev, headers=auth).status_code == 201
    (t0, a0), (t1, a1), (t2, a2) = tables
    assert c.post(f"/v1/tables/{t0}/events/3/void", headers=a0).status_code == 201
    refused(c.post(f"/v1/tables/{t0}/events/2/void", headers=a0), "minute")  # the table's one void
    assert c.post(f"/v1/tables/{t1}/events/3/void", headers=a1).status_code == 201
    # the client's three voids (every request of a client counts, refused ones included)
    refused(c.post(f"/v1/tables/{t2}/events/3/void", headers=a2), "minute")
    # ...from another address the third table can still be voided
    r = c.post(f"/v1/tables/{t2}/events/3/void", headers=a2, environ_base={"REMOTE_ADDR": "10.1.2.3"})
    assert r.status_code == 201


def test_events_and_reads_per_client(redis_url):
    c = limited(redis_url, CLIENT_EVENTS_PER_MINUTE=3, CLIENT_READS_PER_MINUTE=4)
    (t0, a0), (t1, a1) = _table(c), _table(c)
    assert c.post(f"/v1/tables/{t0}/events", json={"type": "round_start"}, headers=a0).status_code == 201
    assert c.post(f"/v1/tables/{t1}/events", json={"type": "round_start"}, headers=a1).status_code == 201
    assert c.post(f"/v1/tables/{t1}/events", json=KONGS[0], headers=a1).status_code == 201
    refused(c.post(f"/v1/tables/{t0}/events", json=KONGS[0], headers=a0), "minute")
    reads = [c.get(f"/v1/tables/{t}", headers=a).status_code for t, a in ((t0, a0), (t1, a1), (t0, a0))]
    assert reads == [200, 200, 200]
    assert c.get(f"/v1/tables/{t1}/events", headers=a1).status_code == 200
    refused(c.get(f"/v1/tables/{t0}/events", headers=a0), "minute")
    # the stateless endpoints are never limited
    assert all(c.post("/v1/hands/ting", json={"hand": {"tiles": "1112345678999m"}}).status_code == 200
               for _ in range(10))


def test_the_stateless_endpoints_make_no_redis_call_with_the_limits_on(redis_url):
    """Only the views that declare a limit are wrapped: the hand endpoints are never limited and never ask
    Redis."""
    app = create_app({"TESTING": True, "REDIS_URL": redis_url})
    c = app.test_client()
    answers = []
    assert round_trips(lambda: answers.extend(
        c.post("/v1/hands/ting", json={"hand": {"tiles": "1112345678999m"}}) for _ in range(5))) == 0
    assert all(r.status_code == 200 and "X-RateLimit-Limit" not in r.headers for r in answers)


def test_limits_are_configured_from_the_environment():
    from service.api.settings import current
    from service.config import LIMITS, ConfigError, Settings

    s = Settings.from_env({"TABLE_EVENTS_PER_MINUTE": "30", "CLIENT_READS_PER_MINUTE": "0"})
    assert (s.table_events_per_minute, s.client_reads_per_minute, s.tables_per_hour) == (30, 0, 60)
    assert current(create_app({"TESTING": True}, settings=s)).table_events_per_minute == 30
    assert set(LIMITS) == {"tables_per_hour", "client_events_per_minute", "client_voids_per_minute",
                           "client_reads_per_minute", "table_events_per_minute", "table_voids_per_minute",
                           "table_reads_per_minute", "client_batch_items_per_minute", "client_webhook_calls_per_minute",
                           "client_webhook_sends_per_minute"}
    with pytest.raises(ConfigError):
        Settings.from_env({"TABLE_VOIDS_PER_MINUTE": "-1"})


def test_rate_limit_headers_describe_the_limit_closest_to_refusing(redis_url):
    """An event counts against the client's limit and the table's: the headers show the one that refuses first
    (they showed the client's 600, "597 remaining", on the request before the table's limit refused)."""
    c = limited(redis_url, TABLE_EVENTS_PER_MINUTE=3, CLIENT_EVENTS_PER_MINUTE=600)
    tid, auth = _table(c)
    posts = [c.post(f"/v1/tables/{tid}/events", json=ev, headers=auth) for ev in [{"type": "round_start"}, *KONGS[:3]]]
    assert [r.status_code for r in posts] == [201, 201, 201, 429]
    assert [(r.headers["X-RateLimit-Limit"], r.headers["X-RateLimit-Remaining"]) for r in posts] == [
        ("3", "2"), ("3", "1"), ("3", "0"), ("3", "0")]
    # the other way round: the client's limit is the tighter one, over two tables
    c = limited(redis_url, TABLE_READS_PER_MINUTE=100, CLIENT_READS_PER_MINUTE=4)
    (t0, a0), (t1, a1) = _table(c), _table(c)
    reads = [c.get(f"/v1/tables/{t}", headers=a) for t, a in ((t0, a0), (t1, a1), (t0, a0), (t1, a1))]
    assert [(r.status_code, r.headers["X-RateLimit-Limit"], r.headers["X-RateLimit-Remaining"]) for r in reads] == [
        (200, "4", "3"), (200, "4", "2"), (200, "4", "1"), (200, "4", "0")]


# -- the limiter's Redis round trips ---------------------------------------------------------
def round_trips(run) -> int:
    """Requests that ``run()`` writes to Redis through redis-py (a pipeline is one)."""
    from redis.connection import AbstractConnection

    sent = [0]
    send = AbstractConnection.send_packed_command

    def counted(self, *args, **kwargs):
        sent[0] += 1
        return send(self, *args, **kwargs)

    AbstractConnection.send_packed_command = counted
    try:
        run()
    finally:
        AbstractConnection.send_packed_command = send
    return sent[0]


def test_an_append_makes_one_redis_call_with_the_limits_on_and_with_them_off(redis_url):
    """The client's limit and the table's are counted by the APPEND script itself: an append is the APPEND
    alone, with every limit on as with every limit off."""
    app = create_app({"TESTING": True, "REDIS_URL": redis_url, **OFF, "CLIENT_EVENTS_PER_MINUTE": 600,
                      "TABLE_EVENTS_PER_MINUTE": 5})
    c = app.test_client()
    tid, auth = _table(c)
    url = f"/v1/tables/{tid}/events"
    assert c.post(url, json={"type": "round_start"}, headers=auth).status_code == 201
    answers = []
    trips = round_trips(lambda: answers.append(c.post(url, json=KONGS[0], headers=auth)))
    assert answers[0].status_code == 201 and answers[0].headers["X-RateLimit-Remaining"] == "3"  # the table's
    assert trips == 1
    off = make_client(redis_url, **OFF)
    tid, auth = _table(off)
    assert off.post(f"/v1/tables/{tid}/events", json={"type": "round_start"}, headers=auth).status_code == 201
    assert round_trips(lambda: off.post(f"/v1/tables/{tid}/events", json=KONGS[0], headers=auth)) == 1


@pytest.mark.parametrize("client_limit", [0, 100])
def test_a_redis_that_lost_the_limiters_scripts_still_counts(redis_url, redis_client, client_limit):
    """After SCRIPT FLUSH (as after a restart) a hit loads the scripts again and counts once (with a client
    limit, the table's window read with the client's hit is read again)."""
    c = limited(redis_url, TABLE_EVENTS_PER_MINUTE=3, CLIENT_EVENTS_PER_MINUTE=client_limit)
    tid, auth = _table(c)
    url = f"/v1/tables/{tid}/events"
    assert c.post(url, json={"type": "round_start"}, headers=auth).headers["X-RateLimit-Remaining"] == "2"
    redis_client.script_flush()
    assert c.post(url, json=KONGS[0], headers=auth).headers["X-RateLimit-Remaining"] == "1"
    redis_client.script_flush()
    assert c.post(url, json=KONGS[1], headers=auth).headers["X-RateLimit-Remaining"] == "0"
    refused(c.post(url, json=KONGS[2], headers=auth), "minute")


# -- every endpoint declares its limits ------------------------------------------------------------
def test_every_endpoint_is_limited_or_says_why_not():
    """Walk the URL map: each endpoint declares its rate limits at its view (``rate_limits.limited``), or that
    it has none and why (``rate_limits.unlimited``; Flask's, flask-smorest's and the companion app's:
    ``OTHER_VIEWS``)."""
    from service.api import rate_limits
    from service.config import LIMITS

    app = create_app({"TESTING": True})
    undeclared, seen = [], set()
    for rule in app.url_map.iter_rules():
        view = app.view_functions[rule.endpoint]
        declared = rate_limits.declared(view)
        if rule.endpoint in rate_limits.OTHER_VIEWS:
            assert declared is None and rate_limits.OTHER_VIEWS[rule.endpoint].strip(), rule.endpoint
            continue
        if declared is None:
            undeclared.append(f"{rule.endpoint} ({rule.rule})")
            continue
        assert bool(declared.limits) != bool(declared.unlimited), rule.endpoint  # one or the other
        assert all(name in LIMITS for name in declared.limits), rule.endpoint
        seen.update(declared.limits)
    assert not undeclared, ("these endpoints declare no rate limit: put @rate_limits.limited(...) or "
                            "@rate_limits.unlimited(\"why\") under their route: " + ", ".join(undeclared))
    assert seen == set(LIMITS)  # every limit limits some endpoint
    assert set(rate_limits.OTHER_VIEWS) <= set(app.view_functions)  # (none stale)


def test_a_view_declares_a_known_limit_or_a_reason():
    from service.api import rate_limits

    with pytest.raises(ValueError):
        rate_limits.limited("client_events_per_hour")
    with pytest.raises(ValueError):
        rate_limits.limited()
    with pytest.raises(ValueError):
        rate_limits.unlimited(" ")


@pytest.mark.parametrize("name", ["client_events_per_minute", "client_voids_per_minute", "client_reads_per_minute",
                                  "table_reads_per_minute"])
def test_each_endpoint_declaring_a_limit_is_refused_past_it(redis_url, redis_client, name):
    """Every endpoint that declares one of the per-request limits is counted by it: with that limit at 1, a
    second request to it (one the table answers, for a table's limit) is a 429 naming it."""
    from service.api import rate_limits
    from service.config import LIMITS

    app = create_app({"TESTING": True, "REDIS_URL": redis_url, **OFF, LIMITS[name][0]: 1})
    rules = [rule for rule in app.url_map.iter_rules()
             if name in getattr(rate_limits.declared(app.view_functions[rule.endpoint]), "limits", ())]
    assert rules
    c = app.test_client()
    for rule in rules:
        tid, auth = _table(c)
        for key in redis_client.scan_iter("rl*"):  # (each endpoint starts with the limit unused)
            redis_client.delete(key)
        method = sorted(rule.methods - {"HEAD", "OPTIONS"})[0]
        path = rule.rule.replace("<table_id>", tid).replace("<int:seq>", "1").replace("<int:number>", "1")
        if "<int:number>" in rule.rule:  # (a round of the table: round 1)
            assert c.post(f"/v1/tables/{tid}/events", json={"type": "round_start"}, headers=auth).status_code == 201
        statuses = []
        for _ in range(2):
            r = c.open(path, method=method, headers=auth, json={}, buffered=False)  # (a stream is not read)
            statuses.append(r.status_code)
            body = r.get_json() if r.status_code == 429 else None
            r.close()
        assert statuses[1] == 429 and body["limit"] == rate_limits.limit_name(name), (rule.rule, statuses)
    hub = app.extensions.get("stream_hub")
    if hub is not None:
        hub.close()


def test_the_document_names_every_limit_a_429_may_name():
    """The OpenAPI document's RateLimitName lists each configured limit as a 429's ``limit`` says it (it lacked
    the batch items' and the webhook endpoints' limits: a 429 of theirs broke the document)."""
    from service.api.contract import LIMITS as NAMED
    from service.api.rate_limits import limit_name
    from service.config import LIMITS

    assert sorted(NAMED) == sorted(limit_name(name) for name in LIMITS)


# -- every documented limit refuses at its count -----------------------------------------------------
def _events_of(c, tid, auth, n):
    for ev in [{"type": "round_start"}, *KONGS[:n]]:
        assert c.post(f"/v1/tables/{tid}/events", json=ev, headers=auth).status_code == 201


def _requests(name, c):
    """``(the requests that count, the one more that must be refused)`` for a limit at 3 (each a callable)."""
    if name == "tables_per_hour":
        make = lambda: c.post("/v1/tables", json=PLAYERS)  # noqa: E731
        return [make] * 3, make
    tables = [_table(c) for _ in range(5)]
    (t0, a0), (t1, a1), (t2, a2), (t3, a3), (t4, a4) = tables
    ev = lambda tid, auth, body: lambda: c.post(f"/v1/tables/{tid}/events", json=body, headers=auth)  # noqa: E731
    void = lambda tid, auth, seq: lambda: c.post(f"/v1/tables/{tid}/events/{seq}/void", headers=auth)  # noqa: E731
    read = lambda tid, auth: lambda: c.get(f"/v1/tables/{tid}", headers=auth)  # noqa: E731
    if name == "client_events_per_minute":  # an append, a finish and a club's write share it (one counter)
        return ([ev(t0, a0, {"type": "round_start"}), lambda: c.post(f"/v1/tables/{t1}/finish", headers=a1),
                 lambda: c.post("/v1/clubs", json={"name": "周五"})], ev(t2, a2, {"type": "round_start"}))
    if name == "table_events_per_minute":
        return [ev(t0, a0, body) for body in ({"type": "round_start"}, *KONGS[:2])], ev(t0, a0, KONGS[2])
    if name in ("client_voids_per_minute", "table_voids_per_minute"):
        for tid, auth in tables:
            _events_of(c, tid, auth, 4)
        correction = lambda: c.put(f"/v1/tables/{t3}/rounds/1/events", headers=a3,  # noqa: E731
                                   json={"events": [KONGS[0]]})
        if name == "client_voids_per_minute":  # a void and a correction share it
            return [void(t0, a0, 5), void(t1, a1, 5), correction], void(t2, a2, 5)
        return [void(t4, a4, 5), void(t4, a4, 4), void(t4, a4, 3)], void(t4, a4, 2)
    if name == "client_reads_per_minute":
        return [read(t0, a0), read(t1, a1), lambda: c.get(f"/v1/tables/{t2}/events", headers=a2)], read(t3, a3)
    if name == "table_reads_per_minute":
        return [read(t0, a0), lambda: c.get(f"/v1/tables/{t0}/events", headers=a0),
                lambda: c.get(f"/v1/tables/{t0}/summary", headers=a0)], read(t0, a0)
    assert name == "client_batch_items_per_minute"
    batch = lambda n: lambda: c.post("/v1/batch", json={"items": [{"op": "ting", "hand": "1112345678999m"}] * n})  # noqa: E731
    return [batch(2), batch(1)], batch(1)


@pytest.mark.parametrize("name", ["tables_per_hour", "client_events_per_minute", "client_voids_per_minute",
                                  "client_reads_per_minute", "table_events_per_minute", "table_voids_per_minute",
                                  "table_reads_per_minute", "client_batch_items_per_minute"])
def test_each_documented_limit_refuses_at_its_count(redis_url, name):
    """Each limit of docs/api.md at 3: its three requests (items, for the batch) are answered, the next is a 429
    naming it, with Retry-After and the limit's headers.  (The webhook endpoints' two:
    tests/test_webhooks_recovery.py.)"""
    from service.api.rate_limits import limit_name
    from service.config import LIMITS

    c = limited(redis_url, **({"TABLES_PER_HOUR": 0} if name != "tables_per_hour" else {}), **{LIMITS[name][0]: 3})
    counted, one_more = _requests(name, c)
    answers = [request() for request in counted]
    assert all(r.status_code < 300 for r in answers), [(r.status_code, r.get_data(as_text=True)) for r in answers]
    assert answers[-1].headers["X-RateLimit-Limit"] == "3" and answers[-1].headers["X-RateLimit-Remaining"] == "0"
    r = one_more()
    body = problem(r, 429, "too_many_requests")
    assert body["limit"] == limit_name(name) and 0 < int(r.headers["Retry-After"]) <= (3600 if "hour" in name else 120)
    assert (r.headers["X-RateLimit-Limit"], r.headers["X-RateLimit-Remaining"]) == ("3", "0")
