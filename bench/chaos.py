"""Load and crash test of the table log, with a Jepsen-style checker (loopback only).

    python bench/chaos.py [--tables 200] [--clients 16] [--duration 60] [--faults]

Starts a private redis-server (AOF, ``appendfsync always``) and ``python -m
service serve`` (2 workers), creates ``--tables`` tables and lets ``--clients``
threads play random valid rounds on them for ``--duration`` seconds (each table
belongs to one client, as a table belongs to one phone at a time).  Every event
is posted with its own ``Idempotency-Key``; an attempt that gets no definite
answer (timeout, dropped connection, 5xx) is *unknown* and is retried with the
same key until it gets one, as a phone would.

With ``--faults``, during the run the redis-server is killed with SIGKILL and
restarted on the same data, and a gunicorn worker is killed with SIGKILL
(each twice).

Afterwards the checker reads every table's log and verifies, per table:
every event acknowledged (201) is in the log exactly once, at the seq it was
acknowledged with; no event that got a definite refusal is; an event whose
attempts stayed unknown is there at most once; the log holds nothing else; and
the stored state equals the fold of the log (balances included, summing to 0).

Prints one JSON line: throughput, latency, attempt outcomes and violations.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.client import Client, free_port, percentile, start_service, stop_service, worker_pids  # noqa: E402
from service.rules.errors import EventError  # noqa: E402
from service.rules.table import TableState  # noqa: E402
from service.rules.tiles import TILES  # noqa: E402

PLAYERS = ["东", "南", "西", "北"]
RULESETS = ["xuezhan", "normal", {"preset": "xuezhan", "zimo": "base", "cap": 4}]


def candidate(st: TableState, rng: random.Random) -> dict:
    """A random event that may or may not be valid for ``st``."""
    if not st.playing:
        return {"type": "round_start"} if rng.random() < 0.7 else {
            "type": "round_start", "dealer": rng.randrange(4),
            "voids": [rng.choice(["m", "p", "s", None]) for _ in range(4)]}
    active = st.round.active
    seat = rng.choice(active)
    others = [s for s in active if s != seat] or [seat]
    tile = str(TILES[rng.randrange(27)])
    r = rng.random()
    if r < 0.30:
        kind = rng.choice(["direct", "added", "concealed"])
        ev = {"type": "kong", "seat": seat, "kind": kind, "tile": tile}
        if kind == "direct":
            ev["from"] = rng.choice(others)
        if kind == "added" and st.round.pengs[seat]:
            ev["tile"] = str(TILES[rng.choice(st.round.pengs[seat])])
        return ev
    if r < 0.55:
        return {"type": "peng", "seat": seat, "tile": tile, "from": rng.choice(others)}
    if r < 0.80:
        frm = None if rng.random() < 0.4 else rng.choice(others)
        return {"type": "hu", "from": frm, "tile": tile, "winners": [{"seat": seat, "fan": rng.randint(1, 6)}]}
    if r < 0.90:
        seats = []
        for s in active:
            status = rng.choice(["ting", "not_ting", "huazhu", "not_ting"])
            entry = {"seat": s, "status": status}
            if status == "ting":
                entry["dajiao_fan"] = rng.randint(1, 5)
            seats.append(entry)
        return {"type": "draw", "seats": seats}
    if r < 0.93:
        return {"type": "escape", "seat": seat}
    return {"type": "round_end"}


def next_event(st: TableState, rng: random.Random) -> dict:
    """A random event that the rules accept in ``st`` (checked with the core)."""
    for _ in range(200):
        ev = candidate(st, rng)
        try:
            st.apply(ev, st.version + 1)
            return ev
        except EventError:
            continue
    return {"type": "round_end"} if st.playing else {"type": "round_start"}


class Table:
    def __init__(self, tid: str, token: str, ruleset) -> None:
        self.id, self.token = tid, token
        self.state = TableState.new(PLAYERS, ruleset, 0)
        self.attempts: list[dict] = []  # one per logical event: body, key, status, seq


class Runner:
    def __init__(self, port: int, deadline: float, seed: int) -> None:
        self.port, self.deadline, self.seed = port, deadline, seed
        self.latencies: list[float] = []
        self.first_outcomes = {"ok": 0, "failed": 0, "unknown": 0}
        self.final = {"ok": 0, "failed": 0, "unknown": 0}
        self.rejected = 0  # 422s: the service disagreed with the client's model
        self.lock = threading.Lock()

    def play(self, tables: list[Table], n: int) -> None:
        rng = random.Random(self.seed * 1000 + n)
        c = Client(self.port, timeout=5)
        while time.monotonic() < self.deadline:
            t = rng.choice(tables)
            body = next_event(t.state, rng)
            key = uuid.uuid4().hex
            attempt = {"body": body, "key": key, "status": None, "seq": None}
            t.attempts.append(attempt)
            first = True
            while True:
                t0 = time.perf_counter()
                try:
                    status, headers, resp = c.request("POST", f"/v1/tables/{t.id}/events", body,
                                                      {"Authorization": "Bearer " + t.token, "Idempotency-Key": key})
                except Exception:  # timeout, reset: no definite answer
                    status, resp = None, None
                elapsed = (time.perf_counter() - t0) * 1000
                outcome = "ok" if status == 201 else "failed" if status and 400 <= status < 500 else "unknown"
                with self.lock:
                    if first:
                        self.first_outcomes[outcome] += 1
                    if outcome == "ok":
                        self.latencies.append(elapsed)
                    if status == 422:
                        self.rejected += 1
                first = False
                if outcome == "ok":
                    attempt["status"], attempt["seq"] = "ok", resp["seq"]
                    t.state.step(body, resp["seq"])
                    break
                if outcome == "failed":
                    attempt["status"] = "failed"
                    break
                if time.monotonic() > self.deadline + 30:
                    attempt["status"] = "unknown"
                    break
                time.sleep(0.05)
            with self.lock:
                self.final[attempt["status"]] += 1
            if attempt["status"] != "ok":
                self.resync(c, t)
        c.close()

    def resync(self, c: Client, t: Table) -> None:
        """Rebuild the client's model from the server's log (after an event with no 201)."""
        from service.rules.table import fold

        records = read_log(c, t)
        t.state, _ = fold(PLAYERS, t.state.ruleset, 0, records)


def read_log(c: Client, t: Table) -> list[dict]:
    records, after = [], 0
    while True:
        for _ in range(100):
            try:
                status, _, page = c.request("GET", f"/v1/tables/{t.id}/events?after={after}&limit=500",
                                            headers={"Authorization": "Bearer " + t.token})
                if status == 200:
                    break
            except Exception:
                pass
            time.sleep(0.1)
        else:
            raise RuntimeError(f"could not read the log of {t.id}")
        records += [{k: v for k, v in r.items() if k != "voided"} for r in page["events"]]
        if page["next"] is None:
            return records
        after = page["next"]


def check(port: int, redis_url: str, tables: list[Table]) -> dict:
    """The Jepsen-style check of every table (see the module doc)."""
    import redis

    from service.store.tables import TableStore

    store = TableStore(redis.Redis.from_url(redis_url))
    c = Client(port, timeout=10)
    violations: list[str] = []
    records_total = 0
    for t in tables:
        log = read_log(c, t)
        records_total += len(log)
        bodies = [{k: v for k, v in r.items() if k not in ("seq", "at", "round")} for r in log]
        i = 0
        for a in t.attempts:
            here = i < len(bodies) and bodies[i] == a["body"]
            if a["status"] == "ok":
                if not here or log[i]["seq"] != a["seq"]:
                    violations.append(f"{t.id}: acknowledged event (seq {a['seq']}) missing or moved")
                    continue
                i += 1
            elif a["status"] == "unknown" and here:
                i += 1
            # a refused event must not be there: if it were, the next acknowledged
            # event would not match its seq and the log would hold an extra record
        if i != len(bodies):
            violations.append(f"{t.id}: {len(bodies) - i} log record(s) no attempt accounts for")
        try:
            report = store.check(t.id)
        except EventError as exc:
            violations.append(f"{t.id}: the log does not fold: {exc}")
            continue
        if not report["ok"]:
            violations.append(f"{t.id}: stored state differs from the fold of the log")
        status, _, view = c.request("GET", f"/v1/tables/{t.id}", headers={"Authorization": "Bearer " + t.token})
        if view["balances"] != report["balances"] or sum(view["balances"]) != 0:
            violations.append(f"{t.id}: balances {view['balances']} != fold {report['balances']}")
    c.close()
    return {"tables_checked": len(tables), "records": records_total, "violations": violations}


def faults(server, service_pid: int, start: float, duration: float, log: list[str]) -> None:
    """SIGKILL redis (then restart it on its data) and a gunicorn worker, twice each."""
    plan = [(0.20, "redis"), (0.40, "worker"), (0.60, "redis"), (0.80, "worker")]
    for at, what in plan:
        delay = start + at * duration - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        if what == "redis":
            server.kill()
            time.sleep(1.0)
            server.start()
            log.append(f"{time.monotonic() - start:.1f}s: redis-server killed (SIGKILL) and restarted")
        else:
            pids = worker_pids(service_pid)
            if pids:
                os.kill(pids[0], signal.SIGKILL)
                log.append(f"{time.monotonic() - start:.1f}s: gunicorn worker {pids[0]} killed (SIGKILL)")


def run(tables: int = 200, clients: int = 16, duration: float = 60.0, with_faults: bool = False,
        seed: int = 1, workers: int = 2, tamper=None) -> dict:
    """One run; ``tamper(redis_url, tables)``, if given, is called before the check (tests use it
    to prove that the checker catches a lost or extra record)."""
    from service.store.embedded import EmbeddedRedis

    server = EmbeddedRedis(tempfile.mkdtemp(prefix="chaos-redis-")).start()
    port = free_port()
    proc = start_service(port, server.url, workers=workers, threads=8)
    try:
        c = Client(port)
        rng = random.Random(seed)
        all_tables = []
        for _ in range(tables):
            ruleset = rng.choice(RULESETS)
            status, _, body = c.request("POST", "/v1/tables", {"players": PLAYERS, "ruleset": ruleset})
            assert status == 201, body
            all_tables.append(Table(body["id"], body["token"], ruleset))
        c.close()
        start = time.monotonic()
        runner = Runner(port, start + duration, seed)
        groups = [all_tables[i::clients] for i in range(clients)]
        threads = [threading.Thread(target=runner.play, args=(g, n)) for n, g in enumerate(groups)]
        fault_log: list[str] = []
        if with_faults:
            threads.append(threading.Thread(target=faults, args=(server, proc.pid, start, duration, fault_log)))
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        elapsed = time.monotonic() - start
        if not server.running:
            server.start()
        if tamper is not None:
            tamper(server.url, all_tables)
        result = check(port, server.url, all_tables)
        ok = runner.final["ok"]
        return {
            "op": "chaos" if with_faults else "load", "tables": tables, "clients": clients,
            "duration_s": round(elapsed, 1), "events_ok": ok, "events_per_s": round(ok / elapsed, 1),
            "p50_ms": round(percentile(runner.latencies, 50), 2), "p99_ms": round(percentile(runner.latencies, 99), 2),
            "first_attempts": runner.first_outcomes, "final": runner.final, "rejected_422": runner.rejected,
            "errors": runner.first_outcomes["failed"] + runner.first_outcomes["unknown"],
            "faults": fault_log, "log_records": result["records"],
            "violations": len(result["violations"]), "violation_samples": result["violations"][:5],
        }
    finally:
        stop_service(proc)
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=200)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--faults", action="store_true", help="kill redis and a worker during the run")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print(json.dumps(run(args.tables, args.clients, args.duration, args.faults, args.seed), ensure_ascii=False))


if __name__ == "__main__":
    main()
