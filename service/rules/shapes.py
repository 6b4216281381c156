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
    terminal_pair = (True,) + (False,) * 7 + (True,)

    def record(key: int, counts: list[int], sets: tuple, pair: int | None, trip: bool, yao: bool) -> None:
        bits = (TRIP if trip else 0) | (YAO if yao else 0)
        slot = decs.get(key)
        if slot is None:
            shapes[key] = _tile_flags(counts) | bits
            dec = (sets, pair)
            decs[key] = [dec, dec if trip else None, dec if yao else None]
            return
        shapes[key] |= bits
        if trip and slot[1] is None:
            slot[1] = (sets, pair)
        if yao and slot[2] is None:
            slot[2] = (sets, pair)

    spans = []
    for kind, r in _SETS:
        span = (r,) * 3 if kind == "t" else (r, r + 1, r + 2)
        yao = (r in _TERMINAL) if kind == "t" else (r in _SEQ_YAO)
        spans.append((span, sum(POW5[x] for x in span), kind == "t", yao))

    def walk(counts: list[int], key: int, sets: tuple, start: int, trip: bool, yao: bool) -> None:
        record(key, counts, sets, None, trip, yao)
        for p in range(9):
            if counts[p] <= 2:
                counts[p] += 2
                record(key + 2 * POW5[p], counts, sets, p, trip, yao and terminal_pair[p])
                counts[p] -= 2
        if len(sets) == 4:
            return
        for i in range(start, len(_SETS)):
            span, add, is_trip, is_yao = spans[i]
            if is_trip:
                if counts[span[0]] > 1:
                    continue
            elif counts[span[0]] == 4 or counts[span[1]] == 4 or counts[span[2]] == 4:
                continue
            for x in span:
                counts[x] += 1
            walk(counts, key + add, sets + (_SETS[i],), i, trip and is_trip, yao and is_yao)
            for x in span:
                counts[x] -= 1

    walk([0] * 9, 0, (), 0, True, True)
    waits: dict[int, int] = {}
    for key in shapes:
        k = key
        for r in range(9):
            k, c = divmod(k, 5)
            if c:
                w = key - POW5[r]
                waits[w] = waits.get(w, 0) | 1 << r
    wait_ranks = {k: _RANKS_OF[m] for k, m in waits.items()}
    return shapes, {k: _notate(v) for k, v in decs.items()}, wait_ranks


_RANKS_OF = [tuple(r for r in range(9) if m >> r & 1) for m in range(512)]


_SET_NOTE = [
    {(k, r): (f"{r + 1}" * 3 if k == "t" else f"{r + 1}{r + 2}{r + 3}") + letter for k, r in _SETS}
    for letter in "mps"
]
_PAIR_NOTE = [[f"{r + 1}{r + 1}{letter}" for r in range(9)] + [None] for letter in "mps"]


def _notate(decs: list) -> tuple:
    """Per kind (any, TRIP, YAO): per suit, (set strings, pair string) in notation."""
    first = None
    out = []
    for dec in decs:
        if dec is None or dec is decs[0]:
            if first is None:
                first = _notate_one(decs[0])
            out.append(first)
        else:
            out.append(_notate_one(dec))
    return tuple(out)


def _notate_one(dec) -> tuple:
    sets, pair = dec
    p = 9 if pair is None else pair
    return tuple((tuple(notes[x] for x in sets), pairs[p]) for notes, pairs in zip(_SET_NOTE, _PAIR_NOTE))


SHAPES, DECOMPOSITIONS, WAITS = _build()


def _even_keys() -> frozenset[int]:
    keys = [0]
    for r in range(9):
        keys = [k + c * POW5[r] for k in keys for c in (0, 2, 4)]
    return frozenset(keys)


EVEN_KEYS = _even_keys()
"""Suit keys whose every count is even (0, 2 or 4): the stuff of seven pairs."""


def describe_pairs(counts) -> list[str]:
    out = []
    for i, c in enumerate(counts):
        for _ in range(c // 2):
            out.append(f"{i % 9 + 1}{i % 9 + 1}{'mps'[i // 9]}")
    return out
