"""The hot path's appends (service/api/hotpath.py) answer exactly as Flask does, or leave the request to Flask.

Two apps on one real redis-server, one with the hot path and one without
(``HOT_PATH = False``), each with a table of its own made alike, get the same
sequences of ``POST /v1/tables/{id}/events``: generated events (most of them
refused by the rules or the schema), tokens, ``Idempotency-Key`` and
``If-Match`` headers, content types and paths.  The status, the header list,
the body bytes, the access-log lines (all but the duration) and the metrics'
increments must be the same (the table ids, which differ, are written ``TID``
in both).  The store is asked once per request whichever path answers.
"""

from __future__ import annotations

import json
import logging
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from prometheus_client import REGISTRY

from service.api import create_app
from service.api.hotpath import APPEND_RULE
from service.config import NO_LIMITS
from tests.test_tables_statemachine import any_event
from tests.test_api_hotpath import Lines

PLAYERS = ["东", "南", "西", "北"]
KEY = "acme-" + "a" * 40
STATUSES = ("201", "400", "401", "403", "404", "409", "412", "413", "415", "422", "503")
UNKNOWN = "0123456789abcdef"
COMMON = [{"type": "round_start"}, {"type": "kong", "seat": 0, "kind": "concealed", "tile": "5m"},
          {"type": "kong", "seat": 1, "kind": "direct", "tile": "5p", "from": 2}, {"type": "round_end"}]


class Spy:
    """Counts the requests that reach Flask behind the hot path, and the store's appends."""

    def __init__(self, app) -> None:
        self.layer, self.calls = app.extensions["hot_path"], 0
        if self.layer is not None:
            self.inner = self.layer.wsgi_app
            self.layer.wsgi_app = self
        store = app.extensions["tables"]
        self.appends, append = 0, store.append

        def counted(*args, **kwargs):
            self.appends += 1
            return append(*args, **kwargs)

        store.append = counted

    def __call__(self, environ, start_response):
        self.calls += 1
        return self.inner(environ, start_response)


def _config(redis_url: str, **extra) -> dict:
    return {"TESTING": True, "REDIS_URL": redis_url, **{var: 0 for var in NO_LIMITS}, **extra}


@pytest.fixture
def apps(redis_url):
    hot, flask = create_app(_config(redis_url)), create_app(_config(redis_url, HOT_PATH=False))
    assert hot.extensions["hot_path"].append_view is not None and flask.extensions["hot_path"] is None
    return hot, flask


@pytest.fixture
def spied(apps):
    return apps, [Spy(app) for app in apps]


def _metrics() -> dict:
    out = {}
    for status in STATUSES:
        out[status] = REGISTRY.get_sample_value(
            "mahjong_http_requests_total", {"endpoint": APPEND_RULE, "method": "POST", "status": status}) or 0.0
        for name in ("acme", "-"):
            out[name + status] = REGISTRY.get_sample_value(
                "mahjong_api_key_requests_total", {"api_key": name, "endpoint": APPEND_RULE, "status": status}) or 0.0
    for operation in ("hit", "acquire_sliding_window_entry_and_window", "get_sliding_window", "check"):
        out["storage " + operation] = REGISTRY.get_sample_value(
            "mahjong_rate_limit_storage_errors_total", {"operation": operation}) or 0.0
    out["seconds"] = REGISTRY.get_sample_value(
        "mahjong_http_request_duration_seconds_count", {"endpoint": APPEND_RULE, "method": "POST"}) or 0.0
    return out


def _exchange(app, table_id: str, path: str, data: bytes, headers: dict) -> tuple:
    """What one request gives (the table's id written TID): status, headers, body, log lines, metrics."""
    lines = Lines()
    loggers = [logging.getLogger(name) for name in ("service.access", "service.api", "service.store",
                                                    "service.api.limits", "flask-limiter")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(lines)
        logger.setLevel(logging.INFO)
    before = _metrics()
    try:
        response = app.test_client().post(path.replace("TID", table_id), data=data,
                                          headers={"X-Request-ID": "r-1", **headers})
    finally:
        for logger, level in zip(loggers, levels):
            logger.removeHandler(lines)
            logger.setLevel(level)
    after = _metrics()
    delta = {k: after[k] - before[k] for k in after if after[k] != before[k]}
    logged = json.loads(json.dumps(lines.records, ensure_ascii=False).replace(table_id, "TID"))
    headers_out = [(k, v.replace(table_id, "TID")) for k, v in response.headers.to_wsgi_list()]
    return response.status, headers_out, response.get_data().replace(table_id.encode(), b"TID"), logged, delta


class Pair:
    """The two apps, each with its own table made alike, and the tokens of each."""

    def __init__(self, apps, other_token: str) -> None:
        self.apps = apps
        self.tables = []
        for app in apps:
            created = app.test_client().post("/v1/tables", json={"players": PLAYERS}).get_json()
            self.tables.append(created)
        self.other_token = other_token  # a well-formed token of no table here

    def version(self) -> int:
        table = self.tables[1]
        r = self.apps[1].test_client().get(f"/v1/tables/{table['id']}",
                                           headers={"Authorization": "Bearer " + table["read_token"]})
        return r.get_json()["version"]

    def send(self, body: bytes, *, token: str = "write", key: str | None = None, if_match: str | None = None,
             content_type: str = "application/json", path: str = "/v1/tables/TID/events",
             extra: dict | None = None) -> tuple:
        answers = []
        for app, table in zip(self.apps, self.tables):
            headers = {"Content-Type": content_type, **(extra or {})}
            auth = {"write": "Bearer " + table["token"], "read": "Bearer " + table["read_token"],
                    "lower": "bearer " + table["token"], "other": "Bearer " + self.other_token,
                    "padded": "Bearer  " + table["token"], "trailing": "Bearer " + table["token"] + " ",
                    "equals": "Bearer " + table["token"] + "=", "basic": "Basic dXNlcjpwYXNz",
                    "empty": "Bearer ", "none": None}[token]
            if auth is not None:
                headers["Authorization"] = auth
            if key is not None:
                headers["Idempotency-Key"] = key
            if if_match is not None:
                headers["If-Match"] = if_match
            answers.append(_exchange(app, table["id"], path, body, headers))
        assert answers[0] == answers[1]
        return answers[0]


TOKENS = ["write"] * 6 + ["read", "lower", "other", "padded", "trailing", "equals", "basic", "empty", "none"]
KEYS = [None] * 4 + ["k-1", "k-2", "k 3", "", "é", "x" * 129]
MATCH = [None] * 4 + ["now", "before", "both", "weak", "star", "junk", "spaced", "unicode"]
extra_body = st.dictionaries(st.sampled_from(["seat", "tile", "from", "kind", "type", "coins", "x"]),
                             st.one_of(st.integers(-2, 5), st.text(max_size=3), st.none()), max_size=3)
bodies = st.one_of(any_event, any_event, st.sampled_from(COMMON), st.sampled_from(COMMON),
                   st.builds(lambda e, x: {**e, **x}, any_event, extra_body),
                   st.sampled_from([[], "round_start", None, 7, {"type": "buy_in", "seat": 0, "coins": 5}]))
step = st.fixed_dictionaries({
    "body": bodies, "token": st.sampled_from(TOKENS), "key": st.sampled_from(KEYS), "match": st.sampled_from(MATCH),
    "content_type": st.sampled_from(["application/json"] * 8 + ["application/json; charset=utf-8", "text/plain"]),
    "path": st.sampled_from(["/v1/tables/TID/events"] * 8 + [f"/v1/tables/{UNKNOWN}/events",
                                                            "/v1/tables/TID/events/", "/v1/tables/TID/events?x=1"]),
})


def _if_match(kind: str | None, version: int) -> str | None:
    return {None: None, "now": f'"{version}"', "before": f'"{max(version - 1, 0)}"',
            "both": f'"{version}", "{version + 1}"', "weak": f'W/"{version}"', "star": "*", "junk": '"v1"',
            "spaced": f' "{version}"', "unicode": '"١"'}[kind]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None, max_examples=40)
@given(steps=st.lists(step, min_size=1, max_size=14))
def test_append_sequences_are_answered_as_flask_does(spied, steps):
    apps, spies = spied
    asked = [s.appends for s in spies]
    pair = Pair(apps, other_token="A" * 43)
    for s in steps:
        version = pair.version()
        data = json.dumps(s["body"], ensure_ascii=False).encode()
        pair.send(data, token=s["token"], key=s["key"], if_match=_if_match(s["match"], version),
                  content_type=s["content_type"], path=s["path"])
    # the store asked once a request, whichever answered
    assert spies[0].appends - asked[0] == spies[1].appends - asked[1]


def test_a_round_through_the_hot_path_never_reaches_flask(apps):
    hot, _ = apps
    pair = Pair(apps, other_token="A" * 43)
    spy = Spy(hot)
    for event in COMMON * 2:
        status, headers, *_ = pair.send(json.dumps(event).encode())
        assert status == "201 CREATED"
    names = [name for name, _ in headers]
    assert names == ["Content-Type", "Content-Length", "Location", "ETag", "X-Request-ID"]
    # a retry under its Idempotency-Key replays; the same key with another body is refused
    first = pair.send(json.dumps(COMMON[0]).encode(), key="k-1")
    again = pair.send(json.dumps(COMMON[0]).encode(), key="k-1")
    assert again[0] == "201 CREATED" and ("Idempotent-Replayed", "true") in again[1] and first[2] == again[2]
    assert spy.calls == 0 and spy.appends == len(COMMON) * 2 + 2
    assert pair.send(json.dumps(COMMON[1]).encode(), key="k-1")[0].startswith("422")
    # a conditional write: the current version goes, a stale one is 412 (decided by the store, said by Flask)
    version = pair.version()  # (a GET of the other app's table)
    assert pair.send(json.dumps(COMMON[1]).encode(), if_match=f'"{version}"')[0] == "201 CREATED"
    assert pair.send(json.dumps(COMMON[1]).encode(), if_match=f'"{version}"')[0].startswith("412")
    # refusals reach Flask once each, the store having been asked once each
    assert spy.calls == 2 and spy.appends == len(COMMON) * 2 + 5


@pytest.mark.parametrize("data", [b"", b"{", b"NaN", b"[]", b'{"type": "round_start"}  ', b"x" * 70000,
                                  b'{"type": "round_start", "n": 1' + b"0" * 30 + b"}",
                                  '{"type": "round_start", "x": "\\ud800"}'.encode(),
                                  b'{"type": "round_start"}' + b" " * (64 * 1024 - 23),
                                  b'{"type": "round_start"}' + b" " * (64 * 1024 - 22)])
def test_bodies_at_the_edges_are_answered_alike(apps, data):
    Pair(apps, other_token="A" * 43).send(data)


@pytest.mark.parametrize("headers", [{}, {"X-API-Key": "x" * 40}, {"X-API-Key": KEY}])
def test_api_keys_alike(redis_url, headers):
    config = _config(redis_url, API_KEYS=f"acme={KEY}")
    apps = create_app(config), create_app({**config, "HOT_PATH": False})
    pair = Pair.__new__(Pair)
    pair.apps, pair.other_token = apps, "A" * 43
    pair.tables = [app.test_client().post("/v1/tables", json={"players": PLAYERS}, headers={"X-API-Key": KEY})
                   .get_json() for app in apps]
    spy = Spy(apps[0])
    for event in COMMON:
        pair.send(json.dumps(event).encode(), extra=headers)
    # with the table's token, no key or a known one: the hot path answers; an unknown key: Flask's 401
    assert spy.calls == (len(COMMON) if headers.get("X-API-Key", KEY) != KEY else 0)
    pair.send(json.dumps(COMMON[1]).encode(), extra=headers)  # (no round: a refusal)
    pair.send(json.dumps(COMMON[0]).encode(), token="none", extra=headers)


def test_a_store_that_fails_is_asked_once_and_flask_says_why(redis_url):
    dead = "redis://127.0.0.1:1/0"  # nothing listens there: every call fails at once (503)
    good = [create_app(_config(redis_url)), create_app(_config(redis_url, HOT_PATH=False))]
    pair = Pair(good, other_token="A" * 43)
    pair.apps = (create_app(_config(dead)), create_app(_config(dead, HOT_PATH=False)))
    spies = [Spy(app) for app in pair.apps]
    status, _, body, lines, _ = pair.send(json.dumps(COMMON[0]).encode())
    assert status.startswith("503") and b"store_unavailable" in body
    assert [s.appends for s in spies] == [1, 1] and spies[0].calls == 1


def test_it_steps_aside_for_what_it_would_skip(redis_url):
    # rate limits on: the hot path does Flask-Limiter's work for appends (see below), but behind trusted
    # proxies (the client address is ProxyFix's) appends go to Flask (hands do not)
    limited = create_app({"TESTING": True, "REDIS_URL": redis_url})
    assert limited.extensions["hot_path"].append_view is not None
    proxied = create_app({"TESTING": True, "REDIS_URL": redis_url, "TRUSTED_PROXIES": "1"})
    layer = proxied.extensions["hot_path"]
    assert layer.routes and layer.append_view is None
    # a hook added to the tables blueprint afterwards, or the view wrapped: Flask answers from then on
    for change in ("hook", "view"):
        app = create_app(_config(redis_url))
        client = app.test_client()
        table = client.post("/v1/tables", json={"players": PLAYERS}).get_json()
        spy = Spy(app)
        seen = []
        if change == "hook":
            app.after_request_funcs.setdefault("tables", []).append(
                lambda response: seen.append(response.status_code) or response)
        else:
            view = app.view_functions["tables.post_event"]
            app.view_functions["tables.post_event"] = lambda **kw: seen.append(201) or view(**kw)
        r = client.post(f"/v1/tables/{table['id']}/events", json=COMMON[0],
                        headers={"Authorization": "Bearer " + table["token"]})
        assert r.status_code == 201 and spy.calls == 1 and seen == [201], change


def test_an_answer_it_cannot_write_goes_to_flask_with_the_write_made_once(apps, monkeypatch):
    """Once the store has appended, the request is never planned again: if the hot path cannot write
    the 201, Flask writes it from the same outcome (the store asked once, one record in the log)."""
    from service.api import hotpath

    hot, _ = apps
    pair = Pair(apps, other_token="A" * 43)
    spy = Spy(hot)
    table = pair.tables[0]

    def broken(*args, **kwargs):
        raise TypeError("cannot write this")

    monkeypatch.setattr(hotpath, "dumps", broken)
    r = hot.test_client().post(f"/v1/tables/{table['id']}/events", json=COMMON[0],
                               headers={"Authorization": "Bearer " + table["token"], "Idempotency-Key": "once"})
    assert r.status_code == 201 and r.get_json()["seq"] == 1 and "Idempotent-Replayed" not in r.headers
    assert spy.appends == 1 and spy.calls == 1
    log = hot.test_client().get(f"/v1/tables/{table['id']}/events",
                                headers={"Authorization": "Bearer " + table["read_token"]}).get_json()
    assert [e["seq"] for e in log["events"]] == [1]


# -- rate limits on: the hot path does Flask-Limiter's work for an append ------------------------------
#
# The two apps count on two databases of the one redis-server (the client's counters would be shared
# otherwise); after identical sequences their rate limit counters are the same, key by key.

BETA = "beta-" + "b" * 40  # (only names other tests expect in the metrics: acme, beta)


def _limited_apps(redis_url: str, **config) -> tuple:
    base = redis_url.rsplit("/", 1)[0]
    made = []
    for db, hot in ((0, True), (1, False)):
        made.append(create_app({"TESTING": True, "REDIS_URL": f"{base}/{db}", "HOT_PATH": hot, **config}))
    assert made[0].extensions["hot_path"].append_view is not None and made[1].extensions["hot_path"] is None
    return tuple(made)


def _counters(app, table_id: str) -> dict:
    """The rate limiter's counters in the app's database (the table's id written TID): value and TTL (s)."""
    import redis

    client = redis.Redis.from_url(app.config["REDIS_URL"])
    try:
        out = {}
        for key in client.scan_iter(match="LIMITS*"):
            value = client.get(key) if client.type(key) == b"string" else client.lrange(key, 0, -1)
            out[key.decode().replace(table_id, "TID")] = (value, round(client.pttl(key) / 1000))
        return out
    finally:
        client.close()


class LimitedPair(Pair):
    def __init__(self, apps, key: str | None = None) -> None:
        self.apps, self.other_token = apps, "A" * 43
        headers = {"X-API-Key": key} if key else {}
        self.tables = [app.test_client().post("/v1/tables", json={"players": PLAYERS}, headers=headers)
                       .get_json() for app in apps]

    def send(self, body: bytes, *, token: str = "write", extra: dict | None = None, **_) -> tuple:  # type: ignore[override]
        answers = []
        for app, table in zip(self.apps, self.tables):
            headers = {"Content-Type": "application/json", **(extra or {})}
            auth = {"write": table["token"], "read": table["read_token"], "other": self.other_token}.get(token)
            if auth:
                headers["Authorization"] = "Bearer " + auth
            answers.append(list(_exchange(app, table["id"], "/v1/tables/TID/events", body, headers)))
        # the times (whole seconds from now) may differ by one between the two requests, or by the window:
        # limits takes a window's reset as its TTL (ms) modulo the window, and a window just opened has a TTL
        # of 2 windows, or 1 ms less (so its reset is now, or a window from now) whichever path counted it
        for name in ("X-RateLimit-Reset", "Retry-After"):
            values = [dict(a[1]).get(name) for a in answers]
            assert (values[0] is None) == (values[1] is None), name
            if values[0] is not None:
                apart = abs(int(values[0]) - int(values[1]))
                assert apart <= 1 or abs(apart - 60) <= 1, (name, values)
                for a in answers:
                    a[1] = [(k, "~" if k == name else v) for k, v in a[1]]
        assert answers[0] == answers[1]
        return tuple(answers[0])

    def same_counters(self) -> dict:
        counted = [_counters(app, table["id"]) for app, table in zip(self.apps, self.tables)]
        assert counted[0].keys() == counted[1].keys()
        for key in counted[0]:
            assert counted[0][key][0] == counted[1][key][0], key
            assert abs(counted[0][key][1] - counted[1][key][1]) <= 1, key
        return counted[0]


def _flush(app) -> None:
    import redis

    client = redis.Redis.from_url(app.config["REDIS_URL"])
    try:
        client.flushdb()
    finally:
        client.close()


limited_step = st.fixed_dictionaries({
    "body": st.one_of(st.sampled_from(COMMON), st.sampled_from(COMMON), any_event),
    "token": st.sampled_from(["write"] * 6 + ["read", "other", "none"]),
    "key": st.sampled_from([None] * 3 + [KEY, BETA, "x" * 40]),
})


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None, max_examples=25)
@given(steps=st.lists(limited_step, min_size=1, max_size=16),
       limits=st.sampled_from([(5, 3), (3, 5), (4, 4), (0, 3), (3, 0), (600, 120)]),
       beta=st.sampled_from([2, 0]))
def test_limited_append_sequences_are_answered_and_counted_as_flask_does(redis_url, steps, limits, beta):
    """Limits that refuse (the client's first, the table's first, either one off), an API key with its
    own limit (beta: 2 a minute, or none), a key unknown, requests the table does not answer: the
    same answers, headers, logs and metrics, the store asked as often, the same counters in Redis."""
    apps = _limited_apps(redis_url, CLIENT_EVENTS_PER_MINUTE=limits[0], TABLE_EVENTS_PER_MINUTE=limits[1],
                         API_KEYS=f"acme={KEY},beta={BETA}", API_KEY_LIMITS=f"beta:CLIENT_EVENTS_PER_MINUTE={beta}")
    for app in apps:
        _flush(app)
    pair = LimitedPair(apps, key=KEY)
    spies = [Spy(app) for app in apps]
    for s in steps:
        data = json.dumps(s["body"], ensure_ascii=False).encode()
        pair.send(data, token=s["token"], extra={"X-API-Key": s["key"]} if s["key"] else None)
    assert spies[0].appends == spies[1].appends
    pair.same_counters()


@pytest.mark.parametrize("client, table", [(3, 100), (100, 3), (3, 3)])
def test_a_limit_refusing_is_flasks_429_counted_alike(redis_url, client, table):
    apps = _limited_apps(redis_url, CLIENT_EVENTS_PER_MINUTE=client, TABLE_EVENTS_PER_MINUTE=table)
    pair = LimitedPair(apps)
    spy = Spy(apps[0])
    answers = [pair.send(json.dumps(event).encode()) for event in COMMON + COMMON[:1]]
    assert [a[0] for a in answers] == ["201 CREATED"] * 3 + ["429 TOO MANY REQUESTS"] * 2
    created, refused = dict(answers[2][1]), dict(answers[3][1])
    assert created["X-RateLimit-Limit"] == "3" and created["X-RateLimit-Remaining"] == "0"
    assert "Retry-After" not in created
    assert refused["Content-Type"] == "application/problem+json" and "Retry-After" in refused
    assert refused["X-RateLimit-Limit"] == "3"
    assert spy.calls == 2 and spy.appends == 3  # the 201s: the hot path; the 429s: Flask (store not asked)
    counted = pair.same_counters()
    table_counts = [v for k, v in counted.items() if "table:TID" in k]
    assert table_counts and all(v[0] is not None for v in table_counts)


def test_a_round_with_limits_on_never_reaches_flask(redis_url):
    apps = _limited_apps(redis_url, CLIENT_EVENTS_PER_MINUTE=600, TABLE_EVENTS_PER_MINUTE=120)
    pair = LimitedPair(apps)
    spy = Spy(apps[0])
    for event in COMMON * 2:
        status, headers, *_ = pair.send(json.dumps(event).encode())
        assert status == "201 CREATED"
    assert [name for name, _ in headers] == ["Content-Type", "Content-Length", "Location", "ETag",
                                             "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
                                             "X-Request-ID"]
    assert dict(headers)["X-RateLimit-Limit"] == "120" and dict(headers)["X-RateLimit-Remaining"] == "112"
    # refusals of the rules and of the store: Flask says why, the limits counted once (from the record)
    assert pair.send(json.dumps(COMMON[1]).encode())[0].startswith("422")
    assert pair.send(json.dumps(COMMON[0]).encode(), token="read")[0].startswith("403")
    assert pair.send(json.dumps(COMMON[0]).encode(), token="other")[0].startswith("401")
    assert spy.calls == 3 and spy.appends == len(COMMON) * 2 + 3
    pair.same_counters()


def test_a_redis_away_falls_back_to_memory_as_flask_does(redis_url):
    """Nothing listens: the limiter's first hit fails (counted, logged), Flask-Limiter counts in memory from
    then on (the hot path leaves every append to Flask while it does); the store's 503 is Flask's."""
    dead = "redis://127.0.0.1:1/0"
    apps = (create_app({"TESTING": True, "REDIS_URL": dead, "CLIENT_EVENTS_PER_MINUTE": 3}),
            create_app({"TESTING": True, "REDIS_URL": dead, "CLIENT_EVENTS_PER_MINUTE": 3, "HOT_PATH": False}))
    assert apps[0].extensions["hot_path"].append_view is not None
    pair = Pair.__new__(LimitedPair)
    pair.apps, pair.other_token = apps, "A" * 43
    pair.tables = [{"id": "0123456789abcdef", "token": "T" * 43, "read_token": "R" * 43}] * 2
    spies = [Spy(app) for app in apps]
    for app in apps:  # Flask-Limiter asks a dead backend again after 1, 2, 4 ... s from its last check: each app
        # its own clock, so the two would ask at different requests of a slow run; neither asks in this test
        next(iter(app.extensions["limiter"]))._Limiter__last_check_backend = time.time() + 3600
    answers = [pair.send(json.dumps(COMMON[0]).encode()) for _ in range(5)]
    assert [a[0][:3] for a in answers] == ["503"] * 3 + ["429"] * 2
    assert answers[0][4].get("storage acquire_sliding_window_entry_and_window") == 1
    assert [s.appends for s in spies] == [3, 3] and spies[0].calls == 5
    assert not next(iter(apps[0].extensions["limiter"]))._storage_dead is False


def test_a_redis_error_on_a_limit_is_flask_limiters_fallback_alike(redis_url):
    """A real Redis error on one limit's counter (a table's window key of another type: WRONGTYPE) after
    the client's hit was counted: the hot path hands Flask the record, Flask-Limiter falls back to memory
    as it would (the failure counted and logged once), and from then on Flask answers while it does."""
    import redis

    from service.api.limits import _item

    apps = _limited_apps(redis_url, CLIENT_EVENTS_PER_MINUTE=50, TABLE_EVENTS_PER_MINUTE=40)
    pair = LimitedPair(apps)
    pair.send(json.dumps(COMMON[0]).encode())
    for app, table in zip(apps, pair.tables):
        storage = next(iter(app.extensions["limiter"])).storage
        item = _item("40/minute")
        previous, current = storage._window_keys(item.key_for("rl", f"table:{table['id']}", "table_events_per_minute"))
        client = redis.Redis.from_url(app.config["REDIS_URL"])
        client.delete(previous, current)
        client.rpush(current, "not a count")
        client.close()
    spies = [Spy(app) for app in apps]
    for app in apps:  # (no re-check of the backend in this test: see the Redis-away one)
        next(iter(app.extensions["limiter"]))._Limiter__last_check_backend = time.time() + 3600
    answers = [pair.send(json.dumps(event).encode()) for event in COMMON[1:]]
    assert [a[0] for a in answers] == ["201 CREATED"] * 3
    assert sum(v for k, v in answers[0][4].items() if k.startswith("storage ")) >= 1
    assert [s.appends for s in spies] == [3, 3] and spies[0].calls == 3
    assert all(next(iter(app.extensions["limiter"]))._storage_dead for app in apps)
    pair.same_counters()
