"""Tests for service.store.embedded.EmbeddedRedis against a real redis-server."""

from __future__ import annotations

import os
import re

import pytest
import redis

from service.store.embedded import (
    EmbeddedRedis,
    EmbeddedRedisError,
    find_redis_server,
)


def _client(server: EmbeddedRedis) -> redis.Redis:
    return redis.Redis.from_url(server.url, decode_responses=True)


@pytest.fixture
def server(tmp_path, free_port):
    srv = EmbeddedRedis(tmp_path / "data", port=free_port)
    yield srv
    srv.stop()


def test_url_format(tmp_path, free_port):
    srv = EmbeddedRedis(tmp_path, port=free_port)
    assert srv.url == f"redis://127.0.0.1:{free_port}/0"
    auto = EmbeddedRedis(tmp_path)
    assert re.fullmatch(r"redis://127\.0\.0\.1:\d+/0", auto.url)
    assert auto.url == auto.url  # the picked port is stable


def test_start_set_get_stop(server):
    assert not server.running
    server.start()
    assert server.running and server.pid
    client = _client(server)
    assert client.ping()
    assert client.set("k", "v")
    assert client.get("k") == "v"
    cfg = client.config_get("*")
    assert cfg["appendonly"] == "yes"
    assert cfg["appendfsync"] == "always"
    assert cfg["save"] == ""
    assert cfg["bind"] == "127.0.0.1"
    assert cfg["protected-mode"] == "yes"
    assert cfg["dir"] == str(server.data_dir)
    client.close()
    server.stop()
    assert not server.running
    assert server.pid is None
    server.stop()  # idempotent


def test_context_manager(tmp_path, free_port):
    with EmbeddedRedis(tmp_path, port=free_port) as srv:
        assert _client(srv).ping()
        pid = srv.pid
    assert not srv.running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_stop_and_restart_keeps_data(server):
    server.start()
    port = server.port
    client = _client(server)
    client.set("a", "1")
    client.rpush("list", "x", "y")
    client.close()

    server.stop()
    server.start()
    assert server.port == port
    client = _client(server)
    assert client.get("a") == "1"
    assert client.lrange("list", 0, -1) == ["x", "y"]
    client.close()

    server.restart()
    assert _client(server).get("a") == "1"
    assert (server.data_dir / "appendonlydir").is_dir() or any(
        server.data_dir.glob("*.aof")
    )


def test_kill_then_restart_keeps_acknowledged_writes(server):
    server.start()
    client = _client(server)
    for i in range(200):
        client.set(f"key:{i}", i)
    client.hset("h", mapping={"f": "v"})
    client.close()

    server.kill()
    assert not server.running

    server.restart()
    client = _client(server)
    assert client.dbsize() == 201
    assert client.get("key:199") == "199"
    assert client.hgetall("h") == {"f": "v"}
    client.close()


def test_new_instance_on_same_directory_sees_data(tmp_path, free_port):
    with EmbeddedRedis(tmp_path, port=free_port) as srv:
        _client(srv).set("persist", "yes")
    with EmbeddedRedis(tmp_path) as srv2:  # other port, same directory
        assert _client(srv2).get("persist") == "yes"


def test_log_file_written(server):
    server.start()
    server.stop()
    assert server.log_path.is_file()
    assert "Ready to accept connections" in server.log_path.read_text()


def test_port_in_use_is_refused(server, tmp_path):
    server.start()
    other = EmbeddedRedis(tmp_path / "other", port=server.port)
    with pytest.raises(EmbeddedRedisError, match="already in use"):
        other.start()
    assert not other.running


def test_startup_failure_reports_log(tmp_path, free_port):
    srv = EmbeddedRedis(
        tmp_path, port=free_port, extra_args=["--no-such-directive", "1"]
    )
    with pytest.raises(EmbeddedRedisError) as info:
        srv.start()
    assert "no-such-directive" in str(info.value).lower() or "exited" in str(info.value)
    assert not srv.running


def test_missing_binary_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("REDIS_SERVER_BIN", str(tmp_path / "nope"))
    with pytest.raises(EmbeddedRedisError, match="REDIS_SERVER_BIN"):
        find_redis_server()


def test_binary_from_env(monkeypatch):
    real = find_redis_server()
    monkeypatch.setenv("REDIS_SERVER_BIN", real)
    assert find_redis_server() == real


def test_shared_fixture_is_flushed(redis_client):
    assert redis_client.dbsize() == 0
    redis_client.set("leftover", 1)


def test_shared_fixture_is_flushed_again(redis_client):
    assert redis_client.dbsize() == 0


# -- the data directory is owned by one server at a time ------------------------------------------
def test_a_second_server_on_the_same_directory_is_refused(tmp_path, free_port):
    from service.store.embedded import running_url

    first = EmbeddedRedis(tmp_path, port=free_port)
    second = EmbeddedRedis(tmp_path)
    assert running_url(tmp_path) is None
    with first:
        with pytest.raises(EmbeddedRedisError, match=f"in use by process {os.getpid()}.*{first.url}"):
            second.start()
        assert not second.running
        assert running_url(tmp_path) == first.url
        first.kill()  # a crash of the server alone keeps the directory owned
        with pytest.raises(EmbeddedRedisError, match="in use"):
            second.start()
        first.restart()
        assert _client(first).ping()
    assert running_url(tmp_path) is None
    with second:  # released by stop
        assert running_url(tmp_path) == second.url


def test_a_redis_server_left_by_a_crashed_owner_is_stopped_before_a_new_start(tmp_path, free_port):
    """The owner is killed with SIGKILL and its redis-server lives on: the next start shuts it
    down (SIGTERM: its AOF is complete) rather than run a second server on the same files."""
    import signal
    import subprocess
    import sys

    code = (f"from service.store.embedded import EmbeddedRedis; import os, signal, redis; "
            f"s = EmbeddedRedis({str(tmp_path)!r}, port={free_port}).start(); "
            f"redis.Redis.from_url(s.url).set('kept', 'yes'); print(s.pid, flush=True); "
            f"os.kill(os.getpid(), signal.SIGKILL)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == -signal.SIGKILL
    orphan = int(out.stdout.split()[0])
    assert _alive(orphan)  # still running, reparented
    with EmbeddedRedis(tmp_path) as srv:
        assert not _alive(orphan)
        assert _client(srv).get("kept") == "yes"


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie nobody has reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_maxmemory_with_noeviction(tmp_path, free_port):
    with EmbeddedRedis(tmp_path, port=free_port, maxmemory=8 * 1024 * 1024) as srv:
        cfg = _client(srv).config_get("maxmemory*")
        assert cfg["maxmemory"] == str(8 * 1024 * 1024) and cfg["maxmemory-policy"] == "noeviction"
