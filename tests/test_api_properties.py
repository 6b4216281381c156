"""Property tests of the success paths: random legal hands through HTTP.

For random hands (up to two suits, at most four copies, sometimes melds and a
void) the HTTP body must equal the core's result dumped, conform to the
response schema of the OpenAPI document, and no input may give a 5xx.
"""

from __future__ import annotations

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from service import discards, parse_hand, score, ting, validate
from service.api import create_app
from service.api.app import openapi_dict
from service.api.schemas import dump_discards, dump_score, dump_ting, dump_validation
from service.rules.errors import RuleError
from service.rules.fan import Win

app = create_app({"TESTING": True})
DOC = openapi_dict(app)
SUITS = "mps"


def response_validator(name: str) -> jsonschema.Draft202012Validator:
    root = {"$ref": f"#/components/schemas/{name}", "components": DOC["components"]}
    return jsonschema.Draft202012Validator(root)


VALIDATORS = {
    name: response_validator(name)
    for name in ("TingResponse", "DiscardsResponse", "ScoreResponse", "ValidateResponse", "Problem")
}


@st.composite
def hands(draw, size: int):
    suits = draw(st.lists(st.sampled_from(SUITS), min_size=1, max_size=2, unique=True))
    tiles = [r * 10 + SUITS.index(s) for s in suits for r in range(1, 10)]
    n_melds = draw(st.integers(0, 2)) if size >= 13 else 0
    melds = []
    counts: dict[int, int] = {}
    for _ in range(n_melds):
        t = draw(st.sampled_from(tiles))
        if counts.get(t, 0):
            continue
        kind = draw(st.sampled_from([None, "direct", "added", "concealed"]))
        counts[t] = 3 if kind is None else 4
        meld = {"type": "peng" if kind is None else "kong", "tile": f"{t // 10}{SUITS[t % 10]}"}
        if kind:
            meld["kind"] = kind
        melds.append(meld)
    want = size - 3 * len(melds)
    pool = [t for t in tiles for _ in range(4 - counts.get(t, 0))]
    concealed = draw(st.permutations(pool))[:want]
    text = "".join(f"{t // 10}{SUITS[t % 10]}" for t in concealed)
    hand = {"tiles": text, "melds": melds}
    if draw(st.booleans()):
        hand["void"] = draw(st.sampled_from(SUITS))
    return hand


@st.composite
def winning_hands(draw):
    """Four sets and a pair (or seven pairs) in one or two suits; sometimes a set as a meld."""
    suits = draw(st.lists(st.sampled_from(SUITS), min_size=1, max_size=2, unique=True))
    counts: dict[tuple[int, str], int] = {}
    parts: list[list[tuple[int, str]]] = []
    if draw(st.integers(0, 4)) == 0:
        for _ in range(7):
            t = (draw(st.integers(1, 9)), draw(st.sampled_from(suits)))
            parts.append([t, t])
    else:
        for _ in range(4):
            suit = draw(st.sampled_from(suits))
            if draw(st.booleans()):
                r = draw(st.integers(1, 7))
                parts.append([(r, suit), (r + 1, suit), (r + 2, suit)])
            else:
                r = draw(st.integers(1, 9))
                parts.append([(r, suit)] * 3)
        t = (draw(st.integers(1, 9)), draw(st.sampled_from(suits)))
        parts.append([t, t])
    for part in parts:
        for t in part:
            counts[t] = counts.get(t, 0) + 1
    assume(all(c <= 4 for c in counts.values()))
    melds = []
    concealed = []
    for part in parts:
        if len(part) == 3 and part[0] == part[1] and counts[part[0]] == 3 and draw(st.integers(0, 3)) == 0:
            melds.append({"type": "peng", "tile": f"{part[0][0]}{part[0][1]}"})
        else:
            concealed.extend(part)
    order = draw(st.permutations(concealed))
    return {"tiles": "".join(f"{r}{s}" for r, s in order), "melds": melds}


@st.composite
def ting_hands(draw):
    hand = draw(winning_hands())
    tiles = hand["tiles"]
    i = 2 * draw(st.integers(0, len(tiles) // 2 - 1))
    return {**hand, "tiles": tiles[:i] + tiles[i + 2:]}


rulesets = st.one_of(
    st.sampled_from(["xuezhan", "normal", "chengdu-points"]),
    st.fixed_dictionaries(
        {},
        optional={
            "preset": st.sampled_from(["xuezhan", "normal", "chengdu-points"]),
            "cap": st.one_of(st.none(), st.integers(1, 8)),
            "scoring": st.sampled_from(["exponential", "linear"]),
            "fan_table": st.sampled_from(["qq", "chengdu"]),
            "zimo": st.sampled_from(["none", "base", "fan"]),
            "dajiao": st.sampled_from(["max", "min"]),
            "menqing": st.booleans(), "zhongzhang": st.booleans(), "jingoudiao": st.booleans(),
            "haidi": st.booleans(), "base": st.integers(1, 100),
        },
    ),
)

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


def core_hand(h: dict):
    return parse_hand(h["tiles"], h["melds"], h.get("void"))


def exercised(test):
    """Run the property test ``test(statuses, ...)`` and check that its random inputs reached 200s,
    not only rule errors (each test checks its own: no state shared between tests)."""

    def run():
        statuses: list[int] = []
        test(statuses)
        assert statuses.count(200) >= len(statuses) // 5, (test.__name__, statuses.count(200), len(statuses))

    run.__name__ = run.__qualname__ = test.__name__
    run.__doc__ = test.__doc__
    return run


def expect(response, schema: str, expected, statuses: list[int]):
    assert response.status_code < 500
    statuses.append(response.status_code)
    body = response.get_json()
    if isinstance(expected, RuleError):
        assert response.status_code == 422 and body["code"] == expected.code
        VALIDATORS["Problem"].validate(body)
    else:
        assert response.status_code == 200, body
        VALIDATORS[schema].validate(body)
        assert body == expected


def run(fn, *args, dump, **kwargs):
    try:
        return dump(fn(*args, **kwargs))
    except RuleError as exc:
        return exc


@exercised
def test_ting(statuses):
    @SETTINGS
    @given(hand=st.one_of(hands(13), ting_hands()), ruleset=rulesets)
    def check(hand, ruleset):
        response = app.test_client().post("/v1/hands/ting", json={"hand": hand, "ruleset": ruleset})
        expect(response, "TingResponse", run(ting, core_hand(hand), ruleset=ruleset, dump=dump_ting), statuses)

    check()


@exercised
def test_discards(statuses):
    @SETTINGS
    @given(hand=st.one_of(hands(14), winning_hands()), ruleset=rulesets)
    def check(hand, ruleset):
        response = app.test_client().post("/v1/hands/discards", json={"hand": hand, "ruleset": ruleset})
        expect(response, "DiscardsResponse",
               run(discards, core_hand(hand), ruleset=ruleset, dump=dump_discards), statuses)

    check()


@exercised
def test_validate(statuses):
    @SETTINGS
    @given(hand=st.integers(12, 15).flatmap(hands), ruleset=rulesets)
    def check(hand, ruleset):
        response = app.test_client().post("/v1/hands/validate", json={"hand": hand, "ruleset": ruleset})
        expect(response, "ValidateResponse",
               run(validate, core_hand(hand), ruleset=ruleset, dump=dump_validation), statuses)

    check()


@exercised
def test_score(statuses):
    @SETTINGS
    @given(hand=st.one_of(hands(14), winning_hands(), winning_hands()), ruleset=rulesets, data=st.data())
    def check(hand, ruleset, data):
        score_one(hand, ruleset, data, statuses)

    check()


def score_one(hand, ruleset, data, statuses):
    h = core_hand(hand)
    tile = str(data.draw(st.sampled_from(h.tiles))) if h.tiles else "1m"
    flags = data.draw(st.fixed_dictionaries({}, optional={
        k: st.booleans() for k in ("self_drawn", "after_kong", "robbing_kong", "last_tile", "heavenly", "earthly")
    }))
    response = app.test_client().post(
        "/v1/hands/score", json={"hand": hand, "win": {"tile": tile, **flags}, "ruleset": ruleset}
    )
    try:
        win = Win(tile, **flags)
    except RuleError as exc:
        expected = exc
    else:
        expected = run(score, h, win, ruleset=ruleset, dump=dump_score)
    expect(response, "ScoreResponse", expected, statuses)


@pytest.mark.parametrize(
    "tiles",
    ["11333222456999s", "11222244p557799m", "111222333m78999p", "23445677p345789s"],
)
def test_score_examples_conform(tiles):
    response = app.test_client().post("/v1/hands/score", json={"hand": {"tiles": tiles}, "win": {"tile": tiles[-2:]}})
    expect(response, "ScoreResponse", dump_score(score(parse_hand(tiles), tiles[-2:])), [])



# -- settlement -------------------------------------------------------------------------
seats = st.integers(0, 3)
tiles = st.builds(lambda r, s: f"{r}{s}", st.integers(1, 9), st.sampled_from(SUITS))
events = st.one_of(
    st.builds(
        lambda seat, kind, tile, frm: {
            "type": "kong",
            "seat": seat,
            "kind": kind,
            "tile": tile,
            **({"from": frm} if kind == "direct" else {}),
        },
        seats,
        st.sampled_from(["direct", "added", "concealed"]),
        tiles,
        seats,
    ),
    st.builds(lambda seat, tile, frm: {"type": "peng", "seat": seat, "tile": tile, "from": frm}, seats, tiles, seats),
    st.builds(
        lambda frm, tile, winners, flags: {"type": "hu", "from": frm, "tile": tile, "winners": winners, **flags},
        st.one_of(st.none(), seats),
        tiles,
        st.lists(st.builds(lambda s, f: {"seat": s, "fan": f}, seats, st.integers(1, 8)), min_size=1, max_size=3),
        st.fixed_dictionaries({}, optional={k: st.booleans() for k in ("after_kong", "robbing_kong", "last_tile")}),
    ),
    st.builds(
        lambda entries: {"type": "draw", "seats": entries},
        st.lists(
            st.one_of(
                st.builds(lambda s, f: {"seat": s, "status": "ting", "dajiao_fan": f}, seats, st.integers(1, 6)),
                st.builds(lambda s, k: {"seat": s, "status": k}, seats, st.sampled_from(["not_ting", "huazhu"])),
            ),
            max_size=4,
        ),
    ),
    st.builds(lambda seat, last: {"type": "escape", "seat": seat, "last_four": last}, seats, st.booleans()),
)
SETTLE_VALIDATOR = response_validator("SettleResponse")


@exercised
def test_settle(statuses):
    from service.rules.errors import EventError
    from service.rules.settle import settle

    @SETTINGS
    @given(dealer=seats, evs=st.lists(events, max_size=8), ruleset=rulesets)
    def check(dealer, evs, ruleset):
        response = app.test_client().post("/v1/rounds/settle",
                                          json={"dealer": dealer, "events": evs, "ruleset": ruleset})
        body = response.get_json()
        try:
            expected = settle(evs, dealer=dealer, ruleset=ruleset).as_dict()
        except EventError as exc:
            assert response.status_code == 422, body
            VALIDATORS["Problem"].validate(body)
            assert (body["code"], body["event"]) == (exc.code, exc.event)
            statuses.append(422)
        else:
            assert response.status_code == 200, body
            SETTLE_VALIDATOR.validate(body)
            assert body == expected and sum(body["deltas"]) == 0
            statuses.append(200)

    check()
