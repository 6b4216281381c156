"""The committed openapi.yaml: valid OpenAPI 3.1, and exactly what the app serves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from openapi_spec_validator import validate

from service.api import create_app
from service.api.app import openapi_yaml

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "openapi.yaml"
REGENERATE = "python -m service openapi > openapi.yaml"


@pytest.fixture(scope="module")
def served() -> dict:
    response = create_app({"TESTING": True}).test_client().get("/openapi.json")
    assert response.status_code == 200
    return response.get_json()


def test_committed_document_is_up_to_date():
    assert COMMITTED.exists(), f"openapi.yaml is missing: run `{REGENERATE}`"
    assert COMMITTED.read_text(encoding="utf-8") == openapi_yaml(), (
        f"openapi.yaml drifted from the code: run `{REGENERATE}` and commit it"
    )


def test_committed_document_is_valid_openapi_3_1():
    doc = yaml.safe_load(COMMITTED.read_text(encoding="utf-8"))
    assert doc["openapi"] == "3.1.0"
    validate(doc)


def test_served_document_equals_committed(served):
    assert served == yaml.safe_load(COMMITTED.read_text(encoding="utf-8"))
    validate(served)


def test_cli_prints_the_document():
    out = subprocess.run(
        [sys.executable, "-m", "service", "openapi"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out == COMMITTED.read_text(encoding="utf-8")


def test_every_endpoint_is_documented(served):
    paths = served["paths"]
    for path, method in [
        ("/v1/hands/validate", "post"), ("/v1/hands/ting", "post"), ("/v1/hands/discards", "post"),
        ("/v1/hands/score", "post"), ("/v1/rounds/settle", "post"), ("/v1/rulesets", "get"),
        ("/healthz", "get"), ("/readyz", "get"), ("/metrics", "get"),
    ]:
        operation = paths[path][method]
        assert "200" in operation["responses"], (path, method)


def test_errors_are_documented_as_problem_json(served):
    for path, item in served["paths"].items():
        for method, operation in item.items():
            if method == "parameters":
                continue
            for status, response in operation["responses"].items():
                if int(status) >= 400:
                    assert list(response["content"]) == ["application/problem+json"], (path, method, status)
                    schema = response["content"]["application/problem+json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/Problem"}, (path, method, status)
                    codes = response["x-problem-codes"]
                    assert codes and set(codes) <= set(served["components"]["schemas"]["ProblemCode"]["enum"])
                    assert "X-Request-ID" in response["headers"]


def test_request_schemas_reject_unknown_fields(served):
    schemas = served["components"]["schemas"]
    for name, schema in schemas.items():
        if name == "Problem":  # extension members may be added (RFC 9457)
            assert schema["additionalProperties"] is True
        elif schema.get("type") == "object" and name != "RulesetsResponse":
            assert schema.get("additionalProperties") is False, name


def test_every_request_string_and_list_is_bounded(served):
    """Walk the request schemas: every string has maxLength or enum, every array maxItems, every integer bounds."""
    schemas = served["components"]["schemas"]
    seen: set[str] = set()

    def walk(node, where):
        if isinstance(node, dict):
            if "$ref" in node:
                name = node["$ref"].rsplit("/", 1)[1]
                if name not in seen:
                    seen.add(name)
                    walk(schemas[name], name)
                return
            types = node.get("type")
            types = types if isinstance(types, list) else [types]
            if "string" in types:
                assert "maxLength" in node or "enum" in node or "const" in node, where
            if "array" in types:
                assert "maxItems" in node, where
            if "integer" in types:
                assert "minimum" in node and "maximum" in node, where
            for key, value in node.items():
                if key in ("properties",):
                    for prop, sub in value.items():
                        walk(sub, f"{where}.{prop}")
                elif key in ("items", "oneOf", "anyOf", "allOf"):
                    walk(value, where)
        elif isinstance(node, list):
            for item in node:
                walk(item, where)

    for path in served["paths"].values():
        for method, operation in path.items():
            if method == "parameters":  # path-level parameters, not an operation
                continue
            body = operation.get("requestBody")
            for content in (body or {}).get("content", {}).values():  # (JSON; an import's CSV text)
                walk(content["schema"], "body")
    assert {"TingRequest", "SettleRequest", "HuEvent", "Hand", "RulesetSpec", "TableEvent",
            "RoundStartEvent", "CreateTableRequest"} <= seen


def test_no_optional_member_carries_a_default(served):
    """A generator's default options read ``default`` as "always present" (openapi-typescript's
    defaultNonNullable): an optional member says its default in its description instead, so the minimal
    bodies (the README's score request) compile as they are."""
    found = []

    def walk(node, where):
        if isinstance(node, dict):
            required = node.get("required") if isinstance(node.get("required"), list) else []
            for name, prop in (node.get("properties") or {}).items():
                if isinstance(prop, dict) and "default" in prop and name not in required:
                    found.append(f"{where}.{name}")
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}[{i}]")

    walk(served, "")
    assert found == []
    schemas = served["components"]["schemas"]
    assert schemas["Win"]["required"] == ["tile"] and "absent: `false`" in schemas["Win"]["properties"]["self_drawn"][
        "description"]
    assert schemas["Hand"]["required"] == ["tiles"] and schemas["ScoreRequest"]["required"] == ["hand", "win"]
