"""The generated pages of ``docs/``: written from the code, so that they cannot drift.

``python -m tools.docs`` (from the repository's root) writes them; ``python -m tools.docs --check``
(and the test suite) fails when a committed page differs from what the code
says now.  Both pages are written by hand around generated blocks: each block
stands between ``<!-- generated: NAME -->`` and ``<!-- end generated -->``; the
command fills those blocks and leaves the prose as it is (a block missing,
unknown or given twice is refused).

* ``docs/rules.md``, the rule book: its tables of the code (every fan pattern
  with its id, 名, English name and fan in each fan table; the presets and
  every ruleset field; the transfer reasons; the stable error codes).  Its
  worked examples are doctests.
* ``docs/api.md``, the HTTP API reference: the index of operations and one
  section per operation of the OpenAPI document (its credentials, parameters
  and statuses, read from the document, so a new operation gets its section by
  itself), each with the examples recorded for it; the error examples and
  every problem code.  An example is a request sent to this code (Flask's test
  client on a private redis-server: :func:`api_examples`) and the answer it
  gave, with ids, tokens, keys, times and request ids as placeholders; it is
  filed under the operation its method and path are of.

The other pages (``index.md``, ``getting-started.md``, ``table-app.md``,
``operations.md``, ``performance.md``, ``notation.md``, ``glossary.md``,
``clients.md``) are written by hand.

(The companion app's pattern table, ``/web/patterns.json``, is not written
here: the service makes it from the rules core's registry when it starts,
:func:`service.rules.patterns.as_json`.)
"""

from __future__ import annotations

import os
import re
import secrets
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
RESPONSE_EXAMPLES = ROOT / "service" / "api" / "response_examples.json"
"""The OpenAPI document's response examples: answers recorded by :func:`api_examples` (``example=``)."""
EXAMPLE_ID = "8c1d2e3f4a5b6c7d"
EXAMPLE_TIME = "2025-05-17T23:41:08.123Z"
PUBLIC_URL = "https://mahjong.example"
"""The ``PUBLIC_URL`` of the service that answers the reference's examples (its problems' ``type``)."""


# -- rules ---------------------------------------------------------------------------------------
RULES_PAGE = DOCS / "rules.md"
BLOCK = re.compile(r"(<!-- generated: ([a-z0-9-]+) -->\n)(.*?)(<!-- end generated -->)", re.S)
"""A generated block of ``docs/rules.md``: its opening marker (with the block's name), its text, its end marker."""
class RulesPageError(ValueError):
    """A page written around generated blocks (``docs/rules.md``, ``docs/api.md``) lacks a block, names an
    unknown one, or has one twice."""


def rules_blocks() -> dict[str, str]:
    """Each generated block of ``docs/rules.md`` by name: the tables read from ``service/rules/``."""
    from service.rules.codes import code_table, reason_table
    from service.rules.patterns import BASE_ORDER, EXTRA_ORDER, PATTERNS
    from service.rules.ruleset import ENUMS, PRESETS, Ruleset

    tables = ENUMS["fan_table"]

    def fan(value: int | None) -> str:
        return "—" if value is None else str(value)

    def patterns(ids: tuple[str, ...]) -> str:
        out = ["| id | 名 | English | " + " | ".join(f"fan (`{t}`)" for t in tables) + " |\n",
               "|---|---|---|" + "---|" * len(tables) + "\n"]
        for pid in ids:
            p = PATTERNS[pid]
            out.append(f"| `{p.id}` | {p.name} | {p.name_en} | " + " | ".join(fan(p.fan(t)) for t in tables) + " |\n")
        return "".join(out)

    presets = ["| field | " + " | ".join(f"`{name}`" for name in PRESETS) + " | values |\n",
               "|---|" + "---|" * len(PRESETS) + "---|\n"]
    for name in Ruleset.__dataclass_fields__:
        values = [orjson.dumps(getattr(r, name)).decode() for r in PRESETS.values()]
        choices = (", ".join(f"`{c}`" for c in PRESETS) if name == "preset"
                   else ", ".join(f"`{c}`" for c in ENUMS[name]) if name in ENUMS else _kind(name))
        presets.append(f"| `{name}` | " + " | ".join(f"`{v}`" for v in values) + f" | {choices} |\n")

    def meanings(head: str, rows: Iterator[tuple[str, str]]) -> str:
        return f"| {head} | meaning |\n|---|---|\n" + "".join(f"| `{key}` | {meaning} |\n"
                                                            for key, meaning in rows)

    return {
        "base-patterns": patterns(BASE_ORDER),
        "extras": patterns(EXTRA_ORDER),
        "presets": "".join(presets),
        "transfer-reasons": meanings("reason", reason_table()),
        "error-codes": meanings("code", code_table()),
    }


def rules_page(template: str | None = None) -> str:
    """``docs/rules.md`` (or ``template``) with every generated block filled from the code.

    The rule book is written by hand; only the text between ``<!-- generated: NAME -->`` and
    ``<!-- end generated -->`` is the code's (:func:`rules_blocks`), so the page is current when
    filling it changes nothing.  A block missing, unknown or given twice is :class:`RulesPageError`.
    """
    text = RULES_PAGE.read_text(encoding="utf-8") if template is None else template
    return fill_blocks(text, rules_blocks())


def fill_blocks(text: str, blocks: dict[str, str], page: str = "docs/rules.md") -> str:
    r"""``text`` (the hand-written ``page``) with the body of each of its generated blocks replaced by ``blocks[name]``.

    >>> fill_blocks("a\n<!-- generated: x -->\nold\n<!-- end generated -->\nb\n", {"x": "new\n"})
    'a\n<!-- generated: x -->\n\nnew\n\n<!-- end generated -->\nb\n'
    """
    seen: list[str] = []

    def fill(match: re.Match) -> str:
        name = match.group(2)
        if name not in blocks:
            raise RulesPageError(f"{page}: unknown generated block {name!r} (one of {', '.join(blocks)})")
        if name in seen:
            raise RulesPageError(f"{page}: the generated block {name!r} stands twice")
        seen.append(name)
        return f"{match.group(1)}\n{blocks[name]}\n{match.group(4)}"

    out = BLOCK.sub(fill, text)
    missing = [name for name in blocks if name not in seen]
    if missing:
        raise RulesPageError(f"{page}: no generated block " + ", ".join(map(repr, missing))
                             + " (each stands between `<!-- generated: NAME -->` and `<!-- end generated -->`)")
    return out


def _kind(name: str) -> str:
    """The kind of values of the ruleset field ``name``."""
    from service.rules.ruleset import MAX_BASE, MAX_CAP, MAX_UNITS, PLAYERS, UNIT_FIELDS, Ruleset

    default = Ruleset.__dataclass_fields__[name].default
    if isinstance(default, bool):
        return "`true`, `false`"
    if name == "players":
        return ", ".join(f"`{n}`" for n in PLAYERS)
    if name == "base":
        return f"an integer 1–{MAX_BASE:,} (points per unit)"
    if name == "cap":
        return f"an integer 1–{MAX_CAP} (fan), or `null` (no cap)"
    if name in UNIT_FIELDS:
        return f"an integer 0–{MAX_UNITS:,} (units)"
    return "an integer" + (" or `null`" if default is None else "")


# -- the API reference ---------------------------------------------------------------------------
API_PAGE = DOCS / "api.md"
PLAYERS = ["东", "南", "西", "北"]
API_BLOCKS = ("api-operations", "api-reference", "api-errors")
"""The generated blocks of ``docs/api.md``: the index of operations, every operation with its
examples, the error examples and problem codes."""

SHOWN_HEADERS = ("Content-Type", "Location", "ETag", "Idempotent-Replayed", "Retry-After", "WWW-Authenticate",
                 "Cache-Control", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")
"""The response headers an example shows (``X-Request-ID`` is on every response, ``Content-Length`` too)."""
ERRORS = "errors"
"""The section of examples that belong to no one operation (the problem answers every operation shares)."""
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def api_page(redis_url: str, template: str | None = None, recorded: dict | None = None) -> str:
    """``docs/api.md`` (or ``template``) with its generated blocks filled: from the OpenAPI document and
    from requests sent to this code (:func:`api_examples`).  ``recorded``, when given, gets the
    response examples of the OpenAPI document those requests recorded (by operationId, then name)."""
    from service.api.app import openapi_dict

    text = API_PAGE.read_text(encoding="utf-8") if template is None else template
    doc = openapi_dict()
    examples = api_examples(redis_url, doc, recorded)
    return fill_blocks(text, api_blocks(doc, examples), page="docs/api.md")


def api_blocks(doc: dict, examples: dict[str, list[str]]) -> dict[str, str]:
    """Each generated block of ``docs/api.md`` by name (:data:`API_BLOCKS`), from the OpenAPI document
    ``doc`` and the examples recorded for each operation (by operationId; :data:`ERRORS`: the shared
    problem answers)."""
    return {
        "api-operations": _operations_index(doc),
        "api-reference": _reference(doc, examples),
        "api-errors": "".join(examples.get(ERRORS, [])) + _http_codes_section(),
    }


def operations(doc: dict) -> list[tuple[str, str, str, dict]]:
    """Every operation of the OpenAPI document as ``(tag, method, path, operation)``, by tag in the
    document's order of tags (tags it does not list come last), then in the document's order."""
    order = [t["name"] for t in doc.get("tags", [])]
    found = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method != "parameters" and isinstance(op, dict):
                found.append(((op.get("tags") or ["other"])[0], method.upper(), path, op))
    rank = {tag: i for i, tag in enumerate(order)}
    return sorted(found, key=lambda f: rank.get(f[0], len(rank)))  # (a stable sort: paths in order)


def anchor(operation_id: str) -> str:
    """The anchor of an operation's section in ``docs/api.md`` (its operationId, lower case)."""
    return operation_id.lower()


def _operations_index(doc: dict) -> str:
    out = ["| operation | method and path | credentials | statuses |\n|---|---|---|---|\n"]
    for _, method, path, op in operations(doc):
        out.append(f"| [`{op['operationId']}`](#{anchor(op['operationId'])}) | `{method} {path}` | "
                   f"{_credentials(op)} | " + ", ".join(s for s in op["responses"] if s != "default") + " |\n")
    return "".join(out)


def _reference(doc: dict, examples: dict[str, list[str]]) -> str:
    tags = {t["name"]: t.get("description", "") for t in doc.get("tags", [])}
    out: list[str] = []
    current = None
    for tag, method, path, op in operations(doc):
        if tag != current:
            current = tag
            out.append(f"### {tag}\n\n" + (f"{tags[tag]}\n\n" if tags.get(tag) else ""))
        oid = op["operationId"]
        out.append(f'<a id="{anchor(oid)}"></a>\n\n#### `{method} {path}`\n\n')
        out.append(f"**{_one_line(op.get('summary', ''))}** (`{oid}`)\n\n")
        if op.get("description"):
            out.append(" ".join(op["description"].split()) + "\n\n")
        out.append(f"Credentials: {_credentials(op)}.\n\n")
        params = [p for p in doc["paths"][path].get("parameters", []) + op.get("parameters", [])
                  if p.get("in") != "path" or p.get("description")]
        if params:
            out.append("| parameter | in | meaning |\n|---|---|---|\n")
            for p in params:
                out.append(f"| `{p['name']}` | {p['in']} | {_one_line(p.get('description') or _schema_words(p))} |\n")
            out.append("\n")
        out.append("| status | when |\n|---|---|\n")
        for status, response in op["responses"].items():
            out.append(f"| {status} | {_one_line(response.get('description', ''))} |\n")
        out.append("\n")
        shown = examples.get(oid)
        if shown:
            out.extend(shown)
        else:
            out.append("*No recorded example yet: add one to `api_examples` in `tools/docs.py`.*\n\n")
    return "".join(out)


def _one_line(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _schema_words(param: dict) -> str:
    schema = param.get("schema", {})
    parts = [schema.get("type", "")]
    if "minimum" in schema or "maximum" in schema:
        parts.append(f"{schema.get('minimum', '')}–{schema.get('maximum', '')}")
    if "default" in schema:
        parts.append(f"default {schema['default']}")
    return ", ".join(p for p in parts if p)


class Recorder:
    """Sends requests to the app and keeps each exchange, as Markdown, under the operation it is of.

    The operation is found from the method and the path in the OpenAPI document, so an example
    is filed where the reference shows that operation.  Volatile values (ids, tokens, keys, times,
    request ids, a rate limit's seconds) are shown as placeholders (:class:`_Placeholders`).
    """

    def __init__(self, doc: dict) -> None:
        self.routes = [(method, re.compile("".join("[^/]+" if part.startswith("{") else re.escape(part)
                                                   for part in re.split(r"(\{[^}]+\})", path)) + r"\Z"),
                        op["operationId"]) for _, method, path, op in operations(doc)]
        self.names = _Placeholders()
        self.shown: dict[str, list[str]] = {}
        self.examples: dict[str, dict[str, dict]] = {}
        self.tables = 0

    def operation(self, method: str, path: str) -> str:
        bare = path.split("?", 1)[0]
        for m, pattern, oid in self.routes:
            if m == method and pattern.match(bare):
                return oid
        raise KeyError(f"no operation of the OpenAPI document is {method} {bare}")

    def table(self, body: dict) -> None:
        """Name a new table's id and tokens (``<id>``, ``<id2>``, ...)."""
        self.tables += 1
        n = "" if self.tables == 1 else str(self.tables)
        self.names.name(body["id"], f"<id{n}>")
        self.names.name(body["token"], f"<token{n}>")
        self.names.name(body["read_token"], f"<read_token{n}>")

    def __call__(self, client: Any, method: str, path: str, title: str, note: str = "", *, json_body: Any = None,
                 headers: dict[str, str] | None = None, data: bytes | str | None = None,
                 content_type: str | None = None, section: str | None = None, anchor_id: str | None = None,
                 show: Callable[[str], str] | None = None, example: str | None = None) -> Any:
        """Send the request and keep the exchange; ``example`` names the answer (a 200 with a JSON body)
        as a response example of its operation in the OpenAPI document (:data:`RESPONSE_EXAMPLES`)."""
        headers = dict(headers or {})
        kwargs: dict[str, Any] = {"method": method, "headers": headers}
        if json_body is not None:
            kwargs["data"] = orjson.dumps(json_body)
            content_type = content_type or "application/json"
        elif data is not None:
            kwargs["data"] = data
        if content_type:
            kwargs["content_type"] = content_type
        response = client.open(path, **kwargs)
        bare = path.split("?")[0]
        if response.status_code == 201 and method == "POST" and (bare == "/v1/tables" or
                                                                  re.fullmatch(r"/v1/clubs/[^/]+/tables", bare)):
            self.table(response.get_json())
        if response.status_code == 201 and method == "POST" and bare == "/v1/clubs":
            club = response.get_json()
            self.names.name(club["id"], "<club>")
            self.names.name(club["token"], "<club token>")
            self.names.name(club["read_token"], "<club read_token>")
        shown_headers = ([("Content-Type", content_type)] if content_type else []) + list(headers.items())
        body: str | None
        if json_body is not None:
            body = orjson.dumps(json_body).decode()
        elif isinstance(data, bytes):
            body = f"({len(data):,} bytes)" if len(data) > 200 else data.decode()
        else:
            body = data
        text = _exchange(title, f"{method} {path}", shown_headers, body, response, self.names, note, anchor_id, show)
        self.shown.setdefault(section or self.operation(method, path), []).append(text)
        if example is not None:
            if response.status_code not in (200, 201) or not response.is_json:
                raise RuntimeError(f"the example {example!r} ({method} {path}) answered {response.status_code}")
            self.examples.setdefault(self.operation(method, path), {})[example] = {
                "summary": title, "value": example_value(response.get_json())}
        return response

    def add(self, section: str, text: str) -> None:
        self.shown.setdefault(section, []).append(text)


def _exchange(title: str, line: str, headers: list[tuple[str, str]], body: str | None, response: Any,
              names: _Placeholders, note: str, anchor_id: str | None = None,
              show: Callable[[str], str] | None = None) -> str:
    out = [f'<a id="{anchor_id}"></a>\n\n' if anchor_id else "", _lead(title, note)]
    out.append("```http\n" + names("\n".join([line] + [f"{k}: {v}" for k, v in headers])) + "\n")
    if body is not None:
        out.append("\n" + names(body) + "\n")
    out.append("```\n\n")
    status = f"{response.status_code} {response.status.split(' ', 1)[1]}"
    lines = [status]
    for k in SHOWN_HEADERS:
        if k in response.headers and not (k == "Content-Type" and response.status_code in (204, 304)):
            lines.append(f"{k}: {names.header(k, response.headers[k], response.status_code)}")
    out.append("```http\n" + "\n".join(lines) + "\n")
    data = response.get_data(as_text=True)
    if data:
        out.append("\n" + names((show or (lambda t: t))(data).strip("\n")) + "\n")
    out.append("```\n\n")
    return "".join(out)


def _lead(title: str, note: str) -> str:
    """An example's title in bold, then its note: run on when the note goes on the title's sentence
    (it starts in lower case or with a bracket), as a sentence of its own otherwise."""
    if not note:
        return f"**{title}.**\n\n"
    if note[0].islower() or note[0] in "(…":
        return f"**{title}** {note}\n\n"
    return f"**{title}.** {note}\n\n"


class _Placeholders:
    """Replace volatile values (ids, tokens, keys, times, request ids) by stable names."""

    _TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
    _RID = re.compile(r'"request_id":"[^"]*"')
    _RETRY = re.compile(r"retry in \d+ s")
    _UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[47][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
    _WEBHOOK = re.compile(r"wh_[0-9a-f]{16}")
    _SECRET = re.compile(r"whsec_[A-Za-z0-9+/=]+")
    _DELIVERY = re.compile(r"(msg_<id\d*>_)\d+-\d+")  # a delivery's id: its table's, its outbox entry's

    _PLAYER = re.compile(r"\bp[0-9a-f]{12}\b")
    _EVENING = re.compile(r"\bimp_[0-9a-f]{12}\b")

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def name(self, value: str, placeholder: str) -> None:
        self.names[value] = placeholder

    def _numbered(self, prefix: str):
        """A club's player ids (``<p1>``, ...) and imported evenings' ids, named in the order they are seen."""
        def sub(match: re.Match) -> str:
            if match[0] not in self.names:
                self.names[match[0]] = f"<{prefix}{sum(v.startswith('<' + prefix) for v in self.names.values()) + 1}>"
            return self.names[match[0]]
        return sub

    def __call__(self, text: str) -> str:
        for value, placeholder in self.names.items():
            text = text.replace(value, placeholder)
        text = self._PLAYER.sub(self._numbered("p"), text)
        text = self._EVENING.sub(self._numbered("evening"), text)
        text = self._TIME.sub("<time>", text)
        text = self._UUID.sub("<uuid>", text)
        text = self._WEBHOOK.sub("wh_<webhook id>", text)
        text = self._SECRET.sub("whsec_<secret>", text)
        text = self._DELIVERY.sub(r"\1<entry>", text)
        text = self._RETRY.sub("retry in <seconds> s", text)
        return self._RID.sub('"request_id":"<request id>"', text)

    def header(self, name: str, value: str, status: int) -> str:
        if name == "X-RateLimit-Reset":
            return "<epoch seconds>"
        if name == "Retry-After" and status == 429:
            return "<seconds>"
        return self(value)


# The round the main table plays: (title, anchor, method, event, note, headers).  "VOID" voids the
# last event recorded; "VOID AGAIN" voids it once more.
WALK: list[tuple[str, str | None, str, dict | None, str, dict[str, str]]] = [
    ("`round_start`", "event-round_start", "POST", {"type": "round_start", "dealer": 0},
     "A round starts with `round_start` (`dealer` omitted: the previous round's next dealer; `voids`: each "
     "seat's 定缺 suit, optional).", {}),
    ("`peng`", "event-peng", "POST", {"type": "peng", "seat": 1, "tile": "5m", "from": 0},
     "碰: seat 1 takes seat 0's discard. No payment; it lets later events be checked (an added kong needs it).", {}),
    ("`kong`, added", "event-kong", "POST", {"type": "kong", "seat": 1, "kind": "added", "tile": "5m"},
     "补杠 onto seat 1's own peng: every other seat still in the round pays (刮风).", {}),
    ("`kong`, direct, with an `Idempotency-Key`", None, "POST",
     {"type": "kong", "seat": 2, "kind": "direct", "tile": "7s", "from": 3},
     "直杠 from a discard: the discarder pays. The phone sends its own key with every event…",
     {"Idempotency-Key": "phone-2:0004"}),
    ("The same request again", None, "POST", {"type": "kong", "seat": 2, "kind": "direct", "tile": "7s", "from": 3},
     "…so that a retry whose answer was lost (flaky Wi-Fi) replays the first response "
     "(`Idempotent-Replayed: true`) and records nothing.", {"Idempotency-Key": "phone-2:0004"}),
    ("`kong`, concealed, with `If-Match`", None, "POST", {"type": "kong", "seat": 3, "kind": "concealed", "tile": "8s"},
     "暗杠 (下雨): every other seat still in the round pays double. `If-Match` names the version the phone "
     "was looking at…", {"If-Match": '"4"'}),
    ("A second phone, one version behind", None, "POST",
     {"type": "kong", "seat": 3, "kind": "concealed", "tile": "8s"},
     "…so a second phone that saw version 4 too gets 412 with the current `version`, and nothing is "
     "recorded twice.", {"If-Match": '"4"'}),
    ("`hu`", "event-hu", "POST", {"type": "hu", "from": 0, "tile": "9p", "winners": [
        {"seat": 1, "fan": 2, "patterns": ["duiduihu"]},
        {"seat": 3, "hand": {"tiles": "123456789p99s", "melds": [
            {"type": "kong", "kind": "concealed", "tile": "8s"}]}}]},
     "一炮多响: seat 0's discard 9p wins for two seats. A winner gives its `hand` (the service scores it) or, "
     "when the table did not enter it, its `fan`.", {}),
    ("`draw`", "event-draw", "POST", {"type": "draw", "seats": [
        {"seat": 0, "status": "not_ting"},
        {"seat": 2, "hand": {"tiles": "1112223334s", "melds": [{"type": "kong", "kind": "direct", "tile": "7s"}]}}]},
     "流局 (the wall is empty): every seat still in the round gives its hand or status; 查花猪 and 查大叫 "
     "settle (a not-ting seat pays each ting seat its 大叫 and hands back kong income: 退税). The round ends.", {}),
    ("The next `round_start`", None, "POST", {"type": "round_start"},
     "Its dealer follows the last round ([rules.md §10](rules.md#s10)).", {}),
    ("A kong posted by mistake", None, "POST", {"type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"},
     "(its `void` is under [`voidEvent`](#voidevent)).", {}),
    ("`void`", "event-void", "VOID", None,
     "The kong posted by mistake is undone by a compensating `void` record: the balances are recomputed "
     "without it (409 `void_conflict` when a later event depends on it).", {}),
    ("A void of a voided event", None, "VOID AGAIN", None, "is a 409 (`already_voided`).", {}),
    ("A refused event", None, "POST", {"type": "kong", "seat": 9, "kind": "concealed", "tile": "1m"},
     "An event the rules reject (here: a seat out of range) is a 422 problem with a stable `code`, `event` "
     "(the seq it would have had) and, for a malformed one, `errors` naming the member; nothing is recorded.", {}),
    ("`escape`", "event-escape", "POST", {"type": "escape", "seat": 2, "last_four": False},
     "A seat leaves the round (逃跑): it pays the `escape` penalty to every seat still in the round.", {}),
    ("Round 3", None, "POST", {"type": "round_start"}, "", {}),
]


def api_examples(redis_url: str, doc: dict, recorded: dict | None = None) -> dict[str, list[str]]:
    """Every example of the reference: requests sent to this code (Flask's test client on the Redis at
    ``redis_url``) and the answers it gave, by operationId (and :data:`ERRORS`); ``recorded`` (when
    given) gets the answers kept as the OpenAPI document's response examples."""
    from service.api.app import create_app

    off = {var: 0 for var in _LIMIT_VARIABLES()}
    app = create_app({"TESTING": True, "REDIS_URL": redis_url, "PUBLIC_URL": PUBLIC_URL, **off})
    rec = Recorder(doc)
    try:
        client = app.test_client()
        _hands(rec, client)
        _table_walk(rec, client)
        _stream(rec, app)
        _stakes(rec, client)
        _mending(rec, client)
        _errors(rec, client)
        limited = create_app({"TESTING": True, "REDIS_URL": redis_url, "PUBLIC_URL": PUBLIC_URL, **off,
                              "TABLE_EVENTS_PER_MINUTE": 2})
        _rate_limit(rec, limited.test_client())
        keyed, keys = _keys_app(redis_url, rec, off)
        _api_keys(rec, keyed.test_client(), keys)
        _webhooks(rec, keyed.test_client(), keys)
        _clubs(rec, client)
        _ops(rec, client)
    finally:
        hub = app.extensions.get("stream_hub")
        if hub is not None:
            hub.close()
    if recorded is not None:
        recorded.update(rec.examples)
    return rec.shown


def example_value(value: Any) -> Any:
    """A recorded answer as the OpenAPI document shows it: a table's ``id`` and ``finished_at`` fixed
    (:data:`EXAMPLE_ID`, :data:`EXAMPLE_TIME`), so that the document does not change from run to run.

    >>> example_value({"id": "0123456789abcdef", "finished_at": "2024-01-02T03:04:05.678Z", "rounds": 2})
    {'id': '8c1d2e3f4a5b6c7d', 'finished_at': '2025-05-17T23:41:08.123Z', 'rounds': 2}
    """
    if isinstance(value, list):
        return [example_value(v) for v in value]
    if isinstance(value, str):
        return _EXAMPLE_VALUES(value)
    if not isinstance(value, dict):
        return value
    out = {k: example_value(v) for k, v in value.items()}
    if isinstance(out.get("id"), str) and re.fullmatch(r"[0-9a-f]{16}", out["id"]):
        out["id"] = EXAMPLE_ID
    if out.get("finished_at") is not None:
        out["finished_at"] = EXAMPLE_TIME
    return out


def _EXAMPLE_VALUES(text: str) -> str:
    """A recorded string as the OpenAPI document shows it: a club's player ids and imported evenings'
    ids (random, or made from the club's) as fixed ones, and every time as :data:`EXAMPLE_TIME`.

    >>> _EXAMPLE_VALUES("p3fa9c0b12d4e"), _EXAMPLE_VALUES("imp_0123456789ab"), _EXAMPLE_VALUES("老王")
    ('p0123456789ab', 'imp_0123456789ab', '老王')
    """
    if re.fullmatch(r"p[0-9a-f]{12}", text):
        return "p0123456789ab"
    if re.fullmatch(r"imp_[0-9a-f]{12}", text):
        return "imp_0123456789ab"
    if re.fullmatch(r"[0-9a-f]{16}", text):
        return EXAMPLE_ID
    return EXAMPLE_TIME if _Placeholders._TIME.fullmatch(text) else text


def response_examples_json(recorded: dict) -> str:
    """:data:`RESPONSE_EXAMPLES`' text: the recorded response examples by operationId, then name."""
    return orjson.dumps({oid: recorded[oid] for oid in sorted(recorded)}, option=orjson.OPT_INDENT_2).decode() + "\n"


def _hands(rec: Recorder, client: Any) -> None:
    rec(client, "POST", "/v1/hands/validate", "A hand that is not the right size",
        "is answered 200 with `valid: false` and its problems (a hand may hold three suits: it is "
        "then reported as `huazhu`, not refused).", json_body={"hand": {"tiles": "123m456p789s11m"}})
    rec(client, "POST", "/v1/hands/ting", "The nine-gates wait",
        "with two 5m visible elsewhere: every wait with its fan, points, patterns and the copies left.",
        json_body={"hand": {"tiles": "1112345678999m"}, "visible": "5m5m"})
    rec(client, "POST", "/v1/hands/discards", "Which tile to discard",
        "from 14 tiles: each discard that leaves the hand ting, best first.",
        json_body={"hand": {"tiles": "11122233345m99p5s"}})
    rec(client, "POST", "/v1/hands/shanten", "How far from ting",
        "a 13-tile hand one exchange away (一向听), two 3m seen elsewhere: each useful tile with its copies "
        "left ([rules.md §16](rules.md#s16)).", json_body={"hand": {"tiles": "12345m678m4599p1p"}, "visible": "3m3m"},
        example="thirteen")
    rec(client, "POST", "/v1/hands/shanten", "Which discard keeps the hand closest",
        "from 14 tiles: each distinct discard with the shanten and useful tiles of the 13 left, best first.",
        json_body={"hand": {"tiles": "113456m23678p", "melds": [{"type": "peng", "tile": "9p"}]}}, example="fourteen")
    rec(client, "POST", "/v1/hands/score", "A self-drawn win with a concealed kong",
        "under the 血战 preset with 自摸加番: the fan after the cap, the points, each pattern and the "
        "decomposition scored.", json_body={
            "hand": {"tiles": "123345m999p66p", "melds": [{"type": "kong", "kind": "concealed", "tile": "2p"}]},
            "win": {"tile": "6p", "self_drawn": True}, "ruleset": {"preset": "xuezhan", "zimo": "fan"}})
    rec(client, "POST", "/v1/hands/score", "A hand that cannot win", "is a 422 with the rule it breaks.",
        json_body={"hand": {"tiles": "11122233345m99p5s"}, "win": {"tile": "5s"}})
    kong = {"type": "kong", "seat": 1, "kind": "direct", "tile": "5m", "from": 2}
    body = {"dealer": 0, "events": [
        kong,
        {"type": "hu", "from": 2, "tile": "9p", "winners": [
            {"seat": 0, "fan": 2}, {"seat": 3, "hand": {"tiles": "11122233344499p"}}]}]}
    rec(client, "POST", "/v1/rounds/settle", "A round without a table",
        "(stateless): transfers name the 0-based index of their event.", json_body=body)
    bad = {"dealer": 0, "events": [kong, {"type": "draw", "seats": [
        {"seat": s % 4, "status": "not_ting"} for s in range(5)]}]}
    rec(client, "POST", "/v1/rounds/settle", "A refused round", "names the index of the event in `event`.",
        json_body=bad)
    rec(client, "POST", "/v1/batch", "Many items in one request",
        "each answered as its own endpoint answers it, in order; the bad one fails alone (its problem's "
        "`instance` is its endpoint's path), and the envelope's ruleset applies to the items without one.",
        json_body={"ruleset": "xuezhan", "items": [
            {"op": "ting", "hand": {"tiles": "123456789m1234p"}},
            {"op": "score", "hand": {"tiles": "11122233344499p"}, "win": {"tile": "9p"}},
            {"op": "validate", "hand": {"tiles": "123m"}},
            {"op": "ting", "hand": {"tiles": "11x"}}]})
    lines = [{"op": "ting", "hand": {"tiles": "123456789m1234p"}}, {"op": "ting", "hand": {"tiles": "11x"}}]
    rec(client, "POST", "/v1/batch", "A streamed job",
        "(`application/x-ndjson`): one item a line, one result line per item, streamed back as they are "
        "computed.", headers={"Content-Type": "application/x-ndjson"},
        data=b"".join(orjson.dumps(line) + b"\n" for line in lines))
    rec(
        client,
        "GET",
        "/v1/rulesets",
        "Every preset with every field",
        "([rules.md §9](rules.md#s9) says what each means).",
    )


def _table_walk(rec: Recorder, client: Any) -> None:
    """A table's evening: created, every event type, undo, reads, finish, summary, deletion."""
    body = {"players": PLAYERS, "ruleset": "xuezhan", "dealer": 0}
    key = str(uuid.uuid4())
    r = rec(client, "POST", "/v1/tables", "Create a table",
            "The write `token` and the `read_token` are shown only here (Redis keeps their SHA-256). A "
            "creation's `Idempotency-Key` is a UUID (version 4 or 7) made afresh for each table: a retry "
            "with it returns the same table and tokens, so it is a secret.",
            json_body=body, headers={"Idempotency-Key": key})
    table = r.get_json()
    write = {"Authorization": f"Bearer {table['token']}"}
    read = {"Authorization": f"Bearer {table['read_token']}"}
    base = f"/v1/tables/{table['id']}"
    last_seq = 0
    for title, anchor_id, method, event, note, headers in WALK:
        if method.startswith("VOID"):
            rec(client, "POST", f"{base}/events/{last_seq}/void", title, note, headers=write, anchor_id=anchor_id)
            continue
        r = rec(client, "POST", f"{base}/events", title, note, json_body=event, headers={**write, **headers},
                anchor_id=anchor_id)
        if r.status_code == 201:
            last_seq = r.get_json()["seq"]
    rec(client, "POST", f"{base}/events", "The read token on a write", "is a 403.",
        json_body={"type": "round_end"}, headers=read)
    rec(client, "POST", f"{base}/finish", "Finishing while a round is played", "is a 409 (`round_in_progress`).",
        headers=write)
    rec(client, "POST", f"{base}/events", "`round_end`",
        "closes a round that did not end by its events; all payments stand.", json_body={"type": "round_end"},
        headers=write, anchor_id="event-round_end")
    rec(client, "GET", f"{base}/events?after=0&limit=3", "The log, a page at a time",
        "Each record is the event as posted plus `seq`, `round`, `at` and `voided` (a void record names its "
        "`target` and its `round`); `next` is the `after` of the next page.", headers=read)
    rec(client, "POST", f"{base}/finish", "Finish the evening",
        "The table takes no more events or voids; it stays readable.", headers=write, example="finished")
    rec(client, "POST", f"{base}/events", "An event at a finished table", "is a 409 (`table_finished`).",
        json_body={"type": "round_start"}, headers=write)
    r = rec(client, "GET", base, "The table",
            "Either token. `ETag` is the version; `rounds` is a page of the ended rounds (`rounds_after`, "
            "`rounds_limit`, then `rounds_next`); `finished_at` once finished.", headers=read)
    rec(client, "GET", f"{base}/rounds?limit=2", "The rounds, a page at a time",
        "oldest first: pass `next` as `cursor` for the next page (`null` on the last).", headers=read)
    rec(client, "GET", base, "The same read with `If-None-Match`", "answers 304 while the version has not moved.",
        headers={**read, "If-None-Match": r.headers["ETag"]})
    rec(client, "GET", base, "A token that is not this table's", "is a 401…",
        headers={"Authorization": "Bearer " + "A" * 43})
    rec(client, "GET", "/v1/tables/0000000000000000", "…and so is any token for an id that is no table",
        "(nothing tells which ids exist).", headers=read)
    rec(client, "GET", f"{base}/summary", "The evening's summary",
        "Per seat: its total, rank and facts (wins, 自摸, 点炮 paid, kongs, 花猪 and 大叫 paid, escapes, the "
        "biggest win); then who pays whom in the fewest payments (`settle_up`). How each fact is counted: "
        "[rules.md §10.1](rules.md#s10.1).", headers=read, example="evening")
    from service.store.table_store import next_table_id
    rec.names.name(next_table_id(table["id"]), "<next id>")
    rec(client, "POST", f"{base}/next", "The next table",
        "after a finished one: the same players, ruleset and coins (each member given replaces the finished "
        "table's), and the same tokens, which is why none are shown. The finished table names it (`next`).",
        json_body={"dealer": 1}, headers=write, example="next")
    rec(client, "POST", f"{base}/next", "Another start of the next table", "is a 409 (`table_followed`) naming it.",
        json_body={}, headers=write)
    rec(client, "DELETE", base, "Delete the table", "with its whole log (the write token only).", headers=write)
    rec(client, "GET", base, "A deleted table", "is a 404 for its own tokens.", headers=read)


def _clubs(rec: Recorder, client: Any) -> None:
    """A club's season: created, players, a table played for it, the standings, a player's page, an import,
    a merge, a new season, and its problems."""
    r = rec(client, "POST", "/v1/clubs", "Create a club",
            "Its write `token` and `read_token` are shown only here; its first season is open.",
            json_body={"name": "周五麻将", "min_rounds": 2, "order": "total"})
    club = r.get_json()
    write, read = {"Authorization": f"Bearer {club['token']}"}, {"Authorization": f"Bearer {club['read_token']}"}
    base = f"/v1/clubs/{club['id']}"
    ids = []
    for n, (name, aliases) in enumerate([("老王", ["王哥"]), ("小李", []), ("阿珍", []), ("大刘", [])], 1):
        r = rec(client, "POST", f"{base}/players", "Add a player" if n == 1 else f"Player {n}",
                "a name and, optionally, aliases (other names an import finds them by)." if n == 1 else "",
                json_body={"name": name, **({"aliases": aliases} if aliases else {})}, headers=write)
        ids.append(r.get_json()["id"])
    rec(client, "PATCH", f"{base}/players/{ids[3]}", "Rename a player", "(or replace its aliases).",
        json_body={"name": "刘哥"}, headers=write)
    seats = [{"player": ids[0]}, {"player": ids[1]}, {"player": ids[2]}, {"guest": "小张"}]
    r = rec(client, "POST", f"{base}/tables", "Start a table for the club",
            "Each seat names a player of the club or a guest; the answer is the table with its tokens, as "
            "`POST /v1/tables` gives it, and who sits where.", json_body={"players": seats}, headers=write)
    table = r.get_json()
    t = {"Authorization": f"Bearer {table['token']}"}
    for event in ({"type": "round_start"}, {"type": "hu", "from": 1, "tile": "5p", "winners": [{"seat": 0, "fan": 2}]},
                  {"type": "round_end"}, {"type": "round_start"},
                  {"type": "hu", "tile": "9s", "winners": [{"seat": 3, "fan": 1}]}, {"type": "round_end"}):
        client.post(f"/v1/tables/{table['id']}/events", json=event, headers=t)
    client.post(f"/v1/tables/{table['id']}/finish", headers=t)
    rec(client, "POST", f"{base}/import", "Import past evenings",
        "from CSV (`date,player,total` rows, players by name or alias): each date an evening, in the current "
        "season. All rows or none.",
        data="date,player,total,rounds\n2025-11-07,王哥,120,16\n2025-11-07,小李,-40,16\n"
             "2025-11-07,阿珍,-80,16\n".encode(), content_type="text/csv", headers=write)
    rec(client, "POST", f"{base}/import", "An import with bad rows",
        "is refused whole: `errors` names each bad cell by its line and column.",
        data="date,player,total\n2025-11-14,老王,x\n2025-11-14,无名,-5\n".encode(), content_type="text/csv",
        headers=write)
    rec(client, "GET", f"{base}/seasons/current/standings", "The standings",
        "of the current season (or `s1`, `s2`, ...): ranked players first (`min_rounds` played), then by the "
        "club's `order`; counted as each table was finished, never refolded on a read.", headers=read,
        example="standings")
    rec(client, "GET", f"{base}/seasons/s1/standings", "The standings as CSV",
        "for a spreadsheet: UTF-8 with a byte order mark, so that Excel shows the names (lines end with CRLF, "
        "shown here as line breaks).", headers={**read, "Accept": "text/csv"},
        show=lambda text: text.replace("\r\n", "\n"))
    rec(client, "GET", f"{base}/players/{ids[0]}", "A player's page",
        "lifetime and per-season figures, and `history`: one entry per finished table, oldest first.",
        headers=read, example="player")
    rec(client, "POST", f"{base}/players/{ids[3]}/merge", "Merge two players",
        "(a name entered twice): one player from then on, both histories joined.", json_body={"into": ids[0]},
        headers=write)
    rec(client, "POST", f"{base}/players/{ids[0]}/merge", "A merge into the player itself", "is a 422.",
        json_body={"into": ids[0]}, headers=write)
    rec(client, "POST", f"{base}/seasons", "Open a new season",
        "The last one ends now; a table counts in the season current when it was finished.",
        json_body={"name": "2026 春"}, headers=write)
    rec(client, "GET", base, "The club", "its settings, players, seasons and the current season.", headers=read,
        example="club")
    rec(client, "POST", f"{base}/players", "The club's read token on a write", "is a 403.",
        json_body={"name": "新人"}, headers=read)


def _stream(rec: Recorder, app: Any) -> None:
    """A stream that resumes after seq 1, gets a record live, and ends when the table is deleted."""
    client = app.test_client()
    table = client.post("/v1/tables", json={"players": PLAYERS}).get_json()
    rec.table(table)
    write = {"Authorization": f"Bearer {table['token']}"}
    base = f"/v1/tables/{table['id']}"
    for event in ({"type": "round_start"}, {"type": "kong", "seat": 2, "kind": "concealed", "tile": "7s"}):
        assert client.post(f"{base}/events", json=event, headers=write).status_code == 201
    headers = {"Authorization": f"Bearer {table['read_token']}", "Last-Event-ID": "1"}
    response = client.get(f"{base}/stream", headers=headers, buffered=False)
    frames = iter(response.response)
    text = ""

    def until(done: Callable[[str], bool]) -> None:
        nonlocal text
        deadline = time.monotonic() + 30
        while not done(text):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the stream did not show what it should; so far:\n{text}")
            text += next(frames).decode()

    try:
        until(lambda t: "\nid: 2\n" in t and t.endswith("\n\n"))
        live = {"type": "kong", "seat": 0, "kind": "direct", "tile": "5m", "from": 2}
        assert client.post(f"{base}/events", json=live, headers=write).status_code == 201
        until(lambda t: "\nid: 3\n" in t and t.endswith("\n\n"))
        rec(client, "DELETE", base, "Deleting a table ends its streams", "with `event: deleted` (below).",
            headers=write)
        until(lambda t: "event: deleted" in t and t.endswith("\n\n"))
    finally:
        response.close()
    status = f"{response.status_code} {response.status.split(' ', 1)[1]}"
    lines = [status] + [
        f"{k}: {response.headers[k]}" for k in ("Content-Type", "Cache-Control") if k in response.headers
    ]
    names = rec.names
    rec.add("streamTable", _stream_text(names, headers, live, lines, text, table))


def _stream_text(names: _Placeholders, headers: dict, live: dict, lines: list[str], text: str, table: dict) -> str:
    head = "\n".join([f"GET /v1/tables/{table['id']}/stream"] + [f"{k}: {v}" for k, v in headers.items()])
    return ("**A phone resumes after the record it holds** (`Last-Event-ID: 1`): record 2 comes from the log, "
            f"then record 3 live (another phone posted `{orjson.dumps(live).decode()}`), then the table "
            "was deleted. A comment line (`: keep-alive`) comes every `STREAM_HEARTBEAT` seconds (15): none "
            "came in this example, which took less.\n\n"
            f"```http\n{names(head)}\n```\n\n```http\n" + "\n".join(lines) + f"\n\n{names(text).rstrip()}\n```\n\n")


def _stakes(rec: Recorder, client: Any) -> None:
    """A table that plays for coins (docs/rules.md#s12), then a three-player one."""
    body = {"players": PLAYERS, "ruleset": {"preset": "normal", "zimo": "base"},
            "stakes": {"coin_per_point": 200, "fee": 400, "bankrolls": [20000, 1000, 20000, 20000]}}
    r = rec(client, "POST", "/v1/tables", "A table that plays for coins",
            "`stakes` (游戏币场): coins per point, a fee per round to the house, each seat's bankroll. The table "
            "then has `coins`; points and balances are unchanged.", json_body=body)
    table = r.get_json()
    write = {"Authorization": f"Bearer {table['token']}"}
    base = f"/v1/tables/{table['id']}"
    assert client.post(f"{base}/events", json={"type": "round_start"}, headers=write).status_code == 201
    hu = {"type": "hu", "from": None, "tile": "5p", "winners": [{"seat": 0, "fan": 2}]}
    rec(client, "POST", f"{base}/events", "Coins settle when a round ends",
        "(after a `round_start`): seat 0 自摸 for 18 points from each, 3,600 coins each at 200 a point, but "
        "seat 1 holds only 1,000 (游戏币不足扣尽): the winner gets the 8,200 paid, then every seat pays the "
        "400 fee if it can. The round shows `bankrolls`, `coins_delta` and `fees`.", json_body=hu, headers=write)
    rec(client, "POST", f"{base}/events", "`buy_in`",
        "Between rounds a seat buys coins (during a round: 422 `round_in_progress`; at a table without "
        "stakes: 422 `no_stakes`).", json_body={"type": "buy_in", "seat": 1, "coins": 5000}, headers=write,
        anchor_id="event-buy_in")
    rec(client, "GET", f"{base}/summary", "A summary with stakes",
        "Each seat's `coins` (its coin result: coins now − bankroll − buy-ins + fees paid, what passed between "
        "it and the others), `fees` and `buy_ins`; the settle-up is in coins and squares those results. Seat 1 "
        "ran short (扣尽), so it pays the 1,000 it lost, not its points' price ([rules.md §10.1](rules.md#s10.1)).",
        headers={"Authorization": f"Bearer {table['read_token']}"}, example="stakes")
    rec(client, "POST", "/v1/tables", "Three players (三人两房)",
        "A ruleset with `players: 3` seats three names (another number: 422 `bad_players`); seats are 0-2 "
        "and every seat-indexed list has three entries.",
        json_body={"players": PLAYERS[:3], "ruleset": "sanren-liangfang"})
    settle = {"ruleset": {"preset": "normal", "zimo": "base"}, "dealer": 0, "events": [hu],
              "stakes": {"coin_per_point": 200, "fee": 400, "bankrolls": [20000, 1000, 20000, 20000]}}
    rec(client, "POST", "/v1/rounds/settle", "Coins without a table",
        "`stakes` with the seats' coins before the round as `bankrolls`: `coins_delta` and `fees` too "
        "(`null` while the round has not ended).", json_body=settle)


def _mending(rec: Recorder, client: Any) -> None:
    """Mending the record (docs/rules.md#s15): penalties, an adjust, a correction, the rounds explained."""
    table = client.post("/v1/tables", json={"players": PLAYERS}).get_json()
    rec.table(table)
    write = {"Authorization": f"Bearer {table['token']}"}
    read = {"Authorization": f"Bearer {table['read_token']}"}
    base = f"/v1/tables/{table['id']}"
    for event in (
        {"type": "round_start"},
        {"type": "hu", "from": None, "tile": "5p", "winners": [{"seat": 0, "fan": 2}]},
    ):
        assert client.post(f"{base}/events", json=event, headers=write).status_code == 201
    rec(client, "POST", f"{base}/events", "`penalty`, 诈胡",
        "A seat that declared a win it did not have pays each other seat still in the round a win of `zhahu_fan` "
        "fan (null: the cap, or 3; reason `penalty`), and plays on; kind `xianggong` (相公) pays nothing but bars "
        "the seat from winning for the rest of the round ([rules.md §15.3, §15.4](rules.md#s15.3)).",
        json_body={"type": "penalty", "seat": 3, "kind": "zhahu"}, headers=write, anchor_id="event-penalty")
    rec(client, "POST", f"{base}/events", "An `adjust` during a round", "is a 409 (`round_in_progress`).",
        json_body={"type": "adjust", "transfers": [{"from": 1, "to": 0, "points": 10}]}, headers=write)
    assert client.post(f"{base}/events", json={"type": "round_end"}, headers=write).status_code == 201
    rec(client, "POST", f"{base}/events", "`adjust`",
        "Between rounds: points moved outside the rules (茶水, a side bet, a mistake found later; reason "
        "`adjust`), in the balances but never in a round's deltas ([rules.md §15.5](rules.md#s15.5)).",
        json_body={"type": "adjust", "transfers": [{"from": 1, "to": 0, "points": 10}], "note": "茶水"},
        headers=write, anchor_id="event-adjust")
    assert client.post(f"{base}/events", json={"type": "round_start"}, headers=write).status_code == 201
    assert client.post(f"{base}/events", json={"type": "kong", "seat": 1, "kind": "concealed", "tile": "1m"},
                       headers=write).status_code == 201
    fixed = {"events": [{"type": "kong", "seat": 2, "kind": "concealed", "tile": "7s"},
                        {"type": "hu", "from": None, "tile": "5p", "winners": [{"seat": 0, "fan": 2}]},
                        {"type": "penalty", "seat": 3, "kind": "zhahu"}],
             "note": "西's 暗杠 came before the 自摸"}
    rec(client, "PUT", f"{base}/rounds/1/events", "A correction of an ended round",
        "Round 1's events are now these: the kong that was forgotten comes first. Round 2 keeps its events "
        "and deltas (its dealer, taken from round 1, is still seat 0), the balances move by `changes`, and "
        "`round` is round 1 as corrected: its events carry the correction's `seq` and their `index` "
        "([rules.md §15.2](rules.md#s15.2)).", json_body=fixed, headers=write, example="corrected")
    rec(client, "PUT", f"{base}/rounds/1/events", "A correction that would change a later round's dealer",
        "is a 409 (`correction_conflict`) naming the round (`round`) and its record (`event`): round 2 started "
        "without naming its dealer, so it took round 1's next dealer.",
        json_body={"events": [{"type": "hu", "from": None, "tile": "5p", "winners": [{"seat": 1, "fan": 2}]}]},
        headers=write)
    rec(client, "PUT", f"{base}/rounds/1/events", "An event of a correction that cannot happen",
        "is a 422 whose `event` is its index in the new list.", json_body={"events": [
            {"type": "escape", "seat": 3}, {"type": "kong", "seat": 2, "kind": "concealed", "tile": "7s"}]},
        headers=write)
    rec(client, "POST", f"{base}/events/2/void", "A void of a record a correction replaced",
        "is a 409 (`void_conflict`) whose `event` names the correction: void that, or correct the round again.",
        headers=write)
    rec(client, "GET", f"{base}/rounds/1", "One round explained",
        "as it stands: every event with the transfers it made, all its transfers, `corrected_by`.",
        headers=read, example="round")
    rec(client, "GET", f"{base}/rounds?limit=5", "Every round explained",
        "a page at a time, the round being played last.", headers=read, example="rounds")
    rec(client, "PUT", f"{base}/rounds/9/events", "A correction of a round that is not there",
        "is a 404 (`round_not_found`).", json_body={"events": []}, headers=write)


def _errors(rec: Recorder, client: Any) -> None:
    rec(client, "POST", "/v1/hands/ting", "Malformed JSON", "is a 400.", data='{"hand": ',
        content_type="application/json", section=ERRORS)
    rec(client, "POST", "/v1/hands/ting", "A body that is not JSON", "is a 415.", data="hand=1112345678999m",
        content_type="application/x-www-form-urlencoded", section=ERRORS)
    rec(client, "POST", "/v1/hands/ting", "JSON that breaks the schema",
        "is a 422 `invalid_input` whose `errors` name each field.", json_body={"hand": {"tiles": 7}, "extra": 1},
        section=ERRORS)
    rec(client, "POST", "/v1/hands/ting", "A body over `MAX_BODY_BYTES`", "(64 KiB by default) is a 413.",
        data=b'{"hand": {"tiles": "' + b"1" * 70000 + b'"}}', content_type="application/json", section=ERRORS)


def _rate_limit(rec: Recorder, client: Any) -> None:
    """A table limited to 2 events a minute: a refused event does not count; the third write is a 429."""
    if time.time() % 60 > 55:  # (the windows are minutes of the clock: keep the example inside one)
        time.sleep(60 - time.time() % 60 + 0.1)
    table = client.post("/v1/tables", json={"players": PLAYERS}).get_json()
    rec.table(table)
    write = {"Authorization": f"Bearer {table['token']}"}
    base = f"/v1/tables/{table['id']}"
    rec(client, "POST", f"{base}/events", "A limited write",
        "carries the `X-RateLimit-*` headers of the limit closest to refusing: here the table's own events a "
        "minute (`TABLE_EVENTS_PER_MINUTE`, set to 2 for this example).", json_body={"type": "round_start"},
        headers=write, section=ERRORS)
    assert client.post(f"{base}/events", json={"type": "kong", "seat": 9, "kind": "concealed", "tile": "1m"},
                       headers=write).status_code == 422  # refused by the rules: not counted
    assert client.post(f"{base}/events", json={"type": "kong", "seat": 1, "kind": "concealed", "tile": "1m"},
                       headers=write).status_code == 201
    rec(client, "POST", f"{base}/events", "Over the limit",
        "(after a refused event, which did not count, and a second recorded one): 429 with `Retry-After` and "
        "`limit`, the limit that refused.", json_body={"type": "kong", "seat": 2, "kind": "concealed", "tile": "2m"},
        headers=write, section=ERRORS)


def _keys_app(redis_url: str, rec: Recorder, off: dict) -> tuple[Any, dict[str, str]]:
    """An app started with ``API_KEYS`` (two keys, ``acme`` and ``other``), and the keys."""
    from service.api.app import create_app

    keys = {"acme": "mk_" + secrets.token_urlsafe(32), "other": "mk_" + secrets.token_urlsafe(32)}
    for name, key in keys.items():
        rec.names.name(key, f"<{name}'s key>")
    app = create_app({"TESTING": True, "REDIS_URL": redis_url, "PUBLIC_URL": PUBLIC_URL, **off,
                      "API_KEYS": ",".join(f"{name}={key}" for name, key in keys.items()),
                      "WEBHOOK_ALLOW_PRIVATE": True})  # (the webhook examples' receiver is on loopback)
    return app, keys


def _api_keys(rec: Recorder, client: Any, keys: dict[str, str]) -> None:
    """A service with ``API_KEYS``: a call without a key; a key's table, listed and used without a token."""
    acme, other = {"X-API-Key": keys["acme"]}, {"X-API-Key": keys["other"]}
    rec(client, "POST", "/v1/hands/score", "Without `X-API-Key`",
        "a service started with `API_KEYS` answers every `/v1/` call that carries no table token 401.",
        json_body={"hand": {"tiles": "11223344556677m"}, "win": {"tile": "7m"}}, section=ERRORS)
    r = rec(client, "POST", "/v1/tables", "A table created with an API key",
            "(a service started with `API_KEYS`) belongs to that key.",
            json_body={"players": PLAYERS}, headers=acme)
    table = r.get_json()
    base = f"/v1/tables/{table['id']}"
    rec(client, "GET", "/v1/tables", "The tables of the caller's key", "newest first, a page at a time.",
        headers=acme)
    rec(client, "POST", f"{base}/events", "The key that created a table writes it",
        "with `X-API-Key` alone, without a token.", json_body={"type": "round_start"}, headers=acme)
    rec(client, "GET", f"{base}/events", "The key that created a table reads it", "with `X-API-Key` alone…",
        headers=acme)
    rec(client, "GET", f"{base}/events", "…and another key", "gets 404, as for a table that does not exist.",
        headers=other)


class _Receiver:
    """A webhook receiver on a loopback port for the examples: answers every POST 204."""

    def __enter__(self) -> str:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/mahjong"

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def _webhooks(rec: Recorder, client: Any, keys: dict[str, str]) -> None:
    """An API key's webhook: registered, listed, read, tested; a table's tokens rotated; a round's end delivered
    (by a dispatcher's visit), listed in the deliveries log and redelivered; the webhook changed, its secret
    rotated, and deleted."""
    from service.webhooks.dispatcher import Dispatcher, DispatcherOptions

    acme = {"X-API-Key": keys["acme"]}

    def steady(text: str) -> str:  # an attempt's duration varies from run to run
        text = re.sub(r'"duration_ms":\d+', '"duration_ms":<ms>', text)
        return re.sub(r'(msg_test_wh_[^"_]+)_\d+"', r'\1_<n>"', text)

    with _Receiver() as url:
        rec.names.name(url, "https://backend.example/mahjong")
        r = rec(client, "POST", "/v1/webhooks", "A webhook for the key's tables",
                "(here every round's end and the table's finish): the `secret` that signs the deliveries is "
                "shown only here. (The examples' receiver ran on the service's own machine, with "
                "`WEBHOOK_ALLOW_PRIVATE`; its URL is shown as the public one it stands for.)",
                json_body={"url": url, "events": ["round.ended", "table.finished"]}, headers=acme)
        hook = r.get_json()
        rec(
            client,
            "POST",
            "/v1/webhooks",
            "A URL the service does not send to",
            "is refused: only `http` and `https` URLs whose host resolves to public addresses (loopback, "
            "private and link-local ones too unless `WEBHOOK_ALLOW_PRIVATE`).",
            json_body={"url": "ftp://backend.example/mahjong", "events": ["round.ended"]},
            headers=acme,
        )
        rec(client, "GET", "/v1/webhooks", "The key's webhooks", "oldest first.", headers=acme)
        rec(client, "POST", f"/v1/webhooks/{hook['id']}/test", "A test message, sent now",
            "(one attempt): the answer is the webhook with that attempt as `last_delivery`.", headers=acme,
            show=steady)
        rec(client, "GET", f"/v1/webhooks/{hook['id']}", "One webhook", "with its status and last delivery.",
            headers=acme, show=steady)
        r = rec(client, "POST", "/v1/tables", "A table of the key", "(its notifications go to the key's webhooks).",
                json_body={"players": PLAYERS}, headers=acme)
        table = r.get_json()
        rec(client, "POST", f"/v1/tables/{table['id']}/tokens/rotate", "New tokens for a table",
            "(with its write token, or the API key that created it): the old ones are refused from now on, "
            "and streams opened with them end with `event: rotated`.",
            headers={"Authorization": f"Bearer {table['token']}"},
            show=lambda text: re.sub(r'"(token|read_token)":"[^"]+"', r'"\1":"<new \1>"', text))
        for event in ({"type": "round_start"}, {"type": "round_end"}):  # (a round.ended notification)
            client.post(f"/v1/tables/{table['id']}/events", json=event, headers=acme)
        app = client.application
        dispatcher = Dispatcher(app.extensions["redis"], app.extensions["webhooks"],
                                DispatcherOptions(timeout=5.0, allow_private=True))
        deadline = time.monotonic() + 30
        while not app.extensions["webhooks"].deliveries("acme", hook["id"], None, 1)["deliveries"]:
            if time.monotonic() > deadline:
                raise RuntimeError("the examples' round.ended was not delivered")
            dispatcher.visit(table["id"])  # (not started: one visit delivers it, its lane job records it)
            time.sleep(0.05)
        dispatcher.stop(wait=5.0)
        delivery = app.extensions["webhooks"].deliveries("acme", hook["id"], None, 1)["deliveries"][0]
        rec(client, "GET", f"/v1/webhooks/{hook['id']}/deliveries", "The deliveries log",
            "newest first: each notification sent to the webhook, with its status, attempts and last response "
            "(here the round's end).", headers=acme, show=steady)
        rec(client, "POST", f"/v1/webhooks/{hook['id']}/deliveries/{delivery['id']}/redeliver",
            "A delivery sent again", "now, with the same `webhook-id`: the answer is the delivery after that "
            "attempt.", headers=acme, show=steady)
        rec(client, "PATCH", f"/v1/webhooks/{hook['id']}", "A webhook changed",
            "(here disabled: nothing is sent to it until it is enabled again, and then only what is written "
            "from then on).", json_body={"enabled": False}, headers=acme, show=steady)
        rec(client, "PATCH", f"/v1/webhooks/{hook['id']}", "A change that names nothing",
            "is refused.", json_body={}, headers=acme, section=ERRORS)
        rec(client, "POST", f"/v1/webhooks/{hook['id']}/secret/rotate", "A new secret",
            "shown only here: for 24 h (`previous_secret_expires`) the replaced one signs every delivery too.",
            headers=acme, show=steady)
        rec(client, "DELETE", f"/v1/webhooks/{hook['id']}", "Deleting a webhook",
            "stops its deliveries.", headers=acme)


def _ops(rec: Recorder, client: Any) -> None:
    rec(client, "GET", "/healthz", "Liveness", "")
    rec(client, "GET", "/readyz", "Readiness", "([operations.md](operations.md#readiness) says what each check asks).")
    rec(client, "GET", "/problems/not_a_win", "A problem's type, described",
        "(the page a problem's `type` names; a browser gets it as HTML).", headers={"Accept": "application/json"})

    def mahjong_lines(text: str) -> str:
        lines = sorted(line for line in text.splitlines() if line.startswith("# HELP mahjong_")
                       and not line.split()[2].endswith("_created"))
        return "\n".join(lines + ["…"])

    shared = os.environ.pop(MULTIPROC_ENV, None)  # (this process's own metrics, as a single process answers)
    try:
        rec(client, "GET", "/metrics", "Prometheus metrics",
            "(here only the service's own metrics' `# HELP` lines; the process's and each metric's samples "
            "follow them in the real answer).", show=mahjong_lines)
    finally:
        if shared is not None:
            os.environ[MULTIPROC_ENV] = shared


def _LIMIT_VARIABLES() -> list[str]:
    from service.config import LIMITS

    return [var for var, _, _ in LIMITS.values()]


def _http_codes_section() -> str:
    """The HTTP layer's own problem codes: its problems, the store's errors, Werkzeug's errors."""
    from service.api import callers, problems, rate_limits, stream, table_views  # noqa: F401  (every ApiProblem class defined)
    from service.store import table_store as store

    rows: dict[str, tuple[int, str]] = {}

    def walk(cls: type[problems.ApiProblem]) -> None:
        for sub in cls.__subclasses__():
            if "code" in vars(sub):
                rows.setdefault(sub.code, (sub.status, sub.title))
            walk(sub)

    walk(problems.ApiProblem)
    for cls, status, title in problems.STORE_STATUS:
        if "code" in vars(cls):
            rows.setdefault(cls.code, (status, title))
    rows.setdefault("store_unavailable", (503, "Tables store unavailable"))
    for status, (code, title) in problems.HTTP_CODES.items():
        rows.setdefault(code, (status, title))
    del store
    from service.api.problem_types import registry

    meanings = registry()
    out = ["#### The HTTP layer's problem codes\n\nBesides the rules core's codes "
           "([rules.md](rules.md#codes)); a 409 `Conflict` carries the store's own code (`table_full`, "
           "`table_finished`, `round_in_progress`, `void_conflict`, `already_voided`, `not_voidable`, "
           "`table_deleted`, `idempotency_key_expired`, `tokens_rotated`). Each code's page, at its problems' "
           "`type` (`/problems/{code}`), says the same.\n\n| code | status | title | meaning |\n|---|---|---|---|\n"]
    out.extend(f"| `{code}` | {status} | {title} | {meanings[code].meaning if code in meanings else ''} |\n"
               for code, (status, title) in sorted(rows.items(), key=lambda r: (r[1][0], r[0])))
    return "".join(out)


def _credentials(op: dict) -> str:
    security = op.get("security")
    if security == []:
        return "none"
    table_op = any("tableToken" in requirement for requirement in security or [])
    parts = []
    for requirement in security or []:
        if not requirement:
            parts.append("none without `API_KEYS`")
        for scheme, roles in requirement.items():
            if scheme == "apiKey":
                parts.append("the `X-API-Key` that created the table" if table_op else "`X-API-Key`")
            else:
                parts.append("either table token" if roles == ["read"] else "the write token")
    return " or ".join(parts)


def stale_files(files: dict[Path, str]) -> list[Path]:
    """The files whose committed text differs from ``files``."""
    return [path for path, text in files.items()
            if not path.exists() or path.read_text(encoding="utf-8") != text]


# -- writing -------------------------------------------------------------------------------------
def _shown(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def pages(redis_url: str, recorded: dict | None = None) -> dict[str, str]:
    """The generated pages by name; ``recorded`` (when given) gets the OpenAPI response examples."""
    return {"rules.md": rules_page(), "api.md": api_page(redis_url, recorded=recorded)}


def _redis() -> Generator[str, None, None]:
    from service.store.embedded import EmbeddedRedis

    with tempfile.TemporaryDirectory(prefix="mahjong-docs-") as tmp:
        with EmbeddedRedis(tmp) as server:
            yield server.url


def stale(generated: dict[str, str], docs: Path = DOCS) -> list[str]:
    """The pages whose committed text differs from ``generated``."""
    return [name for name, text in generated.items()
            if not (docs / name).exists() or (docs / name).read_text(encoding="utf-8") != text]


def main(check: bool = False, redis_url: str | None = None) -> int:
    if redis_url is None:
        gen = _redis()
        redis_url = next(gen)
    else:
        gen = None
    recorded: dict = {}
    try:
        generated = pages(redis_url, recorded)
    except RulesPageError as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        if gen is not None:
            gen.close()
    files = {RESPONSE_EXAMPLES: response_examples_json(recorded)}
    if check:
        bad = [f"docs/{name}" for name in stale(generated)] + [_shown(path) for path in stale_files(files)]
        for name in bad:
            print(f"{name} is out of date: run `python -m tools.docs`", file=sys.stderr)
        return 1 if bad else 0
    DOCS.mkdir(exist_ok=True)
    for name, text in generated.items():
        (DOCS / name).write_text(text, encoding="utf-8")
        print(f"wrote docs/{name}")
    for path in stale_files(files):
        path.write_text(files[path], encoding="utf-8")
        print(f"wrote {_shown(path)}")
        if path == RESPONSE_EXAMPLES:
            print("the OpenAPI document shows them: run `python -m service openapi > openapi.yaml` too")
    return 0


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tools.docs", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="only check that they are up to date (exit 1 if not)")
    sys.exit(main(check=parser.parse_args().check))
