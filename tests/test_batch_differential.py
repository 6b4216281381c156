"""Every batch item answers exactly what its single endpoint answers: JSON batch, NDJSON, the CLI.

Generated items (Hypothesis): legal and illegal hands, rulesets, wins with flags, settle event lists
with voids and stakes, and items broken on purpose (a member dropped, replaced by any JSON value, or
added); the envelope sometimes has a ruleset of its own.  For each batch:

* ``POST /v1/batch`` (JSON) gives, item by item, ``{"status", "body"}`` or ``{"status", "problem"}``
  equal to what the item's single endpoint answers for its body (``op`` left out, the envelope's
  ruleset put in when the item has none), sent with the same ``X-Request-ID``: the same status, the
  same body, the same problem to the last member (``instance`` the single endpoint's path);
* the same items as NDJSON lines give the same result lines, and lines that are no item (not JSON,
  not an object, no or an unknown ``op``) the problem the single endpoint and the envelope give for
  them (``instance`` the batch's);
* ``python -m service score`` (in-process, on a file of those lines) writes the same lines, less the
  ``request_id`` no command line has.
"""

from __future__ import annotations

import io
import json
import sys

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from service.__main__ import main as cli
from service.api import create_app
from service.api.batch_items import OPS
from tests.test_api_properties import events, hands, rulesets, tiles, ting_hands, winning_hands

app = create_app({"TESTING": True})
client = app.test_client()
RID = "batch-differential"
HEADERS = {"X-Request-ID": RID}
NDJSON = "application/x-ndjson"
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
flags = st.fixed_dictionaries({}, optional={
    k: st.booleans() for k in ("self_drawn", "after_kong", "robbing_kong", "last_tile", "heavenly", "earthly")})
visible = st.lists(tiles, max_size=4).map("".join)


@st.composite
def score_items(draw):
    hand = draw(st.one_of(hands(14), winning_hands(), winning_hands()))
    tile = draw(st.sampled_from([hand["tiles"][i:i + 2] for i in range(0, len(hand["tiles"]), 2)] or ["1m"]))
    return {"op": "score", "hand": hand, "win": {"tile": tile, **draw(flags)}}


stakes = st.fixed_dictionaries(
    {"coin_per_point": st.integers(0, 5), "bankrolls": st.lists(st.integers(-1, 500), min_size=3, max_size=5)},
    optional={"fee": st.integers(0, 3)})
settle_items = st.builds(
    lambda dealer, evs, extra: {"op": "settle", "dealer": dealer, "events": evs, **extra},
    st.integers(-1, 4), st.lists(events, max_size=6),
    st.fixed_dictionaries({}, optional={"stakes": stakes,
                                        "voids": st.lists(st.sampled_from(["m", "p", "s", None, "x"]),
                                                          min_size=3, max_size=4)}))
hand_items = st.one_of(
    st.builds(lambda h, v: {"op": "validate", "hand": h, **v}, st.integers(12, 15).flatmap(hands),
              st.fixed_dictionaries({}, optional={"visible": visible})),
    st.builds(lambda h, v: {"op": "ting", "hand": h, **v}, st.one_of(hands(13), ting_hands()),
              st.fixed_dictionaries({}, optional={"visible": visible})),
    st.builds(lambda h: {"op": "discards", "hand": h}, st.one_of(hands(14), winning_hands())),
    score_items(),
    settle_items,
    st.builds(lambda h, v: {"op": "shanten", "hand": h, **v}, st.one_of(st.integers(12, 15).flatmap(hands),
                                                                        ting_hands(), winning_hands()),
              st.fixed_dictionaries({}, optional={"visible": visible})),
)


@st.composite
def with_ruleset(draw, items):
    item = draw(items)
    if draw(st.booleans()):
        item["ruleset"] = draw(rulesets)
    return item


@st.composite
def broken(draw, items):
    """An item with one member dropped, replaced by any JSON value, or added (``op`` kept)."""
    item = draw(items)
    names = [k for k in item if k != "op"]
    how = draw(st.sampled_from(["drop", "replace", "add", "deep"]))
    if how == "drop" and names:
        del item[draw(st.sampled_from(names))]
    elif how == "replace" and names:
        item[draw(st.sampled_from(names))] = draw(json_values)
    elif how == "deep" and isinstance(item.get("hand"), dict):
        item["hand"][draw(st.sampled_from(["tiles", "melds", "void", "extra"]))] = draw(json_values)
    else:
        item[draw(st.text(min_size=1, max_size=5).filter(lambda k: k != "op"))] = draw(json_values)
    return item


items = st.one_of(with_ruleset(hand_items), with_ruleset(hand_items), broken(with_ruleset(hand_items)))
envelopes = st.fixed_dictionaries({"items": st.lists(items, max_size=6)}, optional={"ruleset": rulesets})
not_items = st.one_of(
    st.sampled_from([b"{", b"not json", b'{"op": "ting",}', b"\xff\xfe", b"[1,", b'"\\ud800"', b"NaN"]),
    json_values.filter(lambda v: not (isinstance(v, dict) and v.get("op") in OPS)).map(
        lambda v: json.dumps(v).encode()),
)


def single(item: dict, ruleset) -> dict:
    """What the item's single endpoint answers, as a batch result."""
    body = {k: v for k, v in item.items() if k != "op"}
    if ruleset is not None and "ruleset" not in body:
        body["ruleset"] = ruleset
    response = client.post(OPS[item["op"]].path, json=body, headers=HEADERS)
    assert response.status_code < 500, response.get_data(as_text=True)
    key = "body" if response.status_code == 200 else "problem"
    return {"status": response.status_code, key: response.get_json()}


def no_item(line: bytes) -> dict:
    """What a line that is no item gets: the single endpoint's 400 for a body that is not JSON, else what
    a JSON batch answers for such an item (its own 422 naming ``op``); ``instance`` the batch's."""
    response = client.post("/v1/hands/ting", data=line, content_type="application/json", headers=HEADERS)
    if response.status_code == 400:
        return {"status": 400, "problem": response.get_json() | {"instance": "/v1/batch"}}
    envelope = client.post("/v1/batch", data=b'{"items": [' + line + b"]}", content_type="application/json",
                           headers=HEADERS)
    assert envelope.status_code == 200, envelope.get_data(as_text=True)
    result = envelope.get_json()["results"][0]
    assert result["status"] == 422 and "op" in result["problem"]["errors"], result
    return result


def run_cli(data: bytes, tmp_dir) -> list[dict]:
    """``python -m service score`` on ``data``: its results, each checked to carry the number of its input
    line (taken out), its exit status checked (1 when any item failed, else 0)."""
    path = tmp_dir / "items.ndjson"
    path.write_bytes(data)
    out = io.BytesIO()
    saved, sys.stdout = sys.stdout, io.TextIOWrapper(out, encoding="utf-8")
    try:
        status = cli(["score", str(path)])
        sys.stdout.flush()
        written = out.getvalue()
    finally:
        sys.stdout.detach()
        sys.stdout = saved
    results = [json.loads(line) for line in written.splitlines()]
    lines = data.split(b"\n")
    assert [r["line"] for r in results] == [i + 1 for i, line in enumerate(lines) if line.strip()][:len(results)]
    assert status == (1 if any(r["status"] != 200 for r in results) else 0)
    return [{k: v for k, v in r.items() if k != "line"} for r in results]


def as_on_the_command_line(result: dict) -> dict:
    """A result of the HTTP layer as the command line answers it: no request id, a relative ``type`` (no
    origin)."""
    if "problem" not in result:
        return result
    problem = {k: v for k, v in result["problem"].items() if k != "request_id"}
    return {**result, "problem": {**problem, "type": problem["type"].removeprefix("http://localhost")}}


def ndjson_results(data: bytes) -> list[dict]:
    response = client.post("/v1/batch", data=data, content_type=NDJSON, headers=HEADERS)
    assert response.status_code == 200 and response.mimetype == NDJSON
    return [json.loads(line) for line in response.get_data().splitlines()]


EVERY_OP_BOTH_WAYS = {"items": [  # a success and a refusal of each operation, whatever Hypothesis draws
    {"op": "validate", "hand": {"tiles": "123m"}}, {"op": "validate", "hand": {"tiles": "12x"}},
    {"op": "ting", "hand": {"tiles": "1112345678999m"}}, {"op": "ting", "hand": {"tiles": "123m"}},
    {"op": "discards", "hand": {"tiles": "11122233344456m"}}, {"op": "discards", "hand": {"tiles": "123m"}},
    {"op": "score", "hand": {"tiles": "11122233344455m"}, "win": {"tile": "5m"}},
    {"op": "score", "hand": {"tiles": "1112345678999m"}, "win": {"tile": "9m"}},
    {"op": "settle", "dealer": 0, "events": []}, {"op": "settle", "dealer": 7, "events": []},
    {"op": "shanten", "hand": {"tiles": "12345m678m4599p1p"}}, {"op": "shanten", "hand": {"tiles": "123m"}},
]}


def test_every_item_answers_what_its_single_endpoint_answers(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    seen: dict[str, set[int]] = {}

    @SETTINGS
    @given(envelope=envelopes)
    @example(envelope=EVERY_OP_BOTH_WAYS)
    def check(envelope):
        ruleset = envelope.get("ruleset")
        expected = [single(item, ruleset) for item in envelope["items"]]
        for item, result in zip(envelope["items"], expected):
            seen.setdefault(item["op"], set()).add(result["status"])

        response = client.post("/v1/batch", json=envelope, headers=HEADERS)
        assert response.status_code == 200, response.get_data(as_text=True)
        assert response.get_json() == {"results": expected}

        lines = [json.dumps(item if ruleset is None or "ruleset" in item else {**item, "ruleset": ruleset})
                 .encode() for item in envelope["items"]]
        data = b"".join(line + b"\n" for line in lines)
        assert ndjson_results(data) == expected
        assert run_cli(data, tmp) == [as_on_the_command_line(x) for x in expected]

    check()
    for op in OPS:  # the examples reached every operation's successes and its refusals
        assert 200 in seen[op] and seen[op] - {200}, (op, seen[op])


def test_lines_that_are_no_item_answer_what_the_single_endpoint_and_the_envelope_say(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")

    @SETTINGS
    @given(lines=st.lists(st.one_of(not_items, items.map(lambda item: json.dumps(item).encode()),
                                    st.sampled_from([b"", b"  ", b"\t"])), max_size=8))
    def check(lines):
        expected = []
        for line in lines:
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError:
                value = None
            if isinstance(value, dict) and value.get("op") in OPS and isinstance(value.get("op"), str):
                expected.append(single(value, None))
            else:
                expected.append(no_item(line))
        data = b"\n".join(lines) + b"\n"
        assert ndjson_results(data) == expected
        assert run_cli(data, tmp) == [as_on_the_command_line(x) for x in expected]

    check()
