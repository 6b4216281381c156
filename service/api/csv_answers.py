"""Answers as CSV (:mod:`service.spreadsheets` writes them): whether a request asks for one, and the answer.

A read that has a CSV form (a season's standings, a table's rounds) answers it for ``Accept: text/csv``
(preferred to JSON by the header's weights; JSON otherwise), as a file to save.
"""

from __future__ import annotations

from flask import Response, request

CSV = "text/csv"


def wants_csv() -> bool:
    """Whether the request prefers ``text/csv`` to JSON (its ``Accept``)."""
    return request.accept_mimetypes.best_match(["application/json", CSV], default="application/json") == CSV


def csv_response(data: bytes, filename: str) -> Response:
    """A CSV answer (UTF-8 with a BOM, :mod:`service.spreadsheets`), offered as a file to save."""
    response = Response(data, mimetype=CSV)
    response.headers["Content-Type"] = "text/csv; charset=utf-8"
    response.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    response.headers["Vary"] = "Accept"
    return response
