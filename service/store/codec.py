"""How log records, round summaries and states are written in Redis (compactly), and read back.

A table of 500 events kept its log as 500 JSON objects of ~100 bytes (``seq``,
the event, ``round``, an ISO timestamp), its round summaries as JSON objects
of ~140 bytes, and its state with the ruleset twice.  What is written now:

* a **log record** is a JSON array ``[at, round, event]``: ``at`` in ms since
  the epoch (the ISO string it stands for has ms precision), ``round`` as is,
  and the event's fields with short names (:data:`FIELDS`), its ``type`` and a
  kong's ``kind`` as small integers; ``seq`` is not written (the record at
  index *i* of the log is seq *i* + 1);
* a **round summary** is a JSON array of its fields in a fixed order
  (:data:`SUMMARY`), then an object of the other fields (the coins of a table
  with stakes) when there are any; ``number`` is not written (the summary at
  index *i* of the rounds list is round *i* + 1);
* the **state** leaves out its round's copy of the ruleset when it is the
  table's (it always is).

Each is written that way only when reading it back gives exactly what was
encoded (:func:`record` and :func:`summary` check); anything else (a field or
value this encoding does not know) is written as before, as a JSON object.  So
both forms are read: a JSON object is the earlier form (it names its own
``seq`` or ``number``), a JSON array this one.  Tables written before this
encoding need no migration; ``python -m service check-tables --repair`` writes
their state and summaries anew (their log records stay as they are).
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any, Iterable

import orjson

# event field -> its short name in a stored record (any other field keeps its name)
FIELDS = {
    "type": "t", "seat": "s", "kind": "k", "tile": "i", "from": "f", "winners": "w", "fan": "n",
    "after_kong": "a", "dealer": "d", "voids": "v", "coins": "c", "target": "g", "seats": "S",
    "patterns": "p", "hand": "h", "robbed": "r",
}
_LONG = {short: name for name, short in FIELDS.items()}
TYPES = ("round_start", "round_end", "kong", "peng", "hu", "draw", "escape", "buy_in", "void")
_TYPE = {name: i for i, name in enumerate(TYPES)}
KINDS = ("concealed", "direct", "added")
_KIND = {name: i for i, name in enumerate(KINDS)}
SUMMARY = ("dealer", "deltas", "won", "left", "ended_by", "next_dealer", "first_seq", "last_seq")
_AT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\Z")


def dumps(obj: Any) -> bytes:
    """Compact JSON (UTF-8, no ASCII escapes) as bytes: orjson, or json for what orjson refuses."""
    try:
        return orjson.dumps(obj)
    except TypeError:  # (an int wider than 64 bits)
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def _loads(raw: bytes | str) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:  # (what orjson refuses that json takes: e.g. a huge int)
        return json.loads(raw)


def at_ms(at: str) -> int | None:
    """An ``at`` (ISO, ms, UTC, ``Z``) in ms since the epoch, or None for any other string.

    >>> at_ms("2026-11-30T20:02:22.123Z"), iso(1796068942123)
    (1796068942123, '2026-11-30T20:02:22.123Z')
    """
    if not isinstance(at, str) or not _AT.match(at):
        return None
    dt = datetime.fromisoformat(at[:-1] + "+00:00")
    return (int(dt.replace(tzinfo=timezone.utc).timestamp()) * 1000) + dt.microsecond // 1000


def iso(ms: int) -> str:
    s, milli = divmod(ms, 1000)
    return datetime.fromtimestamp(s, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{milli:03d}Z"


def _renamed(value: Any, names: dict[str, str]) -> Any:
    """``value`` with every dict key found in ``names`` renamed, at any depth."""
    if isinstance(value, dict):
        return {names.get(k, k): _renamed(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed(v, names) for v in value]
    return value


def _pack_event(record: dict) -> dict:
    event = {}
    for k, v in record.items():
        if k in ("seq", "round", "at"):
            continue
        if k == "type" and v in _TYPE:
            v = _TYPE[v]
        elif k == "kind" and v in _KIND:
            v = _KIND[v]
        event[FIELDS.get(k, k)] = _renamed(v, FIELDS)
    return event


def _unpack(entry: list, seq: int, with_at: bool = True) -> dict:
    at, rnd, event = entry
    out: dict[str, Any] = {"seq": seq}
    for k, v in event.items():
        name = _LONG.get(k, k)
        if name == "type" and isinstance(v, int) and not isinstance(v, bool):
            v = TYPES[v]
        elif name == "kind" and isinstance(v, int) and not isinstance(v, bool):
            v = KINDS[v]
        else:
            v = _renamed(v, _LONG)
        out[name] = v
    out["round"] = rnd
    if with_at:
        out["at"] = iso(at)
    return out


def record(rec: dict) -> bytes:
    """A log record (``{"seq", ...event, "round", "at"}``) as stored: compact when that reads back
    exactly, else as JSON.

    >>> r = {"seq": 7, "type": "kong", "seat": 1, "kind": "direct", "tile": "3p", "from": 2,
    ...      "round": 2, "at": "2026-11-30T20:02:22.123Z"}
    >>> record(r)
    b'[1796068942123,2,{"t":2,"s":1,"k":1,"i":"3p","f":2}]'
    >>> read_record(record(r), 7) == r
    True
    >>> record({**r, "s": 1})[:1]  # a field this encoding would misread: stored as JSON
    b'{'
    """
    ms = at_ms(rec.get("at"))
    names = list(rec)
    if ms is not None and names[0] == "seq" and names[-2:] == ["round", "at"]:
        packed = [ms, rec["round"], _pack_event(rec)]
        try:
            back = _unpack(_loads(dumps(packed)), rec["seq"])
        except (IndexError, TypeError, ValueError):
            back = None
        if back == rec:
            return dumps(packed)
    return dumps(rec)


def read_record(raw: bytes | str, seq: int, with_at: bool = True) -> dict:
    """The record stored at seq ``seq`` (either form); ``with_at=False`` leaves out ``at`` of a compact
    one (a fold needs only the event)."""
    entry = _loads(raw)
    if isinstance(entry, dict):
        return entry
    return _unpack(entry, seq, with_at)


def read_records(raws: Iterable[bytes], first_seq: int, with_at: bool = True) -> list[dict]:
    """Records stored from seq ``first_seq`` on."""
    return [read_record(raw, seq, with_at) for seq, raw in enumerate(raws, first_seq)]


def summary(s: dict) -> bytes:
    """A round summary as stored: the :data:`SUMMARY` fields in order, then any others (compact when
    that reads back exactly, else as JSON).

    >>> s = {"number": 3, "dealer": 0, "deltas": [-12, 36, -12, -12], "won": [], "left": [],
    ...      "ended_by": None, "next_dealer": 0, "first_seq": 9, "last_seq": 12}
    >>> summary(s)
    b'[0,[-12,36,-12,-12],[],[],null,0,9,12]'
    >>> read_summary(summary(s), 3) == s
    True
    """
    if "number" in s and all(k in s for k in SUMMARY):
        rest = {k: v for k, v in s.items() if k != "number" and k not in SUMMARY}
        packed = [s[k] for k in SUMMARY] + ([rest] if rest else [])
        raw = dumps(packed)
        try:
            back = read_summary(raw, s["number"])
        except (IndexError, TypeError, ValueError):
            back = None
        if back == s:
            return raw
    return dumps(s)


def read_summary(raw: bytes | str, number: int) -> dict:
    """The summary of round ``number`` (either form)."""
    entry = _loads(raw)
    if isinstance(entry, dict):
        return entry
    out = {"number": number, **dict(zip(SUMMARY, entry))}
    if len(entry) > len(SUMMARY):
        out.update(entry[len(SUMMARY)])
    return out


def read_summaries(raws: Iterable[bytes], first_number: int) -> list[dict]:
    return [read_summary(raw, n) for n, raw in enumerate(raws, first_number)]


def state(d: dict) -> bytes:
    """A state's dict as stored: without its round's copy of the ruleset when it is the table's."""
    rnd = d.get("round")
    if isinstance(rnd, dict) and rnd.get("ruleset") == d.get("ruleset") and "ruleset" in rnd:
        d = {**d, "round": {k: v for k, v in rnd.items() if k != "ruleset"}}
    return dumps(d)


def read_state(raw: bytes | str) -> dict:
    d = _loads(raw)
    rnd = d.get("round")
    if isinstance(rnd, dict) and "ruleset" not in rnd:
        d["round"] = {"ruleset": d["ruleset"], **rnd}
    return d
