"""Who is calling: API keys, the client address behind trusted proxies, CORS.

* **API keys** (``API_KEYS``, see :class:`service.config.ApiKeys`): when set,
  every ``/v1/`` request needs ``X-API-Key: <key>`` (401 problem+json
  ``api_key_required`` without one, ``api_key_invalid`` for an unknown one),
  except a request to one table (``/v1/tables/{id}...``) that carries its table
  token (``Authorization: Bearer``), or to one club (``/v1/clubs/{id}...``)
  with its club token: the phones at a table hold only its tokens.  A key sent along with a table token is
  checked all the same.  The
  key's name is ``g.api_key``; rate limits then count per key and
  ``GET /v1/tables`` lists the key's tables.  Only the keys' SHA-256 digests
  are kept.
* **The client** (:func:`client_key`) for the per-client rate limits: the API
  key's name when one was given, else the client address.
* **Trusted proxies** (``TRUSTED_PROXIES``, ``PROXY_HEADER``): the client
  address is taken from ``X-Forwarded-For`` (or ``Forwarded``) only when the
  request came through them: a count ``n`` of proxies in front (Werkzeug's
  ``ProxyFix``), or CIDRs that the peer and each skipped hop must be in.
  Unset: the headers are ignored and the peer is the client.
* **CORS** (``CORS_ORIGINS``, flask-cors): browsers on those origins may call
  the API (preflights for the headers below; the response headers a client
  needs are exposed).
* **Metrics per API key**: ``mahjong_api_key_requests_total{api_key,endpoint,status}``,
  whose ``api_key`` is a configured name (``-``: none given), so its label set
  is bounded by the configuration.

>>> client_for_forwarded("for=192.0.2.60;proto=http, for=\\"[2001:db8::17]:4711\\"")
['192.0.2.60', '2001:db8::17']
"""

from __future__ import annotations

import ipaddress
from typing import Any

from flask import Flask, g, request

from ..config import TrustedProxies
from . import settings
from .problems import ApiProblem

API_KEY_HEADER = "X-API-Key"
CORS_REQUEST_HEADERS = ("Authorization", "Content-Type", "If-Match", "If-None-Match", "Idempotency-Key",
                        API_KEY_HEADER, "X-Request-ID", "Last-Event-ID")
CORS_EXPOSED_HEADERS = ("ETag", "Location", "Retry-After", "X-Request-ID", "Idempotent-Replayed", "Content-Disposition",
                        "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")


class ApiKeyRequired(ApiProblem):
    status, code, title = 401, "api_key_required", "API key required"


class ApiKeyInvalid(ApiProblem):
    status, code, title = 401, "api_key_invalid", "Invalid API key"


_CHALLENGE = {"WWW-Authenticate": f'ApiKey header="{API_KEY_HEADER}"'}


def install(app: Flask) -> None:
    """API keys, trusted proxies, CORS and per-key metrics, each only when configured."""
    s = settings.current(app)
    keys = s.api_keys
    app.extensions["api_keys"] = keys
    if keys:
        app.before_request_funcs.setdefault(None, []).insert(1, _check_api_key)  # after the request id
        app.after_request(_count_per_key)

    proxies = s.trusted_proxies
    if proxies:
        app.wsgi_app = proxy_middleware(app.wsgi_app, proxies)  # type: ignore[method-assign]

    origins = s.cors_origins
    if origins:
        from flask_cors import CORS

        CORS(app, resources={r"/v1/*": {}, r"/openapi.json": {}}, origins=list(origins),
             allow_headers=list(CORS_REQUEST_HEADERS), expose_headers=list(CORS_EXPOSED_HEADERS),
             methods=["GET", "POST", "PATCH", "DELETE", "OPTIONS"], max_age=600, vary_header=True)


def _check_api_key() -> None:
    if request.method == "OPTIONS" or not request.path.startswith("/v1/"):
        return
    given = request.headers.get(API_KEY_HEADER)
    if given is None:
        auth = request.authorization
        if auth is not None and auth.type == "bearer" and request.path.startswith(("/v1/tables/", "/v1/clubs/")):
            return  # a table's (or a club's) own token
        raise ApiKeyRequired(f"this service needs '{API_KEY_HEADER}: <key>' (or a table's token for a table)",
                             headers=_CHALLENGE)
    from flask import current_app

    name = current_app.extensions["api_keys"].name_of(given)
    if name is None:
        raise ApiKeyInvalid(f"the {API_KEY_HEADER} is not a key of this service", headers=_CHALLENGE)
    g.api_key = name


def api_key() -> str | None:
    """The name of the API key the request gave (None: none, or keys are off)."""
    return g.get("api_key")


def client_key() -> str:
    """Who the per-client rate limits count: the API key's name, else the client address."""
    name = g.get("api_key")
    return f"key:{name}" if name else f"addr:{request.remote_addr or '-'}"


# -- metrics per API key ---------------------------------------------------------------
_PER_KEY = None


def _per_key_counter():
    global _PER_KEY
    if _PER_KEY is None:
        from prometheus_client import Counter

        _PER_KEY = Counter("mahjong_api_key_requests", "HTTP requests by API key name (- for none), "
                           "endpoint (URL rule) and status.", ["api_key", "endpoint", "status"])
    return _PER_KEY


def _count_per_key(response):
    rule = request.url_rule.rule if request.url_rule is not None else "<unmatched>"
    count_per_key(g.get("api_key"), rule, response.status_code)
    return response




def count_per_key(name: str | None, rule: str, status: int) -> None:
    """Count a request in ``mahjong_api_key_requests_total`` (``-``: no key given)."""
    _per_key_counter().labels(name or "-", rule, str(status)).inc()


# -- trusted proxies -----------------------------------------------------------------------
def proxy_middleware(wsgi_app: Any, proxies: TrustedProxies) -> Any:
    """Wrap ``wsgi_app`` so that ``REMOTE_ADDR`` is the client behind ``proxies``."""
    if proxies.count and proxies.header == "x-forwarded-for":
        from werkzeug.middleware.proxy_fix import ProxyFix

        return ProxyFix(wsgi_app, x_for=proxies.count, x_proto=0)
    return _ForwardedFor(wsgi_app, proxies)


class _ForwardedFor:
    """The client address from ``X-Forwarded-For`` / ``Forwarded`` by trusted CIDRs (or a count)."""

    def __init__(self, app: Any, proxies: TrustedProxies) -> None:
        self.app, self.proxies = app, proxies
        self.environ_key = "HTTP_FORWARDED" if proxies.header == "forwarded" else "HTTP_X_FORWARDED_FOR"

    def __call__(self, environ: dict, start_response: Any) -> Any:
        peer = environ.get("REMOTE_ADDR", "")
        raw = environ.get(self.environ_key)
        if raw:
            hops = client_for_forwarded(raw) if self.environ_key == "HTTP_FORWARDED" else \
                [h.strip() for h in raw.split(",") if h.strip()]
            client = self.client(peer, hops)
            if client:
                environ["service.peer_addr"] = peer
                environ["REMOTE_ADDR"] = client
        return self.app(environ, start_response)

    def client(self, peer: str, hops: list[str]) -> str | None:
        if self.proxies.count:
            return hops[-self.proxies.count] if len(hops) >= self.proxies.count else None
        if not self.trusted(peer):
            return None
        for hop in reversed(hops):
            if not self.trusted(hop):
                return hop if _is_ip(hop) else None
        return hops[0] if hops and _is_ip(hops[0]) else None

    def trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in self.proxies.networks)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def client_for_forwarded(header: str) -> list[str]:
    """The ``for=`` addresses of an RFC 7239 ``Forwarded`` header, in order (ports and brackets dropped)."""
    out = []
    for element in header.split(","):
        for pair in element.split(";"):
            name, _, value = pair.strip().partition("=")
            if name.strip().lower() != "for":
                continue
            value = value.strip().strip('"')
            if value.startswith("["):
                value = value[1:value.find("]")] if "]" in value else value[1:]
            elif value.count(":") == 1:
                value = value.split(":")[0]
            out.append(value)
    return out
