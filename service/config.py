"""Settings of the service, read from the environment in this one place.

Every variable is optional; the table of them (``HOST``, ``PORT``,
``WORKERS``, ``THREADS``, ``TIMEOUT``, ``KEEPALIVE``, ``LOG_LEVEL``,
``MAX_BODY_BYTES``, ``REDIS_URL``, ``PROMETHEUS_MULTIPROC_DIR``) is in
:mod:`service.__main__`.  ``python -m service serve`` options override the
matching variable; :func:`service.api.app.create_app` takes a dict of Flask
config overrides on top of these.

>>> s = Settings.from_env({"PORT": "9000", "LOG_LEVEL": "debug"})
>>> s.port, s.log_level, s.workers
(9000, 'DEBUG', 2)
>>> Settings.from_env({"WORKERS": "0"})
Traceback (most recent call last):
...
service.config.ConfigError: WORKERS must be an integer from 1 to 64; got '0'
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from typing import Any, Mapping

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class ConfigError(ValueError):
    """An environment variable (or option) with a value the service cannot use."""


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 2
    threads: int = 4
    timeout: int = 30
    keepalive: int = 5
    log_level: str = "INFO"
    max_body_bytes: int = 64 * 1024
    redis_url: str | None = None
    redis_data_dir: str = "var/redis"
    table_ttl: int = 30 * 24 * 3600
    max_table_events: int = 20_000
    tables_per_hour: int = 60
    prometheus_multiproc_dir: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if environ is None else environ

        def text(name: str, default: str | None) -> str | None:
            value = env.get(name)
            return default if value is None or value.strip() == "" else value.strip()

        return cls(
            host=text("HOST", cls.host) or cls.host,
            port=_int(env, "PORT", cls.port, 0, 65535),
            workers=_int(env, "WORKERS", cls.workers, 1, 64),
            threads=_int(env, "THREADS", cls.threads, 1, 256),
            timeout=_int(env, "TIMEOUT", cls.timeout, 1, 3600),
            keepalive=_int(env, "KEEPALIVE", cls.keepalive, 0, 3600),
            log_level=_level(text("LOG_LEVEL", cls.log_level)),
            max_body_bytes=_int(env, "MAX_BODY_BYTES", cls.max_body_bytes, 1024, 16 * 1024 * 1024),
            redis_url=text("REDIS_URL", None),
            redis_data_dir=text("REDIS_DATA_DIR", cls.redis_data_dir) or cls.redis_data_dir,
            table_ttl=_int(env, "TABLE_TTL", cls.table_ttl, 0, 10 * 365 * 24 * 3600),
            max_table_events=_int(env, "MAX_TABLE_EVENTS", cls.max_table_events, 0, 10_000_000),
            tables_per_hour=_int(env, "TABLES_PER_HOUR", cls.tables_per_hour, 0, 1_000_000),
            prometheus_multiproc_dir=text("PROMETHEUS_MULTIPROC_DIR", None),
        )

    def with_overrides(self, **overrides: Any) -> "Settings":
        """Command-line options over the environment (``None`` values are ignored)."""
        known = {f.name for f in fields(self)}
        unknown = set(overrides) - known
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})

    def flask_config(self) -> dict[str, Any]:
        """The Flask config keys the HTTP layer reads."""
        return {
            "MAX_CONTENT_LENGTH": self.max_body_bytes,
            "REDIS_URL": self.redis_url,
            "TABLE_TTL": self.table_ttl,
            "MAX_TABLE_EVENTS": self.max_table_events,
            "TABLES_PER_HOUR": self.tables_per_hour,
            "LOG_LEVEL": self.log_level,
        }


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


def _level(raw: str | None) -> str:
    level = (raw or "INFO").upper()
    if level not in LOG_LEVELS:
        raise ConfigError(f"LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}; got {raw!r}")
    return level


def load_settings() -> Settings:
    """The settings of this process, from :data:`os.environ`."""
    return Settings.from_env(os.environ)
