"""``python -m service check-tables``: re-fold every log and compare with the stored state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import redis

from service.store import keys
from service.store.tables import TableStore

ROOT = Path(__file__).resolve().parent.parent


def run(redis_url, *args):
    env = {**os.environ, "REDIS_URL": redis_url}
    return subprocess.run([sys.executable, "-m", "service", "check-tables", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_check_tables_finds_and_repairs_a_drifted_state(redis_url):
    client = redis.Redis.from_url(redis_url)
    store = TableStore(client)
    good = store.create(["a", "b", "c", "d"], None).body["id"]
    bad = store.create(["a", "b", "c", "d"], None).body["id"]
    for tid in (good, bad):
        store.append(tid, {"type": "round_start"})
        store.append(tid, {"type": "kong", "seat": 0, "kind": "concealed", "tile": "9s"})
    state = json.loads(client.get(keys.state(bad)))
    state["balances"] = [1, -1, 0, 0]
    client.set(keys.state(bad), json.dumps(state))

    result = run(redis_url)
    reports = {r["id"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert result.returncode == 1
    assert reports[good]["ok"] and not reports[bad]["ok"]
    assert reports[bad]["balances"] == [36, -12, -12, -12]

    result = run(redis_url, bad, "--repair")
    assert result.returncode == 0 and json.loads(result.stdout)["repaired"]
    assert run(redis_url).returncode == 0
    assert store.get(bad)["balances"] == [36, -12, -12, -12]
