"""Stakes and bankrolls (游戏币场, docs/rules.md#s12): the coins of one ended round.

A table may play for coins: :class:`Stakes` holds its ``coin_per_point`` (QQ's
room coefficient N), its per-round ``fee`` (QQ's charge A, paid to the house)
and each seat's ``bankrolls``.  Points are untouched; :func:`settle_coins`
turns one ended round's point deltas into coin deltas, §12 steps 1-4, with
exact integers:

1. ``nominal = deltas × coin_per_point``;
2. 游戏币不足扣尽: each loser pays ``min(−nominal, coins)``;
3. 赢家按照比例: the pot goes to the winners in proportion to their nominal,
   ``floor(pot × nominal / Σ nominal)`` each, the coins left by rounding one
   each to the largest remainders (ties: the lower seat);
4. each seat pays ``min(fee, coins)`` to the house.

Seed 001's own round, then seat 1 holding only 1,000 coins, then two winners
sharing a short pot (§12's three worked examples):

>>> s = Stakes(coin_per_point=200, fee=400, bankrolls=(100_000,) * 4)
>>> settle_coins([54, -18, -18, -18], s).coins_delta
(10400, -4000, -4000, -4000)
>>> short = settle_coins([54, -18, -18, -18], Stakes(200, 400, (100_000, 1_000, 100_000, 100_000)))
>>> short.coins_delta, short.fees, short.pot
((7800, -1000, -4000, -4000), (400, 0, 400, 400), 8200)
>>> two = settle_coins([30, 10, -20, -20], Stakes(1, 0, (100, 100, 5, 100)))
>>> two.coins_delta, two.pot, two.coins
((19, 6, -5, -20), 25, (119, 106, 0, 80))

The readings where §12 is silent (when coins are settled, the fee, an empty
bankroll, the integers and their bounds) are docs/rules.md#s12's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .codes import Code
from .errors import RuleError

MAX_COINS = 10**15
"""The most coins a table may hold in all (below 2^53: exact in every JSON client)."""

STAKES_FIELDS = ("coin_per_point", "fee", "bankrolls")


class StakesError(RuleError):
    """Stakes that cannot be played (``bad_stakes``); ``context["field"]`` names the member."""

    code = Code.BAD_STAKES


def _integer(value: Any, name: str, low: int, high: int = MAX_COINS) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise StakesError(f"{name} must be an integer, got {value!r}", field=name)
    if not low <= value <= high:
        raise StakesError(f"{name} must be {low}-{high}, got {value}", field=name)
    return value


@dataclass(frozen=True, slots=True)
class Stakes:
    """A table's stakes: coins per point, the fee per round and each seat's bankroll (coins).

    >>> Stakes.from_spec({"coin_per_point": 200, "fee": 400, "bankrolls": [5000, 5000, 5000]}, players=3)
    Stakes(coin_per_point=200, fee=400, bankrolls=(5000, 5000, 5000))
    >>> Stakes.from_spec({"coin_per_point": 0, "bankrolls": [1, 2, 3, 4]}, players=4)
    Traceback (most recent call last):
    ...
    service.rules.stakes.StakesError: coin_per_point must be 1-1000000000000000, got 0
    """

    coin_per_point: int
    fee: int
    bankrolls: tuple[int, ...]

    def __post_init__(self) -> None:
        _integer(self.coin_per_point, "coin_per_point", 1)
        _integer(self.fee, "fee", 0)
        for i, b in enumerate(self.bankrolls):
            _integer(b, f"bankrolls.{i}", 0)
        if sum(self.bankrolls) > MAX_COINS:
            raise StakesError(f"the bankrolls add up to {sum(self.bankrolls)}, more than {MAX_COINS}",
                              field="bankrolls")

    @classmethod
    def from_spec(cls, spec: Stakes | Mapping[str, Any], players: int) -> Stakes:
        """Stakes from their JSON shape (docs/api.md): one bankroll per seat, ``fee`` optional (0)."""
        if isinstance(spec, Stakes):
            stakes = spec
        else:
            if not isinstance(spec, Mapping):
                raise StakesError(f"stakes are an object {{coin_per_point, fee, bankrolls}}, got {spec!r}",
                                  field="stakes")
            for name in spec:
                if name not in STAKES_FIELDS:
                    raise StakesError(f"unknown field {name!r} of stakes (one of {', '.join(STAKES_FIELDS)})",
                                      field=str(name))
            for name in ("coin_per_point", "bankrolls"):
                if name not in spec:
                    raise StakesError(f"stakes need {name}", field=name)
            bankrolls = spec["bankrolls"]
            if not isinstance(bankrolls, (list, tuple)):
                raise StakesError(f"bankrolls lists each seat's coins, got {bankrolls!r}", field="bankrolls")
            stakes = cls(spec["coin_per_point"], spec.get("fee", 0), tuple(bankrolls))
        if len(stakes.bankrolls) != players:
            raise StakesError(f"bankrolls must list the {players} seats' coins, got {len(stakes.bankrolls)}",
                              field="bankrolls")
        return stakes

    def as_dict(self) -> dict:
        return {"coin_per_point": self.coin_per_point, "fee": self.fee, "bankrolls": list(self.bankrolls)}


@dataclass(frozen=True, slots=True)
class CoinSettlement:
    """The coins of one ended round: per seat, the change (fee included), the fee paid and the coins after.

    ``nominal`` is step 1's coins owed (+) or due (−); ``pot`` what the losers paid.
    """

    coins_delta: tuple[int, ...]
    fees: tuple[int, ...]
    coins: tuple[int, ...]
    nominal: tuple[int, ...]
    pot: int

    def as_dict(self) -> dict:
        return {"coins_delta": list(self.coins_delta), "fees": list(self.fees)}


def settle_coins(deltas: Sequence[int], stakes: Stakes) -> CoinSettlement:
    """§12 steps 1-4 for one ended round: ``deltas`` in points, ``stakes.bankrolls`` the coins before it.

    >>> r = settle_coins([0, 0, 0, 0], Stakes(100, 300, (1000, 200, 0, 300)))
    >>> r.coins_delta, r.fees
    ((-300, -200, 0, -300), (300, 200, 0, 300))
    >>> settle_coins([6, -3, -3], Stakes(1, 0, (0, 1, 1))).coins_delta  # the pot is only 2
    (2, -1, -1)
    >>> settle_coins([1, 1, 1, -3], Stakes(1, 0, (0, 0, 0, 2))).coins_delta  # ties: the lower seats
    (1, 1, 0, -2)
    """
    coins = stakes.bankrolls
    n = len(coins)
    if len(deltas) != n:
        raise StakesError(f"{len(deltas)} deltas for {n} bankrolls", field="bankrolls")
    if any(isinstance(d, bool) or not isinstance(d, int) for d in deltas) or sum(deltas) != 0:
        raise StakesError(f"deltas must be integers that sum to zero, got {list(deltas)}", field="deltas")
    nominal = [d * stakes.coin_per_point for d in deltas]
    paid = [min(-x, c) if x < 0 else 0 for x, c in zip(nominal, coins)]  # step 2
    pot = sum(paid)
    won = [0] * n
    winners = [s for s in range(n) if nominal[s] > 0]
    total = sum(nominal[s] for s in winners)
    if pot:  # step 3 (a pot implies losers, so winners: the deltas sum to zero)
        remainders = []
        for s in winners:
            won[s], rest = divmod(pot * nominal[s], total)
            remainders.append((-rest, s))
        for _, s in sorted(remainders)[: pot - sum(won)]:
            won[s] += 1
    before_fees = [c - p + w for c, p, w in zip(coins, paid, won)]
    fees = tuple(min(stakes.fee, a) for a in before_fees)  # step 4
    after = tuple(a - f for a, f in zip(before_fees, fees))
    return CoinSettlement(tuple(a - c for a, c in zip(after, coins)), fees, after, tuple(nominal), pot)
