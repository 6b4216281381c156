"""``python -m service check-tables``: re-fold every log and compare with the stored state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from service.store import keys
from service.store.table_store import TableStore

ROOT = Path(__file__).resolve().parent.parent


def run(redis_url, *args):
    env = {**os.environ, "REDIS_URL": redis_url}
    return subprocess.run([sys.executable, "-m", "service", "check-tables", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_check_tables_finds_and_repairs_a_drifted_state(redis_url, redis_client):
    store = TableStore(redis_client)
    good = store.create(["a", "b", "c", "d"], None).id
    bad = store.create(["a", "b", "c", "d"], None).id
    for tid in (good, bad):
        store.append(tid, {"type": "round_start"})
        store.append(tid, {"type": "kong", "seat": 0, "kind": "concealed", "tile": "9s"})
    state = json.loads(redis_client.get(keys.state(bad)))
    state["balances"] = [1, -1, 0, 0]
    redis_client.set(keys.state(bad), json.dumps(state))

    result = run(redis_url)
    reports = {r["id"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert result.returncode == 1
    assert reports[good]["ok"] and not reports[bad]["ok"]
    assert reports[bad]["balances"] == [36, -12, -12, -12]

    result = run(redis_url, bad, "--repair")
    assert result.returncode == 0 and json.loads(result.stdout)["repaired"]
    assert run(redis_url).returncode == 0
    assert store.get(bad)["balances"] == [36, -12, -12, -12]


def test_check_tables_skips_tombstones_and_reports_every_live_table(redis_url, redis_client):
    store = TableStore(redis_client)
    ids = [store.create(["a", "b", "c", "d"], None).id for _ in range(4)]
    for tid in ids:
        store.append(tid, {"type": "round_start"})
    store.delete(ids[0])  # its 24 h tombstone matches the scan
    result = run(redis_url)
    assert result.returncode == 0, result.stderr
    reports = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted(r["id"] for r in reports) == sorted(ids[1:]) and all(r["ok"] for r in reports)
    # an id asked for by name that is not a live table is a failure, not a crash
    result = run(redis_url, ids[1], ids[0])
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert [json.loads(line)["ok"] for line in result.stdout.splitlines()] == [True, False]


def test_check_tables_survives_tables_vanishing_mid_scan(redis_url, redis_client, monkeypatch, capsys):
    """Tables deleted (or expiring) while the scan runs are reported as skipped; the rest are checked."""
    from service.__main__ import check_tables

    store = TableStore(redis_client)
    ids = [store.create(["a", "b", "c", "d"], None).id for _ in range(3)]
    real_check = TableStore.check

    def check(self, table_id, repair=False):
        checked.append(table_id)
        if len(checked) == 1:  # the first check makes the others vanish: one deleted, one expired
            others = [t for t in ids if t != table_id]
            store.delete(others[0])
            redis_client.delete(*redis_client.keys("{t:" + others[1] + "}*"))
        return real_check(self, table_id, repair)

    checked: list[str] = []
    monkeypatch.setattr(TableStore, "check", check)
    monkeypatch.setenv("REDIS_URL", redis_url)
    assert check_tables([], repair=False) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == 3 and lines[0] == {"id": checked[0], "version": 0, "ok": True, "repaired": False,
                                            "balances": [0, 0, 0, 0]}
    assert all(line["skipped"] for line in lines[1:])


def test_a_table_in_a_format_this_version_does_not_read_is_reported_not_a_traceback(
    redis_url, redis_client, monkeypatch, capsys
):
    from service.__main__ import check_tables

    store = TableStore(redis_client)
    t = store.create(["东", "南", "西", "北"], None).id
    store.append(t, {"type": "round_start"})
    redis_client.rpush(keys.log(t), b'{"seq": 2, "type": "round_end"}')  # an earlier form
    monkeypatch.setenv("REDIS_URL", redis_url)
    assert check_tables([t], repair=False) == 1
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["id"] == t and not report["ok"] and "format" in report["error"]
