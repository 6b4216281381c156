"""The real server: ``python -m service serve`` in a subprocess, over TCP."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from service.config import NO_LIMITS
from tests.served import Served, request

pytestmark = pytest.mark.slow  # (a real server, or long runs: the fast lane leaves it out)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def server(redis_url, tmp_path):
    served = Served(tmp_path / "server.log", {**dict.fromkeys(NO_LIMITS), "REDIS_URL": redis_url}, timeout=30)
    try:
        yield served.port, served.proc, served.log_path
    finally:
        served.stop(timeout=20)


def test_serve_end_to_end(server):
    port, proc, log_path = server
    status, headers, body = request(port, "GET", "/healthz", headers={"X-Request-ID": "e2e-1"})
    assert status == 200 and json.loads(body) == {"status": "ok"} and headers["X-Request-ID"] == "e2e-1"

    status, headers, body = request(port, "POST", "/v1/hands/ting", {"hand": {"tiles": "1112345678999m"}})
    assert status == 200 and headers["Content-Type"] == "application/json"
    data = json.loads(body)
    assert data["ting"] is True and len(data["waits"]) == 9 and data["dajiao"] == {"fan": 4, "points": 48}

    status, headers, body = request(port, "POST", "/v1/hands/ting", b"x" * (70 * 1024))
    assert status == 413 and headers["Content-Type"] == "application/problem+json"

    status, _, body = request(port, "POST", "/v1/hands/ting", b"{oops")
    assert status == 400 and json.loads(body)["code"] == "malformed_json"

    # every worker's requests are counted in /metrics (multiprocess mode): send
    # concurrent requests so that both workers serve some
    # (gunicorn does not promise to spread load, so burst until both have served)
    def access_pids() -> set:
        lines = [json.loads(x) for x in log_path.read_text().splitlines() if x.startswith("{")]
        return {x["pid"] for x in lines if x.get("logger") == "service.access"}

    for _ in range(20):
        with ThreadPoolExecutor(16) as pool:
            statuses = list(pool.map(lambda _: request(port, "GET", "/healthz")[0], range(200)))
        assert statuses == [200] * 200
        if len(access_pids()) == 2:
            break
    status, headers, body = request(port, "GET", "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    text = body.decode()
    match = re.search(r'mahjong_http_requests_total\{endpoint="/healthz",method="GET",status="200"\} (\S+)', text)
    assert match
    counted = float(match.group(1))

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    access = [line for line in lines if line.get("logger") == "service.access"]
    pids = {line["pid"] for line in access}
    assert len(pids) == 2, pids  # both workers served requests...
    healthz = [line for line in access if line["path"] == "/healthz" and line["status"] == 200]
    assert counted == len(healthz) >= 201  # ...and /metrics counted them all
    first = next(line for line in access if line["request_id"] == "e2e-1")
    assert (first["method"], first["path"], first["status"]) == ("GET", "/healthz", 200)
    assert isinstance(first["duration_ms"], float)
    # gunicorn's own messages are JSON lines too (no other line: no plain text, no warning of gevent's), and
    # each worker says the URL it listens on
    others = [line for line in log_path.read_text().splitlines() if line and not line.startswith("{")]
    assert others == [], others
    gunicorn = [line for line in lines if line["logger"] == "gunicorn.error"]
    assert any(line["message"].startswith("Starting gunicorn") for line in gunicorn), gunicorn
    listening = [line for line in gunicorn if line["message"].startswith(f"Listening at: http://127.0.0.1:{port} ")]
    assert len({line["pid"] for line in listening}) == 2, gunicorn  # (both workers)


def test_serve_rejects_bad_configuration(free_port):
    env = {**os.environ, "WORKERS": "zero"}
    result = subprocess.run(
        [sys.executable, "-m", "service", "serve", "--port", str(free_port)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2 and "WORKERS" in result.stderr


def test_gunicorn_level_errors_are_problems_too(redis_url):
    """A request line over gunicorn's limit never reaches Flask: it is still problem+json."""
    served = Served(os.devnull, {**dict.fromkeys(NO_LIMITS), "REDIS_URL": redis_url, "TABLES_PER_HOUR": "0"},
                    workers=1, timeout=30)
    try:
        # a long but acceptable query string reaches the app: a 422 problem for the bad value
        status, headers, body = request(served.port, "GET", "/v1/tables/0123456789abcdef/events?limit=" + "9" * 5000)
        assert status in (401, 422) and headers["Content-Type"] == "application/problem+json"
        # one over the limit is refused by gunicorn itself, as a problem
        status, headers, body = request(served.port, "GET", "/healthz?x=" + "a" * 9000)
        assert status == 414 and headers["Content-Type"] == "application/problem+json"
        problem = json.loads(body)
        assert problem["status"] == 414 and problem["type"] == f"http://127.0.0.1:{served.port}/problems/uri_too_long"
        status, _, body = request(served.port, "GET", "/problems/uri_too_long", headers={"Accept": "application/json"})
        assert status == 200 and json.loads(body)["statuses"] == [414]  # (the type's page)
    finally:
        served.stop(timeout=20)
