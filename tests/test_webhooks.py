"""Webhooks (docs/api.md): the endpoints and their problems, the outbox, signed deliveries in seq order,
retries, dead letters, the sweep, several dispatchers, the SSRF guard; real Redis, real receivers."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.api import create_app
from service.config import NO_LIMITS
from service.store import keys
from service.store.redis_client import connect, text
from service.webhooks import delivery
from service.webhooks.delivery import TargetRefused, address_refused, deliver, parse_target, resolve
from service.webhooks.dispatcher import Dispatcher, DispatcherOptions
from service.webhooks.registry import Registry
from tests.problems import problem
from tests.receivers import Receiver, wait_until

ACME = "acme-" + "a" * 40
BETA = "beta-" + "b" * 40
KEYS = f"acme={ACME},beta={BETA}"
PLAYERS = ["东", "南", "西", "北"]
KONG = {"type": "kong", "seat": 0, "kind": "concealed", "tile": "1m"}


def kong(tile: str) -> dict:
    return {**KONG, "tile": tile}
ALL = ["event.recorded", "event.voided", "round.ended", "table.created", "table.finished", "table.deleted"]


def acme(**extra) -> dict:
    return {"X-API-Key": ACME, **extra}


APP_CONFIG = {"API_KEYS": KEYS, "WEBHOOK_ALLOW_PRIVATE": True, "WEBHOOK_TIMEOUT": 1}
pytestmark = pytest.mark.app(**APP_CONFIG)


def make_app(url: str, **config):
    return create_app({"TESTING": True, "REDIS_URL": url, **APP_CONFIG, **{var: 0 for var in NO_LIMITS}, **config})


def register(client, url: str, events=ALL, key=ACME, **extra) -> dict:
    r = client.post("/v1/webhooks", json={"url": url, "events": events, **extra}, headers={"X-API-Key": key})
    assert r.status_code == 201, r.get_data(as_text=True)
    return r.get_json()


def new_table(client, key=ACME) -> dict:
    r = client.post("/v1/tables", json={"players": PLAYERS}, headers={"X-API-Key": key})
    assert r.status_code == 201, r.get_data(as_text=True)
    return r.get_json()


def post(client, table, event, **headers):
    return client.post(f"/v1/tables/{table['id']}/events", json=event,
                       headers={"Authorization": f"Bearer {table['token']}", **headers})


def by_table(messages: list[dict]) -> dict[str, list[dict]]:
    out = defaultdict(list)
    for m in messages:
        out[m["data"]["table"]].append(m)
    return out


# -- the endpoints ----------------------------------------------------------------------------
def test_without_api_keys_the_webhook_endpoints_are_404(redis_url):
    c = create_app({"TESTING": True, "REDIS_URL": redis_url}).test_client()
    problem(c.get("/v1/webhooks"), 404, "not_found")
    problem(c.post("/v1/webhooks", json={"url": "http://127.0.0.1/", "events": ["event.recorded"]}), 404,
            "not_found")
    problem(c.get("/v1/webhooks/wh_0123456789abcdef"), 404, "not_found")


def test_crud_the_keys_own_webhooks_only(client, receiver):
    problem(client.get("/v1/webhooks"), 401, "api_key_required")
    made = register(client, receiver.url, ["event.recorded", "event.recorded", "round.ended"])
    assert made["secret"].startswith("whsec_") and made["id"].startswith("wh_")
    assert made["events"] == ["event.recorded", "round.ended"] and made["tables"] is None
    assert made["status"] == "ok" and made["last_delivery"] is None and made["dead_letters"] == 0
    view = client.get(f"/v1/webhooks/{made['id']}", headers=acme()).get_json()
    assert view == {k: v for k, v in made.items() if k != "secret"}  # the secret is shown once
    assert client.get("/v1/webhooks", headers=acme()).get_json() == {"webhooks": [view]}
    # another key sees none of it
    beta = {"X-API-Key": BETA}
    assert client.get("/v1/webhooks", headers=beta).get_json() == {"webhooks": []}
    problem(client.get(f"/v1/webhooks/{made['id']}", headers=beta), 404, "webhook_not_found")
    problem(client.delete(f"/v1/webhooks/{made['id']}", headers=beta), 404, "webhook_not_found")
    problem(client.post(f"/v1/webhooks/{made['id']}/test", headers=beta), 404, "webhook_not_found")
    problem(client.get("/v1/webhooks/not-an-id", headers=acme()), 404, "webhook_not_found")
    r = client.delete(f"/v1/webhooks/{made['id']}", headers=acme())
    assert r.status_code == 204 and not r.data
    problem(client.get(f"/v1/webhooks/{made['id']}", headers=acme()), 404, "webhook_not_found")
    problem(client.delete(f"/v1/webhooks/{made['id']}", headers=acme()), 404, "webhook_not_found")


@pytest.mark.parametrize("body, field", [
    ({"url": "ftp://127.0.0.1/x", "events": ["event.recorded"]}, "url"),
    ({"url": "http://user:pw@127.0.0.1/x", "events": ["event.recorded"]}, "url"),
    ({"url": "http://no-such-host.invalid/x", "events": ["event.recorded"]}, "url"),
    ({"url": "http://127.0.0.1:99999/x", "events": ["event.recorded"]}, "url"),
    ({"url": "http://[zz]/x", "events": ["event.recorded"]}, "url"),
    ({"url": "http://[::1/x", "events": ["event.recorded"]}, "url"),
    ({"url": "http://127.0.0.1/x#frag", "events": ["event.recorded"]}, "url"),
    ({"url": "http://a b/x", "events": ["event.recorded"]}, "url"),
    ({"url": "http://127.0.0.1/x", "events": []}, "events"),
    ({"url": "http://127.0.0.1/x", "events": ["event.sung"]}, "events.0"),
    ({"url": "http://127.0.0.1/x", "events": ["event.recorded"], "tables": ["nope"]}, "tables.0"),
    ({"url": "http://127.0.0.1/x", "events": ["event.recorded"], "extra": 1}, "extra"),
    ({"events": ["event.recorded"]}, "url"),
])
def test_a_bad_registration_is_a_422(client, body, field):
    r = client.post("/v1/webhooks", json=body, headers=acme())
    assert r.status_code == 422, r.get_data(as_text=True)
    assert r.get_json()["code"] in ("invalid_input", "webhook_url_refused")
    assert field in r.get_json()["errors"], r.get_json()


def test_a_table_filter_names_the_keys_own_tables_only(client, receiver):
    mine, theirs = new_table(client), new_table(client, key=BETA)
    r = client.post("/v1/webhooks", json={"url": receiver.url, "events": ALL, "tables": [mine["id"], theirs["id"]]},
                    headers=acme())
    assert problem(r, 422, "invalid_input")["errors"] == {"tables.1": ["not a table of this API key"]}
    assert register(client, receiver.url, tables=[mine["id"]])["tables"] == [mine["id"]]


def test_tables_null_registers_a_webhook_for_every_table_of_the_key(client, receiver, dispatchers):
    made = register(client, receiver.url, ["table.created"], tables=None)  # (as a view shows it: null)
    assert made["tables"] is None
    assert client.get(f"/v1/webhooks/{made['id']}", headers=acme()).get_json()["tables"] is None
    dispatchers()
    tables = {new_table(client)["id"], new_table(client)["id"]}
    new_table(client, key=BETA)  # (not the key's)
    receiver.wait(lambda r: len(r.messages()) >= 2, what="both tables' creation")
    assert sorted(b["data"]["table"] for b in receiver.verify(made["secret"])) == sorted(tables)


def test_an_api_key_has_at_most_twenty_webhooks(client, receiver):
    for _ in range(20):
        register(client, receiver.url)
    problem(client.post("/v1/webhooks", json={"url": receiver.url, "events": ALL}, headers=acme()), 409,
            "too_many_webhooks")
    assert len(client.get("/v1/webhooks", headers=acme()).get_json()["webhooks"]) == 20


def test_the_test_endpoint_sends_a_signed_message_and_shows_it(client, receiver):
    made = register(client, receiver.url)
    view = client.post(f"/v1/webhooks/{made['id']}/test", headers=acme()).get_json()
    assert view["last_delivery"]["ok"] and view["last_delivery"]["status"] == 200
    assert view["last_delivery"]["type"] == "webhook.test" and view["status"] == "ok"
    (body,) = receiver.verify(made["secret"])
    assert body["type"] == "webhook.test" and body["data"] == {"table": None, "seq": None, "version": None,
                                                              "record": None, "balances": None}
    receiver.plan.append(503)
    view = client.post(f"/v1/webhooks/{made['id']}/test", headers=acme()).get_json()
    assert view["last_delivery"]["ok"] is False and view["last_delivery"]["status"] == 503


# -- the SSRF guard ---------------------------------------------------------------------------
@given(st.text(max_size=80) | st.builds(lambda host, rest: f"http://{host}/{rest}", st.text(max_size=30),
                                        st.text(max_size=20)))
def test_any_url_is_parsed_or_refused(url):
    try:
        parse_target(url)
    except TargetRefused:
        pass


@pytest.mark.parametrize("address", ["127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254",
                                     "100.64.0.1", "0.0.0.0", "::1", "fe80::1", "fc00::1", "::ffff:127.0.0.1",
                                     "2002:7f00:1::", "64:ff9b::a00:1", "224.0.0.1", "240.0.0.1",
                                     # IPv4-compatible and IPv4-translated forms of 127.0.0.1 and 10.0.0.1, a
                                     # local-use NAT64 prefix, site-local: none of them global unicast
                                     "::7f00:1", "::a00:1", "::ffff:0:7f00:1", "64:ff9b:1::a00:1", "fec0::1"])
def test_no_address_but_a_public_one_is_a_target(address):
    assert address_refused(address)


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "8.8.8.8",
                                     "64:ff9b::808:808", "::ffff:8.8.8.8"])
def test_public_addresses_are_targets(address):
    assert address_refused(address) is None


def test_loopback_targets_are_refused_at_registration_and_at_delivery(redis_url, receiver):
    strict = make_app(redis_url, WEBHOOK_ALLOW_PRIVATE=False).test_client()
    for url in (receiver.url, receiver.url.replace("127.0.0.1", "localhost"), "http://[::1]:80/x",
                "http://169.254.169.254/latest/meta-data"):
        r = strict.post("/v1/webhooks", json={"url": url, "events": ALL}, headers=acme())
        assert problem(r, 422, "webhook_url_refused")["errors"]["url"], url
    with pytest.raises(TargetRefused):
        resolve(receiver.url.replace("127.0.0.1", "localhost"))
    # checked again when delivering (a name may resolve elsewhere by then): nothing reaches the receiver
    attempt = deliver(receiver.url, b"{}", {}, timeout=1.0, allow_private=False)
    assert not attempt.ok and attempt.status is None and "target refused" in attempt.error
    assert receiver.received == []
    assert deliver(receiver.url, b"{}", {}, timeout=1.0, allow_private=True).ok


class _Stalling:
    """A TCP listener on 127.0.0.1 that stalls its clients: ``trickle`` sends what looks like a TLS handshake
    record one byte at a time (the handshake never ends, each read gets a byte); else its backlog is full,
    so a new connection is never established (its SYNs are dropped)."""

    def __init__(self, trickle: bool) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(0)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.held: list[socket.socket] = []
        if trickle:
            threading.Thread(target=self._serve, daemon=True).start()
        else:
            filler = socket.create_connection(("127.0.0.1", self.port))  # (accepted by no one: the queue is full)
            self.held.append(filler)

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            try:
                conn.recv(65536)  # (the client's hello)
                conn.sendall(b"\x16\x03\x03\x40\x00")  # a handshake record of 16 KiB, to come byte by byte
                while not self.stop.wait(0.1):
                    conn.sendall(b"\x02")
            except OSError:
                pass

    def close(self) -> None:
        self.stop.set()
        for s in (*self.held, self.sock):
            s.close()


def test_an_attempt_ends_by_its_deadline_in_a_trickled_tls_handshake():
    server = _Stalling(trickle=True)
    try:
        started = time.monotonic()
        attempt = deliver(f"https://127.0.0.1:{server.port}/x", b"{}", {}, timeout=0.5, allow_private=True)
        took = time.monotonic() - started
    finally:
        server.close()
    assert not attempt.ok and attempt.error.startswith("timeout"), attempt
    assert took < 1.5, took  # (the deadline, and the watchdog's 50 ms)


def test_an_attempt_ends_by_its_deadline_however_many_addresses_stall(monkeypatch):
    server = _Stalling(trickle=False)
    url = f"http://stalling.example:{server.port}/x"
    monkeypatch.setattr(delivery, "resolve", lambda u, allow_private=False, **_: (parse_target(u), ["127.0.0.1"] * 4))
    try:
        started = time.monotonic()
        attempt = deliver(url, b"{}", {}, timeout=0.5, allow_private=True)
        took = time.monotonic() - started
    finally:
        server.close()
    assert not attempt.ok and attempt.error.startswith("timeout"), attempt
    assert took < 1.5, took  # (one timeout in all, not one per address)


class HangingLookup:
    """A resolver (``lookup=`` of :func:`~service.webhooks.delivery.deliver`) whose lookups hang until ``release``
    (10 s at most), then fail as an unknown host; ``asked``: the hosts it was asked for."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.asked: list[str] = []

    def __call__(self, host, port, *args, **kwargs):
        self.asked.append(host)
        self.release.wait(10.0)
        raise socket.gaierror(socket.EAI_NONAME, "released")


def test_an_attempt_ends_by_its_deadline_when_the_hosts_lookup_hangs(receiver):
    lookup = HangingLookup()
    try:
        started = time.monotonic()
        attempt = deliver("http://hangs.example/x", b"{}", {}, timeout=0.5, allow_private=True, lookup=lookup)
        took = time.monotonic() - started
    finally:
        lookup.release.set()
    assert lookup.asked == ["hangs.example"]
    assert not attempt.ok and attempt.status is None, attempt
    assert attempt.error == "timeout: the host 'hangs.example' did not resolve within 0.5 s", attempt
    assert took < 1.5, took
    # a lookup that answers in time is what the attempt connects to
    def answers(host, port, *args, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", port))]

    url = receiver.url.replace("127.0.0.1", "answers.example")
    assert deliver(url, b"{}", {}, timeout=1.0, allow_private=True, lookup=answers).ok
    assert len(receiver.received) == 1


def test_a_registration_whose_hosts_lookup_hangs_is_refused_by_its_deadline(redis_client):
    lookup = HangingLookup()
    registry = Registry(redis_client, {"acme": "ab" * 32}, lookup=lookup, lookup_timeout=0.3)
    try:
        with pytest.raises(TargetRefused, match="did not resolve within 0.3 s"):
            registry.create("acme", "https://hangs.example/in", ["event.recorded"], None)
    finally:
        lookup.release.set()
    assert lookup.asked == ["hangs.example"] and registry.all("acme") == []


GEVENT_LOOKUPS = """
from gevent import monkey
monkey.patch_all()
import json, socket, sys, threading, time
from service.webhooks.delivery import deliver

release = threading.Event()

def hangs(host, port, *args, **kwargs):  # (a cooperative wait: gevent's own resolver yields as well)
    release.wait(10.0)
    raise socket.gaierror(socket.EAI_NONAME, "released")

started = time.monotonic()
hung = deliver("http://hangs.example/x", b"{}", {}, timeout=0.5, allow_private=True, lookup=hangs)
took = time.monotonic() - started
release.set()
local = deliver(sys.argv[1], b"{}", {}, timeout=2.0, allow_private=True)  # (gevent's getaddrinfo, in a greenlet)
print(json.dumps({"hung": hung.error, "took": took, "local": local.ok, "local_error": local.error}))
"""


def test_under_gevent_an_attempt_ends_by_its_deadline_when_the_hosts_lookup_hangs(receiver):
    done = subprocess.run([sys.executable, "-c", GEVENT_LOOKUPS, receiver.url.replace("127.0.0.1", "localhost")],
                          capture_output=True, text=True, timeout=60, check=False,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["hung"] == "timeout: the host 'hangs.example' did not resolve within 0.5 s", out
    assert out["took"] < 1.5, out
    assert out["local"], out
    assert len(receiver.received) == 1


def test_a_dispatcher_that_refuses_private_targets_delivers_nothing_there(client, receiver, dispatchers):
    made = register(client, receiver.url)  # (registered where private targets are allowed)
    d = dispatchers(allow_private=False)
    new_table(client)
    view = wait_until(lambda: client.get(f"/v1/webhooks/{made['id']}", headers=acme()).get_json()["last_delivery"],
                      what="an attempt")
    assert view["ok"] is False and "target refused" in view["error"]
    assert receiver.received == [] and d.delivered == 0


# -- the outbox ---------------------------------------------------------------------------------
def outbox(r: redis.Redis, table_id: str) -> list[tuple[str, int | None]]:
    """The table's outbox: (type, seq) of each notification."""
    entries = r.xrange(keys.outbox(table_id))
    assert entries is not None  # (redis-py types the reply Optional)
    out = []
    for _, fields in entries:
        assert fields is not None  # (None only for an entry deleted under a pending claim)
        out.append((text(fields[b"t"]), json.loads(fields[b"d"])["seq"]))
    return out


def test_every_acknowledged_write_has_its_notification_and_a_refused_one_none(client, redis_url, redis_client):
    t = new_table(client)
    assert post(client, t, {"type": "round_start"}).status_code == 201
    assert post(client, t, {"type": "hu", "seat": 9}).status_code == 422           # the rules refuse it
    assert post(client, t, KONG, **{"If-Match": '"7"'}).status_code == 412          # a stale If-Match
    assert post(client, t, KONG, **{"Idempotency-Key": "k"}).status_code == 201
    assert post(client, t, KONG, **{"Idempotency-Key": "k"}).headers["Idempotent-Replayed"] == "true"
    assert client.post(f"/v1/tables/{t['id']}/events/2/void",
                       headers={"Authorization": f"Bearer {t['token']}"}).status_code == 201
    assert client.post(f"/v1/tables/{t['id']}/events/2/void",
                       headers={"Authorization": f"Bearer {t['token']}"}).status_code == 409  # already voided
    assert post(client, t, {"type": "round_end"}).status_code == 201
    assert client.post(f"/v1/tables/{t['id']}/finish", headers=acme()).status_code == 200
    assert post(client, t, KONG).status_code == 409                                 # finished
    assert client.post(f"/v1/tables/{t['id']}/finish", headers=acme()).status_code == 200  # (already: nothing new)
    assert client.delete(f"/v1/tables/{t['id']}", headers=acme()).status_code == 204
    assert outbox(redis_client, t["id"]) == [
        ("table.created", None), ("event.recorded", 1), ("event.recorded", 2), ("event.voided", 3),
        ("event.recorded", 4), ("round.ended", 4), ("table.finished", None), ("table.deleted", None)]
    # a table without an owner has no outbox
    anonymous = create_app({"TESTING": True, "REDIS_URL": redis_url}).test_client()
    u = anonymous.post("/v1/tables", json={"players": PLAYERS}).get_json()
    assert post(anonymous, u, {"type": "round_start"}).status_code == 201
    assert outbox(redis_client, u["id"]) == []


def test_deliveries_are_signed_in_seq_order_and_carry_the_record_as_listed(client, receiver, dispatchers):
    made = register(client, receiver.url)
    dispatchers()
    t = new_table(client)
    win = {"type": "hu", "from": None, "tile": "5p", "after_kong": False,
           "winners": [{"seat": 1, "hand": {"tiles": ["1m", "2m", "3m", "4m", "5m", "6m", "7m", "8m", "9m", "1p", "2p",
                                                      "3p", "5p", "5p"], "melds": []}}]}
    written = [post(client, t, {"type": "round_start"}), post(client, t, KONG),
               client.post(f"/v1/tables/{t['id']}/events/2/void", headers={"Authorization": f"Bearer {t['token']}"}),
               post(client, t, win), post(client, t, {"type": "round_end"})]
    assert [w.status_code for w in written] == [201] * 5, [w.get_json() for w in written]
    written = [w.get_json() for w in written]
    listed = client.get(f"/v1/tables/{t['id']}/events", headers=acme()).get_json()["events"]
    assert (
        listed[1]["voided"] is True and listed[3]["winners"][0]["hand"]["tiles"] == win["winners"][0]["hand"]["tiles"]
    )
    view = client.post(f"/v1/tables/{t['id']}/finish", headers=acme()).get_json()
    assert client.delete(f"/v1/tables/{t['id']}", headers=acme()).status_code == 204
    receiver.wait(lambda r: len(r.received) == 9, what="9 deliveries")
    bodies = receiver.verify(made["secret"])  # every signature checks out
    assert [b["type"] for b in bodies] == ["table.created", "event.recorded", "event.recorded", "event.voided",
                                           "event.recorded", "event.recorded", "round.ended", "table.finished",
                                           "table.deleted"]
    assert bodies[0]["data"] == {"table": t["id"], "seq": None, "version": 0, "record": None,
                                 "balances": [0, 0, 0, 0]}
    for body, seq in zip(bodies[1:7], (1, 2, 3, 4, 5, 5)):
        record = dict(listed[seq - 1], voided=False)  # (as listed when it was recorded: every member)
        assert body["data"] == {"table": t["id"], "seq": seq, "version": written[seq - 1]["version"],
                                "record": record, "balances": written[seq - 1]["balances"]}
    assert bodies[2]["data"]["balances"][0] > 0 and bodies[3]["data"]["balances"] == [0, 0, 0, 0]
    assert bodies[7]["data"] == {"table": t["id"], "seq": None, "version": 5, "record": None,
                                 "balances": view["balances"]}
    assert bodies[8]["data"] == bodies[7]["data"]
    ids = [r["headers"]["webhook-id"] for r in receiver.received]
    assert len(set(ids)) == 9 and all(i.startswith(f"msg_{t['id']}_") for i in ids)
    assert all(b["timestamp"].endswith("Z") for b in bodies)
    got = wait_until(lambda: (v := client.get(f"/v1/webhooks/{made['id']}", headers=acme()).get_json())
                     ["last_delivery"]["type"] == "table.deleted" and v, what="the last delivery noted")
    assert got["status"] == "ok" and got["last_delivery"]["ok"] and got["last_delivery"]["attempt"] == 1


def test_a_webhook_gets_its_events_and_tables_only_and_its_keys_tables_only(client, receiver, dispatchers):
    first, second = new_table(client), new_table(client)
    made = register(client, receiver.url, ["round.ended"], tables=[second["id"]])
    other = Receiver()
    try:
        beta = register(client, other.url, key=BETA)
        dispatchers()
        for t in (first, second):
            for event in ({"type": "round_start"}, KONG, {"type": "round_end"}):
                assert post(client, t, event).status_code == 201
        receiver.wait(lambda r: len(r.received) >= 1, what="the round's end")
        theirs = new_table(client, key=BETA)
        other.wait(lambda r: len(r.received) >= 1, what="beta's table")
        assert [b["data"]["table"] for b in other.verify(beta["secret"])] == [theirs["id"]]
    finally:
        other.close()
    (body,) = receiver.verify(made["secret"])
    assert body["type"] == "round.ended" and body["data"]["table"] == second["id"] and body["data"]["seq"] == 3


def test_retries_after_500_and_a_hang_then_success_in_order(client, receiver, dispatchers, redis_client):
    made = register(client, receiver.url, ["event.recorded"])
    receiver.plan.extend([500, ("hang", 3.0), 502])  # (the dispatcher's attempt times out after 1 s)
    dispatchers()
    t = new_table(client)
    for event in ({"type": "round_start"}, KONG, kong("2m")):
        assert post(client, t, event).status_code == 201
    receiver.wait(lambda r: len(r.messages()) >= 3, what="3 deliveries")
    ok = [m["data"]["seq"] for m in receiver.messages()]
    assert ok[:3] == [1, 2, 3]  # in order: nothing after seq 1 went before it was delivered
    answered = [r["answered"] for r in receiver.received]
    assert answered[:3] == [500, 200, 502] or answered[:3] == [500, 502, 200], answered  # (the hang's late 200)
    view = client.get(f"/v1/webhooks/{made['id']}", headers=acme()).get_json()
    assert view["status"] == "ok" and view["dead_letters"] == 0
    # delivered entries are trimmed at the table's next visit
    wait_until(lambda: outbox(redis_client, t["id"]) == [], timeout=30, what="the outbox trimmed")


def test_after_the_retry_budget_a_notification_is_dead_lettered_and_the_webhook_failing(app, client, receiver,
                                                                                       dispatchers):
    made = register(client, receiver.url, ["event.recorded"])
    receiver.default = 500
    dispatchers(retry_for=0.5, backoff_ms=50)
    t = new_table(client)
    assert post(client, t, {"type": "round_start"}).status_code == 201
    view = wait_until(lambda: (v := client.get(f"/v1/webhooks/{made['id']}", headers=acme()).get_json())
                      ["dead_letters"] and v, what="a dead letter")
    assert view["status"] == "failing" and view["last_delivery"]["ok"] is False
    assert len(receiver.received) >= 2  # retried before giving up
    (letter,) = app.extensions["webhooks"].dead_letters("acme", made["id"])
    assert letter["seq"] == 1 and letter["status"] == 500 and letter["body"]["data"]["seq"] == 1
    # failing: the next notification gets one attempt; then the receiver is back and so is the status
    before = len(receiver.received)
    assert post(client, t, KONG).status_code == 201
    wait_until(lambda: client.get(f"/v1/webhooks/{made['id']}", headers=acme()).get_json()["dead_letters"] == 2,
               what="the second dead letter")
    assert len(receiver.received) == before + 1
    receiver.default = 200
    assert post(client, t, kong("2m")).status_code == 201
    receiver.wait(lambda r: r.messages(), what="a delivery")
    assert [m["data"]["seq"] for m in receiver.messages()] == [3]
    wait_until(lambda: client.get(f"/v1/webhooks/{made['id']}", headers=acme()).get_json()["status"] == "ok",
               what="ok again")


def test_once_the_webhook_is_ok_again_a_lane_that_dead_lettered_gives_its_next_notification_a_whole_budget(
        client, receiver, dispatchers):
    made = register(client, receiver.url, ["event.recorded"])
    receiver.default = 500
    first = dispatchers(retry_for=0.5, backoff_ms=50)
    a, b = new_table(client), new_table(client)
    assert post(client, a, {"type": "round_start"}).status_code == 201
    wait_until(lambda: client.get(f"/v1/webhooks/{made['id']}", headers=acme()).get_json()["dead_letters"] == 1,
               what="table a's seq 1 dead-lettered")
    receiver.default = 200
    assert post(client, b, {"type": "round_start"}).status_code == 201  # delivered: the webhook is ok again
    wait_until(lambda: client.get(f"/v1/webhooks/{made['id']}", headers=acme()).get_json()["status"] == "ok",
               what="ok again")
    first.stop(wait=3.0)
    dispatchers(retry_for=0.5, backoff_ms=50)  # (a fresh copy of the webhook's status: ok)
    receiver.plan.append(500)  # one failure, then the retry (50 ms later, well within the 0.5 s budget) succeeds
    assert post(client, a, KONG).status_code == 201
    receiver.wait(lambda r: any(m["data"]["table"] == a["id"] for m in r.messages()), what="table a's seq 2")
    assert [(m["data"]["table"], m["data"]["seq"]) for m in receiver.messages()] == [(b["id"], 1), (a["id"], 2)]
    assert client.get(f"/v1/webhooks/{made['id']}", headers=acme()).get_json()["dead_letters"] == 1


def test_a_visit_with_an_older_copy_of_the_webhooks_keeps_the_lane_of_a_webhook_registered_since(
        app, client, receiver, dispatchers, redis_url, monkeypatch):
    from service.webhooks import dispatcher as dispatcher_module

    monkeypatch.setattr(dispatcher_module, "HOOKS_FOR", 60.0)  # (the copy below stays in use)
    register(client, receiver.url, ["event.recorded"])
    t = new_table(client)
    stale = Dispatcher(connect(redis_url), app.extensions["webhooks"],
                       DispatcherOptions(timeout=1.0, allow_private=True))  # (not started: visited by hand)
    assert stale.visit(t["id"]) == 1  # its copy of acme's webhooks: the first one only
    wait_until(lambda: stale.busy == 0, what="the first webhook's lane job (table.created: not its type) ended")
    other = Receiver()
    try:
        newer = register(client, other.url, ["event.recorded"])
        fresh = dispatchers()
        assert post(client, t, {"type": "round_start"}).status_code == 201
        other.wait(lambda r: r.messages(), what="seq 1 to the newer webhook")
        r = redis.Redis.from_url(redis_url)
        wait_until(lambda: r.hget(keys.lanes(t["id"]), newer["id"]), what="its lane written")
        fresh.stop(wait=3.0)
        lane = r.hget(keys.lanes(t["id"]), newer["id"])  # (read once the fresh dispatcher is done with it)
        assert stale.visit(t["id"]) == 1
        assert r.hget(keys.lanes(t["id"]), newer["id"]) == lane  # not taken for a deleted webhook's
        r.close()
        dispatchers()
        assert post(client, t, KONG).status_code == 201
        other.wait(lambda rc: len(rc.messages()) >= 2, what="seq 2 to the newer webhook")
        assert [m["data"]["seq"] for m in other.messages()] == [1, 2]  # seq 1 once
        # a webhook that is gone does lose its lanes
        assert client.delete(f"/v1/webhooks/{newer['id']}", headers=acme()).status_code == 204
        # (its copy is a fresh one now, read when the newer webhook's lane was seen: used for HOOKS_FOR)
        monkeypatch.setattr(dispatcher_module, "HOOKS_FOR", 0.0)
        r = redis.Redis.from_url(redis_url)
        wait_until(lambda: stale.visit(t["id"]) and r.hget(keys.lanes(t["id"]), newer["id"]) is None,
                   what="the deleted webhook's lane dropped")
        r.close()
    finally:
        other.close()


def test_the_status_follows_the_order_of_the_outcomes_not_the_clocks_of_the_dispatchers_that_noted_them(
        app, client, receiver, monkeypatch):
    from service.webhooks import registry as registry_module

    made = register(client, receiver.url, ["event.recorded"])
    registry = app.extensions["webhooks"]
    hook = registry.webhook("acme", made["id"])
    attempt = {"at": "2026-01-01T00:00:00.000Z", "id": "msg_x", "type": "event.recorded", "table": None, "seq": 1,
               "attempt": 1, "ok": False, "status": 500, "error": "HTTP 500", "duration_ms": 1}
    assert registry.note(hook, attempt, "dead", {"id": "msg_x"})
    assert client.get(f"/v1/webhooks/{made['id']}", headers=acme()).get_json()["status"] == "failing"
    real = registry_module.now_ms
    monkeypatch.setattr(registry_module, "now_ms", lambda: real() - 5_000)  # a dispatcher whose clock is 5 s behind
    assert registry.note(
        hook, {**attempt, "ok": True, "status": 200, "error": None}, "ok"
    )  # (noted after the dead letter)
    assert client.get(f"/v1/webhooks/{made['id']}", headers=acme()).get_json()["status"] == "ok"


class LosesRedisAtTheSecondLaneLease(redis.Redis):
    """A redis-py client whose ``SET`` of a second lane lease (``{t:<id>}:lease:<hook>``) fails as a lost
    connection would, once; ``leases``: the lane leases it set before that."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.leases: list[str] = []
        self.failed = False

    def set(self, name, value, *args, **kwargs):
        key = name.decode() if isinstance(name, bytes) else name
        if ":lease:" in key and not self.failed:
            if self.leases:
                self.failed = True
                raise redis.exceptions.ConnectionError("connection lost")
            self.leases.append(key)
        return super().set(name, value, *args, **kwargs)


def test_a_redis_error_in_a_visit_gives_back_the_lane_jobs_it_had_reserved(app, client, receiver, redis_url):
    register(client, receiver.url, ["event.recorded"])
    register(client, receiver.url, ["event.recorded"])
    t = new_table(client)
    assert post(client, t, {"type": "round_start"}).status_code == 201
    flaky = LosesRedisAtTheSecondLaneLease.from_url(redis_url)
    d = Dispatcher(flaky, app.extensions["webhooks"],  # (not started: visited by hand)
                   DispatcherOptions(timeout=1.0, allow_private=True, concurrency=2, per_key=2, per_webhook=1))
    try:
        with pytest.raises(redis.exceptions.ConnectionError):
            d.visit(t["id"])
        assert d.busy == 0  # (else the dispatcher's room shrinks for good: 2 such errors, and it delivers nothing)
        (taken,) = flaky.leases
        assert flaky.get(taken) is None  # the first lane's lease is given back
        # the room of each webhook (one lane job at most) is whole again: the next visit starts both lanes
        assert d.visit(t["id"]) == 1
        receiver.wait(lambda rc: len(rc.messages()) == 2, what="seq 1 to both webhooks")
        assert [m["data"]["seq"] for m in receiver.messages()] == [1, 1]
        wait_until(lambda: d.busy == 0, what="both lane jobs ended")
    finally:
        d.stop(wait=3.0)
        flaky.close()


class SlowFirstLaneRead(redis.Redis):
    """A redis-py client whose first ``HGET`` of a table's lanes (a lane job's first command, once its
    lease was taken) answers ``delay`` seconds late: a job that starts late (a busy worker, a slow Redis)."""

    delay = 2.6

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.slowed = threading.Event()

    def hget(self, name, key):
        hash_key = name.decode() if isinstance(name, bytes) else name
        if hash_key.endswith(":lanes") and not self.slowed.is_set():
            self.slowed.set()
            time.sleep(self.delay)  # (the delay injected, not a check)
        return super().hget(name, key)


def test_a_lane_job_that_starts_late_renews_its_lease_by_when_it_was_taken(client, receiver, dispatchers, redis_url):
    made = register(client, receiver.url, ["event.recorded"])
    slow = SlowFirstLaneRead.from_url(redis_url)
    # (renewed before an attempt once 0.4 s old; the job's lease (3 s) is 2.6 s old at its first attempt)
    dispatchers(client=slow, timeout=0.6, lane_lease_ms=3000)
    receiver.plan.append(("hang", 0.5))  # (unrenewed, the lease expires during this attempt)
    t = new_table(client)
    assert post(client, t, {"type": "round_start"}).status_code == 201
    r = redis.Redis.from_url(redis_url)
    (last, _), = r.xrevrange(keys.outbox(t["id"]), count=1)  # seq 1's entry

    def cursor():
        lane = r.hget(keys.lanes(t["id"]), made["id"])
        return lane is not None and json.loads(lane)["c"] == last.decode()

    wait_until(cursor, timeout=30, what="seq 1's delivery recorded")
    r.close()
    assert slow.slowed.is_set()
    # sent once: its lease held (a second holder's copy would have arrived before the cursor it recorded)
    assert len(receiver.arrived) == 1, receiver.arrived
    assert [m["data"]["seq"] for m in receiver.messages()] == [1]


def test_one_receivers_hang_does_not_hold_another_webhooks_deliveries(client, receiver, dispatchers):
    slow = Receiver()
    try:
        slow.default = ("hang", 30.0)
        register(client, slow.url, ["event.recorded"])
        register(client, receiver.url, ["event.recorded"])
        dispatchers(timeout=10.0)
        t = new_table(client)
        for event in ({"type": "round_start"}, KONG, kong("2m"), kong("3m")):
            assert post(client, t, event).status_code == 201
        slow.wait(lambda r: r.arrived, timeout=8.0, what="the slow webhook's first attempt")
        # all four reach the healthy receiver while the slow one still holds its first (10 s timeout)
        receiver.wait(lambda r: len(r.messages()) == 4, timeout=8.0, what="4 deliveries beside a hanging webhook")
        assert len(slow.arrived) == 1 and slow.received == []  # (in flight all along: nothing answered yet)
        assert [m["data"]["seq"] for m in receiver.messages()] == [1, 2, 3, 4]
    finally:
        slow.close()


def test_a_webhook_gets_a_notification_stamped_by_a_clock_a_little_behind_the_one_of_its_registration(
        app, client, receiver, dispatchers, redis_client):
    made = register(client, receiver.url, ["event.recorded"])
    created_ms = app.extensions["webhooks"].webhook("acme", made["id"]).created_ms
    # a write acknowledged after the registration, at a table on another cluster node whose clock is 200 ms
    # behind the owner's node's: its outbox entry's id is older than the webhook
    table_id = "00000000000000ab"
    data = {"table": table_id, "seq": 1, "version": 1, "record": {"seq": 1, "type": "round_start"},
            "balances": [0, 0, 0, 0]}
    redis_client.xadd(keys.outbox(table_id), {"t": "event.recorded", "o": "acme", "d": json.dumps(data)},
                      id=f"{created_ms - 200}-0")
    redis_client.zadd(keys.WEBHOOKS_DUE, {table_id: 0})
    dispatchers()
    receiver.wait(lambda rc: rc.messages(), what="the notification")
    assert [m["data"] for m in receiver.verify(made["secret"])] == [data]


def test_an_outbox_a_crash_left_without_its_hint_is_found_by_the_sweep(client, receiver, dispatchers, redis_client):
    made = register(client, receiver.url, ["event.recorded"])
    t = new_table(client)
    assert post(client, t, {"type": "round_start"}).status_code == 201
    redis_client.delete(keys.WEBHOOKS_DUE)  # as if the writer died after its script, before its hint
    d = dispatchers(sweep_every=0.5)
    receiver.wait(lambda rc: rc.messages(), what="the sweep's delivery")
    assert [m["data"]["seq"] for m in receiver.verify(made["secret"])] == [1]
    wait_until(lambda: d.delivered == 1, what="the dispatcher's count")


def test_a_load_run_is_delivered_whole_in_order_once_by_two_dispatchers(client, receiver, dispatchers):
    made = register(client, receiver.url, ["event.recorded", "round.ended"])
    first, second = dispatchers(), dispatchers()
    tables = [new_table(client) for _ in range(5)]
    acknowledged: dict[str, list[int]] = defaultdict(list)
    errors: list = []
    lock = threading.Lock()

    def write(c, table, event) -> None:
        r = post(c, table, event)
        with lock:
            if r.status_code == 201:
                acknowledged[table["id"]].append(r.get_json()["seq"])
            else:
                errors.append(r.get_json())

    def kongs(table, plan) -> None:  # one writer's kongs of a round: (seat, tiles) in turn
        c = client.application.test_client()
        for seat, tiles in plan:
            for tile in tiles:
                write(c, table, {**KONG, "seat": seat, "tile": tile})

    def table_writer(table, rounds: int) -> None:
        c = client.application.test_client()
        try:
            for _ in range(rounds):
                write(c, table, {"type": "round_start"})
                pair = [threading.Thread(target=kongs, args=(table, plan)) for plan in (
                    [(0, ["1m", "2m", "3m", "4m"]), (1, ["5m", "6m", "7m", "8m"])],
                    [(2, ["1p", "2p", "3p", "4p"]), (3, ["5p", "6p", "7p", "8p"])])]
                for th in pair:  # two writers at once on the table
                    th.start()
                for th in pair:
                    th.join(60)
                write(c, table, {"type": "round_end"})
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=table_writer, args=(t, 4)) for t in tables]
    for th in threads:
        th.start()
    for th in threads:
        th.join(180)
    assert not errors, errors[:3]
    total = sum(len(v) for v in acknowledged.values())
    assert total == 5 * 4 * 18  # 360 events, over 5 tables, up to 10 writers at once
    ends = 5 * 4
    receiver.wait(lambda r: len(r.messages()) >= total + ends, timeout=60, what=f"{total + ends} deliveries")
    bodies = receiver.verify(made["secret"])
    seen = by_table([b for b in bodies if b["type"] == "event.recorded"])
    for t in tables:
        assert [m["data"]["seq"] for m in seen[t["id"]]] == sorted(acknowledged[t["id"]])  # all, in order, once
    assert len([b for b in bodies if b["type"] == "round.ended"]) == ends
    ids = Counter(r["headers"]["webhook-id"] for r in receiver.received)
    assert max(ids.values()) == 1  # the normal case: each entry once
    wait_until(lambda: first.delivered + second.delivered == total + ends, what="the dispatchers' counts")
    assert first.delivered and second.delivered  # both took part


# -- settings -----------------------------------------------------------------------------------
def test_the_webhook_settings_and_the_dispatcher_inside_serve(redis_url, redis_client):
    from service.config import ConfigError, Settings
    from service.serving import dispatcher_options, start_webhooks

    s = Settings.from_env({"WEBHOOK_DISPATCHER": "off", "WEBHOOK_ALLOW_PRIVATE": "yes", "WEBHOOK_TIMEOUT": "3",
                           "WEBHOOK_RETRY_SECONDS": "60", "WEBHOOK_BACKOFF_MS": "100", "API_KEYS": KEYS,
                           "REDIS_URL": redis_url})
    assert (s.webhooks, s.webhook_dispatcher, s.webhook_allow_private) == (True, False, True)
    opts = dispatcher_options(s)
    assert (opts.timeout, opts.retry_for, opts.backoff_ms, opts.allow_private) == (3.0, 60.0, 100, True)
    for bad in ({"WEBHOOKS": "maybe"}, {"WEBHOOK_TIMEOUT": "0"}, {"WEBHOOK_BACKOFF_MS": "1"}):
        with pytest.raises(ConfigError):
            Settings.from_env(bad)
    off = create_app(settings=s)
    assert start_webhooks(off, s) is None and "webhook_dispatcher" not in off.extensions
    on = create_app(settings=s.with_overrides(webhook_dispatcher=True))
    dispatcher = start_webhooks(on, s.with_overrides(webhook_dispatcher=True))
    try:
        assert dispatcher is not None and dispatcher.stop in on.extensions["worker_stop"]
    finally:
        dispatcher.stop()
    # WEBHOOKS off: no endpoints, no outbox
    quiet = create_app(settings=Settings.from_env({"WEBHOOKS": "0", "API_KEYS": KEYS, "REDIS_URL": redis_url}))
    c = quiet.test_client()
    problem(c.get("/v1/webhooks", headers=acme()), 404, "not_found")
    t = new_table(c)
    assert outbox(redis_client, t["id"]) == []


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)
BODIES = (
    st.fixed_dictionaries(
        {},
        optional={
            "url": st.sampled_from(["http://127.0.0.1:9/x", "https://[::1]/", "http://[zz]/", "ftp://x/"])
            | st.text(max_size=40),
            "events": st.lists(st.sampled_from(ALL) | st.text(max_size=12), max_size=8) | JSON,
            "tables": st.lists(st.text(alphabet="0123456789abcdef", min_size=16, max_size=16), max_size=3) | JSON,
        },
    )
    | JSON
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # (one Redis: at most 20 webhooks, then 409)
@given(body=BODIES)
def test_no_registration_body_is_a_server_error(client, body):
    r = client.post("/v1/webhooks", data=json.dumps(body), content_type="application/json", headers=acme())
    assert r.status_code in (201, 409, 422), r.get_data(as_text=True)
    if r.status_code != 201:
        assert r.mimetype == "application/problem+json"
