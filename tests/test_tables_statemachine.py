"""A Hypothesis state machine over the live-table HTTP API (Flask test client, real Redis).

The test keeps no shadow state of its own that could drift: after every step
it pages through the table's log over HTTP and replays it independently —
round by round through :func:`service.rules.settle.settle`, with its own
reading of docs/rules.md#s10 for round boundaries and dealers — and checks that the
table's version, balances, dealer, current round and round summaries are
exactly that replay.  Each write's answer is predicted the same way: an event
is accepted iff the replay of the log plus that event holds, and a rejection
carries the code the replay fails with.
"""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from werkzeug.test import TestResponse

from service.api import create_app
from service.config import NO_LIMITS
from service.rules.errors import EventError
from service.rules.settle import settle
from service.rules.table import fold

pytestmark = pytest.mark.slow  # (long: generated clients, fuzzing or a state machine)

PLAYERS = ["东", "南", "西", "北"]
RULE_CODES = {
    "no_round", "round_ended", "round_in_progress", "bad_event", "bad_hand", "seat_out_of_range",
    "seat_not_in_round", "self_discard", "duplicate_winner", "self_draw_one_winner", "not_a_win",
    "win_tile_not_in_hand", "contradictory_flags", "kong_required", "no_peng", "too_many_copies", "bad_seats",
}


# -- the independent replay ------------------------------------------------------------------
MALFORMED = {"bad_event", "seat_out_of_range", "bad_hand"}


class Invalid(Exception):
    def __init__(self, code: str, seq: int) -> None:
        super().__init__(f"{code} at {seq}")
        self.code, self.seq = code, seq


def body_of(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in ("seq", "at", "round", "voided")}


def dealer_after(rnd: dict, rule: str) -> int:
    """docs/rules.md#s10: the first win decides the next dealer; no win: the dealer stays."""
    hu = next((e for e in rnd["events"] if e["type"] == "hu"), None)
    if hu is None:
        return rnd["dealer"]
    seats, frm = [w["seat"] for w in hu["winners"]], hu.get("from")
    if rule == "discarder":
        return seats[0] if frm is None else frm
    return seats[0] if len(seats) == 1 else frm


def replay(records: list[dict], ruleset: dict, first_dealer: int) -> dict:
    """The table as the log defines it; raises :class:`Invalid` for a record that cannot stand."""
    voided = {r["target"] for r in records if r["type"] == "void"}
    rounds: list[dict] = []
    dealer = first_dealer
    for rec in records:
        if rec["type"] == "void" or rec["seq"] in voided:
            continue
        seq, ev = rec["seq"], body_of(rec)
        cur = rounds[-1] if rounds else None
        if ev["type"] == "round_start":
            if cur is not None and not cur["ended"]:
                raise Invalid("round_in_progress", seq)
            d = ev.get("dealer")
            rounds.append({"dealer": dealer if d is None else d, "voids": ev.get("voids") or [None] * 4,
                           "events": [], "ended": False, "ended_by": None, "deltas": [0, 0, 0, 0],
                           "won": [], "left": [], "first_seq": seq, "last_seq": None})
            continue
        if cur is None:
            raise Invalid("no_round", seq)
        if cur["ended"]:
            raise Invalid("round_ended", seq)
        if ev["type"] == "round_end":
            cur["ended"], cur["ended_by"] = True, "round_end"
        else:
            try:
                s = settle(cur["events"] + [ev], dealer=cur["dealer"], ruleset=ruleset, voids=cur["voids"])
            except EventError as exc:
                raise Invalid(exc.code, seq) from None
            cur["events"].append(ev)
            cur["deltas"], cur["won"] = list(s.deltas), list(s.winners)
            if ev["type"] == "escape":
                cur["left"].append(ev["seat"])
            if s.ended:
                cur["ended"], cur["ended_by"] = True, ev["type"]
                assert s.next_dealer == dealer_after(cur, ruleset["next_dealer"])
        if cur["ended"]:
            cur["last_seq"] = seq
            cur["next_dealer"] = dealer = dealer_after(cur, ruleset["next_dealer"])
    balances = [sum(r["deltas"][i] for r in rounds) for i in range(4)]
    return {"rounds": rounds, "balances": balances, "dealer": dealer}


def active_seats(model: dict) -> list[int]:
    cur = model["rounds"][-1] if model["rounds"] else None
    if cur is None or cur["ended"]:
        return [0, 1, 2, 3]
    return [s for s in range(4) if s not in cur["won"] and s not in cur["left"]]


# -- events ----------------------------------------------------------------------------------
seats = st.integers(0, 3)
tiles = st.sampled_from(["1m", "5m", "9m", "3p", "5p", "7s", "9s"])
fans = st.integers(1, 4)
HANDS = [({"tiles": "23445677p345789s"}, "5p"), ({"tiles": "11333222456999s"}, "4s"),
         ({"tiles": "12345678p123456s"}, "1p"), ({"tiles": "23445677p345789s", "void": "p"}, "4s")]


round_start = st.fixed_dictionaries(
    {"type": st.just("round_start")},
    optional={"dealer": st.none() | seats,
              "voids": st.lists(st.sampled_from([None, "m", "p", "s"]), min_size=4, max_size=4)})
round_end = st.just({"type": "round_end"})
peng = st.fixed_dictionaries({"type": st.just("peng"), "seat": seats, "tile": tiles, "from": seats})
kong = st.one_of(
    st.fixed_dictionaries({"type": st.just("kong"), "seat": seats, "kind": st.just("direct"), "tile": tiles,
                           "from": seats}),
    st.fixed_dictionaries({"type": st.just("kong"), "seat": seats, "kind": st.sampled_from(["added", "concealed"]),
                           "tile": tiles}),
)
winner_fan = st.fixed_dictionaries({"seat": seats, "fan": fans})
hu_fan = st.fixed_dictionaries(
    {"type": st.just("hu"), "from": st.none() | seats, "tile": tiles,
     "winners": st.lists(winner_fan, min_size=1, max_size=3)},
    optional={"after_kong": st.booleans(), "robbing_kong": st.booleans(), "last_tile": st.booleans()},
)
hu_hand = st.builds(
    lambda ht, seat, frm: {"type": "hu", "from": frm, "tile": ht[1], "winners": [{"seat": seat, "hand": ht[0]}]},
    st.sampled_from(HANDS), seats, st.none() | seats)


def report(seat: int):
    return st.one_of(
        st.just({"seat": seat, "status": "not_ting"}),
        st.just({"seat": seat, "status": "huazhu"}),
        fans.map(lambda f: {"seat": seat, "status": "ting", "dajiao_fan": f}),
    )


def reports(listed: list[int]):
    return st.tuples(*[report(s) for s in listed]).map(list) if listed else st.just([])


draw_random = st.lists(seats, max_size=4).flatmap(lambda ss: reports(ss)).map(
    lambda rs: {"type": "draw", "seats": rs})
escape = st.builds(lambda seat, last_four, rs: {"type": "escape", "seat": seat, "last_four": last_four,
                                                  **({"seats": rs} if rs is not None else {})},
                   seats, st.booleans(), st.none() | st.lists(seats, max_size=3, unique=True).flatmap(reports))
SCHEMA_INVALID = [
    {"type": "kong", "seat": 7, "kind": "concealed", "tile": "5m"},
    {"type": "peng", "seat": 0, "tile": "5m"},
    {"type": "round_start", "dealer": 9},
    {"type": "hu", "from": 1, "tile": "5p", "winners": []},
    {"type": "draw", "seats": [{"seat": 0, "status": "ting"}]},
]
any_event = st.one_of(round_start, round_end, peng, kong, kong, hu_fan, hu_hand, draw_random, escape)


# A "likely" event is drawn as a template the same way whatever the table's state (so that a
# failing run replays the same draws) and only then fitted to the seats still in the round.
template = st.tuples(st.integers(0, 11), st.integers(0, 3), st.integers(0, 3), tiles, fans,
                     st.lists(st.integers(0, 2), min_size=4, max_size=4), round_start)


def likely_event(model: dict, tpl) -> dict:
    """An event that has a fair chance to be accepted in the table as it stands."""
    kind, i, j, tile, fan, statuses, start = tpl
    cur = model["rounds"][-1] if model["rounds"] else None
    if cur is None or cur["ended"]:
        if kind < 9:
            return start
        return {"type": "kong", "seat": i, "kind": "concealed", "tile": tile} if kind < 11 else {"type": "round_end"}
    act = active_seats(model)
    a = act[i % len(act)]
    others = [s for s in act if s != a]
    b = others[j % len(others)]
    status = [{"status": "not_ting"}, {"status": "huazhu"}, {"status": "ting", "dajiao_fan": fan}]
    return [
        {"type": "kong", "seat": a, "kind": "concealed", "tile": tile},
        {"type": "kong", "seat": a, "kind": "direct", "tile": tile, "from": b},
        {"type": "kong", "seat": a, "kind": "added", "tile": tile},
        {"type": "peng", "seat": a, "tile": tile, "from": b},
        {"type": "peng", "seat": a, "tile": tile, "from": b},
        {"type": "hu", "from": b, "tile": tile, "winners": [{"seat": a, "fan": fan}]},
        {"type": "hu", "from": b, "tile": tile,  # 一炮多响 when three are still in
         "winners": [{"seat": s, "fan": fan} for s in act if s != b][:3]},
        {"type": "hu", "from": None, "tile": tile, "winners": [{"seat": a, "fan": fan}]},
        {"type": "draw", "seats": [{"seat": s, **status[statuses[s]]} for s in act]},
        {"type": "escape", "seat": a},
        {"type": "round_end"},
        {"type": "round_end"},
    ][kind]


# -- the machine -------------------------------------------------------------------------------
class TableMachine(RuleBasedStateMachine):
    app = None  # set by the test

    def __init__(self) -> None:
        super().__init__()
        self.t: dict | None = None  # the table's creation answer
        # (url, body, key, response) of accepted keyed writes
        self.keyed: list[tuple[str, dict | None, str, TestResponse]] = []
        self.n = 0

    @property
    def table(self) -> dict:
        assert self.t is not None, "no table yet (the machine's initialize makes it)"
        return self.t

    # -- plumbing
    @property
    def auth(self) -> dict:
        return {"Authorization": "Bearer " + self.table["token"]}

    def url(self, suffix: str = "") -> str:
        return f"/v1/tables/{self.table['id']}{suffix}"

    def fetch(self) -> list[dict]:
        out, after = [], 0
        while True:
            r = self.client.get(self.url(f"/events?after={after}&limit=4"), headers=self.auth)
            assert r.status_code == 200, r.get_data(as_text=True)
            page = r.get_json()
            out += page["events"]
            if page["next"] is None:
                return out
            after = page["next"]

    def model(self, records: list[dict]) -> dict:
        return replay(records, self.table["ruleset"], self.first_dealer)

    def predict(self, records: list[dict], record: dict):
        try:
            return self.model(records + [record]), None
        except Invalid as exc:
            return None, exc

    def key(self) -> str:
        self.n += 1
        return f"key-{self.n}"

    def write(self, url, body, headers, client=None):
        c = client or self.client
        h = {**self.auth, **headers}
        return c.post(url, json=body, headers=h) if body is not None else c.post(url, headers=h)

    def unchanged(self, records: list[dict]) -> None:
        assert self.fetch() == records

    # -- setup
    @initialize(preset=st.sampled_from(["xuezhan", "normal", "chengdu-points"]), dealer=seats,
                start=st.sampled_from([True, True, True, False]))
    def new_table(self, preset, dealer, start):
        self.client = self.app.test_client()
        r = self.client.post("/v1/tables", json={"players": PLAYERS, "ruleset": preset, "dealer": dealer})
        assert r.status_code == 201, r.get_data(as_text=True)
        self.t, self.first_dealer = r.get_json(), dealer
        if start:
            r = self.write(self.url("/events"), {"type": "round_start"}, {})
            assert r.status_code == 201 and r.get_json()["round"]["dealer"] == dealer

    # -- appends
    def _append(self, event, keyed, conditional, schema_ok=True):
        records = self.fetch()
        version = len(records)
        headers = {}
        if keyed:
            headers["Idempotency-Key"] = self.key()
        if conditional:
            headers["If-Match"] = f'"{version}"'
        r = self.write(self.url("/events"), event, headers)
        if not schema_ok:  # malformed: the rules' 422, naming the member and the seq it would have had
            body = r.get_json()
            assert r.status_code == 422 and body["code"] in MALFORMED, r.get_data(as_text=True)
            assert body["errors"] and body["event"] == version + 1
            self.unchanged(records)
            return
        model, err = self.predict(records, {"seq": version + 1, **event})
        event_label = f"append {event['type']}: " + ("201" if err is None else err.code)
        hypothesis_event(event_label)
        if err is not None:
            assert r.status_code == 422, (event, err.code, r.get_data(as_text=True))
            body = r.get_json()
            assert body["code"] == err.code and body["event"] == version + 1, (event, body)
            self.unchanged(records)
            return
        assert r.status_code == 201, (event, r.get_data(as_text=True))
        body = r.get_json()
        assert body["seq"] == body["version"] == version + 1 and r.headers["ETag"] == f'"{version + 1}"'
        assert body["balances"] == model["balances"]
        assert all(t["event"] == version + 1 for t in body["transfers"])
        got = self.client.get(self.url(), headers=self.auth).get_json()
        assert got["round"] == body["round"]
        if keyed:
            self.keyed.append((self.url("/events"), event, headers["Idempotency-Key"], r))

    @rule(data=st.data(), keyed=st.booleans(), conditional=st.booleans())
    def append_any(self, data, keyed, conditional):
        self._append(data.draw(any_event, label="event"), keyed, conditional)

    def _append_likely(self, data, keyed, conditional):
        tpl = data.draw(template, label="template")
        self._append(likely_event(self.model(self.fetch()), tpl), keyed, conditional)

    # (twice, so that rounds get played rather than mostly refused)
    @rule(data=st.data(), keyed=st.booleans(), conditional=st.booleans())
    def append_likely(self, data, keyed, conditional):
        self._append_likely(data, keyed, conditional)

    @rule(data=st.data(), keyed=st.booleans(), conditional=st.booleans())
    def append_likely_too(self, data, keyed, conditional):
        self._append_likely(data, keyed, conditional)

    @rule(event=st.sampled_from(SCHEMA_INVALID))
    def append_schema_invalid(self, event):
        self._append(event, keyed=False, conditional=False, schema_ok=False)

    # -- retries and conditions
    @precondition(lambda self: self.keyed)
    @rule(data=st.data())
    def retry(self, data):
        url, body, key, first = self.keyed[data.draw(st.integers(0, 99), label="which") % len(self.keyed)]
        records = self.fetch()
        again = self.write(url, body, {"Idempotency-Key": key})
        assert again.status_code == first.status_code
        assert again.get_json() == first.get_json()
        assert again.headers["Idempotent-Replayed"] == "true"
        assert again.headers["ETag"] == first.headers["ETag"]
        assert again.headers["Location"] == first.headers["Location"]
        self.unchanged(records)

    @precondition(lambda self: self.keyed)
    @rule(data=st.data(), other=st.sampled_from([{"type": "round_end"}, {"type": "round_start"},
                                                 {"type": "round_start", "dealer": 1}]))
    def reuse_key(self, data, other):
        url, body, key, _ = self.keyed[data.draw(st.integers(0, 99), label="which") % len(self.keyed)]
        if url.endswith("/events") and body == other:
            other = {"type": "round_start", "dealer": 2} if other != {"type": "round_start", "dealer": 2} else {
                "type": "round_end"}
        records = self.fetch()
        r = self.write(self.url("/events"), other, {"Idempotency-Key": key})
        assert r.status_code == 422 and r.get_json()["code"] == "idempotency_key_reused", r.get_data(as_text=True)
        self.unchanged(records)

    @rule(back=st.integers(1, 3), event=st.sampled_from([{"type": "round_start"}, {"type": "round_end"}]))
    def stale_if_match(self, back, event):
        records = self.fetch()
        version = len(records)
        stale = version - back if version >= back else version + back
        r = self.write(self.url("/events"), event, {"If-Match": f'"{stale}"'})
        assert r.status_code == 412, r.get_data(as_text=True)
        assert r.get_json()["code"] == "version_mismatch" and r.get_json()["version"] == version
        assert r.headers["ETag"] == f'"{version}"'
        self.unchanged(records)

    # -- void
    @rule(data=st.data(), keyed=st.booleans())
    def void(self, data, keyed):
        records = self.fetch()
        version = len(records)
        raw, inside = data.draw(st.integers(0, 99), label="seq"), data.draw(st.integers(0, 3), label="inside")
        target = 1 + raw % version if inside and version else raw % (version + 2)
        headers = {"Idempotency-Key": self.key()} if keyed else {}
        url = self.url(f"/events/{target}/void")
        r = self.write(url, None, headers)
        code = r.get_json()["code"] if r.status_code != 201 else None
        hypothesis_event(f"void: {r.status_code} {code}")
        if not 1 <= target <= version:
            assert (r.status_code, code) == (404, "event_not_found"), r.get_data(as_text=True)
        elif records[target - 1]["type"] == "void":
            assert (r.status_code, code) == (409, "not_voidable")
        elif records[target - 1]["voided"]:
            assert (r.status_code, code) == (409, "already_voided")
        else:
            model, err = self.predict(records, {"seq": version + 1, "type": "void", "target": target})
            if err is not None:
                assert (r.status_code, code) == (409, "void_conflict"), (target, err.code, r.get_data(as_text=True))
                assert r.get_json()["event"] == err.seq
            else:
                assert r.status_code == 201, (target, r.get_data(as_text=True))
                body = r.get_json()
                before = self.model(records)["balances"]
                assert body["voided"] == target and body["seq"] == version + 1 and body["transfers"] == []
                assert body["balances"] == model["balances"]
                assert body["deltas"] == [a - b for a, b in zip(model["balances"], before)]
                if keyed:
                    self.keyed.append((url, None, headers["Idempotency-Key"], r))
                return
        self.unchanged(records)

    # -- two phones at once
    @rule(data=st.data())
    def two_phones(self, data):
        records = self.fetch()
        version = len(records)
        model = self.model(records)
        evs = [likely_event(model, data.draw(template, label=f"phone {i}")) if data.draw(st.booleans())
               else data.draw(any_event, label=f"phone {i}") for i in range(2)]
        out: list = [None, None]
        barrier = threading.Barrier(2)

        def phone(i):
            c = self.app.test_client()
            barrier.wait()
            out[i] = self.write(self.url("/events"), evs[i], {}, client=c)

        threads = [threading.Thread(target=phone, args=(i,)) for i in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        after = self.fetch()
        assert after[:version] == records
        accepted = sorted((r.get_json()["seq"], i) for i, r in enumerate(out) if r.status_code == 201)
        for r in out:
            assert r.status_code in (201, 422), r.get_data(as_text=True)  # never lost, never 412/5xx
        hypothesis_event(f"two phones: {len(accepted)} accepted")
        # every 201 is in the log at its seq, with its body; nothing else was added
        assert len(after) == version + len(accepted)
        assert [s for s, _ in accepted] == list(range(version + 1, version + 1 + len(accepted)))
        for seq, i in accepted:
            assert body_of(after[seq - 1]) == evs[i]
        # every 422 is what the rules say for the log as it stood when it was checked
        for i, r in enumerate(out):
            if r.status_code == 422:
                body = r.get_json()
                assert body["code"] in RULE_CODES, body
                seq = body["event"]
                prefix = after[:seq - 1]
                assert version < seq <= version + 1 + len(accepted)
                _, err = self.predict(prefix, {"seq": seq, **evs[i]})
                assert err is not None and err.code == body["code"], (evs[i], body, err)

    # -- invariants
    @precondition(lambda self: self.t is not None)
    @invariant()
    def log_defines_the_table(self):
        records = self.fetch()
        r = self.client.get(self.url(), headers={"Authorization": "Bearer " + self.table["read_token"]})
        assert r.status_code == 200
        got = r.get_json()
        assert got["version"] == len(records) and r.headers["ETag"] == f'"{len(records)}"'
        assert [x["seq"] for x in records] == list(range(1, len(records) + 1))
        targets = {x["target"] for x in records if x["type"] == "void"}
        assert {x["seq"] for x in records if x["voided"]} == targets
        model = self.model(records)  # the log always replays
        assert got["balances"] == model["balances"] and sum(got["balances"]) == 0
        assert got["dealer"] == model["dealer"]
        ended = [x for x in model["rounds"] if x["ended"]]
        assert [(s["number"], s["dealer"], s["deltas"], s["won"], s["left"], s["ended_by"], s["next_dealer"],
                 s["first_seq"], s["last_seq"]) for s in got["rounds"]] == [
            (n, x["dealer"], x["deltas"], x["won"], x["left"], x["ended_by"], x["next_dealer"], x["first_seq"],
             x["last_seq"]) for n, x in enumerate(ended, 1)]
        hypothesis_event(f"rounds started: {len(model['rounds'])}")
        if model["rounds"]:
            cur = model["rounds"][-1]
            assert got["round"] == {
                "number": len(model["rounds"]), "dealer": cur["dealer"],
                "status": "ended" if cur["ended"] else "playing", "voids": cur["voids"], "won": cur["won"],
                "left": cur["left"], "deltas": cur["deltas"], "ended_by": cur["ended_by"],
                "next_dealer": cur.get("next_dealer") if cur["ended"] else None, "events": len(cur["events"]),
            }
        else:
            assert got["round"] is None
        # the service's own fold agrees with the replay
        st_, _ = fold(PLAYERS, self.table["ruleset"], self.first_dealer,
                      [{k: v for k, v in x.items() if k != "voided"} for x in records])
        assert st_.balances == model["balances"] and st_.version == len(records)


@pytest.fixture
def app(redis_url):
    # (every rate limit off: this test makes many requests from one address; the limits have their own tests)
    return create_app({"TESTING": True, "REDIS_URL": redis_url, **{var: 0 for var in NO_LIMITS}})


def test_table_api_state_machine(app):
    TableMachine.app = app
    run_state_machine_as_test(TableMachine, settings=settings(
        max_examples=25, stateful_step_count=20, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    ))
