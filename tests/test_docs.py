"""docs/: the generated pages match the code; the hand-written ones hold what a newcomer needs.

(That every link and anchor of the pages resolves: tests/test_doc_links.py.)
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from service.rules.patterns import PATTERNS
from service.rules.ruleset import ENUMS
from tools import docs

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def recorded(redis_server) -> tuple[dict[str, str], dict]:
    """The generated pages, and the response examples their requests recorded for the OpenAPI document."""
    import redis

    client = redis.Redis.from_url(redis_server.url)
    try:  # (an earlier test's webhooks and tables of the same key names would show in the examples)
        client.flushall()
    finally:
        client.close()
    examples: dict = {}
    return docs.pages(redis_server.url, examples), examples


@pytest.fixture(scope="module")
def generated(recorded) -> dict[str, str]:
    return recorded[0]


def blocks(page: str) -> dict[str, str]:
    """The generated blocks of a rules page, by name."""
    return {m.group(2): m.group(3) for m in docs.BLOCK.finditer(page)}


RULE_BOOK = (DOCS / "rules.md").read_text(encoding="utf-8")
SECTIONS = (["1", "2", "3", "4", "5", "5.1", "5.2", "5.3", "6", "7", "7.1", "7.2", "7.3", "8", "9", "10",
             "10.1", "11", "12", "13"] + [f"13.{n}" for n in range(1, 9)] + ["13.5.1", "13.5.2", "13.5.3", "14"]
            + [f"14.{n}" for n in range(1, 7)] + ["15"] + [f"15.{n}" for n in range(1, 6)] + ["16"]
            + ["17"] + [f"17.{n}" for n in range(1, 7)])


def test_generated_pages_are_up_to_date(generated):
    stale = docs.stale(generated)
    assert not stale, f"docs/{stale} drifted from the code: run `python -m tools.docs` and commit the result"


def test_the_docs_command_checks_and_fails_on_drift(tmp_path, generated):
    assert sorted(docs.stale(generated, tmp_path)) == sorted(generated)  # nothing there: every page is stale
    for name, text in generated.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert docs.stale(generated, tmp_path) == []
    (tmp_path / "rules.md").write_text(generated["rules.md"].replace("清一色", "X"), encoding="utf-8")
    assert docs.stale(generated, tmp_path) == ["rules.md"]


def test_rules_page_lists_every_pattern_in_every_fan_table(generated):
    tables = blocks(generated["rules.md"])
    page = tables["base-patterns"] + tables["extras"]
    for p in PATTERNS.values():
        row = next(line for line in page.splitlines() if line.startswith(f"| `{p.id}` |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        fans = [("—" if p.fan(t) is None else str(p.fan(t))) for t in ENUMS["fan_table"]]
        assert cells == [f"`{p.id}`", p.name, p.name_en, *fans], row




def test_api_page_shows_every_event_type_answered(generated):
    page = generated["api.md"]
    from service.rules.table import TABLE_EVENTS

    for kind in TABLE_EVENTS:
        assert re.search(r'\{"type":"' + kind + '"', page), kind
        assert f'<a id="event-{kind}"></a>' in page, kind
    void = re.search(r"POST /v1/tables/<id>/events/(\d+)/void", page)
    assert void and f'"voided":{void.group(1)}' in page and '<a id="event-void"></a>' in page
    statuses = re.findall(r"^(\d{3}) [A-Z ]+$", page, re.M)
    assert statuses.count("201") >= 12 and {"200", "204", "304", "401", "403", "404", "409", "412", "422",
                                            "429"} <= set(statuses), statuses
    assert '"code":"seat_out_of_range"' in page and '"errors":{"seat"' in page
    assert "Idempotent-Replayed: true" in page and '"limit":"table_events"' in page


def test_api_page_has_a_section_and_an_example_for_every_operation(generated):
    from service.api.app import openapi_dict

    page = generated["api.md"]
    reference = page.split("<!-- generated: api-reference -->", 1)[1].split("<!-- end generated -->", 1)[0]
    sections = dict(
        re.findall(
            r'<a id="([a-z]+)"></a>\n\n#### `[A-Z]+ [^`]+`\n(.*?)(?=<a id="[a-z]+"></a>\n\n#### |\Z)', reference, re.S
        )
    )
    missing = []
    for _, method, path, op in docs.operations(openapi_dict()):
        section = sections.get(docs.anchor(op["operationId"]))
        assert section is not None, f"docs/api.md has no section for {op['operationId']} ({method} {path})"
        assert f"| [`{op['operationId']}`](#{docs.anchor(op['operationId'])}) | `{method} {path}` |" in page
        if "\n```http\n" not in section:
            missing.append(f"{op['operationId']} ({method} {path})")
    assert not missing, ("operations without a recorded example in docs/api.md: " + ", ".join(missing)
                         + " — add one to api_examples in tools/docs.py and run `python -m tools.docs`")


def test_api_page_shows_no_real_id_token_or_key(generated):
    page = generated["api.md"]
    examples = page.split("## Operations", 1)[1]
    assert "<token>" in page and "<id>" in page
    # table ids (a made-up one aside; a rating's decimals are no id)
    assert not re.search(r"(?<!\.)\b[0-9a-f]{16}\b", examples.replace("0" * 16, ""))
    assert not re.search(r"[A-Za-z0-9_-]{43}", examples.replace("A" * 43, ""))  # tokens (a made-up one aside)
    assert "mk_" not in examples and not re.search(r'"request_id":"[0-9a-f]{32}"', examples)


def test_an_operation_without_an_example_gets_its_section_all_the_same():
    doc = {"tags": [{"name": "hands", "description": "Hands."}], "paths": {
        "/v1/hands/ting": {"post": {"operationId": "tingHand", "tags": ["hands"], "summary": "Ting.",
                                    "security": [], "responses": {"200": {"description": "OK"}}}},
        "/v1/webhooks": {"post": {"operationId": "newOne", "tags": ["webhooks"], "summary": "A new one.",
                                  "security": [{"apiKey": []}],
                                  "responses": {"201": {"description": "Created"}}}}}}
    blocks = docs.api_blocks(doc, {"tingHand": ["**An example.**\n\n```http\nPOST /v1/hands/ting\n```\n\n"]})
    text = blocks["api-reference"]
    assert text.index("### hands") < text.index("### webhooks")  # an unknown tag comes last
    assert '<a id="newone"></a>' in text and "No recorded example yet" in text.split('<a id="newone"></a>')[1]
    assert "No recorded example yet" not in text.split('<a id="newone"></a>')[0]
    assert "| [`newOne`](#newone) | `POST /v1/webhooks` | `X-API-Key` | 201 |" in blocks["api-operations"]


def test_hand_written_pages_cover_the_newcomer(generated):
    glossary = (DOCS / "glossary.md").read_text(encoding="utf-8")
    for term in ("缺一门", "定缺", "刮风下雨", "查花猪", "查大叫", "呼叫转移", "一炮多响", "杠上花", "杠上炮",
                 "抢杠胡", "花猪", "大叫", "退税", "血战到底", "自摸", "点炮", "番"):
        assert term in glossary, term
    notation = (DOCS / "notation.md").read_text(encoding="utf-8")
    assert "123m456p789s11m" in notation and "canonical" in notation
    clients = (DOCS / "clients.md").read_text(encoding="utf-8")
    assert "openapi-python-client generate" in clients and "openapi-typescript" in clients
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    for page in ("getting-started.md", "table-app.md", "api.md", "operations.md", "performance.md",
                 "glossary.md", "notation.md", "rules.md", "clients.md"):
        assert f"]({page})" in index and (DOCS / page).exists(), page
    assert not (DOCS / "events.md").exists()  # (folded into api.md)


def test_openapi_response_examples_are_the_recorded_answers(recorded):
    """The document's response examples are what this code answered docs/api.md's requests (ids and times
    fixed), and they validate against their schemas."""
    import jsonschema

    from service.api.app import openapi_dict

    examples = recorded[1]
    assert set(examples) >= {"getSummary", "finishTable"} and set(examples["getSummary"]) == {"evening", "stakes"}
    assert docs.RESPONSE_EXAMPLES.read_text(encoding="utf-8") == docs.response_examples_json(examples), (
        "service/api/response_examples.json drifted: run `python -m tools.docs`, then "
        "`python -m service openapi > openapi.yaml`")
    doc = openapi_dict()
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method == "parameters":
                continue
            responses = op.get("responses", {})
            content = (
                (responses.get("200") or responses.get("201") or {}).get("content", {}).get("application/json", {})
            )
            if "examples" not in content:
                continue
            assert content["examples"] == examples[op["operationId"]], (method, path)
            validator = jsonschema.Draft202012Validator({**content["schema"], "components": doc["components"]})
            for name, shown in content["examples"].items():
                assert not list(validator.iter_errors(shown["value"])), (op["operationId"], name)
    stakes = examples["getSummary"]["stakes"]["value"]  # in coins: the payments square each seat's coin result
    left = [seat["coins"] for seat in stakes["seats"]]
    for p in stakes["settle_up"]:
        assert set(p) == {"from", "to", "coins"}
        left[p["from"]] += p["coins"]
        left[p["to"]] -= p["coins"]
    assert left == [0] * len(left)
    assert set(examples["correctRound"]) == {"corrected"} and examples["correctRound"]["corrected"]["value"]["changes"]


def test_docs_cli_check_passes_on_the_committed_pages():
    run = subprocess.run([sys.executable, "-m", "tools.docs", "--check"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr


def test_api_page_names_every_conflict_code_of_the_store(generated):
    source = (ROOT / "service" / "store" / "table_store.py").read_text(encoding="utf-8")
    codes = set(re.findall(r'Conflict\("([a-z_]+)"', source))
    assert codes and all(f"`{code}`" in generated["api.md"] for code in codes), codes


def test_rules_page_lists_every_code_and_reason(generated):
    from service.rules.codes import code_table, reason_table

    tables = blocks(generated["rules.md"])
    for name, rows in (("error-codes", code_table()), ("transfer-reasons", reason_table())):
        for code, meaning in rows:
            assert f"| `{code}` | {meaning} |" in tables[name], code


def test_rules_page_lists_every_ruleset_field_in_every_preset(generated):
    from service.rules.ruleset import PRESETS, Ruleset

    table = blocks(generated["rules.md"])["presets"]
    for name in Ruleset.__dataclass_fields__:
        row = next(line for line in table.splitlines() if line.startswith(f"| `{name}` |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1:-1] == [f"`{json.dumps(getattr(r, name), ensure_ascii=False)}`" for r in PRESETS.values()], row


# -- the rule book: hand-written prose around generated blocks ------------------------------------
def test_rules_page_fills_its_blocks_and_keeps_its_prose(tmp_path):
    page = docs.rules_page()
    assert page == RULE_BOOK  # (as the committed page: also checked with the other pages above)
    prose = page.replace("## 1. Tiles and notation", "## 1. Tiles, and how to write them")
    drifted = docs.BLOCK.sub(lambda m: m.group(1) + "| a table the code no longer gives |\n" + m.group(4), prose)
    assert blocks(drifted) != blocks(page)
    assert docs.rules_page(drifted) == prose  # every block refilled from the code, the prose as edited
    (tmp_path / "rules.md").write_text(drifted, encoding="utf-8")
    assert docs.stale({"rules.md": docs.rules_page(drifted)}, tmp_path) == ["rules.md"]
    (tmp_path / "rules.md").write_text(prose, encoding="utf-8")
    assert docs.stale({"rules.md": docs.rules_page(prose)}, tmp_path) == []


@pytest.mark.parametrize("change, message", [
    (lambda page: page.replace("<!-- generated: extras -->", "<!-- extras -->"), "no generated block 'extras'"),
    (lambda page: page.replace("<!-- generated: extras -->", "<!-- generated: extra -->"), "unknown generated block"),
    (lambda page: page + "\n<!-- generated: presets -->\n<!-- end generated -->\n", "stands twice"),
])
def test_rules_page_refuses_a_block_missing_unknown_or_twice(change, message):
    with pytest.raises(docs.RulesPageError, match=message):
        docs.rules_page(change(RULE_BOOK))


def test_rules_page_anchors_every_section_before_its_heading():
    lines = RULE_BOOK.splitlines()
    anchors = {}
    for i, line in enumerate(lines):
        m = re.fullmatch(r'<a id="([^"]+)"></a>', line)
        if m:
            anchors[m.group(1)] = lines[i + 1]
    for number in SECTIONS:
        heading = anchors.get(f"s{number}")
        assert heading is not None, f"no anchor s{number}"
        assert re.match(r"#{2,4} " + re.escape(number) + r"\.? ", heading), (number, heading)
    assert "codes" in anchors
    for target in re.findall(r"\]\(#([^)]+)\)", RULE_BOOK):  # the contents and every link within the page
        assert target in anchors, target
    contents = RULE_BOOK.split("## Contents", 1)[1].split("<a id=", 1)[0]
    assert set(re.findall(r"\(#([^)]+)\)", contents)) == set(anchors)


def test_rule_book_has_every_section_the_rules_core_cites():
    cited = set()
    for path in (ROOT / "service" / "rules").glob("*.py"):
        cited |= set(re.findall(r"§(\d+(?:\.\d+)*)", path.read_text(encoding="utf-8")))
    assert cited and cited <= set(SECTIONS), sorted(cited - set(SECTIONS))


def test_rule_book_describes_every_ruleset_field():
    from service.rules.ruleset import Ruleset

    section = RULE_BOOK.split('<a id="s9"></a>', 1)[1].split('<a id="s10"></a>', 1)[0]
    prose = docs.BLOCK.sub("", section)
    for name in Ruleset.__dataclass_fields__:
        assert re.search(r"^\|[^|\n]*`" + name + "`", prose, re.M), name  # a row of the field table


def test_rule_book_names_no_source_outside_the_repository():
    assert not re.search(r"\b[A-Z]+\.md\b", RULE_BOOK)
    assert not re.search(r"\bissues?\s*#?\d|\bseeds?\b", RULE_BOOK, re.I)


def test_rule_book_marks_its_readings():
    assert RULE_BOOK.count("**Reading:**") + RULE_BOOK.count("**Readings:**") >= 10


# -- operations.md: the settings -----------------------------------------------------------------
def test_operations_page_has_every_setting_with_its_default():
    import service.__main__ as cli

    table = re.findall(r"^``([A-Z_]+)``\s+(\S+)", cli.__doc__, re.M)
    assert len(table) >= 30, table
    page = (DOCS / "operations.md").read_text(encoding="utf-8")
    section = page.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `([A-Z_]+)` \| (?:`([^`]*)`|unset) \|", section, re.M))
    for variable, default in table:
        assert variable in rows, f"docs/operations.md's configuration table has no row for {variable}"
        shown = rows[variable] or "(unset)"
        assert shown == default, f"{variable}: docs/operations.md says {shown!r}, service/__main__.py {default!r}"
