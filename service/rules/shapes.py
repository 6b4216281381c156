"""Winning shapes (docs/rules.md#s3) by per-suit lookup tables (查表法).

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

The three extras that depend on the decomposition itself (夹心五, 卡二条,
一条龙, §5.2) need more than a bit per key: :func:`suit_features` gives, on
demand and cached, each distinct *feature set* a key's decompositions have
(all triplets, 幺九, which of 123/456/789 it holds) with one decomposition
that has it.  Only rulesets that switch those extras on pay for it.

A whole hand is a standard win when every suit's key is in ``SHAPES`` (the
tile count then forces exactly one pair); the flags of the hand are the AND
of its suits' flags.

>>> key = suit_key([1, 1, 1, 0, 0, 0, 0, 0, 0])          # 123
>>> key in SHAPES, bool(SHAPES[key] & TRIP), bool(SHAPES[key] & YAO)
(True, False, True)
>>> WAITS[suit_key([0, 1, 1, 0, 0, 0, 0, 0, 0])]          # 23 waits on 1 and 4
(0, 3)
>>> list(suit_features(suit_key([1, 1, 1, 1, 1, 1, 1, 1, 1]))) == [F_LONG]   # 123 456 789
True
"""

from __future__ import annotations

from .hand import POW5, POW_OF, SUIT_OF

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


# -- per-decomposition features (for the extras 夹心五, 卡二条, 一条龙) --------------------
F_TRIP = 1   # every set of the suit is a triplet
F_YAO = 2    # every set, and the pair if it is in the suit, holds a 1 or a 9
F_123 = 4    # a sequence 1-2-3 of the suit
F_456 = 8    # a sequence 4-5-6
F_789 = 16   # a sequence 7-8-9
F_LONG = F_123 | F_456 | F_789
_RUN_FEATURE = {0: F_123, 3: F_456, 6: F_789}
FEATURES_MEMO: dict[int, dict[int, tuple]] = {}
FLAGS_MEMO: dict[int, int] = {}


def suit_features(key: int) -> dict[int, tuple]:
    """Feature set → one ``(sets, pair)`` decomposition of a suit key that has it.

    ``sets``: ``("t", rank)`` triplets and ``("q", rank)`` sequences (0-based
    ranks); ``pair``: its rank, or None.  Empty for a key that does not decompose.
    """
    found = FEATURES_MEMO.get(key)
    if found is None:
        found = _decompose(key_counts(key))
        if len(FEATURES_MEMO) >= MEMO_LIMIT:  # (bounded as the memos below: a full memo is emptied)
            FEATURES_MEMO.clear()
        FEATURES_MEMO[key] = found
    return found


def suit_flags(key: int) -> int:
    """The tile facts of a suit key, whether it decomposes or not (seven pairs need them too): ``HAS19``,
    ``NOT258`` and the number of four-of-a-kind ranks ``<< GEN_SHIFT``, as ``SHAPES`` holds them beside
    the shape bits.

    >>> suit_flags(suit_key([2, 0, 0, 0, 4, 0, 0, 0, 0])) == HAS19 | NOT258 | 1 << GEN_SHIFT
    True
    """
    f = FLAGS_MEMO.get(key)
    if f is None:
        f = _tile_flags(key_counts(key))
        if len(FLAGS_MEMO) >= MEMO_LIMIT:
            FLAGS_MEMO.clear()
        FLAGS_MEMO[key] = f
    return f


def _decompose(counts: list[int]) -> dict[int, tuple]:
    out: dict[int, tuple] = {}
    need_pair = sum(counts) % 3 == 2

    def walk(i: int, sets: list, pair: int | None) -> None:
        while i < 9 and not counts[i]:
            i += 1
        if i == 9:
            if need_pair == (pair is not None):
                feats = F_YAO if pair is None or pair in _TERMINAL else 0
                feats |= F_TRIP
                for kind, r in sets:
                    if kind == "t":
                        if r not in _TERMINAL:
                            feats &= ~F_YAO
                    else:
                        feats &= ~F_TRIP
                        if r not in _SEQ_YAO:
                            feats &= ~F_YAO
                        feats |= _RUN_FEATURE.get(r, 0)
                out.setdefault(feats, (tuple(sets), pair))
            return
        if pair is None and need_pair and counts[i] >= 2:
            counts[i] -= 2
            walk(i, sets, i)
            counts[i] += 2
        if counts[i] >= 3:
            counts[i] -= 3
            sets.append(("t", i))
            walk(i, sets, pair)
            sets.pop()
            counts[i] += 3
        if i <= 6 and counts[i + 1] and counts[i + 2]:
            for r in (i, i + 1, i + 2):
                counts[r] -= 1
            sets.append(("q", i))
            walk(i, sets, pair)
            sets.pop()
            for r in (i, i + 1, i + 2):
                counts[r] += 1

    walk(0, [], None)
    return out


def notate(suit: int, sets: tuple, pair: int | None) -> tuple[tuple[str, ...], str | None]:
    """A suit's decomposition in notation: its sets and its pair (or None)."""
    return (tuple(_SET_NOTE[suit][x] for x in sets), None if pair is None else _PAIR_NOTE[suit][pair])


# -- waits -------------------------------------------------------------------------
INFO_MEMO: dict[int, tuple] = {}
DISCARD_MEMO: dict[int, tuple] = {}
MEMO_LIMIT = 1 << 15
"""Entries of each per-suit memo below (keyed by a suit key: never by a whole hand); a full
memo is emptied.  Real hands reuse few suit keys, so the memos stay warm."""


def _digit_ranks(digits: int, first: int) -> tuple[list, list]:
    """For every key of ``digits`` base-5 digits (ranks ``first``...): its odd ranks and its present ranks."""
    odd, present = [], []
    for key in range(5 ** digits):
        k, o, p = key, [], []
        for r in range(first, first + digits):
            k, c = divmod(k, 5)
            if c & 1:
                o.append(r)
            if c:
                p.append(r)
        odd.append(tuple(o))
        present.append(tuple(p))
    return odd, present


_LOW = 5 ** 5  # a suit key = its ranks 1-5 (key % _LOW) and its ranks 6-9 (key // _LOW)
_ODD_LOW, _PRESENT_LOW = _digit_ranks(5, 0)
_ODD_HIGH, _PRESENT_HIGH = _digit_ranks(4, 5)


def present_ranks(key: int) -> tuple[int, ...]:
    """The ranks (0-8) a suit key holds, in order.

    >>> present_ranks(suit_key([2, 0, 0, 0, 1, 0, 0, 0, 3]))
    (0, 4, 8)
    """
    return _PRESENT_LOW[key % _LOW] + _PRESENT_HIGH[key // _LOW]


def suit_info(key: int) -> tuple[bool, tuple[int, ...], tuple[int, ...]]:
    """``(complete, waits, odd)`` of a suit key: it decomposes (in ``SHAPES``), the ranks
    that complete it (``WAITS``) and the ranks it holds an odd number of (seven pairs)."""
    info = INFO_MEMO.get(key)
    if info is None:
        info = (key in SHAPES, WAITS.get(key, ()), _ODD_LOW[key % _LOW] + _ODD_HIGH[key // _LOW])
        if len(INFO_MEMO) >= MEMO_LIMIT:
            INFO_MEMO.clear()
        INFO_MEMO[key] = info
    return info


def suit_discards(key: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Discard search within one suit: the ranks whose removal leaves the suit with waits, and
    those whose removal leaves it complete (``key`` holding one of each rank listed)."""
    found = DISCARD_MEMO.get(key)
    if found is None:
        waiting, complete = [], []
        for r in _PRESENT_LOW[key % _LOW] + _PRESENT_HIGH[key // _LOW]:
            rest = key - POW5[r]
            if rest in WAITS:
                waiting.append(r)
            if rest in SHAPES:
                complete.append(r)
        found = (tuple(waiting), tuple(complete))
        if len(DISCARD_MEMO) >= MEMO_LIMIT:
            DISCARD_MEMO.clear()
        DISCARD_MEMO[key] = found
    return found


def wait_tiles(keys, n_concealed: int, n_melds: int, held, mask: int, void_suit: int) -> list[int]:
    """Indices of the tiles that complete a 13-size hand, in canonical order (§4).

    ``held``: copies in hand and melds (a tile held 4 times is no wait);
    ``mask``: the suits present, melds included; ``void_suit``: -1 or a suit index.
    A 花猪 (three suits, or holding its void suit) has no waits.
    """
    if mask == 7 or (void_suit >= 0 and mask >> void_suit & 1):
        return []
    k0, k1, k2 = keys
    c0, w0, o0 = INFO_MEMO.get(k0) or suit_info(k0)
    c1, w1, o1 = INFO_MEMO.get(k1) or suit_info(k1)
    c2, w2, o2 = INFO_MEMO.get(k2) or suit_info(k2)
    found: list[int] = []
    two = mask == 3 or mask == 5 or mask == 6  # two suits: waits only in those (缺一门)
    if w0 and c1 and c2 and void_suit != 0 and not (two and not mask & 1):
        found += [r for r in w0 if held[r] < 4]
    if w1 and c0 and c2 and void_suit != 1 and not (two and not mask & 2):
        found += [9 + r for r in w1 if held[9 + r] < 4]
    if w2 and c0 and c1 and void_suit != 2 and not (two and not mask & 4):
        found += [18 + r for r in w2 if held[18 + r] < 4]
    if n_melds == 0 and n_concealed == 13 and len(o0) + len(o1) + len(o2) == 1:
        t = o0[0] if o0 else 9 + o1[0] if o1 else 18 + o2[0]
        if held[t] < 4 and t not in found:
            found.append(t)
            found.sort()
    return found


def waits_without(keys, n_concealed: int, n_melds: int, held, mask: int, void_suit: int, tile: int) -> list[int]:
    """The waits of a 14-size hand's 13 once ``tile`` (one of its concealed tiles) is taken out."""
    s = SUIT_OF[tile]
    k = list(keys)
    k[s] -= POW_OF[tile]
    h = list(held)
    h[tile] -= 1
    if not k[s]:
        mask = mask & ~(1 << s) if not any(h[s * 9: s * 9 + 9]) else mask
    return wait_tiles(k, n_concealed - 1, n_melds, h, mask, void_suit)
