"""README.md's ``$ curl`` examples, replayed in order against a real service: the outputs are what it shows.

One ``python -m service serve`` (its defaults, as "Started with the first command
above" says: two workers, the rate limits on, its own embedded Redis in a
temporary directory) on a free port. Each ``$`` command of the section "Every
endpoint, with real output" (down to its errors example) runs in one ``bash``
session, in the README's order, with the port put in; ``ID``, ``TOKEN`` and
``READ`` are set from the table creation's answer as the README's prose says,
and the stakes example sets its own. Every output must equal the README's
after normalising only what differs on every run (:class:`Normaliser`): table
ids, tokens, request ids, ``Date``, the ``at``/``created`` times and
``X-RateLimit-Reset``. Ids and tokens are numbered in order of appearance on
each side, so the same table must show the same id where the README shows it.

The stream example is replayed for real, with ``STREAM_HEARTBEAT=3`` instead of
15 s: while its ``curl`` runs, the record its prose names is posted, and after the
first heartbeat the README's next example (the ``DELETE``) ends the stream.

Run outside CI without ``curl``, it is skipped; under ``CI=true`` that is a
failure (``.ci/run`` installs curl).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import selectors
import shutil
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from service.config import BOUNDS, LIMITS
from tests.served import ROOT, Served, request

README = ROOT / "README.md"
SECTION = "## Every endpoint, with real output"
PROSE_VARIABLES = "Below, `TOKEN` and `READ` hold the two tokens, `ID` the table id."
README_PORT = "127.0.0.1:8000"
HEARTBEAT = 3  # seconds (STREAM_HEARTBEAT); the README's run had the default 15
# the record the stream example's prose says was posted while connected
STREAM_WRITE = {"type": "kong", "seat": 0, "kind": "direct", "tile": "5m", "from": 2}
# `$ curl` examples elsewhere in the README, and why they are not replayed
NOT_REPLAYED = {
    "$ curl -s http://127.0.0.1:8000/v1/tables -H 'X-API-Key: mk_9f0yT...'":
        "needs a serve started with API_KEYS, and the key is elided",
}


@dataclass(frozen=True)
class Example:
    """One ``$`` command of the README, its output as shown, and the lines that output spans."""

    line: int  # 1-based line of the command
    command: str
    expected: str
    output_lines: tuple[int, int]  # 0-based [start, end) of the output in the README's lines


def readme_examples(text: str) -> list[Example]:
    """The ``$`` commands of the section, in order, each with the lines after it up to the next one."""
    lines = text.splitlines()
    start = lines.index(SECTION)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## "))
    examples: list[Example] = []
    fenced = False
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

    for i in range(start, end):
        line = lines[i]
        if line.startswith("```"):
            if fenced:
                close()
            fenced = not fenced
            continue
        if not fenced:
            continue
        if line.startswith("$ "):
            close()
            current = (i, line[2:])
        elif current is not None:
            out.append(line)
    assert not fenced, "an unclosed code block in the README's examples"
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
        text = re.sub(r'"(at|created)":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"', r'"\1":"<time>"', text)
        text = re.sub(r"^X-RateLimit-Reset: \d{10}$", "X-RateLimit-Reset: <reset>", text, flags=re.M)
        return re.sub(r"\b[0-9a-f]{16}\b", lambda m: self._number("id", m.group()), text)


class Shell:
    """One ``bash`` session: commands in, each one's output (stdout and stderr) and status out."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(["bash", "--norc", "--noprofile"], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.proc.stdout, selectors.EVENT_READ)

    def run(self, command: str, timeout: float = 30) -> tuple[str, int]:
        mark = f"__done_{uuid.uuid4().hex}__"
        self.proc.stdin.write(f"{command}\nprintf '\\n{mark} %s\\n' \"$?\"\n".encode())
        self.proc.stdin.flush()
        buf = b""
        deadline = time.monotonic() + timeout
        pattern = re.compile(rb"\n" + mark.encode() + rb" (\d+)\n\Z")
        while not (found := pattern.search(buf)):
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                so_far = buf.decode(errors="replace")
                raise AssertionError(f"`{command}` did not finish in {timeout} s; so far:\n{so_far}")
            if self.selector.select(left):
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                buf += chunk
        # (a terminal shows HTTP's CRLF header lines as lines, as the README does)
        return buf[:found.start()].decode().replace("\r\n", "\n"), int(found.group(1))

    def close(self) -> None:
        self.selector.close()
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


class Background:
    """A command running on its own (the stream's curl), its output gathered by a thread."""

    def __init__(self, command: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(["bash", "-c", command], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.output = b""
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while chunk := os.read(self.proc.stdout.fileno(), 65536):
            with self.lock:
                self.output += chunk

    def text(self) -> str:
        with self.lock:
            return self.output.decode(errors="replace")

    def wait_for(self, predicate, what: str, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(self.text()):
            if time.monotonic() > deadline:
                raise AssertionError(f"the stream did not show {what} in {timeout} s; so far:\n{self.text()}")
            time.sleep(0.02)

    def finish(self, timeout: float = 15) -> tuple[str, int]:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
            raise AssertionError(f"the stream did not end in {timeout} s; so far:\n{self.text()}") from None
        self.thread.join(timeout=5)
        self.proc.stdout.close()
        return self.text().replace("\r\n", "\n"), rc


@dataclass(frozen=True)
class Result:
    example: Example
    actual: str  # as run, with the README's port
    status: int


def replay(port: int, examples: list[Example], readme: str) -> list[Result]:
    """Every example run in order against the service on ``port``."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "HOME": os.environ.get("HOME", "/tmp")}
    here = f"127.0.0.1:{port}"
    variables: dict[str, str] = {}
    results: list[Result] = []
    shell = Shell(env)
    try:
        queue = list(examples)
        while queue:
            example = queue.pop(0)
            command = example.command.replace(README_PORT, here)
            if "/stream" in command:
                assert json.dumps(STREAM_WRITE) in " ".join(readme.split()), \
                    "the stream example's prose no longer names the record posted while it is connected"
                results.extend(_replay_stream(example, queue.pop(0), command, shell, env, variables, port, here))
                continue
            output, status = shell.run(command)
            results.append(Result(example, output.rstrip("\n").replace(here, README_PORT), status))
            if '"read_token"' in output and "READ" not in variables:
                assert PROSE_VARIABLES in readme, "the README no longer says what ID, TOKEN and READ hold"
                body = json.loads(output[output.index("{"):])
                variables.update(ID=body["id"], TOKEN=body["token"], READ=body["read_token"])
                shell.run("; ".join(f"{k}={v}" for k, v in variables.items()))
    finally:
        shell.close()
    return results


def _replay_stream(example: Example, then: Example, command: str, shell: Shell, env: dict[str, str],
                   variables: dict[str, str], port: int, here: str) -> list[Result]:
    """The stream, a record posted while it is connected, a heartbeat, then the next example (the DELETE)."""
    assert "-X DELETE" in then.command and "$ID" in then.command, \
        f"the stream example is followed by the DELETE that ends it, not `{then.command}`"
    stream = Background(command, {**env, **variables})
    try:
        stream.wait_for(lambda text: text.startswith("retry:") and text.endswith("\n\n"), "what the log holds")
        status, _, body = request(port, "POST", f"/v1/tables/{variables['ID']}/events", STREAM_WRITE,
                                  {"Authorization": f"Bearer {variables['TOKEN']}"})
        assert status == 201, body
        seq = json.loads(body)["seq"]
        stream.wait_for(lambda text: f"\nid: {seq}\n" in text and text.endswith(": keep-alive\n\n"),
                        f"record {seq} and then a heartbeat")
        output, status = shell.run(then.command.replace(README_PORT, here))
        deleted = Result(then, output.rstrip("\n").replace(here, README_PORT), status)
        text, rc = stream.finish()
    finally:
        if stream.proc.poll() is None:
            os.killpg(stream.proc.pid, 9)
            stream.proc.wait()
    return [Result(example, text.rstrip("\n").replace(here, README_PORT), rc), deleted]


def mismatches(results: list[Result]) -> list[str]:
    """A diff (of the normalised outputs) for each example whose output differs from the README's, or that failed."""
    shown, ran = Normaliser(), Normaliser()
    problems = []
    for r in results:
        expected, actual = shown(r.example.expected), ran(r.actual)
        if expected != actual or r.status != 0:
            diff = "\n".join(difflib.unified_diff(expected.splitlines(), actual.splitlines(),
                                                  "README.md", "as run", lineterm=""))
            at = next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b), min(len(expected), len(actual)))
            where = (f"first difference at character {at}: README …{expected[max(0, at - 40):at + 40]}… / "
                     f"as run …{actual[max(0, at - 40):at + 40]}…")
            problems.append(f"README.md:{r.example.line}: $ {r.example.command}\n"
                            f"(exit status {r.status}; {where})\n{diff}")
    return problems


def service_env(data_dir: Path) -> dict[str, str]:
    """The service's defaults whatever this process's environment says, an embedded Redis in ``data_dir``."""
    env = {var: "" for var, _, _ in BOUNDS.values()}
    env.update({var: str(default) for var, default, _ in LIMITS.values()})
    for var in ("REDIS_URL", "REDIS_MAXMEMORY", "REDIS_MIN_REPLICAS", "API_KEYS", "API_KEY_LIMITS",
                "TRUSTED_PROXIES", "PROXY_HEADER", "CORS_ORIGINS", "LOG_LEVEL"):
        env[var] = ""
    env.update(REDIS_DATA_DIR=str(data_dir), STREAM_HEARTBEAT=str(HEARTBEAT))
    return env


def require_curl() -> None:
    if shutil.which("curl") is None:
        reason = "the README examples need curl (apt-get install curl)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(reason + " — required under CI")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    require_curl()
    tmp = tmp_path_factory.mktemp("readme")
    server = Served(tmp / "serve.log", service_env(tmp / "redis"))
    try:
        yield server
    finally:
        server.stop()


def test_every_curl_example_of_the_readme_gives_the_output_it_shows(served):
    text = README.read_text(encoding="utf-8")
    examples = readme_examples(text)
    assert len(examples) >= 30 and sum("/stream" in e.command for e in examples) == 1
    problems = mismatches(replay(served.port, examples, text))
    assert not problems, (f"{len(problems)} README example(s) differ from the service (rerun them and paste "
                          f"the real output):\n\n" + "\n\n".join(problems))


def test_the_curl_examples_elsewhere_are_the_known_ones():
    text = README.read_text(encoding="utf-8")
    replayed = {f"$ {e.command}" for e in readme_examples(text)}
    others = {line for line in text.splitlines() if line.startswith("$ ") and "curl" in line} - replayed
    assert others == set(NOT_REPLAYED), "a `$ curl` example outside the replayed section: move it there or list why"


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


def test_the_readme_parser_finds_commands_and_their_outputs():
    text = f"{SECTION}\n\n```\n$ echo a\na\n\nb\n\n$ true\n$ echo c\nc\n```\n\n## Next\n```\n$ echo d\nd\n```\n"
    assert [(e.command, e.expected) for e in readme_examples(text)] == [
        ("echo a", "a\n\nb"), ("true", ""), ("echo c", "c")]
