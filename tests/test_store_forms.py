"""The stored forms (service/store/codec.py): a table stored by 1.2.0 reads as the same table stored now,
and goes on (appends, a correction, a void) with the new code; every form reads back as it was written."""

from __future__ import annotations

import pytest

from service.store import codec, keys
from service.store.table_store import TableStore

PLAYERS = ["a", "b", "c", "d"]
EVENTS: list[dict] = [{"type": "round_start"}, {"type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"},
          {"type": "kong", "seat": 1, "kind": "direct", "tile": "1p", "from": 2},
          {"type": "hu", "from": 2, "tile": "9p", "winners": [{"seat": 3, "fan": 2}]},
          {"type": "round_end"}, {"type": "round_start", "dealer": 3}]

# a table of those events exactly as 1.2.0 stored it (its meta hash is unchanged since)
V120_LOG = [b'[1796514457658,1,{"t":0}]',
            b'[1796514457674,1,{"t":2,"s":0,"k":0,"i":"1m"}]',
            b'[1796514457686,1,{"t":2,"s":1,"k":1,"i":"1p","f":2}]',
            b'[1796514457690,1,{"t":4,"f":2,"i":"9p","w":[{"s":3,"n":2}]}]',
            b'[1796514457698,1,{"t":1}]',
            b'[1796514457706,2,{"t":0,"d":3}]']
V120_AT = ["2026-12-05T23:47:37.658Z", "2026-12-05T23:47:37.674Z", "2026-12-05T23:47:37.686Z",
           "2026-12-05T23:47:37.690Z", "2026-12-05T23:47:37.698Z", "2026-12-05T23:47:37.706Z"]
V120_ROUNDS = [b'[0,[36,-6,-30,0],[3],[],"round_end",3,1,5,{"F":{"w":[0,0,0,1],"d":[0,0,1,0],"kd":[0,1,0,0],'
               b'"kc":[1,0,0,0],"b":[null,null,null,{"s":4,"n":2,"p":[],"v":12}]}}]']
_ZEROS = "[" + ",".join(["0"] * 27) + "]"
V120_STATE = (
    '{"players":["a","b","c","d"],"ruleset":{"preset":"xuezhan","mode":"xuezhan","fan_table":"qq","scoring":'
    '"exponential","base":6,"cap":null,"zimo":"none","direct_kong":1,"added_kong":1,"concealed_kong":2,'
    '"dianganghua":"self_draw","huazhu":16,"huazhu_pays_winners":true,"dajiao":"max","escape":16,'
    '"winner_leaves":"deferred","next_dealer":"winner","haidi":false,"jingoudiao":false,"menqing":false,'
    '"zhongzhang":false,"jiaxinwu":false,"kaertiao":false,"yitiaolong":false,"players":4,"dianpao_pinghu":true,'
    '"xueliu_dajiao_winners":false,"zhahu_fan":null},"first_dealer":0,"dealer":3,"version":6,"round_meta":'
    '{"number":2,"start":6,"ended_by":null},"round":{"dealer":3,"voids":[null,null,null,null],"n":0,"won":[],'
    '"left":[],"ended":false,"first_win":null,"kongs":{},"melds":[' + ",".join([_ZEROS] * 4) + '],"logged":'
    '[false,false,false,false],"pengs":[[],[],[],[]],"pengs_logged":[false,false,false,false],"any_meld":false,'
    '"hand_melds":[' + ",".join([_ZEROS] * 4) + '],"concealed":' + _ZEROS + ',"kept":[null,null,null,null],'
    '"xianggong":[],"last":null,"transfers":[]},"voided":[],"base":[36,-6,-30,0],"stakes":null,"coins":null,'
    '"round_facts":{}}').encode()


def _tables(redis_client) -> tuple[TableStore, str, str]:
    """A table written by this code and one of the same events stored as 1.2.0 stored them."""
    store = TableStore(redis_client)
    now, old = store.create(PLAYERS, "xuezhan").id, store.create(PLAYERS, "xuezhan").id
    for event in EVENTS:
        store.append(now, event)
    redis_client.rpush(keys.log(old), *V120_LOG)
    redis_client.rpush(keys.rounds(old), *V120_ROUNDS)
    redis_client.set(keys.state(old), V120_STATE)
    return TableStore(redis_client), now, old  # (a store that keeps no state of either)


def _without_at(events: list[dict]) -> list[dict]:
    return [{k: v for k, v in e.items() if k != "at"} for e in events]


def test_a_table_stored_by_1_2_0_reads_as_one_stored_now(redis_client):
    store, now, old = _tables(redis_client)
    assert redis_client.lrange(keys.log(now), 0, -1) != V120_LOG  # (the forms differ)
    assert redis_client.lrange(keys.rounds(now), 0, -1) != V120_ROUNDS
    events = store.events(old)["events"]
    assert [e["at"] for e in events] == V120_AT
    assert _without_at(events) == _without_at(store.events(now)["events"])
    assert events[3] == {"seq": 4, "type": "hu", "from": 2, "tile": "9p", "winners": [{"seat": 3, "fan": 2}],
                         "round": 1, "at": V120_AT[3], "voided": False}
    assert {**store.get(old), "id": None} == {**store.get(now), "id": None}
    assert store.get(old)["rounds"] == [{"number": 1, "dealer": 0, "deltas": [36, -6, -30, 0], "won": [3],
                                         "left": [], "ended_by": "round_end", "next_dealer": 3, "first_seq": 1,
                                         "last_seq": 5}]
    assert store.round(old, 1) == store.round(now, 1)
    assert store.rounds(old) == store.rounds(now)
    assert {**store.summary(old), "id": None} == {**store.summary(now), "id": None}
    assert store.records(old, 1, 6) == [{**e, "seq": i, "round": 2 if i == 6 else 1, "at": V120_AT[i - 1]}
                                        for i, e in enumerate(EVENTS, 1)]
    assert store.check(old)["ok"]  # (a fold of its log is its state and its summaries)


def test_a_table_stored_by_1_2_0_goes_on(redis_client):
    store, now, old = _tables(redis_client)
    for tid in (now, old):
        store.append(tid, {"type": "kong", "seat": 2, "kind": "concealed", "tile": "4s"})
        store.append(tid, {"type": "round_end"})
        # a correction of round 1 rewrites its summary (and those after it) in the new form
        store.correct(tid, 1, {"events": EVENTS[1:3]})
        store.void(tid, 8)
        store.void(tid, 9)  # (the correction voided: round 1 as it was)
    assert store.get(old)["balances"] == store.get(now)["balances"]
    assert _without_at(store.events(old)["events"]) == _without_at(store.events(now)["events"])
    assert store.rounds(old) == store.rounds(now)
    assert {**store.summary(old), "id": None} == {**store.summary(now), "id": None}
    assert store.check(old)["ok"] and store.check(now)["ok"]
    assert redis_client.lrange(keys.log(old), 0, 5) == V120_LOG  # (a record is never rewritten)


@pytest.mark.parametrize("event", [
    {"type": "round_start"},
    {"type": "round_start", "dealer": 2, "voids": ["m", "p", "s", None]},
    {"type": "kong", "seat": 3, "kind": "added", "tile": "7s"},
    {"type": "kong", "kind": "added", "seat": 3, "tile": "7s"},  # (out of the usual order)
    {"type": "peng", "seat": 0, "tile": "2m", "from": 3},
    {"type": "hu", "from": None, "tile": "5p", "winners": [{"seat": 0, "fan": 2, "patterns": ["qingyise"]}],
     "after_kong": True},
    {"type": "hu", "tile": "5p", "from": 1, "winners": [{"seat": 0, "hand": {"tiles": "123m", "melds": []}}]},
    {"type": "hu", "from": 1, "tile": "5p", "winners": [{"seat": 0, "fan": 1}], "last_tile": True, "heavenly": False},
    {"type": "draw", "seats": [{"seat": 0, "status": "ting", "dajiao_fan": 2}, {"seat": 1, "status": "huazhu"}]},
    {"type": "escape", "seat": 1, "seats": [{"seat": 0, "status": "ting"}]},
    {"type": "buy_in", "seat": 2, "coins": 10 ** 15},
    {"type": "void", "target": 3},
    {"type": "penalty", "seat": 1, "kind": "zhahu"},
    {"type": "adjust", "transfers": [{"from": 0, "to": 1, "points": 5}], "note": "late"},
    {"type": "correction", "events": [{"type": "kong", "seat": 0, "kind": "direct", "tile": "1p", "from": 2}],
     "dealer": 1, "note": "typo"},
    {"seat": 1, "type": "escape"},  # (type not first: stored as 1.2.0 stored every record)
])
def test_every_record_reads_back_as_written(event):
    rec = {"seq": 9, **event, "round": None if event["type"] == "buy_in" else 4, "at": "2026-11-30T20:02:22.123Z"}
    stored = codec.record(rec)
    back = codec.read_record(stored, 9)
    assert back == rec and list(back) == list(rec)  # (the members in their order)
    assert codec.read_record(stored, 9, with_at=False) == {k: v for k, v in rec.items() if k != "at"}


@pytest.mark.parametrize("extra", [
    {"facts": {}},
    {"facts": {"wins": [0, 1, 0, 0], "zimo": [0, 1, 0, 0], "biggest_win": [None, {"seq": 7, "fan": 3,
                                                                                   "patterns": ["a", "b"],
                                                                                   "points": 48}, None, None]}},
    {"bankrolls": [100, 100, 100, 100], "coins_delta": [1, -1, 0, 0], "fees": [0, 0, 0, 0],
     "facts": {"escapes": [0, 0, 2, 0]}, "adjusted": [5, -5, 0, 0]},
    {"adjusted": [5, -5, 0, 0]},  # (no facts: a summary stored before they were kept)
    {"facts": {"zimo": [0, 1, 0, 0], "wins": [0, 1, 0, 0]}},  # (facts in another order)
])
@pytest.mark.parametrize("ended_by", ["round_end", "hu", "draw", None])
def test_every_summary_reads_back_as_written(extra, ended_by):
    s = {"number": 12, "dealer": 1, "deltas": [-12, 36, -12, -12], "won": [1], "left": [], "ended_by": ended_by,
         "next_dealer": 1, "first_seq": 40, "last_seq": 52, **extra}
    assert codec.read_summary(codec.summary(s), 12) == s


def test_the_compact_ruleset_names_every_ruleset_field_in_its_order():
    """A new ruleset field goes at the end of codec.RULESET_FIELDS (a state whose ruleset has other fields, or
    another order, is stored as 1.2.0 stored it: nothing is misread, but nothing is saved either)."""
    from service.rules.ruleset import Ruleset

    assert tuple(Ruleset.from_spec("xuezhan").as_dict()) == codec.RULESET_FIELDS


@pytest.mark.parametrize("ruleset", ["xuezhan", "xueliu", {"preset": "xuezhan", "players": 3}])
def test_every_state_reads_back_as_folded(ruleset):
    from service.rules.table import fold

    players = 3 if isinstance(ruleset, dict) else 4
    log = [{"type": "round_start"}, {"type": "peng", "seat": 0, "tile": "2p", "from": 1},
           {"type": "kong", "seat": 0, "kind": "added", "tile": "2p"},
           {"type": "hu", "from": None, "tile": "5p", "winners": [{"seat": 1, "fan": 2}]}]
    for n in range(len(log) + 1):
        st = fold(PLAYERS[:players], ruleset, 0, [{"seq": i, **e} for i, e in enumerate(log[:n], 1)])[0]
        d = codec.loads(codec.dumps(st.to_dict()))
        stored = codec.state(st.to_dict())
        assert codec.read_state(stored) == d
        assert b'"form":2' in stored and len(stored) < len(codec.dumps(d)) * 0.6
