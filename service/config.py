"""Settings of the service, read from the environment in this one place.

Every variable is optional; the table of them (``HOST``, ``PORT``,
``WORKERS``, ``THREADS``, ``TIMEOUT``, ``KEEPALIVE``, ``LOG_LEVEL``,
``MAX_BODY_BYTES``, ``REDIS_URL``, ...) is in :mod:`service.__main__`
(``PROMETHEUS_MULTIPROC_DIR`` is read where it is used, by
:func:`service.serving.metrics_dir`).  ``python -m service serve`` options override the
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


# integer settings: (environment variable, lowest, highest), checked for the
# environment and for command-line overrides alike
BOUNDS: dict[str, tuple[str, int, int]] = {
    "port": ("PORT", 0, 65535),
    "workers": ("WORKERS", 1, 64),
    "threads": ("THREADS", 1, 256),
    "timeout": ("TIMEOUT", 1, 3600),
    "keepalive": ("KEEPALIVE", 0, 3600),
    "request_timeout": ("REQUEST_TIMEOUT", 1, 3600),
    "max_connections": ("MAX_CONNECTIONS", 16, 100_000),
    "stream_heartbeat": ("STREAM_HEARTBEAT", 1, 15),
    "stream_buffer": ("STREAM_BUFFER", 1, 10_000),
    "max_body_bytes": ("MAX_BODY_BYTES", 1024, 16 * 1024 * 1024),
    "table_ttl": ("TABLE_TTL", 0, 10 * 365 * 24 * 3600),
    "max_table_events": ("MAX_TABLE_EVENTS", 0, 10_000_000),
    "tables_per_hour": ("TABLES_PER_HOUR", 0, 1_000_000),
}


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 2
    threads: int = 4
    timeout: int = 30
    keepalive: int = 5
    request_timeout: int = 10
    max_connections: int = 4096
    stream_heartbeat: int = 15
    stream_buffer: int = 64
    log_level: str = "INFO"
    max_body_bytes: int = 64 * 1024
    redis_url: str | None = None
    redis_data_dir: str = "var/redis"
    redis_maxmemory: int = 512 * 1024 * 1024
    table_ttl: int = 30 * 24 * 3600
    max_table_events: int = 20_000
    tables_per_hour: int = 60

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if environ is None else environ

        def text(name: str, default: str | None) -> str | None:
            value = env.get(name)
            return default if value is None or value.strip() == "" else value.strip()

        numbers = {name: _int(env, var, getattr(cls, name), lo, hi) for name, (var, lo, hi) in BOUNDS.items()}
        return cls(
            host=text("HOST", cls.host) or cls.host,
            log_level=_level(text("LOG_LEVEL", cls.log_level)),
            redis_url=text("REDIS_URL", None),
            redis_data_dir=text("REDIS_DATA_DIR", cls.redis_data_dir) or cls.redis_data_dir,
            redis_maxmemory=_bytes(text("REDIS_MAXMEMORY", None), cls.redis_maxmemory, "REDIS_MAXMEMORY"),
            **numbers,
        )

    def with_overrides(self, **overrides: Any) -> "Settings":
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
        """The Flask config keys the HTTP layer reads."""
        return {
            "MAX_CONTENT_LENGTH": self.max_body_bytes,
            "REDIS_URL": self.redis_url,
            "TABLE_TTL": self.table_ttl,
            "MAX_TABLE_EVENTS": self.max_table_events,
            "TABLES_PER_HOUR": self.tables_per_hour,
            "LOG_LEVEL": self.log_level,
            "STREAM_HEARTBEAT": self.stream_heartbeat,
            "STREAM_BUFFER": self.stream_buffer,
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
    """
    if raw is None:
        return default
    number = raw.rstrip("bBkKmMgG")
    unit = raw[len(number):].lower()
    value = int(number) * _UNITS[unit] if number.isdigit() and unit in _UNITS else -1
    if value != 0 and not 1024**2 <= value <= 1024**4:
        raise ConfigError(f"{name} must be 0 or a size from 1mb to 1024gb (bytes, or a number with kb, mb "
                          f"or gb); got {raw!r}")
    return value


def _level(raw: str | None) -> str:
    level = (raw or "INFO").upper()
    if level not in LOG_LEVELS:
        raise ConfigError(f"LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}; got {raw!r}")
    return level


def load_settings() -> Settings:
    """The settings of this process, from :data:`os.environ`."""
    return Settings.from_env(os.environ)
