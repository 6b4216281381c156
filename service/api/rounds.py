"""`/v1/rounds/settle` and `/v1/rulesets`.

The events of a round are the rules core's to check: the view passes them as
given, and an event the core rejects, malformed ones included, is a 422 whose
problem carries ``event`` (its index) and, for a malformed one, ``errors``
naming the member (``events.3.seats``).
"""

from __future__ import annotations

from flask import jsonify

from ..rules.errors import EventError
from ..rules.ruleset import PRESETS
from ..rules.settle import settle
from ..rules.stakes import settle_coins
from . import rate_limits
from . import schemas as s
from .hands import KEYED, errors
from .problems import FieldRuleError
from .smorest import Blueprint

blp = Blueprint("rounds", __name__, url_prefix="/v1", description="Settling a round from its events.")
rulesets_blp = Blueprint("rulesets", __name__, url_prefix="/v1", description="The rule presets and their fields.")


@blp.route("/rounds/settle", methods=["POST"])
@blp.arguments(
    s.SettleRequest(),
    example={
        "ruleset": "xuezhan",
        "dealer": 0,
        "events": [
            {"type": "kong", "seat": 1, "kind": "direct", "tile": "5m", "from": 2},
            {"type": "hu", "from": 3, "tile": "5p", "winners": [{"seat": 0, "fan": 2}]},
        ],
    },
)
@blp.response(200, s.SettleResponse)
@errors
@blp.doc(operationId="settleRound", security=KEYED)
@rate_limits.unlimited("a stateless settlement: many go in one POST /v1/batch, which counts its items")
def settle_round(args):
    """Settle a round from its events: transfers, deltas, winners, next dealer.

    An event that cannot happen, or that breaks the event format, is a 422
    whose problem carries `event` (its 0-based index) and a stable `code`
    (`bad_event` with `errors` for a malformed one). With `stakes` (docs/rules.md
    §12; `bankrolls` = the seats' coins before the round) the response also has
    `coins_delta` and `fees`, null while the round has not ended; stakes that
    are not integers in range, or not one bankroll per seat, are a 422
    `bad_stakes` naming the member.
    """
    return jsonify(settle_body(args))


def settle_body(args: dict) -> dict:
    """The body :func:`settle_round` answers for its loaded ``args``."""
    return s.dump_settle(settle_result(args))


def settle_result(args: dict) -> s.SettledRound:
    """The round of the loaded ``args`` settled, with its coins when it has stakes (an event error that
    names a member becomes a field error of ``events.<i>``)."""
    try:
        result = settle(args["events"], dealer=args["dealer"], ruleset=args["ruleset"], voids=args.get("voids"))
    except EventError as exc:
        if "field" not in exc.context:  # an event that cannot happen: `event` says which
            raise
        raise FieldRuleError(exc, f"events.{exc.event}") from None
    stakes = args.get("stakes")
    coins = settle_coins(result.deltas, stakes) if stakes is not None and result.ended else None
    return s.SettledRound(result, stakes, coins)


@rulesets_blp.route("/rulesets", methods=["GET"])
@rulesets_blp.response(200, s.RulesetsResponse)
@rulesets_blp.problems((401, "with API keys on: no `X-API-Key`, or not a key of the service"))
@rulesets_blp.doc(operationId="getRulesets", security=KEYED)
@rate_limits.unlimited("static data (the presets)")
def rulesets():
    """Every preset with every field."""
    return {"default": "xuezhan", "presets": PRESETS}  # (smorest dumps it with RulesetsResponse)
