"""Hands and melds (docs/rules.md#s2): concealed tiles, melds, the 定缺 void suit.

>>> h = parse_hand("321m 456p 789s 11m", melds=[Meld.peng("5s")], void="p")
>>> str(h), h.size, sorted(h.suits)
('11123m456p789s', 14, ['m', 'p', 's'])
>>> h.huazhu
True
>>> [p.code for p in hand_problems(parse_hand("1111m1m"))]
['bad_size', 'too_many_copies']
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import mul

from .codes import Code
from .errors import BadMeld, HandSizeError, NotationError, SuitNotInPlay, TooManyCopies, VoidNotAllowed
from .tiles import SUITS, TILES, Tile, format_counts, parse_suit, parse_tiles

MELD_TYPES = ("peng", "kong")
KONG_KINDS = ("direct", "added", "concealed")
POW5 = tuple(5**r for r in range(9))
SUIT_OF = tuple(i // 9 for i in range(27))      # per tile index: its suit,
POW_OF = tuple(POW5[i % 9] for i in range(27))  # its weight in its suit's key,
_BIT = tuple(1 << (i // 9) for i in range(27))  # and its suit's bit
_NONE9 = (0,) * 9


@dataclass(frozen=True, slots=True)
class Meld:
    """An exposed (or concealed-kong) set: ``peng`` or ``kong`` of a ``kind``.

    >>> str(Meld.kong("7s", "concealed")), Meld.kong("7s", "concealed").copies
    ('kong concealed 7s', 4)
    """

    type: str
    tile: Tile
    kind: str | None = None

    def __post_init__(self) -> None:
        if self.type not in MELD_TYPES:
            raise BadMeld(f"unknown meld type {self.type!r} (peng or kong)", text=str(self.type))
        if not isinstance(self.tile, Tile):
            object.__setattr__(self, "tile", Tile.from_str(self.tile))
        if self.type == "kong":
            if self.kind not in KONG_KINDS:
                raise BadMeld(
                    f"unknown kong kind {self.kind!r} (direct, added or concealed)", text=str(self.kind)
                )
        elif self.kind is not None:
            raise BadMeld(f"a peng has no kind, got {self.kind!r}", text=str(self.kind))

    @classmethod
    def peng(cls, tile: Tile | str) -> Meld:
        return cls("peng", tile if isinstance(tile, Tile) else Tile.from_str(tile))

    @classmethod
    def kong(cls, tile: Tile | str, kind: str) -> Meld:
        return cls("kong", tile if isinstance(tile, Tile) else Tile.from_str(tile), kind)

    @classmethod
    def from_mapping(cls, data: Mapping[str, object]) -> Meld:
        """Build from the API shape ``{"type", "tile", "kind"?}``.

        Melds are values of a small domain: one built from the same three strings is reused
        (a bounded memo of the melds built, never of a failure).
        """
        key = (data.get("type"), data.get("tile"), data.get("kind"))
        meld = _MELDS.get(key) if type(key[0]) is str and type(key[1]) is str and (
            key[2] is None or type(key[2]) is str) else None
        if meld is None:
            meld = cls(str(key[0]), Tile.from_str(key[1]), key[2])  # type: ignore[arg-type]
            if type(key[0]) is str and type(key[1]) is str and (key[2] is None or type(key[2]) is str):
                if len(_MELDS) >= 1024:
                    _MELDS.clear()
                _MELDS[key] = meld
        return meld

    @property
    def copies(self) -> int:
        return 4 if self.type == "kong" else 3

    @property
    def is_concealed_kong(self) -> bool:
        return self.kind == "concealed"

    def as_dict(self) -> dict:
        out = {"type": self.type, "tile": str(self.tile)}
        if self.kind is not None:
            out["kind"] = self.kind
        return out

    def __str__(self) -> str:
        return f"{self.type} {self.kind} {self.tile}" if self.kind else f"{self.type} {self.tile}"


_MELDS: dict[tuple, Meld] = {}


@dataclass(frozen=True, slots=True)
class Problem:
    """One rule a hand breaks: a stable ``code`` and a readable ``message``."""

    code: str
    message: str


@dataclass(frozen=True)
class Hand:
    """Concealed tiles (kept in canonical order), melds and an optional void suit.

    Derived vectors are computed once, here, so that the hot paths (win check,
    ting) never re-count: ``counts`` (concealed, 27 long), ``held`` (concealed
    plus melds) and ``keys`` (one base-5 key per suit for the shape tables, or
    ``None`` when a count exceeds 4).
    """

    tiles: tuple[Tile, ...]
    melds: tuple[Meld, ...] = ()
    void: str | None = None
    counts: tuple[int, ...] = field(init=False, repr=False, compare=False)
    held: tuple[int, ...] = field(init=False, repr=False, compare=False)
    keys: tuple[int, int, int] | None = field(init=False, repr=False, compare=False)
    suit_mask: int = field(init=False, repr=False, compare=False)
    max_held: int = field(init=False, repr=False, compare=False)
    size: int = field(init=False, repr=False, compare=False)
    """Concealed tiles plus 3 per meld (a kong counts as 3)."""

    def __post_init__(self) -> None:
        counts = [0] * 27
        keys = [0, 0, 0]
        mask = 0
        for t in self.tiles:
            i = t.index
            counts[i] += 1
            keys[SUIT_OF[i]] += POW_OF[i]
            mask |= _BIT[i]
        set_ = object.__setattr__
        set_(self, "tiles", tuple(sorted(self.tiles, key=_index)))
        if type(self.melds) is not tuple:
            set_(self, "melds", tuple(self.melds))
        if self.void is not None:
            set_(self, "void", parse_suit(self.void))
        held = counts[:]
        for m in self.melds:
            i = m.tile.index
            held[i] += m.copies
            mask |= _BIT[i]
        top = max(counts)
        # derived fields, set at once (a frozen dataclass's __dict__, as object.__setattr__ would)
        self.__dict__.update(
            counts=tuple(counts), held=tuple(held), keys=tuple(keys) if top <= 4 else None,
            suit_mask=mask, max_held=max(held) if self.melds else top,
            size=len(self.tiles) + 3 * len(self.melds),
        )

    @classmethod
    def _of(cls, tiles: tuple, counts: tuple, keys: tuple | None, mask: int, top: int,
            melds: tuple[Meld, ...] = (), void: str | None = None) -> Hand:
        """A hand from the parts of its concealed tiles already derived (the parse hot path), with
        ``melds`` and a parsed ``void``: the value ``Hand(tiles, melds, void)`` is, built once.

        ``tiles`` in canonical order; ``top`` the highest of ``counts``.  Without the frozen
        ``__init__``'s per-field checks and its per-tile loop.
        """
        # Kept past the frozen __init__: bench/core.py, score and settle from strings, is 1.6 and 1.2 times
        # slower when this builds by Hand(...) (docs/performance.md, "builders past __init__").
        if melds:
            held = list(counts)
            for m in melds:
                i = m.tile.index
                held[i] += 4 if m.type == "kong" else 3
                mask |= _BIT[i]
                if held[i] > top:  # (counts only grow: the highest is the concealed one or a meld tile's)
                    top = held[i]
            held_counts = tuple(held)
            size = len(tiles) + 3 * len(melds)
        else:
            held_counts = counts
            size = len(tiles)
        obj = object.__new__(cls)
        fields = obj.__dict__  # (the frozen dataclass's fields, set one by one as object.__setattr__ would)
        fields["tiles"] = tiles
        fields["melds"] = melds
        fields["void"] = void
        fields["counts"] = counts
        fields["held"] = held_counts
        fields["keys"] = keys
        fields["suit_mask"] = mask
        fields["max_held"] = top
        fields["size"] = size
        return obj

    @property
    def suits(self) -> frozenset[str]:
        """The suit letters present, melds included."""
        return frozenset(SUITS[s] for s in range(3) if self.suit_mask >> s & 1)

    @property
    def huazhu(self) -> bool:
        """花猪: tiles of three suits, or any tile of the declared void suit."""
        if self.suit_mask == 0b111:
            return True
        return self.void is not None and bool(self.suit_mask >> SUITS.index(self.void) & 1)

    def as_dict(self) -> dict:
        out: dict = {"tiles": str(self), "melds": [m.as_dict() for m in self.melds]}
        if self.void is not None:
            out["void"] = self.void
        return out

    def __str__(self) -> str:
        return format_counts(self.counts)


def _index(t: Tile) -> int:
    return t.index


def parse_hand(
    text: str | Sequence[str] | Hand,
    melds: Iterable[Meld | Mapping[str, object]] = (),
    void: str | None = None,
) -> Hand:
    """Parse a hand string (or a list of tile strings) with optional melds and void.

    Only notation is checked here; sizes and copies are rules, reported by
    :func:`hand_problems` and enforced by the operations that need them.

    >>> parse_hand(["5m", "1万"]).tiles
    (Tile('1m'), Tile('5m'))
    >>> parse_hand("").size
    0
    """
    if isinstance(text, str):
        parts = _suit_parts(text)
        if parts is not None:
            if not melds and void is None:
                return _hand_of_parts(parts)
            parsed = tuple([m if isinstance(m, Meld) else Meld.from_mapping(m) for m in melds]) if melds else ()
            return _hand_of_parts(parts, parsed, None if void is None else parse_suit(void))
        tiles = parse_tiles(text)
    elif isinstance(text, Hand):
        return text
    elif isinstance(text, (list, tuple)):
        tiles = [t if isinstance(t, Tile) else Tile.from_str(t) for t in text]
    else:
        raise NotationError(f"a hand is a string or a list of tiles, got {type(text).__name__}")
    parsed = tuple(m if isinstance(m, Meld) else Meld.from_mapping(m) for m in melds) if melds else ()
    return Hand(tuple(tiles), parsed, void)


# -- the parse hot path: a hand string in canonical suit order ---------------------------
_RANK_GROUP = re.compile(r"[1-9]+")
_RANK_TILES = tuple({str(r + 1): TILES[base + r] for r in range(9)} for base in (0, 9, 18))
PARTS_MEMO: tuple[dict, dict, dict] = ({}, {}, {})
PARTS_LIMIT = 4096
"""Entries per suit of the memo below; a full memo is emptied (a bound, not a policy)."""


def suit_groups(text: str) -> tuple[str, str, str] | None:
    """The ``m``, ``p`` and ``s`` groups' ranks of a string with at most one group per suit, in the
    order m, p, s (``""`` for a suit with none), else None: what clients send.

    Only the marks are placed here; each group's ranks are checked by :func:`_suit_part` (``[1-9]+``),
    which a group in its memo has passed.

    >>> suit_groups("123m456p"), suit_groups("55s"), suit_groups(""), suit_groups("1m2m"), suit_groups("5s1m")
    (('123', '456', ''), ('', '', '55'), ('', '', ''), None, ('5s1', '', ''))
    """
    m, mark, rest = text.partition("m")
    if not mark:
        m, rest = "", m
    elif not m:
        return None
    p, mark, rest = rest.partition("p")
    if not mark:
        p, rest = "", p
    elif not p:
        return None
    s, mark, rest = rest.partition("s")
    if not mark:
        s, rest = "", s
    elif not s:
        return None
    return None if rest else (m, p, s)


def _suit_part(suit: int, ranks: str) -> tuple | None:
    """One suit's group of a hand string → ``(tiles, counts, key, top)``: its tiles in order, its nine
    counts, its base-5 key (None when a count exceeds 4) and its highest count; None when ``ranks``
    is not ranks 1-9 (the string is then not in canonical suit order: the full parse tells why).

    A bounded memo per suit keyed by the group's text: hands share their suits' groups far more than
    they share whole strings.
    """
    memo = PARTS_MEMO[suit]
    part = memo.get(ranks)
    if part is None:
        if not _RANK_GROUP.fullmatch(ranks):
            return None
        counts = tuple(map(ranks.count, "123456789"))
        top = max(counts)
        part = (tuple(map(_RANK_TILES[suit].__getitem__, sorted(ranks))), counts,
                sum(map(mul, counts, POW5)) if top <= 4 else None, top)
        if len(memo) >= PARTS_LIMIT:
            memo.clear()
        memo[ranks] = part
    return part


_EMPTY_PART = ((), _NONE9, 0, 0)


def _suit_parts(text: str) -> tuple[tuple, tuple, tuple, str, str, str] | None:
    """The three suits' parts (:func:`_suit_part`) and rank strings of a hand string in canonical
    suit order (:func:`suit_groups`), else None."""
    groups = suit_groups(text)
    if groups is None:
        return None
    m, p, s = groups
    part_m = (PARTS_MEMO[0].get(m) or _suit_part(0, m)) if m else _EMPTY_PART
    part_p = (PARTS_MEMO[1].get(p) or _suit_part(1, p)) if p else _EMPTY_PART
    part_s = (PARTS_MEMO[2].get(s) or _suit_part(2, s)) if s else _EMPTY_PART
    if part_m is None or part_p is None or part_s is None:
        return None
    return part_m, part_p, part_s, m, p, s


def _hand_of_parts(parts: tuple, melds: tuple[Meld, ...] = (), void: str | None = None) -> Hand:
    """The hand of a string's :func:`_suit_parts` (canonical suit order), with ``melds`` and a parsed ``void``."""
    part_m, part_p, part_s, m, p, s = parts
    tm, cm, km, hm = part_m
    tp, cp, kp, hp = part_p
    ts, cs, ks, hs = part_s
    top = max(hm, hp, hs)
    return Hand._of(tm + tp + ts, cm + cp + cs, (km, kp, ks) if top <= 4 else None,
                    (1 if m else 0) | (2 if p else 0) | (4 if s else 0), top, melds, void)


def suit_keys(text: str) -> tuple[int, int, int, int] | None:
    """``(k0, k1, k2, n)`` of a hand string in canonical suit order (:func:`suit_groups`) with no count over
    4: its suits' base-5 keys (as :attr:`Hand.keys`) and its number of tiles, without building the
    :class:`Hand`; else None (:func:`parse_hand` then parses it, or tells what is wrong).

    >>> suit_keys("1123m55p"), suit_keys("11111m"), suit_keys("5s1m")
    ((32, 1250, 0, 6), None, None)
    """
    parts = _suit_parts(text)
    if parts is None:
        return None
    part_m, part_p, part_s, m, p, s = parts
    km = part_m[2]
    kp = part_p[2]
    ks = part_s[2]
    if km is None or kp is None or ks is None:
        return None
    return km, kp, ks, len(m) + len(p) + len(s)


def count_tiles(tiles: Iterable[Tile]) -> tuple[int, ...]:
    counts = [0] * 27
    for t in tiles:
        counts[t.index] += 1
    return tuple(counts)


def hand_problems(hand: Hand, visible: Iterable[Tile] = (), sizes: tuple[int, ...] = (13, 14)) -> list[Problem]:
    """Rules of §2 the hand breaks: its size, and copies over 4 (with ``visible``)."""
    out: list[Problem] = []
    if hand.size not in sizes:
        want = " or ".join(map(str, sizes))
        out.append(
            Problem(
                Code.BAD_SIZE.value,
                f"hand {str(hand) or '(empty)'!r} with {len(hand.melds)} meld(s) has size {hand.size}; "
                f"expected {want} (each meld counts 3)",
            )
        )
    seen = list(hand.held)
    for t in visible:
        seen[t.index] += 1
    over = [TILES[i] for i, c in enumerate(seen) if c > 4]
    if over:
        out.append(
            Problem(
                Code.TOO_MANY_COPIES.value,
                "more than 4 copies of "
                + ", ".join(f"{t} ({seen[t.index]})" for t in over)
                + " across the hand, its melds and the visible tiles",
            )
        )
    return out


def require_valid(hand: Hand, size: int | tuple[int, ...], visible: tuple[Tile, ...] = ()) -> None:
    """Raise the narrow error for the first problem of ``hand``."""
    sizes = (size,) if isinstance(size, int) else size
    if hand.size in sizes and hand.max_held <= 4 and not visible:
        return
    for problem in hand_problems(hand, visible, sizes):
        cls = HandSizeError if problem.code == Code.BAD_SIZE else TooManyCopies
        raise cls(problem.message, text=str(hand))


def require_in_play(hand: Hand, players: int, visible: Iterable[Tile] = ()) -> None:
    """With three players (三人两房, §14), a 万 tile anywhere or a 定缺 void is bad input.

    >>> require_in_play(parse_hand("123p"), 3)
    >>> require_in_play(parse_hand("123p", melds=[Meld.peng("5m")]), 3)
    Traceback (most recent call last):
    ...
    service.rules.errors.SuitNotInPlay: a 万 tile (5m) in a three-player room: 三人两房 plays 筒 (p) and 条 (s) only
    """
    if players != 3:
        return
    if hand.void is not None:
        raise VoidNotAllowed(
            f"a 定缺 void suit ({hand.void!r}) in a three-player room: 三人两房 has no 定缺", text=hand.void
        )
    wan = [t for t in visible if t.suit == "m"]
    if hand.suit_mask & 1 or wan:
        tile = next((TILES[i] for i in range(9) if hand.held[i]), None) or wan[0]
        raise SuitNotInPlay(
            f"a 万 tile ({tile}) in a three-player room: 三人两房 plays 筒 (p) and 条 (s) only", text=str(tile)
        )
