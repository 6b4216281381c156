"""Shanten (向听) and useful tiles (有效进张) (docs/rules.md#s16), by per-suit tables.

A hand's shanten is counted from the wins it could become.  A win ``W`` (the hand's melds, its
concealed tiles in at most two suits, never the void suit, at most four copies of a tile with the
melds counted) is reached from the hand ``H`` by drawing the tiles of ``W`` that ``H`` lacks and
discarding the others: the last draw completes it, every earlier draw is one exchange.  So

    shanten(H) = min over such W of |W \\ H| − 1

for 13 tiles and for 14 alike: −1 when the 14 win; 0 for a 13 that is ting with a wait that has a
copy left (docs/rules.md#s4: ``W`` holds at most four, so its last tile has one left).  ``|W \\ H|``
is ``|W|`` minus the tiles the two share, their *overlap*, and the overlap adds up over the suits.

**Per suit**, :mod:`~.shanten_table` gives a *row*: for ``j`` sets and ``p`` pairs of that suit, the
most of its tiles they can hold (one look-up in a table of every suit key).  **A hand** tries each
pair of suits it may keep (缺一门: the void suit never, and both suits of its melds), splitting
``4 − melds`` sets and the pair between their two rows (:func:`combine`, memoized by the two rows),
and without melds seven pairs as well; the best overlap gives the shanten.

**Useful tiles** of a 13-tile hand are the draws that lower its shanten by one: a draw raises the
best overlap exactly when it raises a cell of its suit's row that some best split of some best pair
of suits uses (the table's neighbouring row tells which cells a draw raises:
:func:`~.shanten_table.suit_raises`), or raises seven pairs' count where seven pairs are best.

**A 14's options** are its discards' 13s with the discard seen.  Of concealed tiles only (no melds, no
void, four players, nothing visible: what clients mostly send), a discard changes one suit's key: the
pair of the two other suits and their useful tiles are worked out once per suit discarded from, the
discarded suit's new row once per discard (:func:`_plain_options`).

>>> shanten("1112345678999m")                  # ting
0
>>> shanten("11122233344456m")                 # 14 tiles that win
-1
>>> shanten("147m258p369s1234m")               # 11 and 44 of seven pairs, and five singles
4
>>> u = useful_tiles("12345m678m4599p1p")      # 一向听 (1-shanten)
>>> u.shanten, [str(t.tile) for t in u.tiles], u.remaining
(1, ['3m', '6m', '9m', '3p', '6p'], 18)
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter

from .hand import POW5, Hand, parse_hand, require_in_play, require_valid, suit_groups
from .ruleset import XUEZHAN, Ruleset
from .shanten_table import (
    FULL,
    KEYS,
    ROWS,
    SEVEN_PAIRS,
    lanes,
    pair_counts,
    parity,
    row_of,
    suit_raises,
)
from .tiles import SUITS, TILES, Tile
from .ting import visible_counts

MEMO_LIMIT = 1 << 15
"""Entries of each memo below (keyed by rows, or by one suit's group of a hand string: never by a
whole hand); a full memo is emptied."""


# -- results ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class UsefulTile:
    """A tile whose draw lowers the shanten, with its copies left: not in the hand, its melds or
    ``visible`` (for a 14-tile hand's option, nor the discarded copy)."""

    tile: Tile
    remaining: int


@dataclass(frozen=True, slots=True)
class Shanten:
    """A 13-tile hand: its shanten (None: its melds alone break 缺一门 or hold the void suit), its
    useful tiles in canonical order and their copies left in all."""

    shanten: int | None
    tiles: tuple[UsefulTile, ...]
    remaining: int


USEFUL = tuple(tuple(UsefulTile(t, left) for left in range(5)) for t in TILES)
"""Every useful tile there can be, by tile index and copies left: values, shared by the answers."""


@dataclass(frozen=True, slots=True)
class ShantenOption:
    """One discard of a 14-tile hand: the shanten and the useful tiles of the 13 tiles left."""

    discard: Tile
    shanten: int
    tiles: tuple[UsefulTile, ...]
    remaining: int

    @classmethod
    def _of(cls, discard: Tile, shanten: int, tiles: tuple, remaining: int) -> ShantenOption:
        """Build one without the frozen ``__init__``'s look-ups (the options' hot path)."""
        obj = _new(cls)
        _SET_DISCARD(obj, discard)
        _SET_SHANTEN(obj, shanten)
        _SET_TILES(obj, tiles)
        _SET_REMAINING(obj, remaining)
        return obj


_new = object.__new__
# each slot's own setter (what object.__setattr__ finds by the field's name, without the look-up)
_SET_DISCARD, _SET_SHANTEN, _SET_TILES, _SET_REMAINING = (
    ShantenOption.__dict__[name].__set__ for name in ("discard", "shanten", "tiles", "remaining"))


@dataclass(frozen=True, slots=True)
class ShantenOptions:
    """A 14-tile hand: its shanten (−1: it wins; None as for :class:`Shanten`) and an option for each
    distinct discard, best first: lowest shanten, then most useful tiles left, then the discard's
    tile order (none when the shanten is None)."""

    shanten: int | None
    options: tuple[ShantenOption, ...]


# -- a pair of suits -------------------------------------------------------------------------
COMBINED: dict[int, tuple[int, int, int]] = {}
"""``(row a, row b, sets)``, packed ``(a << 32 | b) << 3 | sets`` → :func:`combine`'s answer."""


def combine(row_a: int, row_b: int, sets: int) -> tuple[int, int, int]:
    """The best split of ``sets`` sets and the pair between two suits' rows (encoded): the most tiles
    they keep, and for each suit the cells that some best split uses, as a lane mask (a 1 in the
    lane of each, as :func:`~.shanten_table.lanes` places them); memoized.

    >>> from service.rules.shanten_table import suit_key
    >>> combine(ROWS[suit_key([1] * 9)], ROWS[suit_key([0, 0, 0, 0, 2, 0, 0, 0, 1])], 4)[0]   # 123456789 + 559
    12
    """
    memo_key = (row_a << 32 | row_b) << 3 | sets
    found = COMBINED.get(memo_key)
    if found is None:
        la = lanes(row_a)
        lb = lanes(row_b)
        best = -1
        cells_a = cells_b = 0
        for j in range(sets + 1):
            for p in (0, 1):
                ca = 4 * (j + 5 * p)
                cb = 4 * (sets - j + 5 * (1 - p))
                v = (la >> ca & 15) + (lb >> cb & 15)
                if v > best:
                    best, cells_a, cells_b = v, 1 << ca, 1 << cb
                elif v == best:
                    cells_a |= 1 << ca
                    cells_b |= 1 << cb
        found = (best, cells_a, cells_b)
        if len(COMBINED) >= MEMO_LIMIT:
            COMBINED.clear()
        COMBINED[memo_key] = found
    return found


# -- the hot path: a hand string of concealed tiles ---------------------------------------------
GROUPS: dict[str, int] = {"": 0}
"""One suit's group of a hand string (its ranks) → its row and seven pairs' view, packed ``row |
pairs << 32`` (:func:`~.shanten_table.pair_counts`); a group of other characters, or of more than
four copies of a rank, is not kept (the full parse tells what is wrong with it)."""
PAIRED: dict[int, int] = {}
"""Two suits' packed groups → the most tiles a win of those two suits keeps (no melds: seven pairs too)."""
_ROW = (1 << 30) - 1


def _group(ranks: str) -> int | None:
    """The packed group of a suit's ranks (kept in :data:`GROUPS`), or None for ranks that are not a
    suit's tiles (another character, more than 14, a fifth copy)."""
    found = GROUPS.get(ranks)
    if found is not None:
        return found
    key = _suit_key(ranks)
    if key is None:
        return None
    packed = ROWS[key] | pair_counts(key) << 32
    if len(GROUPS) >= MEMO_LIMIT:
        GROUPS.clear()
        GROUPS[""] = 0
    GROUPS[ranks] = packed
    return packed


_RANK_WEIGHT = {str(r + 1): POW5[r] for r in range(9)}
SUIT_KEYS: dict[str, int] = {"": 0}
"""One suit's group of a hand string (its ranks) → its suit key (as :data:`GROUPS`, what is not a suit's
tiles not kept)."""


def _suit_key(ranks: str) -> int | None:
    """The suit key of a suit's ranks (kept in :data:`SUIT_KEYS`), or None (as :func:`_group`)."""
    found = SUIT_KEYS.get(ranks)
    if found is not None:
        return found
    if len(ranks) > 14:
        return None
    try:
        key = sum(map(_RANK_WEIGHT.__getitem__, ranks))
    except KeyError:
        return None
    if key >= KEYS:
        return None
    pairs = pair_counts(key)
    if 2 * (pairs >> 5) + (pairs & 31) != len(ranks):  # a fifth copy carried into the next rank's digit
        return None
    if len(SUIT_KEYS) >= MEMO_LIMIT:
        SUIT_KEYS.clear()
        SUIT_KEYS[""] = 0
    SUIT_KEYS[ranks] = key
    return key


def _paired(a: int, b: int) -> int:
    memo_key = a << 42 | b
    best = combine(a & _ROW, b & _ROW, 4)[0]
    seven = SEVEN_PAIRS[(a >> 32) + (b >> 32)]
    found = best if best > seven else seven
    if len(PAIRED) >= MEMO_LIMIT:
        PAIRED.clear()
    PAIRED[memo_key] = found
    return found


# -- any hand ------------------------------------------------------------------------------------
_PAIRS = ((0, 1), (0, 2), (1, 2))
_PAIRS_OF_THREE = ((1, 2),)  # three players: 筒 and 条


def _suits(hand: Hand, players: int) -> tuple[tuple, tuple]:
    """The pairs of suits a win of the hand may hold (none when its melds alone rule every pair out)
    and each suit's limits (the copies its sets and pair may hold beside the melds)."""
    void = -1 if hand.void is None else SUITS.index(hand.void)
    if not hand.melds:
        pairs = _PAIRS_OF_THREE if players == 3 else _PAIRS if void < 0 else (_PAIRS[2 - void],)
        return pairs, _NO_MELDS
    caps = [list(FULL), list(FULL), list(FULL)]
    mask = 0
    for m in hand.melds:
        i = m.tile.index
        caps[i // 9][i % 9] -= m.copies
        mask |= 1 << (i // 9)
    limits = tuple(tuple(max(c, 0) for c in caps[s]) if mask >> s & 1 else FULL for s in range(3))
    pairs = tuple((a, b) for a, b in (_PAIRS_OF_THREE if players == 3 else _PAIRS)
                  if void != a and void != b and not mask & ~(1 << a | 1 << b))
    return pairs, limits


_KEEP = {(True, True, False): ((0, 1),), (True, False, True): ((0, 2),), (False, True, True): ((1, 2),)}


def _kept(keys, pairs):
    """The pairs of suits worth trying: of all three (no meld, no void, four players), only the two
    suits with tiles when the third has none (a suit with no tile keeps nothing: a pair with it keeps
    no more, and ties only where its cells are empty ones, which no draw raises)."""
    if len(pairs) == 3:
        return _KEEP.get((keys[0] > 0, keys[1] > 0, keys[2] > 0), pairs)
    return pairs


def _best(keys, limits, pairs, melds: int) -> int:
    """The most tiles of the hand (suit keys ``keys``) a win can keep."""
    sets = 4 - melds
    best = -1
    for a, b in _kept(keys, pairs):
        v = combine(row_of(keys[a], limits[a]), row_of(keys[b], limits[b]), sets)[0]
        if v > best:
            best = v
        if not melds:
            v = SEVEN_PAIRS[pair_counts(keys[a]) + pair_counts(keys[b])]
            if v > best:
                best = v
    return best


def _useful(keys, rows, pcs, limits, pairs, melds: int, held, seen, plain: bool, drop: int = -1
            ) -> tuple[int, tuple[UsefulTile, ...], int]:
    """Shanten, useful tiles and their total of 13 tiles: ``keys``, ``rows``, ``pcs`` their suits' keys,
    rows and seven pairs' views (at least one pair of suits to keep); ``held`` their copies, melds
    counted; ``seen`` the copies counted as not left (held, visible, for an option the discard too).

    ``plain``: nothing visible, so that the copies seen of a suit without melds are its own tiles and
    the discard (tile ``drop``, for an option): its useful tiles are then one memoized answer
    (:func:`_suit_useful`)."""
    sets = 4 - melds
    best = -1
    cells = [0, 0, 0]
    seven_best = None
    if len(pairs) == 3:  # (as _kept: only the two suits with tiles when the third has none)
        pairs = _KEEP.get((keys[0] > 0, keys[1] > 0, keys[2] > 0), pairs)
    for a, b in pairs:
        ra = rows[a]
        rb = rows[b]
        v, cells_a, cells_b = COMBINED.get((ra << 32 | rb) << 3 | sets) or combine(ra, rb, sets)
        seven = SEVEN_PAIRS[pcs[a] + pcs[b]] if not melds else -1
        top = v if v > seven else seven
        if top < best:
            continue
        if top > best:
            best = top
            cells = [0, 0, 0]
            seven_best = None
        if v == top:
            cells[a] |= cells_a
            cells[b] |= cells_b
        if seven == top:
            seven_best = (seven_best or ()) + ((a, b),)
    tiles = ()
    total = 0
    if plain and seven_best is None and limits is _NO_MELDS:
        for s in (0, 1, 2):
            c = cells[s]
            if c:
                dr = drop - 9 * s
                memo_key = (((keys[s] << 40 | c) * 10 + (dr if 0 <= dr < 9 else 9)) << 2) + s
                found = SUIT_USEFUL.get(memo_key) or _suit_useful(memo_key, s, keys[s], c, dr if 0 <= dr < 9 else 9)
                tiles += found[0]
                total += found[1]
        return 13 - 3 * melds - best, tiles, total
    ranks = [_raised(keys[s], limits[s], cells[s]) if cells[s] else 0 for s in range(3)]
    if seven_best:  # draws that raise seven pairs' count where it is best
        for a, b in seven_best:
            packed = pcs[a] + pcs[b]
            now = SEVEN_PAIRS[packed]
            want = (511 if SEVEN_PAIRS[packed + 31] > now else 0) | (511 << 9 if SEVEN_PAIRS[packed + 1] > now else 0)
            if want:  # (packed + 31: a single made a pair; packed + 1: one more single)
                for s in (a, b):
                    p = parity(keys[s]) & want
                    ranks[s] |= (p | p >> 9) & 511
    for s in range(3):
        mask = ranks[s]
        if not mask:
            continue
        if plain and limits[s] is FULL:
            dr = drop - 9 * s if 0 <= drop - 9 * s < 9 else 9
            memo_key = ((keys[s] << 9 | mask) * 10 + dr) * 3 + s
            found = LISTED.get(memo_key) or _listed(memo_key, s, keys[s], mask, dr)
            tiles += found[0]
            total += found[1]
            continue
        for r in _RANKS_OF[mask]:
            t = 9 * s + r
            left = 4 - seen[t]
            if left > 0 and held[t] < 4:
                tiles += (USEFUL[t][left],)
                total += left
    return 13 - 3 * melds - best, tiles, total


_NO_MELDS = (FULL, FULL, FULL)
SUIT_USEFUL: dict[int, tuple[tuple[UsefulTile, ...], int]] = {}
"""``(suit key, cells, rank discarded or 9, suit)`` → the useful tiles of a suit without melds whose
draws raise those cells of its row, nothing visible (its copies seen: its tiles, and the discard), and
their total (what :func:`_raised` and :func:`_listed` give, in one look-up)."""


def _suit_useful(memo_key: int, s: int, key: int, cells: int, dr: int) -> tuple[tuple[UsefulTile, ...], int]:
    raises = suit_raises(key)
    seen = key + (POW5[dr] if dr < 9 else 0)
    tiles = []
    total = 0
    for r in range(9):
        if raises[r] & cells:
            left = 4 - seen // POW5[r] % 5
            if left > 0:
                tiles.append(USEFUL[9 * s + r][left])
                total += left
    found = (tuple(tiles), total)
    if len(SUIT_USEFUL) >= MEMO_LIMIT:
        SUIT_USEFUL.clear()
    SUIT_USEFUL[memo_key] = found
    return found


LISTED: dict[int, tuple[tuple[UsefulTile, ...], int]] = {}
"""``(suit key, ranks, rank discarded or 9, suit)`` → the useful tiles of those ranks of a suit without
melds, nothing visible (its copies seen: its tiles, and the discard), and their total."""


def _listed(memo_key: int, s: int, key: int, mask: int, dr: int) -> tuple[tuple[UsefulTile, ...], int]:
    found = LISTED.get(memo_key)
    if found is not None:
        return found
    seen = key + (POW5[dr] if dr < 9 else 0)
    tiles = []
    total = 0
    for r in _RANKS_OF[mask]:
        left = 4 - seen // POW5[r] % 5
        if left > 0:
            tiles.append(USEFUL[9 * s + r][left])
            total += left
    found = (tuple(tiles), total)
    if len(LISTED) >= MEMO_LIMIT:
        LISTED.clear()
    LISTED[memo_key] = found
    return found


_RANKS_OF = tuple(tuple(r for r in range(9) if mask >> r & 1) for mask in range(512))
RAISED: dict = {}
"""``(suit key, limits, cells)`` → the ranks (a 9-bit set) whose draw raises one of those cells of its row."""


def _raised(key: int, limits, cells: int) -> int:
    memo_key = (key << 40 | cells) if limits is FULL else (key, limits, cells)
    found = RAISED.get(memo_key)
    if found is None:
        raises = suit_raises(key, limits)
        found = 0
        for r in range(9):
            if raises[r] & cells:
                found |= 1 << r
        if len(RAISED) >= MEMO_LIMIT:
            RAISED.clear()
        RAISED[memo_key] = found
    return found


def _rules(ruleset) -> Ruleset:
    return XUEZHAN if ruleset is None else Ruleset.from_spec(ruleset)


def _checked(hand, rules: Ruleset, sizes: tuple[int, ...], vis_tiles=()) -> Hand:
    """The hand parsed, its size one of ``sizes``, no fifth copy (``visible`` counted), no 万 with three players."""
    if not isinstance(hand, Hand):
        hand = parse_hand(hand)
    if hand.size not in sizes or hand.max_held > 4 or vis_tiles:
        require_valid(hand, sizes, vis_tiles)
    if rules.players == 3:
        require_in_play(hand, 3, vis_tiles)
    return hand


def shanten(hand: Hand | str, *, ruleset: Ruleset | str | None = None) -> int | None:
    """The shanten of a hand of 13 or 14 tiles (melds counted as 3): 0 ting, −1 a win of 14; None when
    its melds alone break 缺一门 or hold the void suit.

    A hand string of concealed tiles in canonical suit order (what clients send) is answered from its
    suits' groups: each group's packed row (:data:`GROUPS`), then the best pair of suits (:data:`PAIRED`);
    anything else (melds, a void, a ruleset, another spelling, bad input) by the general road.

    >>> shanten(parse_hand("123p456p789p5s", melds=[{"type": "peng", "tile": "1m"}]))   # the 5s must go
    1
    >>> shanten(parse_hand("123p456p789p5s", melds=[{"type": "peng", "tile": "1m"}], void="m")) is None
    True
    """
    if ruleset is None and type(hand) is str:
        groups = suit_groups(hand)
        if groups is not None:
            m, p, s = groups
            get = GROUPS.get
            a = get(m)
            b = get(p)
            c = get(s)
            if a is None or b is None or c is None:
                a = _group(m)
                b = _group(p)
                c = _group(s)
            n = len(m) + len(p) + len(s)
            if (n == 13 or n == 14) and a is not None and b is not None and c is not None:
                paired = PAIRED.get
                if m and p and s:  # three suits: one must go
                    x = paired(a << 42 | b) or _paired(a, b)
                    y = paired(a << 42 | c) or _paired(a, c)
                    z = paired(b << 42 | c) or _paired(b, c)
                    best = x if x > y else y
                    if z > best:
                        best = z
                elif not s:  # (a suit with no tile keeps nothing: the pair of the others, or of the one, is best)
                    best = paired(a << 42 | b) or _paired(a, b)
                elif m:
                    best = paired(a << 42 | c) or _paired(a, c)
                else:
                    best = paired(b << 42 | c) or _paired(b, c)
                return 13 - best
    rules = _rules(ruleset)
    h = _checked(hand, rules, (13, 14))
    pairs, limits = _suits(h, rules.players)
    if not pairs:
        return None
    return 13 - 3 * len(h.melds) - _best(h.keys, limits, pairs, len(h.melds))


def useful_tiles(hand: Hand | str, *, ruleset: Ruleset | str | None = None, visible=None) -> Shanten:
    """The shanten of a 13-tile hand and its useful tiles, each with its copies left (``visible``: tiles
    seen elsewhere, a hand string or tiles).

    >>> u = useful_tiles("1112345678999m", visible="5m5m5m")   # ting: its waits (5m: none left)
    >>> [(str(t.tile), t.remaining) for t in u.tiles], u.remaining
    ([('1m', 1), ('2m', 3), ('3m', 3), ('4m', 3), ('6m', 3), ('7m', 3), ('8m', 3), ('9m', 1)], 20)
    """
    rules = _rules(ruleset)
    vis, vis_tiles = visible_counts(visible) if visible else (None, ())
    h = _checked(hand, rules, (13,), vis_tiles)
    pairs, limits = _suits(h, rules.players)
    if not pairs:
        return Shanten(None, (), 0)
    held = h.held
    seen = held if vis is None else tuple(x + y for x, y in zip(held, vis))
    keys = h.keys
    rows = (row_of(keys[0], limits[0]), row_of(keys[1], limits[1]), row_of(keys[2], limits[2]))
    pcs = (pair_counts(keys[0]), pair_counts(keys[1]), pair_counts(keys[2]))
    return Shanten(*_useful(keys, rows, pcs, limits, pairs, len(h.melds), held, seen, vis is None))


_RANK = itemgetter(0)


def shanten_options(hand: Hand | str, *, ruleset: Ruleset | str | None = None, visible=None
                    ) -> ShantenOptions:
    """The shanten of a 14-tile hand and, for each distinct discard, the shanten and useful tiles of the
    13 left (the discarded copy counted as seen), best first.

    >>> o = shanten_options(parse_hand("113456m23678p", melds=[{"type": "peng", "tile": "9p"}]))
    >>> o.shanten, [(str(x.discard), x.shanten, x.remaining) for x in o.options][:3]
    (0, [('3m', 0, 8), ('6m', 0, 8), ('2p', 1, 44)])
    """
    if ruleset is None and not visible and type(hand) is str:
        groups = suit_groups(hand)
        if groups is not None and len(groups[0]) + len(groups[1]) + len(groups[2]) == 14:
            get = SUIT_KEYS.get
            k0 = get(groups[0])
            k1 = get(groups[1])
            k2 = get(groups[2])
            if k0 is None or k1 is None or k2 is None:
                k0 = _suit_key(groups[0])
                k1 = _suit_key(groups[1])
                k2 = _suit_key(groups[2])
            if k0 is not None and k1 is not None and k2 is not None:
                return _plain_options((k0, k1, k2))
    rules = _rules(ruleset)
    vis, vis_tiles = visible_counts(visible) if visible else (None, ())
    h = _checked(hand, rules, (14,), vis_tiles)
    if vis is None and not h.melds and h.void is None and rules.players == 4 and h.keys is not None:
        return _plain_options(h.keys)
    pairs, limits = _suits(h, rules.players)
    if not pairs:
        return ShantenOptions(None, ())
    melds = len(h.melds)
    keys = h.keys
    held14 = h.held
    seen = held14 if vis is None else tuple(x + y for x, y in zip(held14, vis))
    held = list(held14)
    k0, k1, k2 = keys
    rows = (row_of(k0, limits[0]), row_of(k1, limits[1]), row_of(k2, limits[2]))
    pcs = (pair_counts(k0), pair_counts(k1), pair_counts(k2))
    counts = h.counts
    plain = vis is None
    ranked = []
    for d in range(27):
        if not counts[d]:
            continue
        s = d // 9
        ks = keys[s] - POW5[d - 9 * s]
        rs = row_of(ks, limits[s])
        ps = pair_counts(ks)
        if s == 0:
            k, r, pc = (ks, k1, k2), (rs, rows[1], rows[2]), (ps, pcs[1], pcs[2])
        elif s == 1:
            k, r, pc = (k0, ks, k2), (rows[0], rs, rows[2]), (pcs[0], ps, pcs[2])
        else:
            k, r, pc = (k0, k1, ks), (rows[0], rows[1], rs), (pcs[0], pcs[1], ps)
        held[d] -= 1
        n, tiles, total = _useful(k, r, pc, limits, pairs, melds, held, seen, plain, d)
        held[d] += 1
        ranked.append(((n, -total, d), ShantenOption._of(TILES[d], n, tiles, total)))
    ranked.sort(key=_RANK)
    return ShantenOptions(13 - 3 * melds - _best(keys, limits, pairs, melds), tuple(map(_OPTION, ranked)))


_OPTION = itemgetter(1)
_OTHERS = ((1, 2), (0, 2), (0, 1))


def _discard_parts(digits: int, first: int) -> list[tuple[tuple[int, int, int], ...]]:
    out = []
    for key in range(5 ** digits):
        ranks = []
        for r in range(first, first + digits):
            key, c = divmod(key, 5)
            if c:  # (one fewer of an even count: a pair fewer, a single more; of an odd count: a single fewer)
                ranks.append((r, POW5[r], 31 if c % 2 == 0 else 1))
        out.append(tuple(ranks))
    return out


_DISCARDS_LOW = _discard_parts(5, 0)
_DISCARDS_HIGH = _discard_parts(4, 5)
"""A suit key's ranks held, by its low five digits and its high four: each with its weight in the key
and what a copy fewer takes from the suit's seven pairs' view (:func:`~.shanten_table.pair_counts`)."""
_LOW = 5 ** 5


def _plain_options(keys: tuple[int, int, int]) -> ShantenOptions:
    """:func:`shanten_options` of 14 concealed tiles (suit keys ``keys``), no melds, no void, four players,
    nothing visible: :func:`_useful`'s answers, with the work on the two suits a discard leaves alone
    done once per suit discarded from instead of once per discard.

    A discard of suit ``s`` changes ``s``'s key only: the pair of the two other suits (its best split,
    cells and seven pairs) is the same for each of them, and so are their useful tiles for given cells
    or ranks (kept in dicts of this call).  The pairs tried are :func:`_kept`'s of the 13 left."""
    k0, k1, k2 = keys
    rows = (ROWS[k0], ROWS[k1], ROWS[k2])
    pcs = (pair_counts(k0), pair_counts(k1), pair_counts(k2))
    useful = SUIT_USEFUL
    raised = RAISED
    listed = LISTED
    seven_pairs = SEVEN_PAIRS
    new = _new
    set_discard, set_shanten, set_tiles, set_remaining = _SET_DISCARD, _SET_SHANTEN, _SET_TILES, _SET_REMAINING
    ranked = []
    best14 = -1
    two14 = (k0 > 0) + (k1 > 0) + (k2 > 0) == 2
    for s in (0, 1, 2):
        t, u = _OTHERS[s]
        kt = keys[t]
        ku = keys[u]
        rt = rows[t]
        ru = rows[u]
        pt = pcs[t]
        pu = pcs[u]
        # the pair of the two other suits: the same for every discard of s
        v_tu, ct_tu, cu_tu = COMBINED.get((rt << 32 | ru) << 3 | 4) or combine(rt, ru, 4)
        seven_tu = seven_pairs[pt + pu]
        top_tu = v_tu if v_tu > seven_tu else seven_tu
        if (not two14 or (kt and ku)) and top_tu > best14:
            best14 = top_tu
        ks = keys[s]
        if not ks:
            continue
        # t's and u's useful tiles by cells (SUIT_USEFUL), rank masks by cells (RAISED), tiles by ranks (LISTED)
        by_cells: tuple[dict, dict] = ({}, {})
        by_raised: tuple[dict, dict] = ({}, {})
        by_ranks: tuple[dict, dict] = ({}, {})
        parity_t = parity(kt)
        parity_u = parity(ku)
        both = kt > 0 and ku > 0
        st_first = s < t  # (a pair's rows go to combine in suit order, as elsewhere)
        su_first = s < u
        ps = pcs[s]
        for r, weight, fewer in _DISCARDS_LOW[ks % _LOW] + _DISCARDS_HIGH[ks // _LOW]:
            k = ks - weight
            row = ROWS[k]
            pc = ps - fewer
            if k:
                if kt:
                    with_t = with_tu = True
                    with_u = ku > 0
                    if not with_u:  # (s and t only: that pair, as _kept)
                        with_tu = False
                elif ku:
                    with_u = True
                    with_t = with_tu = False
                else:  # (s alone: every pair, as _kept)
                    with_t = with_u = with_tu = True
            else:
                with_tu = True
                with_t = with_u = not both  # (the other two, when both have tiles; else every pair)
            best = -1
            if with_t:
                if st_first:
                    v_t, a_t, b_t = COMBINED.get((row << 32 | rt) << 3 | 4) or combine(row, rt, 4)
                else:
                    v_t, b_t, a_t = COMBINED.get((rt << 32 | row) << 3 | 4) or combine(rt, row, 4)
                seven_t = seven_pairs[pc + pt]
                best = v_t if v_t > seven_t else seven_t
            if with_u:
                if su_first:
                    v_u, a_u, b_u = COMBINED.get((row << 32 | ru) << 3 | 4) or combine(row, ru, 4)
                else:
                    v_u, b_u, a_u = COMBINED.get((ru << 32 | row) << 3 | 4) or combine(ru, row, 4)
                seven_u = seven_pairs[pc + pu]
                if v_u > best:
                    best = v_u
                if seven_u > best:
                    best = seven_u
            if with_tu and top_tu > best:
                best = top_tu
            cs = ct = cu = 0
            seven_st = seven_su = seven_of_tu = False
            if with_t:
                if v_t == best:
                    cs = a_t
                    ct = b_t
                seven_st = seven_t == best
            if with_u:
                if v_u == best:
                    cs |= a_u
                    cu = b_u
                seven_su = seven_u == best
            if with_tu:
                if v_tu == best:
                    ct |= ct_tu
                    cu |= cu_tu
                seven_of_tu = seven_tu == best
            n = 13 - best
            d = 9 * s + r
            if not (seven_st or seven_su or seven_of_tu):  # each suit's useful tiles by its cells
                if cs:
                    memo_key = (((k << 40 | cs) * 10 + r) << 2) + s
                    found_s = useful.get(memo_key) or _suit_useful(memo_key, s, k, cs, r)
                else:
                    found_s = _NONE
                found_t = found_u = _NONE
                if ct:
                    found_t = by_cells[0].get(ct)
                    if found_t is None:
                        memo_key = (((kt << 40 | ct) * 10 + 9) << 2) + t
                        found_t = by_cells[0][ct] = useful.get(memo_key) or _suit_useful(memo_key, t, kt, ct, 9)
                if cu:
                    found_u = by_cells[1].get(cu)
                    if found_u is None:
                        memo_key = (((ku << 40 | cu) * 10 + 9) << 2) + u
                        found_u = by_cells[1][cu] = useful.get(memo_key) or _suit_useful(memo_key, u, ku, cu, 9)
            else:  # seven pairs among the best: each suit's ranks (its cells', seven pairs'), then their tiles
                ms = mt = mu = 0
                if cs:
                    ms = raised.get(k << 40 | cs)
                    if ms is None:
                        ms = _raised(k, FULL, cs)
                if ct:
                    mt = by_raised[0].get(ct)
                    if mt is None:
                        mt = by_raised[0][ct] = _raised(kt, FULL, ct)
                if cu:
                    mu = by_raised[1].get(cu)
                    if mu is None:
                        mu = by_raised[1][cu] = _raised(ku, FULL, cu)
                if seven_st or seven_su:
                    parity_s = parity(k)
                    if seven_st and (want := _seven_want(pc + pt)):
                        ms |= _seven_ranks(parity_s, want)
                        mt |= _seven_ranks(parity_t, want)
                    if seven_su and (want := _seven_want(pc + pu)):
                        ms |= _seven_ranks(parity_s, want)
                        mu |= _seven_ranks(parity_u, want)
                if seven_of_tu and (want := _seven_want(pt + pu)):
                    mt |= _seven_ranks(parity_t, want)
                    mu |= _seven_ranks(parity_u, want)
                if ms:
                    memo_key = ((k << 9 | ms) * 10 + r) * 3 + s
                    found_s = listed.get(memo_key) or _listed(memo_key, s, k, ms, r)
                else:
                    found_s = _NONE
                found_t = found_u = _NONE
                if mt:
                    found_t = by_ranks[0].get(mt)
                    if found_t is None:
                        memo_key = ((kt << 9 | mt) * 10 + 9) * 3 + t
                        found_t = by_ranks[0][mt] = listed.get(memo_key) or _listed(memo_key, t, kt, mt, 9)
                if mu:
                    found_u = by_ranks[1].get(mu)
                    if found_u is None:
                        memo_key = ((ku << 9 | mu) * 10 + 9) * 3 + u
                        found_u = by_ranks[1][mu] = listed.get(memo_key) or _listed(memo_key, u, ku, mu, 9)
            if s == 0:
                tiles = found_s[0] + found_t[0] + found_u[0]
            elif s == 1:
                tiles = found_t[0] + found_s[0] + found_u[0]
            else:
                tiles = found_t[0] + found_u[0] + found_s[0]
            total = found_s[1] + found_t[1] + found_u[1]
            option = new(ShantenOption)  # (ShantenOption._of inlined)
            set_discard(option, TILES[d])
            set_shanten(option, n)
            set_tiles(option, tiles)
            set_remaining(option, total)
            ranked.append((n << 14 | (511 - total) << 5 | d, option))
    ranked.sort()
    return ShantenOptions(13 - best14, tuple(map(_OPTION, ranked)))


def _seven_want(packed: int) -> int:
    """The parity classes (:func:`~.shanten_table.parity`) whose draw raises seven pairs' count of two suits'
    ``packed`` view: 511 (a single made a pair), 511 << 9 (one more single), both or none."""
    now = SEVEN_PAIRS[packed]
    return (511 if SEVEN_PAIRS[packed + 31] > now else 0) | (511 << 9 if SEVEN_PAIRS[packed + 1] > now else 0)


def _seven_ranks(parity_classes: int, want: int) -> int:
    """A suit's ranks (bit r: rank r + 1) whose draw raises seven pairs' count: its ranks of the parity
    classes (:func:`~.shanten_table.parity`) that ``want`` (:func:`_seven_want`) names, odd and even
    folded onto one 9-bit set.

    >>> _seven_ranks(0b101 | 0b10 << 9, 511)  # only a single made a pair: ranks 1 and 3
    5
    >>> _seven_ranks(0b101 | 0b10 << 9, 511 | 511 << 9)
    7
    """
    p = parity_classes & want
    return (p | p >> 9) & 511


_NONE: tuple[tuple[UsefulTile, ...], int] = ((), 0)


def shanten_analysis(hand: Hand | str, *, ruleset: Ruleset | str | None = None, visible=None
                     ) -> Shanten | ShantenOptions:
    """What ``POST /v1/hands/shanten`` answers: :func:`useful_tiles` of 13 tiles, :func:`shanten_options`
    of 14 (another size, a fifth copy, bad notation: the errors :func:`~service.rules.ting.ting` gives)."""
    rules = _rules(ruleset)
    vis_tiles = visible_counts(visible)[1] if visible else ()
    h = _checked(hand, rules, (13, 14), vis_tiles)
    if h.size == 13:
        return useful_tiles(h, ruleset=rules, visible=visible)
    return shanten_options(h, ruleset=rules, visible=visible)
