"""Load and crash test of the table log, with a Jepsen-style checker (loopback only).

    python tests/chaos.py [--tables 200] [--clients 16] [--duration 60] [--faults]
    python tests/chaos.py --topology cluster|sentinel [--instances 2] [--min-replicas 1] --failover
    python tests/chaos.py --topology cluster --shared [--instances 2]

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

With ``--topology cluster`` (3 primaries, 3 replicas) or ``sentinel`` (a
primary, a replica, three sentinels) the service runs on that Redis, as
``--instances`` instances (each attempt goes to one of them at random, as
behind a load balancer), with ``REDIS_MIN_REPLICAS=--min-replicas``.  With
``--failover``, a third of the way in, the primary that holds the busiest
table is killed with SIGKILL (with ``--lag S``, S seconds before that its
replica is frozen with SIGSTOP and the primary drops its link, so that the
writes of those S seconds reach the primary only; the replica is thawed at the
kill: a replica that has fallen behind, as over a slow or broken link); its replica is promoted automatically (cluster
fail-over, or the sentinels'), the killed server is started again (it comes
back as a replica) and the run goes on.  The result adds the time from the
kill to the promotion and to the first acknowledged write on a table of the
killed primary, and the acknowledged events lost and seqs acknowledged twice.

``--shared``: every table is written by ``--writers`` threads at once through
all instances (no client owns a table): each acknowledged event must be in
the log once, at its seq, the log must hold nothing else, and the balances
must equal the fold.

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
from typing import NotRequired, TypedDict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from service.rules.errors import EventError  # noqa: E402
from service.rules.table import TableState  # noqa: E402
from service.rules.tiles import TILES  # noqa: E402
from tests.loopback import Client, free_port, percentile, start_service, stop_service, worker_pids  # noqa: E402

PLAYERS = ["东", "南", "西", "北"]
RULESETS = ["xuezhan", "normal", {"preset": "xuezhan", "zimo": "base", "cap": 4}]


def candidate(st: TableState, rng: random.Random) -> dict:
    """A random event that may or may not be valid for ``st``."""
    if not st.playing:
        return {"type": "round_start"} if rng.random() < 0.7 else {
            "type": "round_start", "dealer": rng.randrange(4),
            "voids": [rng.choice(["m", "p", "s", None]) for _ in range(4)]}
    if st.round is None:  # (a table playing has its round)
        raise ValueError("a table playing without its round")
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


class Attempt(TypedDict):
    """The posting of one logical event: its body and key; its status (None until known); when ok, its seq,
    when it was acked and when that request was sent (monotonic); when it was first sent."""

    body: dict
    key: str
    status: str | None
    seq: int | None
    at: float | None
    first_sent: float | None
    sent: NotRequired[float]


class Table:
    def __init__(self, tid: str, token: str, ruleset) -> None:
        self.id, self.token = tid, token
        self.state = TableState.new(PLAYERS, ruleset, 0)
        self.attempts: list[Attempt] = []  # one per logical event


class Runner:
    def __init__(self, ports: int | list[int], deadline: float, seed: int) -> None:
        self.ports = [ports] if isinstance(ports, int) else list(ports)
        self.deadline, self.seed = deadline, seed
        self.latencies: list[float] = []
        self.first_outcomes = {"ok": 0, "failed": 0, "unknown": 0}
        self.final = {"ok": 0, "failed": 0, "unknown": 0}
        self.rejected = 0  # 422s: the service disagreed with the client's model
        self.lock = threading.Lock()

    def play(self, tables: list[Table], n: int) -> None:
        rng = random.Random(self.seed * 1000 + n)
        clients = [Client(port, timeout=5) for port in self.ports]
        while time.monotonic() < self.deadline:
            t = rng.choice(tables)
            body = next_event(t.state, rng)
            key = uuid.uuid4().hex
            attempt: Attempt = {"body": body, "key": key, "status": None, "seq": None, "at": None, "first_sent": None}
            t.attempts.append(attempt)
            first = True
            while True:
                c = rng.choice(clients)  # each attempt to any instance, as behind a load balancer
                t0, sent = time.perf_counter(), time.monotonic()
                if attempt["first_sent"] is None:
                    attempt["first_sent"] = sent
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
                    attempt["status"], attempt["seq"], attempt["sent"] = "ok", resp["seq"], sent
                    attempt["at"] = time.monotonic()
                    t.state.step(body, resp["seq"])
                    break
                if outcome == "failed":
                    attempt["status"] = "failed"
                    break
                if time.monotonic() > self.deadline + 30:
                    attempt["status"] = "unknown"
                    break
                time.sleep(0.05)
            final = attempt["status"]
            assert final is not None  # (every way out of the loop above sets it)
            with self.lock:
                self.final[final] += 1
            if attempt["status"] != "ok":
                self.resync(c, t)
        for c in clients:
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
    from collections import Counter

    from service.store.redis_client import connect
    from service.store.table_store import TableStore

    store = TableStore(connect(redis_url, socket_timeout=30))
    c = Client(port, timeout=10)
    violations: list[str] = []
    records_total = lost = reused = extra = 0
    for t in tables:
        log = read_log(c, t)
        records_total += len(log)
        bodies = [{k: v for k, v in r.items() if k not in ("seq", "at", "round")} for r in log]
        i = 0
        for a in t.attempts:
            here = i < len(bodies) and bodies[i] == a["body"]
            if a["status"] == "ok":
                if not here or log[i]["seq"] != a["seq"]:
                    lost += 1
                    violations.append(f"{t.id}: acknowledged event (seq {a['seq']}) missing or moved")
                    continue
                i += 1
            elif a["status"] == "unknown" and here:
                i += 1
            # a refused event must not be there: if it were, the next acknowledged
            # event would not match its seq and the log would hold an extra record
        acked = Counter(a["seq"] for a in t.attempts if a["status"] == "ok")
        twice = sum(n - 1 for n in acked.values() if n > 1)
        if twice:
            reused += twice
            violations.append(f"{t.id}: {twice} seq(s) acknowledged for two different events")
        if i != len(bodies):
            extra += len(bodies) - i
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
    return {"tables_checked": len(tables), "records": records_total, "violations": violations,
            "acknowledged_lost": lost, "seqs_acknowledged_twice": reused, "unaccounted_records": extra}


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


def failover(group, topology: str, tables: list[Table], start: float, duration: float, out: dict,
             lag: float = 0.0) -> None:
    """SIGKILL the primary of the busiest table, wait for the automatic promotion, start the killed
    server again (it comes back as a replica).  With ``lag`` > 0 its replica is frozen (SIGSTOP) that
    many seconds before the kill, its link cut, and thawed at the kill: a replica that has fallen behind."""
    from service.store import keys

    delay = start + duration / 3 - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    busiest = max(tables, key=lambda t: sum(a["status"] == "ok" for a in t.attempts))
    if topology == "cluster":
        victim = group.owner(keys.meta(busiest.id))
        replica = group.replica_of(victim)
        out["tables_on_victim"] = [t.id for t in tables if group.owner(keys.meta(t.id)).port == victim.port]
    else:
        victim = group.master()
        out["tables_on_victim"] = [t.id for t in tables]
    if topology != "cluster":
        replica = next(x for x in group.servers if x.port != victim.port)
    if lag > 0:
        import redis

        os.kill(replica.pid, signal.SIGSTOP)
        admin = redis.Redis(host="127.0.0.1", port=victim.port)
        try:  # the link is cut and the frozen replica cannot reconnect
            admin.execute_command("CLIENT", "KILL", "TYPE", "slave")
        except Exception:
            os.kill(replica.pid, signal.SIGCONT)
            raise
        finally:
            admin.close()
        out["cut_at"] = time.monotonic()
        out["log"].append(f"{time.monotonic() - start:.1f}s: its replica {replica.port} cut off for {lag} s")
        time.sleep(lag)
    killed = time.monotonic()
    victim.kill()
    if lag > 0:
        os.kill(replica.pid, signal.SIGCONT)
    out["killed_at"] = killed
    out["log"].append(f"{killed - start:.1f}s: primary {victim.port} (holds table {busiest.id}) killed (SIGKILL)")
    if topology == "cluster":
        group.wait_promoted(replica)
    else:
        group.wait_failover(victim.port)
    out["promoted_s"] = round(time.monotonic() - killed, 2)
    out["log"].append(f"{time.monotonic() - start:.1f}s: its replica promoted")
    victim.start()
    group.wait_healthy()
    out["rejoined_s"] = round(time.monotonic() - killed, 2)
    out["log"].append(f"{time.monotonic() - start:.1f}s: the killed server is back, as a replica")


def _redis(topology: str):
    """(server or group, its URL, a stop function) for a fresh Redis of ``topology``."""
    from service.store.embedded import EmbeddedRedis

    if topology == "single":
        server = EmbeddedRedis(tempfile.mkdtemp(prefix="chaos-redis-")).start()
        return server, server.url
    from tests.topologies import Cluster, SentinelGroup

    group = (Cluster() if topology == "cluster" else SentinelGroup()).start()
    return group, group.url


def run(tables: int = 200, clients: int = 16, duration: float = 60.0, with_faults: bool = False,
        seed: int = 1, workers: int = 2, tamper=None, topology: str = "single", instances: int = 1,
        min_replicas: int = 0, with_failover: bool = False, lag: float = 0.0) -> dict:
    """One run; ``tamper(redis_url, tables)``, if given, is called before the check (tests use it
    to prove that the checker catches a lost or extra record)."""
    server, url = _redis(topology)
    env = {"REDIS_MIN_REPLICAS": str(min_replicas)}
    ports = [free_port() for _ in range(instances)]
    procs = []
    try:
        for port in ports:
            procs.append(start_service(port, url, workers=workers, extra_env=env))
        c = Client(ports[0])
        rng = random.Random(seed)
        all_tables = []
        for _ in range(tables):
            ruleset = rng.choice(RULESETS)
            status, _, body = c.request("POST", "/v1/tables", {"players": PLAYERS, "ruleset": ruleset})
            assert status == 201, body
            all_tables.append(Table(body["id"], body["token"], ruleset))
        c.close()
        start = time.monotonic()
        runner = Runner(ports, start + duration, seed)
        groups = [all_tables[i::clients] for i in range(clients)]
        threads = [threading.Thread(target=runner.play, args=(g, n)) for n, g in enumerate(groups)]
        fault_log: list[str] = []
        fo: dict = {"log": fault_log}
        if with_faults:
            threads.append(threading.Thread(target=faults, args=(server, procs[0].pid, start, duration, fault_log)))
        if with_failover:
            threads.append(threading.Thread(target=failover, args=(server, topology, all_tables, start, duration, fo,
                                                                   lag)))
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        elapsed = time.monotonic() - start
        if topology == "single" and not server.running:
            server.start()
        if tamper is not None:
            tamper(url, all_tables)
        result = check(ports[0], url, all_tables)
        ok = runner.final["ok"]
        out = {
            "op": "failover" if with_failover else "chaos" if with_faults else "load", "topology": topology,
            "instances": instances, "min_replicas": min_replicas, "replica_lag_s": lag, "tables": tables,
            "clients": clients,
            "duration_s": round(elapsed, 1), "events_ok": ok, "events_per_s": round(ok / elapsed, 1),
            "p50_ms": round(percentile(runner.latencies, 50), 2), "p99_ms": round(percentile(runner.latencies, 99), 2),
            "first_attempts": runner.first_outcomes, "final": runner.final, "rejected_422": runner.rejected,
            "errors": runner.first_outcomes["failed"] + runner.first_outcomes["unknown"],
            "faults": fault_log, "log_records": result["records"],
            "acknowledged_lost": result["acknowledged_lost"],
            "seqs_acknowledged_twice": result["seqs_acknowledged_twice"],
            "unaccounted_records": result["unaccounted_records"],
            "violations": len(result["violations"]), "violation_samples": result["violations"][:5],
        }
        if with_failover and "killed_at" in fo:
            on_victim = set(fo["tables_on_victim"])
            after = [a["at"] for t in all_tables if t.id in on_victim for a in t.attempts
                     if a["status"] == "ok" and a["at"] is not None and a["sent"] > fo["killed_at"]]
            out.update(promoted_s=fo.get("promoted_s"), rejoined_s=fo.get("rejoined_s"),
                       first_write_after_kill_s=round(min(after) - fo["killed_at"], 2) if after else None)
            if "cut_at" in fo:  # acknowledged while only the primary could have them
                cut_off = [a for t in all_tables if t.id in on_victim for a in t.attempts
                           if fo["cut_at"] <= a["first_sent"] <= fo["killed_at"]]
                out["sent_while_cut_off"] = len(cut_off)
                out["acknowledged_while_cut_off"] = sum(
                    1 for a in cut_off if a["status"] == "ok" and a["at"] <= fo["killed_at"])
        return out
    finally:
        for proc in procs:
            stop_service(proc)
        server.stop()


def shared(tables: int = 4, writers: int = 4, duration: float = 8.0, topology: str = "cluster",
           instances: int = 2, workers: int = 1, seed: int = 1) -> dict:
    """``writers`` threads per table, through every instance at once (see the module doc)."""
    from collections import Counter

    from service.store.redis_client import connect
    from service.store.table_store import TableStore

    server, url = _redis(topology)
    ports = [free_port() for _ in range(instances)]
    procs = []
    try:
        for port in ports:
            procs.append(start_service(port, url, workers=workers))
        c = Client(ports[0])
        made = []
        for _ in range(tables):
            status, _, body = c.request("POST", "/v1/tables", {"players": PLAYERS})
            assert status == 201, body
            made.append(body)
        c.close()
        acked: dict[str, list[tuple[int, dict]]] = {t["id"]: [] for t in made}
        outcomes: Counter = Counter()
        lock = threading.Lock()
        stop_at = time.monotonic() + duration

        def write(t: dict, n: int) -> None:
            rng = random.Random(seed * 1000 + n)
            conns = [Client(port, timeout=10) for port in ports]
            auth = {"Authorization": "Bearer " + t["token"]}
            while time.monotonic() < stop_at:
                r = rng.random()
                body = (
                    {"type": "round_start"}
                    if r < 0.2
                    else {"type": "round_end"}
                    if r < 0.3
                    else {
                        "type": "kong",
                        "seat": rng.randrange(4),
                        "kind": "concealed",
                        "tile": str(TILES[rng.randrange(27)]),
                    }
                )
                key = uuid.uuid4().hex
                while True:
                    conn = conns[n % len(conns)] if rng.random() < 0.5 else rng.choice(conns)
                    try:
                        status, _, resp = conn.request("POST", f"/v1/tables/{t['id']}/events", body,
                                                       {**auth, "Idempotency-Key": key})
                    except Exception:
                        status, resp = None, None
                    if status == 201:
                        with lock:
                            acked[t["id"]].append((resp["seq"], body))
                            outcomes["acknowledged"] += 1
                        break
                    if status is not None and 400 <= status < 500:
                        with lock:
                            outcomes[str(status)] += 1
                        break
                    with lock:
                        outcomes["retried"] += 1
                    time.sleep(0.02)
            for conn in conns:
                conn.close()

        threads = [threading.Thread(target=write, args=(t, i * writers + w))
                   for i, t in enumerate(made) for w in range(writers)]
        t0 = time.monotonic()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        elapsed = time.monotonic() - t0
        store = TableStore(connect(url, socket_timeout=30))
        c = Client(ports[-1])
        problems: list[str] = []
        for t in made:
            log = read_log(c, Table(t["id"], t["token"], "xuezhan"))
            seqs = Counter(seq for seq, _ in acked[t["id"]])
            if any(n > 1 for n in seqs.values()):
                problems.append(f"{t['id']}: a seq acknowledged twice")
            for seq, body in acked[t["id"]]:
                rec = log[seq - 1] if seq <= len(log) else None
                if rec is None or {k: v for k, v in rec.items() if k not in ("seq", "at", "round")} != body:
                    problems.append(f"{t['id']}: acknowledged seq {seq} not in the log as acknowledged")
            if len(log) != len(acked[t["id"]]):
                problems.append(f"{t['id']}: {len(log)} records for {len(acked[t['id']])} acknowledged events")
            report = store.check(t["id"])
            status, _, view = c.request(
                "GET", f"/v1/tables/{t['id']}", headers={"Authorization": "Bearer " + t["token"]}
            )
            if not report["ok"] or view["balances"] != report["balances"] or view["version"] != len(log):
                problems.append(f"{t['id']}: the stored state or the balances differ from the fold")
        c.close()
        return {"op": "shared", "topology": topology, "instances": instances, "tables": tables,
                "writers_per_table": writers, "duration_s": round(elapsed, 1),
                "acknowledged": outcomes["acknowledged"], "outcomes": dict(outcomes),
                "violations": len(problems), "violation_samples": problems[:5]}
    finally:
        for proc in procs:
            stop_service(proc)
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=200)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--faults", action="store_true", help="kill redis and a worker during the run")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--topology", choices=["single", "cluster", "sentinel"], default="single")
    ap.add_argument("--instances", type=int, default=1, help="service instances (each attempt to any)")
    ap.add_argument("--workers", type=int, default=2, help="gunicorn workers per instance")
    ap.add_argument("--min-replicas", type=int, default=0, help="REDIS_MIN_REPLICAS of the instances")
    ap.add_argument("--failover", action="store_true", help="SIGKILL the busiest table's primary (cluster/sentinel)")
    ap.add_argument("--lag", type=float, default=0.0,
                    help="--failover: freeze the replica this many seconds before the kill (a lagging replica)")
    ap.add_argument("--shared", action="store_true", help="many writers per table through every instance")
    ap.add_argument("--writers", type=int, default=4, help="--shared: writer threads per table")
    args = ap.parse_args()
    if args.shared:
        result = shared(args.tables, args.writers, args.duration, args.topology, args.instances, args.workers,
                        args.seed)
    else:
        result = run(args.tables, args.clients, args.duration, args.faults, args.seed, args.workers,
                     topology=args.topology, instances=args.instances, min_replicas=args.min_replicas,
                     with_failover=args.failover, lag=args.lag)
    print(json.dumps(result, ensure_ascii=False))


if __name__ == "__main__":
    main()
