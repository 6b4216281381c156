"""How log records, round summaries and states are written in Redis (compactly), and read back.

* a **log record** is a JSON array ``[at, round, type, value, ...]``: ``at`` in ms
  since :data:`EPOCH_MS` (the ISO string it stands for has ms precision), ``round``
  as is, the event's ``type`` as a small integer (:data:`TYPES`), then the values of
  its fields in the order of its type's :data:`POSITIONS` (a kong's ``kind`` as a small
  integer), as far as the event lists them in that order, and an object of the fields
  that follow (short names, :data:`FIELDS`) when there are any; nested objects keep
  their members with short names.  An event whose ``type`` is not its first member is
  written as 1.2.0 wrote every record, ``[at, round, {event}]`` (``at`` in ms since the
  Unix epoch, every field with its short name, ``type`` and ``kind`` as small integers):
  both forms are read (a record of 1.2.0 is never rewritten).  Either way a record reads
  back as the event was given, its members in their order.  Records are events the
  rules core has checked (no member it does not know), so the short names never meet
  a member of the same name; ``seq`` is not written (the record at index *i* of the log
  is seq *i* + 1);
* a **round summary** is a JSON array of its fields in a fixed order
  (:data:`SUMMARY`, ``ended_by`` as the small integer of its event type, -1 for none),
  then its ``facts`` as one flat list (:func:`_pack_facts`: each seat's count that is
  not 0 as ``fact, seat, count``, each biggest win as ``[seat, seq, fan, points,
  *patterns]``), then an object of the other fields (the coins of a table with stakes,
  ``adjusted``) when there are any; ``number`` is not written (the summary at index *i*
  of the rounds list is round *i* + 1).  1.2.0 wrote ``ended_by`` as its name and the
  facts with short names (:data:`FACTS`) in that object: both forms are read, and a
  summary whose fields the compact form does not cover is written so;
* the **state** leaves out its round's copy of the ruleset when it is the
  table's (it always is).

"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timezone
from itertools import compress
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
# per event type: the fields whose values follow the type, in this order, in a stored record (never to be
# reordered: the records stored say which field a value is by its place; a new field goes at the end)
POSITIONS = {
    "round_start": ("dealer", "voids"), "round_end": (), "kong": ("seat", "kind", "tile", "from"),
    "peng": ("seat", "tile", "from"),
    "hu": ("from", "tile", "winners", "after_kong", "robbing_kong", "last_tile", "heavenly", "earthly"),
    "draw": ("seats",),
    "escape": ("seat", "last_four", "seats"), "buy_in": ("seat", "coins"), "void": ("target",),
    "penalty": ("seat", "kind"), "adjust": ("transfers", "note"), "correction": ("events", "dealer", "voids", "note"),
}
_POSITIONS = tuple(POSITIONS[name] for name in TYPES)
EPOCH_MS = 1_767_225_600_000
"""2026-01-01T00:00:00Z: a compact record's ``at`` counts from it (two digits fewer than from 1970)."""
_ENDED = {name: i for i, name in enumerate(TYPES)} | {None: -1}
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
    """The event of a record with short names (1.2.0's form, and the fields after a compact record's values)."""
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


def _compact(rec: dict, at: int) -> list | None:
    """A record as stored in the compact form (``at``: its ms since 1970), or None when its ``type`` is not its
    first field (or unknown)."""
    out: list[Any] = [at - EPOCH_MS, rec["round"]]
    places: tuple[str, ...] = ()
    i, rest = -1, None
    for k, v in rec.items():
        if k == "seq" or k == "round" or k == "at":
            continue
        if i < 0:  # the first field: the type
            if k != "type" or v not in _TYPE:
                return None
            code = _TYPE[v]
            out.append(code)
            places, i = _POSITIONS[code], 0
        elif rest is None and i < len(places) and k == places[i] and type(v) is not dict:
            if type(v) is list:
                v = _renamed(v, FIELDS)
            elif k == "kind" and v in _KIND:
                v = _KIND[v]
            out.append(v)
            i += 1
        else:
            if rest is None:
                rest = {}
            rest[FIELDS.get(k, k)] = _renamed(v, FIELDS) if type(v) in (dict, list) else v
    if i < 0:
        return None
    if rest:
        out.append(rest)
    return out


def _unpack(entry: list, seq: int, with_at: bool = True) -> dict:
    out: dict[str, Any] = {"seq": seq}
    kind = entry[2]
    if type(kind) is dict:  # 1.2.0's form: [at, round, {event}], at since 1970
        at, rnd, event = entry
        for k, v in event.items():
            name = _LONG.get(k, k)
            if name == "type" and isinstance(v, int) and not isinstance(v, bool):
                v = TYPES[v]
            elif name == "kind" and isinstance(v, int) and not isinstance(v, bool):
                v = KINDS[v]
            else:
                v = _renamed(v, _LONG)
            out[name] = v
    else:
        at, rnd = entry[0] + EPOCH_MS, entry[1]
        out["type"] = TYPES[kind]
        if len(entry) > 3:
            for name, v in zip(_POSITIONS[kind], entry[3:]):
                t = type(v)
                if t is dict:  # the fields after the values (the last member)
                    for k, w in v.items():
                        out[_LONG.get(k, k)] = _renamed(w, _LONG) if type(w) in (dict, list) else w
                    break
                if t is list:
                    v = _renamed(v, _LONG)
                elif t is int and name == "kind":
                    v = KINDS[v]
                out[name] = v
            else:
                if len(entry) > 3 + len(_POSITIONS[kind]):  # (every place taken, then the others)
                    for k, w in entry[-1].items():
                        out[_LONG.get(k, k)] = _renamed(w, _LONG) if type(w) in (dict, list) else w
    out["round"] = rnd
    if with_at:
        out["at"] = iso(at)
    return out


def record(rec: dict) -> bytes:
    """A log record (``{"seq", ...event, "round", "at"}``) as stored.

    >>> r = {"seq": 7, "type": "kong", "seat": 1, "kind": "direct", "tile": "3p", "from": 2,
    ...      "round": 2, "at": "2026-11-30T20:02:22.123Z"}
    >>> record(r)
    b'[28843342123,2,2,1,1,"3p",2]'
    >>> read_record(record(r), 7) == r
    True

    Fields out of their place follow in an object; an event whose ``type`` is not first is stored whole:

    >>> record({"type": "hu", "tile": "9p", "from": 2, "winners": [{"seat": 3, "fan": 1}], "round": 1,
    ...         "at": "2026-11-30T20:02:22.123Z"})
    b'[28843342123,1,4,{"i":"9p","f":2,"w":[{"s":3,"n":1}]}]'
    >>> record({"seat": 0, "type": "escape", "round": 1, "at": "2026-11-30T20:02:22.123Z"})
    b'[1796068942123,1,{"s":0,"t":6}]'
    """
    at = at_ms(rec["at"])
    compact = None if at is None else _compact(rec, at)
    if compact is None:
        return dumps([at, rec["round"], _pack_event(rec)])
    return dumps(compact)


def read_record(raw: bytes | str, seq: int, with_at: bool = True) -> dict:
    """The record stored at seq ``seq`` (either form); ``with_at=False`` leaves out ``at`` (a fold needs only
    the event).

    >>> read_record(b'[1796068942123,2,{"t":2,"s":1,"k":1,"i":"3p","f":2}]', 7)  # as 1.2.0 wrote it
    {'seq': 7, 'type': 'kong', 'seat': 1, 'kind': 'direct', 'tile': '3p', 'from': 2, 'round': 2, \
'at': '2026-11-30T20:02:22.123Z'}
    """
    return _unpack(loads(raw), seq, with_at)


def read_records(raws: Iterable[bytes], first_seq: int, with_at: bool = True) -> list[dict]:
    """Records stored from seq ``first_seq`` on."""
    return [read_record(raw, seq, with_at) for seq, raw in enumerate(raws, first_seq)]


FACT_COUNTS = ("wins", "zimo", "dianpao_paid", "kongs_direct", "kongs_added", "kongs_concealed", "huazhu_paid",
               "dajiao_paid", "escapes", "penalties_paid")
"""A summary's per-seat counts in its ``facts``, numbered by their place here (never to be reordered)."""
_FACT_COUNT = {name: i for i, name in enumerate(FACT_COUNTS)}
_WIN = ("seq", "fan", "patterns", "points")


def _pack_facts(facts: Any, seats: int) -> list | None:
    """A summary's ``facts`` as one flat list: ``fact, seat, count`` for each count that is not 0, then
    ``[seat, seq, fan, points, *patterns]`` for each seat's biggest win; None for facts of another shape
    (stored as 1.2.0 stored them).

    >>> _pack_facts({"kongs_direct": [0, 1, 0, 0], "biggest_win": [None, None, {"seq": 9, "fan": 2,
    ...             "patterns": ["qingyise"], "points": 24}, None]}, 4)
    [3, 1, 1, [2, 9, 2, 24, 'qingyise']]
    """
    if not isinstance(facts, dict):
        return None
    out: list[Any] = []
    wins, last = None, -1
    for name, counts in facts.items():
        if wins is not None:  # (the biggest wins come last)
            return None
        if name == "biggest_win":
            wins = counts
            continue
        fact = _FACT_COUNT.get(name, -1)
        if (fact <= last or not isinstance(counts, list) or len(counts) != seats or not any(counts)
                or not all(type(c) is int for c in counts)):  # (members in another order: as 1.2.0 stored them)
            return None
        last = fact
        out.extend(x for seat, c in enumerate(counts) if c for x in (fact, seat, c))
    if wins is not None:
        if not isinstance(wins, list) or len(wins) != seats or all(w is None for w in wins):
            return None
        for seat, w in enumerate(wins):
            if w is None:
                continue
            if (not isinstance(w, dict) or tuple(w) != _WIN or not isinstance(w["patterns"], list)
                    or not all(isinstance(p, str) for p in w["patterns"])):
                return None
            out.append([seat, w["seq"], w["fan"], w["points"], *w["patterns"]])
    return out


def _unpack_facts(flat: list, seats: int) -> dict:
    counts: dict[int, list[int]] = {}
    wins: list[Any] = []
    i = 0
    while i < len(flat):
        item = flat[i]
        if isinstance(item, list):
            if not wins:
                wins = [None] * seats
            wins[item[0]] = {"seq": item[1], "fan": item[2], "patterns": item[4:], "points": item[3]}
            i += 1
        else:
            counts.setdefault(item, [0] * seats)[flat[i + 1]] = flat[i + 2]
            i += 3
    out: dict[str, Any] = {FACT_COUNTS[f]: counts[f] for f in sorted(counts)}
    if wins:
        out["biggest_win"] = wins
    return out


def summary(s: dict) -> bytes:
    """A round summary as stored: the :data:`SUMMARY` fields in order, its facts, then any others.

    >>> s = {"number": 3, "dealer": 0, "deltas": [-12, 36, -12, -12], "won": [], "left": [],
    ...      "ended_by": "round_end", "next_dealer": 0, "first_seq": 9, "last_seq": 12,
    ...      "facts": {"kongs_direct": [0, 1, 0, 0], "kongs_concealed": [1, 0, 0, 0]}}
    >>> summary(s)
    b'[0,[-12,36,-12,-12],[],[],1,0,9,12,[3,1,1,5,0,1]]'
    >>> read_summary(summary(s), 3) == s
    True
    """
    rest = {k: v for k, v in s.items() if k != "number" and k != "facts" and k not in SUMMARY}
    ended = s["ended_by"]
    facts = (_pack_facts(s["facts"], len(s["deltas"])) if "facts" in s and ended in _ENDED
             and isinstance(s["deltas"], list) else None)
    if facts is None:  # (a shape the compact form does not cover: as 1.2.0 stored it)
        if "facts" in s:
            rest["F"] = _renamed(s["facts"], FACTS)
        return dumps([s[k] for k in SUMMARY] + ([rest] if rest else []))
    out = [s[k] for k in SUMMARY]
    out[4] = _ENDED[ended]
    if facts or rest:
        out.append(facts)
    if rest:
        out.append(rest)
    return dumps(out)


def read_summary(raw: bytes | str, number: int) -> dict:
    """The summary of round ``number`` (either form).

    >>> read_summary(b'[0,[36,-12,-12,-12],[],[],"round_end",0,1,4,{"F":{"kd":[0,1,0,0]}}]', 1)  # 1.2.0's
    {'number': 1, 'dealer': 0, 'deltas': [36, -12, -12, -12], 'won': [], 'left': [], 'ended_by': 'round_end', \
'next_dealer': 0, 'first_seq': 1, 'last_seq': 4, 'facts': {'kongs_direct': [0, 1, 0, 0]}}
    """
    entry = loads(raw)
    out = {"number": number, **dict(zip(SUMMARY, entry))}
    ended = entry[4]
    if type(ended) is int:  # the compact form
        out["ended_by"] = None if ended < 0 else TYPES[ended]
        if len(entry) > len(SUMMARY) + 1:
            out.update(entry[len(SUMMARY) + 1])
        out["facts"] = _unpack_facts(entry[len(SUMMARY)], len(entry[1])) if len(entry) > len(SUMMARY) else {}
        return out
    if len(entry) > len(SUMMARY):
        rest = entry[len(SUMMARY)]
        if "F" in rest:
            rest = {**{k: v for k, v in rest.items() if k != "F"}, "facts": _renamed(rest["F"], _LONG_FACTS)}
        out.update(rest)
    return out


def read_summaries(raws: Iterable[bytes], first_number: int) -> list[dict]:
    return [read_summary(raw, n) for n, raw in enumerate(raws, first_number)]


RULESET_FIELDS = (
    "preset", "mode", "fan_table", "scoring", "base", "cap", "zimo", "direct_kong", "added_kong", "concealed_kong",
    "dianganghua", "huazhu", "huazhu_pays_winners", "dajiao", "escape", "winner_leaves", "next_dealer", "haidi",
    "jingoudiao", "menqing", "zhongzhang", "jiaxinwu", "kaertiao", "yitiaolong", "players", "dianpao_pinghu",
    "xueliu_dajiao_winners", "zhahu_fan")
"""A compact state's ruleset: its values in this order (never to be reordered: a new field goes at the end)."""
_KONG_RECORD = ("seat", "kind", "tile", "from", "paid", "void", "transferred")
_LAST = ("type", "index", "seat", "kind", "tile", "from")
_TILES = 27
_ALL_TILES = range(_TILES)
COMPACT = "form"
"""The member that marks a compact state (its value: 2)."""


def _sparse(counts: Any) -> list | None:
    """A vector of the 27 tiles' counts (integers) as ``tile, count, ...`` for the counts that are not 0 (None:
    no such vector)."""
    if type(counts) is not list or len(counts) != _TILES:
        return None
    out: list[int] = []
    if any(counts):
        for tile in compress(_ALL_TILES, counts):  # (those whose count is not 0)
            out += (tile, counts[tile])
    return out


def _dense(pairs: list) -> list[int]:
    counts = [0] * _TILES
    if pairs:
        for tile, c in zip(pairs[::2], pairs[1::2]):
            counts[tile] = c
    return counts


def _seats(vectors: Any) -> list | None:
    """Each seat's tile counts sparse (:func:`_sparse`); None: no such list."""
    if type(vectors) is not list:
        return None
    if not any(map(any, vectors)):  # (all 0: the common case, at C speed)
        return [[] if type(v) is list and len(v) == _TILES else None for v in vectors]
    return [_sparse(v) for v in vectors]


def _compact_state(d: dict) -> dict | None:
    """A state's dict (its round's ruleset left out) in the compact form, or None for a shape it does not
    cover (stored as 1.2.0 stored it): the ruleset as its values (:data:`RULESET_FIELDS`), the round's tile
    counts sparse (:func:`_sparse`), its kongs and its last event as their values."""
    ruleset = d.get("ruleset")
    if type(ruleset) is not dict or COMPACT in d or tuple(ruleset) != RULESET_FIELDS[:len(ruleset)]:
        return None
    out = d.copy()
    out["ruleset"] = list(ruleset.values())
    out[COMPACT] = 2
    rnd = d.get("round")
    if rnd is None:
        return out
    if type(rnd) is not dict or "ruleset" in rnd:
        return None
    r = rnd.copy()
    melds, hand_melds, concealed = _seats(r.get("melds")), _seats(r.get("hand_melds")), _sparse(r.get("concealed"))
    kongs, last = r.get("kongs"), r.get("last")
    if (melds is None or None in melds or hand_melds is None or None in hand_melds or concealed is None
            or type(kongs) is not dict
            or not all(type(k) is dict and tuple(k) == _KONG_RECORD for k in kongs.values())
            or not (last is None or type(last) is dict and tuple(last) == _LAST)):
        return None
    r["melds"], r["hand_melds"], r["concealed"] = melds, hand_melds, concealed
    if kongs:
        r["kongs"] = {seq: list(k.values()) for seq, k in kongs.items()}
    if last is not None:
        r["last"] = list(last.values())
    out["round"] = r
    return out


def state(d: dict) -> bytes:
    """A state's dict as stored: without its round's copy of the ruleset when it is the table's, and in the
    compact form (:func:`_compact_state`) when it fits.

    >>> from service.rules.table import TableState, fold
    >>> st = fold(["a", "b", "c", "d"], "xuezhan", 0, [{"seq": 1, "type": "round_start"}, {"seq": 2,
    ...           "type": "kong", "seat": 1, "kind": "direct", "tile": "3p", "from": 2}])[0]
    >>> len(state(st.to_dict())) < len(dumps(st.to_dict())) / 2
    True
    >>> read_state(state(st.to_dict())) == loads(dumps(st.to_dict()))
    True
    """
    rnd = d.get("round")
    if isinstance(rnd, dict) and rnd.get("ruleset") == d.get("ruleset") and "ruleset" in rnd:
        d = {**d, "round": {k: v for k, v in rnd.items() if k != "ruleset"}}
    return dumps(_compact_state(d) or d)


def read_state(raw: bytes | str) -> dict:
    """A state's dict as :func:`state` stored it (either form)."""
    d = loads(raw)
    if d.get(COMPACT) == 2:
        del d[COMPACT]
        d["ruleset"] = dict(zip(RULESET_FIELDS, d["ruleset"]))
        r = d["round"]
        if r is not None:
            r["melds"] = [_dense(v) for v in r["melds"]]
            r["hand_melds"] = [_dense(v) for v in r["hand_melds"]]
            r["concealed"] = _dense(r["concealed"])
            r["kongs"] = {seq: dict(zip(_KONG_RECORD, k)) for seq, k in r["kongs"].items()}
            if r["last"] is not None:
                r["last"] = dict(zip(_LAST, r["last"]))
    rnd = d.get("round")
    if isinstance(rnd, dict) and "ruleset" not in rnd:
        d["round"] = {"ruleset": d["ruleset"], **rnd}
    return d
