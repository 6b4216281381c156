"""``GET /v1/tables/{id}/stream`` against real ``serve`` processes (two instances on one Redis).

Every test reads what real sockets carry: the SSE frames of docs/api.md, in order,
with no gap and no duplicate across reconnects, deletions, a stalled client
and a Redis restart.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from service.store.embedded import EmbeddedRedis, free_port
from tests.loopback import raise_fd_limit
from tests.served import ROOT, Served, Stream, expire_table

pytestmark = pytest.mark.slow  # (a real server, or long runs: the fast lane leaves it out)

SEATS = [0, 0, 1, 2, 0, 3, 1, 0]
TILES = ["1m", "2m", "3m", "4m", "5m", "6m", "7m", "8m"]


def event_bodies(count: int) -> list[dict]:
    """``count`` valid table events: rounds of round_start, eight concealed kongs, round_end."""
    out: list[dict] = []
    while len(out) < count:
        out.append({"type": "round_start"})
        out.extend({"type": "kong", "seat": s, "kind": "concealed", "tile": t} for s, t in zip(SEATS, TILES))
        out.append({"type": "round_end"})
    return out[:count]


class Table:
    def __init__(self, served: Served) -> None:
        status, _, body = served.request("POST", "/v1/tables", {"players": ["东", "南", "西", "北"]})
        assert status == 201, body
        created = json.loads(body)
        self.id, self.token, self.read_token = created["id"], created["token"], created["read_token"]
        self.posted: list[dict] = []  # the 201 bodies

    def post(self, served: Served, bodies: list[dict]) -> list[dict]:
        out = []
        for body in bodies:
            status, _, raw = served.request("POST", f"/v1/tables/{self.id}/events", body,
                                            {"Authorization": f"Bearer {self.token}"})
            assert status == 201, raw
            out.append(json.loads(raw))
        self.posted.extend(out)
        return out

    def delete(self, served: Served) -> None:
        status, _, _ = served.request(
            "DELETE", f"/v1/tables/{self.id}", headers={"Authorization": f"Bearer {self.token}"}
        )
        assert status == 204

    def listed(self, served: Served) -> list[dict]:
        status, _, raw = served.request("GET", f"/v1/tables/{self.id}/events?limit=500",
                                        headers={"Authorization": f"Bearer {self.read_token}"})
        assert status == 200
        return json.loads(raw)["events"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory, redis_server):
    """Two `serve` instances on the session Redis (1 s heartbeats, small subscriber buffers)."""
    env = {"REDIS_URL": redis_server.url, "STREAM_HEARTBEAT": "1", "STREAM_BUFFER": "8"}
    a = Served(tmp_path_factory.mktemp("a") / "serve.log", env)
    try:
        b = Served(tmp_path_factory.mktemp("b") / "serve.log", env)
    except BaseException:
        a.stop()
        raise
    yield a, b
    assert b.stop() == 0 and a.stop() == 0
    for served in (a, b):
        log = "\n".join(served.log_lines())
        assert "Traceback" not in log and "[ERROR]" not in log and '"level":"ERROR"' not in log


def check_frames(received: list[dict], table: Table, listed: list[dict], first_seq: int = 1) -> None:
    """Records in order from ``first_seq``, each as /events lists it plus the 201's version and balances."""
    assert [r["seq"] for r in received] == list(range(first_seq, first_seq + len(received)))
    by_seq = {e["seq"]: e for e in listed}
    for rec in received:
        reply = table.posted[rec["seq"] - 1]
        assert rec["version"] == reply["version"] == rec["seq"]
        assert rec["balances"] == reply["balances"]
        assert {k: v for k, v in rec.items() if k not in ("version", "balances")} == by_seq[rec["seq"]]


def next_event(stream: Stream, within: float = 10.0) -> dict | None:
    """The next block that is an event (heartbeat comments skipped), or the last block read once
    ``within`` seconds have passed (or None: the stream closed)."""
    deadline = time.monotonic() + within
    block = stream.next()
    while block is not None and block["event"] is None and time.monotonic() < deadline:
        block = stream.next()
    return block


def test_subscribe_on_one_instance_receive_what_the_other_records(pair):
    a, b = pair
    table = Table(b)
    stream = Stream(a.port, table.id, table.read_token)
    assert stream.status == 200 and stream.headers["content-type"].startswith("text/event-stream")
    assert stream.headers["cache-control"] == "no-store"
    opening = stream.next()
    assert opening["retry"] == "3000" and opening["event"] is None
    table.post(b, event_bodies(25))
    received = stream.records(25)
    check_frames(received, table, table.listed(a))
    stream.close()


def test_resume_after_a_dropped_connection_with_last_event_id(pair):
    a, b = pair
    table = Table(a)
    stream = Stream(b.port, table.id, table.token)
    table.post(a, event_bodies(5))
    first = stream.records(5)
    stream.close()  # the phone loses its connection...
    table.post(a, event_bodies(12)[5:])  # ...while 7 more are recorded
    resumed = Stream(b.port, table.id, table.read_token, last_event_id=first[-1]["seq"])
    live = threading.Thread(target=table.post, args=(a, event_bodies(20)[12:]))
    live.start()  # more arrive while the missed ones are being sent: the seam
    rest = resumed.records(15)
    live.join()
    check_frames(first + rest, table, table.listed(a))
    resumed.close()
    # ?after= does the same; from 0 it replays the whole log with the balances after each record
    replay = Stream(a.port, table.id, table.read_token, query="?after=0")
    check_frames(replay.records(20), table, table.listed(a))
    replay.close()
    # Last-Event-ID wins over ?after= (an EventSource reconnects to the same URL)
    both = Stream(a.port, table.id, table.read_token, last_event_id=18, query="?after=3")
    assert [r["seq"] for r in both.records(2)] == [19, 20]
    both.close()


@pytest.mark.parametrize("end", ["delete", "expire"])
def test_a_deleted_or_expired_table_sends_deleted_and_closes_every_stream(pair, redis_server, end):
    a, b = pair
    table = Table(a)
    streams = [Stream(a.port, table.id, table.token), Stream(b.port, table.id, table.read_token)]
    table.post(b, event_bodies(2))
    for stream in streams:
        stream.records(2)
    if end == "delete":
        table.delete(b)
    else:  # an expired table's keys are gone, and nothing is published: each worker looks once a heartbeat
        with redis.Redis.from_url(redis_server.url) as r:
            expire_table(r, table.id)
    for stream in streams:
        block = next_event(stream, within=5.0)  # (1 s heartbeats here)
        assert block["event"] == "deleted" and json.loads(block["data"]) == {"id": table.id}
        assert stream.next() is None  # closed
        stream.close()
    # a deleted table cannot be followed (404, as for reads); an expired one left nothing behind, so its
    # token is no token of a table (401, as for any unknown id)
    assert Stream(a.port, table.id, table.token).status == (404 if end == "delete" else 401)


def test_heartbeat_comments_on_an_idle_stream(pair):
    a, _ = pair
    table = Table(a)
    stream = Stream(a.port, table.id, table.read_token)
    stream.next()  # retry advice
    comments = [stream.next() for _ in range(3)]
    assert all(c["comments"] == ["keep-alive"] and c["event"] is None and c["data"] is None for c in comments)
    stream.close()


def test_auth_and_input_errors_are_problems(pair):
    a, _ = pair
    table, other = Table(a), Table(a)
    cases = [
        (Stream(a.port, table.id, None), 401, "unauthorized"),
        (Stream(a.port, table.id, other.token), 401, "unauthorized"),
        (Stream(a.port, "f" * 16, table.token), 401, "unauthorized"),  # (an unknown id: as a wrong token)
        (Stream(a.port, "not-an-id", table.token), 401, "unauthorized"),
        (Stream(a.port, table.id, None, query=f"?token={table.token}"), 400, "token_in_query"),
        (Stream(a.port, table.id, table.token, query="?access_token=x"), 400, "token_in_query"),
        (Stream(a.port, table.id, table.token, last_event_id="-1"), 422, "invalid_input"),
        (Stream(a.port, table.id, table.token, query="?after=x"), 422, "invalid_input"),
    ]
    for stream, status, code in cases:
        assert stream.status == status and stream.headers["content-type"] == "application/problem+json"
        assert json.loads(stream.body)["code"] == code
        stream.close()
    # the read token and the write token both follow the table
    for token in (table.read_token, table.token):
        stream = Stream(a.port, table.id, token)
        assert stream.status == 200
        stream.close()


def test_a_stalled_subscriber_delays_no_one_and_is_told_to_resync(pair):
    a, b = pair
    table = Table(a)
    stalled = Stream(a.port, table.id, table.read_token, rcvbuf=4096)  # connects, then never reads
    healthy = Stream(a.port, table.id, table.read_token)
    bodies = event_bodies(400)
    read: list = []
    reader = threading.Thread(target=lambda: read.extend(healthy.records(400)))  # it reads as they come
    reader.start()
    table.post(b, bodies)  # every write answered while the stalled client blocks its socket
    reader.join(timeout=60)
    assert not reader.is_alive(), "the healthy reader did not get its 400 records"
    check_frames(read, table, table.listed(b))  # all, in order, before the stalled one reads a byte
    healthy.close()
    # now it reads: a prefix of the log in order, then `resync` naming the last seq it got, then the end
    got, end = [], None
    while (block := stalled.next()) is not None:
        if block["event"] == "record":
            got.append(json.loads(block["data"]))
        elif block["event"] is not None:
            end = block
    assert end is not None and end["event"] == "resync", "the stalled subscriber was not cut off"
    assert [r["seq"] for r in got] == list(range(1, len(got) + 1)) and len(got) < 400
    assert json.loads(end["data"]) == {"after": len(got)}
    stalled.close()
    # it resumes where it stopped
    resumed = Stream(a.port, table.id, table.read_token, last_event_id=len(got))
    assert [r["seq"] for r in resumed.records(400 - len(got))] == list(range(len(got) + 1, 401))
    resumed.close()


def test_streams_survive_a_redis_restart_without_gaps(tmp_path):
    redis_server = EmbeddedRedis(tmp_path / "redis", port=free_port())
    redis_server.start()
    served = None
    try:
        served = Served(tmp_path / "serve.log", {"REDIS_URL": redis_server.url, "STREAM_HEARTBEAT": "1"}, workers=1)
        table = Table(served)
        stream = Stream(served.port, table.id, table.read_token)
        table.post(served, event_bodies(3))
        received = stream.records(3)
        redis_server.restart()  # same port, data from the AOF; the pub/sub connection is lost
        for body in event_bodies(8)[3:]:  # written as soon as Redis answers again
            for _ in range(50):
                status, _, raw = served.request("POST", f"/v1/tables/{table.id}/events", body,
                                                {"Authorization": f"Bearer {table.token}"})
                if status != 503:
                    break
            assert status == 201, raw
            table.posted.append(json.loads(raw))
        received += stream.records(5)
        table.post(served, event_bodies(10)[8:])  # and live delivery resumed
        received += stream.records(2)
        check_frames(received, table, table.listed(served))
        stream.close()
        assert served.stop() == 0
        log = "\n".join(served.log_lines())
        assert "stream pub/sub connection lost" in log and "Traceback" not in log
    finally:
        if served is not None:
            served.stop()
        redis_server.stop()


def readme_follow(tmp_path) -> Path:
    """The README's ``follow.py``, as written."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Following a table live"):]
    script = tmp_path / "follow.py"
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "no Python block in the section"
    script.write_text(found.group(1))
    return script


def test_the_readme_example_follows_a_table(pair, tmp_path):
    """The README's Python example, run as written, against a real server."""
    a, b = pair
    script = readme_follow(tmp_path)
    table = Table(a)
    replies = table.post(a, event_bodies(3))
    proc = subprocess.Popen([sys.executable, str(script), f"http://127.0.0.1:{b.port}", table.id, table.read_token,
                             "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(60, proc.kill)  # never hang the suite
    watchdog.start()
    try:
        lines = [proc.stdout.readline() for _ in range(3)]  # from the log: it is subscribed by now
        replies += table.post(a, event_bodies(5)[3:])  # live
        lines += [proc.stdout.readline() for _ in range(2)]
        table.delete(a)
        out, err = proc.communicate(timeout=30)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
    assert len(lines) == 5
    for line, reply in zip(lines, replies):
        assert line.startswith(f"#{reply['seq']} ") and line.rstrip().endswith(str(reply["balances"]))
    assert out == "the table was deleted\n" and proc.returncode == 0, (out, err)


def test_the_readme_example_says_finished_and_stops_at_a_rotation(pair, tmp_path):
    """``finished`` is told and the stream goes on; ``rotated`` stops the script (its token no longer works)
    instead of reconnecting."""
    a, b = pair
    table = Table(a)
    table.post(a, [{"type": "round_start"}, {"type": "round_end"}])
    proc = subprocess.Popen([sys.executable, str(readme_follow(tmp_path)), f"http://127.0.0.1:{b.port}", table.id,
                             table.read_token, "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(60, proc.kill)
    watchdog.start()
    try:
        lines = [proc.stdout.readline() for _ in range(2)]  # the two records: it is subscribed by now
        status, _, body = a.request("POST", f"/v1/tables/{table.id}/finish", None,
                                    {"Authorization": f"Bearer {table.token}"})
        assert status == 200, body
        lines.append(proc.stdout.readline())
        status, _, body = a.request("POST", f"/v1/tables/{table.id}/tokens/rotate", None,
                                    {"Authorization": f"Bearer {table.token}"})
        assert status == 200, body
        out, err = proc.communicate(timeout=30)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
    assert [line.split(":")[0] for line in lines[:2]] == ["#1 round_start", "#2 round_end"], lines
    assert lines[2].startswith("the table was finished at 20"), lines
    assert out == "" and proc.returncode == 1 and "tokens were rotated" in err, (out, err)


def test_the_openapi_document_describes_the_stream():
    from service.api.app import openapi_dict

    op = openapi_dict()["paths"]["/v1/tables/{table_id}/stream"]["get"]
    assert "text/event-stream" in op["responses"]["200"]["content"]
    assert {p["name"] for p in op["parameters"]} >= {"after", "Last-Event-ID"}
    assert op["security"] == [{"tableToken": ["read"]}, {"apiKey": []}] and {"401", "404"} <= set(op["responses"])


@pytest.fixture(scope="module")
def narrow(tmp_path_factory, redis_server):
    """One `serve` worker, two streams per table at most, the default 15 s heartbeat."""
    served = Served(tmp_path_factory.mktemp("narrow") / "serve.log",
                    {"REDIS_URL": redis_server.url, "STREAM_MAX_PER_TABLE": "2"}, workers=1)
    yield served
    served.stop()


def test_a_closed_stream_frees_its_slot_at_once(narrow):
    """A client that drops its stream gives its slot back when it closes, not at the next heartbeat:
    700 open-and-drop cycles leave the table's followers room."""
    table = Table(narrow)
    for _ in range(30):
        dropped = [Stream(narrow.port, table.id, table.read_token) for _ in range(2)]
        assert [s.status for s in dropped] == [200, 200]
        for s in dropped:
            s.close()
        deadline = time.monotonic() + 5  # (the heartbeat is 15 s: well before it)
        while (probe := Stream(narrow.port, table.id, table.read_token)).status == 429:
            probe.close()
            assert time.monotonic() < deadline, "the dropped streams kept their slots"
            time.sleep(0.05)
        probe.close()


def test_a_stream_on_a_worker_holding_over_a_thousand_connections_stays_open(tmp_path, redis_server):
    """A worker with more than 1,024 open connections (so that a new socket's descriptor is past what
    ``select`` takes) keeps a new stream open and delivers its records."""
    raise_fd_limit()
    served = Served(tmp_path / "serve.log", {"REDIS_URL": redis_server.url, "KEEPALIVE": "120"}, workers=1)
    idle: list[socket.socket] = []
    try:
        table = Table(served)
        for _ in range(1100):  # idle keep-alive connections: the worker holds each one's socket
            idle.append(socket.create_connection(("127.0.0.1", served.port), timeout=10))
        probe = socket.create_connection(("127.0.0.1", served.port), timeout=10)  # (each connect is accepted:
        probe.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")  # the worker has read up to here)
        assert b" 200 " in probe.recv(4096).split(b"\r\n", 1)[0]
        idle.append(probe)
        stream = Stream(served.port, table.id, table.read_token)
        assert stream.status == 200
        table.post(served, event_bodies(2))
        check_frames(stream.records(2), table, table.listed(served))
        stream.close()
    finally:
        for sock in idle:
            sock.close()
        served.stop()


@pytest.mark.slow
def test_never_reading_streams_of_a_long_table_hold_a_bounded_buffer_each(tmp_path, redis_server):
    """64 clients open a 20,000-record table's stream from its start and never read: the worker reads,
    folds and sends each a chunk at a time as its socket takes it, so it holds a bounded buffer per
    stream (≤ 50 MB for all of them), and answers other requests within 50 ms meanwhile."""
    from service.store.table_store import TableStore
    from tests.loopback import cycle, worker_pids

    store = TableStore(redis.Redis.from_url(redis_server.url))
    created = store.create(["东", "南", "西", "北"], "xuezhan")
    events = cycle()
    for _ in range(20_000):
        store.append(created.id, next(events))
    served = Served(tmp_path / "serve.log", {"REDIS_URL": redis_server.url, "STREAM_MAX_PER_TABLE": "100"},
                    workers=1)
    try:
        worker = worker_pids(served.proc.pid)[0]

        def rss_kib() -> int:
            with open(f"/proc/{worker}/status") as f:
                return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))

        warm = Stream(served.port, created.id, created.read_token, last_event_id=19_990)  # the code paths
        assert len(warm.records(10)) == 10
        warm.close()
        before = rss_kib()
        streams = [Stream(served.port, created.id, created.read_token, last_event_id=0, rcvbuf=4096)
                   for _ in range(64)]
        assert all(s.status == 200 for s in streams)
        latencies = []
        for _ in range(100):
            started = time.monotonic()
            status, _, _ = served.request("POST", "/v1/hands/ting", {"hand": {"tiles": "1112345678999m"}})
            latencies.append(time.monotonic() - started)
            assert status == 200
        grown = rss_kib() - before
        first = streams[0].records(20_000)  # and a stream that reads gets every record, in order
        assert [r["seq"] for r in first] == list(range(1, 20_001))
        for s in streams:
            s.close()
    finally:
        served.stop()
    latencies.sort()
    assert latencies[98] < 0.05, latencies[-5:]
    assert grown < 50 * 1024, f"{grown} KiB more for 64 unread streams"


def test_a_finished_table_tells_its_streams_and_they_go_on(pair):
    a, b = pair
    table = Table(a)
    table.post(b, [{"type": "round_start"}, {"type": "round_end"}])
    stream = Stream(a.port, table.id, table.read_token, last_event_id=2)
    status, _, raw = b.request(
        "POST", f"/v1/tables/{table.id}/finish", headers={"Authorization": f"Bearer {table.token}"}
    )
    assert status == 200
    block = next_event(stream, within=5.0)
    assert block["event"] == "finished" and json.loads(block["data"]) == {"finished_at": json.loads(raw)["finished_at"]}
    assert next_event(stream, within=1.5)["comments"] == ["keep-alive"]  # (1 s heartbeats: it goes on)
    stream.close()


def test_a_finished_tables_next_table_is_told_on_its_streams_and_they_go_on(pair):
    """Another instance starts the next table: a stream of the finished table (its read token) hears
    ``event: next`` naming it, and the same read token opens the next table's stream."""
    a, b = pair
    table = Table(a)
    auth = {"Authorization": f"Bearer {table.token}"}
    assert b.request("POST", f"/v1/tables/{table.id}/finish", headers=auth)[0] == 200
    stream = Stream(a.port, table.id, table.read_token, last_event_id=0)
    assert stream.status == 200
    status, _, raw = b.request("POST", f"/v1/tables/{table.id}/next", {}, auth)
    assert status == 201, raw
    next_id = json.loads(raw)["id"]
    block = next_event(stream, within=5.0)
    assert block["event"] == "next" and json.loads(block["data"]) == {"next": next_id}
    assert next_event(stream, within=1.5)["comments"] == ["keep-alive"]  # (it goes on)
    stream.close()
    follow = Stream(a.port, next_id, table.read_token, last_event_id=0)
    assert follow.status == 200
    follow.close()


def test_a_reload_ends_the_streams_at_once_and_the_new_workers_serve_everything(tmp_path, redis_server):
    """SIGHUP: the old worker ends its streams at once (not at the graceful timeout, 10 s) and
    exits; the new one answers every request, ``/metrics`` included (the metrics directory the
    workers share outlives the old worker)."""
    served = Served(tmp_path / "serve.log", {"REDIS_URL": redis_server.url, "STREAM_HEARTBEAT": "1"}, workers=1)
    try:
        table = Table(served)
        table.post(served, event_bodies(2))
        stream = Stream(served.port, table.id, table.read_token, last_event_id=2)
        assert stream.status == 200
        assert stream.next()["comments"]  # the opening comment: the stream is live
        started = time.monotonic()
        served.proc.send_signal(signal.SIGHUP)
        while stream.next() is not None:  # heartbeats until the old worker ends the stream
            assert time.monotonic() - started < 5, "the stream outlived the reload"
        for path in ("/healthz", "/metrics"):
            status, _, body = served.request("GET", path)
            assert status == 200, body
        assert table.post(served, event_bodies(3)[2:])[0]["version"] == 3
    finally:
        assert served.stop() == 0
    log = "\n".join(served.log_lines())
    assert "Traceback" not in log and '"level":"ERROR"' not in log
