"""Typical 血战 rounds for the settlement benchmark: 4 kongs, winners with hands, one draw check.

Each round: two seats make two kongs each (direct, added, concealed, concealed), two
seats win with full hands (one by discard, one self-drawn), and the two kong makers
reach the draw with 13-size hands (their kongs as melds) that are evaluated for ting.
Tiles are dealt from one 108-tile wall, so every round is valid.

    python bench/rounds.py [--n 1000] [--reps 5]

prints the median µs to settle one round (as ``bench/core.py``'s "settle" line).
"""

from __future__ import annotations

import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from service.rules.tiles import TILES, format_counts  # noqa: E402


def _sets_and_pair(rng: random.Random, pool: list[int], n_sets: int, suits: list[int]) -> list[int] | None:
    counts = [0] * 27
    for _ in range(n_sets):
        s = rng.choice(suits) * 9
        if rng.random() < 0.4:
            t = s + rng.randrange(9)
            counts[t] += 3
        else:
            r = rng.randrange(7)
            for x in range(3):
                counts[s + r + x] += 1
    counts[rng.choice(suits) * 9 + rng.randrange(9)] += 2
    if any(c > p for c, p in zip(counts, pool)):
        return None
    return counts


def _take(pool: list[int], counts: list[int]) -> None:
    for t, c in enumerate(counts):
        pool[t] -= c


def _round(rng: random.Random) -> dict:
    pool = [4] * 27
    dealer = rng.randrange(4)
    order = rng.sample(range(4), 4)
    winners, kongers = order[:2], order[2:]
    events: list[dict] = []
    melds: dict[int, list[dict]] = {s: [] for s in kongers}
    kinds = ("direct", "added", "concealed", "concealed")
    tiles = rng.sample(range(27), 4)
    for k, t in enumerate(tiles):
        seat = kongers[k % 2]
        pool[t] = 0
        kind = kinds[k]
        ev = {"type": "kong", "seat": seat, "kind": kind, "tile": str(TILES[t])}
        if kind == "direct":
            ev["from"] = winners[0]
        events.append(ev)
        melds[seat].append({"type": "kong", "kind": kind, "tile": str(TILES[t])})
    for n, w in enumerate(winners):
        suits = rng.sample(range(3), 2)
        counts = None
        while counts is None:
            counts = _sets_and_pair(rng, pool, 4, suits)
        _take(pool, counts)
        tile = str(TILES[rng.choice([t for t, c in enumerate(counts) if c])])
        frm = None if n == 1 else kongers[0]
        events.append({"type": "hu", "from": frm, "tile": tile,
                       "winners": [{"seat": w, "hand": {"tiles": format_counts(counts)}}]})
    seats = []
    for s in kongers:
        suits = rng.sample(range(3), 2)
        counts = None
        while counts is None:
            counts = _sets_and_pair(rng, pool, 2, suits)
        t = rng.choice([t for t, c in enumerate(counts) if c])
        counts[t] -= 1
        _take(pool, counts)
        seats.append({"seat": s, "hand": {"tiles": format_counts(counts), "melds": melds[s]}})
    events.append({"type": "draw", "seats": seats})
    return {"dealer": dealer, "events": events}


def typical_rounds(n: int, seed: int = 5) -> list[dict]:
    """``n`` valid rounds, each checked by settling it once."""
    from service import settle

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        r = _round(rng)
        settle(r["events"], dealer=r["dealer"])
        out.append(r)
    return out


def main() -> None:
    """Print the median µs to settle one typical round (the per-round mean of ``reps`` settles)."""
    import argparse
    import json
    import statistics
    import time

    from service import settle

    ap = argparse.ArgumentParser(description="Settle typical 血战 rounds (bench/rounds.py)")
    ap.add_argument("--n", type=int, default=1000, help="rounds (default 1000)")
    ap.add_argument("--reps", type=int, default=5, help="settles per round (default 5)")
    args = ap.parse_args()
    rounds = typical_rounds(args.n)
    samples = []
    for r in rounds:
        t0 = time.perf_counter_ns()
        for _ in range(args.reps):
            settle(r["events"], dealer=r["dealer"])
        samples.append((time.perf_counter_ns() - t0) / args.reps / 1000)
    print(json.dumps({"op": "settle", "ours_us": round(statistics.median(samples), 3), "rounds": len(rounds)}))


if __name__ == "__main__":
    main()
