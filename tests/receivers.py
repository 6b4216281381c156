"""A real webhook receiver: an HTTP server on 127.0.0.1 that records every POST and answers as told."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook


class Receiver:
    """``plan`` holds what the next requests get, one item each: an HTTP status, or ``("hang", seconds)``
    (the answer comes that much later, or when the receiver closes); once it is empty, ``default``
    (200).  ``received``: each request as ``{"headers", "body", "answered"}``, in the order of the answers;
    ``arrived``: the ``webhook-id`` of each request as it came in (before it is answered)."""

    def __init__(self, default: int = 200) -> None:
        self.default = default
        self.plan: deque = deque()
        self.received: list[dict] = []
        self.arrived: list[str | None] = []
        self._changed = threading.Condition()
        self._closing = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver._changed:
                    step = receiver.plan.popleft() if receiver.plan else receiver.default
                    receiver.arrived.append(self.headers.get("webhook-id"))
                    receiver._changed.notify_all()
                if isinstance(step, tuple) and step[0] == "hang":
                    receiver._closing.wait(step[1])
                    step = 200
                with receiver._changed:
                    receiver.received.append({"headers": {k.lower(): v for k, v in self.headers.items()},
                                              "body": body, "answered": step, "path": self.path})
                    receiver._changed.notify_all()
                try:
                    self.send_response(step)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:  # the sender gave up (its timeout)
                    pass

            def log_message(self, *args) -> None:
                pass

        Handler.protocol_version = "HTTP/1.1"  # (keep-alive, as most backends)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def messages(self, answered_ok: bool = True) -> list[dict]:
        """The JSON bodies received (those answered 2xx only, by default), in arrival order."""
        with self._changed:
            items = list(self.received)
        return [json.loads(r["body"]) | {"_id": r["headers"]["webhook-id"]} for r in items
                if not answered_ok or (isinstance(r["answered"], int) and 200 <= r["answered"] < 300)]

    def wait(self, predicate: Callable[[Receiver], bool], timeout: float = 20.0, what: str = "") -> None:
        """Until ``predicate(self)`` holds (checked at each request), or AssertionError after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what or predicate} "
                                         f"({len(self.received)} request(s) received)")
                self._changed.wait(min(left, 0.2))

    def verify(self, secret: str) -> list[dict]:
        """Every request's signature checked with ``standardwebhooks``; the bodies."""
        with self._changed:
            items = list(self.received)
        return [Webhook(secret).verify(r["body"], r["headers"]) for r in items]

    def close(self) -> None:
        self._closing.set()
        self.server.shutdown()
        self.server.server_close()


def wait_until(predicate: Callable[[], object], timeout: float = 20.0, what: str = "", every: float = 0.02):
    """Poll ``predicate`` until it returns a true value (returned), or AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(every)
