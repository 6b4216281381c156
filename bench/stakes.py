"""What stakes cost on a table's hot path: one append as the store does it, with and without stakes.

    python bench/stakes.py [--rounds 200] [--reps 7]

An append reads the stored state (``TableState.from_dict`` of its JSON), steps one record and
writes the state back (``to_dict`` then JSON).  The same log (rounds of a concealed kong and
three self-drawn wins in 血战: the last one ends the round and settles its coins) is appended
at a table without stakes and at one with stakes, interleaved, ``reps`` times; prints one JSON
line: the median µs per append of each and their ratio (stakes / none).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from service.rules.table import TableState  # noqa: E402

NAMES = ["东", "南", "西", "北"]
STAKES = {"coin_per_point": 200, "fee": 400, "bankrolls": [10**9] * 4}


def log(rounds: int) -> list[dict]:
    out: list[dict] = []
    for i in range(rounds):
        out.append({"type": "round_start"})
        out.append({"type": "kong", "seat": i % 4, "kind": "concealed", "tile": "5m"})
        for seat in range(3):
            out.append({"type": "hu", "from": None, "tile": "5p", "winners": [{"seat": seat, "fan": 2}]})
    return out


def appends_us(records: list[dict], stakes: dict | None) -> float:
    """Mean µs per append over the whole log (state read, record stepped, state written)."""
    stored = json.dumps(TableState.new(NAMES, "xuezhan", 0, stakes).to_dict())
    clock = time.perf_counter_ns
    t0 = clock()
    for seq, rec in enumerate(records, 1):
        st = TableState.from_dict(json.loads(stored))
        st.step(rec, seq)
        stored = json.dumps(st.to_dict())
    return (clock() - t0) / len(records) / 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    records = log(args.rounds)
    without, with_ = [], []
    for _ in range(args.reps):
        without.append(appends_us(records, None))
        with_.append(appends_us(records, STAKES))
    a, b = statistics.median(without), statistics.median(with_)
    print(json.dumps({"op": "append", "none_us": round(a, 1), "stakes_us": round(b, 1), "ratio": round(b / a, 3),
                      "records": len(records)}))


if __name__ == "__main__":
    main()
