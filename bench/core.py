"""Benchmark the rules core against the `mahjong` PyPI library (riichi) on the same hands.

    python bench/core.py [--n 10000] [--reps 20] [--peer] [--baseline DIR [--runs 5]]

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

Shanten (op "shanten", "useful_tiles", "shanten_options"): on hands 0-3 exchanges from ting (a quarter
of each; 13 tiles, and 14 for the options), from hand strings.  The `mahjong` side is
``Shanten.calculate_shanten(tiles_34, use_kokushi=False)`` (its 七对 counted, no 国士), on the same
hands converted to its 34-count arrays beforehand (the conversion is not timed); riichi rules
differ (no 缺一门, no four-copy rule), so its numbers differ on some hands: only the time compares.

``--peer``: also the Rust-backed ``riichienv`` (riichi rules), in this process, on the same
hand strings, beside our from-string figures: op "peer_ting" is
``HandEvaluator.hand_from_text(s).get_waits()`` (its waits, unvalued) against our ``ting(s)``
(waits each valued: fan, points, patterns, remaining, and 大叫); op "peer_discards" is
``check_riichi_candidates`` on the 14 tiles (the discards that leave tenpai, no waits) and that
plus ``get_waits()`` of each candidate's 13 (the discards with their waits, unvalued) against our
``discards(s)`` (each option's waits valued and ranked); op "peer_shanten" is
``calculate_shanten(parse_hand(s)[0])`` (and on its tile ids parsed beforehand) against ``shanten(s)``.
Riichi rules differ (no 缺一门 / 花猪):
the corpora are one- and two-suit hands.  riichienv is installed in the benchmark's own
environment only (see bench/peer-requirements.txt); without it the line says so.

``--baseline DIR``: before/after in one run: ting, discards, score (from strings), settle and the
three shanten operations timed as above, each side in its own interpreter (the ``service`` package of DIR, e.g. a work
tree of main, against this one's), sides alternating, ``--runs`` times; medians printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
if "--service-from" in sys.argv:  # (the --baseline side: that tree's service package, this tree's corpus)
    sys.path.insert(0, os.path.abspath(sys.argv[sys.argv.index("--service-from") + 1]))

from bench.corpus import discard_hands, shanten_hands, ting_hands, win_hands, winning_hands  # noqa: E402


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


def table_build_cost() -> tuple[float, float, float, float]:
    """Seconds and MiB to build the shape tables, and to load the shanten table, each measured in a fresh
    interpreter."""
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
    pre = "from service.rules.shanten_table import load;"
    load_s = min(run(pre + "import time;t=time.perf_counter();load();print(time.perf_counter()-t)") for _ in range(3))
    load_mib = run(
        pre + "import tracemalloc;tracemalloc.start();t=load();print(tracemalloc.get_traced_memory()[0]/2**20)"
    )
    return seconds, mib, load_s, load_mib


def first_seen(n: int) -> dict:
    """Median µs of ting, discards and the shanten operations from a string, each of ``n`` new hands asked
    once, in a fresh interpreter (memos empty at the start: the corpus of shanten, built with
    ``shanten``, fills them, so they are emptied before the timing)."""
    import subprocess

    code = (
        "import json,statistics,time;from service import discards,ting,shanten,useful_tiles,shanten_options;"
        "from bench.corpus import discard_hands,ting_hands,shanten_hands;"
        f"T=[str(h) for h in ting_hands({n},seed=11)];D=[str(h) for h in discard_hands({n},seed=11)];"
        f"S=[str(h) for h in shanten_hands({n},seed=12)];F=[str(h) for h in shanten_hands({n},seed=13,size=14)];"
        "import service.rules.shanten as m_;"
        "[d.clear() for d in (m_.COMBINED,m_.PAIRED,m_.RAISED,m_.LISTED,m_.SUIT_USEFUL)];"
        "m_.GROUPS.clear();m_.GROUPS['']=0;m_.SUIT_KEYS.clear();m_.SUIT_KEYS['']=0;"
        "import service.rules.shanten_table as t_;t_.RAISES.clear();"
        "c=time.perf_counter_ns\n"
        "def m(f,xs):\n s=[]\n for x in xs:\n  t=c();f(x);s.append((c()-t)/1000)\n return statistics.median(s)\n"
        "print(json.dumps({'ting_us':round(m(ting,T),3),'discards_us':round(m(discards,D),3),"
        "'shanten_us':round(m(shanten,S),3),'useful_tiles_us':round(m(useful_tiles,S),3),"
        "'shanten_options_us':round(m(shanten_options,F),3)}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))).stdout
    return {"op": "first_seen", **json.loads(out), "hands": n}


def core_figures(n: int, reps: int) -> dict:
    """µs of ting, discards and score from strings, of settling a typical round and of the shanten operations
    from strings (as main() times them)."""
    from bench.rounds import typical_rounds
    from service import discards, score, settle, ting

    out = {"ting": per_hand_us(ting, [str(h) for h in ting_hands(n)], reps),
           "discards": per_hand_us(discards, [str(h) for h in discard_hands(n)], max(1, reps // 4))}
    wins = [(str(h), str(h.tiles[len(h.tiles) // 2])) for h in winning_hands(n)]
    out["score"] = per_hand_us(lambda hw: score(hw[0], hw[1]), wins, reps)
    rounds = typical_rounds(min(n, 1000))
    out["settle"] = per_hand_us(lambda r: settle(r["events"], dealer=r["dealer"]), rounds, max(1, reps // 4))
    from service import shanten, shanten_options, useful_tiles

    texts = [str(h) for h in shanten_hands(n)]
    out["shanten"] = per_hand_us(shanten, texts, reps)
    out["useful_tiles"] = per_hand_us(useful_tiles, texts, reps)
    out["shanten_options"] = per_hand_us(shanten_options, [str(h) for h in shanten_hands(n, size=14)],
                                         max(1, reps // 4))
    return out


def baseline(args) -> None:
    """Before (``--baseline DIR``'s service) and after (this tree's), alternating interpreters."""
    import subprocess

    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for i in range(args.runs):
        for side in (("before", "after") if i % 2 == 0 else ("after", "before")):
            cmd = [
                sys.executable,
                os.path.abspath(__file__),
                "--core-only",
                "--n",
                str(args.n),
                "--reps",
                str(args.reps),
            ]
            if side == "before":
                cmd += ["--service-from", args.baseline]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT).stdout
            runs[side].append(json.loads(out))
    for op in ("ting", "discards", "score", "settle", "shanten", "useful_tiles", "shanten_options"):
        before = statistics.median(r[op] for r in runs["before"])
        after = statistics.median(r[op] for r in runs["after"])
        print(json.dumps({"op": op, "before_us": round(before, 3), "after_us": round(after, 3),
                          "ratio": round(after / before, 3), "runs": args.runs,
                          "before_runs": [round(r[op], 2) for r in runs["before"]],
                          "after_runs": [round(r[op], 2) for r in runs["after"]]}))


def peer(n: int, reps: int) -> None:
    """riichienv's waits and discard analysis beside ours, same hand strings, this process."""
    try:
        import riichienv
    except ImportError:
        print(
            json.dumps(
                {
                    "op": "peer",
                    "riichienv": None,
                    "note": "riichienv is not importable here: "
                    "python3 -m venv bench/.venv && bench/.venv/bin/pip install -e . -r bench/peer-requirements.txt",
                }
            )
        )
        return
    from importlib.metadata import version

    from service import discards, ting

    texts = [str(h) for h in ting_hands(n)]
    evaluator = riichienv.HandEvaluator.hand_from_text
    theirs = per_hand_us(lambda s: evaluator(s).get_waits(), texts, reps)
    ours = per_hand_us(ting, texts, reps)
    print(json.dumps({"op": "peer_ting", "ours_us": round(ours, 3), "riichienv_us": round(theirs, 3),
                      "riichienv": version("riichienv"),
                      "compared": "ting(s): waits valued, against HandEvaluator.hand_from_text(s).get_waits()",
                      "hands": n}))

    texts = [str(h) for h in discard_hands(n)]
    parse = riichienv.parse_hand
    candidates = riichienv.check_riichi_candidates
    hand_evaluator = riichienv.HandEvaluator

    def their_candidates(s):
        return candidates(parse(s)[0])

    def their_discards(s):
        tiles = parse(s)[0]
        out = []
        seen = set()
        for c in candidates(tiles):
            kind = c // 4
            if kind not in seen:
                seen.add(kind)
                rest = list(tiles)
                rest.remove(c)
                out.append((kind, hand_evaluator(rest).get_waits()))
        return out

    texts13 = [str(h) for h in shanten_hands(n)]
    parsed = [parse(s)[0] for s in texts13]  # (its 136-ids, made beforehand)
    shanten_of = riichienv.calculate_shanten
    from service import shanten

    ours = per_hand_us(shanten, texts13, reps)
    from_text = per_hand_us(lambda s: shanten_of(parse(s)[0]), texts13, reps)
    from_ids = per_hand_us(shanten_of, parsed, reps)
    print(json.dumps({"op": "peer_shanten", "ours_us": round(ours, 3), "riichienv_us": round(from_text, 3),
                      "riichienv_parsed_us": round(from_ids, 3),
                      "compared": "shanten(s) against calculate_shanten(parse_hand(s)[0]), and on its tile ids "
                                  "parsed beforehand (riichi rules: no 缺一门, no four-copy rule)",
                      "hands": n}))

    r = max(1, reps // 4)
    ours = per_hand_us(discards, texts, r)
    only = per_hand_us(their_candidates, texts, r)
    with_waits = per_hand_us(their_discards, texts, r)
    print(json.dumps({"op": "peer_discards", "ours_us": round(ours, 3), "riichienv_candidates_us": round(only, 3),
                      "riichienv_candidates_waits_us": round(with_waits, 3),
                      "compared": "discards(s): options with waits valued and ranked, against "
                                  "check_riichi_candidates(parse_hand(s)) and that plus get_waits() per candidate",
                      "hands": n}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="hands per operation (default 10000)")
    ap.add_argument("--reps", type=int, default=20, help="calls per hand for our side (default 20)")
    ap.add_argument("--mahjong-reps", type=int, default=3, help="calls per hand for the mahjong library")
    ap.add_argument("--peer", action="store_true", help="also riichienv (if importable), same hands")
    ap.add_argument("--baseline", metavar="DIR", help="a tree whose service package is the 'before'")
    ap.add_argument("--runs", type=int, default=5, help="runs per side with --baseline (default 5)")
    ap.add_argument("--core-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--service-from", metavar="DIR", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.core_only:
        print(json.dumps(core_figures(args.n, args.reps)))
        return
    if args.baseline:
        baseline(args)
        if args.peer:
            peer(args.n, args.reps)
        return

    from mahjong.agari import Agari
    from mahjong.hand_calculating.hand import HandCalculator

    from service import discards, is_win, parse_hand, score, ting
    from service.rules.fan import Win

    n = args.n
    build_s, build_mib, load_s, load_mib = table_build_cost()
    print(json.dumps({"op": "tables", "build_s": round(build_s, 3), "peak_mib": round(build_mib, 1),
                      "shanten_load_s": round(load_s, 3), "shanten_mib": round(load_mib, 1)}))

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

    shanten_figures(n, args.reps, args.mahjong_reps)

    if args.peer:
        peer(n, args.reps)


def shanten_figures(n: int, reps: int, mahjong_reps: int) -> None:
    """Shanten, useful tiles and a 14's options from hand strings; the `mahjong` library's shanten on the
    same 13-tile hands (their 34-arrays made beforehand)."""
    from mahjong.shanten import Shanten

    from service import shanten, shanten_options, useful_tiles

    hands = shanten_hands(n)
    texts = [str(h) for h in hands]
    arrays = [list(h.counts) + [0] * 7 for h in hands]  # (converted here, not timed)
    calculate = Shanten.calculate_shanten
    ours = per_hand_us(shanten, texts, reps)
    theirs = per_hand_us(lambda a: calculate(a, use_kokushi=False), arrays, mahjong_reps)
    print(json.dumps({"op": "shanten", "from_str_us": round(ours, 3), "mahjong_us": round(theirs, 3),
                      "speedup": round(theirs / ours, 1), "hands": n,
                      "compared": "shanten(s) from a hand string, against Shanten.calculate_shanten(tiles_34, "
                                  "use_kokushi=False) on the same hands as 34-arrays made beforehand"}))
    print(json.dumps({"op": "useful_tiles", "from_str_us": round(per_hand_us(useful_tiles, texts, reps), 3),
                      "hands": n}))
    texts = [str(h) for h in shanten_hands(n, size=14)]
    print(json.dumps({"op": "shanten_options", "from_str_us": round(per_hand_us(shanten_options, texts,
                                                                                max(1, reps // 4)), 3),
                      "hands": n}))


if __name__ == "__main__":
    main()
