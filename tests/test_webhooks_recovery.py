"""Webhooks an operator can recover, and fair to everyone (docs/api.md "Webhooks"): PATCH, the deliveries log,
redelivery, secret rotation; fair lanes across keys; the endpoints' rate limits; an idle dispatcher that blocks;
the outboxes in /metrics and their bound.  Real Redis, real receivers on loopback (tests/receivers.py)."""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from datetime import datetime, timedelta, timezone

import pytest
import redis
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from standardwebhooks import Webhook as Verifier
from standardwebhooks.webhooks import WebhookVerificationError

from service.store import keys
from service.store.redis_client import connect
from service.webhooks import dispatcher as dispatcher_module
from service.webhooks import registry as registry_module
from service.webhooks.dispatcher import Dispatcher, DispatcherOptions
from tests.problems import problem
from tests.receivers import Receiver, wait_until
from tests.test_webhooks import APP_CONFIG, BETA, KONG, acme, kong, make_app, new_table, post, register

pytestmark = pytest.mark.app(**APP_CONFIG)


def view(client, hook_id: str) -> dict:
    r = client.get(f"/v1/webhooks/{hook_id}", headers=acme())
    assert r.status_code == 200, r.get_data(as_text=True)
    return r.get_json()


def patch(client, hook_id: str, body: dict, key: dict | None = None):
    return client.patch(f"/v1/webhooks/{hook_id}", json=body, headers=key or acme())


def log(client, hook_id: str, **query) -> dict:
    r = client.get(f"/v1/webhooks/{hook_id}/deliveries", query_string=query, headers=acme())
    assert r.status_code == 200, r.get_data(as_text=True)
    return r.get_json()


def seqs(rc: Receiver, **where) -> list[tuple]:
    """(type, table, seq) of each notification a receiver answered 2xx, in arrival order."""
    return [(m["type"], m["data"]["table"], m["data"]["seq"]) for m in rc.messages()
            if all(m["data"].get(k) == v for k, v in where.items())]


@pytest.fixture
def fresh_copies(monkeypatch):
    """Dispatchers read the webhooks again before each delivery (no second of staleness): a change's effect on
    the next write is then exact."""
    monkeypatch.setattr(dispatcher_module, "HOOKS_FOR", 0.0)


# -- PATCH --------------------------------------------------------------------------------------
def test_a_patch_is_checked_as_a_registration_and_changes_only_what_it_names(redis_url, client, receiver):
    made = register(client, receiver.url, ["event.recorded"])
    hook_id = made["id"]
    before = view(client, hook_id)
    assert before["enabled"] is True and before["previous_secret_expires"] is None
    mine, theirs = new_table(client), new_table(client, key=BETA)
    for body, field in [({"url": "ftp://127.0.0.1/x"}, "url"), ({"url": "http://no-such-host.invalid/"}, "url"),
                        ({"events": []}, "events"), ({"events": ["event.sung"]}, "events.0"),
                        ({"tables": [theirs["id"]]}, "tables.0"), ({"tables": ["nope"]}, "tables.0"),
                        ({"enabled": "maybe"}, "enabled"), ({"extra": 1}, "extra"), ({}, "_schema")]:
        r = patch(client, hook_id, body)
        assert r.status_code == 422 and r.get_json()["code"] in ("invalid_input", "webhook_url_refused"), body
        assert field in r.get_json()["errors"], (body, r.get_json())
    assert view(client, hook_id) == before  # nothing changed
    problem(patch(client, hook_id, {"enabled": False}, {"X-API-Key": BETA}), 404, "webhook_not_found")
    problem(patch(client, "wh_0123456789abcdef", {"enabled": False}), 404, "webhook_not_found")
    problem(patch(client, "nope", {"enabled": False}), 404, "webhook_not_found")
    r = patch(client, hook_id, {"events": ["round.ended", "event.recorded", "round.ended"], "tables": [mine["id"]]})
    assert r.status_code == 200, r.get_data(as_text=True)
    assert r.get_json() == {**before, "events": ["round.ended", "event.recorded"], "tables": [mine["id"]]}
    assert patch(client, hook_id, {"tables": None, "enabled": False}).get_json() == \
        {**before, "events": ["round.ended", "event.recorded"], "enabled": False}
    assert view(client, hook_id)["enabled"] is False
    # the URL is checked as at a registration (private targets refused unless allowed)
    strict = make_app(redis_url, WEBHOOK_ALLOW_PRIVATE=False).test_client()
    problem(patch(strict, hook_id, {"url": receiver.url}), 422, "webhook_url_refused")


def test_after_a_patch_of_its_url_a_webhook_is_sent_its_notifications_there(client, receiver, dispatchers,
                                                                            fresh_copies):
    other = Receiver()
    try:
        made = register(client, receiver.url, ["event.recorded"])
        dispatchers()
        t = new_table(client)
        assert post(client, t, {"type": "round_start"}).status_code == 201
        receiver.wait(lambda rc: rc.messages(), what="seq 1")
        assert patch(client, made["id"], {"url": other.url}).get_json()["url"] == other.url
        assert post(client, t, KONG).status_code == 201
        other.wait(lambda rc: rc.messages(), what="seq 2 at the new URL")
        assert [s for _, _, s in seqs(receiver)] == [1] and [s for _, _, s in seqs(other)] == [2]
        other.verify(made["secret"])
    finally:
        other.close()


def test_a_disabled_webhook_is_sent_nothing_and_re_enabled_only_what_is_written_from_then_on(
        client, receiver, dispatchers, fresh_copies):
    witness = Receiver()  # a second webhook of the table: once it has a notification, so could the first
    try:
        made = register(client, receiver.url, ["event.recorded"])
        register(client, witness.url, ["event.recorded"])
        dispatchers()
        t = new_table(client)
        assert post(client, t, {"type": "round_start"}).status_code == 201
        receiver.wait(lambda rc: rc.messages(), what="seq 1")
        assert patch(client, made["id"], {"enabled": False}).get_json()["enabled"] is False
        for event in (KONG, kong("2m")):
            assert post(client, t, event).status_code == 201
        witness.wait(lambda rc: len(rc.messages()) == 3, what="seqs 1-3 at the witness")
        assert patch(client, made["id"], {"enabled": True}).get_json()["enabled"] is True
        assert post(client, t, kong("3m")).status_code == 201
        receiver.wait(lambda rc: any(s == 4 for _, _, s in seqs(rc)), what="seq 4")
        assert [s for _, _, s in seqs(receiver)] == [1, 4]  # seqs 2 and 3, written while disabled: never
        witness.wait(lambda rc: len(rc.messages()) == 4, what="seq 4 at the witness")
    finally:
        witness.close()


def test_a_type_or_a_table_added_by_a_patch_is_sent_from_the_change_on(client, receiver, dispatchers, fresh_copies):
    witness = Receiver()
    try:
        a, b = new_table(client), new_table(client)
        made = register(client, receiver.url, ["event.recorded"], tables=[a["id"]])
        register(client, witness.url, ["event.recorded", "round.ended"])
        dispatchers()
        for t in (a, b):
            for event in ({"type": "round_start"}, {"type": "round_end"}):
                assert post(client, t, event).status_code == 201
        witness.wait(lambda rc: len(rc.messages()) == 6, what="both tables' first round at the witness")
        receiver.wait(lambda rc: len(rc.messages()) == 2, what="table a's two records")
        r = patch(client, made["id"], {"events": ["event.recorded", "round.ended"], "tables": [a["id"], b["id"]]})
        assert r.status_code == 200, r.get_data(as_text=True)
        for t in (a, b):
            for event in ({"type": "round_start"}, {"type": "round_end"}):
                assert post(client, t, event).status_code == 201
        receiver.wait(lambda rc: len(rc.messages()) >= 8, what="both tables' second round")
        witness.wait(lambda rc: len(rc.messages()) == 12, what="both tables' second round at the witness")
        got = defaultdict(list)
        for kind, table, seq in seqs(receiver):
            got[table].append((kind, seq))
        # table b's first round (written before b was added) and a's first round.ended (before the type was): never
        assert got[b["id"]] == [("event.recorded", 3), ("event.recorded", 4), ("round.ended", 4)]
        assert got[a["id"]] == [("event.recorded", 1), ("event.recorded", 2), ("event.recorded", 3),
                                ("event.recorded", 4), ("round.ended", 4)]
    finally:
        witness.close()


# -- the deliveries log ---------------------------------------------------------------------------
def test_the_deliveries_log_lists_each_notification_sent_newest_first_with_its_attempts(client, receiver,
                                                                                       dispatchers):
    made = register(client, receiver.url, ["event.recorded"])
    receiver.plan.append(500)  # seq 1's first attempt fails, its retry (50 ms later) succeeds
    dispatchers()
    t = new_table(client)
    for event in ({"type": "round_start"}, KONG):
        assert post(client, t, event).status_code == 201
    receiver.wait(lambda rc: len(rc.messages()) == 2, what="two deliveries")
    page = wait_until(lambda: (p := log(client, made["id"]))["deliveries"] and
                      [d["status"] for d in p["deliveries"]] == ["delivered", "delivered"] and p, what="both logged")
    ids = [r["headers"]["webhook-id"] for r in receiver.received]
    stamps = {m["_id"]: m["timestamp"] for m in receiver.messages()}
    newest, oldest = page["deliveries"]
    assert page["next"] is None
    assert oldest == {"id": ids[0], "type": "event.recorded", "table": t["id"], "seq": 1, "status": "delivered",
                      "attempts": 2, "created": stamps[ids[0]], "last_response": {
                          "at": oldest["last_response"]["at"], "status": 200, "error": None,
                          "duration_ms": oldest["last_response"]["duration_ms"]}}
    assert ids[0] == ids[1]  # (the retry: the same webhook-id)
    assert newest["id"] == ids[2] and newest["seq"] == 2 and newest["attempts"] == 1
    # a page at a time: `next` is the `after` of the next page
    first = log(client, made["id"], limit=1)
    assert [d["seq"] for d in first["deliveries"]] == [2] and first["next"]
    second = log(client, made["id"], limit=1, after=first["next"])
    assert [d["seq"] for d in second["deliveries"]] == [1] and second["next"] is None
    assert log(client, made["id"], limit=1, cursor=first["next"]) == second
    for query in ({"limit": 0}, {"limit": 101}, {"after": "x"}, {"after": "-1"}):
        problem(client.get(f"/v1/webhooks/{made['id']}/deliveries", query_string=query, headers=acme()), 422,
                "invalid_input")
    problem(client.get(f"/v1/webhooks/{made['id']}/deliveries", headers={"X-API-Key": BETA}), 404,
            "webhook_not_found")


def test_the_deliveries_log_keeps_the_newest_deliveries_only(client, receiver, dispatchers, monkeypatch):
    monkeypatch.setattr(registry_module, "DELIVERIES_KEPT", 3)
    made = register(client, receiver.url, ["event.recorded"])
    dispatchers()
    t = new_table(client)
    for event in ({"type": "round_start"}, KONG, kong("2m"), kong("3m"), kong("4m")):
        assert post(client, t, event).status_code == 201
    receiver.wait(lambda rc: len(rc.messages()) == 5, what="five deliveries")
    wait_until(lambda: [d["seq"] for d in log(client, made["id"])["deliveries"]] == [5, 4, 3], what="the newest 3")


def test_a_retrying_delivery_of_a_webhook_disabled_since_is_listed_dead(client, receiver, dispatchers):
    made = register(client, receiver.url, ["event.recorded"])
    receiver.default = 500
    dispatchers(backoff_ms=60_000)  # (its retry would be a minute later)
    t = new_table(client)
    assert post(client, t, {"type": "round_start"}).status_code == 201
    wait_until(lambda: [d["status"] for d in log(client, made["id"])["deliveries"]] == ["retrying"],
               what="seq 1 retrying")
    assert patch(client, made["id"], {"enabled": False}).status_code == 200
    assert [d["status"] for d in log(client, made["id"])["deliveries"]] == ["dead"]  # nothing retries it now


def test_recovery_a_receiver_fails_then_recovers_and_its_dead_delivery_is_redelivered(
        client, receiver, dispatchers, redis_client, monkeypatch):
    monkeypatch.setattr(dispatcher_module, "MARGIN_MS", 0)  # (delivered entries trimmed at the next visit)
    made = register(client, receiver.url, ["event.recorded"])
    receiver.default = 500
    d = dispatchers(retry_for=0.5, backoff_ms=50)
    t = new_table(client)
    assert post(client, t, {"type": "round_start"}).status_code == 201
    dead = wait_until(lambda: [d for d in log(client, made["id"])["deliveries"] if d["status"] == "dead"],
                      what="seq 1 dead")[0]
    assert view(client, made["id"])["status"] == "failing"
    failed = [r for r in receiver.received if r["headers"]["webhook-id"] == dead["id"]]
    assert len(failed) == dead["attempts"] >= 2 and dead["last_response"]["status"] == 500
    # the receiver recovers: the next notification is delivered, the webhook is ok again
    receiver.default = 200
    assert post(client, t, KONG).status_code == 201
    receiver.wait(lambda rc: rc.messages(), what="seq 2")
    wait_until(lambda: view(client, made["id"])["status"] == "ok", what="ok again")
    # the dead one is long gone from the table's outbox; its redelivery comes from the log's copy
    wait_until(lambda: d.visit(t["id"]) and redis_client.xlen(keys.outbox(t["id"])) == 0, what="the outbox trimmed")
    r = client.post(f"/v1/webhooks/{made['id']}/deliveries/{dead['id']}/redeliver", headers=acme())
    assert r.status_code == 200, r.get_data(as_text=True)
    again = r.get_json()
    assert again == {**dead, "status": "delivered", "attempts": dead["attempts"] + 1,
                     "last_response": {**again["last_response"], "status": 200, "error": None}}
    last = receiver.received[-1]
    assert last["headers"]["webhook-id"] == dead["id"]  # the same id: a receiver deduplicates on it
    assert json.loads(last["body"]) == json.loads(failed[0]["body"])  # the same notification
    Verifier(made["secret"]).verify(last["body"], last["headers"])
    listed = log(client, made["id"])["deliveries"]
    assert [(d["seq"], d["status"]) for d in listed] == [(2, "delivered"), (1, "delivered")]
    # a failed redelivery leaves the status as it was, and is not retried
    receiver.plan.append(503)
    r = client.post(f"/v1/webhooks/{made['id']}/deliveries/{dead['id']}/redeliver", headers=acme())
    assert r.get_json()["status"] == "delivered" and r.get_json()["last_response"]["status"] == 503
    assert r.get_json()["attempts"] == dead["attempts"] + 2
    # what is not in the log
    base = f"/v1/webhooks/{made['id']}/deliveries"
    problem(client.post(f"{base}/msg_{t['id']}_1-0/redeliver", headers=acme()), 404, "delivery_not_found")
    problem(client.post(f"{base}/nope/redeliver", headers=acme()), 404, "delivery_not_found")
    problem(client.post(f"{base}/{dead['id']}/redeliver", headers={"X-API-Key": BETA}), 404, "webhook_not_found")


# -- secret rotation ------------------------------------------------------------------------------
def test_a_rotated_secret_and_the_one_it_replaced_both_sign_for_a_day(client, receiver, dispatchers, monkeypatch):
    made = register(client, receiver.url, ["event.recorded"])
    r = client.post(f"/v1/webhooks/{made['id']}/secret/rotate", headers=acme())
    assert r.status_code == 200 and r.headers["Cache-Control"] == "no-store"
    rotated = r.get_json()
    new, old = rotated["secret"], made["secret"]
    assert new.startswith("whsec_") and new != old
    expires = datetime.fromisoformat(rotated["previous_secret_expires"].replace("Z", "+00:00"))
    assert abs(expires - datetime.now(timezone.utc) - timedelta(hours=24)) < timedelta(minutes=1)
    assert view(client, made["id"]) == {k: v for k, v in rotated.items() if k != "secret"}  # shown once
    dispatchers()
    t = new_table(client)
    assert post(client, t, {"type": "round_start"}).status_code == 201
    receiver.wait(lambda rc: rc.messages(), what="seq 1")
    delivered = receiver.received[-1]
    assert [s[:3] for s in delivered["headers"]["webhook-signature"].split(" ")] == ["v1,", "v1,"]
    for secret in (new, old):  # a receiver verifying with either secret accepts it
        assert Verifier(secret).verify(delivered["body"], delivered["headers"])["data"]["seq"] == 1
    with pytest.raises(WebhookVerificationError):
        Verifier("whsec_" + "A" * 32).verify(delivered["body"], delivered["headers"])
    # a day later the replaced secret signs no more
    real = registry_module.now_ms
    monkeypatch.setattr(registry_module, "now_ms", lambda: real() + registry_module.PREVIOUS_SECRET_MS + 1000)
    assert client.post(f"/v1/webhooks/{made['id']}/test", headers=acme()).get_json()["previous_secret_expires"] is None
    tested = receiver.received[-1]
    assert len(tested["headers"]["webhook-signature"].split(" ")) == 1
    Verifier(new).verify(tested["body"], tested["headers"])
    with pytest.raises(WebhookVerificationError):
        Verifier(old).verify(tested["body"], tested["headers"])
    problem(client.post(f"/v1/webhooks/{made['id']}/secret/rotate", headers={"X-API-Key": BETA}), 404,
            "webhook_not_found")


# -- fair lanes -----------------------------------------------------------------------------------
def test_one_keys_slow_receivers_do_not_delay_another_keys_deliveries(client, receiver, dispatchers):
    slow = Receiver()
    slow.default = ("hang", 30.0)  # (answered when the receiver closes)
    try:
        for _ in range(4):  # key A: four webhooks whose receiver hangs
            register(client, slow.url, ["event.recorded"])
        fast = register(client, receiver.url, ["event.recorded"], key=BETA)  # key B: one that answers
        dispatchers(concurrency=8, timeout=20.0)
        for _ in range(6):
            assert post(client, new_table(client), {"type": "round_start"}).status_code == 201
        # A's lane jobs take what they may of the dispatcher's 8 (half: 4), all of them hanging
        slow.wait(lambda rc: len(rc.arrived) >= 4, what="key A's attempts in flight")
        theirs = new_table(client, key=BETA)
        assert post(client, theirs, {"type": "round_start"}).status_code == 201
        receiver.wait(lambda rc: rc.messages(), timeout=5.0, what="key B's delivery beside key A's hanging ones")
        assert slow.received == [] and len(slow.arrived) == 4  # (A's attempts still in flight, no more started)
        assert [m["data"]["table"] for m in receiver.verify(fast["secret"])] == [theirs["id"]]
    finally:
        slow.close()


def test_a_slow_webhook_holds_at_most_its_share_of_its_keys_lanes(app, client, receiver, redis_url):
    slow = Receiver()
    slow.default = ("hang", 30.0)
    d = None
    try:
        hanging = register(client, slow.url, ["event.recorded"])
        register(client, receiver.url, ["event.recorded"])  # the same key's webhook that answers
        d = Dispatcher(connect(redis_url), app.extensions["webhooks"],  # (the key's share: 8, a webhook's: 4)
                       DispatcherOptions(timeout=20.0, allow_private=True, concurrency=16, sweep_every=3600.0)).start()
        tables = [new_table(client) for _ in range(10)]
        for t in tables:
            assert post(client, t, {"type": "round_start"}).status_code == 201
        receiver.wait(lambda rc: len(rc.messages()) == 10, timeout=15.0, what="the answering webhook's ten")
        # the hanging webhook holds at most its own share (a quarter of the dispatcher's, half its key's)
        assert 1 <= len(slow.arrived) <= 4 and slow.received == []
        assert view(client, hanging["id"])["last_delivery"] is None
    finally:
        slow.close()
        if d is not None:
            d.stop(wait=3.0)


# -- rate limits ----------------------------------------------------------------------------------
def test_a_webhooks_tests_and_redeliveries_have_a_rate_limit(redis_url, receiver):
    c = make_app(redis_url, CLIENT_WEBHOOK_SENDS_PER_MINUTE=3).test_client()
    made = register(c, receiver.url, ["event.recorded"])
    answers = [c.post(f"/v1/webhooks/{made['id']}/test", headers=acme()) for _ in range(5)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429, 429]
    assert problem(answers[3], 429, "too_many_requests")["limit"] == "client_webhook_sends"
    assert int(answers[3].headers["Retry-After"]) >= 1
    assert len(receiver.received) == 3  # nothing sent for the refused ones
    # a redelivery counts against the same limit
    r = c.post(f"/v1/webhooks/{made['id']}/deliveries/msg_0123456789abcdef_1-0/redeliver", headers=acme())
    assert problem(r, 429, "too_many_requests")["limit"] == "client_webhook_sends"
    # per API key: another key still may
    other = register(c, receiver.url, ["event.recorded"], key=BETA)
    assert c.post(f"/v1/webhooks/{other['id']}/test", headers={"X-API-Key": BETA}).status_code == 200


def test_every_webhook_endpoint_has_a_rate_limit(redis_url, receiver):
    c = make_app(redis_url, CLIENT_WEBHOOK_CALLS_PER_MINUTE=4).test_client()
    made = register(c, receiver.url, ["event.recorded"])
    calls = [c.get("/v1/webhooks", headers=acme()), c.get(f"/v1/webhooks/{made['id']}/deliveries", headers=acme()),
             patch(c, made["id"], {"enabled": False}), c.get(f"/v1/webhooks/{made['id']}", headers=acme()),
             c.post(f"/v1/webhooks/{made['id']}/secret/rotate", headers=acme())]
    assert [r.status_code for r in calls] == [200, 200, 200, 429, 429]
    assert problem(calls[3], 429, "too_many_requests")["limit"] == "client_webhook_calls"


# -- an idle dispatcher ---------------------------------------------------------------------------
class CountingRedis(redis.Redis):
    """A redis-py client that notes the name of every command it sends, and the thread that sent it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[tuple[str, str]] = []

    def execute_command(self, *args, **options):
        self.sent.append((threading.current_thread().name, str(args[0]).upper()))
        return super().execute_command(*args, **options)


def test_an_idle_dispatcher_blocks_until_a_write_wakes_it(app, client, receiver, redis_url, redis_client):
    made = register(client, receiver.url, ["event.recorded"])
    counting = CountingRedis.from_url(redis_url, socket_timeout=60)
    d = Dispatcher(counting, app.extensions["webhooks"],
                   DispatcherOptions(timeout=1.0, allow_private=True, idle=30.0, sweep_every=3600.0))
    # nothing due: it asks when the next visit is due (none), then blocks on the wake-up list
    waiter = threading.Thread(target=d.wait_for_work, name="waiter")
    waiter.start()
    wait_until(lambda: ("waiter", "BLPOP") in counting.sent, what="the wait to begin")
    assert waiter.is_alive()
    t = new_table(client)  # (the write's hint pushes the wake-up)
    waiter.join(5.0)
    assert not waiter.is_alive()  # woken by the write, not by its 30 s
    assert [c for n, c in counting.sent if n == "waiter"] == ["ZRANGE", "BLPOP"]
    # a write at a table due already pushes no wake-up (a waiting dispatcher looks again within `poll`)...
    for event in ({"type": "round_start"}, KONG, kong("2m")):
        assert post(client, t, event).status_code == 201
    assert redis_client.llen(keys.WEBHOOKS_WAKE) == 0
    # ...and however many tables become due, the wake-up list holds one element
    for _ in range(3):
        new_table(client)
    assert redis_client.llen(keys.WEBHOOKS_WAKE) == 1
    # a started dispatcher delivers them, then waits the same way; a write is delivered at once
    d.start()
    try:
        receiver.wait(lambda rc: len(rc.messages()) == 3, timeout=5.0, what="seqs 1-3")
        wait_until(lambda: counting.sent[-1] == ("webhooks-poll", "BLPOP"), what="waiting again")
        assert post(client, t, kong("3m")).status_code == 201
        receiver.wait(lambda rc: len(rc.messages()) == 4, timeout=5.0, what="seq 4")
        assert [m["data"]["seq"] for m in receiver.verify(made["secret"])] == [1, 2, 3, 4]
    finally:
        d.stop(wait=3.0)


# -- the outboxes in sight ------------------------------------------------------------------------
def metric(text: str, name: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return sample.value
    return None


def test_metrics_show_the_outboxes_as_the_sweep_found_them(app, client, redis_url, redis_client):
    assert metric(client.get("/metrics").get_data(as_text=True), "mahjong_webhook_outbox_entries") is None
    tables = [new_table(client) for _ in range(3)]
    for t in tables[:2]:
        for event in ({"type": "round_start"}, KONG):
            assert post(client, t, event).status_code == 201
    d = Dispatcher(connect(redis_url), app.extensions["webhooks"], DispatcherOptions(allow_private=True))
    assert d.sweep() == 3  # (not started: nothing is delivered or trimmed)
    lengths = [redis_client.xlen(keys.outbox(t["id"])) for t in tables]
    oldest = min(int(redis_client.xrange(keys.outbox(t["id"]), count=1)[0][0].split(b"-")[0]) for t in tables)
    text = client.get("/metrics").get_data(as_text=True)
    assert metric(text, "mahjong_webhook_outboxes") == 3
    assert metric(text, "mahjong_webhook_outbox_entries") == sum(lengths) == 2 * 3 + 1
    assert metric(text, "mahjong_webhook_outbox_longest_entries") == max(lengths) == 3
    age = metric(text, "mahjong_webhook_outbox_oldest_age_seconds")
    assert 0 <= age <= time.time() - oldest / 1000 + 1
    assert 0 <= metric(text, "mahjong_webhook_outbox_sweep_age_seconds") < 60
    assert metric(text, "mahjong_webhook_due_tables") == redis_client.zcard(keys.WEBHOOKS_DUE) == 3


def test_metrics_count_the_deliveries_by_status(client, receiver, dispatchers):
    def count(status: str) -> float:
        return REGISTRY.get_sample_value("mahjong_webhook_deliveries_total", {"status": status}) or 0.0

    before = {s: count(s) for s in ("delivered", "retrying", "dead")}
    made = register(client, receiver.url, ["event.recorded"])
    receiver.plan.extend([500, 500])
    dispatchers(retry_for=0.1, backoff_ms=200)  # seq 1: a failure, then past its budget: dead; seq 2 delivered
    t = new_table(client)
    for event in ({"type": "round_start"}, KONG):
        assert post(client, t, event).status_code == 201
    receiver.wait(lambda rc: rc.messages(), what="seq 2")
    assert [m["data"]["seq"] for m in receiver.messages()] == [2]
    wait_until(lambda: {s: count(s) - before[s] for s in before} == {"delivered": 1, "retrying": 1, "dead": 1},
               what="an attempt of each status counted")
    text = client.get("/metrics").get_data(as_text=True)
    assert metric(text, "mahjong_webhook_deliveries_total") is not None
    assert view(client, made["id"])["dead_letters"] == 1


def test_an_outbox_keeps_about_its_bound_and_drops_the_oldest(client, redis_client, monkeypatch):
    monkeypatch.setattr(keys, "OUTBOX_MAX_ENTRIES", 100)
    t = new_table(client)
    first = redis_client.xrange(keys.outbox(t["id"]), count=1)[0][0]
    tiles = [f"{n}{suit}" for suit in "mps" for n in range(1, 10)][:16]
    kongs = [{**KONG, "seat": i // 4, "tile": tile} for i, tile in enumerate(tiles)]
    written = 1
    for _ in range(16):  # rounds of a start, 16 kongs and an end: 18 notifications and a round.ended each
        for event in ({"type": "round_start"}, *kongs, {"type": "round_end"}):
            assert post(client, t, event).status_code == 201, event
        written += 19
    kept = redis_client.xlen(keys.outbox(t["id"]))
    assert written == 305 and 100 <= kept <= 200, kept  # (MAXLEN ~: whole nodes of 100 entries go)
    assert redis_client.xrange(keys.outbox(t["id"]), count=1)[0][0] != first  # the oldest went
    last = json.loads(redis_client.xrevrange(keys.outbox(t["id"]), count=1)[0][1][b"d"])
    assert last["seq"] == 16 * 18  # the newest stayed
