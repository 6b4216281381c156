"""`/v1/rounds/settle` and `/v1/rulesets`."""

from __future__ import annotations

from flask import jsonify

from ..rules.settle import settle
from . import schemas as s
from .hands import errors
from .smorest import Blueprint

blp = Blueprint("rounds", __name__, url_prefix="/v1", description="Settling a round; the rule presets.")


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
def settle_round(args):
    """Settle a round from its events: transfers, deltas, winners, next dealer.

    An event that cannot happen is a 422 whose problem carries `event` (its
    0-based index) and a stable `code`.
    """
    result = settle(
        args["events"], dealer=args["dealer"], ruleset=args["ruleset"], voids=args.get("voids")
    )
    return jsonify(result.as_dict())


@blp.route("/rulesets", methods=["GET"])
@blp.response(200, s.RulesetsResponse)
def rulesets():
    """Every preset with every field."""
    return jsonify(s.dump_rulesets())
