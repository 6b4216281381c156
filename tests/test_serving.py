"""The serving model with real sockets against a real ``serve``: slow clients, deadlines, bodies.

Two servers per module: one with the default settings, one with short
deadlines so that the slow-client tests stay short.
"""

from __future__ import annotations

import asyncio
import http.client
import itertools
import json
import os
import re
import signal
import socket
import threading
import time
from collections import Counter

import pytest
from gunicorn.workers.ggevent import GeventWorker

from service.config import Settings
from service.serving import ServiceWorker, gunicorn_options
from tests.loopback import wait_workers_up, worker_pids
from tests.served import Served

pytestmark = pytest.mark.slow

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
    found = re.search(rb"(?i)content-length: *(\d+)", head)
    assert found, f"no Content-Length: {head!r}"
    length = int(found.group(1))
    while len(data) < len(head) + 4 + length:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a whole response: {data!r}"
        data += chunk
    return responses(data)[0]


def post(body: bytes, extra: bytes = b"", close: bool = True) -> bytes:
    return (b"POST /v1/hands/ting HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n" + extra
            + (b"Connection: close\r\n" if close else b"") + b"Content-Length: %d\r\n\r\n" % len(body) + body)


# -- defaults ------------------------------------------------------------------------------------
def test_the_defaults_and_the_stock_worker():
    defaults = Settings()
    assert (defaults.request_timeout, defaults.keepalive) == (10, 5)
    options = gunicorn_options(defaults)
    assert options["worker_class"] == "service.serving.ServiceWorker" and options["reuse_port"] is True
    assert options["worker_connections"] == defaults.max_connections and options["keepalive"] == 5
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
    for _ in range(5):  # other clients, while the slow ones are held
        started = time.monotonic()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(post(TING))
        answer = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        pending = sum(not ended.done() for *_, ended in slow)
        probes.append((responses(answer)[0][0], pending, time.monotonic() - started))
    ends = await asyncio.wait_for(asyncio.gather(*(ended for *_, ended in slow), return_exceptions=True),
                                  4 * SHORT_DEADLINE + 10)
    trickler.cancel()
    for _, _, writer, _ in slow:
        writer.close()
    return {"probes": probes, "ends": [(kind, end) for (kind, *_), end in zip(slow, ends)]}


def test_slow_clients_do_not_stop_others_and_are_cut_off(quick_served):
    """200 connections sit idle, trickle header lines or trickle a body: others are answered within a
    second meanwhile; a head not whole within KEEPALIVE is closed without an answer (there is no request
    to answer), a body not whole within REQUEST_TIMEOUT gets a 408 problem."""
    result = asyncio.run(_slow_clients_scenario(quick_served.port, 200))
    assert [status for status, _, _ in result["probes"]] == [200] * 5
    assert result["probes"][0][1] == 200  # answered while every slow connection was still held
    assert all(seconds < 1 for _, _, seconds in result["probes"]), result["probes"]
    kinds: Counter = Counter()
    for kind, end in result["ends"]:
        if kind == "body":
            (status, headers, body), = responses(end)
            problem = json.loads(body)
            assert status == 408 and headers["content-type"] == "application/problem+json"
            assert problem["code"] == "request_timeout" and problem["status"] == 408
        elif kind == "head":  # (closed while its bytes still came in: the kernel may answer them with a reset)
            assert end == b"" or isinstance(end, ConnectionResetError), (kind, end)
        else:
            assert end == b"", (kind, end)
        kinds[kind] += 1
    assert kinds == {"idle": 67, "head": 67, "body": 66}
    log = "\n".join(quick_served.log_lines())
    assert "Traceback" not in log and "[ERROR]" not in log


def test_an_idle_kept_alive_connection_is_closed_without_an_answer(quick_served):
    with socket.create_connection(("127.0.0.1", quick_served.port), timeout=10) as sock:
        sock.sendall(post(TING, close=False))
        assert read_one(sock)[0] == 200
        assert sock.recv(100) == b""  # KEEPALIVE (1 s here) later: closed, nothing sent


def test_connection_close_is_honoured_at_once(default_served):
    started = time.monotonic()
    (status, headers, _), = responses(raw(default_served.port, post(TING)))
    assert status == 200 and headers["connection"] == "close" and time.monotonic() - started < 1


# -- bodies and framing ---------------------------------------------------------------------------
CHUNKED = (
    b"POST /v1/hands/ting HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
)


@pytest.mark.parametrize("body, half_close", [
    (b"zz\r\n" + TING + b"\r\n0\r\n\r\n", False),                               # not a hex size
    (b"%x\r\n" % len(TING) + TING + b"XX0\r\n\r\n", False),                     # no CRLF after the data
    (b"%x;\x01\r\n" % len(TING) + TING + b"\r\n0\r\n\r\n", False),              # a control byte in an extension
    (b"%x\n" % len(TING) + TING + b"\n0\n\n", False),                             # LF-only lines
    (b"%x\r\n" % len(TING) + TING + b"\r\n0\r\n\n", False),                      # a bare LF ends the trailers
    (b"%x\r\n" % len(TING) + TING[:10], True),                                  # the client leaves mid-chunk
    (b"%x\r\n" % len(TING) + TING + b"\r\n", True),                             # ... or before the last chunk
], ids=["bad-size", "missing-terminator", "broken-extension", "lf-only", "lf-after-trailers", "truncated",
        "no-last-chunk"])
def test_malformed_chunked_bodies_are_400_problems_at_once(default_served, body, half_close):
    """A chunk-size line is wrong as soon as it is whole (a bare LF ends it, or it is no size), and a body
    whose client half-closed the connection before its end can never be whole: 400 problem+json, not the
    408 of the REQUEST_TIMEOUT deadline (10 s here: the socket's own timeout is shorter)."""
    with socket.create_connection(("127.0.0.1", default_served.port), timeout=5) as sock:
        sock.sendall(CHUNKED + body)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    (status, headers, payload), = responses(answer)
    assert status == 400 and headers["content-type"] == "application/problem+json"
    assert headers["connection"] == "close"  # where a next request would start is unknown
    problem = json.loads(payload)
    assert problem["status"] == 400 and "malformed" in problem["detail"].lower()
    log = "\n".join(default_served.log_lines())
    assert "Traceback" not in log and "[ERROR]" not in log and '"level":"ERROR"' not in log


@pytest.mark.parametrize("size", [1 << 80, 65537], ids=["2^80", "limit+1"])
def test_a_chunk_over_the_body_limit_is_413_as_soon_as_its_size_line_is_whole(default_served, size):
    """A chunk-size line announcing more than MAX_BODY_BYTES (65,536) is valid framing of a body the
    service does not take: 413 as a Content-Length over the limit, without waiting for its bytes."""
    with socket.create_connection(("127.0.0.1", default_served.port), timeout=5) as sock:
        sock.sendall(CHUNKED + b"%x\r\n" % size + b"abc")  # the client stays, as if sending the rest
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    (status, headers, payload), = responses(answer)
    problem = json.loads(payload)
    assert status == 413 and headers["content-type"] == "application/problem+json"
    assert problem["code"] == "payload_too_large" and str(size) in problem["detail"]
    assert headers["connection"] == "close"
    # chunks that add up to more than the limit, each under it: 413 when the size line that passes it is whole
    body = b"%x\r\n" % 60000 + b" " * 60000 + b"\r\n%x\r\n" % 6000
    (status, _, payload), = responses(raw(default_served.port, CHUNKED + body, timeout=5))
    assert status == 413 and json.loads(payload)["code"] == "payload_too_large"


@pytest.mark.parametrize("body", [
    b"5",                                                                      # a size line not whole yet
    b"%x\r\n" % len(TING) + TING[:10],                                        # a chunk's bytes still to come
    b"%x\r\n" % len(TING) + TING + b"\r\n",                                   # no last chunk yet
], ids=["partial-size-line", "partial-chunk", "no-last-chunk"])
def test_framing_that_cannot_be_told_from_a_slow_sender_is_408_at_the_deadline(quick_served, body):
    """What could still be the start of a valid body (the rest on its way, the connection open) is
    answered 408 at REQUEST_TIMEOUT, and the connection ends."""
    (status, headers, payload), = responses(raw(quick_served.port, CHUNKED + body))
    assert status == 408 and json.loads(payload)["code"] == "request_timeout"
    assert headers["connection"] == "close"


def test_chunked_and_pipelined_requests_and_100_continue_work(default_served):
    port = default_served.port
    chunked = (
        CHUNKED + b"%x\r\n" % 10 + TING[:10] + b"\r\n%x;note=1\r\n" % (len(TING) - 10) + TING[10:] + b"\r\n0\r\n\r\n"
    )
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


def test_gunicorn_level_errors_stay_problems_answered_at_once(default_served):
    port = default_served.port
    for data, expected in [
        (b"GET /healthz?x=" + b"a" * 9000 + b" HTTP/1.1\r\nHost: t\r\n\r\n", 414),
        (b"GET /healthz HTTP/1.1\r\nHost: t\r\n" + b"X-Big: " + b"b" * 9000 + b"\r\n\r\n", 431),
        (b"BR@KEN / HTTP/1.1\r\n\r\n", 400),
        (b"POST /v1/hands/ting HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
        (b"POST /v1/hands/ting HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: xchunked\r\n\r\n", 400),
        (b"GET /healthz HTTP/1.2\r\nHost: t\r\n\r\n", 505),
        (bytes.fromhex("16030100a5010000a10303") + bytes(60), 400),  # a TLS ClientHello on the plain port
    ]:
        started = time.monotonic()
        (status, headers, payload), = responses(raw(port, data))
        assert status == expected and headers["content-type"] == "application/problem+json", data[:40]
        assert json.loads(payload)["status"] == expected and headers["connection"] == "close"
        assert time.monotonic() - started < 1, data[:40]


def test_a_burst_of_kept_alive_connections_is_spread_over_the_workers(tmp_path, redis_server):
    """32 keep-alive clients connecting at once land on both workers: each listens on its own socket
    (reuse_port) and the kernel spreads new connections over them."""
    served = Served(tmp_path / "serve.log", {"REDIS_URL": redis_server.url})
    try:
        wait_workers_up(served.proc.pid, 2)
        per_worker = _spread(served, "spread", 32)
    finally:
        served.stop()
    # (a hash of each connection's ports: about half each; under 4 of 32 has a chance of ~1e-5)
    assert len(per_worker) == 2 and min(per_worker.values()) >= 4, per_worker


def _spread(served: Served, tag: str, clients: int) -> Counter:
    """Open ``clients`` keep-alive connections at once, each making 3 requests: connections per worker pid."""
    start, done = threading.Barrier(clients), threading.Barrier(clients)
    failures: list[str] = []

    def client(i: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
        try:
            start.wait(timeout=20)
            for j in range(3):
                conn.request("POST", "/v1/hands/ting", body=TING,
                             headers={"Content-Type": "application/json", "X-Request-ID": f"{tag}-{i}-{j}"})
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
    assert not failures
    served_by: dict[str, set] = {}
    for line in (json.loads(x) for x in served.log_lines() if x.startswith("{")):
        if line.get("logger") == "service.access" and line.get("request_id", "").startswith(tag + "-"):
            served_by.setdefault(line["request_id"].split("-")[1], set()).add(line["pid"])
    assert len(served_by) == clients and all(len(pids) == 1 for pids in served_by.values()), served_by
    return Counter(next(iter(pids)) for pids in served_by.values())


def test_a_worker_that_replaces_a_killed_one_takes_new_connections(tmp_path, redis_server):
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
        per_worker = _spread(served, "after", 32)
    finally:
        served.stop()
    assert killed not in per_worker and len(per_worker) == 2 and min(per_worker.values()) >= 4, per_worker


def test_kept_alive_connections_take_turns(tmp_path, redis_server):
    """One worker, two kept-alive connections each sending 300 requests pipelined: once both have
    requests waiting, they are served in turn, not one connection's 300 and then the other's.  Each
    connection yields after each request; without that, a greenlet whose next request has already
    arrived never waits and keeps the worker (the order of the access log, one worker: what was served
    when, whatever the client's own timing)."""
    n = 300

    def validate(tag: str) -> bytes:
        body = json.dumps({"hand": {"tiles": "1112345678999m"}}).encode()
        return (b"POST /v1/hands/validate HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                b"X-Request-ID: %s\r\nContent-Length: %d\r\n\r\n" % (tag.encode(), len(body)) + body)

    def answers(sock: socket.socket, out: list) -> None:
        with sock.makefile("rb") as stream:
            for _ in range(n):
                head = b"".join(iter(stream.readline, b"\r\n"))
                out.append(int(head.split()[1]))
                length = re.search(rb"(?i)content-length: *(\d+)", head)
                assert length, head
                stream.read(int(length[1]))

    served = Served(tmp_path / "serve.log", {"REDIS_URL": redis_server.url}, workers=1)
    try:
        with (socket.create_connection(("127.0.0.1", served.port), timeout=30) as a,
              socket.create_connection(("127.0.0.1", served.port), timeout=30) as b):
            for sock, tag in ((a, "turn-warm-a"), (b, "turn-warm-b")):  # both connections accepted first
                sock.sendall(validate(tag))
                assert read_one(sock)[0] == 200
            statuses: dict[str, list[int]] = {"a": [], "b": []}
            readers = [threading.Thread(target=answers, args=(sock, statuses[name]))
                       for name, sock in (("a", a), ("b", b))]
            for reader in readers:
                reader.start()
            a.sendall(b"".join(validate(f"turn-a-{i}") for i in range(n)))
            b.sendall(b"".join(validate(f"turn-b-{i}") for i in range(n)))
            for reader in readers:
                reader.join(timeout=60)
            assert statuses == {"a": [200] * n, "b": [200] * n}
    finally:
        served.stop()
    order = [line["request_id"].split("-")[1] for line in (json.loads(x) for x in served.log_lines()
                                                          if x.startswith("{"))
             if line.get("logger") == "service.access" and line.get("request_id", "").startswith("turn-")]
    order = [x for x in order if x in "ab"]
    assert sorted(order) == ["a"] * n + ["b"] * n
    both_from = max(order.index("a"), order.index("b"))
    both_until = min(len(order) - order[::-1].index(x) for x in "ab")
    assert both_from < both_until, f"one connection's {n} requests were all served before the other's first"
    runs = [len(list(group)) for _, group in itertools.groupby(order[both_from:both_until])]
    assert max(runs) <= 3, f"a connection was served {max(runs)} times in a row while the other waited"
