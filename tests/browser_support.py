"""Helpers of the browser tests: the real service, headless Chromium phones, a flaky network.

* :class:`Service` runs ``python -m service serve`` (:class:`tests.served.Served`) on a free port.
* :class:`Phone` is one headless Chromium (Debian's ``chromium`` + ``chromium-driver``,
  driven by Selenium; both paths are given, so Selenium Manager never runs or downloads
  anything) with a 360×640 mobile viewport and a fresh profile.
* :class:`FlakyProxy` sits between a phone and the service: ``up`` forwards, ``down``
  drops every connection, ``lost_answers`` forwards requests but drops the answers (the
  request lands, the phone never hears back: the case idempotency keys exist for), ``hang``
  takes every connection and never answers (a server that hangs).
* :class:`Api` reads the table through the public API, as the tests' source of truth.

Outside CI, a machine without Chromium skips the browser tests with the reason; under
``CI=true`` a missing browser is a failure (CI installs it: ``.ci/run``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from service.config import NO_LIMITS
from tests.served import Served, request

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER_BIN", "/usr/bin/chromedriver")
SHOTS = ROOT / "test-output" / "screenshots"
WAIT = 20  # seconds a condition may take to become true (polling is every 1.5 s)
CHROME_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--lang=en-US",
]


def require_browser() -> None:
    """Skip (outside CI) or fail (CI=true) when Chromium or its driver is missing."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not (Path(p).exists() and os.access(p, os.X_OK))]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium package (pip install -e '.[test]')")
    if missing:
        reason = f"browser tests need {', '.join(missing)} (apt-get install chromium chromium-driver)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(reason + " — required under CI")
        pytest.skip(reason)



class Service(Served):
    """:class:`tests.served.Served` on ``redis_url`` with the rate limits as configured but for table
    creation (its log in ``log``)."""

    def __init__(self, redis_url: str, log_dir: Path, env: dict[str, str] | None = None):
        super().__init__(log_dir / "service.log", {**dict.fromkeys(NO_LIMITS), "REDIS_URL": redis_url,
                                                   "TABLES_PER_HOUR": "0", **(env or {})}, timeout=60)
        self.log = self.log_path


class FlakyProxy:
    """A TCP proxy on 127.0.0.1 with a switchable failure mode (see the module doc)."""

    def __init__(self, target_port: int):
        self.target = target_port
        self.mode = "up"
        self.lost = 0  # answers dropped in lost_answers mode
        self.keepalives = 0  # the table streams' keep-alive comments passed on to the phone (": keep-alive")
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.conns: set[socket.socket] = set()
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def set_mode(self, mode: str) -> None:
        assert mode in ("up", "down", "lost_answers", "hang")
        self.mode = mode
        with self.lock:  # open keep-alive connections die with the network
            for c in list(self.conns):
                self._close(c)

    def _close(self, c: socket.socket) -> None:
        self.conns.discard(c)
        try:
            c.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        c.close()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            if self.mode == "down":
                client.close()
                continue
            if self.mode == "hang":  # held open, never answered (closed when the mode changes)
                with self.lock:
                    self.conns.add(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.conns.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, answers: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if answers and self.mode == "lost_answers":
                    self.lost += 1
                    break
                if self.mode == "down":
                    break
                dst.sendall(data)
                if answers and b": keep-alive" in data:
                    with self.lock:
                        self.keepalives += data.count(b": keep-alive")
        except OSError:
            pass
        with self.lock:
            self._close(src)
            self._close(dst)

    def close(self) -> None:
        self.closed = True
        self.sock.close()
        self.set_mode("down")


class Api:
    """The table as the public API tells it (the tests' source of truth)."""

    def __init__(self, port: int):
        self.port = port

    def table(self, table_id: str, token: str) -> dict:
        status, _, body = request(
            self.port, "GET", f"/v1/tables/{table_id}", headers={"Authorization": f"Bearer {token}"}
        )
        assert status == 200, body
        return json.loads(body)

    def events(self, table_id: str, token: str) -> list[dict]:
        status, _, body = request(self.port, "GET", f"/v1/tables/{table_id}/events?after=0&limit=500",
                                  headers={"Authorization": f"Bearer {token}"})
        assert status == 200, body
        return json.loads(body)["events"]


def fragment(url: str) -> dict:
    """The table id and tokens of an app URL's fragment (#t=…&k=…&r=…)."""
    q = parse_qs(urlsplit(url).fragment)
    return {k: v[0] for k, v in q.items()}


class Phone:
    """One headless Chromium at 360×640 with a fresh profile."""

    def __init__(self, name: str, extra_args: tuple[str, ...] = ()):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service as DriverService

        self.name = name
        self.profile = tempfile.mkdtemp(prefix=f"chromium-{name}-")
        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for arg in CHROME_ARGS + list(extra_args) + [f"--user-data-dir={self.profile}", "--window-size=360,640"]:
            opts.add_argument(arg)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.d = webdriver.Chrome(service=DriverService(CHROMEDRIVER), options=opts)
        self.d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": 360, "height": 640, "deviceScaleFactor": 1, "mobile": True})
        self.d.set_script_timeout(20)

    # -- finding and tapping ------------------------------------------------------------------
    def el(self, testid: str):
        from selenium.webdriver.common.by import By

        return self.d.find_element(By.CSS_SELECTOR, f'[data-testid="{testid}"]')

    def all(self, css: str):
        from selenium.webdriver.common.by import By

        return self.d.find_elements(By.CSS_SELECTOR, css)

    def has(self, testid: str) -> bool:
        return bool(self.all(f'[data-testid="{testid}"]'))

    def wait(self, cond, what: str, timeout: float = WAIT):
        """Wait until ``cond()`` is truthy (the page re-renders as the table changes: an
        element that went stale meanwhile is looked up again)."""
        from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.d, timeout, poll_frequency=0.1,
                             ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)).until(
            lambda _: cond(), message=f"{self.name}: {what}")

    def tap(self, testid: str) -> None:
        """Scroll the element into the middle of the screen and click it like a finger would (once it
        can be: enabled, and not under a sheet that is still open — one that waits for the service's
        answer to what it recorded)."""
        from selenium.common.exceptions import ElementClickInterceptedException

        def click():
            el = self.el(testid)
            if not el.is_enabled():
                return False
            self.d.execute_script("arguments[0].scrollIntoView({block: 'center'})", el)
            try:
                el.click()
            except ElementClickInterceptedException:
                return False
            return True

        self.wait(click, f"[{testid}] to be tapped")

    def type(self, testid: str, text: str, clear: bool = True) -> None:
        """Type ``text`` into the field (over what it holds, unless ``clear`` is false), like keys do:
        each key an input event. (Selenium's clear() fires none: the app's state keeps the old value,
        and a re-render before the keys puts it back — "2" typed over "1" became "12".)"""
        from selenium.webdriver.common.keys import Keys

        def typed():
            el = self.el(testid)
            if clear:
                el.send_keys(Keys.CONTROL, "a")
                el.send_keys(Keys.DELETE)
            el.send_keys(text)
            return not clear or el.get_property("value") == text

        self.wait(typed, f"[{testid}] to take {text!r}")

    def text(self, testid: str) -> str:
        """The element's visible text ('' when absent or hidden)."""
        return self.js("const e = document.querySelector(`[data-testid='${arguments[0]}']`);"
                       "return e && e.offsetParent !== null ? e.innerText : '';", testid) or ""

    def balances(self, seats: int = 4) -> list[int | None]:
        texts = self.js(
            "return Array.from({length: arguments[0]}, (_, i) => {"
            "const e = document.querySelector(`[data-testid='balance-${i}']`); return e ? e.textContent : ''; })",
            seats,
        )
        return [int(t) if t.strip().lstrip("-").isdigit() else None for t in texts]

    def wait_balances(self, expected: list[int]) -> None:
        self.wait(
            lambda: self.balances(len(expected)) == expected,
            f"balances {expected} (shown: {self.balances(len(expected))})",
        )

    def tiles(self, tiles: str) -> None:
        """Tap tiles of a hand string like '123m55p' in the tile picker."""
        for t in _split_tiles(tiles):
            self.tap(f"tile-{t}")

    def screenshot(self, name: str) -> Path:
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / f"{name}.png"
        self.d.save_screenshot(str(path))
        return path

    def allow_downloads(self) -> Path:
        """Let the phone save files (an ``<a download>`` the app clicks) into a folder of its own."""
        self.downloads = Path(tempfile.mkdtemp(prefix=f"downloads-{self.name}-"))
        self.d.execute_cdp_cmd(
            "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(self.downloads)}
        )
        return self.downloads

    def downloaded(self, suffix: str) -> bytes:
        """The bytes of the file saved with ``suffix``, once whole (taken away: the next save is
        looked for afresh, even under the same name)."""
        def done():
            names = list(self.downloads.iterdir())
            files = [p for p in names if p.name.endswith(suffix)]
            return files[0] if files and not any(p.suffix == ".crdownload" for p in names) else None

        path = self.wait(done, f"a {suffix} file saved")
        data = path.read_bytes()
        path.unlink()
        return data

    def js(self, script: str, *args):
        return self.d.execute_script(script, *args)

    def quit(self) -> None:
        try:
            self.d.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)
            if getattr(self, "downloads", None):
                shutil.rmtree(self.downloads, ignore_errors=True)


def _split_tiles(hand: str) -> list[str]:
    out: list[str] = []
    ranks: list[str] = []
    for ch in hand:
        if ch.isdigit():
            ranks.append(ch)
        else:
            out.extend(f"{r}{ch}" for r in ranks)
            ranks = []
    return out
