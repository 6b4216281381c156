"""Which serializer writes the answers: the response schemas' ``dump`` against the ``dump_*`` functions.

    .venv/bin/python bench/serializers.py            # 2,000 hands an operation, 7 rounds
    .venv/bin/python bench/serializers.py --n 200 --rounds 1

For each response shape of the hand operations and ``/v1/rounds/settle`` (the answers a batch item
writes too), on a seeded corpus, in one process, rounds interleaved: the µs per answer of

* ``dump``: the ``dump_*`` function from the core's value (what the service runs), then orjson;
* ``schema``: what ``@blp.response`` would run instead, the response schema's ``dump`` of the same
  body (flask-smorest dumps what a view returns), then orjson;
* ``core``: the core's operation itself from loaded arguments, for scale.

One JSON line per shape with the medians and ``schema_over_dump``.  The choice it informs is said in
:mod:`service.api.schemas`; the figures go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.corpus import discard_hands, shanten_hands, ting_hands, winning_hands  # noqa: E402
from bench.rounds import typical_rounds  # noqa: E402


def shapes(n: int) -> dict[str, tuple]:
    """shape → (the response schema, the dump function, the core's function, its loaded arguments)."""
    from service.api import hands, rounds
    from service.api import schemas as s

    def loaded(schema, bodies):
        return [schema.load(b) for b in bodies]

    ting = [{"hand": {"tiles": str(h)}} for h in ting_hands(n)]
    discards = [{"hand": {"tiles": str(h)}} for h in discard_hands(n)]
    wins = winning_hands(n)
    score = [{"hand": {"tiles": str(h)}, "win": {"tile": str(h.tiles[len(h.tiles) // 2])}} for h in wins]
    shanten = [{"hand": {"tiles": str(h)}} for h in shanten_hands(n)]
    settle = [{"dealer": r["dealer"], "events": r["events"]} for r in typical_rounds(max(1, n // 10))]
    return {
        "validate": (s.ValidateResponse(), s.dump_validation, hands.validate_result, loaded(s.ValidateRequest(), ting)),
        "ting": (s.TingResponse(), s.dump_ting, hands.ting_result, loaded(s.TingRequest(), ting)),
        "discards": (s.DiscardsResponse(), s.dump_discards, hands.discards_result,
                     loaded(s.DiscardsRequest(), discards)),
        "score": (s.ScoreResponse(), s.dump_score, hands.score_result, loaded(s.ScoreRequest(), score)),
        "shanten": (s.ShantenResponse(), s.dump_shanten, hands.shanten_result, loaded(s.ShantenRequest(), shanten)),
        "settle": (s.SettleResponse(), s.dump_settle, rounds.settle_result, loaded(s.SettleRequest(), settle)),
    }


def per_item_us(fn, values: list) -> float:
    t0 = time.perf_counter()
    for v in values:
        fn(v)
    return (time.perf_counter() - t0) / len(values) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="hands an operation (default 2,000; rounds: a tenth)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    from service.api.jsonio import dumps

    for name, (schema, dump, core, loaded) in shapes(args.n).items():
        values = [core(a) for a in loaded]
        bodies = [dump(v) for v in values]
        assert [dumps(schema.dump(b)) for b in bodies] == [dumps(b) for b in bodies], name  # the same answers
        times: dict[str, list[float]] = {"dump": [], "schema": [], "core": []}
        for _ in range(args.rounds):
            times["core"].append(per_item_us(core, loaded))
            times["dump"].append(per_item_us(lambda v, dump=dump: dumps(dump(v)), values))
            times["schema"].append(per_item_us(lambda b, schema=schema: dumps(schema.dump(b)), bodies))
        m = {k: statistics.median(v) for k, v in times.items()}
        print(json.dumps({"op": name, "answers": len(values), "rounds": args.rounds, "core_us": round(m["core"], 2),
                          "dump_us": round(m["dump"], 2), "schema_us": round(m["schema"], 2),
                          "schema_over_dump": round(m["schema"] / m["dump"], 2)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
