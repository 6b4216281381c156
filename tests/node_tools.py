"""The Node.js tools the tests run, from ``tools/openapi/package.json`` (exact versions, its lock file).

:func:`installed` runs ``npm ci`` there when a package is missing or at another version than
``package.json`` pins, so a fresh clone needs nothing installed by hand but Node.js and npm.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools" / "openapi"
MODULES = TOOLS / "node_modules"
BIN = MODULES / ".bin"


def pins() -> dict[str, str]:
    """The packages ``package.json`` pins, by name."""
    return json.loads((TOOLS / "package.json").read_text(encoding="utf-8"))["devDependencies"]


def _stale() -> list[str]:
    def version(name: str) -> str | None:
        found = MODULES / name / "package.json"
        return json.loads(found.read_text(encoding="utf-8")).get("version") if found.exists() else None

    return [f"{name}@{pin} (installed: {version(name)})" for name, pin in pins().items() if version(name) != pin]


def installed() -> Path:
    """``tools/openapi/node_modules/.bin``, with every pinned package installed at its version.

    The test processes (pytest-xdist's workers) take turns here: an exclusive lock on ``package.json``
    while one checks and installs, so that two never run ``npm ci`` in the same directory at once.
    """
    with open(TOOLS / "package.json", "rb") as pinned:
        fcntl.flock(pinned, fcntl.LOCK_EX)  # (released when the file is closed)
        if _stale():
            npm = shutil.which("npm")
            assert npm, "npm is needed for the OpenAPI tools (tools/openapi/package.json)"
            run = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=TOOLS,
                                 capture_output=True, text=True, timeout=900)
            assert run.returncode == 0, run.stdout + run.stderr
            assert not _stale(), _stale()
    return BIN
