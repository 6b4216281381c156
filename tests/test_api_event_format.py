"""The documented event schemas agree with the rules core, which alone decides what an event is.

* Every event (and table event) the core's parser accepts validates against the OpenAPI
  document's ``TableEvent`` union (the document is never stricter than the service).
* Breaking such an event as the document forbids (an unknown member, a member of the wrong
  type, a required member dropped) makes both the document and the core reject it, and the core
  names that member (the document is never looser than the service on what it states).
"""

from __future__ import annotations

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from service.api.app import openapi_dict
from service.rules.errors import EventError
from service.rules.events import parse_event
from service.rules.table import TableState

DOC = openapi_dict()
VALIDATOR = jsonschema.Draft202012Validator(
    {"$ref": "#/components/schemas/TableEvent", "components": DOC["components"]})

seats = st.integers(0, 3)
tiles = st.builds(lambda r, s: f"{r}{s}", st.integers(1, 9), st.sampled_from("mps"))
kinds = st.sampled_from(["direct", "added", "concealed"])
hands = st.fixed_dictionaries(
    {"tiles": st.one_of(st.lists(tiles, max_size=14).map("".join), st.lists(tiles, max_size=14))},
    optional={"melds": st.lists(st.one_of(
        st.builds(lambda t: {"type": "peng", "tile": t}, tiles),
        st.builds(lambda t, k: {"type": "kong", "tile": t, "kind": k}, tiles, kinds)), max_size=4),
        "void": st.one_of(st.none(), st.sampled_from("mps"))})
flags = st.fixed_dictionaries({}, optional={k: st.booleans() for k in (
    "after_kong", "robbing_kong", "last_tile", "heavenly", "earthly")})
winners = st.one_of(
    st.builds(lambda s, h: {"seat": s, "hand": h}, seats, hands),
    st.builds(lambda s, f, p: {"seat": s, "fan": f, **p}, seats, st.integers(1, 64),
              st.fixed_dictionaries({}, optional={"patterns": st.lists(st.sampled_from(["qingyise", "gen"]),
                                                                        max_size=3)})))
reports = st.one_of(
    st.builds(lambda s, h: {"seat": s, "hand": h}, seats, hands),
    st.builds(lambda s, f: {"seat": s, "status": "ting", "dajiao_fan": f}, seats, st.integers(1, 64)),
    st.builds(lambda s, k: {"seat": s, "status": k}, seats, st.sampled_from(["not_ting", "huazhu"])))
round_events = st.one_of(
    st.builds(lambda s, t, f: {"type": "peng", "seat": s, "tile": t, "from": f}, seats, tiles, seats),
    st.builds(lambda s, k, t, f: {"type": "kong", "seat": s, "kind": k, "tile": t,
                                  **({"from": f} if k == "direct" else {})}, seats, kinds, tiles, seats),
    st.builds(lambda f, t, w, fl: {"type": "hu", **({} if f == -1 else {"from": f}), "tile": t, "winners": w, **fl},
              st.one_of(st.just(-1), st.none(), seats), tiles, st.lists(winners, min_size=1, max_size=4), flags),
    st.builds(lambda r: {"type": "draw", "seats": r}, st.lists(reports, max_size=4)),
    st.builds(lambda s, last, r: {"type": "escape", "seat": s, "last_four": last, **r}, seats, st.booleans(),
              st.fixed_dictionaries({}, optional={"seats": st.lists(reports, max_size=4)})),
)
table_events = st.one_of(
    round_events,
    st.builds(lambda d, v: {"type": "round_start", **d, **v},
              st.fixed_dictionaries({}, optional={"dealer": st.one_of(st.none(), seats)}),
              st.fixed_dictionaries({}, optional={"voids": st.lists(st.one_of(st.none(), st.sampled_from("mps")),
                                                                    min_size=4, max_size=4)})),
    st.just({"type": "round_end"}),
    st.builds(lambda s, c: {"type": "buy_in", "seat": s, "coins": c}, seats, st.integers(1, 10**6)),
)


STAKES = {"coin_per_point": 1, "bankrolls": [0, 0, 0, 0]}  # (a buy-in needs a table with stakes)


def core_accepts(event: dict) -> bool:
    """Whether the core finds ``event`` well formed (rule checks against a round aside)."""
    try:
        if event["type"] in ("round_start", "round_end", "buy_in"):
            st_ = TableState.new(["a", "b", "c", "d"], "xuezhan", stakes=STAKES)
            if event["type"] == "round_end":
                st_.step({"type": "round_start"}, 1)
            st_.step(event, 2)
        else:
            parse_event(event, 0)
    except EventError as exc:
        return "field" not in exc.context and exc.code != "bad_hand"
    return True


@settings(max_examples=300, deadline=None)
@given(event=table_events)
def test_what_the_core_accepts_the_document_describes(event):
    if core_accepts(event):
        VALIDATOR.validate(event)


def _members(event: dict) -> list[tuple[list, str]]:
    """(path, name) of every member of the event's objects, for mutations."""
    out = []

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                out.append((path, k))
                walk(v, path + [k])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, path + [i])

    walk(event, [])
    return out


def _at(event, path):
    for p in path:
        event = event[p]
    return event


WRONG = {bool: "yes", int: "1", str: 5, list: {"a": 1}, dict: [1], type(None): {"x": 1}}


@settings(max_examples=300, deadline=None)
@given(event=table_events, data=st.data())
def test_breaking_an_event_as_the_document_forbids_is_rejected_by_both(event, data):
    import copy

    if not core_accepts(event):
        return
    broken = copy.deepcopy(event)
    members = _members(broken)
    how = data.draw(st.sampled_from(["unknown", "type"]))
    path, name = data.draw(st.sampled_from(members))
    holder = _at(broken, path)
    if how == "unknown":
        holder["bogus"] = 1
        expected = ".".join(map(str, path + ["bogus"]))
    else:
        if name == "type" and not path:
            return  # the discriminator: covered by the unknown-type tests
        holder[name] = WRONG[type(holder[name])]
        expected = ".".join(map(str, path + [name]))
    assert not VALIDATOR.is_valid(broken), broken
    try:
        core_accepts_broken = core_accepts(broken)
    except Exception as exc:  # pragma: no cover - a crash is a failure
        raise AssertionError(f"the core crashed on {broken}: {exc!r}") from exc
    assert not core_accepts_broken, broken
    try:
        if broken["type"] in ("round_start", "round_end", "buy_in"):
            st_ = TableState.new(["a", "b", "c", "d"], "xuezhan", stakes=STAKES)
            if broken["type"] == "round_end":
                st_.step({"type": "round_start"}, 1)
            st_.step(broken, 2)
        else:
            parse_event(broken, 0)
    except EventError as exc:
        field = exc.context.get("field")
        # the core names the member, or (for a hand whose notation breaks) the hand that holds it
        assert field == expected or expected.startswith(field + ".") and field.endswith("hand"), (field, expected)
