"""The per-suit table of shanten (docs/rules.md#s16): for one suit's tiles, how many of them a win can keep.

A suit's nine counts form its base-5 key (as in :mod:`~.shapes`).  Its *row* has ten cells, one for
each number of sets ``j`` (0-4) and of pairs ``p`` (0-1), cell ``j + 5 * p``: the most of the suit's
tiles that ``j`` sets (triplets ``111``, sequences ``123``) and ``p`` pairs of that suit can hold,
with at most four copies of each rank in the sets and pair (fewer where the hand's melds hold
copies of that rank: a 碰 leaves one, a 杠 none).  A set or pair that holds none of the tiles can
always be placed somewhere else in the suit, so a row never falls as ``j`` or ``p`` grows.

Two ways to the same rows:

* :func:`suit_row`, a dynamic programme over the ranks (any limits): the definition, and the rows
  of a suit that holds melds (few, kept in a bounded memo);
* :func:`build`, every key of at most 14 tiles at once with the limits of no meld: a key's cell is
  its tile count where the key fits some pattern of that cell (is a sub-multiset of it), else the
  best of the keys with one tile fewer; the patterns are the ting core's complete shapes
  (:data:`~.shapes.SHAPES`, any number of sets up to four and at most one pair).

:func:`build` is far too slow for an import (405,350 keys, one at a time, in Python), so its result
is computed once and shipped beside this module (``shanten_rows.xz``: the rows of all 5⁹ keys,
4 bytes each, little-endian, xz-compressed; loaded into :data:`ROWS`, an array indexed by the key;
docs/performance.md has its size, load time and memory).  ``python -m service.rules.shanten_table``
writes it again; tests/test_shanten.py checks it against :func:`suit_row` (and against :func:`build`,
every key, in the slow lane).

A row is stored in 30 bits: the five cells without a pair, 4 bits each, then for each ``j`` what
the pair adds (0-2: a pair holds at most two tiles more), 2 bits each (:func:`encode`).

>>> decode(ROWS[suit_key([1, 1, 1, 0, 0, 0, 0, 0, 2])])    # 123 and 99
(0, 3, 5, 5, 5, 2, 5, 5, 5, 5)
>>> decode(row_of(suit_key([1, 1, 1, 0, 0, 0, 0, 0, 2]))) == suit_row([1, 1, 1, 0, 0, 0, 0, 0, 2])
True
"""

from __future__ import annotations

import lzma
import sys
from array import array
from importlib import resources

from .hand import POW5
from .shapes import SHAPES

FULL = (4,) * 9
"""The limits of a suit with no meld in it: four copies of every rank."""

KEYS = 5 ** 9
MEMO_LIMIT = 1 << 15
"""Entries of each per-suit memo below (keyed by a suit key and its limits); a full memo is emptied."""

TABLE_FILE = "shanten_rows.xz"


def suit_key(counts) -> int:
    return sum(c * POW5[r] for r, c in enumerate(counts))


def key_counts(key: int) -> list[int]:
    out = []
    for _ in range(9):
        key, c = divmod(key, 5)
        out.append(c)
    return out


# -- the definition -------------------------------------------------------------------------
def suit_row(counts, limits=FULL) -> tuple[int, ...]:
    """The row of one suit (``counts``: nine ranks; ``limits``: the copies of each rank its sets and
    pair may hold), by a dynamic programme over the ranks.

    The state after a rank: the sequences begun at the two ranks before it (they still need tiles of
    the ranks to come), the sets and the pairs so far; its value, the most tiles held so far.

    1111: a set holds three (111), two sets four (111 and a 1 of 123); one set and the pair hold three
    (11 and a 1 of 123: 111 and 11 would be five 1s):

    >>> suit_row([4, 0, 0, 0, 0, 0, 0, 0, 0])
    (0, 3, 4, 4, 4, 2, 3, 4, 4, 4)

    Beside a 碰 of 1s, a single 1 can still be in a sequence (123), but not in the pair:

    >>> row = suit_row([1, 0, 0, 0, 0, 0, 0, 0, 0], limits=(1,) + (4,) * 8)
    >>> row[1], row[5]
    (1, 0)
    """
    states = {0: 0}  # a + 5 b + 25 j + 125 p -> the most tiles held so far
    for r in range(9):
        c = counts[r]
        cap = limits[r]
        nxt: dict[int, int] = {}
        get = nxt.get
        for state, held in states.items():
            a = state % 5               # sequences begun at r - 1 (need r and r + 1)
            b = state // 5 % 5          # sequences begun at r - 2 (need r)
            j = state // 25 % 5
            p = state // 125
            base = a + b
            if base > cap:
                continue
            top = min(4 - j, cap - base) if r <= 6 else 0
            for s in range(top + 1):    # sequences begun at r
                for t in (0, 1) if j + s < 4 else (0,):   # a triplet of r
                    for q in (0, 1) if not p else (0,):    # the pair, of r
                        used = base + s + 3 * t + 2 * q
                        if used > cap:
                            continue
                        to = s + 5 * a + 25 * (j + s + t) + 125 * (p + q)
                        value = held + (c if c < used else used)
                        if get(to, -1) < value:
                            nxt[to] = value
        states = nxt
    row = [0] * 10
    for state, held in states.items():
        cell = state // 25 % 5 + 5 * (state // 125)
        if held > row[cell]:
            row[cell] = held
    for p in (0, 5):
        for j in range(1, 5):
            if row[p + j - 1] > row[p + j]:
                row[p + j] = row[p + j - 1]
    for j in range(5):
        if row[j] > row[5 + j]:
            row[5 + j] = row[j]
    return tuple(row)


def encode(row) -> int:
    """A row in 30 bits (see the module)."""
    out = 0
    for j in range(5):
        out |= row[j] << (4 * j) | (row[5 + j] - row[j]) << (20 + 2 * j)
    return out


def decode(code: int) -> tuple[int, ...]:
    low = tuple(code >> (4 * j) & 15 for j in range(5))
    return low + tuple(low[j] + (code >> (20 + 2 * j) & 3) for j in range(5))


def cell(code: int, i: int) -> int:
    """Cell ``i`` (``j + 5 * p``) of an encoded row."""
    if i < 5:
        return code >> (4 * i) & 15
    j = i - 5
    return (code >> (4 * j) & 15) + (code >> (20 + 2 * j) & 3)


# -- every key at once ------------------------------------------------------------------------
def build() -> array:
    """The encoded rows of all 5⁹ keys (0 for a key of more than 14 tiles, which no hand has)."""
    by_size: list[list[int]] = [[] for _ in range(15)]

    def walk(r: int, key: int, n: int) -> None:
        if r == 9:
            by_size[n].append(key)
            return
        for c in range(min(4, 14 - n) + 1):
            walk(r + 1, key + c * POW5[r], n + c)

    walk(0, 0, 0)
    none = 9
    # the fewest sets of a pattern a key fits, without a pair and with one (none: it fits none)
    fewest: dict[int, tuple[int, int]] = {}
    for n in range(14, -1, -1):
        for key in by_size[n]:
            a = b = none
            if key in SHAPES:
                if n % 3 == 0:
                    a = n // 3
                elif n % 3 == 2:
                    b = n // 3
            if n < 14:
                k = key
                for r in range(9):
                    k, c = divmod(k, 5)
                    if c < 4:
                        up = fewest.get(key + POW5[r])
                        if up is not None:
                            if up[0] < a:
                                a = up[0]
                            if up[1] < b:
                                b = up[1]
            if a < none or b < none:
                fewest[key] = (a, b if b < a else a)
    rows = array("I", bytes(4 * KEYS))
    full: dict[int, list[int]] = {}
    for n in range(15):
        for key in by_size[n]:
            row = [0] * 10
            k = key
            for r in range(9):
                k, c = divmod(k, 5)
                if c:
                    sub = full[key - POW5[r]]
                    for i in range(10):
                        if sub[i] > row[i]:
                            row[i] = sub[i]
            a, b = fewest.get(key, (none, none))
            for j in range(max(a, 0), 5):
                row[j] = n
            for j in range(max(b, 0), 5):
                row[5 + j] = n
            full[key] = row
            rows[key] = encode(row)
        for key in by_size[n - 1] if n else ():
            del full[key]  # (rows of n - 1 tiles are needed by those of n only)
    return rows


def to_bytes(rows: array) -> bytes:
    out = array("I", rows)
    if sys.byteorder != "little":
        out.byteswap()
    return lzma.compress(out.tobytes(), preset=9)


def load() -> array:
    data = lzma.decompress(resources.files(__package__).joinpath(TABLE_FILE).read_bytes())
    rows = array("I")
    rows.frombytes(data)
    if sys.byteorder != "little":
        rows.byteswap()
    if len(rows) != KEYS:
        raise RuntimeError(f"{TABLE_FILE} holds {len(rows)} rows, not {KEYS}: write it again "
                           "(python -m service.rules.shanten_table)")
    return rows


ROWS = load() if __name__ != "__main__" else array("I")
"""Encoded row of every suit key (limits of no meld)."""


# -- rows with limits, and what a draw raises ------------------------------------------------
LIMITED: dict[tuple, int] = {}


def row_of(key: int, limits=FULL) -> int:
    """The encoded row of a suit key under ``limits`` (:data:`ROWS` for none; else memoized)."""
    if limits is FULL:
        return ROWS[key]
    memo_key = (key, limits)
    found = LIMITED.get(memo_key)
    if found is None:
        found = encode(suit_row(key_counts(key), limits))
        if len(LIMITED) >= MEMO_LIMIT:
            LIMITED.clear()
        LIMITED[memo_key] = found
    return found


def _spread() -> list[int]:
    out = []
    for deltas in range(1024):
        out.append(sum((deltas >> (2 * j) & 3) << (4 * j) for j in range(5)))
    return out


_SPREAD = _spread()  # the five 2-bit deltas of an encoded row, each in a 4-bit lane


def lanes(code: int) -> int:
    """An encoded row with its ten cells in 4-bit lanes, cell ``i`` at bit ``4 * i``: cells compare and
    subtract lane by lane (no cell exceeds 14, no lane carries).

    >>> counts = (0, 3, 5, 5, 5, 2, 5, 5, 5, 5)
    >>> lanes(encode(counts)) == sum(v << (4 * i) for i, v in enumerate(counts))
    True
    """
    low = code & 0xFFFFF
    return low | (low + _SPREAD[code >> 20]) << 20


RAISES: dict = {}


def suit_raises(key: int, limits=FULL) -> tuple[int, ...]:
    """For each rank, the cells of the suit's row that one more tile of that rank raises, as a lane
    mask (1 in the lane of each cell raised, as :func:`lanes` places them; 0 for a rank at its limit).

    A draw raises a cell by one at most, and lowers none: the lanes of the difference of the two
    rows are that mask.

    >>> raises = suit_raises(suit_key([0, 1, 1, 0, 0, 0, 0, 0, 0]))   # 23: 1 and 4 make a set of it
    >>> [r + 1 for r in range(9) if raises[r] >> (4 * 1) & 1]         # the cell of one set, no pair
    [1, 4]
    """
    memo_key = key if limits is FULL else (key, limits)
    found = RAISES.get(memo_key)
    if found is None:
        if limits is FULL:  # (lanes() inlined: one look-up in ROWS per rank)
            spread = _SPREAD
            code = ROWS[key]
            low = code & 0xFFFFF
            before = low | (low + spread[code >> 20]) << 20
            out = []
            k = key
            for r in range(9):
                k, c = divmod(k, 5)
                if c >= 4:
                    out.append(0)
                    continue
                code = ROWS[key + POW5[r]]
                low = code & 0xFFFFF
                out.append((low | (low + spread[code >> 20]) << 20) - before)
        else:
            before = lanes(row_of(key, limits))
            out = []
            k = key
            for r in range(9):
                k, c = divmod(k, 5)
                out.append(0 if c >= limits[r] else lanes(row_of(key + POW5[r], limits)) - before)
        found = tuple(out)
        if len(RAISES) >= MEMO_LIMIT:
            RAISES.clear()
        RAISES[memo_key] = found
    return found


def _pair_parts(digits: int) -> list[int]:
    out = []
    for key in range(5 ** digits):
        twos = ones = 0
        for _ in range(digits):
            key, c = divmod(key, 5)
            twos += c // 2
            ones += c & 1
        out.append(twos << 5 | ones)
    return out


_LOW = 5 ** 5
_PAIRS_LOW = _pair_parts(5)
_PAIRS_HIGH = _pair_parts(4)


def _parity_parts(digits: int, first: int) -> list[int]:
    out = []
    for key in range(5 ** digits):
        odd = even = 0
        for r in range(first, first + digits):
            key, c = divmod(key, 5)
            if c & 1:
                odd |= 1 << r
            elif c < 4:
                even |= 1 << r
        out.append(odd | even << 9)
    return out


_PARITY_LOW = _parity_parts(5, 0)
_PARITY_HIGH = _parity_parts(4, 5)


def parity(key: int) -> int:
    """Seven pairs' draws of a suit, two 9-bit rank sets packed ``odd | even << 9``: the ranks held once
    or three times (a draw makes a pair), and those held no times or twice (a draw makes a single).

    >>> p = parity(suit_key([1, 2, 3, 4, 0, 0, 0, 0, 0]))
    >>> [r + 1 for r in range(9) if p >> r & 1], [r + 1 for r in range(9) if p >> (9 + r) & 1]
    ([1, 3], [2, 5, 6, 7, 8, 9])
    """
    return _PARITY_LOW[key % _LOW] + _PARITY_HIGH[key // _LOW]


def pair_counts(key: int) -> int:
    """Seven pairs' view of a suit, packed ``twos << 5 | ones``: the pairs its tiles make (a rank of four
    makes two) and the ranks holding one tile more than their pairs.  Packed values of two suits add.

    >>> divmod(pair_counts(suit_key([1, 2, 3, 4, 0, 0, 0, 0, 0])), 32)
    (4, 2)
    """
    return _PAIRS_LOW[key % _LOW] + _PAIRS_HIGH[key // _LOW]


def seven_pairs(packed: int) -> int:
    """The most tiles seven pairs can keep of tiles with ``packed`` (:func:`pair_counts`, added over suits):
    two for each whole pair, one for each single, seven pairs in all."""
    twos = packed >> 5
    whole = twos if twos < 7 else 7
    ones = packed & 31
    half = 7 - whole
    return 2 * whole + (ones if ones < half else half)


SEVEN_PAIRS = tuple(seven_pairs(packed) for packed in range(1 << 10))
""":func:`seven_pairs` of every packed view (of one suit or two suits' added)."""


if __name__ == "__main__":  # write the table again
    path = resources.files(__package__).joinpath(TABLE_FILE)
    with open(str(path), "wb") as f:
        f.write(to_bytes(build()))
    print(f"wrote {path}")
