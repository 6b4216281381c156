"""Winning shapes (RULES.md §3) by per-suit lookup tables (查表法).

Each suit's nine counts form one base-5 key.  At import we enumerate every
way of building one suit from up to four sets (triplets ``111``, sequences
``123``) and at most one pair, and record for each reachable key:

* ``SHAPES[key]`` – a bit set: the key decomposes at all (membership), and
  whether some decomposition is all triplets (``TRIP``) or has a 1 or 9 in
  every set and the pair (``YAO``); plus facts about the tiles themselves
  (``HAS19``, ``NOT258``) and the number of four-of-a-kind ranks
  (``flags >> GEN_SHIFT``).
* ``DECOMPOSITIONS[key]`` – one example decomposition for each of
  plain / all-triplets / yaojiu, for reporting.
* ``WAITS[key]`` – the ranks that, added to the key, give a key in ``SHAPES``.

A whole hand is a standard win when every suit's key is in ``SHAPES`` (the
tile count then forces exactly one pair); the flags of the hand are the AND
of its suits' flags.

>>> key = suit_key([1, 1, 1, 0, 0, 0, 0, 0, 0])          # 123
>>> key in SHAPES, bool(SHAPES[key] & TRIP), bool(SHAPES[key] & YAO)
(True, False, True)
>>> WAITS[suit_key([0, 1, 1, 0, 0, 0, 0, 0, 0])]          # 23 waits on 1 and 4
(0, 3)
"""

from __future__ import annotations

from .hand import POW5

TRIP = 1
YAO = 2
HAS19 = 4
NOT258 = 8
GEN_SHIFT = 4

_SEQ_YAO = {0, 6}  # sequences 123 and 789
_TERMINAL = {0, 8}


def suit_key(counts9) -> int:
    return sum(c * POW5[r] for r, c in enumerate(counts9))


def key_counts(key: int) -> list[int]:
    out = []
    for _ in range(9):
        key, c = divmod(key, 5)
        out.append(c)
    return out


def _tile_flags(counts: list[int]) -> int:
    flags = 0
    gens = 0
    for r, c in enumerate(counts):
        if not c:
            continue
        if r in _TERMINAL:
            flags |= HAS19
        if r not in (1, 4, 7):
            flags |= NOT258
        if c == 4:
            gens += 1
    return flags | gens << GEN_SHIFT


# A set is (kind, rank): ("t", r) triplet of rank r+1, ("q", r) sequence r+1..r+3.
_SETS = [("t", r) for r in range(9)] + [("q", r) for r in range(7)]


def _build():
    shapes: dict[int, int] = {}
    decs: dict[int, list] = {}

    def record(counts: list[int], sets: tuple, pair: int | None) -> None:
        key = suit_key(counts)
        trip = all(k == "t" for k, _ in sets)
        yao = all((r in _TERMINAL) if k == "t" else (r in _SEQ_YAO) for k, r in sets) and (
            pair is None or pair in _TERMINAL
        )
        bits = (TRIP if trip else 0) | (YAO if yao else 0)
        dec = (sets, pair)
        if key not in shapes:
            shapes[key] = _tile_flags(counts) | bits
            decs[key] = [dec, dec if trip else None, dec if yao else None]
        else:
            shapes[key] |= bits
            slot = decs[key]
            if trip and slot[1] is None:
                slot[1] = dec
            if yao and slot[2] is None:
                slot[2] = dec

    def walk(counts: list[int], sets: tuple, start: int) -> None:
        record(counts, sets, None)
        for p in range(9):
            if counts[p] <= 2:
                counts[p] += 2
                record(counts, sets, p)
                counts[p] -= 2
        if len(sets) == 4:
            return
        for i in range(start, len(_SETS)):
            kind, r = _SETS[i]
            span = (r,) * 3 if kind == "t" else (r, r + 1, r + 2)
            if all(counts[x] < 4 for x in set(span)) and (kind == "q" or counts[r] <= 1):
                for x in span:
                    counts[x] += 1
                walk(counts, sets + (_SETS[i],), i)
                for x in span:
                    counts[x] -= 1

    walk([0] * 9, (), 0)
    waits: dict[int, int] = {}
    for key in shapes:
        counts = key_counts(key)
        for r in range(9):
            if counts[r]:
                waits[key - POW5[r]] = waits.get(key - POW5[r], 0) | 1 << r
    wait_ranks = {k: tuple(r for r in range(9) if m >> r & 1) for k, m in waits.items()}
    return shapes, {k: tuple(v) for k, v in decs.items()}, wait_ranks


SHAPES, DECOMPOSITIONS, WAITS = _build()


def _even_keys() -> frozenset[int]:
    keys = [0]
    for r in range(9):
        keys = [k + c * POW5[r] for k in keys for c in (0, 2, 4)]
    return frozenset(keys)


EVEN_KEYS = _even_keys()
"""Suit keys whose every count is even (0, 2 or 4): the stuff of seven pairs."""


def is_standard(keys) -> bool:
    """Every suit decomposes (the caller guarantees the tile count)."""
    return keys[0] in SHAPES and keys[1] in SHAPES and keys[2] in SHAPES


def is_seven_pairs(keys, n_concealed: int, n_melds: int) -> bool:
    return (
        n_melds == 0
        and n_concealed == 14
        and keys[0] in EVEN_KEYS
        and keys[1] in EVEN_KEYS
        and keys[2] in EVEN_KEYS
    )


def describe(keys, kind: int) -> list[str]:
    """Sets and pair of one decomposition, as notation: ``kind`` 0 any, 1 TRIP, 2 YAO.

    >>> describe((suit_key([2, 1, 1, 1, 0, 0, 0, 0, 0]), 0, 0), 0)
    ['234m', '11m']
    """
    sets: list[str] = []
    pairs: list[str] = []
    for s, key in enumerate(keys):
        if not key:
            continue
        dec = DECOMPOSITIONS[key][kind] or DECOMPOSITIONS[key][0]
        suit_sets, pair = dec
        letter = "mps"[s]
        for k, r in suit_sets:
            sets.append(f"{r + 1}" * 3 + letter if k == "t" else f"{r + 1}{r + 2}{r + 3}{letter}")
        if pair is not None:
            pairs.append(f"{pair + 1}{pair + 1}{letter}")
    return sets + pairs


def describe_pairs(counts) -> list[str]:
    out = []
    for i, c in enumerate(counts):
        for _ in range(c // 2):
            out.append(f"{i % 9 + 1}{i % 9 + 1}{'mps'[i // 9]}")
    return out
