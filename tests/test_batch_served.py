"""NDJSON jobs through a real ``python -m service serve``: results stream while the upload goes on, a
slow sender is cut off, the job has no overall size limit, other clients are served meanwhile; a
client cannot turn a job against the server: the answer comes in pieces of at most 64 results, a
client sending a line at a time gets each result before it sends the next line, and clients that
never read hold little of the worker's memory (nothing more is read of them).

The client is a raw socket sending a chunked body and reading the chunked response on another thread,
as a client piping a file through one request does.
"""

from __future__ import annotations

import http.client
import json
import random
import socket
import threading

import pytest

from service.api.batch_items import PIECE_LINES, answer_line
from service.rules.tiles import format_counts
from tests.loopback import rss_kib
from tests.served import Served

pytestmark = pytest.mark.slow

TING = b'{"op":"ting","hand":{"tiles":"1112345678999m"}}'
LINES = [TING, b'{"op":"ting","hand":{"tiles":"12x"}}', b"not json",
         b'{"op":"score","hand":{"tiles":"11122233344455m"},"win":{"tile":"5m"}}']
CUT_AFTER = 2  # REQUEST_TIMEOUT of the quick server


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    server = Served(tmp_path_factory.mktemp("batch") / "serve.log", {"REQUEST_TIMEOUT": str(CUT_AFTER)}, workers=1)
    yield server
    server.stop()


class Job:
    """One NDJSON request on a raw socket: chunks sent with :meth:`send`, result lines collected as they come."""

    def __init__(self, port: int, headers: bytes = b"Transfer-Encoding: chunked\r\n") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.sendall(b"POST /v1/batch HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-ndjson\r\n"
                          + headers + b"\r\n")
        self.lines: list[dict] = []
        self.pieces: list[int] = []  # result lines begun in each chunk of the response
        self.status: int | None = None
        self.closed = threading.Event()  # the server closed the connection
        self.ended = threading.Event()   # the response's last chunk came
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def send(self, data: bytes) -> None:
        self.sock.sendall(b"%x\r\n%s\r\n" % (len(data), data))

    def finish(self) -> None:
        self.sock.sendall(b"0\r\n\r\n")

    def wait_for(self, count: int, timeout: float = 60) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: len(self.lines) >= count or self.closed.is_set(), timeout)

    def _read(self) -> None:
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                data += self._recv()
            head, _, data = data.partition(b"\r\n\r\n")
            self.status = int(head.split()[1])
            assert b"transfer-encoding: chunked" in head.lower(), head
            body = b""
            while True:
                while b"\r\n" not in data:
                    data += self._recv()
                size_line, _, data = data.partition(b"\r\n")
                size = int(size_line, 16)
                while len(data) < size + 2:
                    data += self._recv()
                body, data = body + data[:size], data[size + 2:]
                if size:
                    self.pieces.append(body.count(b"\n"))
                *complete, body = body.split(b"\n")
                with self.changed:
                    self.lines.extend(json.loads(line) for line in complete)
                    self.changed.notify_all()
                if size == 0:
                    self.ended.set()
                    while self._recv():  # until the server closes, or the client does
                        pass
        except (OSError, EOFError):
            pass
        finally:
            self.closed.set()
            with self.changed:
                self.changed.notify_all()

    def _recv(self) -> bytes:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError
        return chunk

    def close(self) -> None:
        self.sock.close()
        self.reader.join(timeout=10)


def expected(lines: list[bytes]) -> list[int]:
    statuses = []
    for line in lines:
        answer = answer_line(line)
        assert answer is not None, f"a blank line: {line!r}"
        statuses.append(answer["status"])
    return statuses


def test_results_stream_back_before_the_upload_ends(served):
    job = Job(served.port)
    try:
        first = [LINES[i % len(LINES)] for i in range(3000)]
        job.send(b"\n".join(first) + b"\n")
        assert job.wait_for(1000), f"{len(job.lines)} results while the upload is still open"
        assert job.status == 200 and not job.ended.is_set()
        rest = [LINES[i % len(LINES)] for i in range(2000)]
        for i in range(0, len(rest), 250):
            job.send(b"\n".join(rest[i:i + 250]) + b"\n")
        job.finish()
        assert job.wait_for(5000) and job.ended.wait(30)
        assert [x["status"] for x in job.lines] == expected(first + rest)
        assert job.lines[2]["problem"]["instance"] == "/v1/batch" and "request_id" in job.lines[2]["problem"]
    finally:
        job.close()


def test_a_slow_sender_is_cut_off_with_a_last_line_and_the_connection_closed(served):
    job = Job(served.port)
    try:
        job.send(b"\n".join([TING] * 2000) + b"\n")  # a whole read: answered
        assert job.wait_for(1000)
        job.send(TING[:10])  # then a trickle that never completes the next read
        assert job.closed.wait(CUT_AFTER + 30), "the server did not cut the slow sender off"
        results, last = job.lines[:-1], job.lines[-1]
        assert len(results) >= 1000 and {x["status"] for x in results} == {200}
        assert last["status"] == 408 and last["problem"]["code"] == "request_timeout", last
        assert job.ended.is_set()  # a whole response (its last chunk), then the connection closed
    finally:
        job.close()


def test_a_job_has_no_overall_size_limit(served):
    lines = [LINES[i % len(LINES)] for i in range(4000)]  # about 200 KiB: past MAX_BODY_BYTES (64 KiB)
    body = b"\n".join(lines) + b"\n"
    job = Job(served.port, b"Content-Length: %d\r\n" % len(body))
    try:
        for i in range(0, len(body), 50_000):
            job.sock.sendall(body[i:i + 50_000])
        assert job.wait_for(len(lines)) and job.ended.wait(30)
        assert [x["status"] for x in job.lines] == expected(lines)
        status, _, answer = served.request("POST", "/v1/hands/ting", body, {"Content-Type": "application/json"})
        assert status == 413 and json.loads(answer)["code"] == "payload_too_large"  # a single request still has one
    finally:
        job.close()


def test_other_clients_are_served_while_a_job_runs_on_the_same_worker(served):
    job = Job(served.port)  # (one worker: the job and the requests below share it)
    try:
        job.send(b"\n".join([TING] * 3000) + b"\n")
        assert job.wait_for(100)
        for _ in range(3):
            job.send(b"\n".join([TING] * 1500) + b"\n")
            status, _, body = served.request("POST", "/v1/batch", {"items": [json.loads(TING)] * 10})
            assert status == 200 and len(json.loads(body)["results"]) == 10
        assert not job.ended.is_set()  # answered while the job was still open
        job.finish()
        assert job.wait_for(3000 + 3 * 1500) and job.ended.wait(30)
    finally:
        job.close()


def test_a_json_batch_of_a_thousand_items(served):
    items = [json.loads(LINES[i % len(LINES)]) for i in range(1000) if i % len(LINES) != 2]
    status, headers, body = served.request("POST", "/v1/batch", {"items": items})
    assert status == 200 and headers["Content-Type"] == "application/json"
    results = json.loads(body)["results"]
    assert len(results) == len(items) and {x["status"] for x in results} == {200, 422}


def test_a_json_batch_gives_the_workers_other_requests_their_turn(served):
    """A JSON batch of a thousand hands never seen before (their shanten options: a few tenths of a second of
    the one worker's time) is worked out 64 items at a time, the worker's other requests given their turn
    between two pieces: a client making one request after another on another connection meanwhile is
    answered again and again while the batch runs, not only before and after it (the access log: each
    request's end and the batch's duration, one worker)."""
    rng = random.Random(37)
    wall = [t for t in range(27) for _ in range(4)]
    items = []
    for _ in range(1000):
        counts = [0] * 27
        for t in rng.sample(wall, 14):
            counts[t] += 1
        items.append({"op": "shanten", "hand": {"tiles": format_counts(counts)}})
    validate = json.dumps({"hand": {"tiles": "1112345678999m"}})
    done = threading.Event()

    def other_client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
        try:
            while not done.is_set():
                conn.request("POST", "/v1/hands/validate", validate, {"Content-Type": "application/json",
                                                                      "X-Request-ID": "turn-other"})
                assert conn.getresponse().read()
        finally:
            conn.close()

    other = threading.Thread(target=other_client)
    other.start()
    try:
        status, _, answer = served.request("POST", "/v1/batch", {"items": items}, {"X-Request-ID": "turn-batch"},
                                           timeout=60)
    finally:
        done.set()
        other.join(timeout=60)
    assert status == 200 and {x["status"] for x in json.loads(answer)["results"]} == {200}
    lines = [line for line in (json.loads(x) for x in served.log_lines() if x.startswith("{"))
             if line.get("logger") == "service.access" and line.get("request_id", "").startswith("turn-")]
    batch = next(line for line in lines if line["request_id"] == "turn-batch")
    start, end = batch["ts"] - batch["duration_ms"] / 1000, batch["ts"]
    during = [line for line in lines if line["request_id"] == "turn-other" and start + 0.002 < line["ts"] < end - 0.002]
    assert batch["duration_ms"] > 50 and len(during) >= 3, (batch["duration_ms"], len(during))


def test_the_answer_comes_in_pieces_of_at_most_64_results(served):
    job = Job(served.port)
    try:
        job.send(b"\n".join([TING, b"1"] * 1500) + b"\n")  # one send: far more lines than a piece
        job.finish()
        assert job.wait_for(3000) and job.ended.wait(30)
        assert len(job.lines) == 3000 and [x["status"] for x in job.lines[:2]] == [200, 422]
        assert max(job.pieces) <= PIECE_LINES and len(job.pieces) >= 3000 // PIECE_LINES, job.pieces[:20]
    finally:
        job.close()


@pytest.mark.parametrize("framing", ["chunked", "length"])
def test_a_line_at_a_time_gets_each_result_before_the_next_line(served, framing):
    lines = [LINES[i % len(LINES)] + b"\n" for i in range(8)]
    body = b"".join(lines)
    job = Job(served.port, b"Transfer-Encoding: chunked\r\n" if framing == "chunked"
              else b"Content-Length: %d\r\n" % len(body))
    try:
        for i, line in enumerate(lines):
            job.send(line) if framing == "chunked" else job.sock.sendall(line)
            # (a server that waited for more bytes would answer nothing, then cut the job at REQUEST_TIMEOUT)
            assert job.wait_for(i + 1, timeout=30) and not job.closed.is_set(), (i, job.lines)
            assert len(job.lines) == i + 1 and job.lines[i]["status"] != 408, job.lines
        if framing == "chunked":
            job.finish()
        assert job.ended.wait(30)
        assert [x["status"] for x in job.lines] == expected([line[:-1] for line in lines])
    finally:
        job.close()


def test_clients_that_never_read_hold_little_memory_and_are_not_read_further(served):
    """Each client sends an endless job of lines whose answers are far longer than they are (``1`` is a 422
    problem of about 300 bytes) and never reads: the server stops reading each once its answer is not
    taken, holding a piece, not the answer of a whole read (about 30,000 problems per 64 KiB read)."""
    clients, chunk = 12, b"1\n" * 32768
    before = rss_kib(served.proc.pid)
    sent = [0] * clients
    socks = []

    def flood(i: int) -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", served.port))
        socks.append(sock)
        sock.sendall(b"POST /v1/batch HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-ndjson\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        sock.settimeout(3)  # (a send blocked this long: the server reads no more of it)
        try:
            while sent[i] < 64 << 20:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent[i] += len(chunk)
        except OSError:
            pass

    threads = [threading.Thread(target=flood, args=(i,), daemon=True) for i in range(clients)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        grown_mib = (rss_kib(served.proc.pid) - before) / 1024
        assert all(s < 64 << 20 for s in sent), sent  # none could send its whole body: reading stopped
        assert grown_mib < 16, (grown_mib, sent)  # (0.3 MiB in all here; answering whole reads held 4 MiB a client)
        status, _, answer = served.request("POST", "/v1/hands/ting", {"hand": {"tiles": "1112345678999m"}})
        assert status == 200 and json.loads(answer)["ting"] is True  # the worker still answers others
    finally:
        for sock in socks:
            sock.close()
