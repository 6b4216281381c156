"""Tiles, suits and hand notation (docs/rules.md#s1).

A tile is a rank 1-9 and a suit: ``m`` 万, ``p`` 筒, ``s`` 条.  Internally a
tile is its index 0-26 in canonical order (m, p, s; ranks ascending).

>>> Tile.from_str("5万")
Tile('5m')
>>> str(Tile.from_str(" 9饼 "))
'9p'
>>> [str(t) for t in parse_tiles("3m12m 9条")]
['3m', '1m', '2m', '9s']
>>> format_tiles(parse_tiles("321m 9s 11p"))
'123m11p9s'
>>> parse_tiles("1z")
Traceback (most recent call last):
...
service.rules.errors.UnknownSuit: unknown suit mark 'z' in '1z' at position 1
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .errors import InvalidRank, MissingSuit, NotationError, UnexpectedCharacter, UnknownSuit

SUITS = ("m", "p", "s")
"""Suit letters in canonical order; a suit's index is its position here."""

SUIT_MARKS = {
    "m": "m", "万": "m", "萬": "m",
    "s": "s", "条": "s", "條": "s", "索": "s",
    "p": "p", "筒": "p", "饼": "p", "餅": "p", "铜": "p", "銅": "p",
}
_SUIT_INDEX = {mark: SUITS.index(suit) for mark, suit in SUIT_MARKS.items()}
_RANKS = "123456789"
_SIMPLE = re.compile(r"(?:[1-9]+[mps])*")
_GROUP = re.compile(r"([1-9]+)([mps])")
_LETTER = {"m": 0, "p": 9, "s": 18}
_SPACE = " \t\n\r"


class Tile:
    """One of the 27 tile kinds; instances are interned (``Tile.of(i) is Tile.of(i)``).

    >>> t = Tile.of(13)
    >>> (t.rank, t.suit, t.index, str(t))
    (5, 'p', 13, '5p')
    >>> Tile.from_str("5P") is t
    True
    """

    __slots__ = ("index", "rank", "suit", "_text")

    index: int
    rank: int
    suit: str
    _text: str

    def __init__(self, index: int) -> None:  # use Tile.of / Tile.from_str
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "rank", index % 9 + 1)
        object.__setattr__(self, "suit", SUITS[index // 9])
        object.__setattr__(self, "_text", f"{index % 9 + 1}{SUITS[index // 9]}")

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Tile is immutable")

    @staticmethod
    def of(index: int) -> Tile:
        return TILES[index]

    @classmethod
    def from_str(cls, text: str) -> Tile:
        """Parse one tile; surrounding white space is allowed."""
        tile = _BY_TEXT.get(text) if type(text) is str else None
        if tile is not None:
            return tile
        tiles = parse_tiles(text)
        if len(tiles) != 1:
            raise NotationError(f"expected exactly one tile, got {text!r}", text=text)
        return tiles[0]

    @property
    def suit_index(self) -> int:
        return self.index // 9

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Tile({self._text!r})"

    def __lt__(self, other: Tile) -> bool:
        return self.index < other.index

    def __reduce__(self):
        return (Tile.of, (self.index,))


TILES: tuple[Tile, ...] = tuple(Tile(i) for i in range(27))
_BY_TEXT = {str(t): t for t in TILES}  # the canonical spellings, for Tile.from_str's fast path
_FAST = {suit: {str(r + 1): TILES[base + r] for r in range(9)} for suit, base in _LETTER.items()}


def parse_suit(text: str) -> str:
    """Parse a suit field (``"s"``, ``"条"``, ``" P "``) to its letter.

    >>> parse_suit("索"), parse_suit("M")
    ('s', 'm')
    """
    if not isinstance(text, str):
        raise NotationError(f"a suit must be a string, got {text!r}", text=str(text))
    mark = text.strip(_SPACE)
    suit = SUIT_MARKS.get(mark.lower())
    if suit is None:
        raise UnknownSuit(f"unknown suit {text!r} (use m/万, p/筒, s/条)", text=text)
    return suit


def parse_tiles(text: str) -> list[Tile]:
    """Parse a hand string into tiles, in the order written.

    Groups of ASCII ranks 1-9 each followed by a suit mark; white space may
    stand before, between and after groups, never inside one.  The empty
    string is no tiles.
    """
    if not isinstance(text, str):
        raise NotationError(f"a hand must be a string, got {type(text).__name__}", text=str(text))
    if _SIMPLE.fullmatch(text):  # fast path: plain ASCII groups, e.g. "123m456p"
        return [_FAST[suit][r] for ranks, suit in _GROUP.findall(text) for r in ranks]
    out: list[Tile] = []
    ranks: list[int] = []
    start = 0
    for pos, ch in enumerate(text):
        if ch in _RANKS:
            if not ranks:
                start = pos
            ranks.append(int(ch) - 1)
            continue
        suit = _SUIT_INDEX.get(ch.lower())
        if suit is not None:
            if not ranks:
                raise MissingSuit(
                    f"suit mark {ch!r} with no ranks before it in {text!r} at position {pos}", text=ch
                )
            base = suit * 9
            out.extend(TILES[base + r] for r in ranks)
            ranks = []
            continue
        if ch == "0":
            raise InvalidRank(
                f"invalid rank '0' in {_around(text, pos)!r} (ranks are 1-9)", text="0"
            )
        if ch in _SPACE:
            if ranks:
                raise MissingSuit(
                    f"ranks {text[start:pos]!r} have no suit mark (white space inside a group) "
                    f"in {text!r}",
                    text=text[start:pos],
                )
            continue
        if ranks:
            raise UnknownSuit(
                f"unknown suit mark {ch!r} in {_around(text, pos)!r} at position {pos}", text=ch
            )
        raise UnexpectedCharacter(
            f"unexpected character {ch!r} in {_around(text, pos)!r} at position {pos} "
            "(only ranks 1-9 and the suit marks m/万, p/筒, s/条 are allowed)",
            text=ch,
        )
    if ranks:
        raise MissingSuit(f"ranks {text[start:]!r} have no suit mark in {text!r}", text=text[start:])
    return out


def _around(text: str, pos: int) -> str:
    """The group around ``pos``, for error messages."""
    lo = pos
    while lo > 0 and text[lo - 1] not in _SPACE:
        lo -= 1
    hi = pos + 1
    while hi < len(text) and text[hi] not in _SPACE and text[hi] not in _RANKS:
        hi += 1
    snippet = text[lo:hi]
    return snippet if len(snippet) <= 40 else snippet[:40] + "…"


def format_tiles(tiles: Iterable[Tile]) -> str:
    """Canonical notation: suits m, p, s; ranks ascending.

    >>> format_tiles([])
    ''
    """
    by_suit: list[list[int]] = [[], [], []]
    for t in tiles:
        by_suit[t.index // 9].append(t.rank)
    return "".join(
        "".join(map(str, sorted(ranks))) + SUITS[s] for s, ranks in enumerate(by_suit) if ranks
    )


def format_counts(counts: Iterable[int]) -> str:
    """Canonical notation of a 27-long count vector.

    >>> format_counts([2] + [0] * 25 + [1])
    '11m9s'
    """
    return format_tiles(TILES[i] for i, c in enumerate(counts) for _ in range(c))
