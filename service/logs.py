"""The service's log lines: one compact JSON object per line on stderr (:class:`JsonFormatter`).

Used by the app's loggers (``service.*``: :func:`configure_logging`, in each worker) and by gunicorn's
own (its ``logconfig_dict``: :func:`service.serving.log_config`, in the master too).  It imports no
Flask, Redis or gevent-patched module: gunicorn's master loads it before the workers patch theirs.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson


def _line(out: dict) -> str:
    """One compact JSON object; what JSON cannot hold is written so that the line still is JSON
    (:func:`_loggable`)."""
    try:
        return orjson.dumps(out).decode()
    except orjson.JSONEncodeError:
        return orjson.dumps(_loggable(out)).decode()


def _loggable(value: Any) -> Any:
    """``value`` with what orjson refuses made writable: a lone surrogate (in a message: the log line
    must stay UTF-8) as its ``\\udXXX`` escape text, an integer past 64 bits or an object of another
    type as its ``str``.

    >>> _loggable({"message": "bad \\udc80 byte", "n": 2 ** 70, "ok": [1, None, 2.5]})
    {'message': 'bad \\\\udc80 byte', 'n': '1180591620717411303424', 'ok': [1, None, 2.5]}
    """
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_loggable(k) if isinstance(k, str) else str(k): _loggable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_loggable(v) for v in value]
    if value is None or isinstance(value, (bool, float)) or (isinstance(value, int) and -2 ** 63 <= value < 2 ** 64):
        return value
    return str(value)


class JsonFormatter(logging.Formatter):
    """One compact JSON object per line; a message that already is a JSON object is merged in.

    >>> record = logging.LogRecord("service.access", logging.INFO, "", 0, "request", None, None)
    >>> record.created, record.process, record.fields = 1.0, 7, {"status": 200, "path": "/路"}
    >>> JsonFormatter().format(record)
    '{"ts":1.0,"level":"INFO","logger":"service.access","pid":7,"status":200,"path":"/路"}'
    """

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):  # structured: logged with extra={"fields": {...}}
            out.update(fields)
            return _line(out)
        message = record.getMessage()
        if message.startswith("{"):
            try:
                parsed = orjson.loads(message)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                out.update(parsed)
            else:
                out["message"] = message
        else:
            out["message"] = message
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return _line(out)


def configure_logging(level: str = "INFO") -> None:
    """JSON lines on stderr for the ``service`` loggers (idempotent).

    Log records skip what this format does not print (the caller's file and line,
    thread and multiprocessing names): collecting them costs time on every
    request line (the logging HOWTO's "Optimization" section).
    """
    logging._srcfile = None
    logging.logThreads = False
    logging.logMultiprocessing = False
    logger = logging.getLogger("service")
    logger.setLevel(level)
    if not any(getattr(h, "_service_json", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        handler._service_json = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.propagate = False
