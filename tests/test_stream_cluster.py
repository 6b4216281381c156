"""The live table stream on a Redis Cluster: sharded pub/sub (SPUBLISH in the append script, SSUBSCRIBE
in each worker's hub), so a table's messages stay on the node of its slot.

Two ``serve`` instances on the session cluster: streams opened on one, events recorded through the
other, for tables on every primary; each channel has its subscribers on its own node only.
"""

from __future__ import annotations

import json

import pytest
import redis

from service.store import keys
from tests.served import Served, Stream
from tests.test_stream import Table, check_frames, event_bodies
from tests.topologies import server_version

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(server_version() < (7,), reason="sharded pub/sub (SPUBLISH) needs Redis 7"),
]


@pytest.fixture
def pair(redis_cluster, cluster_url, tmp_path):
    env = {"REDIS_URL": cluster_url, "STREAM_HEARTBEAT": "1"}
    a = Served(tmp_path / "a.log", env, workers=1)
    try:
        b = Served(tmp_path / "b.log", env, workers=1)
    except BaseException:
        a.stop()
        raise
    yield a, b
    assert b.stop() == 0 and a.stop() == 0
    for served in (a, b):
        assert "Traceback" not in "\n".join(served.log_lines())


def test_streams_on_a_cluster_use_each_tables_shard(redis_cluster, pair):
    a, b = pair
    tables: list[Table] = []
    while len({redis_cluster.owner(keys.meta(t.id)).port for t in tables}) < 3:  # tables on every primary
        tables.append(Table(b))
    streams = [Stream(a.port, t.id, t.read_token) for t in tables]
    for stream in streams:
        assert stream.status == 200 and stream.next()["retry"] == "3000"

    # every channel has its one subscriber (instance a's hub) on the node of its slot, and only there
    for t in tables:
        channel = keys.channel(t.id)
        for node in redis_cluster.primaries():
            reply = redis.Redis(port=node.port).pubsub_shardnumsub(channel)
            counts = (
                dict(reply) if reply and isinstance(reply[0], (tuple, list)) else dict(zip(reply[::2], reply[1::2]))
            )
            here = node.port == redis_cluster.owner(keys.meta(t.id)).port
            assert counts[channel.encode()] == (1 if here else 0), (channel, node.port)

    for t, stream in zip(tables, streams):
        t.post(b, event_bodies(6))
        check_frames(stream.records(6), t, t.listed(a))

    gone = tables[0]
    gone.delete(b)
    block = streams[0].next()
    while block["event"] is None:  # heartbeats
        block = streams[0].next()
    assert block["event"] == "deleted" and json.loads(block["data"]) == {"id": gone.id}
    for stream in streams:
        stream.close()

