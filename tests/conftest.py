"""Shared pytest fixtures and Hypothesis profiles.

The service's modules are imported here lazily, inside fixtures, so collection never depends on
the Flask application modules.

The app under test: the ``app`` fixture (and ``client``, its test client) is the one way the tests
make it.  By default it runs on the session's Redis (emptied before the test) with every rate limit
off; a module or a test states what it needs with the ``app`` marker, whose keyword arguments are
configuration on top (``pytest.mark.app(API_KEYS=KEYS, MAX_TABLE_EVENTS=8)``), plus:

* ``store=False``: no Redis (the stateless endpoints only); such an app is made once per module
  and configuration, unless ``fresh=True`` (a test that changes the app itself);
* ``limits=True``: the rate limits as configured (default: off).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from service.store.embedded import free_port as _free_port

settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    derandomize=True,  # CI is reproducible: the same examples on every run
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile("fast", max_examples=25, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_configure(config):
    """The fast lane (``-m "not slow"``) runs each property on fewer examples (the full run: all of them)."""
    if "not slow" in (config.getoption("markexpr") or ""):
        settings.load_profile("fast")


@pytest.fixture
def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free when the fixture ran."""
    return _free_port()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """One private redis-server (AOF on) for the whole test session."""
    from service.store.embedded import EmbeddedRedis

    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"), port=_free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server) -> str:
    """URL of the session Redis, emptied (FLUSHALL) before the test."""
    import redis

    if not redis_server.running:  # a test may have stopped or killed it
        redis_server.start()
    client = redis.Redis.from_url(redis_server.url)
    try:
        client.flushall()
    finally:
        client.close()
    return redis_server.url


@pytest.fixture
def redis_client(redis_url):
    """A redis-py client of the session Redis (emptied before the test)."""
    import redis

    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def redis_clients(redis_url):
    """A factory of redis-py clients of the session Redis (emptied before the test), for a test that
    needs several, such as two table stores standing for two workers: ``redis_clients()`` is a new
    client, with connections of its own; every one is closed after the test."""
    import redis

    made = []

    def new_client():
        made.append(redis.Redis.from_url(redis_url))
        return made[-1]

    yield new_client
    for client in made:
        client.close()


def app_config(marker: pytest.Mark | None) -> tuple[dict, bool, bool]:
    """(configuration, store, fresh) that an ``app`` marker states."""
    from service.config import NO_LIMITS

    config = dict(marker.kwargs) if marker is not None else {}
    store, fresh, limits = config.pop("store", True), config.pop("fresh", False), config.pop("limits", False)
    base = {"TESTING": True} if limits else {"TESTING": True, **{var: 0 for var in NO_LIMITS}}
    return {**base, **config}, store, fresh


@pytest.fixture(scope="session")
def _stateless_apps() -> dict:
    return {}


@pytest.fixture
def app(request, _stateless_apps):
    """The Flask app under test (see the module's docstring for the ``app`` marker)."""
    from service.api import create_app

    config, store, fresh = app_config(request.node.get_closest_marker("app"))
    if not store:
        key = (request.module.__name__, repr(sorted(config.items())))
        if fresh or key not in _stateless_apps:
            _stateless_apps[key] = create_app(config)
        yield _stateless_apps[key]
        return
    made = create_app({**config, "REDIS_URL": request.getfixturevalue("redis_url")})
    yield made
    hub = made.extensions.get("stream_hub")  # the live streams' listener, when a test started it
    if hub is not None:
        hub.close()


@pytest.fixture
def client(app):
    """A test client of ``app``."""
    return app.test_client()


@pytest.fixture
def receiver():
    """A webhook receiver on loopback (tests/receivers.py), closed after the test."""
    from tests.receivers import Receiver

    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def dispatchers(app, redis_url):
    """Start dispatchers on the app's registry (``start(client=None, **options)``: ``client``, the
    dispatcher's redis-py client, else one of its own); all stopped at the end."""
    from service.store.redis_client import connect
    from service.webhooks.dispatcher import Dispatcher, DispatcherOptions

    made: list[Dispatcher] = []

    def start(client=None, **options) -> Dispatcher:
        opts = DispatcherOptions(**{"timeout": 1.0, "backoff_ms": 50, "poll": 0.02, "sweep_every": 3600.0,
                                    "allow_private": True, **options})
        d = Dispatcher(client or connect(redis_url), app.extensions["webhooks"], opts).start()
        made.append(d)
        return d

    yield start
    for d in made:
        d.stop(wait=3.0)


@pytest.fixture
def at_table_read(monkeypatch):
    """``at_table_read(client, action, after=False)``: run ``action()`` once, at the next read of a table
    by a table store on ``client`` (its READ script, ``service.store.keys.READ``): just before the read
    is sent, or (``after``) once it answered.  A test forces an interleaving there, as a slow request
    would meet it; what ``action`` itself sends goes through unhooked.

    The store runs its scripts as redis-py ``Script`` objects, which send ``EVALSHA`` with the client's
    ``evalsha``: that is the method wrapped (for the test only).
    """
    from service.store import keys

    def install(client, action, *, after: bool = False) -> None:
        read = client.register_script(keys.READ).sha
        real = client.evalsha
        fired: list[bool] = []

        def evalsha(sha, numkeys, *keys_and_args):
            if sha != read or fired:
                return real(sha, numkeys, *keys_and_args)
            fired.append(True)
            if not after:
                action()
            result = real(sha, numkeys, *keys_and_args)
            if after:
                action()
            return result

        monkeypatch.setattr(client, "evalsha", evalsha)

    return install


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory):
    """One Redis Cluster (3 primaries, 3 replicas, on free ports) for the whole test session.

    A test that kills a node must leave it healthy again (``cluster.wait_healthy()``).
    """
    from tests.topologies import Cluster

    cluster = Cluster(tmp_path_factory.mktemp("cluster"))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster_url(redis_cluster) -> str:
    """URL of the session cluster (``redis+cluster://...``), every primary emptied before the test."""
    import redis

    redis_cluster.wait_healthy()
    for node in redis_cluster.primaries():
        client = redis.Redis(host="127.0.0.1", port=node.port)
        try:
            client.flushall()
        finally:
            client.close()
    return redis_cluster.url


@pytest.fixture(scope="session")
def redis_sentinel(tmp_path_factory):
    """A primary, a replica and three sentinels (free ports) for the whole session.

    A test that fails the master over must leave the group healthy (``group.wait_healthy()``).
    """
    from tests.topologies import SentinelGroup

    group = SentinelGroup(tmp_path_factory.mktemp("sentinel"))
    group.start()
    try:
        yield group
    finally:
        group.stop()
