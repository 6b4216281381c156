"""Batch items: one operation on one body, answered exactly as its single endpoint answers it.

Shared by ``POST /v1/batch`` (:mod:`service.api.batch`) and ``python -m service score``: no
request, no server, no Redis here.  An *item* is an operation's request body with ``op``
(``validate``, ``ting``, ``discards``, ``score``, ``settle``) beside its members; its *result* is

* ``{"status": 200, "body": {...}}``: the single endpoint's response body, or
* ``{"status": <4xx>, "problem": {...}}``: the problem the single endpoint gives for that body
  (the same schema's ``load`` and the same core, so the same ``code``, ``errors``, ``event``;
  ``instance`` is the single endpoint's path, ``request_id`` the batch request's, none on the
  command line).

An NDJSON line (:func:`answer_line`) that is not JSON is a 400 ``malformed_json`` result, one that
is JSON but no item (not an object, no ``op``, an unknown one) a 422 ``invalid_input`` result, one
longer than the line limit a 413 ``payload_too_large`` result: their ``instance`` is
:data:`BATCH_PATH`, as no operation is known.  Blank lines are skipped (no result).

>>> answer("ting", {"hand": {"tiles": "1112345678999m"}})["body"]["ting"]
True
>>> answer("score", {"hand": {"tiles": "1112345678999m"}, "win": {"tile": "9m"}})["problem"]["code"] == "bad_size"
True
>>> answer_line(b'{"op": "ting", "hand": {"tiles": 7}}')["problem"]["errors"]
{'hand.tiles': ['A hand string or a list of tile strings.']}
>>> answer_line(b"{oops")["status"], answer_line(b"  ") is None
(400, True)
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from marshmallow import ValidationError

from ..rules.ruleset import Ruleset
from . import schemas as s
from .hands import discards_body, score_body, ting_body, validate_body
from .jsonio import dumps
from .problems import ApiProblem, describe
from .rounds import settle_body
from .smorest import invalid_input, parse_json

log = logging.getLogger("service.batch")

BATCH_PATH = "/v1/batch"
READ_SIZE = 64 * 1024
"""Bytes asked of a stream at a time (each read is one step of a job: its lines are answered before the next)."""


class Op(NamedTuple):
    """An operation of a batch: its request schema, its body function (loaded args → body), its path."""

    schema: Any
    body: Callable[[dict], dict]
    path: str


OPS: dict[str, Op] = {
    "validate": Op(s.ValidateRequest(), validate_body, "/v1/hands/validate"),
    "ting": Op(s.TingRequest(), ting_body, "/v1/hands/ting"),
    "discards": Op(s.DiscardsRequest(), discards_body, "/v1/hands/discards"),
    "score": Op(s.ScoreRequest(), score_body, "/v1/hands/score"),
    "settle": Op(s.SettleRequest(), settle_body, "/v1/rounds/settle"),
}
assert tuple(OPS) == tuple(s.BATCH_ITEM_SCHEMAS)

_ITEM = s.BatchItemField()


class LineTooLong(ApiProblem):
    """An NDJSON line longer than the line limit (``MAX_BODY_BYTES``, a single request's limit)."""

    status, code, title = 413, "payload_too_large", "Payload too large"


def problem_result(exc: BaseException, path: str, request_id: str | None = None) -> dict:
    """The result of an item that failed with ``exc``: the problem ``path`` answers for it."""
    problem = describe(exc, path, "POST")
    if problem.status >= 500:
        log.error("batch item failed: %s on %s (request %s)", type(exc).__name__, path, request_id,
                  exc_info=(type(exc), exc, exc.__traceback__))
    return {"status": problem.status, "problem": problem.body(path, request_id)}


def answer(op: str, body: dict, request_id: str | None = None) -> dict:
    """The result of ``body`` (an item without its ``op``) sent to the single endpoint of ``op``."""
    spec = OPS[op]
    try:
        try:
            args = spec.schema.load(body)
        except ValidationError as exc:
            raise invalid_input(exc.messages) from None
        return {"status": 200, "body": spec.body(args)}
    except Exception as exc:  # noqa: BLE001 - every failure is this item's problem, a bug a 500 (logged)
        return problem_result(exc, spec.path, request_id)


def answer_item(item: dict, request_id: str | None = None) -> dict:
    """The result of an item (an object with a known ``op``)."""
    return answer(item["op"], {k: v for k, v in item.items() if k != "op"}, request_id)


def answer_items(items: list[dict], ruleset: Ruleset | None = None, request_id: str | None = None) -> list[dict]:
    """The results of items (objects with a known ``op``), in order; ``ruleset`` (loaded once: a batch
    envelope's) is that of every item without one, as if the item had given it."""
    if ruleset is None:
        return [answer_item(item, request_id) for item in items]
    with s.default_ruleset(ruleset):
        return [answer_item(item, request_id) for item in items]


def answer_line(line: bytes, request_id: str | None = None) -> dict | None:
    """The result of one NDJSON line (None for a blank one)."""
    if not line.strip():
        return None
    try:
        item = parse_json(line)
        try:
            _ITEM.deserialize(item)
        except ValidationError as exc:
            raise invalid_input(exc.messages) from None
    except ApiProblem as exc:
        return problem_result(exc, BATCH_PATH, request_id)
    return answer_item(item, request_id)


def encode(result: dict) -> bytes:
    """A result as one NDJSON line."""
    return dumps(result) + b"\n"


class TooLong(NamedTuple):
    """Stands for a line longer than the limit (only its length is kept)."""

    length: int


def pieces(read: Callable[[int], bytes], max_line: int, size: int = READ_SIZE) -> Iterator[list]:
    """The lines of a byte stream, one list per read: the lines that read completed (bytes, without their
    newline), a :class:`TooLong` for a line longer than ``max_line`` (its bytes are dropped as they come).
    Memory: one read and one line at most, whatever the stream's length."""
    rest = b""
    skipped = -1  # >= 0 while dropping the rest of a line too long (the bytes dropped so far)
    while True:
        data = read(size)
        if not data:
            break
        out: list = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            if skipped >= 0:
                out.append(TooLong(skipped + end - start))
                skipped = -1
            else:
                line = rest + data[start:end] if rest else data[start:end]
                rest = b""
                out.append(line if len(line) <= max_line else TooLong(len(line)))
            start = end + 1
        tail = data[start:]
        if skipped >= 0:
            skipped += len(tail)
        elif len(rest) + len(tail) > max_line:
            skipped, rest = len(rest) + len(tail), b""
        else:
            rest = rest + tail if rest else tail
        if out:
            yield out
    if skipped >= 0:
        yield [TooLong(skipped)]
    elif rest:
        yield [rest]


def answer_piece(lines: list, max_line: int, request_id: str | None = None) -> bytes:
    """The result lines of the lines of one piece (blank lines have none)."""
    out = []
    for line in lines:
        if isinstance(line, TooLong):
            result = problem_result(LineTooLong(f"the line has {line.length} bytes, more than the limit "
                                                f"of {max_line} (MAX_BODY_BYTES)"), BATCH_PATH, request_id)
        else:
            result = answer_line(line, request_id)
            if result is None:
                continue
        out.append(dumps(result))
    return b"\n".join(out) + b"\n" if out else b""


def count_items(lines: list) -> int:
    """How many results the lines of a piece get (blank lines get none)."""
    return sum(1 for line in lines if isinstance(line, TooLong) or line.strip())


def piece_bytes(lines: list) -> int:
    """How many bytes of the stream the lines of a piece were (their newlines included)."""
    return sum((line.length if isinstance(line, TooLong) else len(line)) + 1 for line in lines)


def run_stream(read: Callable[[int], bytes], max_line: int, jobs: int = 1) -> Iterator[tuple[bytes, int, int]]:
    """Answer a stream of NDJSON items, piece by piece: (result lines, items answered, bytes read) each.

    With ``jobs`` > 1 the pieces are answered by that many processes and given back in order, with at
    most ``2 * jobs`` pieces read ahead: memory stays bounded whatever the stream's length.
    """
    if jobs <= 1:
        for lines in pieces(read, max_line):
            yield answer_piece(lines, max_line), count_items(lines), piece_bytes(lines)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs) as pool:
        pending: deque = deque()
        for lines in pieces(read, max_line):
            pending.append((pool.submit(answer_piece, lines, max_line), count_items(lines), piece_bytes(lines)))
            if len(pending) >= 2 * jobs:
                done, items, size = pending.popleft()
                yield done.result(), items, size
        while pending:
            done, items, size = pending.popleft()
            yield done.result(), items, size
