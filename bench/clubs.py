"""Benchmark a club's standings read: a season of 500 finished tables against one of 5.

    python bench/clubs.py [--small 5] [--large 500] [--players 8] [--reads 300]

On a private redis-server, two clubs of ``--players`` players each play a
season: ``--small`` and ``--large`` finished tables (four seats drawn from the
roster, two rounds each, every one counted as its finish counts it).  Then
``GET /v1/clubs/{id}/seasons/s1/standings`` of each club, through the Flask app
(test client: the server's whole cost) and through
:meth:`service.store.clubs.ClubStore.standings`, alternately, ``--reads``
times each: the medians (µs) and the ratio large / small.  The standings are
kept up to date as each table is counted, so a read costs the same however many
tables the season has (its players, not its tables, make its size).

Prints one JSON line per way of reading.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NAMES = ["老王", "小李", "阿珍", "大刘", "Ann", "Bob", "Cai", "Dou", "Eve", "Fan", "Gu", "He"]


def season(app, tables: int, players: int, rng: random.Random) -> tuple[str, str]:
    """A club whose first season has ``tables`` finished tables: its id and read token."""
    from service.store.table_store import Access

    clubs = app.extensions["clubs"]
    store = app.extensions["tables"]
    club = clubs.create(f"bench {tables}")
    owner = Access(club["token"], True)
    roster = [clubs.add_player(club["id"], owner, NAMES[i % len(NAMES)] + str(i))["id"] for i in range(players)]
    for _ in range(tables):
        seats = [{"player": p} for p in rng.sample(roster, 4)]
        created, _ = clubs.create_table(club["id"], owner, seats)
        for _ in range(2):
            winner, fan = rng.randrange(4), rng.randrange(1, 4)
            for event in (
                {"type": "round_start"},
                {"type": "hu", "tile": "5p", "winners": [{"seat": winner, "fan": fan}]},
                {"type": "round_end"},
            ):
                store.append(created.id, event)
        store.finish(created.id)
        assert clubs.count(club["id"], created.id) == "counted"
    return club["id"], club["read_token"]


def medians(read_small, read_large, reads: int) -> tuple[float, float]:
    small: list[float] = []
    large: list[float] = []
    for _ in range(10):  # warm up
        read_small(), read_large()
    for _ in range(reads):
        for read, out in ((read_small, small), (read_large, large)):
            t = time.perf_counter()
            read()
            out.append((time.perf_counter() - t) * 1e6)
    return statistics.median(small), statistics.median(large)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=5)
    parser.add_argument("--large", type=int, default=500)
    parser.add_argument("--players", type=int, default=8)
    parser.add_argument("--reads", type=int, default=300)
    args = parser.parse_args()

    from service.api import create_app
    from service.config import NO_LIMITS
    from service.store.embedded import EmbeddedRedis
    from service.store.table_store import Access

    with EmbeddedRedis(tempfile.mkdtemp(prefix="bench-redis-")) as server:
        app = create_app({"TESTING": True, "REDIS_URL": server.url, **{var: 0 for var in NO_LIMITS}})
        rng = random.Random(34)
        (small, small_token), (large, large_token) = (season(app, n, args.players, rng)
                                                      for n in (args.small, args.large))
        client = app.test_client()

        def http(club: str, token: str):
            def read():
                r = client.get(f"/v1/clubs/{club}/seasons/s1/standings", headers={"Authorization": f"Bearer {token}"})
                assert r.status_code == 200
            return read

        clubs = app.extensions["clubs"]

        def store(club: str, token: str):
            return lambda: clubs.standings(club, Access(token, False), "s1")

        for way, make in (("http", http), ("store", store)):
            s, big = medians(make(small, small_token), make(large, large_token), args.reads)
            print(json.dumps({"op": f"standings_{way}", "small_tables": args.small, "large_tables": args.large,
                              "players": args.players, "small_us": round(s, 1), "large_us": round(big, 1),
                              "ratio": round(big / s, 3)}), flush=True)


if __name__ == "__main__":
    main()
