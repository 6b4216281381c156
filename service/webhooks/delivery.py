"""One signed webhook delivery over HTTP: the target check, the connection, the deadline.

Targets (SSRF)
--------------
Only ``http`` and ``https`` URLs without credentials.  The host is resolved and
every address checked at registration and again at each delivery, which then
connects to an address it checked (never to what a second lookup would say:
DNS rebinding); an address that is not globally routable (loopback, private,
link-local, shared, reserved, multicast, IPv6 forms that embed one, and IPv6
outside the global unicast ``2000::/3``) is refused unless
``WEBHOOK_ALLOW_PRIVATE`` is set.  Redirects are not followed.

An attempt has one deadline for all of it (the host's lookup, connect, send, a
trickling answer).  The lookup runs in a thread of its own (a greenlet under
gevent, whose patched ``socket.getaddrinfo`` is the hub's resolver) that the
attempt waits for until its deadline, then leaves to end by itself (the
system resolver's own timeouts bound it).  A watchdog thread (a greenlet under
gevent) shuts the socket of an attempt past its deadline down, so whatever it
waits for fails.  Signatures are the
Standard Webhooks ones (``webhook-id``, ``webhook-timestamp``,
``webhook-signature``: HMAC-SHA256), made by the ``standardwebhooks`` package.
"""

from __future__ import annotations

import functools
import http.client
import ipaddress
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from standardwebhooks.webhooks import Webhook as Signer

MAX_URL_CHARS = 2048
RESPONSE_BYTES = 64 * 1024
"""Of a receiver's answer, at most this much is read (and dropped)."""
USER_AGENT = "mahjong-service-webhooks/1"


# -- targets ---------------------------------------------------------------------------------
class TargetRefused(ValueError):
    """A webhook URL the service will not send to (the message says why)."""


class LookupTimeout(TimeoutError):
    """The host of a webhook URL (``host``) did not resolve within the time it had."""

    def __init__(self, host: str, timeout: float) -> None:
        super().__init__(f"the host {host!r} did not resolve within {timeout:.3g} s")
        self.host = host


Lookup = Callable[..., Any]
"""How a host is resolved: a function called as ``socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)``
is, answering as it does (its default: ``socket.getaddrinfo``, as it is when the lookup is made, so gevent's
patched one under gevent)."""


_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
"""The only IPv6 space allocated for global unicast: anything else (IPv4-compatible ``::a.b.c.d``, IPv4-translated
``::ffff:0:a.b.c.d``, site-local ``fec0::/10``, local-use NAT64 ``64:ff9b:1::/48``, ...) is not a target."""


def address_refused(address: str) -> str | None:
    """Why an address is not a webhook target (None: it may be one): anything not globally routable.

    >>> [address_refused(a) for a in ("93.184.216.34", "127.0.0.1", "10.1.2.3", "::ffff:192.168.0.1")]
    [None, 'a loopback address', 'a private address', 'a private address']
    >>> address_refused("169.254.169.254"), address_refused("100.64.0.1"), address_refused("64:ff9b::7f00:1")
    ('a link-local address', 'not a globally routable address', 'a loopback address')
    >>> address_refused("::7f00:1"), address_refused("fec0::1")
    ('not a globally routable address', 'not a globally routable address')
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):  # forms that carry an IPv4 address
        embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return address_refused(str(embedded))
        if ip not in _GLOBAL_UNICAST and not (ip.is_loopback or ip.is_link_local or ip.is_multicast
                                              or ip.is_unspecified):
            return "not a globally routable address"
    for test, why in (("is_loopback", "a loopback address"), ("is_link_local", "a link-local address"),
                      ("is_multicast", "a multicast address"), ("is_unspecified", "an unspecified address"),
                      ("is_private", "a private address")):
        if getattr(ip, test):
            return why
    return None if ip.is_global else "not a globally routable address"


def parse_target(url: str) -> urllib.parse.SplitResult:
    """The parts of a webhook URL; :class:`TargetRefused` unless it is ``http(s)://host[:port]/...`` without
    credentials or a fragment.

    >>> parse_target("https://hooks.example/in?x=1").hostname
    'hooks.example'
    >>> parse_target("ftp://hooks.example/")
    Traceback (most recent call last):
    ...
    service.webhooks.delivery.TargetRefused: only http and https URLs can be webhooks
    """
    if len(url) > MAX_URL_CHARS or any(c.isspace() or ord(c) < 0x20 for c in url):
        raise TargetRefused(f"a webhook URL has at most {MAX_URL_CHARS} characters and no spaces")
    try:
        parts = urllib.parse.urlsplit(url)
        hostname = parts.hostname
    except ValueError as exc:  # (a bracketed host that is not an IPv6 address, an unclosed bracket)
        raise TargetRefused(f"the URL's host is malformed ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise TargetRefused("only http and https URLs can be webhooks")
    try:
        port = parts.port
    except ValueError:
        raise TargetRefused("the URL's port is not a port number") from None
    if not hostname:
        raise TargetRefused("the URL names no host")
    if parts.username is not None or parts.password is not None:
        raise TargetRefused("a webhook URL carries no credentials (the signature authenticates the service)")
    if parts.fragment:
        raise TargetRefused("a webhook URL has no fragment")
    if port == 0:
        raise TargetRefused("the URL's port is not a port number")
    return parts


def _lookup_within(lookup: Lookup, host: str, port: int, timeout: float) -> Any:
    """``lookup(host, port, type=SOCK_STREAM)`` in a thread of its own (a greenlet under gevent), waited
    for ``timeout`` seconds at most (then :class:`LookupTimeout`; the thread ends when the lookup does)."""
    done = threading.Event()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["infos"] = lookup(host, port, type=socket.SOCK_STREAM)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="webhooks-lookup", daemon=True).start()
    if not done.wait(max(0.0, timeout)):
        raise LookupTimeout(host, timeout)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["infos"]


def resolve(url: str, allow_private: bool = False, *, timeout: float | None = None,
            lookup: Lookup | None = None) -> tuple[urllib.parse.SplitResult, list[str]]:
    """The URL's parts and the addresses its host resolves to now, every one of them checked
    (:class:`TargetRefused` when one is refused, or the host does not resolve).

    ``timeout``: seconds the lookup may take (:class:`LookupTimeout` after that; None: as long as the
    system resolver takes).  ``lookup``: how the host is resolved (:data:`Lookup`; ``socket.getaddrinfo``
    when None), e.g. a resolver of the caller's own, or a fake one in a test.
    """
    parts = parse_target(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    lookup = lookup or socket.getaddrinfo
    try:
        if timeout is None:
            infos = lookup(parts.hostname, port, type=socket.SOCK_STREAM)
        else:
            infos = _lookup_within(lookup, parts.hostname or "", port, timeout)
    except (socket.gaierror, UnicodeError) as exc:
        raise TargetRefused(f"the host {parts.hostname!r} does not resolve ({exc})") from None
    # (IPv4 and IPv6 addresses, strings: a host name resolves to no other family)
    addresses = list(dict.fromkeys(info[4][0] for info in infos if isinstance(info[4][0], str)))
    if not addresses:
        raise TargetRefused(f"the host {parts.hostname!r} does not resolve")
    if not allow_private:
        for address in addresses:
            why = address_refused(address)
            if why:
                raise TargetRefused(f"the host {parts.hostname!r} resolves to {address}, {why}: not a webhook "
                                    "target")
    return parts, addresses


# -- one delivery ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Attempt:
    """What one delivery attempt did: ``ok`` (a 2xx), the HTTP status (None: no answer), why it failed."""

    ok: bool
    status: int | None
    error: str | None
    ms: int


class _PinnedConnection(http.client.HTTPConnection):
    """An HTTP (or, with ``tls``, HTTPS) connection to ``host`` that connects to one of ``addresses``
    (checked already), not to whatever the name would resolve to now."""

    def __init__(self, host: str, port: int, addresses: list[str], timeout: float,
                 tls: ssl.SSLContext | None) -> None:
        super().__init__(host, port, timeout=timeout)
        self.pinned_addresses, self.pinned_tls, self.pinned_timeout = addresses, tls, timeout
        self.pinned_deadline = time.monotonic() + timeout  # (the attempt's: :meth:`Sender._post` sets it)

    def connect(self) -> None:
        error: OSError | None = None
        for address in self.pinned_addresses:  # (all of them within the attempt's deadline, not each)
            left = self.pinned_deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no connection within the attempt's deadline")
            try:
                sock = socket.create_connection((address, self.port), min(self.pinned_timeout, left))
                break
            except OSError as exc:
                error = exc
        else:
            raise error or OSError("no address to connect to")
        # (as http.client's own connect: without it a kept-alive connection waits on delayed ACKs)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.pinned_tls is not None:  # (the handshake on self.sock: the watchdog can cut it)
            sock = self.pinned_tls.wrap_socket(sock, server_hostname=self.host, do_handshake_on_connect=False)
            self.sock = sock
            sock.settimeout(max(0.001, self.pinned_deadline - time.monotonic()))
            sock.do_handshake()
        self.sock = sock




@functools.cache
def _tls() -> ssl.SSLContext:
    return ssl.create_default_context()


class _Watchdog:
    """One thread (a greenlet under gevent) that ends the attempts past their deadline: it shuts their
    socket down, so that whatever the attempt waits for (connect, send, a trickling answer) fails.  It
    sleeps until the nearest deadline, and without attempts until the next one starts (no wake-ups when
    nothing is sent)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._watched: dict[int, tuple[float, Callable[[], None]]] = {}
        self._next = 0
        self._thread: threading.Thread | None = None
        self._until: float | None = None  # when the thread wakes up by itself (None: it waits for a watch)

    def watch(self, deadline: float, cut: Callable[[], None]) -> int:
        with self._changed:
            self._next += 1
            self._watched[self._next] = (deadline, cut)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="webhooks-deadlines", daemon=True)
                self._thread.start()
            if self._until is None or deadline < self._until:  # (else it wakes up in time as it is)
                self._changed.notify()
            return self._next

    def forget(self, ticket: int) -> None:
        with self._changed:
            self._watched.pop(ticket, None)

    def _run(self) -> None:
        while True:
            with self._changed:
                now = time.monotonic()
                late = [k for k, (deadline, _) in self._watched.items() if deadline <= now]
                cuts = [self._watched.pop(k)[1] for k in late]
                if not cuts:
                    self._until = min((deadline for deadline, _ in self._watched.values()), default=None)
                    self._changed.wait(None if self._until is None else self._until - now)
                    self._until = None
                    continue
            for cut in cuts:
                try:
                    cut()
                except Exception:  # noqa: BLE001 - the socket is gone already
                    pass


_WATCHDOG = _Watchdog()


class Sender:
    """Deliveries to one URL, over one kept-alive connection (a lane job's, or one attempt's).

    The host is resolved and every address checked whenever a connection is made
    (so at least once per lane job, and after any failure); the connection goes
    to an address that was checked.  Each attempt must end within its
    ``timeout`` (the lookup, connect, send and answer in all), or it fails.
    ``lookup``: how the host is resolved (:data:`Lookup`; ``socket.getaddrinfo`` when None).
    """

    def __init__(self, url: str, allow_private: bool, *, lookup: Lookup | None = None) -> None:
        self.url, self.allow_private, self.lookup = url, allow_private, lookup
        self.conn: _PinnedConnection | None = None
        self.path = "/"

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _connection(self, timeout: float, started: float) -> _PinnedConnection:
        parts, addresses = resolve(self.url, self.allow_private, timeout=started + timeout - time.monotonic(),
                                   lookup=self.lookup)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return _PinnedConnection(parts.hostname or "", port, addresses, timeout,
                                 _tls() if parts.scheme == "https" else None)

    def post(self, body: bytes, headers: Mapping[str, str], timeout: float) -> Attempt:
        started = time.monotonic()
        for reused in ((True, False) if self.conn is not None else (False,)):
            if not reused:
                self.close()
                try:
                    self.conn = self._connection(timeout, started)
                except TargetRefused as exc:
                    return Attempt(False, None, f"target refused: {exc}", int((time.monotonic() - started) * 1000))
                except LookupTimeout as exc:
                    return Attempt(False, None, f"timeout: the host {exc.host!r} did not resolve within {timeout:g} s",
                                   int((time.monotonic() - started) * 1000))
            attempt = self._post(body, headers, timeout, started, reused)
            if attempt is not None:
                return attempt
        raise AssertionError("unreachable")  # pragma: no cover - a fresh connection always answers

    def _post(self, body: bytes, headers: Mapping[str, str], timeout: float, started: float,
              reused: bool) -> Attempt | None:
        """One request on the current connection; None: a kept-alive connection the receiver had closed
        (send again on a fresh one)."""
        conn = self.conn
        assert conn is not None
        expired = threading.Event()

        def cut() -> None:
            expired.set()
            sock = conn.sock
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)

        ticket = _WATCHDOG.watch(started + timeout, cut)
        conn.pinned_deadline = started + timeout

        def took() -> int:
            return int((time.monotonic() - started) * 1000)

        try:
            if conn.sock is not None:
                conn.sock.settimeout(max(0.001, started + timeout - time.monotonic()))
            conn.request("POST", self.path, body=body, headers={
                "Content-Type": "application/json", "User-Agent": USER_AGENT, **headers})
            response = conn.getresponse()
            response.read(RESPONSE_BYTES)
            status = response.status
            if response.will_close or not response.isclosed():  # (closed, or an answer longer than what is read)
                self.close()
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            if expired.is_set() or isinstance(exc, (socket.timeout, TimeoutError)):
                return Attempt(False, None, f"timeout: no answer within {timeout:g} s", took())
            if reused and isinstance(exc, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)):
                return None
            return Attempt(False, None, f"{type(exc).__name__}: {exc}"[:300], took())
        finally:
            _WATCHDOG.forget(ticket)
        if expired.is_set():
            self.close()
            return Attempt(False, status, f"timeout: no answer within {timeout:g} s", took())
        if 200 <= status < 300:
            return Attempt(True, status, None, took())
        return Attempt(False, status, f"HTTP {status}", took())


def deliver(url: str, body: bytes, headers: Mapping[str, str], timeout: float, allow_private: bool, *,
            lookup: Lookup | None = None) -> Attempt:
    """POST ``body`` to ``url`` once, within ``timeout`` seconds in all (the host resolved and checked now,
    by ``lookup``: see :class:`Sender`)."""
    sender = Sender(url, allow_private, lookup=lookup)
    try:
        return sender.post(body, headers, timeout)
    finally:
        sender.close()


def sign(secrets: str | Sequence[str], message_id: str, body: str, at: datetime | None = None) -> dict[str, str]:
    """The Standard Webhooks headers of a message, signed with each of ``secrets`` (by ``standardwebhooks``):
    ``webhook-signature`` holds one ``v1,<signature>`` per secret, separated by spaces, as the specification
    has it for a secret being rotated (a receiver's library accepts the message when one of them verifies).

    >>> when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    >>> one = sign("whsec_" + "A" * 32, "msg_1", "{}", when)["webhook-signature"]
    >>> two = sign(["whsec_" + "B" * 32, "whsec_" + "A" * 32], "msg_1", "{}", when)["webhook-signature"]
    >>> two.split(" ")[1] == one, len(two.split(" ")), one.startswith("v1,")
    (True, 2, True)
    """
    at = at or datetime.now(timezone.utc)
    keys = [secrets] if isinstance(secrets, str) else list(secrets)
    return {"webhook-id": message_id, "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": " ".join(Signer(secret).sign(message_id, at, body) for secret in keys)}


