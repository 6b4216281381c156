"""The shell examples of README.md and docs/getting-started.md, replayed against a real service.

Every fenced ``console`` block of those pages is a shell session: each ``$``
command runs, in the page's order, in one ``bash`` session per page, against
one ``python -m service serve`` (its defaults, as the pages say: two workers,
the rate limits on, its own embedded Redis in a temporary directory) on a free
port put in place of ``127.0.0.1:8000``. Every output must equal the page's
after normalising only what differs on every run (:class:`Normaliser`): table
ids, tokens, request ids, ``Date``, the ``at``/``created``/``finished_at``
times and ``X-RateLimit-Reset``. Ids and tokens are numbered in order of
appearance on each side, so the same table must show the same id where the
page shows it.

The pages' examples work with and without API keys: they send ``X-API-Key:
$KEY``, and ``KEY`` is set empty by the page (curl then sends no such header).
So every page is replayed twice: as written, against a service without
``API_KEYS``, and with ``KEY`` set to a key of a service started with
``API_KEYS``; both must give the outputs shown.

A ``$ curl`` line outside a console block would escape the replay: a test
refuses it. ``python tests/test_readme_examples.py --record`` replays the
blocks and writes what the service answered into the pages (then review the
diff).

Run outside CI without ``curl``, the replay is skipped; under ``CI=true`` that
is a failure (``.ci/run`` installs curl).
"""

from __future__ import annotations

import difflib
import os
import re
import secrets
import selectors
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

if __name__ == "__main__":  # (run as a script: --record)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pytest

from service.config import BOUNDS, LIMITS
from tests.served import ROOT, Served

PAGES = (ROOT / "README.md", ROOT / "docs" / "getting-started.md")
PAGE_PORT = "127.0.0.1:8000"
KEY_LINE = re.compile(r"^KEY=(\s|$)")
"""The command that sets ``KEY`` (empty on the page; a key of the service when replayed with keys)."""


@dataclass(frozen=True)
class Example:
    """One ``$`` command of a page, its output as shown, and the lines that output spans."""

    line: int  # 1-based line of the command
    command: str
    expected: str
    output_lines: tuple[int, int]  # 0-based [start, end) of the output in the page's lines


def examples_of(text: str) -> list[Example]:
    """The ``$`` commands of the page's console blocks, in order, each with the lines after it up to
    the next command or the block's end."""
    lines = text.splitlines()
    examples: list[Example] = []
    fenced: bool | None = False  # in a console block; None: in another block
    current: tuple[int, str] | None = None
    out: list[str] = []

    def close() -> None:
        nonlocal current, out
        if current is not None:
            while out and out[-1] == "":
                out.pop()
            at = current[0] + 1  # the output's first line (0-based), the command's line number (1-based)
            examples.append(Example(at, current[1], "\n".join(out), (at, at + len(out))))
        current, out = None, []

    for i, line in enumerate(lines):
        if line.startswith("```"):
            if fenced:
                close()
                fenced = False
            elif line.strip() == "```console":
                fenced = True
            else:  # another block: skip it whole
                fenced = None
            continue
        if fenced is None:
            continue
        if not fenced:
            continue
        if line.startswith("$ "):
            close()
            current = (i, line[2:])
        elif current is not None:
            out.append(line)
    assert not fenced, "an unclosed console block"
    return examples


class Normaliser:
    """Replaces what differs on every run; ids and tokens by number in order of first appearance."""

    def __init__(self) -> None:
        self.numbers: dict[tuple[str, str], int] = {}

    def _number(self, kind: str, raw: str) -> str:
        key = (kind, raw)
        if key not in self.numbers:
            self.numbers[key] = sum(1 for k, _ in self.numbers if k == kind) + 1
        return f"<{kind}{self.numbers[key]}>"

    def __call__(self, text: str) -> str:
        text = re.sub(r'"(token|read_token)":"([A-Za-z0-9_-]{43})"',
                      lambda m: f'"{m.group(1)}":"{self._number("token", m.group(2))}"', text)
        text = re.sub(r'"request_id":"[0-9a-f]{32}"', '"request_id":"<request-id>"', text)
        text = re.sub(r"^X-Request-ID: [0-9a-f]{32}$", "X-Request-ID: <request-id>", text, flags=re.M)
        text = re.sub(r"^Date: (Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT$",
                      "Date: <date>", text, flags=re.M)
        text = re.sub(r'"(at|created|finished_at)":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"', r'"\1":"<time>"', text)
        text = re.sub(r"^X-RateLimit-Reset: \d{10}$", "X-RateLimit-Reset: <reset>", text, flags=re.M)
        return re.sub(r"\b[0-9a-f]{16}\b", lambda m: self._number("id", m.group()), text)


class Shell:
    """One ``bash`` session: commands in, each one's output (stdout and stderr) and status out."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(["bash", "--norc", "--noprofile"], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert self.proc.stdin is not None and self.proc.stdout is not None  # (both piped)
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.stdout, selectors.EVENT_READ)

    def run(self, command: str, timeout: float = 30) -> tuple[str, int]:
        mark = f"__done_{uuid.uuid4().hex}__"
        # (printf's newline first: an output without one, such as a JSON body, still ends its line)
        self.stdin.write(f"{command}\nprintf '\\n{mark} %s\\n' \"$?\"\n".encode())
        self.stdin.flush()
        buf = b""
        deadline = time.monotonic() + timeout
        pattern = re.compile(rb"\n" + mark.encode() + rb" (\d+)\n\Z")
        while not (found := pattern.search(buf)):
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                so_far = buf.decode(errors="replace")
                raise AssertionError(f"`{command}` did not finish in {timeout} s; so far:\n{so_far}")
            if self.selector.select(left):
                buf += os.read(self.stdout.fileno(), 65536)
        # (a terminal shows HTTP's CRLF header lines as lines, as the pages do)
        return buf[:found.start()].decode().replace("\r\n", "\n"), int(found.group(1))

    def close(self) -> None:
        self.selector.close()
        self.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stdout.close()


@dataclass(frozen=True)
class Result:
    example: Example
    actual: str  # as run, with the page's port
    status: int


def replay(port: int, examples: list[Example], key: str | None = None) -> list[Result]:
    """Every example run in order in one shell against the service on ``port`` (``KEY`` set to ``key``)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "HOME": os.environ.get("HOME", "/tmp")}
    here = f"127.0.0.1:{port}"
    results: list[Result] = []
    shell = Shell(env)
    try:
        for example in examples:
            command = example.command.replace(PAGE_PORT, here)
            if key is not None and KEY_LINE.match(command):
                command = f"KEY={key}" + command[len("KEY="):]
            output, status = shell.run(command)
            results.append(Result(example, output.rstrip("\n").replace(here, PAGE_PORT), status))
    finally:
        shell.close()
    return results


def mismatches(page: str, results: list[Result]) -> list[str]:
    """A diff (of the normalised outputs) for each example whose output differs from the page's, or that failed."""
    shown, ran = Normaliser(), Normaliser()
    problems = []
    for r in results:
        expected, actual = shown(r.example.expected), ran(r.actual)
        if expected != actual or r.status != 0:
            diff = "\n".join(difflib.unified_diff(expected.splitlines(), actual.splitlines(),
                                                  page, "as run", lineterm=""))
            problems.append(f"{page}:{r.example.line}: $ {r.example.command}\n(exit status {r.status})\n{diff}")
    return problems


def service_env(data_dir: Path, api_keys: str = "") -> dict[str, str]:
    """The service's defaults whatever this process's environment says, an embedded Redis in ``data_dir``."""
    env = {var: "" for var, _, _ in BOUNDS.values()}
    env.update({var: str(default) for var, default, _ in LIMITS.values()})
    for var in ("REDIS_URL", "REDIS_MAXMEMORY", "REDIS_MIN_REPLICAS", "API_KEYS", "API_KEY_LIMITS",
                "TRUSTED_PROXIES", "PROXY_HEADER", "CORS_ORIGINS", "LOG_LEVEL"):
        env[var] = ""
    env.update(REDIS_DATA_DIR=str(data_dir), API_KEYS=api_keys)
    return env


def require_curl() -> None:
    if shutil.which("curl") is None:
        reason = "the pages' examples need curl (apt-get install curl)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(reason + " — required under CI")
        pytest.skip(reason)


def new_key() -> str:
    return "mk_" + secrets.token_urlsafe(32)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    require_curl()
    tmp = tmp_path_factory.mktemp("pages")
    server = Served(tmp / "serve.log", service_env(tmp / "redis"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def served_with_keys(tmp_path_factory):
    require_curl()
    tmp = tmp_path_factory.mktemp("pages-keys")
    key = new_key()
    server = Served(tmp / "serve.log", service_env(tmp / "redis", api_keys=f"docs={key}"))
    server.key = key
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.slow  # (real servers: the fast lane leaves it out)
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_example_gives_the_output_it_shows(served, page):
    examples = examples_of(page.read_text(encoding="utf-8"))
    assert len(examples) >= 5 and any(KEY_LINE.match(e.command) for e in examples), page
    problems = mismatches(page.name, replay(served.port, examples))
    assert not problems, (
        f"{len(problems)} example(s) differ from the service (`python "
        f"tests/test_readme_examples.py --record` writes the real output):\n\n" + "\n\n".join(problems)
    )


@pytest.mark.slow  # (real servers: the fast lane leaves it out)
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_example_works_the_same_with_api_keys(served_with_keys, page):
    examples = examples_of(page.read_text(encoding="utf-8"))
    problems = mismatches(page.name, replay(served_with_keys.port, examples, key=served_with_keys.key))
    assert not problems, (f"{len(problems)} example(s) answer otherwise on a service with API_KEYS (send "
                          f"-H \"X-API-Key: $KEY\" where no table token is sent):\n\n" + "\n\n".join(problems))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_shell_example_is_in_a_console_block(page):
    text = page.read_text(encoding="utf-8")
    replayed = {f"$ {e.command}" for e in examples_of(text)}
    others = [line for line in text.splitlines() if line.startswith("$ ") and line not in replayed]
    assert not others, f"{page.name}: `$` lines outside a console block are not replayed: {others}"
    assert "```sh\n$ " not in text and "```\n$ " not in text


def test_the_normaliser_takes_out_only_what_differs_on_every_run():
    one = ('HTTP/1.1 201 CREATED\nDate: Mon, 30 Nov 2026 16:58:44 GMT\nLocation: /v1/tables/f40977b5999acc5f\n'
           'X-RateLimit-Reset: 1796061525\nX-Request-ID: e1c48674c8d4a87a782fd66f9c012a77\n\n'
           '{"id":"f40977b5999acc5f","token":"rch_N-TZmoUNoabBz2oAaWcL9EQ8E2k_m16ikgRiSRY",'
           '"read_token":"fKM638gLqoAwCMcLlXK_jGWkHxnFd6HHwHvTn3Wcuis","at":"2026-11-30T16:58:45.186Z"}')
    two = ('HTTP/1.1 201 CREATED\nDate: Tue, 01 Dec 2026 09:00:01 GMT\nLocation: /v1/tables/0123456789abcdef\n'
           'X-RateLimit-Reset: 1796099999\nX-Request-ID: 00000000000000000000000000000000\n\n'
           f'{{"id":"0123456789abcdef","token":"{"A" * 43}","read_token":"{"B" * 43}",'
           '"at":"2027-01-01T00:00:00.000Z"}')
    assert Normaliser()(one) == Normaliser()(two)
    # the same table must keep the same id, and anything else is compared as it is
    assert Normaliser()(one) != Normaliser()(two.replace("Location: /v1/tables/0123456789abcdef",
                                                           "Location: /v1/tables/fedcba9876543210"))
    assert Normaliser()(one) != Normaliser()(two.replace("201 CREATED", "200 OK"))
    assert Normaliser()(one) != Normaliser()(two.replace("\n\n", "\nContent-Length: 3\n\n"))


def test_the_parser_finds_commands_and_their_outputs_in_console_blocks_only():
    text = ("```console\n$ echo a\na\n\nb\n\n$ true\n$ echo c\nc\n```\n\n```sh\n$ echo d\nd\n```\n"
            "```python\n>>> 1\n```\n```console\n$ echo e\ne\n```\n")
    assert [(e.command, e.expected) for e in examples_of(text)] == [
        ("echo a", "a\n\nb"), ("true", ""), ("echo c", "c"), ("echo e", "e")]


# -- writing the real outputs into the pages ---------------------------------------------------
def record(pages: tuple[Path, ...] = PAGES) -> None:
    """Replay each page's examples against a fresh service and write the outputs into the page."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="pages-") as tmp:
        server = Served(Path(tmp) / "serve.log", service_env(Path(tmp) / "redis"))
        try:
            for page in pages:
                text = page.read_text(encoding="utf-8")
                lines = text.splitlines()
                results = replay(server.port, examples_of(text))
                for r in reversed(results):  # (from the end: earlier line numbers stay put)
                    start, end = r.example.output_lines
                    while end > start and lines[end - 1] == "":
                        end -= 1
                    lines[start:end] = r.actual.splitlines()
                    if r.status != 0:
                        print(f"{page.name}:{r.example.line}: exit status {r.status}", file=sys.stderr)
                page.write_text("\n".join(lines) + "\n", encoding="utf-8")
                print(f"wrote {page.relative_to(ROOT)}")
        finally:
            server.stop()


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python tests/test_readme_examples.py --record")
    record()
