"""The three floors: the rules core imports no web or Redis code; the store imports no HTTP code."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_importing_service_loads_no_flask_marshmallow_or_redis():
    code = (
        "import sys, service\n"
        "from service import parse_hand, validate, ting, discards, score, settle, Ruleset\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('flask', 'marshmallow', 'redis', 'werkzeug', 'gunicorn', 'flask_smorest'))\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or ""))
    return names


COMPUTING_LIBRARIES = {"openskill"}
"""Third-party libraries the rules core may use: pure computation, no I/O (the season's rating)."""


def test_rules_core_imports_only_itself_and_the_standard_library():
    """Every import of ``service/rules`` is relative within the package, a standard-library module, or
    one of the :data:`COMPUTING_LIBRARIES`."""
    checked = 0
    for path in (ROOT / "service" / "rules").glob("*.py"):
        for name in _imports(path):
            if name.startswith("."):
                assert not name.startswith(".."), f"{path.name} imports {name} from outside the rules core"
                continue
            top = name.split(".")[0]
            if top in COMPUTING_LIBRARIES:
                continue
            assert top in sys.stdlib_module_names, f"{path.name} imports {name}, which is not the standard library"
            checked += 1
    assert checked  # the walk saw absolute imports (dataclasses, typing, re ...)


def test_store_never_imports_the_http_layer():
    for path in (ROOT / "service" / "store").glob("*.py"):
        for name in _imports(path):
            assert "api" not in name.split(".") and not name.startswith("flask"), f"{path.name} imports {name}"


def test_ci_hypothesis_profile_is_derandomized():
    """CI runs the same examples every time: a failure there reproduces locally with CI=1."""
    from hypothesis import settings

    ci = settings.get_profile("ci")
    assert ci.derandomize is True and ci.database is None
