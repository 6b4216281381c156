"""Mending the record in the companion app, in a real browser (docs/table-app.md "Mending the record";
docs/rules.md §15): headless Chromium phones against ``python -m service serve``, as in
tests/test_web_browser.py (its fixtures and helpers).

A past round is corrected on one phone (an entry inserted, one entered again, the payments before and
after as the service settles them, the refusals said on the sheet) and every other phone follows
without a reload; penalties and adjustments are entered through their own controls and pay what the
rule book says (checked against POST /v1/rounds/settle of the documented event).
"""

from __future__ import annotations

import json

import pytest

from tests.browser_support import Api, request
from tests.test_web_browser import api, api_table, join, phones, post_events, service, settled, synced  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NAMES = "东南西北"


def events_of(service, table: dict) -> list[dict]:
    status, _, body = request(service.port, "GET", f"/v1/tables/{table['t']}/events",
                              headers={"Authorization": f"Bearer {table['k']}"})
    assert status == 200, body
    return json.loads(body)["events"]


def row(phone, testid_prefix: str, seats: int = 4) -> list[str]:
    return [phone.text(f"{testid_prefix}-{i}") for i in range(seats)]


def open_mend(phone, number: int) -> None:
    """The correction sheet of an ended round: its row in the rounds table, then 改这一局."""
    if not phone.has(f"round-detail-{number}"):
        phone.tap(f"round-row-{number}")
    phone.wait(lambda: phone.has(f"mend-round-{number}"), f"round {number} explained, with its correction button")
    phone.tap(f"mend-round-{number}")
    phone.wait(lambda: phone.has("dlg-mend") and phone.has("mend-entry-0"), "the correction sheet with the round's entries")


def entries(phone) -> list[str]:
    return phone.js("return Array.from(document.querySelectorAll('[data-testid^=mend-entry-]'))"
                    ".map((e) => e.querySelector('.ev').innerText)")


def test_a_past_round_corrected_on_one_phone_is_followed_on_another(service, api: Api, phones):
    """Round 1: 东 自摸 2 fan; round 2 under way (its dealer taken from round 1). On phone a, round 1 is
    opened and the forgotten 暗杠 of 西 is inserted before the 自摸: the sheet shows each seat's payments
    before and after (the service's settlement of the new list) and, once confirmed, phone b shows the
    corrected balances, round and history without a reload. On the way: a win entered again with another
    winner would change round 2's dealer (409 correction_conflict, said on the sheet), another phone's
    record meanwhile is a 412 (said on the sheet, the round read again, every entry kept)."""
    table = api_table(service)
    zimo = {"type": "hu", "from": None, "tile": "5p", "winners": [{"seat": 0, "fan": 2}]}
    post_events(service, table, {"type": "round_start", "dealer": 0}, zimo, {"type": "round_end"},
                {"type": "round_start"}, {"type": "kong", "seat": 1, "kind": "concealed", "tile": "1m"})
    link = f"{service.url}/#t={table['t']}&k={table['k']}&r={table['r']}"
    a, b = phones("a"), phones("b")
    join(a, link, seat=0)
    join(b, link, seat=1)
    synced(api, table, a, b, expect=[24, 24, -24, -24])

    open_mend(a, 1)
    assert entries(a) == ["1.东 self-drawn on 5 Dots"], entries(a)
    assert row(a, "mend-before") == ["+36", "-12", "-12", "-12"]
    # the win entered again (its sheet filled in as it was), with 南 as the winner: round 2's dealer would change
    a.tap("mend-edit-0")
    a.wait(lambda: a.has("dlg-hu"), "the 胡 sheet, to enter the win again")
    assert a.el("self-drawn").get_attribute("aria-pressed") == "true" and a.el("tile-5p").get_attribute("aria-pressed") == "true"
    assert a.el("fan-2").get_attribute("aria-pressed") == "true"
    a.tap("seat-1")
    a.tap("fan-2")
    a.tap("confirm")
    a.wait(lambda: a.has("dlg-mend") and a.text("mend-after-1") == "+36", "the new win's payments, before anything is written")
    assert entries(a)[0].startswith("1.南 self-drawn on 5 Dots") and row(a, "mend-change") == ["-48", "+48", "0", "0"]
    a.tap("confirm")
    a.wait(lambda: "round 2 would no longer hold" in a.text("dialog-message"), "the 409 correction_conflict in words on the sheet")
    assert a.has("dlg-mend") and len(entries(a)) == 1
    assert api.table(table["t"], table["k"])["balances"] == [24, 24, -24, -24]  # (nothing written)
    # entered again as it was, then the forgotten kong inserted before it
    a.tap("mend-edit-0")
    a.tap("seat-0")
    a.tap("fan-2")
    a.tap("confirm")
    a.wait(lambda: a.has("dlg-mend") and a.text("mend-after-0") == "+36", "the win as it was")
    a.tap("mend-insert-0")
    a.tap("mend-add-kong")
    a.wait(lambda: a.has("dlg-kong"), "the 杠 sheet, for the forgotten kong")
    a.tap("seat-2")
    a.tap("kind-concealed")
    a.tap("tile-7s")
    a.tap("confirm")
    a.wait(lambda: a.has("dlg-mend") and len(entries(a)) == 2, "the kong in the list")
    assert entries(a)[0].startswith("1.西 kongs 7 Bamboo concealed") and entries(a)[1].startswith("2.东 self-drawn")
    # before and after, as the service settles the new list (the rule book: 12 from each for the 暗杠)
    kong = {"type": "kong", "seat": 2, "kind": "concealed", "tile": "7s"}
    after = settled(service, "xuezhan", 0, [kong, zimo])
    assert after == [24, -24, 24, -24]
    a.wait(lambda: row(a, "mend-after") == ["+24", "-24", "+24", "-24"], "the payments after")
    assert row(a, "mend-before") == ["+36", "-12", "-12", "-12"] and row(a, "mend-change") == ["-12", "-12", "+36", "-12"]
    assert "东 pays 西 12 — concealed kong" in a.text("mend-entry-0")
    a.type("mend-note", "the 暗杠 came first")
    a.screenshot("mend-round")
    # another phone records meanwhile: the correction is refused with 412, said on the sheet, nothing lost
    post_events(service, table, {"type": "kong", "seat": 3, "kind": "concealed", "tile": "2m"})
    a.tap("confirm")
    a.wait(lambda: "Another phone changed the table" in a.text("dialog-message"), "the 412 in words on the sheet")
    assert a.has("dlg-mend") and len(entries(a)) == 2 and a.el("mend-note").get_property("value") == "the 暗杠 came first"
    before = api.table(table["t"], table["k"])["balances"]
    assert before == [12, 12, -36, 12]
    a.tap("confirm")
    a.wait(lambda: not a.has("dlg-mend"), "the correction written: the sheet closed")
    log = events_of(service, table)
    assert [(e["type"], e["round"], e["events"], e["note"]) for e in log[-1:]] == [("correction", 1, [kong, zimo], "the 暗杠 came first")]
    assert sum(1 for e in log if e["type"] == "correction") == 1  # (one PUT: the refused ones wrote nothing)
    expect = [x - y + z for x, y, z in zip(before, [36, -12, -12, -12], after)]
    assert expect == [0, 0, 0, 0]
    synced(api, table, a, b, expect=expect)
    # phone b, without a reload: round 1 as corrected, and the correction in the history
    correction = log[-1]["seq"]
    b.wait(lambda: "Round 1 corrected: the 暗杠 came first" in b.text(f"event-{correction}"), "the correction in b's history")
    b.tap("round-row-1")
    b.wait(lambda: "西 kongs 7 Bamboo concealed" in b.text(f"round-1-event-{correction}"), "round 1 as corrected on phone b")
    # (its payments come with the round's explained read, which may land a moment after its events)
    b.wait(lambda: "东 pays 西 12 — concealed kong" in b.text("round-detail-1"), "round 1's payments as corrected on phone b")
    detail = b.text("round-detail-1")
    assert "东 pays 西 12 — concealed kong" in detail and "corrected away" in b.text(f"round-1-event-{log[1]['seq']}")
    b.wait(lambda: b.text("round-1-deltas") == "This round: 东 +24 & 南 -24 & 西 +24 & 北 -24", "round 1's deltas as corrected")
    b.screenshot("mend-followed")


def test_penalties_and_an_adjustment_through_their_controls(service, api: Api, phones):
    """诈胡 through its control: the seat pays each other seat still in a win of zhahu_fan fan (the cap
    here: 4 → 48 each, rules §15.3), shown in the history with its transfers on the other phone; 相公:
    nothing paid, and a later win of that seat is refused on the sheet in words (§15.4); between rounds
    调账 moves points with a note, in the totals but not in the round (§15.5)."""
    ruleset = {"preset": "xuezhan", "cap": 4}
    table = api_table(service, ruleset=ruleset)
    post_events(service, table, {"type": "round_start", "dealer": 0})
    link = f"{service.url}/#t={table['t']}&k={table['k']}&r={table['r']}"
    a, b = phones("a"), phones("b")
    join(a, link, seat=0)
    join(b, link)
    a.wait(lambda: a.has("record-penalty"), "the penalty control")

    a.tap("record-penalty")
    a.tap("seat-3")
    a.tap("penalty-zhahu")
    assert "48 points each" in a.text("penalty-what")
    a.tap("confirm")
    a.wait(lambda: not a.has("dlg-penalty"), "the penalty recorded")
    penalty = {"type": "penalty", "seat": 3, "kind": "zhahu"}
    expect = settled(service, ruleset, 0, [penalty])
    assert expect == [48, 48, 48, -144]
    synced(api, table, a, b, expect=expect)
    seq = events_of(service, table)[-1]["seq"]
    b.wait(lambda: "北: false win (诈胡)" in b.text(f"event-{seq}") and "北 pays 东 48 — penalty" in b.text(f"event-{seq}"),
           "the penalty and its transfers in b's history")

    a.tap("record-penalty")
    a.tap("seat-2")
    a.tap("penalty-xianggong")
    a.tap("confirm")
    a.wait(lambda: not a.has("dlg-penalty"), "the 相公 recorded")
    a.wait(lambda: a.has(f"event-{seq + 1}"), "the 相公 in the history")
    assert "西: wrong tile count (相公)" in a.text(f"event-{seq + 1}") and "nothing paid" in a.text(f"event-{seq + 1}")
    assert api.table(table["t"], table["k"])["balances"] == expect
    # 西 may not win this round: the service's refusal, in words, on the sheet
    a.tap("record-hu")
    a.tap("self-drawn")
    a.tap("seat-2")
    a.tap("tile-5p")
    a.tap("fan-2")
    a.tap("confirm")
    a.wait(lambda: "相公" in a.text("dialog-message") and "may not win" in a.text("dialog-message"), "the xianggong refusal on the sheet")
    a.tap("cancel")

    post_events(service, table, {"type": "round_end"})
    a.wait(lambda: a.has("record-adjust"), "the adjustment control between rounds")
    a.tap("record-adjust")
    a.tap("from-1")
    a.tap("to-0")
    a.type("adjust-points", "10")
    a.type("adjust-note", "tea")
    a.tap("confirm")
    a.wait(lambda: not a.has("dlg-adjust"), "the adjustment recorded")
    totals = [expect[0] + 10, expect[1] - 10, *expect[2:]]
    synced(api, table, a, b, expect=totals)
    seq = events_of(service, table)[-1]["seq"]
    b.wait(lambda: "Adjustment: tea" in b.text(f"event-{seq}") and "南 pays 东 10 — adjustment" in b.text(f"event-{seq}"),
           "the adjustment in b's history")
    view = api.table(table["t"], table["k"])
    assert view["rounds"][0]["deltas"] == expect  # (never in a round's deltas)
