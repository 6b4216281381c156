"""Webhooks across processes and failures: ``python -m service webhooks`` SIGKILLed and started again,
Redis SIGKILLed and restarted on its AOF, the dispatcher inside ``serve``, a Redis Cluster."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from service.store import keys, redis_client
from service.store.embedded import EmbeddedRedis, free_port
from service.webhooks.dispatcher import Dispatcher, DispatcherOptions
from tests.receivers import Receiver, wait_until
from tests.served import Served, stop_process
from tests.test_webhooks import (
    ALL,
    KEYS,
    KONG,
    acme,
    kong,
    make_app,
    new_table,
    post,
    register,
)

pytestmark = pytest.mark.slow  # (processes SIGKILLed, servers, a cluster: the fast lane leaves it out)

ROOT = Path(__file__).resolve().parent.parent


def seqs(receiver: Receiver, table_id: str) -> list[int]:
    return [m["data"]["seq"] for m in receiver.messages()
            if m["data"]["table"] == table_id and m["type"] == "event.recorded"]


def dispatcher_process(redis_url: str, log_path: Path) -> subprocess.Popen:
    env = {**os.environ, "REDIS_URL": redis_url, "API_KEYS": KEYS, "WEBHOOK_ALLOW_PRIVATE": "1",
           "WEBHOOK_TIMEOUT": "2", "WEBHOOK_BACKOFF_MS": "50", "WEBHOOK_SWEEP_SECONDS": "1"}
    return subprocess.Popen([sys.executable, "-m", "service", "webhooks"], cwd=ROOT, env=env,
                            stdout=open(log_path, "ab"), stderr=subprocess.STDOUT, start_new_session=True)


def test_delivery_resumes_after_the_dispatcher_process_is_sigkilled(redis_url, tmp_path):
    client = make_app(redis_url).test_client()
    receiver = Receiver()
    receiver.plan.append(("hang", 60.0))  # the first delivery is in flight when the dispatcher dies
    first = dispatcher_process(redis_url, tmp_path / "first.log")
    second = None
    try:
        made = register(client, receiver.url, ["event.recorded"])
        t = new_table(client)
        for event in ({"type": "round_start"}, KONG, kong("2m")):
            assert post(client, t, event).status_code == 201
        wait_until(lambda: not receiver.plan, timeout=30, what="the first delivery in flight")
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        second = dispatcher_process(redis_url, tmp_path / "second.log")
        for event in (kong("3m"),):
            assert post(client, t, event).status_code == 201
        # the lane's lease expires (15 s), the second dispatcher takes over: everything, in order
        receiver.wait(lambda r: seqs(r, t["id"])[-1:] == [4], timeout=60, what="all four delivered")
        got = seqs(receiver, t["id"])
        assert got == [1, 2, 3, 4], got  # (seq 1's hung attempt was answered only after the sender was gone)
        receiver.verify(made["secret"])
    finally:
        for proc in (first, second):
            if proc is not None:
                stop_process(proc)
        receiver.close()


def test_delivery_resumes_after_redis_is_sigkilled_and_restarted(tmp_path):
    server = EmbeddedRedis(tmp_path / "redis", port=free_port()).start()
    receiver = Receiver(default=500)  # nothing gets through before the crash: it all waits in the outbox
    dispatcher = None
    try:
        client = make_app(server.url).test_client()
        made = register(client, receiver.url, ["event.recorded"])
        options = DispatcherOptions(timeout=1.0, backoff_ms=50, poll=0.02, sweep_every=1.0, allow_private=True,
                                    lane_lease_ms=3000)
        dispatcher = Dispatcher(redis_client.connect(server.url), client.application.extensions["webhooks"],
                                options).start()
        t = new_table(client)
        for event in ({"type": "round_start"}, KONG, kong("2m")):
            assert post(client, t, event).status_code == 201  # acknowledged: in the AOF (appendfsync always)
        receiver.wait(lambda r: len(r.received) >= 2, what="failed attempts")
        server.kill()
        server.start()
        receiver.default = 200
        assert post(client, t, kong("3m")).status_code == 201
        receiver.wait(lambda r: seqs(r, t["id"])[-1:] == [4], timeout=60, what="all four delivered")
        assert seqs(receiver, t["id"]) == [1, 2, 3, 4]
        receiver.verify(made["secret"])
    finally:
        if dispatcher is not None:
            dispatcher.stop(wait=3.0)
        receiver.close()
        server.stop()


def test_serve_runs_a_dispatcher_in_its_workers(redis_url, tmp_path):
    receiver = Receiver()
    served = Served(tmp_path / "serve.log", env={"REDIS_URL": redis_url, "API_KEYS": KEYS,
                                                  "WEBHOOK_ALLOW_PRIVATE": "1"})
    try:
        status, _, body = served.request("POST", "/v1/webhooks", {"url": receiver.url, "events": ALL}, acme())
        assert status == 201, body
        status, _, body = served.request("POST", "/v1/tables", {"players": ["东", "南", "西", "北"]}, acme())
        assert status == 201, body
        table = json.loads(body)
        status, _, _ = served.request("POST", f"/v1/tables/{table['id']}/events", {"type": "round_start"},
                                      {"Authorization": f"Bearer {table['token']}"})
        assert status == 201
        receiver.wait(lambda r: len(r.messages()) >= 2, timeout=30, what="two deliveries")
        assert [m["type"] for m in receiver.messages()] == ["table.created", "event.recorded"]
        assert max(Counter(r["headers"]["webhook-id"] for r in receiver.received).values()) == 1
    finally:
        served.stop()
        receiver.close()


def test_on_a_cluster_the_outbox_is_in_the_tables_slot_and_delivery_works(cluster_url):
    app = make_app(cluster_url)
    client = app.test_client()
    receiver = Receiver()
    made = register(client, receiver.url, ["event.recorded", "table.created"])
    dispatcher = Dispatcher(redis_client.connect(cluster_url), app.extensions["webhooks"],
                            DispatcherOptions(timeout=1.0, backoff_ms=50, poll=0.02, sweep_every=3600.0,
                                              allow_private=True)).start()
    try:
        tables = [new_table(client) for _ in range(6)]  # (random ids: spread over the primaries)
        cluster = redis_client.cluster_of(redis_client.connect(cluster_url))
        for t in tables:
            slot = cluster.keyslot(keys.meta(t["id"]))
            assert {cluster.keyslot(k) for k in (keys.outbox(t["id"]), keys.lanes(t["id"]), keys.lease(t["id"]),
                                                  keys.lease(t["id"], made["id"]))} == {slot}
            for event in ({"type": "round_start"}, KONG):
                assert post(client, t, event).status_code == 201
        receiver.wait(lambda r: len(r.messages()) >= 18, timeout=30, what="18 deliveries")
        for t in tables:
            assert seqs(receiver, t["id"]) == [1, 2]
        receiver.verify(made["secret"])
        # the sweep reads every primary
        assert post(client, tables[0], kong("2m")).status_code == 201
        cluster.delete(keys.WEBHOOKS_DUE)
        dispatcher.sweep()
        receiver.wait(lambda r: seqs(r, tables[0]["id"]) == [1, 2, 3], timeout=30, what="the swept delivery")
    finally:
        dispatcher.stop(wait=3.0)
        receiver.close()
