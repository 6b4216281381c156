"""The one Redis client factory: ``REDIS_URL`` to a redis-py client, for every user of Redis.

The app's table store, ``/readyz`` and ``check-tables`` connect through
:func:`connect`, and the per-client rate limits count on the same Redis (over
the app client's own connection pool on one server or Sentinel, a cluster
storage of their own on a cluster: :mod:`service.store.limit_storage`), so one
URL names one Redis, whatever its topology:

===================================================================  =============================================
``REDIS_URL``                                                         Redis
===================================================================  =============================================
``redis://[[user]:password@]host[:port][/db]``                        one server (``redis.Redis``)
``rediss://[[user]:password@]host[:port][/db]``                       one server over TLS (redis-py's query
                                                                      options, e.g. ``?ssl_cert_reqs=none``)
``unix://[[user]:password@]/path/to/redis.sock[?db=n]``              one server on a Unix socket
``redis+sentinel://[[user]:password@]host:port[,host:port...]``       the master that the sentinels name
``/<service_name>[/db]``                                              (``redis.sentinel.Sentinel``; the
                                                                      credentials are used for the sentinels and
                                                                      for the master)
``redis+cluster://[[user]:password@]host:port[,host:port...]``        a Redis Cluster (``redis.cluster
                                                                      .RedisCluster``; the nodes listed are where
                                                                      it starts: it learns the others)
===================================================================  =============================================

The ``limits`` library's counters (the per-client limits that the store's
scripts do not count) use the same Redis (:func:`service.store.limit_storage.storage_for`
hands it the app's connection pool, or the cluster's URL).

Every client is built the same way: a 2 s socket timeout (longer when
``WAIT`` may block for longer), a 1 s connect timeout, a health check of
connections idle for 10 s, and **no automatic re-sending of a command**
(redis-py retries a failed command three times by default).  A write sent
again after its answer was lost could be applied twice (the table's log would
have moved on, so the store would take it for a concurrent write and append
it again); instead the request fails with 503 and ``Retry-After``, and the
client's retry under its ``Idempotency-Key`` finds out what happened.  The
connection itself is re-established on the next command:

* a Sentinel client asks the sentinels for the master again when its server
  answers ``READONLY`` (a demoted master) or cannot be reached;
* a cluster client refreshes its slot map after ``MOVED`` (it follows the
  redirection at once: nothing was executed) or a node it cannot reach;
* a plain client drops a connection whose server answers ``READONLY``, so
  that the next one is made afresh (a DNS name or address that a fail-over
  moved to the new primary).

The store sends every command and script through the client itself: on a
cluster, ``RedisCluster`` routes each by its keys (a script's ``EVALSHA`` by
its KEYS, all in one slot) and follows ``MOVED`` and ``ASK`` itself.  What
must share one connection of the key's node goes through :func:`on_node` (the
cluster's node API: ``get_node_from_key``, ``get_redis_connection``): a write
script and its ``WAIT`` (:func:`acknowledged`, ``REDIS_MIN_REPLICAS``), and a
few reads of one slot pipelined in one round trip; :func:`clock_ms` reads the
clock of the node that holds a key.  :func:`check_ready` is what ``/readyz`` asks,
:func:`primaries` gives one client per primary (a cluster is scanned node by
node) and :func:`publish_command` is how a write announces itself to the live
stream (``SPUBLISH`` on a cluster: :mod:`service.api.stream` subscribes with
``SSUBSCRIBE``, so a table's messages stay on its slot's node).

Readings (where the issue is silent):

* A replica is never ready, even one configured writable: what it takes is
  overwritten by its master's stream.
* ``WAIT`` confirms that replicas *received* the write, not that they fsynced
  it (Redis has no such acknowledgement before 7.2's ``WAITAOF``); a replica
  and its primary dying together can still lose it.
* Reads go to the primary and may show a write still waiting for its replicas
  (it is not acknowledged yet, and a fail-over may take it away).
* While a slot moves between nodes (resharding) a write that must ``WAIT``
  may answer 503 (its pipeline on the slot's node does not follow ``ASK``).

>>> parse("redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster/2")
RedisTarget(kind='sentinel', nodes=(('10.0.0.1', 26379), ('10.0.0.2', 26379)), service='mymaster', db=2, \
username=None, password=None)
>>> parse("redis+cluster://:secret@10.0.0.1:7000,10.0.0.2:7000").kind
'cluster'
>>> parse("redis://localhost:6379/0").kind
'redis'
>>> parse("redis+sentinel://10.0.0.1:26379")
Traceback (most recent call last):
...
service.store.redis_client.RedisUrlError: REDIS_URL: a redis+sentinel:// URL names the master's service after the hosts: \
redis+sentinel://host:port[,host:port...]/<service_name>[/db]
"""  # noqa: E501 - a doctest's expected error line

from __future__ import annotations

import logging
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Union, cast

import redis
import redis.sentinel
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.commands import RedisClusterCommands
from redis.commands.core import Script
from redis.retry import Retry
from redis.sentinel import Sentinel
from redis.typing import ScriptTextT

log = logging.getLogger("service.store")

Client = Union[redis.Redis, RedisCluster, "LazyCluster"]

SOCKET_TIMEOUT = 2.0
CONNECT_TIMEOUT = 1.0
HEALTH_CHECK_INTERVAL = 10
SENTINEL_TIMEOUT = 0.5  # each sentinel asked for the master

SCHEMES = ("redis", "rediss", "unix", "redis+sentinel", "redis+cluster")


def text(reply: bytes | str) -> str:
    """A reply's string (redis-py types a reply ``bytes | str``, by ``decode_responses``: the service's
    clients answer bytes)."""
    return reply.decode() if isinstance(reply, bytes) else reply


class RedisUrlError(ValueError):
    """``REDIS_URL`` is not one of the forms above."""


class NotReady(RuntimeError):
    """Redis cannot take the service's writes now (the reason is the message)."""


class NotReplicated(RuntimeError):
    """A write reached the primary but ``WAIT`` did not see it on enough replicas in time."""

    def __init__(self, replicas: int, wanted: int) -> None:
        super().__init__(f"{replicas} of the {wanted} replica(s) required confirmed the write in time")
        self.replicas, self.wanted = replicas, wanted


@dataclass(frozen=True)
class RedisTarget:
    """What a ``REDIS_URL`` names (see :func:`parse`)."""

    kind: str  # "redis" (redis://, rediss://, unix://), "sentinel" or "cluster"
    nodes: tuple[tuple[str, int], ...] = ()  # the sentinels, or the cluster's first nodes
    service: str | None = None  # the master's name (Sentinel)
    db: int = 0
    username: str | None = None
    password: str | None = None


def parse(url: str) -> RedisTarget:
    """The topology, nodes, service name and db of a ``REDIS_URL``; :class:`RedisUrlError` if it has none.

    >>> parse("unix:///run/redis.sock").kind, parse("rediss://h:6380").kind
    ('redis', 'redis')
    >>> parse("redis+cluster://10.0.0.1:7000/3")
    Traceback (most recent call last):
    ...
    service.store.redis_client.RedisUrlError: REDIS_URL: a Redis Cluster has only database 0; got '/3'
    >>> parse("http://example.com")
    Traceback (most recent call last):
    ...
    service.store.redis_client.RedisUrlError: REDIS_URL must start with redis://, rediss://, unix://, redis+sentinel:// \
or redis+cluster://; got 'http://...'
    """  # noqa: E501 - a doctest's expected error line
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in SCHEMES:
        shown = scheme + "://..." if scheme else url[:20]
        raise RedisUrlError("REDIS_URL must start with redis://, rediss://, unix://, redis+sentinel:// or "
                            f"redis+cluster://; got {shown!r}")
    if scheme in ("redis", "rediss", "unix"):
        try:
            kwargs = redis.connection.parse_url(url)
        except ValueError as exc:
            raise RedisUrlError(f"REDIS_URL: {exc}") from None
        return RedisTarget("redis", db=int(kwargs.get("db") or 0))
    parsed = urllib.parse.urlsplit(url)
    hosts = parsed.netloc.rpartition("@")[2]
    nodes = []
    for loc in hosts.split(","):
        try:
            sub = urllib.parse.urlsplit("fake://" + loc.strip())
            host, port = sub.hostname, sub.port
        except ValueError:
            host = port = None
        if not host or not port:
            raise RedisUrlError(f"REDIS_URL: every node of a {scheme}:// URL is host:port; got {loc!r}")
        nodes.append((host, port))
    user = urllib.parse.unquote(parsed.username) if parsed.username else None
    password = urllib.parse.unquote(parsed.password) if parsed.password else None
    if parsed.query or parsed.fragment:
        raise RedisUrlError(f"REDIS_URL: a {scheme}:// URL takes no query or fragment")
    parts = [p for p in parsed.path.split("/") if p]
    if scheme == "redis+cluster":
        if parts and parts != ["0"]:
            raise RedisUrlError(f"REDIS_URL: a Redis Cluster has only database 0; got {parsed.path!r}")
        return RedisTarget("cluster", tuple(nodes), username=user, password=password)
    if not parts or len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
        raise RedisUrlError("REDIS_URL: a redis+sentinel:// URL names the master's service after the hosts: "
                            "redis+sentinel://host:port[,host:port...]/<service_name>[/db]")
    return RedisTarget("sentinel", tuple(nodes), urllib.parse.unquote(parts[0]),
                       int(parts[1]) if len(parts) == 2 else 0, user, password)


def _no_retry() -> Retry:
    return Retry(NoBackoff(), 0)


def _read_only(exc: Exception) -> bool:
    """A write refused by a replica: ``READONLY``, or (Redis 6.2) a script error that wraps it."""
    return isinstance(exc, redis.exceptions.ReadOnlyError) or (
        isinstance(exc, redis.exceptions.ResponseError) and "-READONLY " in str(exc))


class _FollowPrimary:
    """A connection that drops itself when its server answers ``READONLY`` (it was demoted): the
    next command connects afresh, to wherever the address now leads."""

    def read_response(self, *args, **kwargs):
        try:
            return super().read_response(*args, **kwargs)  # type: ignore[misc]
        except redis.exceptions.ResponseError as exc:
            if _read_only(exc):
                self.disconnect()  # type: ignore[attr-defined]
            raise


class FollowPrimaryConnection(_FollowPrimary, redis.Connection):
    pass


class FollowPrimarySSLConnection(_FollowPrimary, redis.SSLConnection):
    pass


class FollowMasterConnection(redis.sentinel.SentinelManagedConnection):
    """redis-py's Sentinel connection (which asks the sentinels again after ``READONLY``), for the
    ``READONLY`` that Redis 6.2 wraps in a script error too."""

    def read_response(self, *args, **kwargs):
        try:
            return super().read_response(*args, **kwargs)
        except redis.exceptions.ResponseError as exc:
            if _read_only(exc) and self.connection_pool.is_master:
                self.disconnect()
                raise redis.exceptions.ConnectionError("the previous master is now a replica") from exc
            raise


class ClusterUnavailable(redis.exceptions.ConnectionError):
    """The cluster client's own errors (no node answers, a slot no node serves) as a RedisError."""


@contextmanager
def _cluster_errors():
    try:
        yield
    except redis.exceptions.RedisClusterException as exc:
        raise ClusterUnavailable(f"Redis Cluster: {exc}") from exc


class LazyCluster(RedisClusterCommands):
    """A :class:`~redis.cluster.RedisCluster` made on first use, standing in for it meanwhile.

    RedisCluster reads the cluster's slot map when it is made and raises if no
    node answers; a gunicorn worker whose app cannot be made stops the whole
    server.  This holder makes it on the first command instead (a worker started
    while the cluster is away answers 503 and ``/readyz`` says why): every
    attribute is the client's, made then; a Script can be registered before
    (it needs only the encoder).  Its commands are redis-py's cluster commands
    (``RedisClusterCommands``), sent through :meth:`execute_command`, so the
    cluster client's own errors (no node answers, a slot that no node serves
    during a fail-over) are raised as :class:`ClusterUnavailable`, a redis
    ``ConnectionError``, whatever the command.
    """

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._client: RedisCluster | None = None
        self._lock = threading.Lock()

    @property
    def client(self) -> RedisCluster:
        """The cluster client (made now if it was not yet)."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    with _cluster_errors():
                        self._client = RedisCluster(**self._kwargs)
        return self._client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def get_encoder(self) -> redis.connection.Encoder:
        k = self._kwargs
        return redis.connection.Encoder(k.get("encoding", "utf-8"), k.get("encoding_errors", "strict"),
                                        k.get("decode_responses", False))

    def register_script(self, script: ScriptTextT) -> Script:
        # redis-py types a Script's client as Redis | RedisCluster; the Script uses only get_encoder, evalsha
        # and script_load of it, which this holder has (the cluster client's, or its own script_load below)
        return Script(cast(RedisCluster, self), script)

    def script_load(self, script: ScriptTextT) -> str:
        """``SCRIPT LOAD`` on each primary that answers; the script's SHA1.  (A Script given ``NOSCRIPT`` loads
        itself with this.  The cluster client sends it to every primary as one command that fails when one
        of them is down, which would stop every script on the others while a fail-over is under way: the
        primaries are asked one by one instead.)  A ``ConnectionError`` only when none took it."""
        sha, failure = None, None
        for node in self.client.get_primaries():
            try:
                with _cluster_errors():
                    sha = self.client.execute_command("SCRIPT LOAD", script, target_nodes=node)
            except redis.exceptions.ConnectionError as exc:
                failure = exc
        if sha is None:
            raise failure or ClusterUnavailable("no primary took the script")
        return sha

    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        with _cluster_errors():
            return self.client.execute_command(*args, **kwargs)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def connect(url: str, *, socket_timeout: float = SOCKET_TIMEOUT, **extra: Any) -> Client:
    """A redis-py client for ``url`` (see the module doc); nothing is sent until it is used."""
    target = parse(url)
    common: dict[str, Any] = {"socket_timeout": socket_timeout, "socket_connect_timeout": CONNECT_TIMEOUT,
                              "health_check_interval": HEALTH_CHECK_INTERVAL, **extra}
    if target.kind == "cluster":
        return LazyCluster(startup_nodes=[ClusterNode(h, p) for h, p in target.nodes],
                           username=target.username, password=target.password, retry=_no_retry(), **common)
    if target.kind == "sentinel":
        auth = {k: v for k, v in (("username", target.username), ("password", target.password)) if v}
        sentinel = Sentinel(list(target.nodes), sentinel_kwargs={
            "socket_timeout": SENTINEL_TIMEOUT, "socket_connect_timeout": SENTINEL_TIMEOUT, **auth})
        if target.service is None:  # (parse names it for every sentinel URL)
            raise RedisUrlError("REDIS_URL: a redis+sentinel:// URL names the master's service")
        return sentinel.master_for(target.service, db=target.db, retry=_no_retry(),
                                   connection_class=FollowMasterConnection, username=auth.get("username"),
                                   password=auth.get("password"), **common)
    scheme = url.split("://", 1)[0].lower()
    if scheme != "unix":
        common["connection_class"] = FollowPrimarySSLConnection if scheme == "rediss" else FollowPrimaryConnection
    return redis.Redis.from_url(url, retry=_no_retry(), **common)


def cluster_of(client: Client) -> RedisCluster | None:
    """The cluster client behind ``client`` (made now, for a :class:`LazyCluster`), or None: not a cluster."""
    if isinstance(client, LazyCluster):
        return client.client
    return client if isinstance(client, RedisCluster) else None


def _cluster(client: LazyCluster | RedisCluster) -> RedisCluster:
    """The cluster client itself (made now, for a :class:`LazyCluster`)."""
    return client.client if isinstance(client, LazyCluster) else client


def kind(client: Client) -> str:
    """``"cluster"``, ``"sentinel"`` or ``"redis"``."""
    if isinstance(client, (LazyCluster, RedisCluster)):
        return "cluster"
    pool = getattr(client, "connection_pool", None)
    return "sentinel" if isinstance(pool, redis.sentinel.SentinelConnectionPool) else "redis"


# -- per node --------------------------------------------------------------------------------------
def primaries(client: Client, refresh: bool = True) -> list[redis.Redis]:
    """One client per primary: the cluster's (from a fresh slot map, unless ``refresh`` is False), else
    ``client`` itself."""
    if isinstance(client, (LazyCluster, RedisCluster)):  # (kind "cluster")
        with _cluster_errors():
            cluster = _cluster(client)
            if refresh:
                cluster.nodes_manager.initialize()
            return [cluster.get_redis_connection(node) for node in cluster.get_primaries()]
    return [client]


def on_node(client: Client, key: str, call: Callable[[redis.Redis], Any]) -> Any:
    """``call`` with the client of the primary that holds ``key`` (a cluster node's, else ``client``), for
    commands that must share one connection of that node (a script and its ``WAIT``) or one round trip.

    The node is the cluster client's (``get_node_from_key``).  A ``MOVED`` there (the slot moved since
    the cluster client last saw it: nothing was run) sends one command for the key through the cluster
    client, which follows the redirection and learns the slot's node, and ``call`` runs once more.
    """
    if not isinstance(client, (LazyCluster, RedisCluster)):  # (kind "cluster")
        return call(client)
    with _cluster_errors():
        cluster = _cluster(client)
    for attempt in range(2):
        with _cluster_errors():
            node = cluster.get_redis_connection(cluster.get_node_from_key(key))
        try:
            return call(node)
        except redis.exceptions.MovedError:
            if attempt:
                raise
            client.exists(key)


def clock_ms(client: Client, key: str) -> int:
    """The Redis clock (ms) of the primary that holds ``key`` (``TIME`` there: on a cluster, each node has
    its own)."""
    if isinstance(client, (LazyCluster, RedisCluster)):  # (kind "cluster")
        with _cluster_errors():
            sec, usec = client.time(target_nodes=_cluster(client).get_node_from_key(key))
    else:
        sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


def acknowledged(client: Client, script: Script, keys: Sequence, args: Sequence, replicas: int,
                 timeout_ms: int, wrote: Callable[[Any], bool]) -> Any:
    """Run ``script`` and then ``WAIT replicas timeout_ms`` on the same connection, in one round trip.

    ``WAIT`` confirms that the replicas have everything *its* connection wrote
    (the script's writes, and everything written before them: replication is in
    order), hence one pipeline on the primary that holds the keys (:func:`on_node`): ``EVALSHA`` of
    the script, then ``WAIT`` right after it.  The script is expected to be loaded (the store loads
    its scripts at start); a server that answers ``NOSCRIPT`` (restarted, flushed, a new primary) has
    nothing run, is given the script (``SCRIPT LOAD``) and the two are sent again.  (redis-py's
    ``Script`` in a pipeline would ask ``SCRIPT EXISTS`` first, a round trip on every write.)  When
    ``wrote(result)`` says the result acknowledges a write and fewer than ``replicas`` confirmed in
    time: :class:`NotReplicated`.
    """
    def run(node: redis.Redis) -> Any:
        for attempt in range(2):
            with node.pipeline(transaction=False) as pipe:
                pipe.evalsha(script.sha, len(keys), *keys, *args)
                pipe.wait(replicas, timeout_ms)
                try:
                    result, confirmed = pipe.execute()
                except redis.exceptions.NoScriptError:
                    if attempt:
                        raise
                    node.script_load(script.script)
                    continue
            if wrote(result) and confirmed < replicas:
                raise NotReplicated(confirmed, replicas)
            return result

    return on_node(client, keys[0], run)


# -- readiness -------------------------------------------------------------------------------------
def check_ready(client: Client, min_replicas: int = 0) -> str | None:
    """Raise :class:`NotReady` unless this service can take writes now; answer what is degraded, or None.

    Every primary must say ``ROLE`` master (a replica, read-only or not, is not:
    what it takes is overwritten by its master's stream), keep its data under
    memory pressure (``maxmemory-policy noeviction``: an evicting Redis drops
    acknowledged events silently) and, with ``min_replicas``, have that many
    replicas connected (else no write can be acknowledged).

    On a cluster, a primary that is down, not ok, or without its replicas takes
    its slots' tables out of service, not the whole service: that is reported
    (the answer names it) while at least one primary serves; none serving, or
    an evicting one, is not ready.
    """
    if kind(client) != "cluster":
        _check_primary(client, min_replicas)
        return None
    troubles: list[str] = []
    nodes: list = []
    for attempt in range(2):  # with the map in hand, then (if that fails) with a fresh one
        try:
            nodes = primaries(client, refresh=bool(attempt))
            break
        except redis.exceptions.RedisError:
            if attempt:
                raise
    if not nodes:
        raise NotReady("the cluster has no primary")
    for node in nodes:
        where = node.get_connection_kwargs().get("port")
        try:
            info = node.execute_command("CLUSTER INFO")
            state = info.get("cluster_state") if isinstance(info, dict) else None
            if state != "ok":
                troubles.append(f"the primary on port {where} sees cluster_state {state}")
                continue
            _check_primary(node, min_replicas)
        except NotReady as exc:
            if "maxmemory-policy" in str(exc):
                raise
            troubles.append(f"the primary on port {where}: {exc}")
        except redis.exceptions.RedisError as exc:
            troubles.append(f"the primary on port {where} does not answer ({type(exc).__name__})")
    if len(troubles) == len(nodes):
        raise NotReady("no primary of the cluster can take writes: " + "; ".join(troubles))
    return "; ".join(troubles) or None


def eviction_policy(node: Any) -> str:
    """A server's ``maxmemory-policy`` (as ``INFO memory`` says: ``CONFIG`` may be disabled on a managed
    Redis)."""
    return node.info("memory").get("maxmemory_policy", "noeviction")


def evicting(client: Client) -> str | None:
    """The ``maxmemory-policy`` of a primary that may evict keys when full (``allkeys-lru``, ...: any
    policy but ``noeviction``), or None when every primary keeps its data.  One ``INFO`` per primary."""
    for node in primaries(client, refresh=False):
        policy = eviction_policy(node)
        if policy != "noeviction":
            return policy
    return None


def _check_primary(node: Any, min_replicas: int) -> None:
    role = node.execute_command("ROLE")
    name = role[0].decode() if isinstance(role[0], bytes) else str(role[0])
    if name != "master":
        raise NotReady(f"the Redis server is a {name}, not a master")
    policy = eviction_policy(node)
    if policy != "noeviction":
        raise NotReady(f"the Redis server's maxmemory-policy is {policy}: it may drop acknowledged events "
                       "when full (set it to noeviction); writes are refused until it is")
    if min_replicas:
        replication = node.info("replication")
        online = sum(1 for k, v in replication.items()
                     if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online")
        if online < min_replicas:
            raise NotReady(f"{online} replica(s) connected, REDIS_MIN_REPLICAS is {min_replicas}: no write can "
                           "be acknowledged")


# -- live stream (pub/sub) -------------------------------------------------------------------------
def publish_command(client: Client) -> str:
    """The command a script publishes a table's messages with: ``SPUBLISH`` on a cluster (Redis 7+: the
    message stays on the shard of the channel's slot, the table's), else ``PUBLISH``.

    The channel must be hash-tagged like the table's keys (``{t:<id>}:...``) and
    passed to the script in KEYS, like every key it touches.
    """
    return "SPUBLISH" if kind(client) == "cluster" else "PUBLISH"
