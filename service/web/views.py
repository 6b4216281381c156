"""The blueprint that serves the companion app, its QR codes and the ``/docs`` assets.

Routes (none under ``/v1``; none carries a token in its path or query):

* ``GET /`` — the app shell (``static/index.html``); tokens travel in the URL
  fragment (``#t=<id>&k=<token>``), which a browser never sends.
* ``GET /web/<file>`` — the app's static files (revalidated by ETag).
* ``GET /sw.js`` — the service worker, at the root so that its scope is the
  whole app; its first line names every shell file and a version hash of their
  contents, so any change of a file installs a new worker.
* ``POST /web/qr`` — ``{"text": "..."}`` → the QR code of ``text`` as SVG
  (rendered by :mod:`segno`); a POST so that the link, token included, never
  appears in a logged path or query.
* ``GET /docs/ui/<file>`` — the Swagger UI files shipped by the
  ``flask-swagger-ui`` package, for ``/docs`` (which flask-smorest renders).

Readings: the page's Content-Security-Policy allows its own origin only (no
external request of any kind can be made by the app, even by mistake); ``/docs``
keeps flask-smorest's page (it has an inline script) without that header.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import io
from functools import lru_cache
from pathlib import Path

import orjson
from flask import Blueprint, Flask, Response, request, send_from_directory
from werkzeug.exceptions import BadRequest, UnprocessableEntity, UnsupportedMediaType

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

blp = Blueprint("web", __name__)


def register(app: Flask) -> None:
    """Serve the app, its assets and the /docs assets on ``app``."""
    app.register_blueprint(blp)


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


@lru_cache(maxsize=1)
def worker_source() -> str:
    """The service worker served as ``/sw.js``: ``self.SHELL`` (the app's files and a version, a hash of
    their contents) then ``worker.js`` (read once: ``worker_source.cache_clear()`` reads them again)."""
    digest = hashlib.sha256()
    for name in shell_files() + [WORKER]:
        digest.update(name.encode() + b"\0" + (STATIC / name).read_bytes())
    shell = {"version": digest.hexdigest()[:16], "files": ["/"] + [f"/web/{n}" for n in shell_files()]}
    return f"self.SHELL = {orjson.dumps(shell).decode()};\n" + (STATIC / WORKER).read_text(encoding="utf-8")


@blp.route("/", methods=["GET"])
def index() -> Response:
    response = send_from_directory(STATIC, "index.html", mimetype="text/html")
    return _page_headers(response)


@blp.route("/web/<path:filename>", methods=["GET"])
def asset(filename: str) -> Response:
    mimetype = TYPES.get(Path(filename).suffix)
    response = send_from_directory(STATIC, filename, mimetype=mimetype)
    response.headers["X-Content-Type-Options"] = "nosniff"
    return _no_cache(response)


@blp.route("/sw.js", methods=["GET"])
def service_worker() -> Response:
    response = Response(worker_source(), mimetype="text/javascript")
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
    response = send_from_directory(_swagger_dist(), filename, max_age=86400)
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response
