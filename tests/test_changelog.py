"""CHANGELOG.md: every release dated and under a version, newest first; the newest is the package's
version and the OpenAPI document's ``info.version``; each version heading is a link (its definition at
the bottom: its section of docs/operations.md#upgrading), so it renders as a heading without brackets."""

from __future__ import annotations

import re
import tomllib
from datetime import date
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
TEXT = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
RELEASE = re.compile(r"^## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})$", re.M)
SECTIONS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security", "Compatibility"}


def releases() -> list[tuple[tuple[int, int, int], date]]:
    return [((int(a), int(b), int(c)), date.fromisoformat(d)) for a, b, c, d in RELEASE.findall(TEXT)]


def test_every_version_heading_is_a_dated_release_or_unreleased():
    headings = re.findall(r"^## (.*)$", TEXT, re.M)
    assert headings[0] == "[Unreleased]"
    assert len(headings) == 1 + len(releases()), [h for h in headings[1:] if not RELEASE.match("## " + h)]


def test_releases_are_newest_first():
    found = releases()
    assert found, "no release"
    assert [v for v, _ in found] == sorted((v for v, _ in found), reverse=True)
    assert [d for _, d in found] == sorted((d for _, d in found), reverse=True)


def test_changes_are_grouped_in_keep_a_changelog_sections():
    assert set(re.findall(r"^### (.*)$", TEXT, re.M)) <= SECTIONS


def test_the_newest_release_is_the_package_and_the_documents_version():
    newest = ".".join(map(str, releases()[0][0]))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    document = yaml.safe_load((ROOT / "openapi.yaml").read_text(encoding="utf-8"))["info"]["version"]
    assert newest == project == document


DEFINITION = re.compile(r"^\[([^\]]+)\]: (\S+)$", re.M)


def test_every_version_heading_is_a_link_to_its_upgrade_section():
    """``## [1.1.0] - …`` renders on GitHub as the link ``1.1.0`` only with a definition of ``[1.1.0]``
    (without one, the brackets show); each points to the release's section of docs/operations.md."""
    headings = re.findall(r"^## \[([^\]]+)\]", TEXT, re.M)
    defined = dict(DEFINITION.findall(TEXT))
    assert headings and list(defined) == headings, (headings, defined)
    upgrading = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    section = upgrading[upgrading.index("## Upgrading\n"):]
    for version, target in defined.items():
        anchor = "upgrading-" + version.lower()
        assert target == f"docs/operations.md#{anchor}", (version, target)
        assert f'<a id="{anchor}"></a>' in section, f"docs/operations.md#upgrading has no section for {version}"
