"""Settings of the service, read from the environment in this one place.

Every variable is optional; the table of them (``HOST``, ``PORT``,
``WORKERS``, ``TIMEOUT``, ``KEEPALIVE``, ``LOG_LEVEL``,
``MAX_BODY_BYTES``, ``REDIS_URL``, the API keys, proxies, CORS, the rate
limits, ...) is in :mod:`service.__main__` (``PROMETHEUS_MULTIPROC_DIR`` is
read where it is used, by :func:`service.serving.metrics_dir`).  ``python -m
service serve`` options override the matching variable
(:meth:`Settings.with_overrides`); :func:`service.api.app.create_app` takes
overrides by variable name on top of these (:meth:`Settings.with_config`) and
keeps the result, typed, for the HTTP layer (:func:`service.api.settings.current`):
a setting is read as a :class:`Settings` field everywhere, its default stated
once, here.

``API_KEYS`` is parsed into :class:`ApiKeys`, which keeps only the keys'
SHA-256 digests:

>>> keys = ApiKeys.parse("acme=" + "k" * 32)
>>> keys.name_of("k" * 32), keys.name_of("x" * 32), "k" * 32 in repr(keys)
('acme', None, False)

>>> s = Settings.from_env({"PORT": "9000", "LOG_LEVEL": "debug"})
>>> s.port, s.log_level, s.workers
(9000, 'DEBUG', 2)
>>> Settings.from_env({"WORKERS": "0"})
Traceback (most recent call last):
...
service.config.ConfigError: WORKERS must be an integer from 1 to 64; got '0'
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
MIN_API_KEY_CHARS = 32
API_KEY_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_HASHED = re.compile(r"sha256:([0-9a-f]{64})")
PROXY_HEADERS = ("x-forwarded-for", "forwarded")
TURN_SECONDS = 1e-6
"""How long a request gives up its worker to let the worker's other requests have their turn (after each
request on a kept-alive connection, between two pieces of a batch): any time above 0.  Under gevent the
greenlet then resumes only after the event loop's next poll for I/O; a sleep of 0 may resume it before the
loop cycles (gevent's ``sleep``), so that connections waiting for their request to be read get no turn."""

# Rate limits: setting → (variable, default, what it counts).  "client" limits count
# per API key when keys are on (and can be set per key), per client address otherwise.
LIMITS: dict[str, tuple[str, int, str]] = {
    "tables_per_hour": ("TABLES_PER_HOUR", 60, "tables one client may create per hour"),
    "client_events_per_minute": ("CLIENT_EVENTS_PER_MINUTE", 600, "events one client may post per minute"),
    "client_voids_per_minute": ("CLIENT_VOIDS_PER_MINUTE", 60, "voids one client may post per minute"),
    "client_reads_per_minute": ("CLIENT_READS_PER_MINUTE", 3000,
                                "table reads (a table, its events, the list of tables) one client may make per minute"),
    "table_events_per_minute": ("TABLE_EVENTS_PER_MINUTE", 120, "events one table may take per minute"),
    "table_voids_per_minute": ("TABLE_VOIDS_PER_MINUTE", 20, "voids one table may take per minute"),
    "table_reads_per_minute": ("TABLE_READS_PER_MINUTE", 600, "reads of one table (and its events) per minute"),
    "client_batch_items_per_minute": ("CLIENT_BATCH_ITEMS_PER_MINUTE", 600_000,
                                      "batch items (POST /v1/batch, JSON or NDJSON) one client may send per minute"),
    "client_webhook_calls_per_minute": ("CLIENT_WEBHOOK_CALLS_PER_MINUTE", 600,
                                        "requests to /v1/webhooks one client (an API key) may make per minute"),
    "client_webhook_sends_per_minute": ("CLIENT_WEBHOOK_SENDS_PER_MINUTE", 60,
                                        "requests one client (an API key) may make per minute that send a message out "
                                        "at once (a webhook's test, a redelivery)"),
}
CLIENT_LIMITS = tuple(name for name in LIMITS if not name.startswith("table_"))
NO_LIMITS = {var: "0" for var, _, _ in LIMITS.values()}
"""Environment turning every rate limit off (load tests from one address)."""


class ConfigError(ValueError):
    """An environment variable (or option) with a value the service cannot use."""


# integer settings: (environment variable, lowest, highest), checked for the
# environment and for command-line overrides alike
BOUNDS: dict[str, tuple[str, int, int]] = {
    "port": ("PORT", 0, 65535),
    "workers": ("WORKERS", 1, 64),
    "timeout": ("TIMEOUT", 1, 3600),
    "keepalive": ("KEEPALIVE", 0, 3600),
    "request_timeout": ("REQUEST_TIMEOUT", 1, 3600),
    "max_connections": ("MAX_CONNECTIONS", 16, 100_000),
    "stream_heartbeat": ("STREAM_HEARTBEAT", 1, 15),
    "stream_buffer": ("STREAM_BUFFER", 1, 10_000),
    "stream_max_per_table": ("STREAM_MAX_PER_TABLE", 1, 100_000),
    "max_body_bytes": ("MAX_BODY_BYTES", 1024, 16 * 1024 * 1024),
    "batch_max_items": ("BATCH_MAX_ITEMS", 1, 1_000_000),
    "max_batch_bytes": ("MAX_BATCH_BYTES", 1024, 256 * 1024 * 1024),
    "table_ttl": ("TABLE_TTL", 0, 10 * 365 * 24 * 3600),
    "max_table_events": ("MAX_TABLE_EVENTS", 0, 10_000_000),
    "tables_per_hour": ("TABLES_PER_HOUR", 0, 1_000_000),
    **{name: (var, 0, 10_000_000) for name, (var, _, _) in LIMITS.items() if name != "tables_per_hour"},
    "redis_min_replicas": ("REDIS_MIN_REPLICAS", 0, 16),
    "redis_wait_timeout_ms": ("REDIS_WAIT_TIMEOUT_MS", 1, 10_000),
    "eviction_check_seconds": ("EVICTION_CHECK_SECONDS", 0, 3600),
    "webhook_timeout": ("WEBHOOK_TIMEOUT", 1, 60),
    "webhook_retry_seconds": ("WEBHOOK_RETRY_SECONDS", 1, 7 * 24 * 3600),
    "webhook_backoff_ms": ("WEBHOOK_BACKOFF_MS", 10, 3_600_000),
    "webhook_concurrency": ("WEBHOOK_CONCURRENCY", 1, 1024),
    "webhook_sweep_seconds": ("WEBHOOK_SWEEP_SECONDS", 1, 3600),
}
FLAGS: dict[str, str] = {
    "webhooks": "WEBHOOKS",
    "webhook_dispatcher": "WEBHOOK_DISPATCHER",
    "webhook_allow_private": "WEBHOOK_ALLOW_PRIVATE",
}
"""On/off settings: ``1``, ``true``, ``yes``, ``on`` or ``0``, ``false``, ``no``, ``off`` (any case)."""


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class ApiKeys:
    """The configured API keys, by the SHA-256 digest of the key (the keys themselves are not kept).

    ``API_KEYS`` is ``name=key`` entries separated by commas; a key has at least
    32 characters (``python -m service api-key new NAME`` makes one), or is given
    as ``sha256:<hex digest>`` so that not even the environment holds it.
    ``API_KEY_LIMITS`` sets client limits per key: ``name:SETTING=value``
    entries separated by commas (``acme:TABLES_PER_HOUR=600``).
    """

    names: Mapping[str, str] = field(default_factory=dict)       # digest → name
    limits: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # name → setting → value

    def __bool__(self) -> bool:
        return bool(self.names)

    def __repr__(self) -> str:
        return f"ApiKeys({sorted(self.names.values())})"

    def digests(self) -> dict[str, str]:
        """Each key's name → the SHA-256 digest (hex) of the key (what seals its webhooks' secrets)."""
        return {name: digest for digest, name in self.names.items()}

    def name_of(self, key: str) -> str | None:
        """The name of the API key ``key``, or None."""
        return self.names.get(hash_api_key(key))

    def limit(self, name: str | None, setting: str, default: int) -> int:
        if name is None:
            return default
        return self.limits.get(name, {}).get(setting, default)

    @classmethod
    def parse(cls, text: str | None, limits: str | None = None) -> ApiKeys:
        names: dict[str, str] = {}
        for i, entry in enumerate(x.strip() for x in (text or "").split(",")):
            if not entry:
                continue
            name, sep, key = entry.partition("=")
            name = name.strip()
            if not sep or not API_KEY_NAME.fullmatch(name):
                raise ConfigError(f"API_KEYS entry {i + 1} must be name=key with a name of letters, digits, "
                                  "'_', '.' or '-' (at most 64)")
            hashed = _HASHED.fullmatch(key.strip())
            if hashed:
                digest = hashed.group(1)
            elif len(key) < MIN_API_KEY_CHARS or any(c.isspace() for c in key):
                raise ConfigError(f"API_KEYS: the key of {name!r} must have at least {MIN_API_KEY_CHARS} "
                                  "characters and no spaces (python -m service api-key new NAME makes one)")
            else:
                digest = hash_api_key(key)
            if name in names.values():
                raise ConfigError(f"API_KEYS names {name!r} twice")
            if digest in names:
                raise ConfigError(f"API_KEYS: {name!r} has the same key as {names[digest]!r}")
            names[digest] = name
        return cls(names, _parse_key_limits(limits, set(names.values())))


def _parse_key_limits(text: str | None, names: set[str]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for entry in (x.strip() for x in (text or "").split(",")):
        if not entry:
            continue
        name, _, rest = entry.partition(":")
        variable, _, value = rest.partition("=")
        setting = variable.strip().lower()
        if name not in names:
            raise ConfigError(f"API_KEY_LIMITS: {name!r} is not a name of API_KEYS")
        if setting not in CLIENT_LIMITS:
            allowed = ", ".join(LIMITS[s][0] for s in CLIENT_LIMITS)
            raise ConfigError(f"API_KEY_LIMITS: {entry!r} must be name:SETTING=value with a SETTING of {allowed}")
        out.setdefault(name, {})[setting] = _int({variable: value}, variable, 0, 0, 10_000_000)
    return out


@dataclass(frozen=True)
class TrustedProxies:
    """Which peers may say who the client is (``TRUSTED_PROXIES``), and in which header.

    A count ``n``: the client is the ``n``-th address from the right of the header
    (each of the ``n`` proxies in front appends one).  CIDRs: the request's peer
    must be in them, and the client is the right-most address of the header that
    is not (addresses of trusted proxies are skipped).  Unset: headers are ignored.

    >>> TrustedProxies.parse("10.0.0.0/8, 127.0.0.1").networks[1]
    IPv4Network('127.0.0.1/32')
    """

    count: int = 0
    networks: tuple = ()
    header: str = "x-forwarded-for"

    def __bool__(self) -> bool:
        return bool(self.count or self.networks)

    @classmethod
    def parse(cls, text: str | None, header: str | None = None) -> TrustedProxies:
        header = (header or "x-forwarded-for").strip().lower()
        if header not in PROXY_HEADERS:
            raise ConfigError(f"PROXY_HEADER must be one of {', '.join(PROXY_HEADERS)}; got {header!r}")
        text = (text or "").strip()
        if not text:
            return cls(header=header)
        if text.isdigit():
            count = int(text)
            if not 1 <= count <= 10:
                raise ConfigError(f"TRUSTED_PROXIES as a count must be 1-10; got {text!r}")
            return cls(count=count, header=header)
        nets = []
        for part in (x.strip() for x in text.split(",")):
            try:
                nets.append(ipaddress.ip_network(part, strict=False))
            except ValueError:
                raise ConfigError(f"TRUSTED_PROXIES must be a count or CIDRs; {part!r} is neither") from None
        return cls(networks=tuple(nets), header=header)


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 2
    timeout: int = 30
    keepalive: int = 5
    request_timeout: int = 10
    max_connections: int = 4096
    stream_heartbeat: int = 15
    stream_buffer: int = 64
    stream_max_per_table: int = 32
    log_level: str = "INFO"
    max_body_bytes: int = 64 * 1024
    batch_max_items: int = 1000
    max_batch_bytes: int = 1024 * 1024
    redis_url: str | None = None
    redis_data_dir: str = "var/redis"
    redis_maxmemory: int = 512 * 1024 * 1024
    table_ttl: int = 30 * 24 * 3600
    max_table_events: int = 20_000
    tables_per_hour: int = 60
    client_events_per_minute: int = 600
    client_voids_per_minute: int = 60
    client_reads_per_minute: int = 3000
    table_events_per_minute: int = 120
    table_voids_per_minute: int = 20
    table_reads_per_minute: int = 600
    client_batch_items_per_minute: int = 600_000
    client_webhook_calls_per_minute: int = 600
    client_webhook_sends_per_minute: int = 60
    api_keys: ApiKeys = field(default_factory=ApiKeys)
    trusted_proxies: TrustedProxies = field(default_factory=TrustedProxies)
    cors_origins: tuple[str, ...] = ()
    # where clients reach the service (behind a proxy: its public address); problems' `type` URLs start with it
    public_url: str | None = None
    redis_min_replicas: int = 0
    redis_wait_timeout_ms: int = 1000
    # how long a worker trusts its last look at Redis's maxmemory-policy before a write looks again (an evicting
    # Redis refuses every write: service/store/table_store.py)
    eviction_check_seconds: int = 5
    # webhooks (service/webhooks/): the outbox and the endpoints; the dispatcher inside serve;
    # targets on private addresses (tests); an attempt's deadline; the retry budget; the first retry's delay
    webhooks: bool = True
    webhook_dispatcher: bool = True
    webhook_allow_private: bool = False
    webhook_timeout: int = 10
    webhook_retry_seconds: int = 24 * 3600
    webhook_backoff_ms: int = 5000
    webhook_concurrency: int = 32
    webhook_sweep_seconds: int = 60

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        return cls().with_env(os.environ if environ is None else environ)

    def with_env(self, env: Mapping[str, str]) -> Settings:
        """These settings with the variables ``env`` sets (text, as an environment holds them; a variable
        absent or blank keeps its setting, except ``REDIS_URL``, which blank means none), each checked."""

        def text(name: str, default: str | None) -> str | None:
            value = env.get(name)
            return default if value is None or value.strip() == "" else value.strip()

        numbers = {name: _int(env, var, getattr(self, name), lo, hi) for name, (var, lo, hi) in BOUNDS.items()}
        flags = {name: _flag(env, var, getattr(self, name)) for name, var in FLAGS.items()}
        keys = "API_KEYS" in env or "API_KEY_LIMITS" in env
        proxies = "TRUSTED_PROXIES" in env or "PROXY_HEADER" in env
        return replace(
            self,
            host=text("HOST", self.host) or self.host,
            log_level=_level(text("LOG_LEVEL", self.log_level)),
            redis_url=text("REDIS_URL", None) if "REDIS_URL" in env else self.redis_url,
            redis_data_dir=text("REDIS_DATA_DIR", self.redis_data_dir) or self.redis_data_dir,
            redis_maxmemory=_bytes(text("REDIS_MAXMEMORY", None), self.redis_maxmemory, "REDIS_MAXMEMORY"),
            api_keys=ApiKeys.parse(env.get("API_KEYS"), env.get("API_KEY_LIMITS")) if keys else self.api_keys,
            trusted_proxies=TrustedProxies.parse(env.get("TRUSTED_PROXIES"), env.get("PROXY_HEADER")) if proxies
            else self.trusted_proxies,
            cors_origins=_origins(env.get("CORS_ORIGINS")) if "CORS_ORIGINS" in env else self.cors_origins,
            public_url=_public_url(env.get("PUBLIC_URL")) if "PUBLIC_URL" in env else self.public_url,
            **numbers,
            **flags,
        )

    def with_config(self, config: Mapping[str, Any]) -> Settings:
        """These settings with a Flask-style config on top (:func:`service.api.app.create_app`'s ``config``): the
        settings' variables by name (``MAX_CONTENT_LENGTH``, Flask's own name, for ``MAX_BODY_BYTES``), each a
        text as in the environment (checked as there) or a value of the setting's type (taken as it is: a test
        may want a body limit below the bound); other keys are Flask's and left alone.

        >>> Settings().with_config({"TABLES_PER_HOUR": 3, "STREAM_HEARTBEAT": "1", "TESTING": True}).tables_per_hour
        3
        >>> Settings().with_config({"MAX_CONTENT_LENGTH": 100, "WEBHOOKS": "off"}).max_body_bytes
        100
        """
        config = {("MAX_BODY_BYTES" if k == "MAX_CONTENT_LENGTH" else k): v for k, v in config.items()}
        texts = {k: v for k, v in config.items() if isinstance(v, str) and k in ENVIRONMENT}
        typed = {VARIABLES[k]: v for k, v in config.items() if k in VARIABLES and not isinstance(v, str)}
        for name, value in typed.items():
            wanted = type(getattr(self, name))
            if name == "redis_url" and value is None:
                continue
            if isinstance(value, bool) is not (wanted is bool) or not isinstance(value, wanted):
                raise ConfigError(f"{name} must be a {wanted.__name__}; got {value!r}")
        return replace(self.with_env(texts), **typed)

    def with_overrides(self, **overrides: Any) -> Settings:
        """Command-line options over the environment (``None`` values are ignored), within the same bounds.

        >>> Settings().with_overrides(port=9000, workers=None).port
        9000
        >>> Settings().with_overrides(port=70000)
        Traceback (most recent call last):
        ...
        service.config.ConfigError: port must be an integer from 0 to 65535; got 70000
        """
        known = {f.name for f in fields(self)}
        unknown = set(overrides) - known
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        given = {k: v for k, v in overrides.items() if v is not None}
        for name, value in given.items():
            if name in BOUNDS:
                _, lo, hi = BOUNDS[name]
                if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                    raise ConfigError(f"{name} must be an integer from {lo} to {hi}; got {value!r}")
        return replace(self, **given)

    def flask_config(self) -> dict[str, Any]:
        """The Flask config keys Flask itself reads (the service reads its settings from the app's
        :class:`Settings`: :func:`service.api.settings.current`)."""
        return {"MAX_CONTENT_LENGTH": self.max_body_bytes}



VARIABLES: dict[str, str] = {
    **{var: name for name, (var, _, _) in BOUNDS.items()},
    **{var: name for name, var in FLAGS.items()},
    "HOST": "host", "LOG_LEVEL": "log_level", "REDIS_URL": "redis_url", "REDIS_DATA_DIR": "redis_data_dir",
    "REDIS_MAXMEMORY": "redis_maxmemory", "API_KEYS": "api_keys", "TRUSTED_PROXIES": "trusted_proxies",
    "CORS_ORIGINS": "cors_origins", "PUBLIC_URL": "public_url",
}
"""Each environment variable of a setting → the :class:`Settings` field it sets."""
ENVIRONMENT = frozenset(VARIABLES) | {"API_KEY_LIMITS", "PROXY_HEADER"}
"""Every variable the settings read (``API_KEY_LIMITS`` and ``PROXY_HEADER`` go with ``API_KEYS`` and
``TRUSTED_PROXIES``)."""

def _int(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip(), 10)
    except ValueError:
        value = None
    if value is None or not lo <= value <= hi:
        raise ConfigError(f"{name} must be an integer from {lo} to {hi}; got {raw!r}")
    return value


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    """An on/off setting (see :data:`FLAGS`).

    >>> _flag({"X": "Off"}, "X", True), _flag({}, "X", True), _flag({"X": " yes "}, "X", False)
    (False, True, True)
    """
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value not in _TRUE + _FALSE:
        raise ConfigError(f"{name} must be on or off (1/0, true/false, yes/no); got {raw!r}")
    return value in _TRUE


_UNITS = {"": 1, "b": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3}


def _bytes(raw: str | None, default: int, name: str) -> int:
    """A size as Redis writes it: bytes, or a whole number of ``kb``/``mb``/``gb`` (powers of 1024).

    0 means no bound; otherwise at least 1 MiB (less leaves Redis no room to start).

    >>> _bytes("512mb", 0, "X"), _bytes("0", 1, "X"), _bytes(None, 7, "X"), _bytes("2GB", 0, "X")
    (536870912, 0, 7, 2147483648)
    >>> _bytes("12k", 0, "X")
    Traceback (most recent call last):
    ...
    service.config.ConfigError: X must be 0 or a size from 1mb to 1024gb (bytes, or a number with kb, mb or gb); got '12k'
    """  # noqa: E501 - a doctest's expected error line
    if raw is None:
        return default
    number = raw.rstrip("bBkKmMgG")
    unit = raw[len(number):].lower()
    value = int(number) * _UNITS[unit] if number.isdigit() and unit in _UNITS else -1
    if value != 0 and not 1024**2 <= value <= 1024**4:
        raise ConfigError(f"{name} must be 0 or a size from 1mb to 1024gb (bytes, or a number with kb, mb "
                          f"or gb); got {raw!r}")
    return value


def _origins(raw: str | None) -> tuple[str, ...]:
    """``CORS_ORIGINS``: comma-separated origins (``https://app.example``), or ``*``."""
    out = []
    for part in (x.strip() for x in (raw or "").split(",")):
        if not part:
            continue
        if part != "*" and not re.fullmatch(r"https?://[^/\s]+", part):
            raise ConfigError(f"CORS_ORIGINS entries are origins such as https://app.example (or *); got {part!r}")
        out.append(part)
    return tuple(out)


def _public_url(raw: str | None) -> str | None:
    """``PUBLIC_URL``: the service's address as its clients reach it (``https://mahjong.example``, a path
    prefix allowed), without a trailing ``/``; unset: each request's own origin.

    >>> _public_url("https://mahjong.example/api/"), _public_url(" ")
    ('https://mahjong.example/api', None)
    """
    text = (raw or "").strip()
    if not text:
        return None
    if not re.fullmatch(r"https?://[^/\s?#]+(/[^\s?#]*)?", text):
        raise ConfigError(f"PUBLIC_URL must be an http(s) URL without a query or fragment, such as "
                          f"https://mahjong.example; got {raw!r}")
    return text.rstrip("/")


def _level(raw: str | None) -> str:
    level = (raw or "INFO").upper()
    if level not in LOG_LEVELS:
        raise ConfigError(f"LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}; got {raw!r}")
    return level


def load_settings() -> Settings:
    """The settings of this process, from :data:`os.environ`."""
    return Settings.from_env(os.environ)
