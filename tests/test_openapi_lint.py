"""The committed openapi.yaml passes a real OpenAPI linter and generates TypeScript types cleanly.

The tools come from ``tools/openapi/package.json`` (pinned by its ``package-lock.json``): the
session fixture runs ``npm ci`` there when one is missing or at another version
(:mod:`tests.node_tools`), so a fresh clone needs nothing installed by hand but Node.js and npm.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests import node_tools

pytestmark = pytest.mark.slow  # (long: generated clients, fuzzing or a state machine)

ROOT = Path(__file__).resolve().parent.parent
TOOLS = node_tools.TOOLS
DOCUMENT = ROOT / "openapi.yaml"


@pytest.fixture(scope="session")
def npm_tools() -> Path:
    return node_tools.installed()


def test_redocly_lint_finds_nothing(npm_tools):
    run = subprocess.run(
        [str(npm_tools / "redocly"), "lint", str(DOCUMENT), "--config", str(TOOLS / "redocly.yaml"),
         "--format", "json"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    out = run.stdout[run.stdout.index("{"):] if "{" in run.stdout else run.stdout
    result = json.loads(out)
    problems = [(p["ruleId"], p["severity"], p["message"], [loc.get("pointer") for loc in p.get("location", [])])
                for p in result["problems"]]
    assert result["totals"]["errors"] == 0 and result["totals"]["warnings"] == 0, problems
    assert run.returncode == 0, run.stderr


def test_the_linter_would_catch_a_broken_document(npm_tools, tmp_path):
    """The lint is real: an operation without an operationId and with an undefined $ref fails it."""
    import yaml

    doc = yaml.safe_load(DOCUMENT.read_text(encoding="utf-8"))
    op = doc["paths"]["/v1/hands/ting"]["post"]
    del op["operationId"]
    op["responses"]["200"]["content"]["application/json"]["schema"] = {"$ref": "#/components/schemas/Nope"}
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    run = subprocess.run(
        [str(npm_tools / "redocly"), "lint", str(broken), "--config", str(TOOLS / "redocly.yaml"), "--format", "json"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    rules = {p["ruleId"] for p in json.loads(run.stdout[run.stdout.index("{"):])["problems"]}
    assert run.returncode != 0 and {"operation-operationId", "no-unresolved-refs"} <= rules, rules


def test_typescript_types_generate_and_compile(npm_tools, tmp_path):
    """openapi-typescript turns the document into types that a TypeScript program can use."""
    types = tmp_path / "mahjong.d.ts"
    run = subprocess.run([str(npm_tools / "openapi-typescript"), str(DOCUMENT), "-o", str(types)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "warn" not in (run.stdout + run.stderr).lower(), run.stdout + run.stderr
    program = tmp_path / "use.ts"
    program.write_text('''import type { components, paths } from "./mahjong";
type Kong = components["schemas"]["KongEvent"];
type Posted = paths["/v1/tables/{table_id}/events"]["post"]["requestBody"]["content"]["application/json"];
const kong: Kong = { type: "kong", seat: 0, kind: "concealed", tile: "5m" };
const posted: Posted = kong;
const problem: components["schemas"]["Problem"] = {
  type: "https://mahjong.example/problems/bad_event", title: "t", status: 422, detail: "d",
  code: "bad_event", instance: "/v1/tables/x/events", request_id: "r", event: 3 };
export const all = [posted, problem];
''', encoding="utf-8")
    tsc = subprocess.run([str(npm_tools / "tsc"), "--noEmit", "--strict", "--target", "es2020", str(program)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert tsc.returncode == 0, tsc.stdout + tsc.stderr
    wrong = tmp_path / "wrong.ts"
    wrong.write_text(
        'import type { components } from "./mahjong";\n'
        'export const k: components["schemas"]["KongEvent"] = '
        '{ type: "kong", seat: 0, kind: "sideways", tile: "5m" };\n',
        encoding="utf-8",
    )
    assert subprocess.run([str(npm_tools / "tsc"), "--noEmit", "--strict", str(wrong)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300).returncode != 0
