"""The table companion app: the phones at a physical table, served at ``/``.

A client of the public HTTP API only.  This package is static files
(``static/``: ES modules, CSS, the tiles drawn as SVG by ``tiles.js``, a web
manifest, a service worker) and one Flask blueprint (:mod:`.views`) that serves
them, renders QR codes (``POST /web/qr``, by :mod:`segno`) and serves the
Swagger UI assets of ``/docs`` from an installed package (never a CDN).

Nothing here imports the rules core, the store or the API: the page learns
everything through ``/v1/...`` like any other client.

>>> from flask import Flask
>>> app = Flask("demo")
>>> register(app)
>>> client = app.test_client()
>>> client.get("/").headers["Content-Type"]
'text/html; charset=utf-8'
>>> client.post("/web/qr", json={"text": "http://127.0.0.1:8000/#t=1"}).mimetype
'image/svg+xml'
"""

from .views import SWAGGER_UI_URL, blp, register

__all__ = ["SWAGGER_UI_URL", "blp", "register"]
