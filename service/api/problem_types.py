"""What each problem ``code`` means: the registry behind a problem's ``type`` URL, and its page.

A problem's ``type`` is ``{PUBLIC_URL or the request's origin}/problems/{code}``
(:func:`service.api.problems.problem_type`); ``GET /problems/{code}`` answers a
page describing the code: HTML for a browser, JSON with ``Accept: application/json``
(:class:`ProblemTypeSchema`).  The pages are generated from the code's own
registries, never written by hand:

* the rules core's codes and their meanings (:class:`service.rules.codes.Code`);
* the HTTP layer's (:data:`service.api.problems.MEANINGS`), with each code's
  status and title from its problem class (:class:`~service.api.problems.ApiProblem`
  subclasses, the store's errors, Werkzeug's statuses: :func:`registry` walks them).

>>> t = registry()["not_a_win"]
>>> t.statuses, t.title, t.meaning
((422,), 'Invalid win', 'a hand that does not win (shape, 缺一门 or 定缺)')
>>> registry()["round_in_progress"].statuses
(409, 422)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from html import escape

import marshmallow as ma
from flask import Response, jsonify, request
from marshmallow import fields
from werkzeug.exceptions import NotFound

from ..rules.codes import Code
from ..rules.errors import RuleError
from ..store import errors as store_errors
from . import problems

_RULE_CODES = frozenset(c.value for c in Code)


@dataclass(frozen=True)
class ProblemType:
    """One problem ``code``: the statuses it comes with, its title and what it means."""

    code: str
    statuses: tuple[int, ...]
    title: str
    meaning: str

    def as_dict(self, url: str) -> dict:
        return {"type": url, "code": self.code, "title": self.title, "statuses": list(self.statuses),
                "meaning": self.meaning}


def _rule_titles() -> dict[str, str]:
    """The title of each rules-core code that has an error class of its own."""
    from ..rules import stakes, table  # noqa: F401  (every RuleError class defined)

    found: dict[str, str] = {}

    def walk(cls: type[RuleError]) -> None:
        for sub in cls.__subclasses__():
            code = vars(sub).get("code")
            if isinstance(code, str):
                found.setdefault(str(code), problems.rule_title(sub))
            walk(sub)

    walk(RuleError)
    return found


@lru_cache(maxsize=1)
def registry() -> dict[str, ProblemType]:
    """Every code a problem of the service may carry (:func:`service.api.contract.all_codes`), described."""
    from .contract import all_codes

    statuses: dict[str, set[int]] = {}
    titles: dict[str, str] = {}

    def add(code: str, status: int, title: str) -> None:
        statuses.setdefault(code, set()).add(status)
        titles.setdefault(code, title)

    rule_titles = _rule_titles()
    for rule_code in Code:
        add(str(rule_code), 422, rule_titles.get(str(rule_code), problems.rule_title(RuleError)))

    def walk(cls: type[problems.ApiProblem]) -> None:
        for sub in cls.__subclasses__():
            if isinstance(vars(sub).get("code"), str):
                add(sub.code, sub.status, sub.title)
            walk(sub)

    walk(problems.ApiProblem)

    def walk_store(cls: type[store_errors.StoreError]) -> None:
        for sub in cls.__subclasses__():
            found = next(((s, t) for family, s, t in problems.STORE_STATUS if issubclass(sub, family)), None)
            if isinstance(vars(sub).get("code"), str) and found is not None:
                add(sub.code, *found)
            walk_store(sub)

    walk_store(store_errors.StoreError)
    for code in store_errors.CONFLICT_CODES:
        add(code, 409, "Conflict")
    for code in store_errors.CLUB_INPUT_CODES:
        add(code, *next((s, t) for family, s, t in problems.STORE_STATUS
                        if issubclass(store_errors.ClubInputError, family)))
    for status, (code, title) in problems.HTTP_CODES.items():
        add(code, status, title)
    found: dict[str, ProblemType] = {}
    for code in all_codes():
        if code not in statuses:  # (a code named only in the document: its status from there)
            continue
        meaning = Code(code).meaning if code in _RULE_CODES else problems.MEANINGS.get(code)
        found[code] = ProblemType(code, tuple(sorted(statuses[code])), titles[code], meaning or titles[code])
    return found


class ProblemTypeSchema(ma.Schema):
    """What ``GET /problems/{code}`` answers as JSON."""

    type = fields.String(required=True, metadata={"format": "uri", "description": "this page's URL: the `type` "
                                                                                   "of the problems with this code"})
    code = fields.String(required=True)
    title = fields.String(required=True, metadata={"description": "the problems' `title`"})
    statuses = fields.List(fields.Integer(), required=True, metadata={"description": "the HTTP statuses the "
                                                                                     "problems come with"})
    meaning = fields.String(required=True, metadata={"description": "what the code means, and what to do"})


_PAGE = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{code}: {title}</title>
<style>body{{font:16px/1.5 system-ui,sans-serif;max-width:40em;margin:2em auto;padding:0 1em}}
code{{background:#f3f3f3;padding:0 .2em}}</style></head>
<body>
<h1><code>{code}</code></h1>
<p><strong>{title}</strong> ({statuses})</p>
<p>{meaning}</p>
<p>A problem with this code is an RFC 9457 <code>application/problem+json</code> answer whose <code>type</code>
is this page. Its <code>detail</code> says what happened to that request; <code>errors</code>, when present,
names each member of the input at fault. Every operation and the codes it answers: <a href="{docs}">the API
reference</a>.</p>
</body>
</html>
"""


def page(code: str) -> Response:
    """The page of ``code`` (404 for a code no problem has): JSON when the request prefers it, else HTML."""
    described = registry().get(code)
    if described is None:
        raise NotFound()
    url = problems.problem_type(code)
    if request.accept_mimetypes.best_match(["text/html", "application/json"]) == "application/json":
        response = jsonify(described.as_dict(url))
    else:
        meaning = re.sub(r"`([^`]+)`", r"<code>\1</code>",
                         escape(described.meaning[:1].upper() + described.meaning[1:]))
        response = Response(_PAGE.format(
            code=escape(code), title=escape(described.title), meaning=meaning + ".",
            statuses=", ".join(map(str, described.statuses)), docs=escape(request.root_url + "docs")),
            mimetype="text/html")
    response.vary.add("Accept")
    return response
