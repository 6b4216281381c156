"""The Flask application factory.

``create_app(config)`` builds the app from :mod:`service.config` (the
environment) with ``config`` on top (the settings' variables by name, typed or as
text: :meth:`~service.config.Settings.with_config`; other keys are Flask's), keeps
the resulting :class:`~service.config.Settings` for the layer to read
(:func:`service.api.settings.current`), then

* installs the request-id / access-log / metrics hooks (:mod:`.observe`);
* installs one error handler per exception family (:mod:`.problems`);
* installs API keys, trusted proxies and CORS when configured (:mod:`.callers`);
* registers the blueprints with flask-smorest, which generates the OpenAPI
  3.1 document served at ``/openapi.json`` (Swagger UI at ``/docs``);
* connects the tables and clubs stores and the rate limits (:mod:`.rate_limits`) when
  ``REDIS_URL`` is set;
* registers the companion app (:mod:`service.web`) at ``/``;
* sets ``app.extensions["readiness_checks"]`` (a list) for ``/readyz``.

>>> app = create_app({"TESTING": True})
>>> app.test_client().get("/healthz").get_json()
{'status': 'ok'}
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import metadata
from typing import Any

from flask import Flask

from .. import web
from ..config import ENVIRONMENT, Settings, load_settings
from ..rules import patterns
from . import batch, callers, clubs, hands, observe, ops, problems, rate_limits, rounds, stream, table_views, webhooks
from . import settings as app_settings
from .contract import ContractPlugin
from .jsonio import JsonProvider
from .schemas import ENUM_DESCRIPTIONS, ENUMS_DOC, DocumentedField
from .smorest import Api

API_TITLE = "Sichuan mahjong scoring service"
PACKAGE = "sichuan-mahjong-service"


def package_version() -> str:
    """The installed package's version (``pyproject.toml``): the document's ``info.version``."""
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0.0.0"


API_DESCRIPTION = """\
Rules engine for Sichuan (血战到底) mahjong: hand validation, ting and
discard advice, scoring, round settlement, and a live log per table. The
rules, a glossary, the tile notation and an example of every event are in
the project's `docs/` (start at `docs/index.md`).

* Every request and response body is JSON; a POST body must be sent as
  `application/json` (else 415) and be at most `MAX_BODY_BYTES` (64 KiB by
  default; else 413).
* Every error is RFC 9457 `application/problem+json` with `type` (the URL of
  a page describing the code: `{PUBLIC_URL or the request's origin}/problems/{code}`),
  `title`, `status`, `detail`, `code` (a stable id), `instance` and `request_id`;
  schema errors add `errors` (field path → messages; a query parameter as
  `query.<name>`, a header by its name); a settlement error adds
  `event` (the index of the event that cannot happen). Malformed JSON is 400,
  JSON that breaks the schema or a rule is 422.
* `X-Request-ID` (`^[A-Za-z0-9._-]{1,128}$`) is echoed on every response; an
  absent or invalid one is replaced by a generated id.
* Tables: `Authorization: Bearer <token>`. Each operation's security says
  whether it takes the read token (`read`: either token) or needs the write
  token (`write`).
* API keys: a service started with `API_KEYS` needs `X-API-Key` on every
  `/v1/` call that carries no table token (401 without a valid one); rate
  limits then count per key, and `GET /v1/tables` lists the key's tables.
* Rate limits (429 with `Retry-After`): tables created per hour, events, voids
  and reads per minute, per client (the API key, else the address) and per
  table.
"""

TAGS = [
    {"name": "hands", "description": "Validate, ting, discard advice and scoring of one hand."},
    {"name": "rounds", "description": "Settling a round from its events."},
    {"name": "batch", "description": "Many items in one request, JSON or NDJSON."},
    {"name": "rulesets", "description": "The rule presets and their fields."},
    {"name": "tables", "description": "The live table log: rounds, events, balances, undo."},
    {"name": "clubs", "description": "A club's season: players, seasons, tables, standings, a rating."},
    {"name": "webhooks", "description": "Signed notifications of an API key's tables, sent to its backend."},
    {"name": "ops", "description": "Health, readiness, metrics, and the pages of the problems' codes."},
]

DEFAULTS: dict[str, Any] = {
    "API_TITLE": API_TITLE,
    "API_VERSION": package_version(),
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
        "servers": [
            {"url": "/", "description": "the service that serves this document"},
            {"url": "http://127.0.0.1:8000", "description": "`python -m service serve` on this machine"},
        ],
    },
}


class ServiceFlask(Flask):
    """Flask with orjson behind ``jsonify`` and ``get_json`` (:mod:`.jsonio`)."""

    json_provider_class = JsonProvider


def create_app(config: Mapping[str, Any] | None = None, settings: Settings | None = None) -> Flask:
    """Build the application from ``settings`` (default: the environment's); ``config`` overrides."""
    app = ServiceFlask("service.api")
    config = dict(config or {})
    typed = (settings or load_settings()).with_config(config)
    app.config.update(DEFAULTS)
    app.config.update({k: v for k, v in config.items() if k not in ENVIRONMENT and k != "MAX_CONTENT_LENGTH"})
    app.config.update(typed.flask_config())
    app.extensions[app_settings.KEY] = typed
    # "/v1//tables" is not "/v1/tables": no 308 redirect (an HTML page) for merged slashes
    app.url_map.merge_slashes = False

    app.extensions["readiness_checks"] = []
    observe.install(app)
    callers.install(app)

    api = Api(app, spec_kwargs={"tags": TAGS, "extra_plugins": [ContractPlugin()]})
    problems.register(app)  # (after the Api: its handlers are the ones that answer)
    api.register_field(DocumentedField, None, None)
    api.ma_plugin.converter.add_attribute_function(_documented_field)
    for name, values in ENUMS_DOC.items():
        api.spec.components.schema(name, component={
            "type": "string", "enum": list(values), "description": ENUM_DESCRIPTIONS[name]})
    for blueprint in (hands.blp, rounds.blp, batch.blp, rounds.rulesets_blp, table_views.blp, stream.blp,
                      clubs.blp, webhooks.blp, ops.blp):
        api.register_blueprint(blueprint)
    table_views.document(api)
    clubs.document(api)
    batch.document(api)
    web.register(app, {"patterns.json": patterns.as_json()})  # the companion app at / and the /docs assets
    _install_store(app)
    # flask-smorest's pagination and error schemas are not used by this API
    for unused in ("PaginationMetadata", "Error"):
        api.spec.components.schemas.pop(unused, None)
    app.extensions["api"] = api
    return app


def _install_store(app: Flask) -> None:
    """The tables store on ``REDIS_URL`` (absent: the tables API answers 503).

    One client (:func:`service.store.redis_client.connect`) for the store, the
    readiness check and (on a plain server) the rate limiter's connections.
    """
    s = app_settings.current(app)
    url = s.redis_url
    if not url:
        return
    from ..store import redis_client
    from ..store.table_store import TableStore

    wait_ms = s.redis_wait_timeout_ms
    client = redis_client.connect(url, socket_timeout=max(redis_client.SOCKET_TIMEOUT, wait_ms / 1000 + 1))
    app.extensions["redis"] = client
    app.extensions["tables"] = TableStore(
        client, table_ttl=s.table_ttl, max_events=s.max_table_events, min_replicas=s.redis_min_replicas,
        wait_timeout_ms=wait_ms, events_per_minute=s.table_events_per_minute,
        voids_per_minute=s.table_voids_per_minute, webhooks=s.webhooks,
        eviction_check_seconds=s.eviction_check_seconds,
    )
    from ..store.clubs import ClubStore

    app.extensions["clubs"] = ClubStore(client, app.extensions["tables"], webhooks=s.webhooks,
                                        min_replicas=s.redis_min_replicas, wait_timeout_ms=wait_ms)
    if s.api_keys and s.webhooks:  # (webhooks belong to API keys)
        from ..webhooks.metrics import OutboxFigures
        from ..webhooks.registry import Registry

        app.extensions["webhooks"] = Registry(client, s.api_keys.digests(), allow_private=s.webhook_allow_private)
        app.extensions.setdefault(ops.METRICS_COLLECTORS, []).append(OutboxFigures(client))

    min_replicas = s.redis_min_replicas

    def redis_ready() -> str | None:
        return redis_client.check_ready(client, min_replicas)

    ops.register_readiness_check(app, redis_ready, "redis")
    try:  # at start: say at once what would make the service refuse (it starts anyway, not ready)
        policy = redis_client.evicting(client)
        if policy is not None:
            app.logger.error("Redis at REDIS_URL may evict keys when full (maxmemory-policy %s), which would lose "
                             "acknowledged writes: every write to a table is refused (503 store_evicting) until its "
                             "maxmemory-policy is noeviction", policy)
        redis_client.check_ready(client, min_replicas)
    except redis_client.NotReady as exc:
        app.logger.error("Redis at REDIS_URL is not ready: %s", exc)
    except Exception as exc:  # noqa: BLE001 - not reachable yet: /readyz says so until it is
        app.logger.warning("Redis at REDIS_URL does not answer yet (%s)", type(exc).__name__)
    rate_limits.install(app, client, url)


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
    for item in spec.get("paths", {}).values():
        for operation in item.values():
            if isinstance(operation, dict) and "responses" in operation:
                responses = operation["responses"]
                operation["responses"] = {k: responses[k] for k in sorted(responses, key=_status_order)}
    order = ("openapi", "info", "tags", "paths", "components")
    return {**{k: spec[k] for k in order if k in spec}, **{k: v for k, v in spec.items() if k not in order}}


def _status_order(status: str) -> tuple[int, str]:
    return (int(status), "") if status.isdigit() else (1000, status)


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
