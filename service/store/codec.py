"""How log records, round summaries and states are written in Redis (compactly), and read back.

* a **log record** is a JSON array ``[at, round, event]``: ``at`` in ms since
  the epoch (the ISO string it stands for has ms precision), ``round`` as is,
  and the event's fields with short names (:data:`FIELDS`, at any depth), its
  ``type`` and a kong's ``kind`` as small integers; ``seq`` is not written (the
  record at index *i* of the log is seq *i* + 1).  Records are events the rules
  core has checked (no member it does not know), so the short names never meet
  a member of the same name;
* a **round summary** is a JSON array of its fields in a fixed order
  (:data:`SUMMARY`), then an object of the other fields (its ``facts`` with
  short names, :data:`FACTS`; the coins of a table with stakes) when there are any; ``number`` is not written
  (the summary at index *i* of the rounds list is round *i* + 1);
* the **state** leaves out its round's copy of the ruleset when it is the
  table's (it always is).

"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

import orjson

# event field -> its short name in a stored record (any other field keeps its name)
FIELDS = {
    "type": "t", "seat": "s", "kind": "k", "tile": "i", "from": "f", "winners": "w", "fan": "n",
    "after_kong": "a", "dealer": "d", "voids": "v", "coins": "c", "target": "g", "seats": "S",
    "patterns": "p", "hand": "h", "robbed": "r",
}
_LONG = {short: name for name, short in FIELDS.items()}
TYPES = ("round_start", "round_end", "kong", "peng", "hu", "draw", "escape", "buy_in", "void", "penalty", "adjust",
         "correction")
_TYPE = {name: i for i, name in enumerate(TYPES)}
KINDS = ("concealed", "direct", "added")
_KIND = {name: i for i, name in enumerate(KINDS)}
# a round summary's facts (the evening summary's) -> short names, at any depth
FACTS = {
    "facts": "F", "wins": "w", "zimo": "z", "dianpao_paid": "d", "kongs_direct": "kd", "kongs_added": "ka",
    "kongs_concealed": "kc", "huazhu_paid": "h", "dajiao_paid": "j", "escapes": "e", "biggest_win": "b",
    "seq": "s", "fan": "n", "patterns": "p", "points": "v", "penalties_paid": "pp",
}
_LONG_FACTS = {short: name for name, short in FACTS.items()}
SUMMARY = ("dealer", "deltas", "won", "left", "ended_by", "next_dealer", "first_seq", "last_seq")
_AT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\Z")


def dumps(obj: Any) -> bytes:
    """Compact JSON (UTF-8, no ASCII escapes) as bytes."""
    return orjson.dumps(obj)


def loads(raw: bytes | str) -> Any:
    """What :func:`dumps` wrote (and any JSON the scripts or the meta hash hold), read back."""
    return orjson.loads(raw)


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
    """A log record (``{"seq", ...event, "round", "at"}``) as stored.

    >>> r = {"seq": 7, "type": "kong", "seat": 1, "kind": "direct", "tile": "3p", "from": 2,
    ...      "round": 2, "at": "2026-11-30T20:02:22.123Z"}
    >>> record(r)
    b'[1796068942123,2,{"t":2,"s":1,"k":1,"i":"3p","f":2}]'
    >>> read_record(record(r), 7) == r
    True
    """
    return dumps([at_ms(rec["at"]), rec["round"], _pack_event(rec)])


def read_record(raw: bytes | str, seq: int, with_at: bool = True) -> dict:
    """The record stored at seq ``seq``; ``with_at=False`` leaves out ``at`` (a fold needs only the event)."""
    return _unpack(loads(raw), seq, with_at)


def read_records(raws: Iterable[bytes], first_seq: int, with_at: bool = True) -> list[dict]:
    """Records stored from seq ``first_seq`` on."""
    return [read_record(raw, seq, with_at) for seq, raw in enumerate(raws, first_seq)]


def summary(s: dict) -> bytes:
    """A round summary as stored: the :data:`SUMMARY` fields in order, then any others.

    >>> s = {"number": 3, "dealer": 0, "deltas": [-12, 36, -12, -12], "won": [], "left": [],
    ...      "ended_by": None, "next_dealer": 0, "first_seq": 9, "last_seq": 12}
    >>> summary(s)
    b'[0,[-12,36,-12,-12],[],[],null,0,9,12]'
    >>> read_summary(summary(s), 3) == s
    True
    """
    rest = {k: v for k, v in s.items() if k != "number" and k not in SUMMARY}
    if "facts" in rest:
        rest = {**{k: v for k, v in rest.items() if k != "facts"}, "F": _renamed(rest["facts"], FACTS)}
    return dumps([s[k] for k in SUMMARY] + ([rest] if rest else []))


def read_summary(raw: bytes | str, number: int) -> dict:
    """The summary of round ``number``."""
    entry = loads(raw)
    out = {"number": number, **dict(zip(SUMMARY, entry))}
    if len(entry) > len(SUMMARY):
        rest = entry[len(SUMMARY)]
        if "F" in rest:
            rest = {**{k: v for k, v in rest.items() if k != "F"}, "facts": _renamed(rest["F"], _LONG_FACTS)}
        out.update(rest)
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
    d = loads(raw)
    rnd = d.get("round")
    if isinstance(rnd, dict) and "ruleset" not in rnd:
        d["round"] = {"ruleset": d["ruleset"], **rnd}
    return d
