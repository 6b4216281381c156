"""Shared pytest fixtures and Hypothesis profiles.

Only the embedded Redis helper is imported here (lazily, inside fixtures), so
collection never depends on the Flask application modules.
"""

from __future__ import annotations

import os
import socket

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    derandomize=True,  # CI is reproducible: the same examples on every run
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
