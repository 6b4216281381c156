"""Batch items: one operation on one body, answered exactly as its single endpoint answers it.

Shared by ``POST /v1/batch`` (:mod:`service.api.batch`) and ``python -m service score``: no
request, no server, no Redis here.  An *item* is an operation's request body with ``op``
(``validate``, ``ting``, ``discards``, ``score``, ``settle``, ``shanten``) beside its members; its *result* is

* ``{"status": 200, "body": {...}}``: the single endpoint's response body, or
* ``{"status": <4xx>, "problem": {...}}``: the problem the single endpoint gives for that body
  (the same schema's ``load`` and the same core, so the same ``code``, ``errors``, ``event``;
  ``instance`` is the single endpoint's path, ``request_id`` the batch request's, none on the
  command line, where ``type`` is relative, ``/problems/<code>``: there is no origin).

On the command line (:func:`run_stream`) each result also starts with ``line``, the number of its
input line (from 1).

An NDJSON line (:func:`answer_line`) that is not JSON is a 400 ``malformed_json`` result, one that
is JSON but no item (not an object, no ``op``, an unknown one) a 422 ``invalid_input`` result naming
``op`` (a JSON batch's item too: :func:`answer_value`), one longer than the line limit a 413
``payload_too_large`` result: their ``instance`` is :data:`BATCH_PATH`, as no operation is known.
Blank lines are skipped (no result).

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
from .hands import discards_body, score_body, shanten_body, ting_body, validate_body
from .jsonio import dumps
from .problems import ApiProblem, describe
from .rounds import settle_body
from .smorest import invalid_input, parse_json

log = logging.getLogger("service.batch")

BATCH_PATH = "/v1/batch"
READ_SIZE = 64 * 1024
"""Bytes asked of a stream at a time (each read is one step of a job: its lines are answered before the next)."""


class Op(NamedTuple):
    """An operation of a batch: its request schema, its body function (loaded args → body), its path, and
    (the hand operations) its schema made with ``many=True``, which loads a batch's items of that operation
    at once and leaves each item's core refusal in it (:class:`~service.api.schemas.Refused`)."""

    schema: Any
    body: Callable[[dict], dict]
    path: str
    many: Any = None


def _hand_op(schema: type, body: Callable[[dict], dict], path: str) -> Op:
    return Op(schema(), body, path, schema(many=True))


OPS: dict[str, Op] = {
    "validate": _hand_op(s.ValidateRequest, validate_body, "/v1/hands/validate"),
    "ting": _hand_op(s.TingRequest, ting_body, "/v1/hands/ting"),
    "discards": _hand_op(s.DiscardsRequest, discards_body, "/v1/hands/discards"),
    "score": _hand_op(s.ScoreRequest, score_body, "/v1/hands/score"),
    "settle": Op(s.SettleRequest(), settle_body, "/v1/rounds/settle"),
    "shanten": _hand_op(s.ShantenRequest, shanten_body, "/v1/hands/shanten"),
}
assert tuple(OPS) == tuple(s.BATCH_ITEM_SCHEMAS)



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


def answer_value(item: Any, request_id: str | None = None) -> dict:
    """The result of any JSON value given as an item: one that is not an object with a known ``op`` is a 422
    ``invalid_input`` result naming ``op`` (``instance``: :data:`BATCH_PATH`), in a JSON batch as on an
    NDJSON line."""
    try:
        s.check_batch_item(item)
    except ValidationError as exc:
        return problem_result(invalid_input(exc.messages), BATCH_PATH, request_id)
    return answer_item(item, request_id)


def answer_many(op: str, items: list[dict], request_id: str | None = None) -> list[dict]:
    """The results of ``items`` (objects whose ``op`` is the hand operation ``op``), in order, each answered as
    :func:`answer` answers it alone (a body the schema refuses gets its own messages, one the core refuses its
    first refusal).

    The batch's things are resolved once (the operation, its schema, the default ruleset): each item of the
    plain form is loaded by :meth:`~service.api.schemas._HandRequest.load_plain`, its ``op`` skipped; the
    others, without their ``op``, at once by the operation's ``many=True`` schema (:func:`_answer_loaded`).
    """
    spec = OPS[op]
    schema, body_of, path = spec.schema, spec.body, spec.path
    core_fields, defaults = schema.CORE_FIELDS, schema.plain_defaults()
    check = s.check_refusals
    out: list = [None] * len(items)
    rest: list[int] = []
    for i, item in enumerate(items):
        try:
            args = schema.load_plain(item, defaults, "op")
            if args is None:
                rest.append(i)
                continue
            out[i] = {"status": 200, "body": body_of(check(args, core_fields))}
        except Exception as exc:  # noqa: BLE001 - as in answer()
            out[i] = problem_result(exc, path, request_id)
    if rest:
        bodies = [{k: v for k, v in items[i].items() if k != "op"} for i in rest]
        for i, result in zip(rest, _answer_loaded(op, bodies, request_id)):
            out[i] = result
    return out


def _answer_loaded(op: str, bodies: list[dict], request_id: str | None = None) -> list[dict]:
    """The results of ``bodies`` (items of the hand operation ``op``, without their ``op``), in order: loaded at
    once by the operation's ``many=True`` schema, each answered as :func:`answer` answers it alone."""
    spec = OPS[op]
    try:
        loaded, errors = spec.many.load(bodies), dict[int, Any]()
    except ValidationError as exc:
        loaded, errors = exc.valid_data, exc.messages
    except Exception:  # noqa: BLE001 - not the schema's refusal (a bug): each item alone, its own 500
        return [answer(op, body, request_id) for body in bodies]
    core_fields = spec.schema.CORE_FIELDS
    out = []
    for i, args in enumerate(loaded):
        try:
            if i in errors:
                raise invalid_input(errors[i])
            out.append({"status": 200, "body": spec.body(s.check_refusals(args, core_fields))})
        except Exception as exc:  # noqa: BLE001 - as in answer()
            out.append(problem_result(exc, spec.path, request_id))
    return out


def answer_values(values: list, request_id: str | None = None) -> list[dict]:
    """The results of any JSON values given as items (see :func:`answer_value`), in order: the items of each
    hand operation loaded together (:func:`answer_many`)."""
    out: list = [None] * len(values)
    groups: dict[str, list[int]] = {}
    for i, item in enumerate(values):
        try:
            s.check_batch_item(item)
        except ValidationError as exc:
            out[i] = problem_result(invalid_input(exc.messages), BATCH_PATH, request_id)
            continue
        if OPS[item["op"]].many is None:
            out[i] = answer_item(item, request_id)
        else:
            groups.setdefault(item["op"], []).append(i)
    for op, where in groups.items():
        if len(where) == len(values):  # (one operation: the items as they are)
            return answer_many(op, values, request_id)
        for i, result in zip(where, answer_many(op, [values[i] for i in where], request_id)):
            out[i] = result
    return out


def answer_items(items: list, ruleset: Ruleset | None = None, request_id: str | None = None) -> list[dict]:
    """The results of items (any JSON values: see :func:`answer_value`), in order; ``ruleset`` (loaded once:
    a batch envelope's) is that of every item without one, as if the item had given it."""
    if ruleset is None:
        return answer_values(items, request_id)
    with s.default_ruleset(ruleset):
        return answer_values(items, request_id)


def answer_line(line: bytes, request_id: str | None = None) -> dict | None:
    """The result of one NDJSON line (None for a blank one)."""
    if not line.strip():
        return None
    try:
        item = parse_json(line)
    except ApiProblem as exc:
        return problem_result(exc, BATCH_PATH, request_id)
    return answer_value(item, request_id)


def encode(result: dict) -> bytes:
    """A result as one NDJSON line."""
    return dumps(result) + b"\n"


class TooLong(NamedTuple):
    """Stands for a line longer than the limit (only its length is kept)."""

    length: int


PIECE_LINES = 64
"""Lines answered at most in one piece of an NDJSON answer (one write of the server's)."""


def pieces(read: Callable[[int], bytes], max_line: int, size: int = READ_SIZE,
           most: int | None = None) -> Iterator[list]:
    """The lines of a byte stream, in pieces: the lines each read completed (bytes, without their newline),
    at most ``most`` a piece when given (a read's lines are then cut into several pieces, the next read made
    only once they are all taken), a :class:`TooLong` for a line longer than ``max_line`` (its bytes are
    dropped as they come).  Memory: one read, one line and one piece at most, whatever the stream's length.

    >>> data = iter([b"a\\nb\\nc\\n", b"d\\ne\\n", b""])
    >>> list(pieces(lambda n: next(data), 10, most=2))
    [[b'a', b'b'], [b'c'], [b'd', b'e']]
    """
    rest = b""
    skipped = -1  # >= 0 while dropping the rest of a line too long (the bytes dropped so far)
    limit = most or -1
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
            if len(out) == limit:
                yield out
                out = []
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


def answer_lines(lines: list, max_line: int, request_id: str | None = None,
                 first_line: int | None = None) -> list[dict]:
    """The results of the lines of one piece (blank lines have none); with ``first_line`` (the number of
    the piece's first line in its stream, from 1) each result starts with its input's ``line``."""
    slots: list = []  # (line index, its result, or None while its item waits in `values`)
    values, at = [], []
    for i, line in enumerate(lines):
        if isinstance(line, TooLong):
            slots.append((i, problem_result(LineTooLong(f"the line has {line.length} bytes, more than the limit "
                                                        f"of {max_line} (MAX_BODY_BYTES)"), BATCH_PATH, request_id)))
        elif line.strip():
            try:
                values.append(parse_json(line))
            except ApiProblem as exc:
                slots.append((i, problem_result(exc, BATCH_PATH, request_id)))
                continue
            at.append(len(slots))
            slots.append((i, None))
    for where, result in zip(at, answer_values(values, request_id)):
        slots[where] = (slots[where][0], result)
    if first_line is None:
        return [result for _, result in slots]
    return [{"line": first_line + i, **result} for i, result in slots]


def encode_all(results: list[dict]) -> bytes:
    """Results as NDJSON lines."""
    return b"\n".join(map(dumps, results)) + b"\n" if results else b""


def answer_piece(lines: list, max_line: int, request_id: str | None = None) -> bytes:
    """The result lines of the lines of one piece (blank lines have none)."""
    return encode_all(answer_lines(lines, max_line, request_id))


class Scored(NamedTuple):
    """One piece of a stream answered by :func:`run_stream`: its result lines, how many items it had, how many
    of them failed (a result that is not a 200), and how many bytes of the stream it was."""

    lines: bytes
    items: int
    failed: int
    size: int


def score_piece(lines: list, max_line: int, first_line: int) -> Scored:
    """A piece of the command line's stream answered, each result with its ``line`` (see :class:`Scored`)."""
    results = answer_lines(lines, max_line, first_line=first_line)
    failed = sum(1 for result in results if result["status"] != 200)
    return Scored(encode_all(results), len(results), failed, piece_bytes(lines))


def count_items(lines: list) -> int:
    """How many results the lines of a piece get (blank lines get none)."""
    return sum(1 for line in lines if isinstance(line, TooLong) or line.strip())


def piece_bytes(lines: list) -> int:
    """How many bytes of the stream the lines of a piece were (their newlines included)."""
    return sum((line.length if isinstance(line, TooLong) else len(line)) + 1 for line in lines)


def run_stream(read: Callable[[int], bytes], max_line: int, jobs: int = 1) -> Iterator[Scored]:
    """Answer a stream of NDJSON items, piece by piece (:class:`Scored`), each result with the number of its
    input line (``line``, from 1: blank lines count, as an editor counts them).

    With ``jobs`` > 1 the pieces are answered by that many processes and given back in order, with at
    most ``2 * jobs`` pieces read ahead: memory stays bounded whatever the stream's length.
    """
    first_line = 1
    if jobs <= 1:
        for lines in pieces(read, max_line):
            yield score_piece(lines, max_line, first_line)
            first_line += len(lines)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs) as pool:
        pending: deque = deque()
        for lines in pieces(read, max_line):
            pending.append(pool.submit(score_piece, lines, max_line, first_line))
            first_line += len(lines)
            if len(pending) >= 2 * jobs:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
