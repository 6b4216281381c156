"""`/v1/hands/*`: stateless hand operations (thin views: load → core (`*_result`) → dump (`*_body`))."""

from __future__ import annotations

from flask import jsonify

from .. import discards, score, shanten_analysis, ting, validate
from ..rules.fan import Score
from ..rules.shanten import Shanten, ShantenOptions
from ..rules.ting import DiscardAdvice, Ting
from ..rules.validate import Validation
from . import rate_limits
from . import schemas as s
from .smorest import JSON_BODY, Blueprint
from .table_views import RESPONSE_EXAMPLES

blp = Blueprint("hands", __name__, url_prefix="/v1/hands",
                description="Validate, ting, discard advice, shanten and scoring of one hand.")

KEYED: list[dict[str, list[str]]] = [{"apiKey": []}, {}]  # X-API-Key when the service has API keys
NO_KEY = (401, "with API keys on: no `X-API-Key`, or not a key of the service (`api_key_required`, "
               "`api_key_invalid`)")
errors = blp.problems(*JSON_BODY, NO_KEY)
"""What every stateless JSON operation answers besides its success."""


@blp.route("/validate", methods=["POST"])
@blp.arguments(s.ValidateRequest(), example={"hand": {"tiles": "23445677p345789s", "melds": [], "void": "m"}})
@blp.response(200, s.ValidateResponse)
@errors
@blp.doc(operationId="validateHand", security=KEYED)
@rate_limits.unlimited("a stateless hand operation: many go in one POST /v1/batch, which counts its items")
def validate_hand(args):
    """Check a hand: size, copies, suits, 花猪, completeness.

    A hand that parses but breaks a rule (wrong size, a fifth copy) is a 200
    with `valid: false` and its problems; notation that does not parse is a 422.
    """
    return jsonify(validate_body(args))


def validate_body(args: dict) -> dict:
    return s.dump_validation(validate_result(args))


def validate_result(args: dict) -> Validation:
    """The core's answer to the loaded ``args`` (:class:`~service.api.schemas.ValidateResponse` dumps it)."""
    return validate(args["hand"], ruleset=args["ruleset"], visible=args["visible"])


@blp.route("/ting", methods=["POST"])
@blp.arguments(s.TingRequest(), example={"hand": {"tiles": "1112345678999m"}, "ruleset": "xuezhan", "visible": "5m5m"})
@blp.response(200, s.TingResponse)
@errors
@blp.doc(operationId="tingHand", security=KEYED)
@rate_limits.unlimited("a stateless hand operation: many go in one POST /v1/batch, which counts its items")
def ting_hand(args):
    """Waits of a 13-size hand with their fan, points and remaining copies, and its 大叫."""
    return jsonify(ting_body(args))


def ting_body(args: dict) -> dict:
    return s.dump_ting(ting_result(args))


def ting_result(args: dict) -> Ting:
    """The core's answer to the loaded ``args`` (:class:`~service.api.schemas.TingResponse` dumps it)."""
    return ting(args["hand"], ruleset=args["ruleset"], visible=args["visible"])


@blp.route("/discards", methods=["POST"])
@blp.arguments(s.DiscardsRequest(),
               example={"hand": {"tiles": "11122233344456m"}, "ruleset": {"preset": "xuezhan", "cap": 4}})
@blp.response(200, s.DiscardsResponse)
@errors
@blp.doc(operationId="discardAdvice", security=KEYED)
@rate_limits.unlimited("a stateless hand operation: many go in one POST /v1/batch, which counts its items")
def discard_advice(args):
    """Discards of a 14-size hand that leave it ting, best first."""
    return jsonify(discards_body(args))


def discards_body(args: dict) -> dict:
    return s.dump_discards(discards_result(args))


def discards_result(args: dict) -> DiscardAdvice:
    """The core's answer to the loaded ``args`` (:class:`~service.api.schemas.DiscardsResponse` dumps it)."""
    return discards(args["hand"], ruleset=args["ruleset"], visible=args["visible"])


@blp.route("/score", methods=["POST"])
@blp.arguments(
    s.ScoreRequest(),
    example={
        "hand": {"tiles": "123345m999p66p", "melds": [{"type": "kong", "kind": "concealed", "tile": "2p"}]},
        "win": {"tile": "6p", "self_drawn": True},
        "ruleset": {"preset": "xuezhan", "zimo": "fan"},
    },
)
@blp.response(200, s.ScoreResponse)
@errors
@blp.doc(operationId="scoreHand", security=KEYED)
@rate_limits.unlimited("a stateless hand operation: many go in one POST /v1/batch, which counts its items")
def score_hand(args):
    """Score a 14-size winning hand (the winning tile included).

    A hand that does not win, or contradictory flags: 422.
    """
    return jsonify(score_body(args))


def score_body(args: dict) -> dict:
    return s.dump_score(score_result(args))


def score_result(args: dict) -> Score:
    """The core's answer to the loaded ``args`` (:class:`~service.api.schemas.ScoreResponse` dumps it)."""
    return score(args["hand"], args["win"], ruleset=args["ruleset"])


@blp.route("/shanten", methods=["POST"])
@rate_limits.unlimited("a stateless hand operation: many go in one POST /v1/batch, which counts its items")
@blp.arguments(s.ShantenRequest(), example={"hand": {"tiles": "12345m678m4599p1p"}, "visible": "3m3m"})
@blp.response(200, s.ShantenResponse, examples=RESPONSE_EXAMPLES.get("shantenHand"))
@errors
@blp.doc(operationId="shantenHand", security=KEYED)
def shanten_hand(args):
    """Shanten (向听) of a 13- or 14-size hand and its useful tiles (有效进张).

    13 tiles: the shanten, the useful tiles (draws that lower it by one) with their copies left, and
    their total. 14 tiles: the shanten (-1: it wins) and, for each distinct discard, the shanten and
    useful tiles of the 13 left, best first. A hand whose melds alone break 缺一门 or hold the void
    suit: `shanten` null. Another size, a fifth copy, bad notation: 422, as for ting.
    """
    return jsonify(shanten_body(args))


def shanten_body(args: dict) -> dict:
    return s.dump_shanten(shanten_result(args))


def shanten_result(args: dict) -> Shanten | ShantenOptions:
    """The core's answer to the loaded ``args`` (:class:`~service.api.schemas.ShantenResponse` dumps it)."""
    return shanten_analysis(args["hand"], ruleset=args["ruleset"], visible=args["visible"])
