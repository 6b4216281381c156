"""The stable ids of the rules core: one enum per kind, nothing spelled out by hand elsewhere."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from service.rules import errors
from service.rules.codes import REASONS, Code, Reason, code_table, reason_table
from service.rules.errors import EventError, RuleError

RULES = Path(__file__).resolve().parent.parent / "service" / "rules"

# docs/api.md: the transfer reasons, in its order
API_REASONS = ("dianpao", "zimo", "kong_direct", "kong_added", "kong_concealed", "kong_void",
               "transfer", "refund", "huazhu", "dajiao", "escape", "forfeit", "penalty", "adjust")


def test_reasons_are_api_md_s():
    assert REASONS == API_REASONS
    assert all(type(r) is str for r in REASONS)
    assert [r for r, _ in reason_table()] == list(API_REASONS)


def test_code_table_lists_every_code_once_with_a_meaning():
    table = list(code_table())
    assert [c for c, _ in table] == [c.value for c in Code]
    assert len({c for c, _ in table}) == len(table)
    for code, meaning in table:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", code), code
        assert type(code) is str and isinstance(meaning, str) and meaning.strip()
    for reason, meaning in reason_table():
        assert meaning.strip(), reason


def test_every_error_class_code_is_a_code():
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, RuleError)]
    assert len(classes) > 10
    for cls in classes:
        if cls is not EventError:
            assert isinstance(cls.code, Code), cls


def test_event_error_refuses_a_made_up_code():
    assert EventError("bad_event", 3, "x").code is Code.BAD_EVENT
    with pytest.raises(ValueError):
        EventError("bad_evnet", 3, "x")


def _string_args_of_error_calls(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id.endswith(("Error", "Conflict"))
        ):
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                yield node.func.id, node.args[0].value


def test_no_code_is_spelled_as_a_string_literal_in_the_core():
    """Every ``EventError(...)``/``TableError(...)`` names its code through the enum (a typo cannot slip in)."""
    for path in RULES.glob("*.py"):
        for func, first in _string_args_of_error_calls(path):
            assert func not in ("EventError", "TableError", "VoidConflict"), f"{path.name}: {func}({first!r}, ...)"


def test_every_transfer_reason_used_is_a_reason():
    text = (RULES / "settle.py").read_text()
    used = set(re.findall(r"Reason\.([A-Z_]+)", text))
    assert used and used <= {r.name for r in Reason}
