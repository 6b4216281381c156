"""The blocks of a documentation page that the tests run, as the page marks them.

An HTML comment right before a fenced block says what the block is: ``<!-- file: NAME -->``
makes it a part of the file ``NAME`` (the parts of one file join in the page's order), and
``<!-- output -->`` is what the page says its programs print.  Nothing else is taken, and a mark
with no block right after it is an error, so that a block cannot silently drop out of the run.

>>> page = '''Intro.
... <!-- file: a.py -->
... ```python
... x = 1
... ```
... Then:
... <!-- file: a.py -->
... ```python
... print(x)
... ```
... <!-- output -->
... ```text
... 1
... ```
... '''
>>> files(page)
{'a.py': 'x = 1\\n\\nprint(x)\\n'}
>>> output(page)
['1']
>>> files("<!-- file: b.py -->\\nno block")
Traceback (most recent call last):
...
ValueError: a mark without its block: ['<!-- file: b.py -->']
"""

from __future__ import annotations

import re
from pathlib import Path

MARK = re.compile(r"^<!-- (?:file: (?P<name>[\w.-]+)|(?P<output>output)) -->$", re.M)
BLOCK = re.compile(r"<!-- (?:file: (?P<name>[\w.-]+)|(?P<output>output)) -->\n```[\w-]*\n(?P<text>.*?)^```$",
                   re.M | re.S)


def _blocks(page: str) -> list[re.Match]:
    found = list(BLOCK.finditer(page))
    if len(found) != len(MARK.findall(page)):
        taken = {m.start() for m in found}
        raise ValueError(
            f"a mark without its block: {[m.group(0) for m in MARK.finditer(page) if m.start() not in taken]}"
        )
    return found


def files(page: str) -> dict[str, str]:
    """Each marked file's text: its blocks in the page's order, a blank line between two."""
    parts: dict[str, list[str]] = {}
    for m in _blocks(page):
        if m["name"]:
            parts.setdefault(m["name"], []).append(m["text"])
    return {name: "\n".join(texts) for name, texts in parts.items()}


def output(page: str) -> list[str]:
    """The lines of the page's one output block."""
    [block] = [m["text"] for m in _blocks(page) if m["output"]]
    return block.splitlines()


def write(page: str, directory: Path) -> dict[str, Path]:
    """The page's files written in ``directory``, by name."""
    out = {}
    for name, text in files(page).items():
        out[name] = directory / name
        out[name].write_text(text, encoding="utf-8")
    return out
