"""The companion app in a real browser: headless Chromium phones against ``python -m service serve``.

One service per module (a real subprocess on a free port, on the session's private
redis-server); each test opens its own phones (fresh profiles). Every expectation about
money is checked twice: the phones show what the public API says, and the API says what
docs/rules.md says the tapped events are worth. Screenshots at 360×640 go to
``test-output/screenshots/`` (gitignored).
"""

from __future__ import annotations

import base64
import json
import re
import struct
import time
from pathlib import Path

import pytest

from tests.browser_support import Api, FlakyProxy, Phone, Service, fragment, request, require_browser

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def service(redis_server, tmp_path_factory):
    require_browser()
    if not redis_server.running:  # an earlier test may have stopped it
        redis_server.start()
    # (one test records a hundred rounds through the API at once: the events limit per table is
    # off; every read limit stays as configured by default)
    # (a stream comments every second, so that a test can see a quiet stream go on: FlakyProxy.keepalives)
    svc = Service(redis_server.url, tmp_path_factory.mktemp("web-service"),
                  env={"TABLE_EVENTS_PER_MINUTE": "0", "STREAM_HEARTBEAT": "1"})
    try:
        yield svc
    finally:
        svc.stop()


@pytest.fixture
def api(service) -> Api:
    return Api(service.port)


@pytest.fixture
def phones():
    made: list[Phone] = []

    def make(name: str, *args: str) -> Phone:
        phone = Phone(name, tuple(args))
        made.append(phone)
        return phone

    yield make
    for p in made:
        p.quit()


def answer_seat(phone: Phone, seat: int | None = None) -> None:
    """Answer the question a phone asks once on a table: which seat is its own (None: just watching)."""
    phone.wait(lambda: phone.has("dlg-whoAmI"), "the question which seat is this phone's")
    if seat is None:
        phone.tap("cancel")
    else:
        phone.tap(f"me-{seat}")
        phone.tap("confirm")
    phone.wait(lambda: not phone.has("dlg-whoAmI"), "the seat question answered")


def join(phone: Phone, url: str, seat: int | None = None) -> None:
    """Open a share link on a phone and answer its seat question."""
    phone.d.get(url)
    phone.wait(lambda: phone.has("balance-0"), "the table")
    answer_seat(phone, seat)


def wait_rooms(phone: Phone) -> None:
    """Wait for the start page's rooms from the service (until they arrive, the page shows its one
    fallback room, without the other rooms' options)."""
    phone.wait(lambda: len(phone.all('[data-testid="ruleset"] option')) > 1, "the rooms the service offers")


def create_table(phone: Phone, base_url: str, names=("东", "南", "西", "北"), preset: str | None = None,
                 seat: int | None = None) -> dict:
    phone.d.get(base_url + "/")
    if preset:
        from selenium.webdriver.support.select import Select

        wait_rooms(phone)
        Select(phone.el("ruleset")).select_by_value(preset)
    for i, name in enumerate(names):
        phone.type(f"player-{i}", name)
    phone.tap("create-table")
    phone.wait(lambda: "#t=" in phone.d.current_url, "the table to open")
    phone.wait(lambda: phone.has("balance-0"), "the balances")
    answer_seat(phone, seat)
    return fragment(phone.d.current_url)


def synced(api: Api, table: dict, *phones: Phone, expect: list[int]) -> None:
    """The API reaches ``expect`` (the phone's outbox posts in the background), then every
    phone shows exactly the API's balances."""
    deadline = time.monotonic() + 20
    while (balances := api.table(table["t"], table["k"])["balances"]) != expect and time.monotonic() < deadline:
        time.sleep(0.1)
    assert balances == expect
    for p in phones:
        p.wait_balances(balances)


def test_create_share_and_join(service, api, phones):
    a = phones("a")
    table = create_table(a, service.url)
    view = api.table(table["t"], table["k"])
    assert view["players"] == ["东", "南", "西", "北"] and view["balances"] == [0, 0, 0, 0]
    # tokens only in the fragment; the share links carry them the same way
    share = a.el("share-link").get_attribute("href")
    read = a.el("share-read-link").get_attribute("href")
    assert fragment(share) == table and "?" not in share.split("#")[0]
    assert fragment(read) == {"t": table["t"], "r": table["r"]}
    a.wait(lambda: a.has("share-qr"), "the QR code")
    assert a.el("share-qr").get_attribute("src").startswith("blob:")
    a.screenshot("share")
    # the app came gzipped (fewer bytes on the wire than in the file), and its status line in plain words
    sizes = a.js(
        "return performance.getEntriesByType('resource').filter((e) => /[/]web[/](app|i18n|dialogs)[.]js$/.test(e.name))"
        ".map((e) => [e.encodedBodySize, e.decodedBodySize])"
    )
    assert len(sizes) == 3 and all(0 < sent < 0.6 * size for sent, size in sizes), sizes
    status = a.js("return document.getElementById('status').innerText")
    assert not re.search(r"\bv\d+|live|stream|polling", status), status

    b = phones("b")
    join(b, share)
    b.wait_balances([0, 0, 0, 0])
    assert b.has("round-start") and b.text("pending-count") == "0"


def test_a_whole_xuezhan_round_on_two_phones(service, api, phones):
    a = phones("a")
    table = create_table(a, service.url)
    b = phones("b")
    join(b, a.el("share-link").get_attribute("href"))
    b.wait(lambda: b.has("round-start"), "phone b on the table")

    # round 1, dealer 东 (seat 0, preset)
    a.tap("round-start")
    assert a.el("seat-0").get_attribute("aria-pressed") == "true"
    a.tap("confirm")
    b.wait(lambda: b.has("record-hu"), "the round on phone b")
    a.screenshot("round-started")

    # 西 暗杠 7s: 12 from each other seat
    a.tap("record-kong")
    a.tap("seat-2")
    a.tap("kind-concealed")
    a.tiles("7s")
    a.tap("confirm")
    synced(api, table, a, b, expect=[-12, -12, 36, -12])

    # 南 明杠 5m fed by 北 (recorded on phone b): 北 pays 6
    b.tap("record-kong")
    b.tap("seat-1")
    b.tap("kind-direct")
    b.tap("from-3")
    b.tiles("5m")
    b.screenshot("kong-dialog")
    b.tap("confirm")
    synced(api, table, a, b, expect=[-12, -6, 36, -18])

    # a refused event: a fifth 7s (南 暗杠 7s) is 422, shown in words on the sheet, which stays open
    # with the entry as it was; nothing changes
    version = api.table(table["t"], table["k"])["version"]
    b.tap("record-kong")
    b.tap("seat-1")
    b.tap("kind-concealed")
    b.tiles("7s")
    b.tap("confirm")
    b.wait(lambda: b.text("dialog-message"), "the refusal")
    assert "7s" in b.text("dialog-message") or "four" in b.text("dialog-message")
    assert (
        b.el("kind-concealed").get_attribute("aria-pressed") == "true"
        and b.el("tile-7s").get_attribute("aria-pressed") == "true"
    )
    b.screenshot("refused")
    b.tap("cancel")
    assert api.table(table["t"], table["k"])["version"] == version
    synced(api, table, a, b, expect=[-12, -6, 36, -18])

    # one discard, two winners: 西 feeds 东 (对对胡 picked from the patterns: 2 fan) and 北 (3 fan typed)
    a.tap("record-hu")
    a.tap("from-2")
    a.tap("seat-0")
    a.tap("seat-3")
    a.tiles("9p")
    a.tap("confirm")
    a.tap("pattern-duiduihu")
    assert a.el("fan-input").get_attribute("value") == "2"
    a.screenshot("hu-patterns")
    a.tap("confirm")
    a.type("fan-input", "3")
    a.tap("confirm")
    synced(api, table, a, b, expect=[0, -6, 0, 6])
    # (the transfers in words follow the balances: worked out by POST /v1/rounds/settle)
    a.wait(lambda: all(w in a.text("event-4") for w in ("西 pays 东 12", "西 pays 北 24", "All triplets")),
           "the two wins in words")

    # 南 self-drawn on 4p, the hand entered with the tile picker (the 5m kong is prefilled):
    # 平胡 1 + 根 1 = 2 fan = 12, paid by 西 alone (东 and 北 have won); the round ends
    b.tap("record-hu")
    b.tap("self-drawn")
    b.tap("seat-1")
    b.tiles("4p")
    b.tap("mode-hand")
    b.tap("confirm")
    b.tiles("123678m2399p")
    b.wait(lambda: "2" in b.text("score-total"), "the server's score")
    assert "Root" in b.text("hand-result") and "12" in b.text("score-total")
    b.screenshot("hu-hand")
    b.tap("confirm")
    synced(api, table, a, b, expect=[0, 6, -12, 6])
    a.wait(lambda: a.has("round-start"), "the round to end")
    a.wait(lambda: "西 pays 南 12" in a.text("event-5") and "Root" in a.text("event-5"), "the self-drawn win in words")

    # round 2: the dealer preset from round 1 (一炮多响: the discarder 西)
    b.tap("round-start")
    assert b.el("seat-2").get_attribute("aria-pressed") == "true"
    b.tap("confirm")
    a.wait(lambda: a.has("record-draw"), "round 2 on phone a")
    a.tap("record-kong")
    a.tap("seat-3")
    a.tap("kind-added")
    a.tiles("2s")
    a.tap("confirm")
    synced(api, table, a, b, expect=[-6, 0, -18, 24])

    # 流局: 东 ting 2 fan, 南 ting with a hand (大叫 4 fan), 西 not ting, 北 花猪
    a.tap("record-draw")
    a.tap("status-ting")
    a.type("fan-input", "2")
    a.tap("confirm")
    a.tap("status-hand")
    a.tiles("111234567899m5p")  # (not ting: POST /v1/hands/shanten says 1 tile from ready)
    a.wait(lambda: a.text("hand-result") == "Not ting (1 tile from ready)", "how far the hand is from ting")
    a.tap("clear-hand")
    a.tiles("1112345678999m")
    a.wait(lambda: "4" in a.text("hand-result"), "the waits of 南's hand")
    a.screenshot("draw-hand")
    a.tap("confirm")
    a.tap("status-not_ting")
    a.tap("confirm")
    a.tap("status-huazhu")
    a.tap("confirm")
    # 北 refunds 18, pays 96 to each; 西 pays 大叫 12 to 东 and 48 to 南
    synced(api, table, a, b, expect=[108, 150, 24, -282])
    a.screenshot("after-draw")
    rounds = api.table(table["t"], table["k"])["rounds"]
    assert [r["deltas"] for r in rounds] == [[0, 6, -12, 6], [108, 144, 36, -288]]
    a.wait(lambda: "108" in a.el("rounds").text and "-288" in a.el("rounds").text, "round 2 in the rounds table")

    # undo (after a confirmation) the draw: the round is open again, on both phones
    b.tap("undo")
    assert "#" in b.text("confirm-text")
    b.tap("confirm")
    synced(api, table, a, b, expect=[-6, 0, -18, 24])
    b.wait(lambda: b.has("record-draw"), "the round reopened")
    events = api.events(table["t"], table["k"])
    assert events[-1]["type"] == "void" and events[-2]["type"] == "draw" and events[-2]["voided"] is True


def test_offline_event_is_queued_and_sent_once(service, api, phones):
    proxy = FlakyProxy(service.port)
    try:
        a = phones("a")
        table = create_table(a, proxy.url)
        a.tap("round-start")
        a.tap("confirm")
        a.wait(lambda: a.has("record-kong"), "the round")
        before = api.events(table["t"], table["k"])

        # the network is gone: the kong waits in the outbox
        proxy.set_mode("down")
        a.tap("record-kong")
        a.tap("seat-0")
        a.tap("kind-concealed")
        a.tiles("3m")
        a.tap("confirm")
        a.wait(lambda: a.text("pending-count") == "1", "one pending event")
        a.wait(lambda: a.text("online") in ("offline", "离线"), "offline shown")
        # a wrong tap made offline is taken back before it is ever sent
        a.tap("record-peng")
        a.tap("seat-1")
        a.tap("from-0")
        a.tiles("6p")
        a.tap("confirm")
        a.wait(lambda: a.text("pending-count") == "2", "two pending events")
        a.screenshot("offline-pending")
        a.tap("pending-cancel-1")
        a.wait(lambda: a.text("pending-count") == "1", "the peng taken back")
        assert api.events(table["t"], table["k"]) == before

        # the request gets through but its answer is lost: the phone retries with its key
        proxy.set_mode("lost_answers")
        a.wait(lambda: proxy.lost >= 1, "a lost answer")
        assert a.text("pending-count") == "1"
        proxy.set_mode("up")
        a.wait(lambda: a.text("pending-count") == "0", "the outbox to empty")
        a.wait_balances([36, -12, -12, -12])
        recorded = api.events(table["t"], table["k"])[len(before):]
        assert [(e["type"], e["tile"]) for e in recorded] == [("kong", "3m")]  # exactly once, no peng
        assert api.table(table["t"], table["k"])["balances"] == [36, -12, -12, -12]
    finally:
        proxy.close()


def test_offline_conflict_is_shown_not_hidden(service, api, phones):
    """An event that waited offline while another phone changed the table is refused (412): the
    phone says so and keeps it as a draft (item 9), which survives a reload and is resubmitted with
    one tap against the table as it is now."""
    proxy = FlakyProxy(service.port)
    try:
        a = phones("a")
        table = create_table(a, proxy.url)
        a.tap("round-start")
        a.tap("confirm")
        a.wait(lambda: a.has("record-kong"), "the round")
        proxy.set_mode("down")
        a.tap("record-kong")
        a.tap("seat-0")
        a.tap("kind-concealed")
        a.tiles("3m")
        a.tap("confirm")
        a.wait(lambda: a.text("pending-count") == "1", "one pending event")
        # meanwhile another phone records something
        status, _, _ = request(service.port, "POST", f"/v1/tables/{table['t']}/events",
                               {"type": "kong", "seat": 1, "kind": "concealed", "tile": "4s"},
                               {"Authorization": f"Bearer {table['k']}"})
        assert status == 201
        proxy.set_mode("up")
        a.wait(lambda: a.text("pending-count") == "0", "the outbox to empty")
        a.wait(lambda: a.text("error"), "the conflict shown")
        assert "Another phone changed the table first" in a.text("error")
        # kept as a draft, not thrown away (item 9)
        a.wait(lambda: "东 kongs 3 Characters concealed" in a.text("draft-0"), "the refused kong kept as a draft")
        a.screenshot("offline-conflict")
        kongs = [e for e in api.events(table["t"], table["k"]) if e["type"] == "kong"]
        assert [k["tile"] for k in kongs] == ["4s"]
        a.wait_balances([-12, 36, -12, -12])
        # kept on the phone: a reload still has it, once
        a.d.refresh()
        a.wait(lambda: a.has("balance-0") and "东 kongs 3 Characters concealed" in a.text("draft-0"),
               "the draft after a reload")
        a.wait_balances([-12, 36, -12, -12])
        assert not a.has("draft-1") and a.text("pending-count") == "0"
        # one tap resubmits it, against the table as it is now
        a.tap("draft-resubmit-0")
        synced(api, table, a, expect=[24, 24, -24, -24])
        assert not a.has("draft-0")
        kongs = [e for e in api.events(table["t"], table["k"]) if e["type"] == "kong"]
        assert [k["tile"] for k in kongs] == ["4s", "3m"]
    finally:
        proxy.close()


def test_app_shell_opens_offline(service, api, phones):
    proxy = FlakyProxy(service.port)
    try:
        a = phones("a")
        create_table(a, proxy.url)
        a.tap("round-start")
        a.tap("confirm")
        a.wait(lambda: a.has("record-kong"), "the round")
        a.wait(lambda: a.js("return !!(navigator.serviceWorker && navigator.serviceWorker.controller)"),
               "the service worker to control the page")
        proxy.set_mode("down")
        a.d.refresh()
        a.wait(lambda: a.has("balance-0"), "the table from the cache")
        a.wait(lambda: a.text("online") == "offline", "offline shown")
        assert a.balances() == [0, 0, 0, 0] and a.has("record-kong")
        a.screenshot("offline-reload")
        proxy.set_mode("up")
        a.wait(lambda: a.text("online") == "online", "back online")
    finally:
        proxy.close()


def test_read_only_link_cannot_write(service, api, phones):
    a = phones("a")
    table = create_table(a, service.url)
    a.tap("round-start")
    a.tap("confirm")
    watcher = phones("watcher")
    watcher.d.get(a.el("share-read-link").get_attribute("href"))
    watcher.wait(lambda: watcher.has("balance-0"), "the table")
    assert not any(watcher.has(x) for x in ("record-kong", "record-hu", "round-start", "undo", "share-link"))
    assert watcher.has("share-read-link")
    # the read token itself is refused by the API
    status = watcher.d.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const read = new URLSearchParams(location.hash.slice(1)).get('r');
        fetch(`/v1/tables/${arguments[0]}/events`, {method: 'POST', headers: {'Content-Type': 'application/json',
          Authorization: `Bearer ${read}`}, body: JSON.stringify({type: 'round_end'})}).then((r) => done(r.status));
    """, table["t"])
    assert status == 403
    # it still sees the table live
    request(service.port, "POST", f"/v1/tables/{table['t']}/events",
            {"type": "kong", "seat": 3, "kind": "concealed", "tile": "9s"}, {"Authorization": f"Bearer {table['k']}"})
    watcher.wait_balances([-12, -12, -12, 36])
    watcher.screenshot("read-only")
    # a peng (no payment) and an escape, recorded on the writer's phone, reach the watcher
    a.tap("record-peng")
    a.tap("seat-1")
    a.tap("from-0")
    a.tiles("6p")
    a.tap("confirm")
    watcher.wait(lambda: "南 pengs 6 Dots (from 东)" in watcher.text("event-3"), "the peng")
    a.tap("record-escape")
    a.tap("seat-0")
    a.tap("confirm")
    # 东 leaves: 16 units × 6 to each of the three others; the round ends
    synced(api, table, a, watcher, expect=[-300, 84, 84, 132])
    watcher.wait(
        lambda: "东 escapes" in watcher.text("event-4") and "东 pays 北 96 — escape" in watcher.text("event-4"),
        "the escape in words",
    )


def test_both_languages(service, api, phones):
    a = phones("a")
    a.d.get(service.url + "/")
    a.wait(lambda: a.has("create-table"), "the start page")
    assert a.text("create-table") == "Create table" and a.js("return document.documentElement.lang") == "en"
    a.tap("lang")
    a.wait(lambda: a.text("create-table") == "开桌", "Chinese")
    assert a.js("return document.documentElement.lang") == "zh-CN"
    a.screenshot("start-zh")
    for i, n in enumerate(["Ann", "Bo", "Cy", "Di"]):
        a.type(f"player-{i}", n)
    a.tap("create-table")
    a.wait(lambda: a.has("round-start"), "the table")
    answer_seat(a)
    assert a.text("round-start") == "开始新局"
    a.tap("round-start")
    a.tap("confirm")
    a.tap("record-kong")
    a.tap("seat-0")
    a.tap("kind-concealed")
    a.tiles("8p")
    a.tap("confirm")
    a.wait_balances([36, -12, -12, -12])
    a.wait(lambda: "Bo 付给 Ann 12 分（暗杠）" in a.text("event-2"), "the transfers in Chinese")
    a.js("window.scrollTo(0, 0)")
    a.screenshot("table-zh")  # the README's picture (docs/table-zh.png)
    # Ann wins on the kong's replacement tile: 自摸 with 杠上花, 2 fan typed → 12 from each
    a.tap("record-hu")
    a.tap("self-drawn")
    a.tap("seat-0")
    a.tiles("3s")
    a.tap("special-gangshanghua")
    assert a.el("fan-input").get_attribute("value") == "2"  # (平胡 and 杠上花)
    a.type("fan-input", "2")
    a.tap("confirm")
    a.wait_balances([72, -24, -24, -24])
    a.wait(lambda: "杠上花" in a.text("event-3") and "Cy 付给 Ann 12 分（自摸，2番）" in a.text("event-3"),
           "the win in Chinese")
    a.tap("lang")
    a.wait(lambda: "Bo pays Ann 12 — concealed kong" in a.text("event-2"), "the transfers in English")
    a.wait(lambda: "On a kong replacement (杠上花)" in a.text("event-3"), "the win in English")
    assert a.text("record-kong") == "Kong"
    a.screenshot("table-en")


SMALL_OR_UNNAMED = """
    const out = [];
    for (const e of document.querySelectorAll('button, input, select, a, summary')) {
      let r = e.getBoundingClientRect();
      if (!r.width || !r.height || getComputedStyle(e).visibility === 'hidden') continue;
      // a checkbox is tapped anywhere on its label
      if (e.type === 'checkbox' && e.closest('label')) r = e.closest('label').getBoundingClientRect();
      const small = r.width < 44 || r.height < 44;
      let name = e.getAttribute('aria-label') || e.textContent.trim();
      if (!name && e.id) { const l = document.querySelector(`label[for="${e.id}"]`); name = l && l.textContent.trim(); }
      if (!name && e.closest('label')) name = e.closest('label').textContent.trim();
      if (small || !name) out.push(`${e.tagName} ${e.dataset.testid || ''} ${Math.round(r.width)}x${Math.round(r.height)} ${name ? '' : 'unnamed'}`);
    }
    return out;
"""


def test_tap_targets_and_labels(service, api, phones):
    """On every screen (the start page with its options and stakes, the table, each recording
    dialog and its steps, in both languages for the table): every visible control is at least
    44×44 CSS px and has an accessible name, and nothing scrolls sideways at 360 px."""
    a = phones("a")

    def check(screen: str) -> None:
        assert a.js(SMALL_OR_UNNAMED) == [], screen
        assert a.js("return document.documentElement.scrollWidth") <= 360, screen

    a.d.get(service.url + "/")
    a.wait(lambda: a.has("create-table"), "the start page")
    a.js("document.querySelector('details.options').open = true")
    a.tap("stakes-on")
    check("start page, options and stakes")
    for i, name in enumerate(("东", "南", "西", "北")):
        a.type(f"player-{i}", name)
    a.tap("create-table")
    a.wait(lambda: a.has("dlg-whoAmI"), "the seat question")
    check("the seat question")
    answer_seat(a)
    a.wait(lambda: a.has("round-start") and a.has("share-qr"), "the table and its QR code")
    check("new table with its share section")
    a.tap("round-start")
    check("round start dialog (dealer, 定缺)")
    a.tap("confirm")
    a.wait(lambda: a.has("record-hu"), "the round")
    for lang in ("en", "zh"):
        check(f"table ({lang})")
        a.tap("lang")
    a.tap("record-kong")
    a.tap("seat-0")
    a.tap("kind-direct")
    check("kong dialog")
    a.tap("cancel")
    a.tap("record-peng")
    check("peng dialog")
    a.tap("cancel")
    a.tap("record-hu")
    a.tap("from-1")
    a.tap("seat-0")
    a.tiles("5s")
    check("hu dialog, first step (fan, the special wins and patterns)")
    a.tap("special-qiangganghu")
    check("hu dialog, a special win chosen")
    a.tap("mode-hand")
    a.tap("confirm")
    check("hu dialog, the hand picker")
    a.screenshot("hand-picker")
    a.tap("cancel")
    a.tap("record-draw")
    a.tap("status-hand")
    check("draw dialog, a hand")
    a.tap("cancel")
    a.tap("record-escape")
    a.tap("last-four")
    check("escape dialog")
    a.tap("cancel")
    a.tap("undo")
    check("undo confirmation")
    a.tap("cancel")


def test_sse_reader_parses_any_chunking(service, phones):
    a = phones("a")
    a.d.get(service.url + "/")
    events = a.d.execute_async_script("""
        const done = arguments[arguments.length - 1];
        import('/web/sse.js').then(({ createSseParser }) => {
          const text = ': hi\\r\\nid: 3\\r\\nevent: record\\r\\ndata: {"seq": 3,\\r\\ndata:  "x": 1}\\r\\n\\r\\n'
            + 'data: plain\\n\\nevent: deleted\\ndata\\n\\n';
          const runs = [];
          for (const size of [1, 2, 5, text.length]) {
            const got = [];
            const p = createSseParser((e) => got.push(e));
            for (let i = 0; i < text.length; i += size) p.push(text.slice(i, i + size));
            runs.push(got);
          }
          done(runs);
        });
    """)
    expected = [{"event": "record", "data": '{"seq": 3,\n "x": 1}', "id": "3"},
                {"event": "message", "data": "plain", "id": "3"},
                {"event": "deleted", "data": "", "id": "3"}]
    assert all(run == expected for run in events), events


def test_no_external_request_from_the_app_or_the_docs(service, phones):
    # an external host cannot even be resolved: anything that tried would fail to load
    a = phones("a", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1")
    for path in ("/", "/docs"):
        a.d.get(service.url + path)
        if path == "/docs":
            a.wait(lambda: a.all(".opblock"), "Swagger UI to render the operations")
        else:
            a.wait(lambda: a.has("create-table"), "the app")
        origins = a.js("""
            return performance.getEntriesByType('resource').concat(performance.getEntriesByType('navigation'))
              .map((e) => new URL(e.name).origin);
        """)
        assert set(origins) == {service.url}, origins
    a.screenshot("docs")
    logs = [entry["message"] for entry in a.d.get_log("browser") if entry["level"] == "SEVERE"]
    assert not [m for m in logs if "ERR_NAME_NOT_RESOLVED" in m], logs


RECORD_FETCH = """
window.__calls = [];
const realFetch = window.fetch.bind(window);
window.fetch = (url, opts = {}) => {
  const headers = opts.headers || {};
  window.__calls.push({ path: new URL(url, location.href).pathname, auth: headers.Authorization || null,
    method: opts.method || 'GET', key: headers['X-API-Key'] || null });
  return realFetch(url, opts);
};
"""


def access_log(service) -> list[dict]:
    """The service's access log so far (one JSON line per request: method, path, status, request_id)."""
    out = []
    for line in service.log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("event") == "request":
            out.append(entry)
    return out


def requests_of(phone: Phone, service, since: int = 0) -> list[tuple[str, str, int]]:
    """(method, path, status) of the requests one phone made (its X-Request-ID names it), from
    entry ``since`` of the access log on."""
    device = phone.js("return localStorage.getItem('mj.device')")
    assert device and len(device) == 8, device
    return [(e["method"], e["path"], e["status"]) for e in access_log(service)[since:]
            if str(e.get("request_id", "")).startswith(f"web-{device}-")]


def live_mode(phone: Phone) -> str:
    return phone.js("const e = document.getElementById('status'); return e ? e.dataset.live : null")


def status_version(phone: Phone) -> str | None:
    """The table version the phone has (kept on the status line for the developers, not shown)."""
    return phone.js("const e = document.getElementById('status'); return e ? e.dataset.version : null")


def test_the_live_stream_between_two_phones(service, api, phones):
    """Two phones on the real table stream (GET /v1/tables/{id}/stream): an event recorded on
    one shows on the other with no polling (the service's access log shows no table read by
    the watching phone while nothing happens, and none of the log: records come on the stream);
    a stream dropped by the network resumes with Last-Event-ID and the phone ends with every
    record once, the ones recorded while it was cut off included."""
    proxy = FlakyProxy(service.port)
    try:
        a = phones("a")
        table = create_table(a, service.url)
        table_path = f"/v1/tables/{table['t']}"
        b = phones("b")  # b reaches the service through a network that can fail
        join(b, a.el("share-link").get_attribute("href").replace(service.url, proxy.url))
        b.wait(lambda: live_mode(b) == "stream", "phone b on the stream")
        assert live_mode(a) == "stream"
        opened = requests_of(b, service)
        assert opened.count(("GET", f"{table_path}/stream", 200)) == 1, opened

        # an event on a: on b at once, with no read of the log and at most one view GET per record
        mark = len(access_log(service))
        a.tap("round-start")
        a.tap("confirm")
        a.wait(lambda: a.has("record-kong"), "the round on phone a")
        a.tap("record-kong")
        a.tap("seat-2")
        a.tap("kind-concealed")
        a.tiles("2s")
        a.tap("confirm")
        synced(api, table, a, b, expect=[-12, -12, 36, -12])
        b.wait(lambda: "西 kongs 2 Bamboo concealed" in b.text("event-2"), "the kong in b's history")
        b.wait(lambda: "this round +36" in b.text("seat-card-2"), "the round as of the kong on phone b")
        seen = requests_of(b, service, mark)
        assert not [r for r in seen if r[1] == f"{table_path}/events"], seen  # the records came on the stream
        assert not [r for r in seen if r[1] == f"{table_path}/stream"], seen  # on the stream opened before
        assert 1 <= seen.count(("GET", table_path, 200)) <= 2, seen          # the round, once per record at most
        # (the round shows at once from the stream; the view GET that follows the kong comes at most a
        # second after the one of the round start: let it land before the quiet period)
        from selenium.common.exceptions import TimeoutException
        try:
            b.wait(
                lambda: requests_of(b, service, mark).count(("GET", table_path, 200)) >= 2,
                "the second view GET",
                timeout=3,
            )
        except TimeoutException:
            pass  # (both records came in one burst: one GET)
        seen = requests_of(b, service, mark)
        assert 1 <= seen.count(("GET", table_path, 200)) <= 2, seen          # the round, once per record at most
        # nothing happens: b asks nothing (a polling phone would read the table every 1.5 s) while its
        # stream goes on, seen by the keep-alives it passes on to b (one a second)
        mark, heard = len(access_log(service)), proxy.keepalives
        b.wait(lambda: proxy.keepalives >= heard + 4, "four keep-alives on phone b's quiet stream")
        assert requests_of(b, service, mark) == [] and live_mode(b) == "stream"

        # the network drops b's stream; meanwhile a records a peng, a kong, another kong and undoes it
        proxy.set_mode("down")
        b.wait(lambda: b.text("online") == "offline", "phone b to see the network gone")
        mark = len(access_log(service))
        a.tap("record-peng")
        a.tap("seat-1")
        a.tap("from-0")
        a.tiles("6p")
        a.tap("confirm")
        a.tap("record-kong")
        a.tap("seat-3")
        a.tap("kind-direct")
        a.tap("from-0")
        a.tiles("9m")
        a.tap("confirm")
        synced(api, table, a, expect=[-18, -12, 36, -6])
        a.tap("record-kong")
        a.tap("seat-1")
        a.tap("kind-concealed")
        a.tiles("1p")
        a.tap("confirm")
        synced(api, table, a, expect=[-30, 24, 24, -18])
        a.tap("undo")
        a.tap("confirm")
        synced(api, table, a, expect=[-18, -12, 36, -6])
        assert b.balances() == [-12, -12, 36, -12] and requests_of(b, service, mark) == []

        # the network is back: b resumes where it stopped (the records it missed come first)
        proxy.set_mode("up")
        synced(api, table, a, b, expect=[-18, -12, 36, -6])
        b.wait(lambda: live_mode(b) == "stream" and status_version(b) == "6", "phone b streaming again, at version 6")
        events = api.events(table["t"], table["k"])
        assert [e["seq"] for e in events] == [1, 2, 3, 4, 5, 6] and events[4]["voided"] and events[5]["type"] == "void"
        shown = b.js("return Array.from(document.querySelectorAll('[data-testid^=event-]'), (e) => e.dataset.testid)")
        assert shown == ["event-6", "event-4", "event-3", "event-2", "event-1"], (
            shown
        )  # each once; the undone kong hidden
        b.wait(lambda: "南 pengs 6 Dots (from 东)" in b.text("event-3") and "东 pays 北 6" in b.text("event-4"),
               "the missed records in words")
        resumed = requests_of(b, service, mark)
        assert ("GET", f"{table_path}/stream", 200) in resumed, resumed
        assert not [r for r in resumed if r[1] == f"{table_path}/events"], (
            resumed
        )  # not from the log: the stream resumed
        b.screenshot("stream-resumed")
    finally:
        proxy.close()


def test_polling_only_while_the_stream_is_unavailable(service, api, phones):
    """A phone that cannot open the stream while the rest of the API answers (the browser blocks
    the stream's URL, as a proxy that cuts long requests would) polls: conditional GETs of the
    view (304 while nothing changed), the log when the version moved, and it shows every event.
    Once the stream opens again (tried again when the browser is back online) it stops polling."""
    proxy = FlakyProxy(service.port)  # (always up: it counts the keep-alives the phone gets)
    try:
        a = phones("a")
        a.d.execute_cdp_cmd("Network.enable", {})
        a.d.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/stream*"]})
        table = create_table(a, proxy.url)
        table_path = f"/v1/tables/{table['t']}"
        a.wait(lambda: live_mode(a) == "poll", "polling")
        assert a.text("online") == "online" and a.text("live-mode") == "updates a few seconds late"
        mark = len(access_log(service))
        auth = {"Authorization": f"Bearer {table['k']}"}
        assert request(service.port, "POST", f"{table_path}/events", {"type": "round_start"}, auth)[0] == 201
        assert request(service.port, "POST", f"{table_path}/events",
                       {"type": "kong", "seat": 1, "kind": "concealed", "tile": "4p"}, auth)[0] == 201
        a.wait_balances([-12, 36, -12, -12])
        a.wait(lambda: "南 kongs 4 Dots concealed" in a.text("event-2"), "the kong in the history")
        a.wait(lambda: ("GET", table_path, 304) in requests_of(a, service, mark), "a poll answered 304")
        polled = requests_of(a, service, mark)
        assert ("GET", f"{table_path}/events", 200) in polled, polled        # the log, when the version moved
        assert not [r for r in polled if r[1].endswith("/stream")], polled   # (blocked in the browser)
        assert {r[2] for r in polled if r[1] == table_path} <= {200, 304}, polled

        a.d.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
        a.js("window.dispatchEvent(new Event('online'))")
        a.wait(lambda: live_mode(a) == "stream", "the stream again")
        assert ("GET", f"{table_path}/stream", 200) in requests_of(a, service, mark)
        # no more polling: nothing asked while the stream goes on, over more than two polling periods
        # (one keep-alive a second reaches the phone)
        mark, heard = len(access_log(service)), proxy.keepalives
        a.wait(lambda: proxy.keepalives >= heard + 4, "four keep-alives on phone a's stream")
        assert requests_of(a, service, mark) == [] and live_mode(a) == "stream"
    finally:
        proxy.close()


def test_an_api_key_entered_once_goes_with_every_call(service, phones):
    """A service run with API keys needs X-API-Key on calls without a table token (docs/api.md):
    entered once on the start page, the phone sends it with every API call."""
    a = phones("a")
    a.d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD_FETCH})
    a.d.get(service.url + "/")
    a.wait(lambda: a.has("create-table"), "the start page")
    a.js("document.querySelector('details.options').open = true")
    a.type("api-key", "k" * 40)
    assert a.el("api-key").get_attribute("type") == "password"
    a.js("document.querySelector('[data-testid=api-key]').dispatchEvent(new Event('change'))")
    for i, n in enumerate("ABCD"):
        a.type(f"player-{i}", n)
    a.tap("create-table")
    a.wait(lambda: a.has("round-start"), "the table")
    answer_seat(a)
    a.wait(lambda: live_mode(a) == "stream", "the table stream")
    calls = [r for r in a.js("return window.__calls") if r["path"].startswith("/v1/")]
    assert calls[0] == {"path": "/v1/rulesets", "auth": None, "method": "GET", "key": None}  # before it was entered
    after = calls[1:]
    assert {"/v1/rulesets", "/v1/tables", f"/v1/tables/{fragment(a.d.current_url)['t']}/stream"} <= {
        r["path"] for r in after
    }
    assert all(r["key"] == "k" * 40 for r in after), after


def test_a_table_with_stakes_shows_the_apis_coins(service, api, phones):
    """Seed 001's room from the start page (200 coins a point, a 400 fee, seat 1 short of coins):
    the phone shows the coins the API holds, after a round and after a buy-in between rounds."""
    from selenium.webdriver.support.select import Select

    a = phones("a")
    a.d.get(service.url + "/")
    wait_rooms(a)
    Select(a.el("ruleset")).select_by_value("normal")
    a.js("document.querySelector('details.options').open = true")
    Select(a.el("opt-zimo")).select_by_value("base")                  # 自摸加底
    for i, name in enumerate(("东", "南", "西", "北")):
        a.type(f"player-{i}", name)
    a.tap("stakes-on")
    a.type("stakes-cpp", "200")
    a.type("stakes-fee", "400")
    for i, coins in enumerate((20000, 1000, 20000, 20000)):
        a.type(f"stakes-bankroll-{i}", str(coins))
    a.screenshot("stakes-start")
    a.tap("create-table")
    a.wait(lambda: "#t=" in a.d.current_url, "the table to open")
    answer_seat(a)
    table = fragment(a.d.current_url)
    view = api.table(table["t"], table["k"])
    assert view["ruleset"]["zimo"] == "base" and view["coins"] == [20000, 1000, 20000, 20000]

    def shown() -> list[int | None]:
        texts = a.js("return [0, 1, 2, 3].map((i) => { const e = document.querySelector(`[data-testid='coins-${i}']`);"
                     " return e ? e.textContent : ''; })")
        return [int(t) if t.isdigit() else None for t in texts]

    def coins_synced(expect: list[int]) -> None:
        deadline = time.monotonic() + 20
        while (coins := api.table(table["t"], table["k"]).get("coins")) != expect and time.monotonic() < deadline:
            time.sleep(0.1)
        assert coins == expect
        a.wait(lambda: shown() == coins, f"coins {coins} (shown: {shown()})")

    coins_synced([20000, 1000, 20000, 20000])
    assert a.has("buy-in")                               # buying in: between rounds only
    a.tap("round-start")
    a.tap("confirm")
    a.wait(lambda: a.has("record-hu"), "the round")
    assert not a.has("buy-in")
    # 东 自摸 2 fan: 18 points from each; 南 can pay only its 1,000 coins
    a.tap("record-hu")
    a.tap("self-drawn")
    a.tap("seat-0")
    a.tiles("5p")
    a.tap("fan-2")
    a.tap("confirm")
    synced(api, table, a, expect=[54, -18, -18, -18])
    coins_synced([27800, 0, 16000, 16000])
    # 南 buys in 5,000 between rounds
    a.tap("buy-in")
    a.tap("seat-1")
    a.type("coins-input", "5000")
    a.tap("confirm")
    coins_synced([27800, 5000, 16000, 16000])
    a.wait(lambda: "5000" in a.text("events"), "the buy-in in the history")
    a.screenshot("stakes-table")
    # the end of the evening: one coin figure per person (its coin result) and the payments in coins, the summary's
    a.tap("finish")
    a.tap("confirm")
    a.wait(lambda: a.has("ranking") and a.text("settle-up"), "the end screen")
    status, _, body = request(service.port, "GET", f"/v1/tables/{table['t']}/summary",
                              headers={"Authorization": f"Bearer {table['k']}"})
    summary = json.loads(body)
    assert status == 200 and [s["coins"] for s in summary["seats"]] == [8200, -1000, -3600, -3600]  # (18 points × 200 each; 南 lost only its 1,000)
    for s in summary["seats"]:
        line = a.text(f"rank-{s['seat']}").splitlines()[0]
        assert line.endswith(f" · {s['coins']:+,} coins"), line
    names = summary["players"]
    assert a.text("settle-up").splitlines() == [f"{names[p['from']]} pays {names[p['to']]} {p['coins']:,} coins"
                                                for p in summary["settle_up"]]
    a.screenshot("stakes-end")


def dialog_title(phone: Phone) -> str:
    return phone.js("const e = document.getElementById('dlg-title'); return e ? e.textContent : ''")


def test_a_xueliu_round_winners_play_on(service, api, phones):
    """血流成河 (docs/rules.md#s13's worked example, the kong tile changed to 2s and 南's second win
    entered as a hand): 南 wins twice, then makes a concealed kong; a winner cannot 碰 or 直杠;
    the draw asks only the seats that have not won; a winner's kept hand is filled in for its next
    win. The phone shows the API's balances after every event, and the API the example's."""
    a = phones("a")
    table = create_table(a, service.url, preset="xueliu")
    assert api.table(table["t"], table["k"])["ruleset"]["mode"] == "xueliu"
    a.tap("round-start")
    a.tap("confirm")
    a.wait(lambda: a.has("record-kong"), "the round")
    # 东 暗杠 2s
    a.tap("record-kong")
    a.tap("seat-0")
    a.tap("kind-concealed")
    a.tiles("2s")
    a.tap("confirm")
    synced(api, table, a, expect=[36, -12, -12, -12])
    # 南 自摸, 2 fan: 12 from each other seat
    a.tap("record-hu")
    a.tap("self-drawn")
    a.tap("seat-1")
    a.tiles("3p")
    a.tap("fan-2")
    a.tap("confirm")
    synced(api, table, a, expect=[24, 24, -24, -24])
    a.wait(lambda: "won" in a.text("seat-card-1"), "南 shown as a winner")
    # 南 wins again, on 东's discard 9m, 1 fan, the hand entered: 123456789m 999p 55p
    a.tap("record-hu")
    a.tap("from-0")
    a.tap("seat-1")  # a winner plays on: it can win again
    a.tiles("9m")
    a.tap("mode-hand")
    a.tap("confirm")
    a.tiles("12345678m99955p")
    a.wait(lambda: "1 fan in all" in a.text("score-total"), "the server's score of 南's hand")
    a.tap("confirm")
    synced(api, table, a, expect=[18, 30, -24, -24])
    a.wait(lambda: "won ×2" in a.text("seat-card-1"), "南's two wins")
    # a winner may not 碰 (nor 直杠): its seat is not offered
    a.tap("record-peng")
    assert not a.el("seat-1").is_enabled() and a.el("seat-0").is_enabled()
    a.tap("cancel")
    # 南 暗杠 9p (its kept hand holds 999p; the waits 6m/9m stay): 12 from each other seat
    a.tap("record-kong")
    a.tap("seat-1")
    assert not a.el("kind-direct").is_enabled() and a.el("kind-concealed").is_enabled()
    a.tap("kind-concealed")
    a.tiles("9p")
    a.tap("confirm")
    synced(api, table, a, expect=[6, 66, -36, -36])
    # a third win of 南 would start from its kept hand: 12345678m 55p and the kong of 9p, with the new tile
    a.tap("record-hu")
    a.tap("self-drawn")
    a.tap("seat-1")
    a.tiles("6m")
    a.tap("confirm")
    a.wait(lambda: a.has("kept-hand") and a.el("mode-hand").get_attribute("aria-pressed") == "true", "the kept hand")
    a.wait(lambda: "fan in all" in a.text("score-total"), "the kept hand scored at once")
    held = a.js("return document.querySelectorAll('[data-testid=hand-tiles] svg').length")
    label = a.js("return document.querySelector('.hand .group-label').textContent")
    assert held == 11 and label == "Hand (14/14 tiles)", (held, label)  # 11 concealed + the kong of 9p
    a.screenshot("xueliu-kept-hand")
    a.tap("cancel")
    # 流局: 东 not ting, 西 ting 2 fan, 北 花猪; 南 (has won) is not asked
    a.tap("record-draw")
    asked = [dialog_title(a)]
    a.tap("status-not_ting")
    a.tap("confirm")
    asked.append(dialog_title(a))
    a.tap("status-ting")
    a.type("fan-input", "2")
    a.tap("confirm")
    asked.append(dialog_title(a))
    a.tap("status-huazhu")
    a.tap("confirm")
    assert [t.split(":")[0] for t in asked] == ["东", "西", "北"], asked
    synced(api, table, a, expect=[54, 174, 84, -312])  # §13's example
    view = api.table(table["t"], table["k"])
    assert view["round"]["status"] == "ended" and view["round"]["next_dealer"] == 1
    a.wait(lambda: "Round 1 54 174 84 -312" in a.el("rounds").text, "the round in the rounds table")
    a.screenshot("xueliu-after-draw")
    a.tap("round-start")
    assert a.el("seat-1").get_attribute("aria-pressed") == "true"  # the next dealer: the first winner
    a.tap("cancel")


def test_a_three_player_room_from_the_start_page(service, api, phones):
    """三人两房 (docs/rules.md#s14's example, then a draw and an escape): the start page asks for three
    names; three seats on the board, in every dialog and in the rounds table; no 定缺, no 万
    tiles, no 花猪; a 1-fan discard win is refused in words and changes nothing. The phone shows
    the API's balances after every event."""
    a = phones("a")
    table = create_table(a, service.url, names=("东", "南", "西"), preset="sanren-liangfang")
    view = api.table(table["t"], table["k"])
    assert view["players"] == ["东", "南", "西"] and view["ruleset"]["players"] == 3
    assert not a.has("player-3") and not a.has("balance-3") and a.balances(3) == [0, 0, 0]
    a.tap("round-start")
    assert not a.has("void-0") and not a.has("seat-3")
    a.tap("confirm")
    a.wait(lambda: a.has("record-kong"), "the round")
    # 东 直杠 5p fed by 南: 2 units = 12
    a.tap("record-kong")
    a.tap("seat-0")
    a.tap("kind-direct")
    a.tap("from-1")
    assert not a.has("tile-5m") and a.has("tile-5p") and not a.has("from-3")
    a.tiles("5p")
    a.tap("confirm")
    synced(api, table, a, expect=[12, -12, 0])
    # 南 on 西's discard with 1 fan: refused (no 点炮平胡 in this room), in words, nothing recorded
    version = api.table(table["t"], table["k"])["version"]
    a.tap("record-hu")
    a.tap("from-2")
    a.tap("seat-1")
    a.tiles("7s")
    assert not a.el("fan-1").is_enabled()  # (1番 is not offered for a discard win here)
    a.type("fan-input", "1")
    a.tap("confirm")
    a.wait(lambda: "more than 1 fan" in a.text("dialog-message"), "the refusal in words, in the dialog")
    assert api.table(table["t"], table["k"])["version"] == version
    # with 2 fan: 12; 南 leaves the round
    a.tap("fan-2")
    a.wait(lambda: "= 12 points" in a.text("fan-points"), "the points before confirming")
    a.tap("confirm")
    synced(api, table, a, expect=[12, 0, -12])
    a.wait(lambda: "won" in a.text("seat-card-1"), "南 shown as a winner")
    # 东 自摸 with 5 fan, capped at 4: 48 from 西, the only other seat still in; two have won: the end
    a.tap("record-hu")
    a.tap("self-drawn")
    assert not a.el("seat-1").is_enabled()
    a.tap("seat-0")
    a.tiles("9p")
    a.tap("fan-5")
    a.wait(lambda: "capped at 4 fan" in a.text("fan-points"), "the cap before confirming")
    a.tap("confirm")
    synced(api, table, a, expect=[60, 0, -60])
    a.wait(lambda: a.has("round-start"), "the round to end")

    # round 2, dealer 南 (the first winner): 西 暗杠 3s, then a draw of the three seats
    a.tap("round-start")
    assert a.el("seat-1").get_attribute("aria-pressed") == "true"
    a.tap("confirm")
    a.wait(lambda: a.has("record-draw"), "round 2")
    a.tap("record-kong")
    a.tap("seat-2")
    a.tap("kind-concealed")
    a.tiles("3s")
    a.tap("confirm")
    synced(api, table, a, expect=[48, -12, -36])
    a.tap("record-draw")
    asked = [dialog_title(a)]
    assert a.has("status-not_ting") and not a.has("status-huazhu")  # no 花猪 with three players
    a.tap("status-ting")
    a.type("fan-input", "1")
    a.tap("confirm")
    asked.append(dialog_title(a))
    a.tap("status-not_ting")
    a.tap("confirm")
    asked.append(dialog_title(a))
    a.tap("status-not_ting")
    a.screenshot("three-draw")
    a.tap("confirm")
    assert [t.split(":")[0] for t in asked] == ["东", "南", "西"], asked
    # 西 hands its kong income back (退税); 南 and 西 each pay 东's 大叫 of 1 fan (6)
    synced(api, table, a, expect=[72, -6, -66])

    # round 3: 西 escapes: 16 units (96) to each of the two others
    a.wait(lambda: a.has("round-start"), "round 2 over")
    a.tap("round-start")
    a.tap("confirm")
    a.wait(lambda: a.has("record-escape"), "round 3")
    a.tap("record-escape")
    assert not a.has("seat-3")
    a.tap("seat-2")
    a.tap("confirm")
    synced(api, table, a, expect=[168, 90, -258])
    rounds = api.table(table["t"], table["k"])["rounds"]
    assert [r["deltas"] for r in rounds] == [[60, 0, -60], [12, -6, -6], [96, 96, -192]]
    a.wait(lambda: "-192" in a.el("rounds").text, "round 3 in the rounds table")
    rows = a.js("return Array.from(document.querySelectorAll('[data-testid=rounds] tr'), "
                "(tr) => Array.from(tr.children, (c) => c.textContent))")
    assert rows == [["Rounds", "东", "南", "西"], ["Round 1", "60", "0", "-60"], ["Round 2", "12", "-6", "-6"],
                    ["Round 3", "96", "96", "-192"], ["Totals", "168", "90", "-258"]], rows
    a.js("window.scrollTo(0, 0)")
    a.screenshot("three-players")


def test_round_history_follows_rounds_next(service, api, phones):
    """A table with more rounds than one page of GET /v1/tables/{id} (100): the phone shows every
    round, in order, then the next one; a void that reopens the last round takes it off."""
    import http.client

    status, _, body = request(service.port, "POST", "/v1/tables", {"players": ["东", "南", "西", "北"]})
    assert status == 201
    t = json.loads(body)
    conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=10)
    auth = {"Authorization": f"Bearer {t['token']}", "Content-Type": "application/json"}

    def post(event: dict, path: str = "/events") -> dict:
        conn.request("POST", f"/v1/tables/{t['id']}{path}", body=json.dumps(event) if event else None, headers=auth)
        r = conn.getresponse()
        data = json.loads(r.read())
        assert r.status == 201, data
        return data

    try:
        for n in range(1, 102):  # 101 rounds, each with a concealed kong by seat n % 4
            post({"type": "round_start"})
            post({"type": "kong", "seat": n % 4, "kind": "concealed", "tile": "5p"})
            post({"type": "round_end"})
        view = api.table(t["id"], t["token"])
        assert len(view["rounds"]) == 100 and view["rounds_next"] == 100  # more than one page
        a = phones("a")
        mark = len(access_log(service))
        a.d.get(f"{service.url}/#t={t['id']}&k={t['token']}")
        a.wait(lambda: a.has("round-start"), "the table")
        answer_seat(a)

        def rows() -> list[list[str]]:
            return a.js("return Array.from(document.querySelectorAll('[data-testid=rounds] tbody tr'), "
                        "(tr) => Array.from(tr.children, (c) => c.textContent))")

        a.wait(lambda: len(rows()) == 102, "101 rounds and the totals")
        shown = rows()
        assert [r[0] for r in shown[:-1]] == [f"Round {n}" for n in range(1, 102)]
        assert shown[0][1:] == ["-12", "36", "-12", "-12"] and shown[100][1:] == ["-12", "36", "-12", "-12"]
        assert shown[-1] == ["Totals", *map(str, api.table(t["id"], t["token"])["balances"])]
        reads = [r for r in requests_of(a, service, mark) if r[1] == f"/v1/tables/{t['id']}"]
        assert reads == [("GET", f"/v1/tables/{t['id']}", 200)] * 2, reads  # two pages

        # a 102nd round comes on the stream; then its round_end is undone: the round is open again
        post({"type": "round_start"})
        post({"type": "kong", "seat": 3, "kind": "concealed", "tile": "7s"})
        end = post({"type": "round_end"})
        a.wait(lambda: len(rows()) == 103 and rows()[101] == ["Round 102", "-12", "-12", "-12", "36"], "round 102")
        post(None, f"/events/{end['seq']}/void")
        a.wait(
            lambda: len(rows()) == 103 and rows()[101][0] == "this round" and a.has("record-kong"), "round 102 reopened"
        )
        assert rows()[-1] == ["Totals", *map(str, api.table(t["id"], t["token"])["balances"])]
    finally:
        conn.close()


# -- regressions (each failed before its fix) ---------------------------------------------------
STATUS_TEXTS = """
window.__status = [];
new MutationObserver(() => {
  const e = document.getElementById('status');
  if (e) { const t = e.innerText; if (window.__status[window.__status.length - 1] !== t) window.__status.push(t); }
}).observe(document, { subtree: true, childList: true, characterData: true });
"""


def statuses(phone: Phone) -> list[str]:
    return phone.js("return window.__status || []")


def test_no_null_in_the_status_after_joining_while_the_server_is_unreachable(service, api, phones):
    """Bug 10: joining by the share link while the API cannot be reached showed "null"/"nullnull"
    in the status bar (statusParts() gave replaceChildren null entries)."""
    a = phones("a")
    create_table(a, service.url)
    share = a.el("share-link").get_attribute("href")
    b = phones("b")
    b.d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": STATUS_TEXTS})
    b.d.execute_cdp_cmd("Network.enable", {})
    b.d.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/v1/*"]})
    b.d.get(share)
    b.wait(lambda: b.text("online") == "offline", "offline shown")
    seen = statuses(b)
    assert seen and not [x for x in seen if "null" in x], seen
    assert b.text("waiting") == "Cannot reach the server."
    b.screenshot("join-unreachable")


def test_the_names_message_does_not_follow_onto_the_new_table(service, phones):
    """Bug 11: the "fill every name" toast stayed over the new table for up to 20 s."""
    a = phones("a")
    a.d.get(service.url + "/")
    a.type("player-0", "东")
    a.tap("create-table")
    a.wait(lambda: a.text("error") == "Enter every player’s name.", "the message about the names")
    for i, name in enumerate(("东", "南", "西", "北")):
        a.type(f"player-{i}", name)
    a.tap("create-table")
    a.wait(lambda: a.has("balance-0"), "the new table")
    assert a.text("error") == "" and a.js("return document.getElementById('toast').hidden")


ROUND_CHECK = """
window.__bad = [];
const check = () => {
  const rows = Array.from(document.querySelectorAll('[data-testid=rounds] tbody tr'), (tr) => Array.from(tr.children, (c) => c.textContent));
  const total = rows.find((r) => r[0] === 'Totals');
  if (!total) return;
  const seats = total.length - 1;
  for (let i = 0; i < seats; i += 1) {
    const sum = rows.filter((r) => r[0] !== 'Totals' && r[0] !== 'coins').reduce((a, r) => a + Number(r[i + 1]), 0);
    const bal = document.querySelector(`[data-testid=balance-${i}]`);
    const delta = document.querySelector(`[data-testid=delta-${i}]`);
    const current = rows.find((r) => r[0] === 'this round');
    if (sum !== Number(total[i + 1])) window.__bad.push(`rounds ${rows.map((r) => r.join(' ')).join(' | ')}`);
    if (current && delta && bal && Number(delta.textContent.replace(/[^-0-9]/g, '')) !== Number(current[i + 1])) {
      window.__bad.push(`seat ${i}: ${delta.textContent} vs ${current[i + 1]}`);
    }
  }
};
new MutationObserver(check).observe(document.getElementById('app'), { subtree: true, childList: true, characterData: true });
"""


def test_this_round_moves_with_the_balance(service, api, phones):
    """Bug 12: 本局 (and the rounds table's "this round" row) lagged the balance for about a second
    after a kong seen on the stream, so that the rounds did not add up to 合计 meanwhile. Every
    change of the page is checked: the rounds add up to the totals, each seat's 本局 is the row's."""
    a = phones("a")
    table = create_table(a, service.url)
    b = phones("b")
    join(b, a.el("share-link").get_attribute("href"))
    b.wait(lambda: live_mode(b) == "stream", "phone b on the stream")
    auth = {"Authorization": f"Bearer {table['k']}"}
    path = f"/v1/tables/{table['t']}/events"
    assert request(service.port, "POST", path, {"type": "round_start"}, auth)[0] == 201
    b.wait(lambda: b.has("record-kong"), "the round on phone b")
    b.js(ROUND_CHECK)
    # two kongs within the second between two view reads: the second one's round comes late
    for seat, tile in ((2, "7s"), (1, "4p"), (3, "9m")):
        assert (
            request(
                service.port, "POST", path, {"type": "kong", "seat": seat, "kind": "concealed", "tile": tile}, auth
            )[0]
            == 201
        )
    b.wait_balances([-36, 12, 12, 12])
    b.wait(lambda: b.text("delta-2") == "this round +12", "this round on phone b")
    assert request(service.port, "POST", path, {"type": "round_end"}, auth)[0] == 201
    b.wait(lambda: b.has("round-row-1"), "the round ended on phone b")
    assert b.js("return window.__bad") == []


def test_offline_and_hanging_servers_are_not_shown_online(service, api, phones):
    """Bug 13: "online" was shown for ~10 s while the server hung, and after a reload offline;
    after that reload the history said "nothing recorded yet" and undo was disabled although the
    phone had the log."""
    proxy = FlakyProxy(service.port)
    try:
        a = phones("a")
        a.d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": STATUS_TEXTS})
        create_table(a, proxy.url)
        a.tap("round-start")
        a.tap("confirm")
        a.tap("record-kong")
        a.tap("seat-0")
        a.tap("kind-concealed")
        a.tiles("3m")
        a.tap("confirm")
        a.wait_balances([36, -12, -12, -12])
        a.wait(lambda: a.js("return !!(navigator.serviceWorker && navigator.serviceWorker.controller)"),
               "the service worker to control the page")
        # the server hangs: the reloaded page says so, never "online"
        proxy.set_mode("hang")
        a.d.refresh()
        a.wait(lambda: a.has("balance-0"), "the table from the cache")
        a.wait(lambda: a.text("online") == "offline", "offline shown (the view GET timed out)")
        assert not [x for x in statuses(a) if x.startswith("online")], statuses(a)
        assert a.text("event-2").startswith("#2") and "kongs 3 Characters concealed" in a.text("event-2")
        # the network is gone: the same, and the log is there, undo too
        proxy.set_mode("down")
        a.d.refresh()
        a.wait(lambda: a.text("online") == "offline", "offline shown")
        assert not [x for x in statuses(a) if x.startswith("online")], statuses(a)
        assert "kongs 3 Characters concealed" in a.text("event-2") and not a.has("no-events")
        assert a.el("undo").is_enabled()
        a.screenshot("offline-reload-log")
        proxy.set_mode("up")
        a.wait(lambda: a.text("online") == "online", "back online")
    finally:
        proxy.close()


def in_view(phone: Phone, testid: str) -> bool:
    return phone.js("const r = document.querySelector(`[data-testid='${arguments[0]}']`).getBoundingClientRect();"
                    "return r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0;", testid)


def test_the_share_screen_and_the_new_round_fit_the_phone(service, api, phones):
    """Bug 14: at 360×640 the QR code and 开始新局 were below the fold on the share screen, and after
    开始新局 the page stayed scrolled at the share section instead of the action buttons."""
    a = phones("a")
    create_table(a, service.url)
    a.wait(lambda: a.has("share-qr"), "the QR code")
    a.js("window.scrollTo(0, 0)")
    assert in_view(a, "share-qr") and in_view(a, "round-start")
    a.screenshot("share-screen")
    a.js("window.scrollTo(0, document.body.scrollHeight)")
    a.tap("round-start")
    a.tap("confirm")
    a.wait(
        lambda: a.has("record-hu") and in_view(a, "record-hu") and in_view(a, "round-end"),
        "the round's buttons in sight",
    )
    a.screenshot("round-started-in-view")


def test_english_words_glossary_and_unwrapped_buttons(service, api, phones):
    """Bug 15: "东 win on" (one winner wins), no glossary of fan / ting / 花猪 / 大叫 in the app, and
    "End round" wrapped onto two lines."""
    a = phones("a")
    table = create_table(a, service.url)
    a.tap("round-start")
    a.tap("confirm")
    a.wait(lambda: a.has("round-end"), "the round")
    lines = a.js("""return Array.from(document.querySelectorAll('.actions button'), (b) => {
      const r = document.createRange(); r.selectNodeContents(b);
      return [b.dataset.testid, new Set(Array.from(r.getClientRects(), (x) => Math.round(x.top))).size]; })""")
    assert all(n == 1 for _, n in lines), lines
    auth = {"Authorization": f"Bearer {table['k']}"}
    request(service.port, "POST", f"/v1/tables/{table['t']}/events",
            {"type": "hu", "from": 2, "tile": "5p", "winners": [{"seat": 1, "fan": 2}]}, auth)
    a.wait(lambda: "南 wins on 5 Dots (from 西)" in a.text("event-2"), "one winner wins")
    a.tap("glossary-open")
    a.wait(lambda: a.has("glossary"), "the glossary")
    words = a.text("glossary")
    assert all(w in words for w in ("Fan (番)", "Ting (听牌)", "Flower pig (花猪)", "Dajiao (大叫)")), words
    a.screenshot("glossary")
    a.tap("confirm")
    a.wait(lambda: not a.has("glossary"), "the glossary closed")


def test_the_same_event_from_two_phones(service, api, phones):
    """Item 8: an event equal to one another phone recorded in the last 30 s (same type, seat, tile)
    is asked about, not added silently (a second 自摸 in 血流); the same kong is "already recorded",
    not a fifth-copy error."""
    a = phones("a")
    table = create_table(a, service.url, preset="xueliu", seat=0)
    b = phones("b")
    join(b, a.el("share-link").get_attribute("href"), seat=1)
    a.tap("round-start")
    a.tap("confirm")
    b.wait(lambda: b.has("record-kong"), "the round on phone b")
    # 南 暗杠 5s, on both phones
    for p in (a, b):
        p.tap("record-kong")
        if p is a:
            p.tap("seat-1")
        p.tap("kind-concealed")
        p.tiles("5s")
        p.tap("confirm")
        if p is a:
            synced(api, table, a, b, expect=[-12, 36, -12, -12])
    b.wait(lambda: "Another phone has already recorded this kong" in b.text("dialog-message"), "already recorded")
    b.tap("cancel")
    # 南 自摸 3p on a, then on b: asked; once confirmed, recorded again (血流: a winner wins again)
    a.tap("record-hu")
    a.tap("self-drawn")
    a.tap("seat-1")
    a.tiles("3p")
    a.tap("fan-2")
    a.tap("confirm")
    synced(api, table, a, b, expect=[-24, 72, -24, -24])
    b.tap("record-hu")
    b.tap("self-drawn")
    b.tiles("3p")
    b.tap("fan-2")
    b.tap("confirm")
    b.wait(
        lambda: b.has("dlg-ask") and "Another phone has just recorded this" in b.text("confirm-text"), "the question"
    )
    b.screenshot("same-event-twice")
    assert api.table(table["t"], table["k"])["balances"] == [-24, 72, -24, -24]
    b.tap("confirm")
    synced(api, table, a, b, expect=[-36, 108, -36, -36])
    hus = [e for e in api.events(table["t"], table["k"]) if e["type"] == "hu"]
    assert len(hus) == 2


def test_the_phones_seat_can_be_changed(service, api, phones):
    """Item 6: the seat said once is changed with the button in the status line (我：…): the
    dialogs then choose the new seat, the seat card marks it, and the phone keeps it across a
    reload without asking again; "just watching" leaves every dialog unchosen."""
    a = phones("a")
    create_table(a, service.url, seat=0)
    a.wait(lambda: a.text("my-seat") == "Me: 东", "the seat in the status line")
    a.tap("round-start")
    a.tap("confirm")
    a.wait(lambda: a.has("record-kong"), "the round")
    a.tap("my-seat")
    a.wait(lambda: a.has("dlg-whoAmI"), "the seat question again")
    assert a.el("me-0").get_attribute("aria-pressed") == "true"  # (the seat said before, chosen)
    a.tap("me-2")
    a.tap("confirm")
    a.wait(lambda: a.text("my-seat") == "Me: 西", "the new seat in the status line")
    assert "mine" in a.el("seat-card-2").get_attribute("class").split()
    assert "mine" not in a.el("seat-card-0").get_attribute("class").split()
    a.tap("record-kong")
    a.wait(lambda: a.el("seat-2").get_attribute("aria-pressed") == "true", "the new seat chosen in the dialog")
    assert a.el("seat-0").get_attribute("aria-pressed") == "false"
    a.tap("cancel")
    # kept on the phone: a reload neither asks nor forgets
    a.d.refresh()
    a.wait(lambda: a.has("record-kong") and a.text("my-seat") == "Me: 西", "the table again, with the seat")
    assert not a.has("dlg-whoAmI")
    # just watching: no seat is chosen for the phone any more
    a.tap("my-seat")
    a.wait(lambda: a.has("dlg-whoAmI"), "the seat question again")
    a.tap("cancel")
    a.wait(lambda: a.text("my-seat") == "My seat?", "no seat in the status line")
    a.tap("record-kong")
    a.wait(lambda: a.has("dlg-kong"), "the kong dialog")
    assert [a.el(f"seat-{i}").get_attribute("aria-pressed") for i in range(4)] == ["false"] * 4


def test_the_same_kong_sent_late_by_a_second_phone(service, api, phones):
    """Item 8: a second phone that records the same kong before it hears of the first one (its
    network gone) is told, once the network is back, that another phone already recorded that kong:
    not a fifth-copy error, and nothing kept to resubmit; the table has the kong once. (Its stream
    stays blocked, so that the refusal comes before any record: the phone reads the log to tell.)"""
    proxy = FlakyProxy(service.port)
    try:
        a = phones("a")
        table = create_table(a, service.url, seat=0)
        b = phones("b")
        join(b, a.el("share-link").get_attribute("href").replace(service.url, proxy.url), seat=1)
        a.tap("round-start")
        a.tap("confirm")
        b.wait(lambda: b.has("record-kong"), "the round on phone b")
        proxy.set_mode("down")
        b.wait(lambda: b.text("online") == "offline", "phone b to see the network gone")
        # 南 暗杠 5s: on phone a, then on phone b, which has not heard of it
        for x in ("record-kong", "seat-1", "kind-concealed", "tile-5s", "confirm"):
            a.tap(x)
        synced(api, table, a, expect=[-12, 36, -12, -12])
        for x in ("record-kong", "kind-concealed", "tile-5s", "confirm"):
            b.tap(x)
        b.wait(lambda: b.text("pending-count") == "1", "the kong waiting on phone b")
        b.d.execute_cdp_cmd("Network.enable", {})
        b.d.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/stream*"]})
        proxy.set_mode("up")
        b.wait(lambda: b.text("pending-count") == "0" and b.text("error"), "phone b's kong answered")
        assert b.text("error") == "Another phone has already recorded this kong: #2 南 kongs 5 Bamboo concealed."
        assert not b.has("draft-0")
        b.wait_balances([-12, 36, -12, -12])
        kongs = [e for e in api.events(table["t"], table["k"]) if e["type"] == "kong"]
        assert [(k["seat"], k["tile"]) for k in kongs] == [(1, "5s")]
    finally:
        proxy.close()


def documented_taps() -> dict[str, int]:
    """The taps docs/table-app.md promises for each usual entry (its table under "Which seat is mine")."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "table-app.md").read_text(encoding="utf-8")
    section = page.split("## Which seat is mine", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^\| (.+?) \| .*\((\d+)[:)]", section, re.M)}


def test_taps_of_a_kong_and_a_win_by_fan(service, api, phones):
    """Item 6: with the phone's seat said once, a concealed kong is 4 taps (kong, kind, tile,
    confirm) and a self-drawn win by fan 5 (hu, self-drawn, tile, fan, confirm), as
    docs/table-app.md says; the tile of a kong is asked (the API takes none without it)."""
    promised = documented_taps()
    a = phones("a")
    table = create_table(a, service.url, seat=2)
    a.tap("round-start")
    a.tap("confirm")
    a.wait(lambda: a.has("record-kong"), "the round")
    # without its tile a kong is not recorded: the dialog says what is missing
    for x in ("record-kong", "kind-concealed", "confirm"):
        a.tap(x)
    a.wait(lambda: a.text("dialog-message") == "Still to choose: Which tile", "the tile asked for")
    a.tap("cancel")
    taps = ["record-kong", "kind-concealed", "tile-7s", "confirm"]
    assert len(taps) == promised["a concealed kong (暗杠)"] == 4
    for x in taps:
        a.tap(x)
    synced(api, table, a, expect=[-12, -12, 36, -12])
    assert [e["type"] for e in api.events(table["t"], table["k"])] == ["round_start", "kong"]
    taps = ["record-hu", "self-drawn", "tile-5p", "fan-3", "confirm"]
    assert len(taps) == promised["a self-drawn win by fan (自摸)"] == 5
    for x in taps[:-1]:
        a.tap(x)
    assert "= 24 points from each" in a.text("fan-points")
    a.tap(taps[-1])
    synced(api, table, a, expect=[-36, -36, 108, -36])
    # (西 has won: out of the round in 血战, so not chosen for a peng)
    a.tap("record-peng")
    assert a.el("seat-2").get_attribute("aria-pressed") == "false" and not a.el("seat-2").is_enabled()
    for x in ("seat-1", "from-0", "tile-6p", "confirm"):
        a.tap(x)
    # the tile of an added kong is the seat's only peng: chosen for it
    for x in ("record-kong", "seat-1", "kind-added"):
        a.tap(x)
    assert a.el("tile-6p").get_attribute("aria-pressed") == "true"
    a.tap("confirm")
    synced(api, table, a, expect=[-42, -24, 108, -42])


def test_every_round_explained_on_every_phone(service, api, phones):
    """Item 5: tapping an ended round shows its events, each with its transfers in words, each
    seat's standing at the draw and the round's deltas; what an undo took back shows on every phone
    (not only the one that undid it); a capped fan shows as capped."""
    from selenium.webdriver.support.select import Select

    a = phones("a")
    a.d.get(service.url + "/")
    wait_rooms(a)
    a.js("document.querySelector('details.options').open = true")
    Select(a.el("opt-cap")).select_by_value("4")
    for i, name in enumerate(("东", "南", "西", "北")):
        a.type(f"player-{i}", name)
    a.tap("create-table")
    a.wait(lambda: "#t=" in a.d.current_url, "the table")
    answer_seat(a)
    table = fragment(a.d.current_url)
    b = phones("b")
    join(b, a.el("share-link").get_attribute("href"))
    auth = {"Authorization": f"Bearer {table['k']}"}
    path = f"/v1/tables/{table['t']}/events"

    def post(event: dict) -> dict:
        status, _, body = request(service.port, "POST", path, event, auth)
        assert status == 201, body
        return json.loads(body)

    post({"type": "round_start"})
    post({"type": "kong", "seat": 1, "kind": "concealed", "tile": "1p"})
    kong = post({"type": "kong", "seat": 3, "kind": "concealed", "tile": "2p"})
    # an undo made on phone a: phone b shows what it took back
    a.wait_balances([-24, 24, -24, 24])
    a.tap("undo")
    a.tap("confirm")
    synced(api, table, a, b, expect=[-12, 36, -12, -12])
    void_seq = kong["seq"] + 1
    b.wait(lambda: f"Undid #{kong['seq']}: 北 kongs 2 Dots concealed" in b.text(f"event-{void_seq}")
           and "taken back: 东 pays 北 12" in b.text(f"event-{void_seq}"), "the undo in words on phone b")
    # 东 自摸 with 5 fan at a table capped at 4
    post({"type": "hu", "from": None, "tile": "5s", "winners": [{"seat": 0, "fan": 5}]})
    b.wait(lambda: "5 fan → capped at 4 fan" in b.text(f"event-{void_seq + 1}"), "the capped fan")
    post({"type": "draw", "seats": [{"seat": 1, "status": "ting", "dajiao_fan": 2}, {"seat": 2, "status": "not_ting"},
                                    {"seat": 3, "status": "huazhu"}]})
    b.wait(lambda: b.has("round-row-1"), "the round ended")
    deltas = api.table(table["t"], table["k"])["rounds"][0]["deltas"]
    b.tap("round-row-1")
    b.wait(
        lambda: "capped at 4 fan" in b.text("round-detail-1") and "taken back" in b.text("round-detail-1"),
        "round 1 explained",
    )
    detail = b.text("round-detail-1")
    assert "南 kongs 1 Dots concealed" in detail and "东 pays 南 12 — concealed kong" in detail
    assert "南: ting (best wait 2 fan)" in detail and "西: not ting" in detail and "北: flower pig (花猪)" in detail
    assert b.text("round-1-deltas") == "This round: " + " & ".join(
        f"{n} {d:+d}" if d else f"{n} 0" for n, d in zip("东南西北", deltas)
    )
    b.screenshot("round-explained")


PNG = b"\x89PNG\r\n\x1a\n"

# The end screen's picture as this phone draws it anew from `summary` (the API's), in the phone's
# language: the words it shows, its PNG (base64) and the size of the picture on the screen. (The
# picture's own blob: URL cannot be read by the page: its Content-Security-Policy allows connect-src
# 'self' only, and fetch() of a blob: URL is a connection. The test compares bytes instead.)
PAINT_AGAIN = """
    const [summary, rounds, done] = arguments;
    Promise.all([import('/web/end.js'), import('/web/summary.js')]).then(async ([end, sum]) => {
      const img = document.querySelector('[data-testid=end-picture]');
      await img.decode();
      const drawing = end.pictureDrawing(summary, rounds);
      const bytes = new Uint8Array(await (await end.paint(drawing)).arrayBuffer());
      let bin = '';
      for (const b of bytes) bin += String.fromCharCode(b);
      const own = sum.drawingText(end.pictureDrawing(summary)); // (the summary's words; the chart's follow them)
      done([own, btoa(bin), img.naturalWidth, img.naturalHeight, img.src, sum.drawingText(drawing).slice(own.length)]);
    }).catch((e) => done(['error', String(e)]));
"""


# How the picture's text reads on a phone: the picture is drawn for a screen 360 CSS px wide, so each
# text's size there is its size in the drawing. For every line: its font size; its width in the
# system's fonts against the room it has (a line drawn into less room than it needs is squeezed, as the
# small print was); and, for the lines of the smallest size, the height of the ink painted for it in
# the PNG (the rows between its top and its baseline that hold dark pixels), in CSS px of that screen.
TEXT_SIZES = """
    const [summary, rounds, done] = arguments;
    import('/web/end.js').then(async (end) => {
      const drawing = end.pictureDrawing(summary, rounds);
      const blob = await end.paint(drawing);
      const bitmap = await createImageBitmap(blob);
      const scale = bitmap.width / drawing.width;
      const canvas = document.createElement('canvas');
      canvas.width = bitmap.width; canvas.height = bitmap.height;
      const g = canvas.getContext('2d');
      g.drawImage(bitmap, 0, 0);
      const texts = drawing.ops.filter((o) => o.op === 'text');
      const smallest = Math.min(...texts.map((o) => o.size));
      const lines = texts.map((o) => {
        const width = end.measureText(o.text, o.size, o.weight);
        let ink = null;
        if (o.size === smallest && o.align === 'left') {
          const x0 = Math.round(o.x * scale), x1 = Math.round((o.x + width) * scale);
          const y0 = Math.round((o.y - o.size) * scale), y1 = Math.round((o.y + 0.3 * o.size) * scale);
          const px = g.getImageData(x0, y0, x1 - x0, y1 - y0).data;
          const rows = [];
          for (let r = 0; r < y1 - y0; r += 1) {
            for (let c = 0; c < x1 - x0; c += 1) {
              const i = 4 * (r * (x1 - x0) + c);
              if (0.3 * px[i] + 0.59 * px[i + 1] + 0.11 * px[i + 2] < 150) { rows.push(r); break; }
            }
          }
          ink = rows.length ? (rows[rows.length - 1] - rows[0] + 1) / scale : 0;
        }
        return { text: o.text, size: o.size, width, max: o.max, ink };
      });
      done([bitmap.width, drawing.width, lines]);
    }).catch((e) => done(['error', String(e)]));
"""


def check_picture_text(phone: Phone, summary: dict, rounds: list | None = None) -> None:
    """The picture reads on a phone: 1080 px wide (3 px per CSS px of a 360 px screen), no text under
    15 px of that screen, none squeezed into less room than it needs, and the smallest lines painted
    with ink at least 10 px high there (the small print was 11 px, squeezed to fit one line)."""
    got = phone.d.execute_async_script(TEXT_SIZES, summary, rounds)
    assert got[0] != "error", got
    png_width, css_width, lines = got
    assert (png_width, css_width) == (1080, 360)
    for line in lines:
        assert line["size"] >= 15, line
        assert line["width"] <= line["max"] + 0.5, line  # (drawn at its own width: not squeezed)
    inked = [line["ink"] for line in lines if line["ink"] is not None]
    assert inked and min(inked) >= 10, lines


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG and data[12:16] == b"IHDR", data[:16]
    return struct.unpack(">II", data[16:24])


def check_end_picture(phone: Phone, summary: dict, pays: str, rounds: list) -> str:
    """The end screen's picture, saved with its button: a PNG of a sane size, the very one this phone
    paints of the API's `summary` and the table's `rounds` (the same bytes), whose words are the ranking
    and the settle-up ("小李 付给 老王 84" with pays="付给"), then the chart's: its title, its axes, and
    each seat's name with its total. Answers the picture's URL."""
    phone.tap("share-picture")
    saved = phone.downloaded(".png")
    width, height = png_size(saved)
    assert width == 1080 and 900 < height < 3000 and 5_000 < len(saved) < 3_000_000, (width, height, len(saved))
    got = phone.d.execute_async_script(PAINT_AGAIN, summary, rounds)
    assert got[0] != "error", got
    words, painted, shown_w, shown_h, src, chart_words = got
    by_seat = {s["seat"]: s for s in summary["seats"]}
    assert chart_words[-len(by_seat):] == [f"{by_seat[i]['name']} {by_seat[i]['total']:+d}".replace(" +0", " 0")
                                            for i in range(len(by_seat))], chart_words
    assert base64.b64decode(painted) == saved  # the picture is the drawing of the API's summary
    assert (shown_w, shown_h) == (width, height) and src.startswith("blob:")
    names = summary["players"]
    assert [f"{names[p['from']]} {pays} {names[p['to']]} {p['points']}" for p in summary["settle_up"]] == \
        words[len(words) - len(summary["settle_up"]):]
    at = 0
    for s in sorted(summary["seats"], key=lambda s: (s["rank"], s["seat"])):  # best first, each name and total
        at = words.index(s["name"], at)
        assert words[at + 1] == f"{s['total']:+d}".replace("+0", "0"), words
    check_picture_text(phone, summary, rounds)
    return src


def test_the_end_of_the_evening(service, api, phones):
    """结束牌局 → the end screen: the ranking and the settle-up as GET …/summary says; the picture drawn
    on the phone (a PNG of a sane size whose words are the ranking and the settle-up, drawn again in
    the other language), saved with its button; the text to copy; "same players again" makes a new
    table with the same names, room and options in one tap; home goes back to the start page."""
    from selenium.webdriver.support.select import Select

    a = phones("a")
    a.allow_downloads()
    a.d.get(service.url + "/")
    wait_rooms(a)
    Select(a.el("ruleset")).select_by_value("normal")                  # 普通场
    a.js("document.querySelector('details.options').open = true")
    Select(a.el("opt-cap")).select_by_value("4")                      # 封顶 4 番
    Select(a.el("opt-zimo")).select_by_value("base")                  # 自摸加底
    for i, name in enumerate(("老王", "小李", "阿珍", "大刘")):
        a.type(f"player-{i}", name)
    a.tap("create-table")
    a.wait(lambda: "#t=" in a.d.current_url, "the table")
    answer_seat(a, 1)
    seat_name = "小李"
    table = fragment(a.d.current_url)
    ruleset = api.table(table["t"], table["k"])["ruleset"]
    assert ruleset["preset"] == "normal" and ruleset["cap"] == 4 and ruleset["zimo"] == "base"
    auth = {"Authorization": f"Bearer {table['k']}"}
    path = f"/v1/tables/{table['t']}/events"
    for event in (
        {"type": "round_start"},
        {"type": "kong", "seat": 0, "kind": "concealed", "tile": "7s"},
        {"type": "hu", "from": 1, "tile": "5p", "winners": [{"seat": 0, "fan": 3}]},
    ):  # (普通场: the win ends it)
        assert request(service.port, "POST", path, event, auth)[0] == 201
    a.wait(lambda: a.has("finish"), "the round over")
    a.tap("finish")
    a.tap("confirm")
    a.wait(lambda: a.has("ranking") and a.has("end-picture"), "the end screen and its picture")
    status, _, body = request(service.port, "GET", f"/v1/tables/{table['t']}/summary", headers=auth)
    summary = json.loads(body)
    assert status == 200 and summary["finished_at"] and summary["settle_up"]
    for s in summary["seats"]:
        assert s["name"] in a.text(f"rank-{s['seat']}") and f"{s['total']:+d}".replace("+0", "0") in a.text(
            f"rank-{s['seat']}"
        )
    assert "1 win, 1 kong (0 direct, 0 added, 1 concealed)" in a.text("rank-0")  # (one of each: no "1 kongs")
    names = summary["players"]
    pays = [f"{names[p['from']]} pays {names[p['to']]} {p['points']}" for p in summary["settle_up"]]
    assert a.text("settle-up").splitlines() == pays
    assert a.text("share-picture") == "Save picture"  # (a desktop Chromium shares no files: it saves)
    # the evening in numbers: each seat's balance after each round, ending at its total
    rounds = api.table(table["t"], table["k"])["rounds"]
    assert len(rounds) == summary["rounds"] == 1
    lines = a.js("return Array.from(document.querySelectorAll('[data-testid=balance-chart] polyline'), "
                 "(p) => [Number(p.dataset.seat), Number(p.dataset.last), p.getAttribute('points').split(' ').length])")
    assert sorted(lines) == [[s["seat"], s["total"], 2] for s in sorted(summary["seats"], key=lambda s: s["seat"])]
    src = check_end_picture(a, summary, "pays", rounds)
    assert all(p in a.text("end-text") for p in (pays[0], "老王"))
    a.screenshot("end-of-evening")
    # in Chinese: the screen, the picture (drawn again) and the text
    a.tap("lang")
    zh = [f"{names[p['from']]} 付给 {names[p['to']]} {p['points']}" for p in summary["settle_up"]]
    a.wait(lambda: a.text("settle-up").splitlines() == zh, "the settle-up in Chinese")
    a.wait(lambda: a.el("end-picture").get_attribute("src") != src, "the picture drawn again")
    check_end_picture(a, summary, "付给", rounds)
    assert zh[0] in a.text("end-text") and "排名" in a.text("end-text")
    a.screenshot("end-of-evening-zh")
    # a finished table takes no more events
    status, _, body = request(service.port, "POST", path, {"type": "round_start"}, auth)
    assert status == 409 and json.loads(body)["code"] == "table_finished"
    # the same players again: one tap, the same names, room and options, this phone's seat kept
    a.tap("again")
    a.wait(lambda: fragment(a.d.current_url).get("t") not in (None, table["t"]), "a new table")
    again = fragment(a.d.current_url)
    a.wait(lambda: a.has("round-start"), "the new table's first round to start")
    # (asked on the first table: the same phone, the same seat; a phone with no seat is asked at once)
    a.wait(lambda: a.text("my-seat") == f"我：{seat_name}", "the seat kept on the new table")  # (in Chinese now)
    assert not a.has("dlg-whoAmI")
    view = api.table(again["t"], again["k"])
    assert (
        view["players"] == ["老王", "小李", "阿珍", "大刘"]
        and view["ruleset"] == ruleset
        and view["finished_at"] is None
    )
    assert view["balances"] == [0, 0, 0, 0]
    assert (again["k"], again["r"]) == (table["k"], table["r"])  # (the next table: the same tokens)
    # the first table's end screen (opened again, it stays: it names its next table), then home
    a.js(f"location.hash = '#t={table['t']}&k={table['k']}&end=1'")
    a.wait(lambda: a.has("ranking") and a.has("home") and a.has("to-next"), "the end screen again")
    assert not a.has("again") and fragment(a.d.current_url)["t"] == table["t"]
    a.tap("home")
    a.wait(lambda: a.has("create-table"), "the start page")


RECORD_BUTTONS = ("round-start", "record-hu", "record-kong", "record-peng", "record-draw", "record-escape", "undo",
                  "round-end", "finish", "buy-in")


def test_a_finished_table_is_finished_on_every_phone(service, api, phones):
    """Finished on one phone, finished on all: a phone that has the table open between rounds goes to
    the end screen by itself (the service tells no stream and no ETag of it); a phone whose event
    waited offline has it refused (409 table_finished) and says so in its language; a phone that
    opens the link afterwards lands on the end screen. None has a record button left: the table
    screen says it is finished and offers the summary."""
    a = phones("a")
    table = create_table(a, service.url)
    share, read = a.el("share-link").get_attribute("href"), a.el("share-read-link").get_attribute("href")
    auth = {"Authorization": f"Bearer {table['k']}"}
    for event in (
        {"type": "round_start"},
        {"type": "kong", "seat": 2, "kind": "concealed", "tile": "7s"},
        {"type": "round_end"},
    ):
        assert request(service.port, "POST", f"/v1/tables/{table['t']}/events", event, auth)[0] == 201
    proxy = FlakyProxy(service.port)
    try:
        b = phones("b")  # a player's phone, in Chinese, whose network goes
        join(b, share.replace(service.url, proxy.url), seat=1)
        b.tap("lang")
        c = phones("c")  # an onlooker
        c.d.get(read)
        for p in (a, b, c):
            p.wait_balances([-12, -12, 36, -12])
        b.wait(lambda: b.has("round-start"), "phone b between rounds")
        proxy.set_mode("down")
        b.tap("round-start")
        b.tap("confirm")
        b.wait(lambda: b.text("pending-count") == "1", "the round start waiting on phone b")
        # phone a finishes the evening
        a.tap("finish")
        a.tap("confirm")
        a.wait(lambda: a.has("ranking"), "the end screen on phone a")
        # the onlooker sees it by itself
        c.wait(
            lambda: c.has("ranking") and c.text("settle-up") == a.text("settle-up"),
            "the end screen on phone c",
            timeout=30,
        )
        c.tap("end-rounds")
        c.wait(lambda: c.text("round-line") == "finished", "the table screen says finished")
        assert not [x for x in RECORD_BUTTONS if c.has(x)] and c.has("open-summary")
        # phone b's round start is refused when the network is back: said in Chinese
        proxy.set_mode("up")
        b.wait(lambda: b.text("error"), "the refusal in words", timeout=30)
        assert b.text("error") == "第 2 局开始，东 坐庄：这桌已经结束了，不能再记分。"  # (what was refused, and why)
        b.wait(lambda: b.has("ranking") and b.text("pending-count") == "0", "the end screen on phone b")
        b.screenshot("finished-refused")
        b.tap("end-rounds")
        b.wait(lambda: b.text("round-line") == "已结束", "the table screen says finished, in Chinese")
        assert not [x for x in RECORD_BUTTONS if b.has(x)] and b.has("open-summary")
        assert [e["type"] for e in api.events(table["t"], table["k"])] == ["round_start", "kong", "round_end"]
        # a phone that opens the scoring link now: the end screen, no question of its seat
        d = phones("d")
        d.d.get(share)
        d.wait(lambda: d.has("ranking") and d.has("again"), "the end screen on a phone that opens the link")
        assert "#t=" in d.d.current_url and fragment(d.d.current_url).get("end") == "1"
        assert not d.has("dlg-whoAmI")
        d.tap("end-rounds")
        d.wait(lambda: d.has("open-summary"), "the table screen")
        assert not [x for x in RECORD_BUTTONS if d.has(x)] and not d.has("dlg-whoAmI")
        d.tap("open-summary")
        d.wait(lambda: d.has("ranking"), "the end screen again")
    finally:
        proxy.close()


def test_the_other_phones_follow_to_the_next_table(service, api, phones):
    """One phone finishes the evening and starts the next table (原班人马再来一桌): a player's phone on the
    finished table's end screen and an onlooker's follow it by themselves, without a reload, with the
    tokens they hold (no new link; the player's seat is not asked again), and record on it."""
    a = phones("a")
    table = create_table(a, service.url)
    share, read = a.el("share-link").get_attribute("href"), a.el("share-read-link").get_attribute("href")
    auth = {"Authorization": f"Bearer {table['k']}"}
    for event in ({"type": "round_start"}, {"type": "kong", "seat": 2, "kind": "concealed", "tile": "7s"}, {"type": "round_end"}):
        assert request(service.port, "POST", f"/v1/tables/{table['t']}/events", event, auth)[0] == 201
    b = phones("b")
    join(b, share, seat=2)
    c = phones("c")
    c.d.get(read)
    for p in (a, b, c):
        p.wait_balances([-12, -12, 36, -12])
        p.js("window.sameDocument = true")  # (gone if the page were loaded again)
    a.tap("finish")
    a.tap("confirm")
    for p in (a, b, c):
        p.wait(lambda: p.has("ranking"), f"the end screen on phone {p.name}", timeout=30)
    assert b.has("again") and not c.has("again")  # (a player's phone may start it too; an onlooker's not)
    a.tap("again")
    a.wait(lambda: fragment(a.d.current_url).get("t") not in (None, table["t"]), "the next table on phone a")
    nxt = fragment(a.d.current_url)
    assert (nxt["k"], nxt["r"]) == (table["k"], table["r"])
    for p in (b, c):
        p.wait(lambda: fragment(p.d.current_url).get("t") == nxt["t"], f"phone {p.name} on the next table", timeout=20)
        p.wait(lambda: p.has("balance-0") and not p.has("ranking"), f"the next table's screen on phone {p.name}")
        assert p.js("return window.sameDocument") is True
    assert fragment(b.d.current_url) == {"t": nxt["t"], "k": table["k"], "r": table["r"]}
    assert fragment(c.d.current_url) == {"t": nxt["t"], "r": table["r"]}  # (the onlooker still only watches)
    assert not b.has("dlg-whoAmI") and b.text("my-seat").endswith("西")  # (its seat, kept)
    view = api.table(nxt["t"], table["k"])
    assert view["players"] == ["东", "南", "西", "北"] and view["balances"] == [0, 0, 0, 0] and view["finished_at"] is None
    assert api.table(table["t"], table["r"])["next"] == nxt["t"]
    # phone b records on it with the token it held; the onlooker sees it
    before = c.text("round-line")
    b.tap("round-start")
    b.tap("confirm")
    for p in (a, b):
        p.wait(lambda: p.has("record-hu"), f"the next table's first round on phone {p.name}")
    c.wait(lambda: c.text("round-line") != before, "the next table's first round on the onlooker's phone")
    assert [e["type"] for e in api.events(nxt["t"], table["r"])] == ["round_start"]


def test_a_link_to_no_table_says_so(service, phones):
    """A scoring link whose table never was (or has expired): the service answers 401 for any token
    that is not a table's, as for a wrong one; the phone says the link is not valid, in words, shows
    no record button and stops asking."""
    a = phones("a")
    a.d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD_FETCH})
    a.d.get(f"{service.url}/#t={'f' * 16}&k={'x' * 43}&r={'y' * 43}")
    a.wait(lambda: a.text("error") == "The link is wrong or no longer valid.", "the link said not valid")
    assert not [x for x in RECORD_BUTTONS if a.has(x)]
    # nothing to follow: the phone stops for good and says so (no retry, no polling)
    a.wait(lambda: live_mode(a) == "stopped", "the phone to stop following the table")
    assert a.text("live-mode") == "not following"

    def asked():
        return [c for c in a.js("return window.__calls") if c["path"].startswith("/v1/tables/")]

    before = asked()
    assert before and {c["method"] for c in before} == {"GET"}
    # what makes a phone that follows a table ask at once (back online, the page shown again) asks nothing
    a.js("window.dispatchEvent(new Event('online')); document.dispatchEvent(new Event('visibilitychange'))")
    assert asked() == before


def test_the_summary_picture_is_drawn_on_the_phone(service, phones):
    """The end screen's picture: a summary of the contract's shape drawn by the phone's canvas with
    the system's fonts into a PNG of a sane size (no request: the page only draws)."""
    a = phones("a")
    a.d.get(service.url + "/")
    a.wait(lambda: a.has("create-table"), "the app")
    wait_rooms(a)  # (the start page's own request for the rooms done before the count starts)
    marks = len(a.js("return performance.getEntriesByType('resource')"))
    got = a.d.execute_async_script("""
        const done = arguments[arguments.length - 1];
        Promise.all([import('/web/end.js'), import('/web/summary.js'), import('/web/i18n.js')]).then(async ([end, sum, i18n]) => {
          i18n.setLang('zh');
          const seat = (n, name, total, rank) => ({ seat: n, name, total, rank, wins: rank === 1 ? 2 : 0, zimo: 0, dianpao_paid: 0,
            kongs: { direct: 0, added: 0, concealed: rank === 1 ? 1 : 0 }, huazhu_paid: 0, dajiao_paid: 0, escapes: 0, biggest_win: null });
          const summary = { id: 'x', players: ['老王', '小李', '阿珍', '大刘'], rounds: 5, finished_at: '2026-03-01T23:41:07Z',
            seats: [seat(0, '老王', 120, 1), seat(1, '小李', -84, 4), seat(2, '阿珍', 0, 2), seat(3, '大刘', -36, 3)],
            settle_up: [{ from: 1, to: 0, points: 84 }, { from: 3, to: 0, points: 36 }] };
          const drawing = end.pictureDrawing(summary);
          const blob = await end.paint(drawing);
          const img = new Image();
          img.src = URL.createObjectURL(blob);
          await img.decode();
          img.dataset.testid = 'picture';
          document.body.replaceChildren(img);
          done([blob.type, blob.size, img.naturalWidth, img.naturalHeight, drawing.height, sum.drawingText(drawing)]);
        });
    """)
    kind, size, width, height, css_height, words = got
    assert kind == "image/png" and 5_000 < size < 3_000_000 and width == 1080 and height == 3 * css_height, got[:5]
    assert "小李 付给 老王 84" in words and "大刘 付给 老王 36" in words and "老王" in words
    later = a.js(
        "return performance.getEntriesByType('resource').slice(arguments[0]).map((e) => new URL(e.name).pathname)",
        marks,
    )
    # no request but the modules (and the shell's icon, which the browser itself may fetch at any time for the
    # page's manifest: not the drawing's)
    assert set(later) <= {"/web/end.js", "/web/summary.js", "/web/i18n.js", "/web/icon.svg"}, later
    a.screenshot("summary-picture")
    # a seat with many facts and a long name: every line still reads on a phone, in either language
    def seat(n, name, total, rank, **more):
        return {"seat": n, "name": name, "total": total, "rank": rank, "wins": 0, "zimo": 0, "dianpao_paid": 0,
                "kongs": {"direct": 0, "added": 0, "concealed": 0}, "huazhu_paid": 0, "dajiao_paid": 0, "escapes": 0,
                "biggest_win": None, **more}
    busy = {"id": "x", "players": ["欧阳娜娜的表姐夫", "小李", "阿珍", "大刘"], "rounds": 16, "finished_at": "2026-03-01T23:41:07Z",
            "seats": [seat(0, "欧阳娜娜的表姐夫", 480, 1, wins=12, zimo=5, dianpao_paid=3, huazhu_paid=2, dajiao_paid=1, escapes=1,
                           kongs={"direct": 3, "added": 2, "concealed": 4},
                           biggest_win={"round": 14, "fan": 6, "patterns": ["qingyise", "qidui", "gen"], "points": 192}),
                      seat(1, "小李", -84, 4, escapes=1), seat(2, "阿珍", -360, 3), seat(3, "大刘", -36, 2)],
            "settle_up": [{"from": 1, "to": 0, "points": 84}, {"from": 2, "to": 0, "points": 360}, {"from": 3, "to": 0, "points": 36}]}
    rounds = [{"number": n, "status": "ended", "deltas": [s["total"] if n == 1 else 0 for s in busy["seats"]]}
              for n in range(1, 17)]
    for lang in ("zh", "en"):
        a.d.execute_async_script(
            "import('/web/i18n.js').then((m) => { m.setLang(arguments[0]); arguments[1](); })", lang
        )
        check_picture_text(a, busy)
        check_picture_text(a, busy, rounds)  # (with the chart of its 16 rounds)


# -- recording: each special win one control; refusals on the sheet; two phones at once (issue 33) ------

def api_table(service, players=("东", "南", "西", "北"), ruleset: object = "xuezhan") -> dict:
    """A table made through the API (what the phone then opens by its scoring link): id, tokens."""
    import uuid

    status, _, body = request(service.port, "POST", "/v1/tables", {"players": list(players), "ruleset": ruleset},
                              {"Idempotency-Key": str(uuid.uuid4())})
    assert status == 201, body
    made = json.loads(body)
    return {"t": made["id"], "k": made["token"], "r": made["read_token"]}


def post_events(service, table: dict, *events: dict) -> None:
    for event in events:
        status, _, body = request(service.port, "POST", f"/v1/tables/{table['t']}/events", event,
                                  {"Authorization": f"Bearer {table['k']}"})
        assert status == 201, (event, body)


def settled(service, ruleset: str | dict, dealer: int, events: list[dict]) -> list[int]:
    """The deltas POST /v1/rounds/settle gives for a round of `events` (the rule book's worked answer)."""
    status, _, body = request(
        service.port, "POST", "/v1/rounds/settle", {"ruleset": ruleset, "dealer": dealer, "events": events}
    )
    assert status == 200, body
    return json.loads(body)["deltas"]


def deltas_of_round(api: Api, table: dict, number: int) -> list[int]:
    return next(r for r in api.table(table["t"], table["k"])["rounds"] if r["number"] == number)["deltas"]


def test_each_special_win_is_one_control_and_pays_by_the_rules(service, api, phones):
    """抢杠胡, 杠上花, 杠上炮, 海底, 天胡 and 地胡 are each one control on the 胡 sheet that sets the event's flag
    and counts its pattern together, filling in what the round tells (the robbed kong's seat and tile,
    the kong's seat): each round pays what the rule book says (docs/rules.md §6: the figures here are
    checked against POST /v1/rounds/settle of the event as documented). A chip tapped with a special
    win lists both patterns, which add up to the fan sent."""
    ruleset = {"preset": "xuezhan", "haidi": True}  # (海底 counts a fan only where the room has it on)
    table = api_table(service, ruleset=ruleset)
    a = phones("a")
    join(a, f"{service.url}/#t={table['t']}&k={table['k']}&r={table['r']}", seat=0)
    rounds = []

    def play(setup: list[dict], taps: list[str], expect: list[int], flag: str, documented: dict) -> dict:
        number = len(rounds) + 1
        post_events(service, table, {"type": "round_start", "dealer": 0}, *setup)
        last = api.events(table["t"], table["k"])[-1]["seq"]
        a.wait(
            lambda: (
                a.text("round-line").startswith(f"Round {number}") and a.has("record-hu") and a.has(f"event-{last}")
            ),
            f"round {number} and its records on the phone",
        )
        a.tap("record-hu")
        for x in taps:
            a.tap(x)
        a.tap("confirm")
        a.wait(lambda: not a.has("dlg-hu"), "the sheet closed: recorded")
        hu = [e for e in api.events(table["t"], table["k"]) if e["type"] == "hu"][-1]
        assert hu.get(flag) is True, hu  # (the flag, set by the one control)
        post_events(service, table, {"type": "round_end"})
        assert deltas_of_round(api, table, number) == expect, (taps, deltas_of_round(api, table, number))
        assert settled(service, ruleset, 0, setup + [documented]) == expect  # (the rule book agrees)
        rounds.append(expect)
        return hu

    # 抢杠胡: 南 pengs 5m then adds the kong; 东 (this phone) robs it: the kong is void, 南 pays 2 fan
    peng = {"type": "peng", "seat": 1, "tile": "5m", "from": 2}
    added = {"type": "kong", "seat": 1, "kind": "added", "tile": "5m"}
    hu = play([peng, added], ["special-qiangganghu"], [12, -12, 0, 0], "robbing_kong",
              {"type": "hu", "from": 1, "tile": "5m", "robbing_kong": True, "winners": [{"seat": 0, "fan": 2}]})
    assert (hu["from"], hu["tile"], [w["seat"] for w in hu["winners"]]) == (1, "5m", [0])
    assert documented_taps()["a robbed kong (抢杠胡)"] == len(
        ["record-hu", "special-qiangganghu", "confirm"]
    )  # (as tapped)
    # 杠上花 with 清一色 tapped: 西's concealed kong, then 西 wins on its replacement: 3 + 1 fan from each
    kong = {"type": "kong", "seat": 2, "kind": "concealed", "tile": "7s"}
    hu = play([kong], ["special-gangshanghua", "tile-3s", "pattern-qingyise"], [-60, -60, 180, -60], "after_kong",
              {"type": "hu", "from": None, "tile": "3s", "after_kong": True, "winners": [{"seat": 2, "fan": 4}]})
    assert hu["from"] is None and hu["winners"] == [{"seat": 2, "fan": 4, "patterns": ["qingyise", "gangshanghua"]}]
    # 杠上炮: 南's concealed kong, then 南 discards and 东 wins: 2 fan, and the kong's 36 passed on (呼叫转移)
    kong = {"type": "kong", "seat": 1, "kind": "concealed", "tile": "7s"}
    hu = play([kong], ["special-gangshangpao", "tile-3p"], [36, -12, -12, -12], "after_kong",
              {"type": "hu", "from": 1, "tile": "3p", "after_kong": True, "winners": [{"seat": 0, "fan": 2}]})
    assert hu["from"] == 1
    # 海底: 北 self-drawn on the last tile (another seat than this phone's: tapped in its place)
    play([], ["self-drawn", "seat-3", "tile-9s", "special-haidi"], [-12, -12, -12, 36], "last_tile",
         {"type": "hu", "from": None, "tile": "9s", "last_tile": True, "winners": [{"seat": 3, "fan": 2}]})
    # 天胡: the dealer (东) self-drawn as the round's first event: 6 fan from each
    play([], ["special-tianhu", "tile-1m"], [576, -192, -192, -192], "heavenly",
         {"type": "hu", "from": None, "tile": "1m", "heavenly": True, "winners": [{"seat": 0, "fan": 6}]})
    # 地胡: 西, not the dealer, self-drawn before any peng or kong
    play([], ["special-dihu", "seat-2", "tile-1m"], [-192, -192, 576, -192], "earthly",
         {"type": "hu", "from": None, "tile": "1m", "earthly": True, "winners": [{"seat": 2, "fan": 6}]})
    totals = [sum(r[i] for r in rounds) for i in range(4)]
    synced(api, table, a, expect=totals)
    # (no hu event carries a pattern without its flag, nor a flag's pattern missing)
    for e in api.events(table["t"], table["k"]):
        if e["type"] == "hu" and e["winners"][0].get("patterns"):
            assert "gangshanghua" in e["winners"][0]["patterns"] and e.get("after_kong") and e["from"] is None


def message_in_sight(phone: Phone) -> dict:
    """Where the sheet's message is, against its 确定 button and the screen; the sheet scrolled to its top."""
    return phone.js("""
      document.querySelector('.sheet').scrollTop = 0;
      const m = document.querySelector('[data-testid=dialog-message]').getBoundingClientRect();
      const c = document.querySelector('[data-testid=confirm]').getBoundingClientRect();
      const hit = document.elementFromPoint(m.left + m.width / 2, m.top + m.height / 2);
      return { top: m.top, bottom: m.bottom, height: m.height, confirmTop: c.top, screen: window.innerHeight,
               seen: !!hit && hit.closest('[data-testid=dialog-message]') !== null };""")


def test_a_refusal_stays_on_the_sheet_above_its_buttons(service, api, phones):
    """A refusal, the sheet's own (a special win the round does not allow) or the service's (a 422),
    keeps the sheet open with the entry as it was, and its message in sight above 确定 however long the
    sheet (it was drawn under the button bar, and the service's refusal came as a toast once the sheet
    had closed: the entry was lost). Corrected, the same sheet records it."""
    table = api_table(service)
    a = phones("a")
    join(a, f"{service.url}/#t={table['t']}&k={table['k']}&r={table['r']}", seat=0)
    post_events(
        service,
        table,
        {"type": "round_start", "dealer": 0},
        {"type": "kong", "seat": 2, "kind": "concealed", "tile": "7s"},
    )
    a.wait_balances([-12, -12, 36, -12])
    # 抢杠胡 with no added kong just before: said on the sheet, nothing sent
    a.tap("record-hu")
    a.tap("from-1")
    a.tiles("5m")
    a.tap("special-qiangganghu")
    a.tap("fan-3")
    a.tap("confirm")
    a.wait(
        lambda: a.text("dialog-message").startswith("Robbing a kong: the record just before must be"),
        "the sheet's refusal",
    )
    where = message_in_sight(a)
    assert (
        where["seen"]
        and where["height"] > 0
        and 0 <= where["top"]
        and where["bottom"] <= where["confirmTop"] <= where["screen"]
    ), where
    a.screenshot("refusal-above-confirm")
    assert (
        a.el("fan-3").get_attribute("aria-pressed") == "true" and a.el("from-1").get_attribute("aria-pressed") == "true"
    )
    # the service's refusal: 东 self-drawn with 99 fan typed (the service takes 1 to 64): 422, on the sheet
    a.tap("special-qiangganghu")  # (off again)
    a.tap("self-drawn")
    a.type("fan-input", "99")
    a.tap("confirm")
    a.wait(lambda: "The rules refuse this" in a.text("dialog-message"), "the service's refusal on the sheet")
    assert a.has("dlg-hu") and not a.text("error")
    where = message_in_sight(a)
    assert where["seen"] and where["bottom"] <= where["confirmTop"] <= where["screen"], where
    assert [e["type"] for e in api.events(table["t"], table["k"])] == ["round_start", "kong"]
    assert (
        a.el("fan-input").get_attribute("value") == "99" and a.el("self-drawn").get_attribute("aria-pressed") == "true"
    )
    assert a.el("tile-5m").get_attribute("aria-pressed") == "true"
    # corrected on the same sheet: recorded (3 fan self-drawn: 24 from each)
    a.tap("fan-3")
    a.tap("confirm")
    a.wait(lambda: not a.has("dlg-hu"), "the sheet closed")
    synced(api, table, a, expect=[60, -36, 12, -36])


def test_the_same_win_on_two_phones_at_once(service, api, phones):
    """The same 自摸 confirmed on two phones at once: one is recorded; the other phone says on its sheet
    that it is already recorded (in 血战 that seat has left the round: no toast without buttons, no draft
    that could never be recorded); in 血流, where it can win again, it asks, with its buttons."""
    import threading

    a, b = phones("a"), phones("b")

    def settled_phone(p: Phone) -> bool:  # (its sheet closed: recorded)
        return not p.has("dlg-hu") and not p.has("dlg-ask")

    def at_once(preset: str, twice: bool) -> None:
        table = api_table(service, ruleset=preset)
        link = f"{service.url}/#t={table['t']}&k={table['k']}&r={table['r']}"
        join(a, link, seat=0)
        join(b, link, seat=1)
        post_events(service, table, {"type": "round_start", "dealer": 0})
        for p in (a, b):
            p.wait(lambda p=p: p.has("record-hu"), "the round")
            # (phone b hears nothing of phone a's win before it sends its own: its stream is held back)
            if p is b:
                p.d.execute_cdp_cmd("Network.enable", {})
                p.d.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/stream*"]})
            for x in ("record-hu", "self-drawn", "seat-2", "tile-3p", "fan-2"):
                p.tap(x)
        both = [
            threading.Thread(target=p.js, args=("document.querySelector('[data-testid=confirm]').click()",))
            for p in (a, b)
        ]
        for th in both:
            th.start()
        for th in both:
            th.join()

        def hus() -> list[dict]:
            return [e for e in api.events(table["t"], table["k"]) if e["type"] == "hu"]

        a.wait(lambda: len(hus()) == 1 and (settled_phone(a) or settled_phone(b)), "one of the two recorded")
        first, second = (a, b) if settled_phone(a) else (b, a)
        if twice:
            second.wait(
                lambda: second.has("dlg-ask") and "Another phone has just recorded this" in second.text("confirm-text"),
                "the question, with its buttons",
            )
            assert second.text("confirm") == "Record again" and second.text("cancel") == "Don\u2019t"
            second.tap("confirm")
            second.wait(lambda: not second.has("dlg-ask") and len(hus()) == 2, "recorded again")
            expect = [-24, -24, 72, -24]
        else:
            second.wait(
                lambda: "Another phone has already recorded this" in second.text("dialog-message"),
                "already recorded, on the sheet",
            )
            second.screenshot("same-win-at-once")
            second.tap("cancel")
            expect = [-12, -12, 36, -12]
        assert not second.text("error") and not second.has("draft-0") and not first.has("draft-0")
        assert len(hus()) == (2 if twice else 1)
        b.d.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
        synced(api, table, a, b, expect=expect)

    at_once("xuezhan", twice=False)
    at_once("xueliu", twice=True)


def test_the_draw_sheet_asks_only_seats_still_in(service, api, phones):
    """The 流局 sheet open while another phone records a win: the seat that won is no longer asked about
    (the sheet asked it, and the draw listing it was refused); the draw recorded lists the others."""
    table = api_table(service)
    b = phones("b")
    join(b, f"{service.url}/#t={table['t']}&k={table['k']}&r={table['r']}", seat=1)
    post_events(service, table, {"type": "round_start", "dealer": 0})
    b.wait(lambda: b.has("record-draw"), "the round")
    b.tap("record-draw")
    b.wait(lambda: dialog_title(b) == "东: ready (ting)?", "the first seat asked")
    post_events(
        service, table, {"type": "hu", "from": None, "tile": "2m", "winners": [{"seat": 0, "fan": 1}]}
    )  # 东 wins meanwhile
    b.wait(lambda: dialog_title(b) == "南: ready (ting)?", "东 no longer asked")
    b.tap("status-ting")
    b.tap("fan-2")
    b.tap("confirm")
    b.wait(lambda: dialog_title(b) == "西: ready (ting)?", "西")
    b.tap("status-not_ting")
    b.tap("confirm")
    b.wait(lambda: dialog_title(b) == "北: ready (ting)?", "北")
    b.tap("status-not_ting")
    b.tap("confirm")
    b.wait(lambda: not b.has("dlg-draw"), "the draw recorded")
    draw = [e for e in api.events(table["t"], table["k"]) if e["type"] == "draw"]
    assert [s["seat"] for s in draw[0]["seats"]] == [1, 2, 3]
    # 东's 自摸 (6 from each), then 西 and 北 pay 南's 2-fan wait (12 each)
    synced(api, table, b, expect=[18, 18, -18, -18])


def test_recording_someone_elses_win_replaces_the_phones_own_seat(service, api, phones):
    """The phone's seat is only a guess on the 胡 sheet: tapping another winner puts it in its place
    (it made a 一炮多响 of it), and the phone's own seat may be the discarder."""
    table = api_table(service)
    a = phones("a")
    join(a, f"{service.url}/#t={table['t']}&k={table['k']}&r={table['r']}", seat=0)
    post_events(service, table, {"type": "round_start", "dealer": 0})
    a.tap("record-hu")
    assert a.el("seat-0").get_attribute("aria-pressed") == "true"
    a.tap("from-0")  # (东 discarded: no longer the winner)
    assert a.el("seat-0").get_attribute("aria-pressed") == "false"
    a.tap("cancel")
    a.tap("record-hu")
    a.tap("from-1")
    a.tap("seat-3")
    assert [a.el(f"seat-{i}").get_attribute("aria-pressed") for i in range(4)] == ["false", "false", "false", "true"]
    a.tiles("4s")
    a.tap("fan-2")  # (one winner: the fan on the same sheet)
    a.tap("confirm")
    synced(api, table, a, expect=[0, -12, 0, 12])
    hu = next(e for e in api.events(table["t"], table["k"]) if e["type"] == "hu")
    assert [w["seat"] for w in hu["winners"]] == [3]
