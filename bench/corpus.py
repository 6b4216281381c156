"""A fixed, seeded corpus of hands for the benchmarks (not part of the service)."""

from __future__ import annotations

import random

from service.rules.hand import Hand
from service.rules.tiles import TILES


def _winning_counts(rng: random.Random) -> list[int]:
    """A random winning 14-tile count vector in one or two suits."""
    while True:
        suits = rng.sample(range(3), rng.choice((1, 2, 2, 2)))
        counts = [0] * 27
        if rng.random() < 0.1:  # seven pairs
            for _ in range(7):
                t = rng.choice(suits) * 9 + rng.randrange(9)
                counts[t] += 2
        else:
            for _ in range(4):
                s = rng.choice(suits) * 9
                if rng.random() < 0.4:
                    counts[s + rng.randrange(9)] += 3
                else:
                    r = rng.randrange(7)
                    for x in range(3):
                        counts[s + r + x] += 1
            counts[rng.choice(suits) * 9 + rng.randrange(9)] += 2
        if max(counts) <= 4:
            return counts


def _random_counts(rng: random.Random, n: int) -> list[int]:
    suits = rng.sample(range(3), 2)
    wall = [s * 9 + r for s in suits for r in range(9) for _ in range(4)]
    counts = [0] * 27
    for t in rng.sample(wall, n):
        counts[t] += 1
    return counts


def _hand(counts: list[int]) -> Hand:
    return Hand(tuple(TILES[t] for t, c in enumerate(counts) for _ in range(c)))


def _remove_random(rng: random.Random, counts: list[int]) -> list[int]:
    out = counts[:]
    t = rng.choice([t for t, c in enumerate(out) if c])
    out[t] -= 1
    return out


def win_hands(n: int, seed: int = 1) -> list[Hand]:
    """14-tile hands, about half of them winning."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if i % 2:
            out.append(_hand(_winning_counts(rng)))
        else:
            c = _remove_random(rng, _winning_counts(rng))
            t = rng.choice([t for t in range(27) if c[t] < 4])
            c[t] += 1
            out.append(_hand(c))
    return out


def winning_hands(n: int, seed: int = 2) -> list[Hand]:
    rng = random.Random(seed)
    return [_hand(_winning_counts(rng)) for _ in range(n)]


def ting_hands(n: int, seed: int = 3) -> list[Hand]:
    """13-tile hands: most one tile from a win, the rest random two-suit hands."""
    rng = random.Random(seed)
    return [
        _hand(_remove_random(rng, _winning_counts(rng)) if rng.random() < 0.8 else _random_counts(rng, 13))
        for _ in range(n)
    ]


def discard_hands(n: int, seed: int = 4) -> list[Hand]:
    """14-tile hands: a win with one tile swapped, or random two-suit hands."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        if rng.random() < 0.8:
            c = _remove_random(rng, _winning_counts(rng))
            t = rng.choice([t for t in range(27) if c[t] < 4])
            c[t] += 1
        else:
            c = _random_counts(rng, 14)
        out.append(_hand(c))
    return out


def shanten_hands(n: int, seed: int = 5, size: int = 13) -> list[Hand]:
    """Hands 0-3 exchanges from ting, a quarter of each: a win (one or two suits, or seven pairs) less
    one tile, then some of its tiles exchanged for random ones of any suit (at most four copies; a
    third suit now and then), kept when its shanten is the one wanted; ``size`` 14: one more random
    tile drawn (the 14's shanten is then 0-3 or -1)."""
    from service.rules.shanten import shanten

    rng = random.Random(seed)
    out: list[Hand] = []
    while len(out) < n:
        want = len(out) % 4
        c = _remove_random(rng, _winning_counts(rng))
        for _ in range(want + rng.randrange(3)):
            c = _remove_random(rng, c)
            c[rng.choice([t for t in range(27) if c[t] < 4])] += 1
        hand = _hand(c)
        if shanten(hand) != want:
            continue
        if size == 14:
            c[rng.choice([t for t in range(27) if c[t] < 4])] += 1
            hand = _hand(c)
        out.append(hand)
    return out
