"""``POST /v1/batch``: many hand operations and settlements in one request, JSON or NDJSON.

Each item is answered by :mod:`service.api.batch_items` exactly as its single endpoint would answer its body
(the same schema, the same core, the same problem: ``instance`` is the single endpoint's path,
``request_id`` the batch request's).  One bad item never fails the others.

* ``application/json``: ``{"ruleset"?, "items": [...]}`` with at most ``BATCH_MAX_ITEMS`` items
  (1,000 by default), the whole body within ``MAX_BATCH_BYTES`` (1 MiB by default, apart from
  ``MAX_BODY_BYTES``: a thousand ordinary items fit; larger is a 413 whose detail points at NDJSON).
  The envelope's ``ruleset`` is the ruleset of every item that has no ``ruleset`` member (as if the
  item had given it): loaded once with the envelope, it is each such item's default
  (:func:`service.api.schemas.default_ruleset`).  An envelope that is not an object, has no ``items``
  or too many is a 422 for the whole request; an item that is not an object with a known ``op`` is its
  own 422 result (``errors`` name ``op``), as its NDJSON line would be.  Answer: ``{"results": [...]}``,
  one per item in order, written once (orjson).  The items are worked out
  :data:`~service.api.batch_items.PIECE_LINES` (64) at a time, with the worker's other requests given
  their turn between two pieces, so a batch of a thousand settlements does not hold them up.
* ``application/x-ndjson``: one item a line, no item limit and no body limit (a line at most
  ``MAX_BODY_BYTES``), answered ``application/x-ndjson``, one result line per item in order,
  streamed as the body is read.  The body is read as it arrives (each read what has come, at most
  64 KiB, within ``REQUEST_TIMEOUT``: see :mod:`service.serving`), so a client sending a line at a time
  gets each line's result as it sends it.  The lines are answered in pieces of at most
  :data:`~service.api.batch_items.PIECE_LINES` (64) results, each written before the next is worked
  out, with the worker's other requests given their turn between two pieces; nothing more is read while
  a piece waits for the client to take it.  So a job holds one read and one piece at most, whatever its
  size and whether or not its client reads, and one job does not hold up the worker's other requests.
  A line that is not JSON is that line's 400
  ``malformed_json`` result, one that is no item its 422 ``invalid_input`` result, one too long its 413
  result (``instance``: ``/v1/batch``); blank lines get none.  The response is 200 once it starts: a job
  cut short (a read that timed out, a broken chunked body, the client's item limit reached) ends with
  one more line, ``{"status": 408|400|429, "problem": {...}}``, that answers no item, and the items
  after it are not answered.

Rate limit: a batch counts its items against ``CLIENT_BATCH_ITEMS_PER_MINUTE`` (per client: the API
key, else the address), a JSON batch all at once before any item is run (a refused envelope counts
1), an NDJSON job piece by piece before that piece's lines are run.  The single hand endpoints are not
limited (a request each costs more than a batch item).
"""

from __future__ import annotations

import sys
import time

from flask import Response, g, request, stream_with_context
from marshmallow import ValidationError
from webargs import core
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from ..config import TURN_SECONDS
from . import batch_items, rate_limits, settings
from . import schemas as s
from .hands import KEYED, NO_KEY
from .jsonio import dumps
from .problems import ApiProblem, UnsupportedMediaType
from .smorest import Blueprint, invalid_input, read_json_body

blp = Blueprint("batch", __name__, url_prefix="/v1", description="Many items in one request, JSON or NDJSON.")

NDJSON = "application/x-ndjson"
_SCHEMA = s.BatchRequest()


class BatchTooLarge(ApiProblem):
    """A JSON batch over ``MAX_BATCH_BYTES``: its detail points at NDJSON."""

    status, code, title = 413, "payload_too_large", "Payload too large"

EXAMPLE = {
    "ruleset": {"preset": "xuezhan", "cap": 4},
    "items": [
        {"op": "ting", "hand": {"tiles": "1112345678999m"}},
        {"op": "score", "hand": {"tiles": "11122233344455m"}, "win": {"tile": "5m", "self_drawn": True}},
        {"op": "discards", "hand": {"tiles": "11122233344456m"}, "ruleset": "xueliu"},
        {"op": "validate", "hand": {"tiles": "123m"}},
        {"op": "ting", "hand": {"tiles": "12x"}},
        {"op": "settle", "dealer": 0, "events": [{"type": "hu", "from": 1, "tile": "5p",
                                                  "winners": [{"seat": 0, "fan": 2}]}]},
    ],
}
NDJSON_EXAMPLE = (
    '{"op":"ting","hand":{"tiles":"1112345678999m"}}\n'
    '{"op":"ting","hand":{"tiles":"12x"}}\n'
    'not json\n'
)

BATCH_DOC = {
    "operationId": "runBatch",
    "security": KEYED,
    "requestBody": {
        "required": True,
        "description": "`application/json`: an envelope of at most `BATCH_MAX_ITEMS` items (1,000 by default) "
                       "within `MAX_BATCH_BYTES` (1 MiB by default).\n\n"
                       "Or `Content-Type: application/x-ndjson`: one item (a "
                       "`BatchItem`) a line, any number of lines (each at most `MAX_BODY_BYTES`), read and "
                       "answered as they arrive, e.g.\n\n```\n" + NDJSON_EXAMPLE + "```\n\n(OpenAPI 3.1 has "
                       "no way to type a sequence of JSON values, so that body is described here only.)",
        "content": {
            "application/json": {"schema": s.BatchRequest, "example": EXAMPLE},
        },
    },
    "responses": {
        "200": {
            "description": "One result per item, in order: `{\"status\": 200, \"body\"}` (the single endpoint's "
                           "body) or `{\"status\", \"problem\"}` (its problem). As NDJSON, one result a line, "
                           "streamed; a job cut short ends with a line that answers no item (`request_timeout`, "
                           "`bad_request`, `too_many_requests`).",
            "content": {
                "application/json": {"schema": s.BatchResponse},
                NDJSON: {"schema": {"type": "string", "description": "one `BatchResult` a line"}},
            },
        },
    },
}


def document(api) -> None:
    """Register ``BatchItem``: one of the item schemas, by ``op``."""
    spec = api.spec
    mapping = {}
    for op, schema in s.BATCH_ITEM_SCHEMAS.items():
        if schema.__name__ not in spec.components.schemas:
            spec.components.schema(schema.__name__, schema=schema)
        mapping[op] = f"#/components/schemas/{schema.__name__}"
    spec.components.schema("BatchItem", component={
        "oneOf": [{"$ref": ref} for ref in mapping.values()],
        "discriminator": {"propertyName": "op", "mapping": mapping},
        "description": "A batch item: the body of the operation `op` names, with `op`.",
    })


@blp.route("/batch", methods=["POST"])
@blp.problems(
    (400, "malformed JSON (`malformed_json`; an NDJSON line that is not JSON is that line's result)"),
    (401, NO_KEY[1]),
    (413, "a JSON envelope larger than `MAX_BATCH_BYTES` (`payload_too_large`; its detail points at NDJSON, "
          "which has no overall limit)"),
    (415, "neither `application/json` nor `application/x-ndjson` (`unsupported_media_type`)"),
    (422, "an envelope that is not an object, has no `items` or more than `BATCH_MAX_ITEMS` (`invalid_input`); "
          "an item that is not an object with a known `op` is its own 422 result, not the request's"),
    (429, "the client's batch items a minute (`CLIENT_BATCH_ITEMS_PER_MINUTE`) would be exceeded: the "
          "whole JSON batch is refused (`too_many_requests`, `limit`: `client_batch_items`)"),
)
@blp.doc(**BATCH_DOC)
@rate_limits.limited("client_batch_items_per_minute")
def run_batch():
    """Run many items (hand operations, settlements) in one request, each answered as its endpoint would.

    A batch counts its items against the client's `CLIENT_BATCH_ITEMS_PER_MINUTE`. The envelope's
    `ruleset` is the ruleset of every item without one. Each item's problem is the single
    endpoint's (`instance`: that endpoint's path).
    """
    mimetype = request.mimetype
    if mimetype == NDJSON:
        return _stream()
    if not core.is_json(mimetype):
        got = mimetype or "no content type"
        raise UnsupportedMediaType(f"the request body must be application/json or {NDJSON}, got {got}")
    try:
        limit_bytes = settings.current().max_batch_bytes
        request.max_content_length = limit_bytes  # (a JSON batch's own limit, apart from MAX_BODY_BYTES)
        try:
            data = read_json_body(request)
        except RequestEntityTooLarge:
            raise BatchTooLarge(f"a JSON batch may have {limit_bytes} bytes at most (MAX_BATCH_BYTES): send a "
                                f"larger job as {NDJSON}, one item a line, which has no overall limit") from None
        limit = settings.current().batch_max_items
        items = data.get("items") if isinstance(data, dict) else None
        if isinstance(items, list) and len(items) > limit:
            raise invalid_input({"items": [f"Longer than maximum length {limit}."]})
        try:
            envelope = _SCHEMA.load(data)
        except ValidationError as exc:
            raise invalid_input(exc.messages) from None
    except Exception:
        rate_limits.charge_batch(1)  # a refused envelope counts as one item
        raise
    items = data["items"]  # (a list: the envelope loaded)
    rate_limits.charge_batch(len(items))
    ruleset, rid, most = envelope.get("ruleset"), g.get("request_id"), batch_items.PIECE_LINES
    results = batch_items.answer_items(items[:most], ruleset, rid)
    for start in range(most, len(items), most):
        time.sleep(TURN_SECONDS)  # (the worker's other requests' turn between two pieces: gevent's, patched)
        results += batch_items.answer_items(items[start:start + most], ruleset, rid)
    return Response(dumps({"results": results}), mimetype="application/json")


def _stream() -> Response:
    # An NDJSON job has no overall limit (its lines have one).  Flask reads None as "the app's
    # MAX_CONTENT_LENGTH", so the request's own limit is set past any body.
    request.max_content_length = sys.maxsize
    max_line = settings.current().max_body_bytes
    raw, rid = request.environ.get("wsgi.input"), g.get("request_id")
    # What has arrived, as the server gives it (service.serving: a body the server ends itself), else
    # werkzeug's stream read 64 KiB at a time (the test client's, a server that does not end the body).
    read1 = getattr(raw, "read1", None) if request.environ.get("wsgi.input_terminated") else None
    read = read1 or request.stream.read

    def results():
        try:
            for lines in batch_items.pieces(read, max_line, most=batch_items.PIECE_LINES):
                rate_limits.charge_batch(batch_items.count_items(lines))
                yield batch_items.answer_piece(lines, max_line, rid)
                time.sleep(TURN_SECONDS)  # (the worker's other requests' turn: gevent's, patched)
        except HTTPException as exc:  # the body cut short (408, 400) or the client's limit (429)
            yield batch_items.encode(batch_items.problem_result(exc, batch_items.BATCH_PATH, rid))

    response = Response(stream_with_context(results()), mimetype=NDJSON)
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Accel-Buffering"] = "no"  # nginx: pass each piece on at once
    return response

