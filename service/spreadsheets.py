"""CSV for spreadsheets: a season's standings, a table's rounds, and the past evenings a club imports.

What the service writes is UTF-8 with a byte order mark (BOM): Excel opens a
CSV file as UTF-8 only when it starts with one, and shows the players' Chinese
names then (without it, it guesses the machine's code page).  Lines end with
CRLF (RFC 4180).

What a club imports (``POST /v1/clubs/{id}/import``, :func:`read_evenings`):
rows of ``date,player,total``; an optional first row names the columns
(``date``, ``player``, ``total``, and optionally ``rounds`` and ``evening``;
also in Chinese: 日期, 玩家 or 姓名, 总分 or 得分, 局数, 桌), else the
columns are ``date,player,total`` in that order.  The text is UTF-8 (a BOM is
allowed) or, when it is not, GB18030 (what Excel on a Chinese Windows saves as
"CSV").  A date is ``2025-03-07``, ``2025/3/7``, ``2025.3.7`` or
``2025年3月7日``; a total an integer (``+12``, ``-30``); ``rounds`` (the
evening's rounds, the same on each of its rows) a whole number; ``evening``
a label that tells two evenings of one date apart (two tables on a Friday).
Empty lines are skipped; each bad cell is named ``<line>.<column>`` (the
line of the file, the header counted).

>>> rows, errors = read_evenings("date,player,total\\r\\n2025-03-07,老王,+40\\r\\n2025/3/7,小李,-40\\r\\n".encode())
>>> [(r.line, r.day.isoformat(), r.player, r.total) for r in rows], errors
([(2, '2025-03-07', '老王', 40), (3, '2025-03-07', '小李', -40)], {})
>>> read_evenings(b"2025-13-01,A,1\\nx,B,y\\n")[1]
{'1.date': ['not a date (2025-03-07)'], '2.date': ['not a date (2025-03-07)'], '2.total': ['not an integer']}
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import date
from typing import Any

from .store.clubs import ImportRow

BOM = "\ufeff"
MAX_CELL = 200
HEADERS = {
    "date": ("date", "日期"),
    "player": ("player", "name", "玩家", "姓名", "名字"),
    "total": ("total", "points", "score", "总分", "得分", "分数"),
    "rounds": ("rounds", "局数"),
    "evening": ("evening", "table", "桌", "桌号"),
}
_DATE = re.compile(r"(\d{4})\s*[-/.年]\s*(\d{1,2})\s*[-/.月]\s*(\d{1,2})\s*日?(?:[T ].*)?")
_INT = re.compile(r"[+-]?\d{1,15}")


def _write(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> bytes:
    out = io.StringIO()
    out.write(BOM)
    w = csv.writer(out, lineterminator="\r\n")
    w.writerow(header)
    w.writerows(rows)
    return out.getvalue().encode("utf-8")


STANDINGS_COLUMNS = ("rank", "name", "player", "ranked", "evenings", "rounds", "total", "coins", "wins", "zimo",
                     "dianpao_paid", "kongs_direct", "kongs_added", "kongs_concealed", "huazhu_paid", "dajiao_paid",
                     "penalties", "biggest_win_points", "biggest_win_fan", "rating_mu", "rating_sigma",
                     "rating_ordinal")


def standings_csv(standings: Mapping[str, Any]) -> bytes:
    """A season's standings (``GET .../standings``'s JSON) as CSV: one row per player in its order
    (``coins`` only when the standings have them; an unranked player's rank empty).

    >>> row = {"player": "p1", "name": "老王", "rank": None, "ranked": False, "evenings": 1, "rounds": 8,
    ...        "total": 40, "wins": 2, "zimo": 1, "dianpao_paid": 0, "kongs": {"direct": 1, "added": 0,
    ...        "concealed": 0}, "huazhu_paid": 0, "dajiao_paid": 0, "penalties": 0, "biggest_win": None,
    ...        "rating": {"mu": 27.5, "sigma": 8.0, "ordinal": 3.5}}
    >>> text = standings_csv({"players": [row]}).decode("utf-8")
    >>> text.startswith(BOM), text[1:].splitlines()[1]
    (True, ',老王,p1,false,1,8,40,2,1,0,1,0,0,0,0,0,,,27.5,8.0,3.5')
    """
    coins = any("coins" in r for r in standings["players"])
    columns = [c for c in STANDINGS_COLUMNS if coins or c != "coins"]

    def cells(r: Mapping[str, Any]) -> list:
        best = r["biggest_win"] or {}
        flat = {**r, "rank": "" if r["rank"] is None else r["rank"], "ranked": str(r["ranked"]).lower(),
                **{f"kongs_{k}": v for k, v in r["kongs"].items()},
                "biggest_win_points": best.get("points", ""), "biggest_win_fan": best.get("fan", ""),
                **{f"rating_{k}": v for k, v in r["rating"].items()}}
        return [flat.get(c, "") for c in columns]

    return _write(columns, (cells(r) for r in standings["players"]))


def rounds_csv(players: Sequence[str], rounds: Iterable[Mapping[str, Any]]) -> bytes:
    """A table's ended rounds as CSV, one row per round and seat: ``round``, ``seat``, ``player`` (its
    name), ``dealer`` (1 for the seat that dealt), ``delta`` (its points that round), ``running`` (the sum
    of its deltas so far: the round-by-round balance, adjustments between rounds left out) and, at a table
    with stakes, ``coins_delta`` and ``fees``.  ``rounds``: the round summaries (``number``, ``dealer``,
    ``deltas``, with stakes ``coins_delta`` and ``fees``), oldest first, as the table view lists them.

    >>> print(rounds_csv(["东", "南", "西", "北"], [{"number": 1, "dealer": 0, "deltas": [36, -12, -12, -12]},
    ...       {"number": 2, "dealer": 0, "deltas": [-6, 6, 0, 0]}]).decode("utf-8-sig"))
    round,seat,player,dealer,delta,running
    1,0,东,1,36,36
    1,1,南,0,-12,-12
    1,2,西,0,-12,-12
    1,3,北,0,-12,-12
    2,0,东,1,-6,30
    2,1,南,0,6,-6
    2,2,西,0,0,-12
    2,3,北,0,0,-12
    <BLANKLINE>
    """
    rounds = list(rounds)
    coins = any("coins_delta" in r for r in rounds)
    header = ["round", "seat", "player", "dealer", "delta", "running"] + (["coins_delta", "fees"] if coins else [])
    running = [0] * len(players)
    out = []
    for r in rounds:
        for seat, name in enumerate(players):
            running[seat] += r["deltas"][seat]
            row = [r["number"], seat, name, int(r["dealer"] == seat), r["deltas"][seat], running[seat]]
            if coins:
                row += [(r.get("coins_delta") or [""] * len(players))[seat],
                        (r.get("fees") or [""] * len(players))[seat]]
            out.append(row)
    return _write(header, out)


def table_rounds_csv(tables: Any, table_id: str, access: Any = None, page: int = 500) -> bytes:
    """:func:`rounds_csv` of a table in a store (a :class:`~service.store.table_store.TableStore`): its
    players and every ended round, read a page at a time (``access`` is checked as a read's)."""
    rounds: list[dict] = []
    after: int | None = 0
    players: list[str] = []
    while after is not None:
        view = tables.get(table_id, access, rounds_after=after, rounds_limit=page)
        players, after = view["players"], view["rounds_next"]
        rounds += view["rounds"]
    return rounds_csv(players, rounds)


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("gb18030").removeprefix(BOM)


def _day(text: str) -> date | None:
    m = _DATE.fullmatch(text)
    if m is None:
        return None
    try:
        return date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        return None


def read_evenings(data: bytes) -> tuple[list[ImportRow], dict[str, list[str]]]:
    """The rows of an import (the module's docstring says what it reads) and the errors, by
    ``<line>.<column>`` (``<line>`` alone for a row of the wrong shape; ``body`` for a text that is
    neither UTF-8 nor GB18030)."""
    try:
        text = _text(data)
    except UnicodeDecodeError:
        return [], {"body": ["not UTF-8 (nor GB18030) text"]}
    errors: dict[str, list[str]] = {}
    rows: list[ImportRow] = []
    columns: dict[str, int] = {"date": 0, "player": 1, "total": 2}
    first = True
    for line, cells in enumerate(csv.reader(io.StringIO(text, newline="")), 1):
        cells = [c.strip() for c in cells]
        if not any(cells):
            continue
        if first:
            first = False
            named = {name: i for i, cell in enumerate(cells) for name, words in HEADERS.items()
                     if cell.casefold() in words}
            if {"date", "player", "total"} <= named.keys():
                columns = named
                continue
        if len(cells) <= max(columns[c] for c in ("date", "player", "total")) or any(len(c) > MAX_CELL for c in cells):
            errors[str(line)] = [f"expected the columns {', '.join(sorted(columns, key=columns.__getitem__))}"
                                 f" (at most {MAX_CELL} characters each)"]
            continue
        cells += [""] * (max(columns.values()) + 1 - len(cells))  # (an optional column left empty)
        day = _day(cells[columns["date"]])
        if day is None:
            errors.setdefault(f"{line}.date", []).append("not a date (2025-03-07)")
        player = cells[columns["player"]]
        if not player:
            errors.setdefault(f"{line}.player", []).append("no player")
        total_text = cells[columns["total"]].replace(" ", "")
        if not _INT.fullmatch(total_text):
            errors.setdefault(f"{line}.total", []).append("not an integer")
        rounds = None
        if "rounds" in columns and cells[columns["rounds"]]:
            if not cells[columns["rounds"]].isdigit() or len(cells[columns["rounds"]]) > 6:
                errors.setdefault(f"{line}.rounds", []).append("not a whole number")
            else:
                rounds = int(cells[columns["rounds"]])
        label = cells[columns["evening"]] if "evening" in columns else ""
        if day is not None and player and _INT.fullmatch(total_text):
            rows.append(ImportRow(line, day, player, int(total_text), rounds, label))
    if first and not errors:
        errors["body"] = ["no rows"]
    return rows, errors
