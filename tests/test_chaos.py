"""Short CI versions of the load and crash runs of tests/chaos.py (the long runs: docs/performance.md).

Each starts a real redis-server and ``python -m service serve`` (2 workers) on loopback.
"""

from __future__ import annotations

import pytest
import redis

from service.store import codec, keys
from tests import chaos

pytestmark = pytest.mark.slow  # (a real server, or long runs: the fast lane leaves it out)


def test_load_run_has_no_errors_and_loses_nothing():
    r = chaos.run(tables=24, clients=4, duration=6, with_faults=False, seed=7)
    assert r["events_ok"] > 100
    assert r["errors"] == 0 and r["rejected_422"] == 0
    assert r["violations"] == 0, r["violation_samples"]
    assert r["log_records"] == r["final"]["ok"]


def test_crash_run_keeps_every_acknowledged_event_exactly_once():
    r = chaos.run(tables=24, clients=4, duration=10, with_faults=True, seed=8)
    assert len(r["faults"]) == 4  # two redis SIGKILLs, two worker SIGKILLs
    assert r["violations"] == 0, r["violation_samples"]
    assert r["rejected_422"] == 0
    assert r["final"]["ok"] > 100


@pytest.mark.parametrize("damage", ["extra", "lost"])
def test_the_checker_catches_damage(damage):
    def tamper(url, tables):
        client = redis.Redis.from_url(url)
        t = next(t for t in tables if any(a["status"] == "ok" for a in t.attempts))
        log = keys.log(t.id)
        if damage == "extra":
            n = client.llen(log)
            client.rpush(log, codec.record({"seq": n + 1, "type": "round_end", "round": 1,
                                            "at": "2026-12-01T00:00:00.000Z"}))
        else:
            client.rpop(log)

    r = chaos.run(tables=6, clients=2, duration=2, with_faults=False, seed=9, tamper=tamper)
    assert r["violations"] >= 1
