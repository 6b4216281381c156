"""Corrections in the table store, on a real Redis (service/store/table_store.py, docs/rules.md#s15.2).

Properties over random valid rounds: whatever mending is accepted (corrections of random rounds,
voids of random records, adjusts, penalties), the stored state and summaries are the fold of the log
(``check``), every round explained adds up to its deltas, and the stream's frames end at the
balances.  Then the long paths: a correction met after a snapshot (a stream opened there, a replay of
its Idempotency-Key) folds from further back.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.rules.errors import EventError
from service.store import keys
from service.store.errors import Conflict, IdempotencyMismatch
from service.store.table_store import TableStore, fingerprint
from tests.test_settle_properties import rounds, voids_arg

NAMES = ["东", "南", "西", "北"]


def explained_adds_up(store: TableStore, tid: str) -> None:
    view = store.get(tid)
    page = store.rounds(tid, 0, 500)
    numbers = [r["number"] for r in page["rounds"]]
    latest = view["round"]["number"] if view["round"] else 0
    assert numbers == list(range(1, latest + 1))
    for r in page["rounds"]:
        sums = [0] * len(view["players"])
        for t in r["transfers"]:
            sums[t["from"]] -= t["points"]
            sums[t["to"]] += t["points"]
        assert sums == r["deltas"], r
        assert r["transfers"] == [t for e in r["events"] for t in e["transfers"]]
        assert r == store.round(tid, r["number"])


@settings(deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(rounds(), rounds(mode="xueliu"), rounds(players=3)), st.booleans(),
       st.lists(st.tuples(st.integers(0, 4), st.integers(0, 10 ** 6)), min_size=1, max_size=8))
def test_a_table_mended_at_random_in_redis_is_the_fold_of_its_log(redis_client, case, stakes, moves):
    spec, m = case
    store = TableStore(redis_client)
    tid = store.create(NAMES[:m.n], spec, m.dealer, stakes={"coin_per_point": 10, "fee": 3,
                                                             "bankrolls": [200] * m.n} if stakes else None).id
    variants = [m.events, m.events[:len(m.events) // 2], [], m.events[-1:]]
    for k in range(2):
        store.append(tid, {"type": "round_start", "dealer": m.dealer if k == 0 else None, "voids": voids_arg(m)})
        for ev in m.events:
            try:
                store.append(tid, ev)
            except EventError:
                break
        if store.get(tid)["round"]["status"] == "playing":
            store.append(tid, {"type": "round_end"})
    for what, pick in moves:
        view = store.get(tid)
        try:
            if what <= 1:
                number = 1 + pick % view["round"]["number"]
                body = {"events": variants[pick % len(variants)]} | ({"dealer": m.dealer} if pick % 5 == 0 else {})
                store.correct(tid, number, body, idempotency_key=f"fix-{pick}",
                              fp=fingerprint("PUT", f"/{number}", body))
            elif what == 2:
                store.void(tid, 1 + pick % view["version"])
            elif what == 3:
                store.append(tid, {"type": "adjust", "transfers": [{"from": pick % m.n, "to": (pick + 1) % m.n,
                                                                    "points": 1 + pick % 9}]})
            else:
                store.append(tid, {"type": "round_start", "dealer": m.dealer})
                store.append(tid, {"type": "penalty", "seat": pick % m.n, "kind": "zhahu"})
                store.append(tid, {"type": "round_end"})
        except (EventError, Conflict, IdempotencyMismatch):  # (a key used again for another round: refused)
            pass
        report = store.check(tid)
        assert report["ok"], report
    explained_adds_up(store, tid)
    frames = [f for chunk in store.stream_records(tid, 0) for f in chunk]
    assert frames[-1]["balances"] == store.get(tid)["balances"]


def test_a_correction_after_a_snapshot_streams_and_replays_from_further_back(redis_client):
    """40 rounds (160 records: a snapshot at 128), then round 1 corrected (161): a stream opened after the
    snapshot folds from the start to send it (its round ended long before the snapshot), and so does a
    late replay of its Idempotency-Key."""
    store = TableStore(redis_client)
    tid = store.create(NAMES, "xuezhan").id
    for n in range(40):
        t = n % 9 + 1
        for ev in ({"type": "round_start"}, {"type": "kong", "seat": n % 4, "kind": "concealed", "tile": f"{t}m"},
                   {"type": "kong", "seat": (n + 1) % 4, "kind": "direct", "tile": f"{t}p", "from": (n + 2) % 4},
                   {"type": "round_end"}):
            store.append(tid, ev)
    assert redis_client.hexists(keys.snapshots(tid), "128")
    body = {"events": [{"type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"}]}
    fp = fingerprint("PUT", "/v1/tables/x/rounds/1/events", body)
    first = store.correct(tid, 1, body, idempotency_key="late", fp=fp)
    assert first.seq == 161 and first.changes == [
        0,
        -6,
        6,
        0,
    ]  # (round 1's direct kong, 6 from seat 2 to seat 1, is gone)
    frames = [f for chunk in store.stream_records(tid, 150) for f in chunk]
    assert [f["seq"] for f in frames] == list(range(151, 162))
    assert frames[-1]["type"] == "correction" and frames[-1]["balances"] == first.balances
    other = TableStore(redis_client)  # (another worker: no kept state, the replay is decided on what Redis holds)
    for ev in ({"type": "round_start"}, {"type": "kong", "seat": 2, "kind": "concealed", "tile": "9s"}):
        other.append(tid, ev)
    again = other.correct(tid, 1, body, idempotency_key="late", fp=fp)
    assert again.replayed and again.as_dict() == first.as_dict()
    assert store.check(tid)["ok"]
    explained_adds_up(store, tid)
