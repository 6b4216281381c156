"""The blueprint that serves the companion app, its QR codes and the ``/docs`` assets.

Routes (none under ``/v1``; none carries a token in its path or query):

* ``GET /`` — the app shell (``static/index.html``); tokens travel in the URL
  fragment (``#t=<id>&k=<token>``), which a browser never sends.
* ``GET /web/<file>`` — the app's static files (revalidated by ETag), and the
  files the app factory hands to :func:`register`, made at serve time from the
  code (``patterns.json``: the rules core's pattern registry).
* ``GET /sw.js`` — the service worker, at the root so that its scope is the
  whole app; its first line names every shell file and a version hash of their
  contents, so any change of a file installs a new worker.
* ``POST /web/qr`` — ``{"text": "..."}`` → the QR code of ``text`` as SVG
  (rendered by :mod:`segno`); a POST so that the link, token included, never
  appears in a logged path or query.
* ``GET /docs/ui/<file>`` — the Swagger UI files shipped by the
  ``flask-swagger-ui`` package, for ``/docs`` (which flask-smorest renders).

Every file (the shell, the worker, the ``/docs`` assets) is sent gzipped to a
client that accepts it (``Accept-Encoding``), compressed once per file version
and kept in memory: ``Content-Encoding: gzip``, ``Vary: Accept-Encoding``, an
ETag of its own (``"<hash>-gzip"``), and conditional requests as for the plain
bytes (:meth:`werkzeug.wrappers.Response.make_conditional`).

Readings: the page's Content-Security-Policy allows its own origin only (no
external request of any kind can be made by the app, even by mistake); ``/docs``
keeps flask-smorest's page (it has an inline script) without that header.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.resources
import io
import mimetypes
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import orjson
from flask import Blueprint, Flask, Response, current_app, request
from werkzeug.exceptions import BadRequest, NotFound, UnprocessableEntity, UnsupportedMediaType
from werkzeug.security import safe_join

STATIC = Path(__file__).resolve().parent / "static"
WORKER = "worker.js"  # served as /sw.js (scope /), not under /web/
SWAGGER_UI_URL = "/docs/ui/"
MAX_QR_TEXT = 2048

CSP = "; ".join([
    "default-src 'self'", "script-src 'self'", "style-src 'self'", "img-src 'self' data: blob:",
    "connect-src 'self'", "manifest-src 'self'", "worker-src 'self'", "font-src 'self'",
    "object-src 'none'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
])
TYPES = {".webmanifest": "application/manifest+json", ".js": "text/javascript", ".json": "application/json",
         ".svg": "image/svg+xml", ".css": "text/css", ".html": "text/html", ".png": "image/png"}
COMPRESSIBLE = {"text/javascript", "application/javascript", "text/css", "text/html", "application/json",
                "application/manifest+json", "image/svg+xml", "text/plain"}
GZIP_FROM = 512  # bytes: a smaller file is sent as it is (gzip would save next to nothing)

blp = Blueprint("web", __name__)
GENERATED = "web_generated"
"""``app.extensions`` key of the files made from the code (name under ``/web/`` → text), see :func:`register`."""


def register(app: Flask, generated: Mapping[str, str] | None = None) -> None:
    """Serve the app, its assets and the /docs assets on ``app``; ``generated``: files made from the code
    at serve time (name → text, served under ``/web/`` as the static files are, and cached by the worker)."""
    app.extensions[GENERATED] = dict(generated or {})
    app.register_blueprint(blp)


def _generated() -> tuple[tuple[str, str], ...]:
    return tuple(sorted(current_app.extensions.get(GENERATED, {}).items()))


def _no_cache(response: Response) -> Response:
    response.headers["Cache-Control"] = "no-cache"
    return response


def _page_headers(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = CSP
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Content-Type-Options"] = "nosniff"
    return _no_cache(response)


def shell_files() -> list[str]:
    """The app's files, relative to ``static/`` (the worker itself excluded), sorted."""
    return sorted(p.relative_to(STATIC).as_posix() for p in STATIC.rglob("*")
                  if p.is_file() and p.name != WORKER and not p.name.startswith("."))


@lru_cache(maxsize=4)
def worker_source(generated: tuple[tuple[str, str], ...] = ()) -> str:
    """The service worker served as ``/sw.js``: ``self.SHELL`` (the app's files, the ``generated`` ones
    (name, text) among them, and a version, a hash of their contents) then ``worker.js`` (read once:
    ``worker_source.cache_clear()`` reads them again)."""
    digest = hashlib.sha256()
    for name in shell_files() + [WORKER]:
        digest.update(name.encode() + b"\0" + (STATIC / name).read_bytes())
    for name, text in generated:
        digest.update(name.encode() + b"\0" + text.encode())
    files = sorted(shell_files() + [name for name, _text in generated])
    shell = {"version": digest.hexdigest()[:16], "files": ["/"] + [f"/web/{n}" for n in files]}
    return f"self.SHELL = {orjson.dumps(shell).decode()};\n" + (STATIC / WORKER).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Body:
    """What a static response can send: the bytes, their gzip (None: not worth it) and their ETag."""

    raw: bytes
    gzipped: bytes | None
    etag: str


def _body(raw: bytes, mimetype: str) -> Body:
    squeeze = mimetype in COMPRESSIBLE and len(raw) >= GZIP_FROM
    return Body(raw, gzip.compress(raw, compresslevel=9, mtime=0) if squeeze else None,
                hashlib.sha256(raw).hexdigest()[:32])


@lru_cache(maxsize=256)
def _file_body(path: str, mimetype: str, mtime_ns: int, size: int) -> Body:
    """A file's :class:`Body`, read and compressed once per version of the file (its mtime and size)."""
    return _body(Path(path).read_bytes(), mimetype)


@lru_cache(maxsize=4)
def _text_body(text: str, mimetype: str) -> Body:
    return _body(text.encode(), mimetype)


def _send(body: Body, mimetype: str) -> Response:
    """``body`` gzipped when the client accepts gzip (and it is worth it), else as it is; either way
    with its own ETag, ``Vary: Accept-Encoding``, and an answer to If-None-Match."""
    squeezed = body.gzipped is not None and request.accept_encodings["gzip"] > 0
    response = Response(body.gzipped if squeezed else body.raw, mimetype=mimetype)
    if squeezed:
        response.content_encoding = "gzip"
    response.set_etag(f"{body.etag}-gzip" if squeezed else body.etag)
    response.vary.add("Accept-Encoding")
    response.make_conditional(request)  # in place (it returns the response itself, typed as werkzeug's)
    return response


def _send_file(directory: Path, filename: str, mimetype: str | None = None) -> Response:
    """The file ``filename`` under ``directory`` (404 for anything else, a path outside it included)."""
    path = safe_join(str(directory), filename)
    if path is None or not os.path.isfile(path):
        raise NotFound()
    mimetype = mimetype or mimetypes.guess_type(filename)[0] or "application/octet-stream"
    stat = os.stat(path)
    return _send(_file_body(path, mimetype, stat.st_mtime_ns, stat.st_size), mimetype)


@blp.route("/", methods=["GET"])
def index() -> Response:
    return _page_headers(_send_file(STATIC, "index.html", "text/html"))


@blp.route("/web/<path:filename>", methods=["GET"])
def asset(filename: str) -> Response:
    mimetype = TYPES.get(Path(filename).suffix)
    made = current_app.extensions.get(GENERATED, {}).get(filename)
    if made is not None:  # (made from the code at serve time: compressed once, as a file is)
        mimetype = mimetype or "application/octet-stream"
        response = _send(_text_body(made, mimetype), mimetype)
    else:
        response = _send_file(STATIC, filename, mimetype)
    response.headers["X-Content-Type-Options"] = "nosniff"
    return _no_cache(response)


@blp.route("/sw.js", methods=["GET"])
def service_worker() -> Response:
    response = _send(_text_body(worker_source(_generated()), "text/javascript"), "text/javascript")
    response.headers["X-Content-Type-Options"] = "nosniff"
    return _no_cache(response)


@blp.route("/web/qr", methods=["POST"])
def qr_code() -> Response:
    """The QR code of ``{"text": ...}`` as SVG (never cached: it may hold a token)."""
    import segno

    if not request.is_json:
        raise UnsupportedMediaType("send the text as application/json: {\"text\": \"...\"}")
    body = request.get_json(silent=True)
    if body is None:
        raise BadRequest("the body is not valid JSON")
    text = body.get("text") if isinstance(body, dict) else None
    if not isinstance(text, str) or not 1 <= len(text) <= MAX_QR_TEXT:
        raise UnprocessableEntity(f"'text' must be a string of 1-{MAX_QR_TEXT} characters")
    out = io.BytesIO()
    segno.make(text, error="m", micro=False).save(out, kind="svg", scale=4, border=2, xmldecl=False,
                                                   dark="#000", light="#fff", title="QR")
    response = Response(out.getvalue(), mimetype="image/svg+xml")
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


@lru_cache(maxsize=1)
def _swagger_dist() -> Path:
    return Path(str(importlib.resources.files("flask_swagger_ui") / "dist"))


@blp.route(SWAGGER_UI_URL + "<path:filename>", methods=["GET"])
def swagger_ui(filename: str) -> Response:
    """Swagger UI's own files, from the ``flask-swagger-ui`` package (no CDN)."""
    response = _send_file(_swagger_dist(), filename)
    response.cache_control.public = True
    response.cache_control.max_age = 86400
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response
