"""``python -m service serve`` and ``check-tables`` around the embedded Redis (real subprocesses).

One data directory belongs to one ``serve``; a busy port is
refused before Redis starts; ``check-tables`` finds the running service's
Redis by itself (item 8); the embedded Redis has a memory bound (item 12).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
import redis

from service.store.embedded import running_url
from tests.service_process import ROOT, Service, append, free_port, new_table, redis_servers_on, service_env

pytestmark = pytest.mark.slow  # (a real server, or long runs: the fast lane leaves it out)


def run(*args: str, env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "service", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_one_serve_per_data_directory_and_check_tables_finds_it(tmp_path):
    data = (tmp_path / "redis-data").resolve()
    env = service_env(REDIS_DATA_DIR=str(data), REDIS_MAXMEMORY="64mb")
    srv = Service(free_port(), env, tmp_path / "service.log").start()
    try:
        [pid] = redis_servers_on(data)
        url = running_url(data)
        assert url
        config = redis.Redis.from_url(url).config_get("maxmemory*")
        assert (config["maxmemory"], config["maxmemory-policy"]) == (str(64 * 1024 * 1024), "noeviction")

        # a second serve in the same folder: a clear message, exit 2, no second redis-server
        second = run("serve", "--port", str(free_port()), env=env)
        assert second.returncode == 2, second.stderr
        assert f"{data} is in use by process {srv.proc.pid}" in second.stderr
        assert "Traceback" not in second.stderr
        assert redis_servers_on(data) == [pid]

        # check-tables on the running service's Redis, found through the data directory
        t, auth = new_table(srv)
        append(srv, t, auth, {"type": "round_start"})
        append(srv, t, auth, {"type": "kong", "seat": 1, "kind": "concealed", "tile": "4s"})
        check = run("check-tables", env=env)
        assert check.returncode == 0, check.stderr
        [report] = [json.loads(line) for line in check.stdout.splitlines()]
        assert report == {"id": t["id"], "version": 2, "ok": True, "repaired": False,
                          "balances": [-12, 36, -12, -12]}
        assert srv.request("GET", "/readyz")[0] == 200
    finally:
        assert srv.stop() == 0
    assert running_url(data) is None


def test_check_tables_without_a_running_service_opens_the_data_directory_itself(tmp_path):
    data = (tmp_path / "redis-data").resolve()
    env = service_env(REDIS_DATA_DIR=str(data))
    srv = Service(free_port(), env, tmp_path / "service.log").start()
    try:
        t, auth = new_table(srv)
        append(srv, t, auth, {"type": "round_start"})
    finally:
        srv.stop()
    check = run("check-tables", env=env)
    assert check.returncode == 0, check.stderr
    assert [json.loads(line)["id"] for line in check.stdout.splitlines()] == [t["id"]]
    assert not redis_servers_on(data) and running_url(data) is None


def test_serve_on_a_busy_port_fails_before_starting_redis(tmp_path):
    data = tmp_path / "redis-data"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run("serve", "--port", str(port), env=service_env(REDIS_DATA_DIR=str(data)))
    assert result.returncode == 2
    assert f"127.0.0.1:{port} is already in use" in result.stderr and "Traceback" not in result.stderr
    assert not data.exists()  # no redis-server was started there


def test_serve_rejects_an_out_of_range_option_or_memory_bound(tmp_path):
    env = service_env(REDIS_DATA_DIR=str(tmp_path / "data"))
    result = run("serve", "--port", "70000", env=env)
    assert result.returncode == 2 and "port must be an integer from 0 to 65535" in result.stderr
    result = run("serve", "--port", str(free_port()), env={**env, "REDIS_MAXMEMORY": "lots"})
    assert result.returncode == 2 and "REDIS_MAXMEMORY" in result.stderr
    assert not (tmp_path / "data").exists()
