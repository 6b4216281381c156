"""The Redis client factory (``service.store.redis_client``): URL forms, one client for the app, the limiter and
readiness, a demoted primary, a cluster that is not there yet, the limiter's errors counted."""

from __future__ import annotations

import logging
import subprocess
import sys
import time

import pytest
import redis

from service.api import create_app
from service.store.embedded import EmbeddedRedis, free_port
from service.store.redis_client import (
    FollowPrimaryConnection,
    FollowPrimarySSLConnection,
    LazyCluster,
    RedisTarget,
    RedisUrlError,
    connect,
    kind,
    parse,
)
from tests.service_process import ROOT, service_env

PLAYERS = {"players": ["a", "b", "c", "d"]}


@pytest.mark.parametrize("url, target", [
    ("redis://localhost", RedisTarget("redis")),
    ("redis://:pw@10.1.2.3:6380/4", RedisTarget("redis", db=4)),
    ("rediss://user:pw@cache.example:6380/1?ssl_cert_reqs=none", RedisTarget("redis", db=1)),
    ("unix:///run/redis/redis.sock?db=2", RedisTarget("redis", db=2)),
    ("redis+sentinel://10.0.0.1:26379/mymaster", RedisTarget("sentinel", (("10.0.0.1", 26379),), "mymaster")),
    ("redis+sentinel://u:p%40ss@s1:26379,s2:26380,[::1]:26381/cache/3",
     RedisTarget("sentinel", (("s1", 26379), ("s2", 26380), ("::1", 26381)), "cache", 3, "u", "p@ss")),
    ("redis+cluster://10.0.0.1:7000", RedisTarget("cluster", (("10.0.0.1", 7000),))),
    ("redis+cluster://:secret@n1:7000,n2:7001/", RedisTarget("cluster", (("n1", 7000), ("n2", 7001)),
                                                             password="secret")),
    ("redis+cluster://n1:7000/0", RedisTarget("cluster", (("n1", 7000),))),
])
def test_every_url_form(url, target):
    assert parse(url) == target


@pytest.mark.parametrize("url, message", [
    ("localhost:6379", "must start with redis://"),
    ("memcached://x:1", "got 'memcached://...'"),
    ("redis+sentinel://s1:26379", "names the master's service"),
    ("redis+sentinel://s1:26379/a/b/c", "names the master's service"),
    ("redis+sentinel://s1:26379/a/x", "names the master's service"),
    ("redis+sentinel://s1/mymaster", "host:port"),
    ("redis+cluster://n1:7000,:7001", "host:port"),
    ("redis+cluster://n1:7000/2", "only database 0"),
    ("redis+cluster://n1:7000?x=1", "no query"),
    ("redis://h:notaport", "REDIS_URL"),
])
def test_bad_urls_are_refused_with_the_reason(url, message):
    with pytest.raises(RedisUrlError, match=message.replace("+", r"\+")):
        parse(url)


def test_connect_builds_the_client_of_each_topology_without_connecting():
    nobody = free_port()
    plain = connect(f"redis://127.0.0.1:{nobody}/0")
    assert kind(plain) == "redis"
    assert plain.get_retry().get_retries() == 0  # no command is ever sent twice by redis-py
    assert plain.connection_pool.connection_class is FollowPrimaryConnection
    tls = connect(f"rediss://127.0.0.1:{nobody}/0")
    assert tls.connection_pool.connection_class is FollowPrimarySSLConnection
    assert issubclass(FollowPrimarySSLConnection, redis.SSLConnection)
    sentinel = connect(f"redis+sentinel://127.0.0.1:{nobody}/mymaster/2")
    assert kind(sentinel) == "sentinel" and sentinel.connection_pool.connection_kwargs["db"] == 2
    cluster = connect(f"redis+cluster://127.0.0.1:{nobody}")
    assert kind(cluster) == "cluster" and isinstance(cluster, LazyCluster)
    script = cluster.register_script("return 1")  # registering needs no node
    assert len(script.sha) == 40
    with pytest.raises(redis.exceptions.ConnectionError):  # a RedisError, so the API says 503
        cluster.get("x")


def test_serve_refuses_a_bad_redis_url_before_starting(tmp_path):
    result = subprocess.run([sys.executable, "-m", "service", "serve", "--port", str(free_port())], cwd=ROOT,
                            env=service_env(REDIS_URL="redis+sentinel://s1:26379"), capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and "names the master's service" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_cluster_that_is_not_there_yet_is_503_and_not_ready_never_a_crash():
    url = f"redis+cluster://127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    c = create_app({"TESTING": True, "REDIS_URL": url, "TABLES_PER_HOUR": 5}).test_client()  # made anyway
    ready = c.get("/readyz")
    assert ready.status_code == 503 and ready.get_json()["checks"]["redis"].startswith("failed")
    r = c.post("/v1/tables", json=PLAYERS)
    assert r.status_code == 503 and r.get_json()["code"] == "store_unavailable" and r.headers["Retry-After"]


def test_a_demoted_primary_is_not_ready_and_its_writes_are_503(tmp_path):
    """A plain ``redis://`` server that becomes a replica: readiness fails, a write is 503 with
    Retry-After (READONLY), the connection is dropped, and when it is a master again writes land."""
    a = EmbeddedRedis(tmp_path / "a", port=free_port()).start()
    b = EmbeddedRedis(tmp_path / "b", port=free_port()).start()
    try:
        c = create_app({"TESTING": True, "REDIS_URL": a.url, "TABLES_PER_HOUR": 0}).test_client()
        assert c.post("/v1/tables", json=PLAYERS).status_code == 201
        assert c.get("/readyz").status_code == 200
        admin = redis.Redis.from_url(a.url)
        admin.replicaof("127.0.0.1", b.port)  # demoted (its data goes: b's stream replaces it)
        ready = c.get("/readyz")
        assert ready.status_code == 503
        def app_connections() -> set:
            return {x["id"] for x in admin.client_list()} - {str(admin.client_id())}

        before = app_connections()
        w = c.post("/v1/tables", json=PLAYERS)
        assert w.status_code == 503 and w.get_json()["code"] == "store_unavailable" and w.headers["Retry-After"]
        assert before - app_connections()  # the connection that met READONLY is gone
        admin.replicaof("NO", "ONE")
        assert c.get("/readyz").status_code == 200
        assert c.post("/v1/tables", json=PLAYERS).status_code == 201
    finally:
        a.stop()
        b.stop()



def test_the_limiter_counts_on_the_apps_connections(redis_url, redis_client):
    app = create_app({"TESTING": True, "REDIS_URL": redis_url, "TABLES_PER_HOUR": 5})
    storage = app.extensions["rate_limits"].storage
    assert storage.get_connection().connection_pool is app.extensions["redis"].connection_pool
    assert app.test_client().post("/v1/tables", json=PLAYERS).status_code == 201
    assert redis_client.keys("*rl/*")  # the per-client limits, under their prefix


def test_a_limiter_that_cannot_reach_redis_warns_and_the_request_is_503(redis_server, redis_url, caplog):
    """Redis gone: Flask-Limiter falls back to counting in memory (a warning), and the table answers
    503 with Retry-After, never a 500."""
    c = create_app({"TESTING": True, "REDIS_URL": redis_url, "CLIENT_READS_PER_MINUTE": 100}).test_client()
    t = c.post("/v1/tables", json=PLAYERS).get_json()
    redis_server.stop()
    try:
        with caplog.at_level(logging.WARNING):
            r = c.get(f"/v1/tables/{t['id']}", headers={"Authorization": f"Bearer {t['token']}"})
        assert r.status_code == 503 and r.get_json()["code"] == "store_unavailable" and r.headers["Retry-After"]
        assert any("falling back to in-memory" in rec.getMessage() for rec in caplog.records)
    finally:
        redis_server.start()


def test_an_evicting_redis_is_not_ready_and_says_why(redis_url, redis_client):
    """A Redis that may evict keys when full would drop acknowledged events silently: not ready."""
    c = create_app({"TESTING": True, "REDIS_URL": redis_url}).test_client()
    redis_client.config_set("maxmemory-policy", "allkeys-lru")
    try:
        r = c.get("/readyz")
        assert r.status_code == 503 and "maxmemory-policy is allkeys-lru" in r.get_json()["checks"]["redis"]
    finally:
        redis_client.config_set("maxmemory-policy", "noeviction")
    assert c.get("/readyz").status_code == 200


def test_an_evicting_redis_refuses_every_write_with_a_503_and_says_so_at_start(tmp_path, caplog):
    """A redis-server started with ``maxmemory-policy allkeys-lru`` acknowledges writes and evicts them
    later: the service says so when it starts, and refuses every write to a table with a clear 503
    (not only ``/readyz``); once the policy is noeviction, writes go through again."""
    server = EmbeddedRedis(tmp_path, port=free_port(), maxmemory=64 * 1024 * 1024,
                           extra_args=("--maxmemory-policy", "allkeys-lru")).start()
    try:
        direct = redis.Redis.from_url(server.url)
        assert direct.config_get("maxmemory-policy")["maxmemory-policy"] == "allkeys-lru"
        with caplog.at_level(logging.ERROR):
            app = create_app({"TESTING": True, "REDIS_URL": server.url, "EVICTION_CHECK_SECONDS": 0})
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert any("maxmemory-policy allkeys-lru" in m and "every write to a table is refused" in m for m in said), said
        c = app.test_client()
        r = c.post("/v1/tables", json=PLAYERS)
        assert r.status_code == 503 and r.mimetype == "application/problem+json", r.get_data(as_text=True)
        body = r.get_json()
        assert body["code"] == "store_evicting" and "allkeys-lru" in body["detail"] and "noeviction" in body["detail"]
        assert int(r.headers["Retry-After"]) >= 30  # (Flask-Limiter answers the later of it and its own window)
        assert not direct.keys("{t:*")  # no table was written (the rate limiter counted the request)
        assert c.get("/readyz").status_code == 503

        direct.config_set("maxmemory-policy", "noeviction")
        t = c.post("/v1/tables", json=PLAYERS)
        assert t.status_code == 201
        table = t.get_json()
        direct.config_set("maxmemory-policy", "volatile-ttl")  # (any policy but noeviction)
        auth = {"Authorization": f"Bearer {table['token']}"}
        r = c.post(f"/v1/tables/{table['id']}/events", json={"type": "round_start"}, headers=auth)
        assert r.status_code == 503 and r.get_json()["code"] == "store_evicting"
        for path in (f"/v1/tables/{table['id']}/finish", f"/v1/tables/{table['id']}/tokens/rotate"):
            assert c.post(path, headers=auth).get_json()["code"] == "store_evicting"
        assert c.delete(f"/v1/tables/{table['id']}", headers=auth).get_json()["code"] == "store_evicting"
        read = c.get(f"/v1/tables/{table['id']}", headers=auth)  # reads go on
        assert read.status_code == 200 and read.get_json()["version"] == 0
    finally:
        server.stop()


def test_the_policy_is_looked_up_once_in_a_while_not_on_every_write(redis_url, redis_client):
    """Each write does not cost an INFO: a worker trusts its last look for EVICTION_CHECK_SECONDS."""
    app = create_app({"TESTING": True, "REDIS_URL": redis_url, "EVICTION_CHECK_SECONDS": 3600})
    c = app.test_client()
    assert c.post("/v1/tables", json=PLAYERS).status_code == 201
    redis_client.config_resetstat()
    for _ in range(3):
        assert c.post("/v1/tables", json=PLAYERS).status_code == 201
    assert "cmdstat_info" not in redis_client.info("commandstats")


def test_readiness_counts_the_replicas_that_min_replicas_needs(tmp_path):
    """With REDIS_MIN_REPLICAS=1 a primary without a connected replica cannot acknowledge a write: not
    ready until one is connected."""
    a = EmbeddedRedis(tmp_path / "a", port=free_port()).start()
    b = EmbeddedRedis(tmp_path / "b", port=free_port()).start()
    try:
        c = create_app({"TESTING": True, "REDIS_URL": a.url, "REDIS_MIN_REPLICAS": 1}).test_client()
        r = c.get("/readyz")
        assert r.status_code == 503 and "0 replica(s) connected" in r.get_json()["checks"]["redis"]
        redis.Redis.from_url(a.url).config_set("repl-diskless-sync-delay", 0)  # the first sync at once, not after 5 s
        redis.Redis.from_url(b.url).replicaof("127.0.0.1", a.port)
        deadline = time.monotonic() + 15
        while c.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, c.get("/readyz").get_json()
            time.sleep(0.1)
        assert c.post("/v1/tables", json=PLAYERS).status_code == 201  # and a write is acknowledged
    finally:
        b.stop()
        a.stop()


def _wait_calls(client: redis.Redis) -> int:
    return client.info("commandstats").get("cmdstat_wait", {}).get("calls", 0)


def _script_calls(client: redis.Redis) -> int:
    """SCRIPT calls of any subcommand (EXISTS, LOAD, ...): Redis 7 counts each apart, 6.2 as one."""
    return sum(v.get("calls", 0) for k, v in client.info("commandstats").items() if k.startswith("cmdstat_script"))


def _replicas_online(client: redis.Redis) -> int:
    info = client.info("replication")
    return sum(
        1 for k, v in info.items() if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online"
    )


def test_a_durable_write_runs_its_script_then_wait_on_the_same_connection(tmp_path):
    """With REDIS_MIN_REPLICAS a write script and WAIT go in one pipeline on the primary: a write is on the
    replica once it is acknowledged; the scripts are loaded at start (no SCRIPT EXISTS before each write),
    and one the primary lost (SCRIPT FLUSH, as after a restart) is loaded again on NOSCRIPT; without a
    replica the write is refused (NotReplicated) though the primary holds it."""
    from service.store import keys
    from service.store.errors import NotReplicated
    from service.store.table_store import TableStore

    a = EmbeddedRedis(tmp_path / "a", port=free_port()).start()
    b = EmbeddedRedis(tmp_path / "b", port=free_port()).start()
    primary, replica = redis.Redis.from_url(a.url), redis.Redis.from_url(b.url)
    try:
        primary.config_set("repl-diskless-sync-delay", 0)  # the first sync at once, not after 5 s
        replica.replicaof("127.0.0.1", a.port)
        deadline = time.monotonic() + 15
        while _replicas_online(primary) < 1:
            assert time.monotonic() < deadline, primary.info("replication")
            time.sleep(0.05)
        store = TableStore(connect(a.url), min_replicas=1, wait_timeout_ms=5000)
        t = store.create(["a", "b", "c", "d"], "xuezhan")
        assert replica.exists(keys.meta(t.id))  # acknowledged: the replica has it
        waits, scripts = _wait_calls(primary), _script_calls(primary)
        w = store.append(t.id, {"type": "round_start"})  # (the scripts were loaded at start: no SCRIPT call)
        assert w.seq == 1 and replica.llen(keys.log(t.id)) == 1
        assert (_wait_calls(primary), _script_calls(primary)) == (waits + 1, scripts)  # EVALSHA and WAIT
        primary.script_flush()
        waits, scripts = _wait_calls(primary), _script_calls(primary)
        w = store.append(t.id, {"type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"})
        assert w.seq == 2 and replica.llen(keys.log(t.id)) == 2
        # NOSCRIPT (nothing run; its WAIT waited for nothing new), SCRIPT LOAD, then EVALSHA and WAIT again
        assert (_wait_calls(primary), _script_calls(primary)) == (waits + 2, scripts + 1)
        replica.replicaof("NO", "ONE")
        while _replicas_online(primary):
            assert time.monotonic() < deadline, primary.info("replication")
            time.sleep(0.05)
        alone = TableStore(connect(a.url), min_replicas=1, wait_timeout_ms=100)
        with pytest.raises(NotReplicated):
            alone.append(t.id, {"type": "round_end"})
        assert primary.llen(keys.log(t.id)) == 3  # written on the primary, not acknowledged
    finally:
        primary.close()
        replica.close()
        b.stop()
        a.stop()
