"""The Flask application factory.

``create_app(config)`` builds the app from :mod:`service.config` (the
environment) with ``config`` (a dict of Flask config keys) on top, then

* installs the request-id / access-log / metrics hooks (:mod:`.observe`);
* installs the one error handler (:mod:`.problems`);
* registers the blueprints with flask-smorest, which generates the OpenAPI
  3.1 document served at ``/openapi.json`` (Swagger UI at ``/docs``);
* registers the companion app (:mod:`service.web`) at ``/``;
* sets ``app.extensions["readiness_checks"]`` (a list) for ``/readyz``.

>>> app = create_app({"TESTING": True})
>>> app.test_client().get("/healthz").get_json()
{'status': 'ok'}
"""

from __future__ import annotations

from functools import partial
from typing import Any, Mapping

from flask import Flask

from .. import web
from ..config import load_settings
from . import hands, observe, ops, problems, rounds, stream, tables
from .schemas import DocumentedField
from .smorest import Api

API_TITLE = "Sichuan mahjong scoring service"
API_VERSION = "1.0.0"

API_DESCRIPTION = """\
Rules engine for Sichuan (血战到底) mahjong: hand validation, ting and
discard advice, scoring, round settlement. The rules are those of RULES.md.

* Every request and response body is JSON; a POST body must be sent as
  `application/json` (else 415) and be at most `MAX_BODY_BYTES` (64 KiB by
  default; else 413).
* Every error is RFC 9457 `application/problem+json` with `type`, `title`,
  `status`, `detail`, `code` (a stable id), `instance` and `request_id`;
  schema errors add `errors` (field path → messages); a settlement error adds
  `event` (the index of the event that cannot happen). Malformed JSON is 400,
  JSON that breaks the schema or a rule is 422.
* `X-Request-ID` (`^[A-Za-z0-9._-]{1,128}$`) is echoed on every response; an
  absent or invalid one is replaced by a generated id.
"""

DEFAULTS: dict[str, Any] = {
    "API_TITLE": API_TITLE,
    "API_VERSION": API_VERSION,
    "OPENAPI_VERSION": "3.1.0",
    "OPENAPI_URL_PREFIX": "/",
    "OPENAPI_JSON_PATH": "openapi.json",
    "OPENAPI_SWAGGER_UI_PATH": "/docs",
    "OPENAPI_SWAGGER_UI_URL": web.SWAGGER_UI_URL,  # Swagger UI from an installed package, no CDN
    "OPENAPI_SWAGGER_UI_CONFIG": {"validatorUrl": None},  # no call to the online validator
    "API_SPEC_OPTIONS": {
        "info": {
            "description": API_DESCRIPTION,
            "license": {"name": "MIT", "identifier": "MIT"},
        },
    },
}


class ServiceFlask(Flask):
    """Flask without the per-call coroutine check: no view or hook here is async."""

    def ensure_sync(self, func):  # type: ignore[override]
        return func


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """Build the application; ``config`` overrides the environment's settings."""
    app = ServiceFlask("service.api")
    app.config.update(DEFAULTS)
    app.config.update(load_settings().flask_config())
    if config:
        app.config.update(config)
    # "/v1//tables" is not "/v1/tables": no 308 redirect (an HTML page) for merged slashes
    app.url_map.merge_slashes = False
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.json.ensure_ascii = False  # type: ignore[attr-defined]  (input surrogates are rejected)

    app.extensions["readiness_checks"] = []
    observe.install(app)
    problems.register(app)

    api = Api(app)
    api.register_field(DocumentedField, None, None)
    api.ma_plugin.converter.add_attribute_function(_documented_field)
    for blueprint in (hands.blp, rounds.blp, tables.blp, stream.blp, ops.blp):
        api.register_blueprint(blueprint)
    tables.document(api)
    web.register(app)  # the companion app at / and the /docs assets
    _install_store(app)
    # flask-smorest's pagination schema is not used by this API
    api.spec.components.schemas.pop("PaginationMetadata", None)
    app.extensions["api"] = api
    return app


def _install_store(app: Flask) -> None:
    """The tables store on ``REDIS_URL`` (absent: the tables API answers 503)."""
    url = app.config.get("REDIS_URL")
    if not url:
        return
    import redis

    from ..store.tables import TableStore

    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=1,
                                  health_check_interval=10)
    app.extensions["redis"] = client
    app.extensions["tables"] = TableStore(
        client, table_ttl=app.config.get("TABLE_TTL", 0), max_events=app.config.get("MAX_TABLE_EVENTS", 0),
    )

    def redis_ping() -> None:
        client.ping()

    ops.register_readiness_check(app, redis_ping, "redis")
    _install_limits(app, url)


def _install_limits(app: Flask, url: str) -> None:
    """``TABLES_PER_HOUR``: tables one client (address) may create per hour (Flask-Limiter on Redis).

    Over the limit: 429 problem with ``Retry-After``.  If Redis cannot be asked,
    the limit is not enforced (the store's own 503 follows).
    """
    per_hour = app.config.get("TABLES_PER_HOUR", 0)
    if not per_hour:
        return
    from flask_limiter import Limiter
    from flask_limiter.util import get_remote_address

    @app.after_request
    def _retry_after_only_when_refused(response):
        # Flask-Limiter adds Retry-After to every response; it means something only on 429/503.
        # (Registered before the limiter, so it runs after the limiter's own hook.)
        if response.status_code not in (429, 503):
            response.headers.pop("Retry-After", None)
        return response

    limiter = Limiter(
        get_remote_address, app=app, storage_uri=url,
        storage_options={"socket_timeout": 2, "socket_connect_timeout": 1},
        strategy="moving-window", key_prefix="rl", headers_enabled=True, swallow_errors=True,
    )
    endpoint = "tables.create_table"
    app.view_functions[endpoint] = limiter.limit(
        f"{per_hour}/hour", methods=["POST"], exempt_when=_is_create_replay,
    )(app.view_functions[endpoint])
    _scope_to_blueprint(app, limiter, "tables")
    app.extensions["limiter"] = limiter


def _is_create_replay() -> bool:
    """A retried table creation (its Idempotency-Key already made a table from this very
    request) replays the first response: it creates nothing, so it does not count against
    the limit.  The same key with another body counts (it could be guessing)."""
    from flask import current_app

    store = current_app.extensions.get("tables")
    if store is None:
        return False
    try:
        key = tables.creation_key()
        return key is not None and store.is_creation_replay(key, tables.creation_fingerprint())
    except Exception:  # not a valid key (the view refuses it) or Redis trouble (503 follows): counted
        return False


def _scope_to_blueprint(app: Flask, limiter: Any, blueprint: str) -> None:
    """Run Flask-Limiter's request hooks for one blueprint only.

    Flask-Limiter hooks every request of the app; its bookkeeping costs about
    100 µs a request even where no limit applies (the stateless hand endpoints,
    the hot path).  The only limit is on creating tables, so its hooks move to
    the ``tables`` blueprint.  (If a Flask-Limiter release changes its hooks,
    nothing moves: the limit still holds, only slower.)
    """
    def owned(func: Any) -> bool:
        return getattr(func, "__self__", None) is limiter or (
            isinstance(func, partial) and bool(func.args) and func.args[0] is limiter
        )

    for hooks in (app.before_request_funcs, app.after_request_funcs, app.teardown_request_funcs):
        mine = [f for f in hooks.get(None, []) if owned(f)]
        if mine:
            hooks[None] = [f for f in hooks[None] if not owned(f)]
            hooks.setdefault(blueprint, []).extend(mine)


def _documented_field(self, field, **kwargs) -> dict:
    """apispec attribute function: a DocumentedField gives its own schema."""
    if isinstance(field, DocumentedField):
        return field.openapi(self)
    return {}


def openapi_dict(app: Flask | None = None) -> dict:
    """The OpenAPI document as a dict."""
    app = app or create_app({"TESTING": True})
    with app.app_context():
        spec = app.extensions["api"].spec.to_dict()
    order = ("openapi", "info", "tags", "paths", "components")
    return {**{k: spec[k] for k in order if k in spec}, **{k: v for k, v in spec.items() if k not in order}}


def openapi_yaml(app: Flask | None = None) -> str:
    """The OpenAPI document as YAML (multi-line strings as literal blocks)."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return yaml.dump(openapi_dict(app), Dumper=Dumper, sort_keys=False, allow_unicode=True, width=100)
