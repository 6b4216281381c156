"""The three floors: the rules core imports no web or Redis code; the store imports no HTTP code (and sends
nothing: webhooks are :mod:`service.webhooks`); no two modules import each other, directly or through others."""

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


def test_store_sends_nothing_over_http():
    """Outbound requests (webhook deliveries) are the webhooks package's: the store imports neither it nor an
    HTTP client."""
    for path in (ROOT / "service" / "store").glob("*.py"):
        for name in _imports(path):
            parts = name.lstrip(".").split(".")
            assert "webhooks" not in parts and name not in ("http", "http.client", "urllib.request", "requests",
                                                            "httpx", "standardwebhooks"), f"{path.name} imports {name}"


def import_graph() -> dict[str, set[str]]:
    """Module → the modules of ``service`` it imports (at the top or inside a function: a cycle through a
    late import is a cycle all the same).  ``from package import name`` is an import of the submodule
    ``name`` when there is one, else of the package's ``__init__``."""
    modules: dict[str, Path] = {}
    for path in (ROOT / "service").rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[: len(package) - node.level + 1] + [node.module or ""]).strip(".") \
                    if node.level else node.module or ""
                for a in node.names:
                    found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base)
        graph[module] = {m for m in found if m in modules and m != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm).

    >>> cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}})
    [['a', 'b']]
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    graph = import_graph()
    assert len(graph) > 50 and graph["service.api.smorest"] >= {"service.api.jsonio", "service.api.problems"}
    assert cycles(graph) == []


def test_ci_hypothesis_profile_is_derandomized():
    """CI runs the same examples every time: a failure there reproduces locally with CI=1."""
    from hypothesis import settings

    ci = settings.get_profile("ci")
    assert ci.derandomize is True and ci.database is None
