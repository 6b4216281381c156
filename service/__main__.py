"""Command line: ``python -m service serve``, ``openapi``, ``check-tables``, ``api-key``, ``score`` and ``webhooks``.

``serve [--host H] [--port P] [--workers N]`` runs the HTTP API
under gunicorn (``gevent`` workers, see :mod:`service.serving`; the app built by
:func:`service.api.app.create_app` in each worker).  ``openapi [--json]``
prints the OpenAPI document (YAML by default; the committed ``openapi.yaml``
is ``python -m service openapi > openapi.yaml``).  ``check-tables [ID ...]
[--repair]`` re-folds each table's log and compares the fold with the state
stored beside the log: one JSON line per table, exit 0 when all agree, 1 when
any differs (2 when it cannot run); on a Redis Cluster it scans every primary.  It uses ``REDIS_URL`` if set, else the
embedded Redis of the ``serve`` running on ``REDIS_DATA_DIR`` (found through
the lock file there), else starts one on that directory for the check.
``api-key new NAME`` prints a fresh API key and the ``API_KEYS`` entry to
add.  ``score [FILE|-] [--jobs N]`` answers a file (or standard input) of
NDJSON batch items, one result line per item in order on standard output,
as ``POST /v1/batch`` answers them, each with its input ``line`` (no server, no
Redis; problems carry no ``request_id``, and a relative ``type``); exit status 1
when any item failed (their count on standard error), 2 when the arguments or
the input cannot be used; a progress bar of items on standard error when it is a terminal;
``--jobs N`` answers with N processes (order kept, a few 64 KiB pieces in flight
at most); lines longer than ``MAX_BODY_BYTES`` get a 413 result.
``webhooks`` runs a webhook dispatcher until stopped (``serve`` runs one
in each worker too, unless ``WEBHOOK_DISPATCHER`` is off; any number may run
at once: :mod:`service.webhooks`).  (The generated pages of ``docs/`` are written by a development tool,
``python -m tools.docs``, not by the service.)

Configuration is by environment variable (read in :mod:`service.config`);
command-line options win over the environment:

============================ ============ ===============================================
variable                     default      meaning
============================ ============ ===============================================
``HOST``                     127.0.0.1    address to bind (``--host``)
``PORT``                     8000         TCP port (``--port``)
``WORKERS``                  2            gunicorn worker processes (``--workers``)
``TIMEOUT``                  30           seconds before a stuck worker is restarted
``KEEPALIVE``                5            seconds a request's head may take to arrive, and an idle
                                          keep-alive connection stays open
``REQUEST_TIMEOUT``          10           seconds a request's body may take to arrive whole (then 408)
``MAX_CONNECTIONS``          4096         open connections per worker (streams included)
``STREAM_HEARTBEAT``         15           seconds between a table stream's comment lines (and expiry checks)
``STREAM_BUFFER``            64           records a stream subscriber may fall behind (then resync)
``STREAM_MAX_PER_TABLE``     32           open streams of one table per worker (more: 429)
``LOG_LEVEL``                INFO         DEBUG, INFO, WARNING, ERROR, CRITICAL
``MAX_BODY_BYTES``           65536        largest request body (larger: 413), and NDJSON batch line
``BATCH_MAX_ITEMS``          1000         items of one JSON batch (``POST /v1/batch``; more: 422)
``MAX_BATCH_BYTES``          1048576      largest JSON batch body (``POST /v1/batch``; larger: 413, which
                                          names NDJSON; an NDJSON job has no overall limit)
``REDIS_URL``                (unset)      Redis of the tables store: ``redis://``, ``rediss://``,
                                          ``unix://``, ``redis+sentinel://h:p[,h:p...]/name[/db]``
                                          or ``redis+cluster://h:p[,h:p...]`` (see
                                          :mod:`service.store.redis_client`); unset: an embedded
                                          redis-server is started for the service
``REDIS_MIN_REPLICAS``       0            replicas that must confirm a write (``WAIT``)
                                          before it is acknowledged (else 503)
``REDIS_WAIT_TIMEOUT_MS``    1000         how long a write waits for those replicas
``EVICTION_CHECK_SECONDS``   5            seconds a worker trusts its last look at Redis's
                                          ``maxmemory-policy`` (an evicting Redis: writes answer 503)
``REDIS_DATA_DIR``           var/redis    data directory of the embedded redis-server (one
                                          ``serve`` at a time: it is locked while in use)
``REDIS_MAXMEMORY``          512mb        memory bound of the embedded redis-server (bytes,
                                          or kb/mb/gb; 0: none); full: writes answer 507
``TABLE_TTL``                2592000      seconds an idle table is kept (0: forever)
``MAX_TABLE_EVENTS``         20000        log records per table (0: no limit)
``TABLES_PER_HOUR``          60           tables one client may create per hour (0: no limit)
``CLIENT_EVENTS_PER_MINUTE`` 600          events one client may post per minute (0: no limit)
``CLIENT_VOIDS_PER_MINUTE``  60           voids one client may post per minute
``CLIENT_READS_PER_MINUTE``  3000         table reads one client may make per minute
``TABLE_EVENTS_PER_MINUTE``  120          events one table may take per minute
``TABLE_VOIDS_PER_MINUTE``   20           voids one table may take per minute
``TABLE_READS_PER_MINUTE``   600          reads of one table per minute
``CLIENT_BATCH_ITEMS_PER_MINUTE`` 600000  batch items (JSON or NDJSON) one client may send per minute
``CLIENT_WEBHOOK_CALLS_PER_MINUTE`` 600   requests to /v1/webhooks one client may make per minute
``CLIENT_WEBHOOK_SENDS_PER_MINUTE`` 60    webhook tests and redeliveries one client may ask for a minute
``API_KEYS``                 (unset)      ``name=key,...``: every /v1/ call without a table
                                          token needs ``X-API-Key`` (keys: 32+ characters,
                                          or ``sha256:<hex>``); unset: open, as before
``API_KEY_LIMITS``           (unset)      per-key client limits: ``name:SETTING=value,...``
``TRUSTED_PROXIES``          (unset)      proxies in front: a count, or CIDRs; the client
                                          address then comes from ``PROXY_HEADER``
``PROXY_HEADER``             x-forwarded-for  or ``forwarded`` (RFC 7239)
``CORS_ORIGINS``             (unset)      browser origins allowed to call the API
``PUBLIC_URL``               (unset)      the service's address as clients reach it (behind a proxy);
                                          problems' ``type`` URLs start with it (unset: the request's
                                          origin)
``WEBHOOKS``                 on           the webhooks of API keys (off: no outbox, the endpoints 404)
``WEBHOOK_DISPATCHER``       on           a dispatcher in each ``serve`` worker (off: run
                                          ``python -m service webhooks`` instead)
``WEBHOOK_TIMEOUT``          10           seconds one delivery attempt may take (the host's lookup,
                                          connect, send and answer in all)
``WEBHOOK_RETRY_SECONDS``    86400        seconds of failed attempts before a notification is
                                          dead-lettered (and its webhook is ``failing``)
``WEBHOOK_BACKOFF_MS``       5000         the first retry's delay (doubling, at most an hour)
``WEBHOOK_CONCURRENCY``      32           deliveries in flight per dispatcher (a key: at most half,
                                          a webhook: a quarter)
``WEBHOOK_SWEEP_SECONDS``    60           seconds between sweeps for outboxes without their hint
``WEBHOOK_ALLOW_PRIVATE``    off          allow webhook URLs on loopback/private/link-local
                                          addresses (tests, a backend on the same network)
``PROMETHEUS_MULTIPROC_DIR`` (unset)      metrics directory shared by the workers; when
                                          unset ``serve`` uses a fresh temporary one
============================ ============ ===============================================

Logs are JSON lines on stderr: one per request (logger ``service.access``)
plus gunicorn's own messages (each worker's "Listening at: <URL>" among them) and
Python's warnings (:func:`service.serving.log_config`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from .config import ConfigError, Settings, load_settings


class StartupError(Exception):
    """``serve`` cannot start (its port is taken, its Redis data directory is in use, ...)."""


@contextmanager
def storage(settings: Settings) -> Iterator[str | None]:
    """Yield the Redis URL the workers will use.

    With ``REDIS_URL`` unset, a private redis-server is started on a free
    loopback port (AOF on, ``appendfsync always``, ``maxmemory`` =
    ``REDIS_MAXMEMORY`` with ``noeviction``, data kept in ``REDIS_DATA_DIR``
    across restarts) and stopped when the service stops.  It holds an
    exclusive lock on its data directory, in which it records its URL (see
    :func:`service.store.embedded.running_url`): a second ``serve`` on the same
    directory raises :class:`StartupError` and starts nothing.
    """
    if settings.redis_url:
        _check_url(settings.redis_url)
        yield settings.redis_url
        return
    from .store.embedded import EmbeddedRedis, EmbeddedRedisError

    server = EmbeddedRedis(settings.redis_data_dir, maxmemory=settings.redis_maxmemory)
    try:
        server.start()
    except EmbeddedRedisError as exc:
        raise StartupError(str(exc)) from None
    print(f"python -m service: embedded redis-server at {server.url} (data in {server.data_dir})",
          file=sys.stderr)
    try:
        yield server.url
    finally:
        server.stop()


def _check_url(url: str) -> None:
    from .store.redis_client import RedisUrlError, parse

    try:
        parse(url)
    except RedisUrlError as exc:
        raise ConfigError(str(exc)) from None


def serve(settings: Settings, **gunicorn_overrides) -> int:
    """Run the service until stopped; ``gunicorn_overrides`` are for the benchmarks."""
    import os

    from . import serving
    from .store.embedded import port_is_free

    if settings.port and not port_is_free(settings.host, settings.port):
        # before anything starts (the embedded Redis above all)
        raise StartupError(f"{settings.host}:{settings.port} is already in use: choose another --port (PORT)")
    # the workers get the settings (API keys as digests only), not the raw keys
    os.environ.pop("API_KEYS", None)
    # Python's warnings (a library's, gevent's) as log records: JSON lines like the rest (serving.log_config)
    import logging

    logging.captureWarnings(True)

    with serving.metrics_dir():  # before prometheus_client is imported
        with storage(settings) as redis_url:
            if redis_url:
                os.environ["REDIS_URL"] = redis_url
            settings = settings.with_overrides(redis_url=redis_url)

            def load_app():
                from .api.app import create_app
                from .logs import configure_logging

                configure_logging(settings.log_level)
                app = create_app(settings=settings)
                serving.start_webhooks(app, settings)  # (in each worker, after the fork)
                return app

            try:
                serving.run(load_app, settings, **gunicorn_overrides)
            except SystemExit as exc:
                return exc.code if isinstance(exc.code, int) else 0
    return 0


def print_openapi(as_json: bool) -> int:
    from .api.app import openapi_dict, openapi_yaml

    if as_json:
        import orjson

        sys.stdout.write(orjson.dumps(openapi_dict(), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(openapi_yaml())
    return 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m service", description="Sichuan mahjong scoring service")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("serve", help="run the HTTP API under gunicorn")
    run.add_argument("--host", help="address to bind (env HOST)")
    run.add_argument("--port", type=int, help="TCP port (env PORT)")
    run.add_argument("--workers", type=int, help="worker processes (env WORKERS)")
    spec = sub.add_parser("openapi", help="print the OpenAPI document")
    spec.add_argument("--json", action="store_true", help="JSON instead of YAML")
    check = sub.add_parser("check-tables", help="re-fold every table's log and compare it with the stored state")
    check.add_argument("ids", nargs="*", help="table ids (default: every table)")
    check.add_argument("--repair", action="store_true", help="write the fold back where they differ")
    keys = sub.add_parser("api-key", help="API keys for API_KEYS")
    keys_sub = keys.add_subparsers(dest="action", required=True)
    new = keys_sub.add_parser("new", help="print a fresh API key and the API_KEYS entry to add")
    new.add_argument("name", help="the key's name (letters, digits, '_', '.', '-'): its label in metrics and limits")
    score = sub.add_parser("score", help="answer a file of NDJSON batch items, one result line each (no server)",
                           description="Answer NDJSON batch items as POST /v1/batch does, with no server and "
                                       "no Redis: one result line per item, in order, on standard output.",
                           epilog=SCORE_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    score.add_argument("file", nargs="?", default="-", help="the items, one JSON object a line (default -: stdin)")
    score.add_argument("--jobs", type=int, default=1, help="processes answering the items (default 1)")
    sub.add_parser("webhooks", help="run a webhook dispatcher (deliver the outboxes' notifications) until stopped")
    return parser.parse_args(argv)


@contextmanager
def tables_redis(settings: Settings) -> Iterator[str]:
    """The Redis of the tables, for a tool run beside the service (``check-tables``).

    ``REDIS_URL`` if set; else the embedded Redis that a running ``serve``
    recorded in ``REDIS_DATA_DIR``; else, when no ``serve`` runs there, an
    embedded Redis started on that directory for the duration (its lock keeps
    a ``serve`` from starting on the same files meanwhile).
    """
    if settings.redis_url:
        _check_url(settings.redis_url)
        yield settings.redis_url
        return
    from .store.embedded import EmbeddedRedis, EmbeddedRedisError, running_url

    data = Path(settings.redis_data_dir)
    if not data.is_dir():
        raise StartupError(f"no tables here: REDIS_DATA_DIR {str(data)!r} is not a directory "
                           "(set REDIS_DATA_DIR to the service's, or REDIS_URL)")
    for _ in range(50):
        url = running_url(data)
        if url:
            yield url
            return
        server = EmbeddedRedis(data)
        try:
            server.start()
        except EmbeddedRedisError as exc:
            if "in use" not in str(exc):
                raise StartupError(str(exc)) from None
            time.sleep(0.1)  # a serve holds it but has not recorded its URL yet: ask again
            continue
        try:
            yield server.url
        finally:
            server.stop()
        return
    raise StartupError(f"the service using {data} has not recorded its Redis URL; retry when it is up")


def new_api_key(name: str) -> int:
    """``api-key new NAME``: a fresh random key and the ``API_KEYS`` entries that configure it."""
    import secrets

    from .config import API_KEY_NAME, hash_api_key

    if not API_KEY_NAME.fullmatch(name):
        print("python -m service api-key: a name is 1-64 letters, digits, '_', '.' or '-'", file=sys.stderr)
        return 2
    key = "mk_" + secrets.token_urlsafe(32)
    print(f"API key for {name} (shown once; give it to the client, who sends it as X-API-Key):")
    print(f"  {key}")
    print("Add to API_KEYS (entries are separated by commas):")
    print(f"  {name}={key}")
    print("or, to keep only its digest in the environment:")
    print(f"  {name}=sha256:{hash_api_key(key)}")
    return 0


def check_tables(ids: Sequence[str], repair: bool) -> int:
    """``check-tables``: one JSON line per table; exit 1 if any differs (and was not repaired).

    Without ids, every live table (deleted tables' tombstones are skipped; a
    table deleted or expired while the check runs is reported as skipped).  An
    id given on the command line that is not a table counts as a failure.
    """
    import redis

    from .rules.errors import EventError
    from .store import codec
    from .store.redis_client import connect
    from .store.table_store import TableNotFound, TableStore

    try:
        with tables_redis(load_settings()) as url:
            store = TableStore(connect(url, socket_timeout=30))
            bad = 0
            for table_id in ids or store.table_ids():
                try:
                    report = store.check(table_id, repair=repair)
                except TableNotFound:
                    if not ids:
                        print(codec.dumps({"id": table_id, "skipped": "deleted or expired during the check"}).decode())
                        continue
                    report = {"id": table_id, "ok": False, "repaired": False, "error": "no such table"}
                except EventError as exc:
                    report = {"id": table_id, "ok": False, "repaired": False, "error": str(exc)}
                except (ValueError, KeyError, TypeError, IndexError) as exc:  # not this version's stored format
                    report = {"id": table_id, "ok": False, "repaired": False,
                              "error": f"stored in a format this version does not read ({type(exc).__name__}): "
                                       "delete the table"}
                bad += not (report["ok"] or report["repaired"])
                print(codec.dumps(report).decode(), flush=True)
    except (ConfigError, StartupError) as exc:
        print(f"python -m service check-tables: {exc}", file=sys.stderr)
        return 2
    except redis.exceptions.RedisError as exc:
        print(f"python -m service check-tables: Redis: {exc}", file=sys.stderr)
        return 2
    return 1 if bad else 0


SCORE_EXAMPLE = """\
An item is one JSON object a line: a body of POST /v1/hands/<op> or /v1/rounds/settle with its "op":
  {"op": "score", "hand": {"tiles": "11123456789999m"}, "win": {"tile": "9m", "self_drawn": true}}
Each result is one line, in order, with the number of its input line:
  {"line": 1, "status": 200, "body": {"fan": ...}}    or    {"line": 2, "status": 422, "problem": {...}}
Exit status: 0 when every item was answered 200, 1 when any failed (their count on stderr), 2 when
the arguments or the input cannot be used (a file that cannot be read, --jobs out of range)."""


def score_items(path: str, jobs: int) -> int:
    """``score``: the result lines of the items in ``path`` (``-``: standard input) on standard output,
    each with its input ``line``; exit 1 when any item failed (their count on standard error), 2 when
    the arguments or the input cannot be used."""
    import os

    from .api.batch_items import run_stream

    if not 1 <= jobs <= 256:
        print("python -m service score: --jobs must be from 1 to 256", file=sys.stderr)
        return 2
    try:
        max_line = load_settings().max_body_bytes
        source = sys.stdin.buffer if path == "-" else open(path, "rb")
        progress = _score_progress(source, path) if sys.stderr.isatty() else None
    except (ConfigError, OSError) as exc:
        print(f"python -m service score: {exc}", file=sys.stderr)
        return 2
    out, items, failed = sys.stdout.buffer, 0, 0
    try:
        with source:
            for scored in run_stream(source.read, max_line, jobs):
                out.write(scored.lines)
                items += scored.items
                failed += scored.failed
                if progress is not None:
                    progress.update(scored.items)
            out.flush()
    except BrokenPipeError:  # the reader left (`| head`): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        return 130
    except OSError as exc:  # (the input could not be read: a directory, a device error)
        print(f"python -m service score: {exc}", file=sys.stderr)
        return 2
    finally:
        if progress is not None:
            progress.close()
    if failed:
        print(f"python -m service score: {failed} of {items} items failed", file=sys.stderr)
        return 1
    return 0


def _score_progress(source, path: str):
    """The progress bar of ``score`` on a terminal: items answered, as integers (tqdm's ``unit`` and
    ``unit_scale=False``), out of the file's non-blank lines (counted first; unknown on standard input)."""
    import os

    from tqdm import tqdm

    total = None
    if path != "-" and os.path.isfile(path):
        with open(path, "rb") as counted:
            total = sum(1 for line in counted if line.strip())
    return tqdm(total=total, unit="item", unit_scale=False, desc="score", file=sys.stderr)


def run_webhooks() -> int:
    """``webhooks``: a webhook dispatcher in this process (threads) until SIGTERM or SIGINT.

    Any number may run, beside the ones inside ``serve`` (``WEBHOOK_DISPATCHER``):
    leases share the work (see :mod:`service.webhooks`).  It needs the
    service's ``API_KEYS`` (the webhooks' secrets are sealed under them) and its
    Redis (``REDIS_URL``, else the embedded Redis of the ``serve`` running on
    ``REDIS_DATA_DIR``).
    """
    import logging
    import signal

    from .logs import configure_logging
    from .serving import dispatcher_options
    from .store.redis_client import connect
    from .webhooks.dispatcher import Dispatcher
    from .webhooks.registry import Registry

    try:
        settings = load_settings()
        if not settings.api_keys or not settings.webhooks:
            raise ConfigError("webhooks belong to API keys: set API_KEYS (the service's) and leave WEBHOOKS on")
        configure_logging(settings.log_level)
        with tables_redis(settings) as url:
            client = connect(url)
            dispatcher = Dispatcher(client, Registry(client, settings.api_keys.digests(),
                                                     allow_private=settings.webhook_allow_private),
                                    dispatcher_options(settings))
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: dispatcher.stop())
            logging.getLogger("service.webhooks").info("python -m service webhooks: delivering from %s",
                                                       url.rpartition("@")[2])
            dispatcher.run_forever()
            dispatcher.stop(wait=settings.webhook_timeout + 1.0)
    except (ConfigError, StartupError) as exc:
        print(f"python -m service webhooks: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "score":
        return score_items(args.file, args.jobs)
    if args.command == "webhooks":
        return run_webhooks()
    if args.command == "openapi":
        return print_openapi(args.json)
    if args.command == "check-tables":
        return check_tables(args.ids, args.repair)
    if args.command == "api-key":
        return new_api_key(args.name)
    try:
        settings = load_settings().with_overrides(
            host=args.host, port=args.port, workers=args.workers
        )
        return serve(settings)
    except (ConfigError, StartupError) as exc:
        print(f"python -m service: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
