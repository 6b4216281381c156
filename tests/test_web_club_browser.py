"""A club's season in the app, in a real browser (headless Chromium phones against ``python -m service
serve``, as tests/test_web_browser.py): the organiser's phone creates a club, adds and renames its
players, seats two evenings by taps (the same four players, and a guest), and the tables it starts count
in the season once finished; a second phone joins by the club's read link (the one its QR code holds)
and reads the standings in either order and a player's page with the chart of their trend, in both
languages, and again offline. What the phones show is checked against the public API."""

from __future__ import annotations

import base64
import json

import pytest

from tests.browser_support import FlakyProxy, Phone, Service, fragment, request, require_browser

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ZIMO = {"type": "hu", "tile": "5p", "winners": [{"seat": 0, "fan": 2}]}


@pytest.fixture(scope="module")
def service(redis_server, tmp_path_factory):
    require_browser()
    if not redis_server.running:
        redis_server.start()
    svc = Service(redis_server.url, tmp_path_factory.mktemp("club-service"))
    try:
        yield svc
    finally:
        svc.stop()


@pytest.fixture
def phones():
    made: list[Phone] = []

    def make(name: str) -> Phone:
        made.append(Phone(name))
        return made[-1]

    yield make
    for p in made:
        p.quit()


# whether the club's QR picture shows the same pixels as the picture at the URL given (drawn at 176 px)
SAME_PICTURE = """
    const [url, done] = arguments;
    const pixels = async (src) => {
      const img = new Image();
      img.src = src;
      await img.decode();
      const c = document.createElement('canvas');
      c.width = 176; c.height = 176;
      const g = c.getContext('2d');
      g.fillStyle = '#fff'; g.fillRect(0, 0, 176, 176);
      g.drawImage(img, 0, 0, 176, 176);
      return g.getImageData(0, 0, 176, 176).data;
    };
    Promise.all([pixels(document.querySelector('[data-testid=club-qr]').src), pixels(url)]).then(([x, y]) => {
      let dark = 0;
      for (let i = 0; i < x.length; i += 4) { if (x[i] !== y[i]) { done(`differs at ${i / 4}`); return; } if (x[i] < 128) dark += 1; }
      done(dark > 1000 ? true : 'blank');
    }).catch((e) => done(String(e)));
"""


def get(service, path: str, token: str) -> dict:
    status, _, body = request(service.port, "GET", path, headers={"Authorization": f"Bearer {token}"})
    assert status == 200, body
    return json.loads(body)


def post_events(service, table: dict, *events: dict) -> None:
    for event in events:
        status, _, body = request(service.port, "POST", f"/v1/tables/{table['t']}/events", event,
                                  {"Authorization": f"Bearer {table['k']}"})
        assert status == 201, (event, body)


def seat_and_play(phone: Phone, service, club: dict, seats: list, rounds: list[list[dict]]) -> dict:
    """On the organiser's phone: the seating screen, each seat tapped then who sits there (a player's id,
    or ("guest", name)); the table started; its rounds recorded through the API; finished on the phone.
    Answers the table's fragment."""
    phone.js("location.hash = arguments[0]", f"#c={club['c']}&k={club['k']}&r={club['r']}&v=seat")
    phone.wait(lambda: phone.has("club-seat-0") and phone.has(f"sit-{next(s for s in seats if isinstance(s, str))}"),
               "the seating")
    for i, who in reversed(list(enumerate(seats))):  # (from the last seat: each tap on a seat first)
        phone.tap(f"club-seat-{i}")
        if isinstance(who, tuple):
            phone.type("guest-name", who[1])
            phone.tap("sit-guest")
        else:
            phone.tap(f"sit-{who}")
    phone.tap("club-start-table")
    phone.wait(lambda: "#t=" in phone.d.current_url, "the club's table to open")
    table = fragment(phone.d.current_url)
    phone.wait(lambda: phone.has("dlg-whoAmI"), "the seat question")
    phone.tap("cancel")
    for events in rounds:
        post_events(service, table, {"type": "round_start"}, *events, {"type": "round_end"})
    phone.wait(lambda: phone.has("finish"), "the rounds over")
    phone.tap("finish")
    phone.tap("confirm")
    phone.wait(lambda: phone.has("ranking") and phone.has("balance-chart"), "the end screen and its chart")
    return table


def shown_standings(phone: Phone) -> list[tuple[str, str, str]]:
    """(place, name, total) of each row the phone shows, top to bottom."""
    return [tuple(row) for row in phone.js(
        "return Array.from(document.querySelectorAll('[data-testid=standings] tbody tr'), "
        "(tr) => [tr.cells[0].textContent, tr.cells[1].textContent, tr.cells[4].textContent])")]


def api_standings(body: dict) -> list[tuple[str, str, str]]:
    return [(str(r["rank"]) if r["ranked"] else "–", r["name"], f"{r['total']:+d}".replace("+0", "0"))
            for r in body["players"]]


def test_a_clubs_season_on_two_phones(service, phones):
    proxy = FlakyProxy(service.port)
    try:
        a = phones("organiser")
        a.d.get(service.url + "/")
        a.tap("clubs-open")
        a.type("club-name", "周五麻将")
        a.type("club-min-rounds", "3")
        a.tap("create-club")
        a.wait(lambda: "v=roster" in a.d.current_url and a.has("new-player"), "the new club's roster")
        club = fragment(a.d.current_url)
        for name in ("老王", "小李", "阿珍", "刘"):
            a.type("new-player", name)
            a.tap("add-player")
            a.wait(lambda: name in a.text("roster"), f"{name} on the roster")
        data = get(service, f"/v1/clubs/{club['c']}", club["r"])
        assert sorted(p["name"] for p in data["players"]) == sorted(["老王", "小李", "阿珍", "刘"]) and data["min_rounds"] == 3
        ids = {p["name"]: p["id"] for p in data["players"]}
        a.tap(f"rename-{ids['刘']}")
        a.type("rename-input", "大刘")
        a.tap("rename-save")
        a.wait(lambda: "大刘" in a.text("roster"), "the player renamed")
        assert {p["id"]: p["name"] for p in get(service, f"/v1/clubs/{club['c']}", club["r"])["players"]}[ids["刘"]] == "大刘"
        wang, li, zhen, liu = (ids[n] for n in ("老王", "小李", "阿珍", "刘"))

        # two evenings: the same four players, then three of them and a guest
        dianpao = {"type": "hu", "tile": "7s", "from": 2, "winners": [{"seat": 1, "fan": 3}]}
        seat_and_play(a, service, club, [wang, li, zhen, liu], [[ZIMO], [dianpao]])
        second = seat_and_play(a, service, club, [li, ("guest", "小张"), wang, zhen], [[ZIMO], [ZIMO], [dianpao]])
        assert get(service, f"/v1/tables/{second['t']}", second["r"])["players"] == ["小李", "小张", "老王", "阿珍"]
        a.js("document.querySelector('[data-testid=balance-chart]').scrollIntoView({block: 'center'})")
        a.screenshot("club-evening-chart")

        # the standings on the organiser's phone, as the API has them
        standings = get(service, f"/v1/clubs/{club['c']}/seasons/current/standings", club["r"])
        assert {r["name"] for r in standings["players"]} == {"老王", "小李", "阿珍", "大刘"}  # (no guest)
        assert {r["player"]: r["evenings"] for r in standings["players"]} == {wang: 2, li: 2, zhen: 2, liu: 1}
        a.js("location.hash = arguments[0]", f"#c={club['c']}&k={club['k']}&r={club['r']}")
        a.wait(lambda: shown_standings(a) == api_standings(standings), "the standings as the API has them")
        assert shown_standings(a)[-1][0] == "–"  # (大刘: 2 rounds of the 3 needed, unranked)
        a.tap(f"standing-name-{li}")  # a player's chart on this phone too
        li_page = get(service, f"/v1/clubs/{club['c']}/players/{li}", club["r"])
        a.wait(lambda: a.text("player-name") == "小李" and a.has("player-chart"), "小李's page")
        assert a.js("return Number(document.querySelector('[data-testid=player-chart] polyline').dataset.last)") == \
            li_page["lifetime"]["total"]
        a.tap("club-back")
        a.wait(lambda: shown_standings(a) == api_standings(standings), "the standings again")
        a.allow_downloads()
        a.tap("standings-csv")  # saved for a spreadsheet: the service's CSV, UTF-8 with a BOM
        status, _, csv_body = request(service.port, "GET", f"/v1/clubs/{club['c']}/seasons/current/standings",
                                      headers={"Authorization": f"Bearer {club['r']}", "Accept": "text/csv"})
        assert status == 200 and a.downloaded(".csv") == csv_body and csv_body.startswith("\ufeff".encode())

        # a second phone joins by the read link the QR code shows
        a.tap("club-tab-share")
        a.wait(lambda: a.has("club-qr"), "the club's QR code")
        a.tap("club-qr-read")
        a.wait(lambda: a.el("club-qr-read").get_attribute("aria-pressed") == "true", "the QR code of the read link")
        link = a.el("club-share-read-link").get_attribute("href")
        assert f"k={club['k']}" not in link and f"r={club['r']}" in link
        status, headers, svg = request(service.port, "POST", "/web/qr", {"text": link})
        assert status == 200 and b"<svg" in svg[:300]
        same = a.d.execute_async_script(SAME_PICTURE, "data:image/svg+xml;base64," + base64.b64encode(svg).decode())
        assert same is True, same  # (the picture is the QR code of that link)

        b = phones("member")
        b.d.get(link.replace(service.url, proxy.url))
        b.wait(lambda: shown_standings(b) == api_standings(standings), "the standings on the second phone")
        assert b.has("club-tab-roster") and not b.has("club-tab-seat")  # (reading only: no seating)
        b.tap("order-rating")
        by_rating = get(service, f"/v1/clubs/{club['c']}/seasons/current/standings?order=rating", club["r"])
        assert by_rating["order"] == "rating"
        b.wait(lambda: shown_standings(b) == api_standings(by_rating), "the standings by rating")
        b.tap("order-total")
        b.wait(lambda: shown_standings(b) == api_standings(standings), "the standings by total again")

        # a player's page: the figures and the chart of the trend, as the API has them
        b.tap(f"standing-name-{wang}")
        page = get(service, f"/v1/clubs/{club['c']}/players/{wang}", club["r"])
        b.wait(lambda: b.text("player-name") == "老王" and b.has("player-chart"), "老王's page")
        line = b.js("const p = document.querySelector('[data-testid=player-chart] polyline');"
                    "return [Number(p.dataset.last), p.getAttribute('points').split(' ').length]")
        assert line == [page["lifetime"]["total"], len(page["history"]) + 1] and len(page["history"]) == 2
        assert f"total {page['lifetime']['total']:+d}" in b.text("player-lifetime")
        assert len(b.all("[data-testid=player-history] li")) == 2
        b.screenshot("club-player")

        # in Chinese
        b.tap("club-back")
        b.wait(lambda: b.has("standings"), "the standings again")
        b.tap("lang")
        b.wait(lambda: b.text("club-tab-standings") == "排行榜", "the standings in Chinese")
        b.js("window.scrollTo(0, 0)")
        b.screenshot("club-standings-zh")  # the README's picture (docs/club-standings-zh.png)

        # offline: what was last seen is read again, said to be so
        b.wait(lambda: b.js("return !!(navigator.serviceWorker && navigator.serviceWorker.controller)"),
               "the service worker to control the page")
        proxy.set_mode("down")
        b.d.refresh()
        b.wait(lambda: shown_standings(b) == api_standings(standings), "the standings from the phone's copy")
        b.wait(lambda: b.has("club-stale"), "said to be as last seen")
        b.tap(f"standing-name-{wang}")
        b.wait(lambda: b.has("player-chart") and b.has("club-stale"), "老王's page from the phone's copy")
        proxy.set_mode("up")
    finally:
        proxy.close()
