"""The stable ids of the rules core, in one place: error codes and transfer reasons.

Clients see an error's :class:`Code` as the ``code`` of a problem+json body
(and as the last segment of its ``type`` URI), and a transfer's
:class:`Reason` as its ``reason``.  Both are ``StrEnum`` s, so a member *is*
its id (``Code.BAD_EVENT == "bad_event"``) and a typo is an ``AttributeError``
at import, never a new public id.  Each member carries its ``meaning``; the
documented tables are generated from here (:func:`code_table`,
:func:`reason_table`).

>>> Code.TOO_MANY_COPIES, Code.TOO_MANY_COPIES.meaning
(<Code.TOO_MANY_COPIES: 'too_many_copies'>, 'a fifth copy of a tile (in a hand, or across a round)')
>>> f"{Code.ROUND_ENDED}", Code("round_ended") is Code.ROUND_ENDED
('round_ended', True)
>>> next(code_table())
('rule_error', 'a rule of the rule book (docs/rules.md) is broken')
>>> REASONS[:3]
('dianpao', 'zimo', 'kong_direct')
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum
from typing import Self, overload


class _Documented(StrEnum):
    """A StrEnum whose members are ``NAME = "id", "meaning"``."""

    meaning: str

    @overload
    def __new__(cls, value: str) -> Self: ...  # Code("id"): the member of that id (EnumMeta.__call__ looks it up)

    @overload
    def __new__(cls, value: str, meaning: str) -> Self: ...  # a member's definition

    def __new__(cls, value: str, meaning: str | None = None) -> Self:
        if meaning is None:  # (a look-up never comes here: only a member defined without its meaning)
            raise TypeError(f"the member {value!r} has no meaning")
        member = str.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member


class Code(_Documented):
    """Every error code the rules core raises (``RuleError.code``)."""

    RULE_ERROR = "rule_error", "a rule of the rule book (docs/rules.md) is broken"
    # notation (docs/rules.md#s1)
    BAD_NOTATION = "bad_notation", "text that is not tile notation"
    INVALID_RANK = "invalid_rank", "a rank that is not 1-9 (e.g. 0)"
    UNKNOWN_SUIT = "unknown_suit", "a suit mark that is not m/万, p/筒 or s/条 (e.g. an honour)"
    MISSING_SUIT = "missing_suit", "ranks with no suit mark after them (or white space inside a group)"
    UNEXPECTED_CHARACTER = "unexpected_character", "a character that is neither a rank, a suit mark nor white space"
    SUIT_NOT_IN_PLAY = "suit_not_in_play", "a 万 tile in a three-player room (三人两房 plays 筒 and 条 only)"
    # hands (§2)
    BAD_HAND = "bad_hand", "a hand that does not parse or has the wrong size"
    BAD_SIZE = "bad_size", "a hand whose size (concealed + 3 per meld) is not the one required"
    TOO_MANY_COPIES = "too_many_copies", "a fifth copy of a tile (in a hand, or across a round)"
    BAD_MELD = "bad_meld", "a meld of unknown type or kong kind"
    VOID_NOT_ALLOWED = "void_not_allowed", "a 定缺 void suit in a three-player room (there is no 定缺 there)"
    # wins (§3, §5)
    BAD_WIN = "bad_win", "a win that cannot be scored"
    NOT_A_WIN = "not_a_win", "a hand that does not win (shape, 缺一门 or 定缺)"
    WIN_TILE_NOT_IN_HAND = "win_tile_not_in_hand", "the winning tile is not among the concealed tiles"
    CONTRADICTORY_FLAGS = "contradictory_flags", "win flags that cannot hold together (§5.1)"
    DIANPAO_PINGHU = "dianpao_pinghu", "a 1-fan win on a discard where the ruleset forbids it (dianpao_pinghu = false)"
    # rulesets (§9)
    BAD_RULESET = "bad_ruleset", "a ruleset that is neither a preset name nor an object of fields"
    UNKNOWN_RULESET = "unknown_ruleset", "an unknown preset name"
    UNKNOWN_RULESET_FIELD = "unknown_ruleset_field", "an unknown ruleset field"
    BAD_RULESET_VALUE = "bad_ruleset_value", "a ruleset field with a value out of its range"
    # events (§6-§8, §13, §14)
    BAD_EVENT = "bad_event", "a malformed event (shape, flag types, unknown type)"
    SEAT_OUT_OF_RANGE = "seat_out_of_range", "a seat outside 0-3 (0-2 with three players)"
    SEAT_NOT_IN_ROUND = "seat_not_in_round", "a seat that has won or left acts (or pays) again"
    SELF_DISCARD = "self_discard", "a discarder (or kong feeder) who is the actor itself"
    DUPLICATE_WINNER = "duplicate_winner", "one seat listed twice as a winner"
    SELF_DRAW_ONE_WINNER = "self_draw_one_winner", "a self-drawn hu with several winners"
    KONG_REQUIRED = "kong_required", "杠上炮, 杠上花 or 抢杠胡 without the right kong just before"
    NO_PENG = "no_peng", "an added kong without the seat's peng, its pengs being logged"
    BAD_SEATS = "bad_seats", "a draw or escape seat list naming a seat not in the round, twice, or (draw) not all"
    CLAIM_AFTER_WIN = "claim_after_win", "a 血流 seat that has won makes a peng or a direct kong"
    KONG_NOT_IN_HAND = "kong_not_in_hand", "a kong that a 血流 winner's kept hand cannot make"
    KONG_CHANGES_WAITS = "kong_changes_waits", "a kong that changes a 血流 winner's kept hand's waits"
    KEPT_HAND_MISMATCH = "kept_hand_mismatch", "a 血流 winner's later hand that is not its kept hand"
    WINNER_NOT_TING = "winner_not_ting", "a 血流 seat that has won is listed at a draw as not ting"
    ROUND_ENDED = "round_ended", "an event after the round has ended"
    XIANGGONG = "xianggong", "a win of a seat found 相公 (a wrong number of tiles) earlier in the round"
    PATTERNS_CONTRADICT_WIN = ("patterns_contradict_win", "a winner's given patterns that contradict the hu's flags "
                               "(抢杠胡 without robbing_kong, robbing_kong without 抢杠胡, ...)")
    # tables (§10)
    NO_ROUND = "no_round", "a round event with no round started"
    ROUND_IN_PROGRESS = ("round_in_progress", "a round_start, a buy_in or an adjust while a round is being played "
                         "(an adjust: 409)")
    VOID_CONFLICT = ("void_conflict", "a void after which a later record no longer holds, or of a record a "
                     "correction replaced (409)")
    CORRECTION_CONFLICT = ("correction_conflict", "a correction after which a later round no longer holds (its "
                           "dealer would change): 409 naming the round and its record")
    BAD_PLAYERS = "bad_players", "a table whose number of players is not the ruleset's"
    # stakes (§12)
    BAD_STAKES = "bad_stakes", "stakes that are not integers in range, or bankrolls not one per seat"
    NO_STAKES = "no_stakes", "a buy_in at a table that plays without stakes"
    TOO_MANY_COINS = "too_many_coins", "a buy_in that would take a table's coins past 10^15 in all"


class Reason(_Documented):
    """Why a transfer was paid (docs/api.md: stable transfer reasons)."""

    DIANPAO = "dianpao", "a win on the payer's discard (点炮)"
    ZIMO = "zimo", "a self-drawn win (自摸)"
    KONG_DIRECT = "kong_direct", "a direct kong (直杠) on the payer's discard"
    KONG_ADDED = "kong_added", "an added kong (面下杠)"
    KONG_CONCEALED = "kong_concealed", "a concealed kong (暗杠)"
    KONG_VOID = "kong_void", "a robbed kong's payments reversed (抢杠胡)"
    TRANSFER = "transfer", "a kong's income passed on to the winner of 杠上炮 (呼叫转移)"
    REFUND = "refund", "kong income handed back at a draw by a seat not ting (退税)"
    HUAZHU = "huazhu", "a 花猪 pays at a draw (查花猪)"
    DAJIAO = "dajiao", "a seat not ting pays a ting seat's 大叫 at a draw (查大叫)"
    ESCAPE = "escape", "a seat leaves the round (逃跑)"
    FORFEIT = "forfeit", "a winner who leaves gives back what it received (winner_leaves = forfeit)"
    PENALTY = "penalty", "a seat that declared a win it did not have pays each other seat (诈胡)"
    ADJUST = "adjust", "a transfer outside the rules, between rounds (茶水, a side bet, a mistake found later)"


REASONS: tuple[str, ...] = tuple(r.value for r in Reason)
"""The transfer reasons, in the API reference's order."""


def code_table() -> Iterator[tuple[str, str]]:
    """``(code, meaning)`` for every error code, in documentation order."""
    for code in Code:
        yield code.value, code.meaning


def reason_table() -> Iterator[tuple[str, str]]:
    """``(reason, meaning)`` for every transfer reason, in the API reference's order."""
    for reason in Reason:
        yield reason.value, reason.meaning
