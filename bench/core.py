"""Benchmark the rules core against the `mahjong` PyPI library (riichi) on the same hands.

    python bench/core.py [--n 10000] [--reps 20]

Prints one JSON line per operation: {"op", "ours_us", "from_str_us", "mahjong_us", "speedup", ...}.
Times are medians over the hands of the per-hand mean of ``reps`` calls, in µs.
``ours_us``: on hands parsed once beforehand; ``from_str_us``: the same hands given to
the public API as hand strings (canonical notation), parse included.  Parsing alone is
reported on its own line, op "parse".
The memos (per suit, and discard advice's per suit part) make a repeated hand
cheap, and ``reps`` repeats each hand: op "first_seen" is ting and discards from
a string in a fresh interpreter, on other hands (seed 11), each hand asked once,
so that every memo fills as the hands go by, as with a stream of new hands.
The `mahjong` side: ``Agari.is_agari`` for the win check, a loop of it over the
27 tiles for waits and per discard, ``HandCalculator.estimate_hand_value`` for scoring.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.corpus import discard_hands, ting_hands, win_hands, winning_hands  # noqa: E402


def per_hand_us(fn, items, reps: int) -> float:
    """Median over items of the mean time of ``reps`` calls of fn(item), in µs."""
    clock = time.perf_counter_ns
    samples = []
    for item in items:
        t0 = clock()
        for _ in range(reps):
            fn(item)
        samples.append((clock() - t0) / reps / 1000)
    return statistics.median(samples)


def table_build_cost() -> tuple[float, float]:
    """Seconds and MiB to build the shape tables, measured in a fresh interpreter."""
    import subprocess

    def run(code: str) -> float:
        return float(subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        ).stdout)

    pre = "from service.rules.shapes import _build, _even_keys;"
    seconds = min(run(pre + "import time;t=time.perf_counter();_build();_even_keys();"
                      "print(time.perf_counter()-t)") for _ in range(3))
    mib = run(pre + "import tracemalloc;tracemalloc.start();t=(_build(),_even_keys());"
              "print(tracemalloc.get_traced_memory()[1]/2**20)")
    return seconds, mib


def first_seen(n: int) -> dict:
    """Median µs of ting and discards from a string, each of ``n`` new hands asked once, in a
    fresh interpreter (memos empty at the start)."""
    import subprocess

    code = (
        "import json,statistics,time;from service import discards,ting;"
        "from bench.corpus import discard_hands,ting_hands;"
        f"T=[str(h) for h in ting_hands({n},seed=11)];D=[str(h) for h in discard_hands({n},seed=11)];"
        "c=time.perf_counter_ns\n"
        "def m(f,xs):\n s=[]\n for x in xs:\n  t=c();f(x);s.append((c()-t)/1000)\n return statistics.median(s)\n"
        "print(json.dumps({'ting_us':round(m(ting,T),3),'discards_us':round(m(discards,D),3)}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))).stdout
    return {"op": "first_seen", **json.loads(out), "hands": n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="hands per operation (default 10000)")
    ap.add_argument("--reps", type=int, default=20, help="calls per hand for our side (default 20)")
    ap.add_argument("--mahjong-reps", type=int, default=3, help="calls per hand for the mahjong library")
    args = ap.parse_args()

    from mahjong.agari import Agari
    from mahjong.hand_calculating.hand import HandCalculator

    from service import discards, is_win, parse_hand, score, ting
    from service.rules.fan import Win

    n = args.n
    build_s, build_mib = table_build_cost()
    print(json.dumps({"op": "tables", "build_s": round(build_s, 3), "peak_mib": round(build_mib, 1)}))

    def to34(counts):
        return list(counts) + [0] * 7

    agari = Agari()

    print(json.dumps(first_seen(n)))

    # -- parse -------------------------------------------------------------------
    texts = [str(h) for h in win_hands(min(n, 2000), seed=9)]
    print(json.dumps({"op": "parse", "ours_us": round(per_hand_us(parse_hand, texts, args.reps), 3)}))

    results = []

    # -- win check ----------------------------------------------------------------
    hands = win_hands(n)
    arrays = [to34(h.counts) for h in hands]
    ours = per_hand_us(is_win, hands, args.reps)
    texts = [str(h) for h in hands]
    from_str = per_hand_us(lambda s: is_win(parse_hand(s)), texts, args.reps)
    theirs = per_hand_us(agari.is_agari, arrays, args.mahjong_reps)
    results.append(("win", ours, from_str, theirs))

    # -- ting (waits with the fan of each) -------------------------------------------
    hands = ting_hands(n)
    arrays = [to34(h.counts) for h in hands]

    def their_waits(a):
        out = []
        for t in range(27):
            if a[t] < 4:
                a[t] += 1
                if agari.is_agari(a):
                    out.append(t)
                a[t] -= 1
        return out

    ours = per_hand_us(ting, hands, args.reps)
    from_str = per_hand_us(ting, [str(h) for h in hands], args.reps)
    theirs = per_hand_us(their_waits, arrays, args.mahjong_reps)
    results.append(("ting", ours, from_str, theirs))

    # -- discard advice ---------------------------------------------------------------
    hands = discard_hands(n)
    arrays = [to34(h.counts) for h in hands]

    def their_discards(a):
        out = []
        for d in range(27):
            if a[d]:
                a[d] -= 1
                w = their_waits(a)
                a[d] += 1
                if w:
                    out.append((d, w))
        return out

    ours = per_hand_us(discards, hands, max(1, args.reps // 4))
    from_str = per_hand_us(discards, [str(h) for h in hands], max(1, args.reps // 4))
    theirs = per_hand_us(their_discards, arrays, 1)
    results.append(("discards", ours, from_str, theirs))

    # -- score ------------------------------------------------------------------------
    hands = winning_hands(n)
    wins = [(h, Win(h.tiles[len(h.tiles) // 2])) for h in hands]
    calc = HandCalculator()

    def their_score(h):
        tiles136 = []
        seen = [0] * 34
        for t in h.tiles:
            tiles136.append(t.index * 4 + seen[t.index])
            seen[t.index] += 1
        return calc.estimate_hand_value(tiles136, tiles136[len(tiles136) // 2])

    ours = per_hand_us(lambda hw: score(hw[0], hw[1]), wins, args.reps)
    str_wins = [(str(h), str(w.tile)) for h, w in wins]
    from_str = per_hand_us(lambda hw: score(hw[0], hw[1]), str_wins, args.reps)
    theirs = per_hand_us(their_score, hands[: max(1, n // 5)], 1)
    results.append(("score", ours, from_str, theirs))

    for op, o, f, t in results:
        print(json.dumps({"op": op, "ours_us": round(o, 3), "from_str_us": round(f, 3),
                          "mahjong_us": round(t, 3), "speedup": round(t / o, 1), "hands": n}))

    # -- settle a typical xuezhan round --------------------------------------------------
    from bench.rounds import typical_rounds
    from service import settle

    rounds = typical_rounds(min(n, 1000))
    ours = per_hand_us(lambda r: settle(r["events"], dealer=r["dealer"]), rounds, max(1, args.reps // 4))
    print(json.dumps({"op": "settle", "ours_us": round(ours, 3), "rounds": len(rounds)}))


if __name__ == "__main__":
    main()
