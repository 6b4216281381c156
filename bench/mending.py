"""Benchmark mending the record (docs/rules.md#s15.2): a correction and a round read on a long table.

    python bench/mending.py [--rounds 200] [--samples 200] [--stakes]

On a private redis-server, a table of ``--rounds`` ended rounds (each: start, two kongs, end;
with ``--stakes``, playing for coins) is built, then, interleaved ``--samples`` times:

1. ``correct_round_1``: ``PUT /v1/tables/{id}/rounds/1/events`` (round 1 rewritten to its own two
   kongs, or to one of them, by turns: every correction moves money), the server-side cost of the
   request through the Flask app (test client: the store's reads, the core, the APPEND script);
2. ``append``: ``POST /v1/tables/{id}/events`` of an ordinary event on a table of the same length,
   the same way, in the same process: the baseline;
3. ``get_round``: ``GET /v1/tables/{id}/rounds/{n}`` of a middle round and of round 1 (corrected once;
   each correction is voided after the sample, unmeasured, so that every sample's is round 1's only one);
4. ``list_rounds``: ``GET /v1/tables/{id}/rounds`` (a page of 100 explained rounds).

Prints one JSON line: the medians in µs (wall time, and ``_cpu_us``: this process's CPU time, which
leaves out Redis and a loaded machine's waits) and ``correct_over_append`` (the target: ≤ 20) and
``get_round_ms`` (the target: ≤ 2 ms).  A correction never replays the later rounds' events: its
cost grows with the number of rounds only by reading and comparing their summaries.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.loopback import PLAYERS, cycle  # noqa: E402


def build(web, rounds: int, stakes: bool) -> tuple[str, dict]:
    """A table of ``rounds`` ended rounds: its id and its write token's header."""
    body = {"players": PLAYERS} | ({"stakes": {"coin_per_point": 10, "fee": 1, "bankrolls": [10**6] * 4}}
                                   if stakes else {})
    created = web.post("/v1/tables", json=body).get_json()
    auth = {"Authorization": "Bearer " + created["token"]}
    events = cycle()
    for _ in range(rounds * 4):
        r = web.post(f"/v1/tables/{created['id']}/events", json=next(events), headers=auth)
        assert r.status_code == 201, r.get_data(as_text=True)
    return created["id"], auth


def run(redis_url: str, rounds: int, samples: int, stakes: bool) -> dict:
    from service.api import create_app
    from service.config import NO_LIMITS

    app = create_app({"REDIS_URL": redis_url, **{var: 0 for var in NO_LIMITS}})
    web = app.test_client()
    corrected, auth = build(web, rounds, stakes)
    appended, auth2 = build(web, rounds, stakes)
    first = web.get(f"/v1/tables/{corrected}/rounds/1", headers=auth).get_json()
    own = [{k: v for k, v in e.items() if k not in ("seq", "index", "transfers")} for e in first["events"]]
    variants = [{"events": own}, {"events": own[:1]}]
    events = cycle()
    for _ in range(rounds * 4):
        next(events)  # (the appended table's stream goes on where it stopped)
    costs: dict[str, list[float]] = {"correct_round_1": [], "append": [], "get_round": [], "get_round_1": [],
                                     "list_rounds": []}
    cpu: dict[str, list[float]] = {name: [] for name in costs}

    def timed(name: str, call) -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        response = call()
        cpu[name].append((time.process_time() - c0) * 1e6)
        costs[name].append((time.perf_counter() - t0) * 1e6)
        assert response.status_code in (200, 201), response.get_data(as_text=True)[:300]

    middle = rounds // 2
    for i in range(samples):
        timed("correct_round_1", lambda i=i: web.put(f"/v1/tables/{corrected}/rounds/1/events",
                                                 json=variants[i % 2], headers=auth))
        timed("append", lambda: web.post(f"/v1/tables/{appended}/events", json=next(events), headers=auth2))
        timed("get_round", lambda: web.get(f"/v1/tables/{corrected}/rounds/{middle}", headers=auth))
        timed("get_round_1", lambda: web.get(f"/v1/tables/{corrected}/rounds/1", headers=auth))
        if i % 10 == 0:
            timed("list_rounds", lambda: web.get(f"/v1/tables/{corrected}/rounds", headers=auth))
        # (not measured) the correction voided: each sample corrects a round that has no other correction
        seq = web.get(f"/v1/tables/{corrected}", headers=auth).get_json()["version"]
        assert web.post(f"/v1/tables/{corrected}/events/{seq}/void", headers=auth).status_code == 201
    med = {name: statistics.median(v) for name, v in costs.items()}
    return {"op": "mending", "rounds": rounds, "stakes": stakes, "samples": samples,
            **{f"{name}_us": round(v, 1) for name, v in med.items()},
            **{f"{name}_cpu_us": round(statistics.median(v), 1) for name, v in cpu.items()},
            "correct_over_append": round(med["correct_round_1"] / med["append"], 2),
            "get_round_ms": round(max(med["get_round"], med["get_round_1"]) / 1000, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--stakes", action="store_true", help="the tables play for coins (every later round's coins "
                                                         "are settled again by a correction)")
    args = ap.parse_args()

    from service.store.embedded import EmbeddedRedis

    with EmbeddedRedis(tempfile.mkdtemp(prefix="bench-redis-")) as server:
        print(json.dumps(run(server.url, args.rounds, args.samples, args.stakes)), flush=True)


if __name__ == "__main__":
    main()
