"""The serving model with real sockets against a real ``serve``: slow clients, deadlines, bodies.

Two servers per module: one with the default settings (whose deadlines must be
the README's), one with short deadlines so that the slow-client test stays
short.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import re
import socket
import threading
import time
from collections import Counter
from types import SimpleNamespace

import pytest
from gunicorn.workers.ggevent import GeventWorker

from service.config import Settings
from service.serving import ServiceWorker, gunicorn_options
from tests.served import ROOT, Served

TING = json.dumps({"hand": {"tiles": "1112345678999m"}}).encode()
SHORT_DEADLINE = 4


@pytest.fixture(scope="module")
def default_served(tmp_path_factory, redis_server):
    served = Served(tmp_path_factory.mktemp("default") / "serve.log", {"REDIS_URL": redis_server.url})
    yield served
    served.stop()


@pytest.fixture(scope="module")
def quick_served(tmp_path_factory, redis_server):
    served = Served(tmp_path_factory.mktemp("quick") / "serve.log",
                    {"REDIS_URL": redis_server.url, "REQUEST_TIMEOUT": str(SHORT_DEADLINE), "KEEPALIVE": "1"})
    yield served
    served.stop()


def raw(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Send ``data`` on a fresh connection and read until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        out = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return out
            out += chunk


def responses(data: bytes) -> list[tuple[int, dict, bytes]]:
    """Split a byte stream of HTTP/1.1 responses with Content-Length bodies."""
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length", 0))
        out.append((int(lines[0].split()[1]), headers, rest[:length]))
        data = rest[length:]
    return out


def read_one(sock: socket.socket) -> tuple[int, dict, bytes]:
    """Read one response (with a Content-Length) from a kept-alive connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a whole response: {data!r}"
        data += chunk
    head = data.partition(b"\r\n\r\n")[0]
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
    while len(data) < len(head) + 4 + length:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a whole response: {data!r}"
        data += chunk
    return responses(data)[0]


def post(body: bytes, extra: bytes = b"", close: bool = True) -> bytes:
    return (b"POST /v1/hands/ting HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n" + extra
            + (b"Connection: close\r\n" if close else b"") + b"Content-Length: %d\r\n\r\n" % len(body) + body)


# -- defaults ------------------------------------------------------------------------------------
def test_defaults_are_what_the_readme_says(default_served):
    readme = (ROOT / "README.md").read_text()
    defaults = Settings()

    def documented(name: str) -> str:
        match = re.search(r"^\| `%s` \| `([^`]*)` \|" % name, readme, re.M)
        assert match, f"README's configuration table has no {name}"
        return match.group(1)

    assert int(documented("REQUEST_TIMEOUT")) == defaults.request_timeout == 10
    assert int(documented("KEEPALIVE")) == defaults.keepalive == 5
    assert int(documented("MAX_CONNECTIONS")) == defaults.max_connections
    options = gunicorn_options(defaults)
    assert options["worker_class"] == "service.serving.ServiceWorker"
    assert options["worker_connections"] == defaults.max_connections
    # ...and a `serve` with nothing configured runs with them (each worker says so when it boots)
    boots = [line for line in default_served.log_lines() if "requests must arrive whole" in line]
    assert len(boots) == 2 and all("within 10 s" in line and "keep-alive 5 s" in line for line in boots)
    assert issubclass(ServiceWorker, GeventWorker)


# -- slow clients ---------------------------------------------------------------------------------
async def _slow_clients_scenario(port: int, count: int) -> dict:
    slow = []
    for i in range(count):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        kind = ("idle", "head", "body")[i % 3]
        if kind == "head":
            writer.write(b"POST /v1/hands/ting HTTP/1.1\r\nHost: t\r\n")
        elif kind == "body":
            writer.write(post(TING, close=False)[:-len(TING)] + TING[:1])
        slow.append((kind, reader, writer, asyncio.ensure_future(reader.read())))

    async def trickle() -> None:
        sent = 1
        while True:
            await asyncio.sleep(0.5)
            for kind, _, writer, ended in slow:
                if ended.done() or writer.is_closing():
                    continue
                try:
                    if kind == "head":
                        writer.write(b"X-Slow: 1\r\n")
                    elif kind == "body" and sent < len(TING) - 1:
                        writer.write(TING[sent:sent + 1])
                except OSError:
                    pass
            sent += 1

    trickler = asyncio.ensure_future(trickle())
    probes = []
    for _ in range(5):  # other clients, while all of the slow ones are held
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(post(TING))
        answer = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        pending = sum(not ended.done() for *_, ended in slow)
        probes.append((responses(answer)[0][0], pending))
    ends = await asyncio.wait_for(asyncio.gather(*(ended for *_, ended in slow)), 4 * SHORT_DEADLINE + 10)
    trickler.cancel()
    for _, _, writer, _ in slow:
        writer.close()
    return {"probes": probes, "ends": [(kind, end) for (kind, *_), end in zip(slow, ends)]}


def test_slow_clients_do_not_stop_others_and_get_408(quick_served):
    """200 connections sit idle, trickle header lines or trickle a body: others are still answered,
    and each slow one gets a 408 problem once its request has not arrived whole within the deadline."""
    result = asyncio.run(_slow_clients_scenario(quick_served.port, 200))
    assert [status for status, _ in result["probes"]] == [200] * 5
    assert result["probes"][0][1] == 200  # answered while every slow connection was still held
    kinds = {kind: 0 for kind in ("idle", "head", "body")}
    for kind, end in result["ends"]:
        (status, headers, body), = responses(end)  # one answer, then the server closed
        problem = json.loads(body)
        assert status == 408 and headers["content-type"] == "application/problem+json"
        assert problem["code"] == "request_timeout" and problem["status"] == 408
        assert headers["connection"] == "close"
        kinds[kind] += 1
    assert kinds == {"idle": 67, "head": 67, "body": 66}
    log = "\n".join(quick_served.log_lines())
    assert "Traceback" not in log and "[ERROR]" not in log


def test_an_idle_kept_alive_connection_is_closed_without_an_answer(quick_served):
    with socket.create_connection(("127.0.0.1", quick_served.port), timeout=10) as sock:
        sock.sendall(post(TING, close=False))
        assert read_one(sock)[0] == 200
        assert sock.recv(100) == b""  # KEEPALIVE (1 s here) later: closed, nothing sent


# -- bodies and framing ---------------------------------------------------------------------------
CHUNKED = b"POST /v1/hands/ting HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize("body", [
    b"zz\r\n" + TING + b"\r\n0\r\n\r\n",                                      # not a hex size
    b"%x\r\n" % len(TING) + TING + b"XX0\r\n\r\n",                            # no CRLF after the data
    b"%x;\x01\r\n" % len(TING) + TING + b"\r\n0\r\n\r\n",                     # a control byte in an extension
    b"%x\r\n" % len(TING) + TING[:10],                                        # the client gives up mid-chunk
], ids=["bad-size", "missing-terminator", "broken-extension", "truncated"])
def test_malformed_chunked_bodies_are_400_problems_logged_as_warnings(default_served, body):
    if body.endswith(TING[:10]):  # a truncated body: the client half-closes
        with socket.create_connection(("127.0.0.1", default_served.port), timeout=10) as sock:
            sock.sendall(CHUNKED + body)
            sock.shutdown(socket.SHUT_WR)
            assert sock.recv(100) == b""  # nothing to answer: the request never arrived
        return
    (status, headers, payload), = responses(raw(default_served.port, CHUNKED + body))
    assert status == 400 and headers["content-type"] == "application/problem+json"
    problem = json.loads(payload)
    assert problem["status"] == 400 and "chunk" in problem["detail"].lower()
    log = "\n".join(default_served.log_lines())
    assert "Traceback" not in log and "[ERROR]" not in log and '"level":"ERROR"' not in log
    assert "[WARNING] Invalid request" in log


def test_chunked_and_pipelined_requests_and_100_continue_work(default_served):
    port = default_served.port
    chunked = CHUNKED + b"%x\r\n" % 10 + TING[:10] + b"\r\n%x;note=1\r\n" % (len(TING) - 10) + TING[10:] + b"\r\n0\r\n\r\n"
    (status, _, payload), = responses(raw(port, chunked.replace(b"Host: t\r\n", b"Host: t\r\nConnection: close\r\n")))
    assert status == 200 and json.loads(payload)["ting"] is True
    # three requests in one write on one connection: three answers in order
    answers = responses(raw(port, post(TING, close=False) + post(b"{oops", close=False) + post(TING)))
    assert [a[0] for a in answers] == [200, 400, 200]
    # Expect: 100-continue gets its interim answer before the body is read
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        head = post(TING, b"Expect: 100-continue\r\n")[:-len(TING)]
        sock.sendall(head)
        assert sock.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(TING)
        assert read_one(sock)[0] == 200


def test_bodies_over_the_limit_are_413_and_the_connection_closes(default_served):
    big = b"[" + b"1," * 40000 + b"1]"
    (status, headers, payload), = responses(raw(default_served.port, post(big, close=False)))
    assert status == 413 and headers["content-type"] == "application/problem+json"
    chunked = CHUNKED + b"%x\r\n" % len(big) + big + b"\r\n0\r\n\r\n"
    (status, headers, payload), = responses(raw(default_served.port, chunked))
    assert status == 413 and json.loads(payload)["code"] == "payload_too_large"


def test_gunicorn_level_errors_stay_problems(default_served):
    port = default_served.port
    for data, expected in [
        (b"GET /healthz?x=" + b"a" * 9000 + b" HTTP/1.1\r\nHost: t\r\n\r\n", 414),
        (b"GET /healthz HTTP/1.1\r\nHost: t\r\n" + b"X-Big: " + b"b" * 9000 + b"\r\n\r\n", 431),
        (b"BR@KEN / HTTP/1.1\r\n\r\n", 400),
        (b"POST /v1/hands/ting HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
    ]:
        (status, headers, payload), = responses(raw(port, data))
        assert status == expected and headers["content-type"] == "application/problem+json"
        assert json.loads(payload)["status"] == expected


def test_a_burst_of_kept_alive_connections_is_spread_over_the_workers(tmp_path, redis_server):
    """32 keep-alive clients connecting at once, one worker already warm and holding a connection:
    each worker gets about half of them (gevent wakes every worker for a new connection, and
    whichever is free first would take most of a burst; each worker publishes how many it holds
    and one holding more leaves the next to the other)."""
    from bench.client import wait_workers_up

    served = Served(tmp_path / "serve.log", {"REDIS_URL": redis_server.url})
    try:
        wait_workers_up(served.proc.pid, 2)  # a worker still loading the app takes no connection
        warm = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
        for j in range(30):  # one worker answers these, and keeps the connection
            warm.request("POST", "/v1/hands/ting", body=TING, headers={"Content-Type": "application/json",
                                                                        "X-Request-ID": f"warm-{j}"})
            response = warm.getresponse()
            assert response.status == 200 and response.read()
        clients = 32
        start, done = threading.Barrier(clients), threading.Barrier(clients)
        failures: list[str] = []

        def client(i: int) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
            try:
                start.wait(timeout=20)
                for j in range(10):
                    conn.request("POST", "/v1/hands/ting", body=TING,
                                 headers={"Content-Type": "application/json", "X-Request-ID": f"spread-{i}-{j}"})
                    response = conn.getresponse()
                    if response.status != 200 or not response.read():
                        failures.append(f"{i}-{j}: {response.status}")
                done.wait(timeout=20)  # every connection stays open until all have been served
            finally:
                conn.close()

        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        warm.close()
    finally:
        served.stop()
    assert not failures
    access = [json.loads(x) for x in served.log_lines() if x.startswith("{")]
    served_by: dict[str, set] = {}
    for line in access:
        if line.get("logger") == "service.access" and line.get("request_id", "").startswith("spread-"):
            served_by.setdefault(line["request_id"].split("-")[1], set()).add(line["pid"])
    assert len(served_by) == clients and all(len(pids) == 1 for pids in served_by.values()), served_by
    per_worker = Counter(next(iter(pids)) for pids in served_by.values())
    assert len(per_worker) == 2 and max(per_worker.values()) - min(per_worker.values()) <= 4, per_worker


def test_each_worker_gets_a_slot_of_the_shared_counts_and_an_exited_one_frees_it():

    from service.serving import Shares, _child_exit, _pre_fork

    server = SimpleNamespace(app=SimpleNamespace(shares=Shares(slots=2)), WORKERS={})

    def fork(pid: int) -> SimpleNamespace:
        worker = SimpleNamespace(pid=pid)
        _pre_fork(server, worker)
        server.WORKERS[pid] = worker
        return worker

    first, second = fork(101), fork(102)
    assert (first.share_slot, second.share_slot) == (0, 1)
    server.app.shares.publish(0, 7, now_ms=5000)
    server.app.shares.publish(1, 3, now_ms=5000)
    assert server.app.shares.least(now_ms=5000) == 3
    _child_exit(server, server.WORKERS.pop(102))  # its count no longer holds the others back
    assert server.app.shares.least(now_ms=5000) == 7
    third = fork(103)
    assert third.share_slot == 1 and server.app.shares.least(now_ms=5000) == 7  # not beating yet
    server.app.shares.publish(1, 0, now_ms=5000)
    assert server.app.shares.least(now_ms=5000) == 0
    assert fork(104).share_slot is None  # no slot left: that worker accepts without looking


class _Recorder:
    def __init__(self) -> None:
        self.sends: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.sends.append(bytes(data))


@pytest.mark.parametrize("method, headers, chunks, sends", [
    ("POST", [("Content-Length", "11")], [b"hello world"], 1),  # the common answer: one send
    ("GET", [], [b"first", b"second"], 3),  # chunked: head and first chunk, second chunk, last chunk
    ("HEAD", [("Content-Length", "11")], [b"hello world"], 1),  # no body bytes on the wire
    ("POST", [("Content-Length", "0")], [], 1),  # nothing written: the head at close, as before
    ("POST", [("Content-Length", str(70_000))], [b"x" * 70_000], 2),  # over COALESCE_MAX: not copied
    ("POST", [("Content-Length", "10")], [b"01234", b"56789"], 2),
])
def test_a_response_sends_its_head_with_its_first_bytes_and_the_same_bytes_as_gunicorn(
        monkeypatch, method, headers, chunks, sends):

    from gunicorn.config import Config
    from gunicorn.http import wsgi as gunicorn_wsgi

    from service.serving import OneSendResponse

    monkeypatch.setattr(gunicorn_wsgi.util, "http_date", lambda *a: "Tue, 01 Dec 2026 00:00:00 GMT")

    def wire(response_class) -> list[bytes]:
        req = SimpleNamespace(version=(1, 1), method=method, should_close=lambda: False, headers=[])
        sock = _Recorder()
        resp = response_class(req, sock, Config())
        resp.start_response("200 OK", [("Content-Type", "application/json"), *headers])
        for chunk in chunks:
            resp.write(chunk)
        resp.close()
        return sock.sends

    gunicorns, ours = wire(gunicorn_wsgi.Response), wire(OneSendResponse)
    assert b"".join(ours) == b"".join(gunicorns) and b"".join(ours).startswith(b"HTTP/1.1 200 OK\r\n")
    assert len(ours) == sends and len(gunicorns) >= sends


def test_a_worker_leaves_each_new_connection_to_a_less_loaded_one_for_at_most_max_leave(monkeypatch):
    """The wait is per connection: one left before (and taken by the other worker) does not
    shorten the wait for the next."""
    from gevent.server import StreamServer

    from service import serving

    clock = [100.0]
    monkeypatch.setattr(serving.time, "monotonic", lambda: clock[0])
    accepted: list[float] = []
    monkeypatch.setattr(StreamServer, "_do_read", lambda self: accepted.append(clock[0]))

    class Timer:
        def start(self, callback):
            pass

        def stop(self):
            pass

        def close(self):
            pass

    worker = SimpleNamespace(leaves_to_sibling=lambda: True)
    server = object.__new__(type("Server", (serving._BalancedServer,), {"worker": worker}))
    server._watcher, server._timer = None, None
    server.loop = SimpleNamespace(timer=lambda seconds: Timer())

    def looks(until: float) -> None:  # the listener stays readable: a look every RETRY
        while clock[0] < until and not accepted:
            server._do_read()
            clock[0] += serving._BalancedServer.RETRY

    looks(100.1)
    assert accepted and 100.0 + serving._BalancedServer.MAX_LEAVE <= accepted[0] < 100.03
    accepted.clear()
    clock[0] = 101.0  # the next connection, long after: a wait of its own
    server._do_read()
    assert not accepted  # left to the other worker again
    clock[0] = 101.5  # taken by the other worker meanwhile; the one after that:
    server._do_read()
    assert not accepted
    worker.leaves_to_sibling = lambda: False  # this worker now holds no more than any other
    server._do_read()
    assert accepted == [101.5]


def test_a_worker_that_replaces_a_killed_one_gets_its_share_of_new_connections(tmp_path, redis_server):
    """The master frees a dead worker's slot and gives it to the new worker (real gunicorn hooks)."""
    import os
    import signal

    from bench.client import wait_workers_up, worker_pids

    served = Served(tmp_path / "serve.log", {"REDIS_URL": redis_server.url})
    try:
        wait_workers_up(served.proc.pid, 2)
        killed = worker_pids(served.proc.pid)[0]
        os.kill(killed, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while killed in worker_pids(served.proc.pid) or len(worker_pids(served.proc.pid)) < 2:
            assert time.monotonic() < deadline, "no worker replaced the killed one"
            time.sleep(0.05)
        wait_workers_up(served.proc.pid, 2)
        conns = [http.client.HTTPConnection("127.0.0.1", served.port, timeout=10) for _ in range(16)]
        for i, conn in enumerate(conns):  # one after another, each kept open: they alternate
            conn.request("POST", "/v1/hands/ting", body=TING,
                         headers={"Content-Type": "application/json", "X-Request-ID": f"after-{i}"})
            response = conn.getresponse()
            assert response.status == 200 and response.read()
        for conn in conns:
            conn.close()
    finally:
        served.stop()
    access = [json.loads(x) for x in served.log_lines() if x.startswith("{")]
    per_worker = Counter(x["pid"] for x in access
                         if x.get("logger") == "service.access" and x.get("request_id", "").startswith("after-"))
    assert killed not in per_worker and len(per_worker) == 2 and max(per_worker.values()) <= 9, per_worker
