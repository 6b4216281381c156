"""The companion app's server side and its files, without a browser (Flask's test client).

Covers: the routes and their headers, the QR endpoint (and its refusals as problem+json),
the service worker's shell list, that ``pip install .`` ships the files, the page weight
budget, that no file references an external URL, that the page reaches only the public
API, that the pattern names the page shows are the service's, and that /docs is served
from an installed package.
"""

from __future__ import annotations

import ast
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from service.web import views

pytestmark = pytest.mark.app(store=False)

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "service" / "web" / "static"
PAGE_BUDGET = 128 * 1024  # bytes as sent: gzipped, as the service sends them to a browser that accepts it


def test_the_app_shell_is_served_at_the_root(client):
    r = client.get("/")
    assert r.status_code == 200 and r.mimetype == "text/html"
    html = r.get_data(as_text=True)
    assert '<script type="module" src="/web/app.js">' in html and 'data-testid="error"' in html
    assert r.headers["Cache-Control"] == "no-cache" and r.headers["Referrer-Policy"] == "no-referrer"
    csp = r.headers["Content-Security-Policy"]
    assert "default-src 'self'" in csp and "connect-src 'self'" in csp and "http" not in csp


@pytest.mark.parametrize("path, mimetype", [
    ("/web/app.js", "text/javascript"), ("/web/style.css", "text/css"), ("/web/icon.svg", "image/svg+xml"),
    ("/web/manifest.webmanifest", "application/manifest+json"), ("/web/patterns.json", "application/json"),
])
def test_static_files(client, path, mimetype):
    r = client.get(path)
    assert r.status_code == 200 and r.mimetype == mimetype and r.headers["Cache-Control"] == "no-cache"
    assert r.headers.get("ETag")
    assert client.get(path, headers={"If-None-Match": r.headers["ETag"]}).status_code == 304


@pytest.mark.parametrize("path, source", [
    ("/", STATIC / "index.html"), ("/web/app.js", STATIC / "app.js"), ("/web/style.css", STATIC / "style.css"),
    ("/web/patterns.json", "registry"), ("/sw.js", None), ("/docs/ui/swagger-ui.css", None),
])
def test_files_are_gzipped_for_a_client_that_accepts_it(client, path, source):
    """Each file goes gzipped to a browser that says it takes gzip (its own ETag, revalidated as the
    plain one is), and as it is to a client that does not; either way ``Vary: Accept-Encoding``."""
    plain = client.get(path)
    squeezed = client.get(path, headers={"Accept-Encoding": "gzip, deflate, br"})
    assert plain.status_code == squeezed.status_code == 200
    assert "Content-Encoding" not in plain.headers and squeezed.headers["Content-Encoding"] == "gzip"
    for r in (plain, squeezed):
        assert "accept-encoding" in {v.strip().lower() for v in r.headers["Vary"].split(",")}, r.headers
    body = gzip.decompress(squeezed.data)
    assert body == plain.data and len(squeezed.data) < 0.6 * len(body)
    if source == "registry":  # (made from the rules core's pattern registry when the app is made)
        from service.rules.patterns import as_json

        assert body == as_json().encode()
    elif source is not None:
        assert body == source.read_bytes()
    assert squeezed.mimetype == plain.mimetype and squeezed.headers["ETag"] != plain.headers["ETag"]
    again = client.get(path, headers={"Accept-Encoding": "gzip", "If-None-Match": squeezed.headers["ETag"]})
    assert again.status_code == 304 and not again.data
    assert client.get(path, headers={"Accept-Encoding": "gzip;q=0"}).data == plain.data  # (refused: as it is)


def test_the_whole_app_is_small_once_gzipped(client):
    """What a phone downloads for the shell (every file, gzipped) is a fraction of its size on disk."""
    names = [p.name for p in STATIC.iterdir() if p.is_file() and p.name != "worker.js"]
    sent = sum(len(client.get(f"/web/{n}", headers={"Accept-Encoding": "gzip"}).data) for n in names)
    assert sent < 0.4 * page_weight(), (sent, page_weight())


def test_missing_file_is_a_problem_not_a_page(client):
    r = client.get("/web/nope.js")
    assert r.status_code == 404 and r.mimetype == "application/problem+json"


def test_service_worker_lists_every_shell_file_and_changes_with_them(client, monkeypatch):
    r = client.get("/sw.js")
    assert r.status_code == 200 and r.mimetype == "text/javascript" and r.headers["Cache-Control"] == "no-cache"
    first, _, rest = r.get_data(as_text=True).partition("\n")
    shell = json.loads(first.removeprefix("self.SHELL = ").rstrip(";"))
    files = sorted([p.relative_to(STATIC).as_posix() for p in STATIC.iterdir() if p.name != "worker.js"]
                   + ["patterns.json"])  # (made from the pattern registry at serve time)
    assert shell["files"] == ["/"] + [f"/web/{f}" for f in files]
    for f in shell["files"]:
        assert client.get(f).status_code == 200, f
    assert "addEventListener('fetch'" in rest
    # the version is a hash of the files' contents
    views.worker_source.cache_clear()
    real = views.Path.read_bytes
    monkeypatch.setattr(views.Path, "read_bytes", lambda self: real(self) + (b"x" if self.name == "app.js" else b""))
    try:
        made = tuple(sorted(client.application.extensions[views.GENERATED].items()))
        again = json.loads(views.worker_source(made).partition("\n")[0].removeprefix("self.SHELL = ").rstrip(";"))
    finally:
        views.worker_source.cache_clear()
    assert again["version"] != shell["version"] and again["files"] == shell["files"]


def test_qr_code_is_an_svg_of_the_text(client):
    import segno

    text = "http://192.168.1.20:8000/#t=0123456789abcdef&k=secret-token"
    r = client.post("/web/qr", json={"text": text})
    assert r.status_code == 200 and r.mimetype == "image/svg+xml" and r.headers["Cache-Control"] == "no-store"
    svg = r.get_data(as_text=True)
    assert svg.startswith("<svg") and "<path" in svg
    # the same symbol segno makes for that text (the size follows from the QR version)
    assert f'width="{(segno.make(text, error="m", micro=False).symbol_size(scale=4, border=2))[0]}"' in svg


@pytest.mark.parametrize("kwargs, status", [
    ({"data": "text=x", "content_type": "application/x-www-form-urlencoded"}, 415),
    ({"data": "{", "content_type": "application/json"}, 400),
    ({"json": {"text": ""}}, 422), ({"json": {"text": 5}}, 422), ({"json": ["x"]}, 422),
    ({"json": {"text": "x" * (views.MAX_QR_TEXT + 1)}}, 422),
])
def test_qr_code_refusals_are_problems(client, kwargs, status):
    r = client.post("/web/qr", **kwargs)
    assert r.status_code == status and r.mimetype == "application/problem+json"
    assert r.get_json()["status"] == status


def test_docs_use_swagger_ui_from_an_installed_package(client):
    html = client.get("/docs").get_data(as_text=True)
    assert 'src="/docs/ui/swagger-ui-bundle.js"' in html and 'href="/docs/ui/swagger-ui.css"' in html
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert '"validatorUrl":null' in html
    for asset in ("swagger-ui-bundle.js", "swagger-ui-standalone-preset.js", "swagger-ui.css"):
        r = client.get(f"/docs/ui/{asset}")
        assert r.status_code == 200 and len(r.data) > 10_000, asset
    assert client.get("/docs/ui/../../views.py").status_code == 404


def test_pip_install_ships_the_static_files(tmp_path):
    """setuptools' build_py (what a wheel is made of) copies every static file."""
    subprocess.run([sys.executable, "-c", "from setuptools import setup; setup()", "-q", "build_py",
                    "--build-lib", str(tmp_path)], cwd=ROOT, check=True, capture_output=True, timeout=120)
    shipped = sorted(p.relative_to(tmp_path / "service" / "web" / "static").as_posix()
                     for p in (tmp_path / "service" / "web" / "static").rglob("*") if p.is_file())
    assert shipped == sorted(p.relative_to(STATIC).as_posix() for p in STATIC.rglob("*") if p.is_file())


def page_weight() -> int:
    """Bytes of everything the app page can load: the page, every module, the styles, the
    manifest and the icon (an upper bound: all of the shell), on disk."""
    return sum(p.stat().st_size for p in STATIC.iterdir() if p.is_file())


def page_weight_sent() -> int:
    """The same files gzipped, as the service sends them to a browser that accepts it."""
    return sum(len(gzip.compress(p.read_bytes(), 6)) for p in STATIC.iterdir() if p.is_file())


def test_page_weight_is_under_budget():
    assert page_weight_sent() < PAGE_BUDGET, f"{page_weight_sent()} bytes"


# Every URL that appears in the app's files: only XML namespace names, which are never fetched.
NAMESPACES = {"http://www.w3.org/2000/svg"}


def test_no_file_references_an_external_url():
    for path in STATIC.iterdir():
        text = path.read_text(encoding="utf-8")
        urls = set(re.findall(r"(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}[^\s'\"`)]*", text))
        assert urls <= NAMESPACES, f"{path.name}: {urls - NAMESPACES}"
        assert not re.search(r"@import|url\(\s*['\"]?(?!data:)", text), path.name
    for name in ("dom.js",):  # the namespace is used only as a namespace
        assert "createElementNS(SVG_NS" in (STATIC / name).read_text()


def test_the_page_speaks_only_the_public_api(client):
    """Every path the page's modules name is a documented /v1 operation, a /web file or /sw.js."""
    documented = [re.sub(r"\{[^}]+\}", "[^/]+", p) for p in client.get("/openapi.json").get_json()["paths"]]
    for path in STATIC.glob("*.js"):
        text = path.read_text(encoding="utf-8")
        for literal in re.findall(r"['`](/[^'`\s]*)['`]", text):
            if literal.startswith(("/v1/", "/events", "/stream", "/finish", "/summary", "/rounds", "/next")):
                continue  # checked below (tablePath suffixes: in the next test)
            assert re.fullmatch(r"/web/[a-z0-9.]+|/sw\.js|/", literal), f"{path.name}: {literal}"
        for call in re.findall(r"['`](/v1/[^'`?\s]*)", text):
            concrete = re.sub(r"\$\{[^}]+\}", "x", call)
            assert any(re.fullmatch(p, concrete) for p in documented), f"{path.name}: {call}"
    live = (STATIC / "live.js").read_text()
    assert "tablePath(this.id, '/stream')" in live  # the table's live stream, read with fetch()


def test_tablepath_calls_name_documented_operations(client):
    documented = [re.sub(r"\{[^}]+\}", "{}", p) for p in client.get("/openapi.json").get_json()["paths"]]
    sources = "".join(p.read_text() for p in STATIC.glob("*.js"))
    suffixes = set(re.findall(r"tablePath\([^,)]+, `?'?(/[^'`)?]*)", sources))
    assert {"/stream", "/events", "/rounds/${number}", "/rounds/${f.number}/events"} <= suffixes, suffixes
    for suffix in suffixes:
        path = "/v1/tables/{}" + re.sub(r"\$\{[^}]+\}", "{}", suffix)
        assert path in documented, path


def test_pattern_names_are_the_services(client):
    """The app's pattern table (``/web/patterns.json``) is the rules core's registry, made when the app is:
    each pattern's names, fan per table, and the ruleset option that turns it on."""
    from service.rules.patterns import PATTERNS
    from service.rules.ruleset import ENUMS, XUEZHAN

    shown = client.get("/web/patterns.json").get_json()
    assert [p["id"] for p in shown] == list(PATTERNS)
    for p in shown:
        q = PATTERNS[p["id"]]
        assert (p["name"], p["name_en"], p["base"], p["fan"], p["option"], p["on"]) == (
            q.name,
            q.name_en,
            q.base,
            {t: q.fan(t) for t in ENUMS["fan_table"]},
            q.option,
            q.on,
        ), p["id"]
    options = {p["option"]: p["on"] for p in shown if p["option"]}
    assert options["haidi"] is True and options["zimo"] == "fan"
    assert all(getattr(XUEZHAN, name) != on for name, on in options.items())  # each off in the default room
    assert not (STATIC / "patterns.json").exists()  # (no copy to keep in step)


def test_the_docs_command_writes_the_response_examples(tmp_path, monkeypatch):
    """``python -m tools.docs`` writes the OpenAPI response examples its pages recorded; ``--check`` fails
    while they drift."""
    from tools import docs

    examples = tmp_path / "response_examples.json"
    examples.write_text("{}\n", encoding="utf-8")
    monkeypatch.setattr(docs, "RESPONSE_EXAMPLES", examples)
    monkeypatch.setattr(docs, "DOCS", tmp_path / "docs")
    recorded = {"getSummary": {"evening": {"summary": "The evening's summary", "value": {"rounds": 3}}}}
    # (the pages have their own tests: here they only record an example)
    monkeypatch.setattr(docs, "pages", lambda redis_url, out: out.update(recorded) or {})
    assert docs.main(check=True, redis_url="unused") == 1
    assert docs.main(check=False, redis_url="unused") == 0
    assert json.loads(examples.read_text(encoding="utf-8")) == recorded
    assert docs.main(check=True, redis_url="unused") == 0


def test_the_web_package_imports_no_other_floor():
    for path in (ROOT / "service" / "web").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else (["." * node.level + (node.module or "")] if isinstance(node, ast.ImportFrom) else [])
            )
            for name in names:
                assert not name.startswith("..") and not name.startswith("service"), f"{path.name} imports {name}"


def test_test_hooks_of_the_issue_exist_in_the_modules():
    """The data-testid contract: each hook is named in the app's modules."""
    text = "".join(p.read_text(encoding="utf-8") for p in STATIC.iterdir() if p.suffix in (".js", ".html"))
    fixed = [
        "ruleset",
        "create-table",
        "round-start",
        "record-kong",
        "record-hu",
        "record-draw",
        "record-escape",
        "record-peng",
        "self-drawn",
        "fan-input",
        "confirm",
        "cancel",
        "undo",
        "share-link",
        "share-read-link",
        "pending-count",
        "lang",
        "error",
    ]
    for hook in fixed:
        assert re.search(rf"""['"]{re.escape(hook)}['"]""", text), hook
    for template in ("player-${i}", "seat-${i}", "from-${i}", "kind-${k}", "tile-${tile}", "balance-${i}"):
        assert f"`{template}`" in text or "`${prefix}-${i}`" in text, template
    assert "prefix: 'seat'" in text and "prefix: 'from'" in text


def _string_keys(block_name: str, lang: str) -> set[str]:
    """The keys of one nested block (``codes``, ``reasons``) of one language in i18n.js."""
    text = (STATIC / "i18n.js").read_text(encoding="utf-8")
    lang_at = text.index(f"\n  {lang}: {{")
    block = re.search(rf"\n    {block_name}: \{{\n(.*?)\n    \}},", text[lang_at:], re.S)
    assert block, (lang, block_name)
    return set(re.findall(r"(?:^|[\s,{])([a-z_]+): '", block.group(1)))


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_every_code_and_reason_of_the_rules_core_has_words(lang):
    """A refusal (422) is shown in plain words in both languages, whatever rule it names; every
    transfer reason too."""
    from service.rules.codes import Code, Reason

    assert {c.value for c in Code} <= _string_keys("codes", lang)
    assert {r.value for r in Reason} <= _string_keys("reasons", lang)


def test_the_apps_pure_modules_pass_their_node_tests():
    """The page's pure modules (round state, outbox, store transitions, summary words) have unit tests
    of their own, run with Node's test runner (`node --test service/web/tests/`)."""
    import shutil
    import subprocess

    node = shutil.which("node")
    assert node, "Node.js is needed for the app's unit tests (.ci/run installs Debian's nodejs)"
    done = subprocess.run([node, "--test", "service/web/tests/"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "# fail 0" in done.stdout and "# pass 0" not in done.stdout, done.stdout[-1000:]
