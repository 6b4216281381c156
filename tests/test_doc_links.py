"""Every relative link and anchor of README.md, CHANGELOG.md and docs/*.md resolves, and no page names
a repository path that does not exist.

* A link (``[text](target)``, ``[text]: target``, ``<a href>``, ``<img src>``) to a file of the repository must name
  a file or folder that exists, relative to the page; one with ``#anchor`` to a Markdown page (or
  to the page itself) must name an anchor of that page: a heading's, as GitHub makes it (lower
  case, punctuation dropped, spaces as hyphens, ``-1``, ``-2`` … for repeats), or an explicit
  ``<a id="…">``.  Links to other sites are not followed.
* A repository path in backticks (```service/api/app.py```, ```bench/core.py```,
  ```docs/rules.md#s5.1```, a command's script) must exist, its anchor too.
* ``docs/index.md`` links every page of ``docs/``.

Code blocks are not prose: their text is neither a link nor a path to check.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *DOCS.glob("*.md")])

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*<?([^\s>]+)>?", re.M)  # a reference-style link's definition
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*\"([^\"]+)\"", re.I)
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
EXPLICIT = re.compile(r"<a\s+(?:id|name)\s*=\s*\"([^\"]+)\"", re.I)
TOP = ("service/", "bench/", "tests/", "docs/", "tools/", ".ci/")
ROOT_FILES = ("README.md", "CHANGELOG.md", "openapi.yaml", "Dockerfile", "pyproject.toml")
PATH = re.compile(r"^(?:\.\./)?(?:(?:service|bench|tests|docs|tools|\.ci)/[\w./-]*|"
                  + "|".join(map(re.escape, ROOT_FILES)) + r")(?:#[\w.-]+)?$")


def prose(text: str) -> str:
    """The page without its fenced code blocks (their lines kept, empty, so that line numbers hold)."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it.

    >>> slug("3. Run the tests"), slug("`POST /v1/tables/{table_id}/events`"), slug("The HTTP layer's problem codes")
    ('3-run-the-tests', 'post-v1tablestable_idevents', 'the-http-layers-problem-codes')
    >>> slug("Two phones at once: versions"), slug("血战 and [the rules](rules.md)")
    ('two-phones-at-once-versions', '血战-and-the-rules')
    """
    text = re.sub(r"<[^>]+>", "", heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a Markdown page has: its headings' (with GitHub's suffixes for repeats), its ``<a id>``s."""
    text = path.read_text(encoding="utf-8")
    found: set[str] = set(EXPLICIT.findall(text))
    seen: dict[str, int] = {}
    for _, heading in HEADING.findall(prose(text)):
        base = slug(heading)
        n = seen.get(base, 0)
        found.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return found


def links(text: str) -> list[str]:
    body = CODE_SPAN.sub("", prose(text))
    return LINK.findall(body) + HTML_LINK.findall(body) + DEFINITION.findall(body)


def repo_paths(text: str) -> list[str]:
    """The repository paths named in backticks in the page's prose (a command's words each)."""
    out = []
    for _, span in CODE_SPAN.findall(prose(text)):
        for word in span.split():
            word = word.strip(",;:()'\"")
            if PATH.match(word) and "..." not in word and "…" not in word:
                out.append(word)
    return out


def broken(page: Path, target: str, base: Path) -> str | None:
    """Why ``target`` (a link or path of ``page``, relative to ``base``) does not resolve, or None."""
    where, _, anchor = target.partition("#")
    file = page if where == "" else (base / where).resolve()
    if not file.exists():
        return f"{target}: no {file.relative_to(ROOT) if file.is_relative_to(ROOT) else file}"
    if not file.is_relative_to(ROOT):
        return f"{target}: outside the repository"
    if anchor and file.suffix == ".md" and anchor not in anchors(file):
        return f"{target}: {file.relative_to(ROOT)} has no anchor #{anchor}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    problems = []
    for target in links(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:, ...: another site
            continue
        why = broken(page, target, page.parent)
        if why:
            problems.append(why)
    assert not problems, f"{page.relative_to(ROOT)}: " + "; ".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_named_exists(page):
    problems = []
    for path in repo_paths(page.read_text(encoding="utf-8")):
        # a path in backticks is the repository's (from its root), or the page's own relative one
        if broken(page, path, ROOT) and broken(page, path, page.parent):
            problems.append(broken(page, path, ROOT))
    assert not problems, f"{page.relative_to(ROOT)} names paths that do not exist: " + "; ".join(problems)


def test_the_index_links_every_page():
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    linked = {target.partition("#")[0] for target in links(index)}
    missing = [p.name for p in DOCS.glob("*.md") if p.name != "index.md" and p.name not in linked]
    assert not missing, f"docs/index.md does not link {missing}"
    assert "docs/index.md" in {t.partition("#")[0] for t in links((ROOT / "README.md").read_text(encoding="utf-8"))}


def test_the_checks_find_what_is_broken(tmp_path, monkeypatch):
    page = DOCS / "api.md"
    assert broken(page, "rules.md#s5.1", DOCS) is None and broken(page, "#postevent", DOCS) is None
    assert "no anchor #s99" in broken(page, "rules.md#s99", DOCS)
    assert "no docs/nowhere.md" in broken(page, "nowhere.md", DOCS)
    assert broken(page, "../openapi.yaml", DOCS) is None
    text = ("See [a](b.md) and `service/nowhere.py`, `bench/core.py --n 3`, `tests/...`.\n"
            "```\n[c](d.md) `bench/x.py`\n```\n")
    assert links("[1.0.0]: docs/operations.md#upgrading-1.0.0\n") == ["docs/operations.md#upgrading-1.0.0"]
    assert links(text) == ["b.md"] and repo_paths(text) == ["service/nowhere.py", "bench/core.py"]
    repeats = tmp_path / "r.md"
    repeats.write_text("# A\n## A\n```\n# not a heading\n```\n<a id=\"x\"></a>\n", encoding="utf-8")
    assert anchors(repeats) == {"a", "a-1", "x"}
