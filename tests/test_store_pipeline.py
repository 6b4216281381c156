"""A gevent worker's write scripts pipelined on one kept connection (service/store/pipeline.py).

The class runs in ``serve``'s gevent workers; here its greenlets run in the test's
own thread (gevent's waits work without monkey-patching), against the session's
real redis-server.  What is checked: each call gets its own answer however many
are in flight, error answers stay with their call, ``NOSCRIPT`` is loaded and
sent once more (and only for single calls), a connection that fails or times out
fails exactly the calls waiting on it and the next call gets a new one, and
``READONLY`` retires the connection.  ``test_tables_gunicorn.py`` checks that
``serve`` uses it.
"""
from __future__ import annotations

import socket

import gevent
import pytest
import redis

from service.store import client as redis_client
from service.store import pipeline
from service.store.tables import Access, TableStore

PLAYERS = ["东", "南", "西", "北"]
ECHO = "if ARGV[1] == 'e' then return redis.error_reply('ERR boom ' .. KEYS[1]) end return {KEYS[1], ARGV[1]}"
COUNT = "return redis.call('INCR', KEYS[1])"
READONLY = "return redis.error_reply(\"READONLY You can't write against a read only replica.\")"


@pytest.fixture
def client(redis_url):
    c = redis_client.connect(redis_url)
    yield c
    c.close()


@pytest.fixture
def made(client):
    """The PipelinedScripts a test makes (``made(client)``), closed before its clients are (a socket
    closed under the reader's wait is not gevent's to clean up)."""
    kept: list[pipeline.PipelinedScripts] = []

    def make(client):
        kept.append(pipeline.PipelinedScripts(client))
        return kept[-1]

    yield make
    for k in kept:
        k.close()


def _calls(kept, script, n, arg=lambda i: str(i)):
    """Run ``n`` calls at once, each in its greenlet: the answers (or the errors raised), in order."""
    def one(i):
        try:
            return kept(script, [f"k{i}"], [arg(i)])
        except redis.exceptions.RedisError as exc:
            return exc
    greenlets = [gevent.spawn(one, i) for i in range(n)]
    gevent.joinall(greenlets, raise_error=True)
    return [g.value for g in greenlets]


def test_serve_pipelines_only_where_gevent_patched_the_process(client, redis_url):
    # (this process is not patched: the tests' Flask client uses Scripts, a connection per caller)
    assert not pipeline.usable(client)
    assert type(redis_client.kept_scripts(client)) is redis_client.Scripts
    assert redis_client.kept_scripts(redis_client.connect("redis+cluster://127.0.0.1:1")) is None


def test_each_call_gets_its_own_answer_on_one_connection(client, made):
    kept = made(client)
    echo = client.register_script(ECHO)
    client.script_load(echo.script)
    answers = _calls(kept, echo, 300, lambda i: "e" if i % 7 == 0 else str(i))
    for i, answer in enumerate(answers):
        if i % 7 == 0:
            assert isinstance(answer, redis.exceptions.ResponseError) and str(answer) == f"boom k{i}"
        else:
            assert answer == [f"k{i}".encode(), str(i).encode()]
    # all of them went on the one kept connection: the only one made, and held out of the pool
    pool = client.connection_pool
    assert len(pool._in_use_connections) == 1 and pool._created_connections == 1


def test_noscript_loads_the_script_and_runs_the_call_once(client, made):
    kept = made(client)
    count = client.register_script(COUNT)
    client.script_flush()
    assert _calls(kept, count, 20, lambda i: "") == [1] * 20  # every one answered NOSCRIPT, then ran once
    assert [int(client.get(f"k{i}")) for i in range(20)] == [1] * 20
    # many(): a NOSCRIPT answer is that call's answer, and it is not sent again (as Scripts.many)
    client.script_flush()
    first, second = kept.many([(count, ["m"], []), (count, ["m"], [])])
    assert isinstance(first, redis.exceptions.NoScriptError) and isinstance(second, redis.exceptions.NoScriptError)
    assert client.get("m") is None
    client.script_load(count.script)
    assert kept.many([(count, ["m"], []), (count, ["m"], [])]) == [1, 2]


def test_a_connection_the_server_closed_is_not_used_again(client, made):
    kept = made(client)
    echo = client.register_script(ECHO)
    assert kept(echo, ["a"], ["1"]) == [b"a", b"1"]
    first = kept._pipe
    client.client_kill_filter(_type="normal", skipme=True)  # the kept connection among them
    # at once (before its reader has run): the closed socket is seen, and the call goes on a new one
    assert kept(echo, ["a"], ["2"]) == [b"a", b"2"]
    assert kept._pipe is not first and isinstance(first.failure, redis.exceptions.ConnectionError)
    gevent.sleep(0)
    assert first.sock.fileno() == -1  # closed, and its connection given back to the pool (made again)
    assert len(client.connection_pool._in_use_connections) == 1


def test_a_failed_connection_fails_the_calls_waiting_on_it_and_only_those(client, made):
    kept = made(client)
    count = client.register_script(COUNT)
    client.script_load(count.script)
    assert kept(count, ["before"], []) == 1
    client.execute_command("CLIENT", "PAUSE", 300, "ALL")  # the calls below wait for their answers
    waiting = [gevent.spawn(_calls, kept, count, 10, lambda i: "")]
    gevent.sleep(0.05)
    pipe = kept._pipe
    assert len(pipe.waiting) == 10
    pipe.sock.shutdown(socket.SHUT_RDWR)  # the connection breaks under them
    gevent.joinall(waiting, raise_error=True)
    assert all(isinstance(a, redis.exceptions.ConnectionError) for a in waiting[0].value)
    assert len({id(a) for a in waiting[0].value}) == 10  # each its own (one shared would gather every traceback)
    assert not pipe.waiting and not pipe.open
    gevent.sleep(0.3)  # (the pause ends)
    assert kept(count, ["after"], []) == 1  # on a new connection
    assert kept._pipe is not pipe


def test_an_overdue_answer_times_out_every_waiting_call(redis_url, made):
    slow = redis_client.connect(redis_url, socket_timeout=0.2)
    kept = made(slow)
    count = slow.register_script(COUNT)
    slow.script_load(count.script)
    slow.execute_command("CLIENT", "PAUSE", 600, "ALL")
    answers = _calls(kept, count, 5, lambda i: "")
    assert all(isinstance(a, redis.exceptions.TimeoutError) for a in answers)
    assert not kept._pipe.open
    gevent.sleep(0.5)
    # their outcome is unknown (here Redis dropped them with the closed connection): never sent again
    assert {slow.get(f"k{i}") for i in range(5)} <= {None, b"1"}
    assert kept(count, ["k0"], []) in (1, 2)
    kept.close()
    slow.close()


def test_callers_that_stop_waiting_leave_no_silent_connection_behind(redis_url, made):
    """A deadline raised in every caller (none waits any more): the reader still finds the answers
    overdue, fails the connection, and the next call goes on a new one."""
    slow = redis_client.connect(redis_url, socket_timeout=0.2)
    kept = made(slow)
    count = slow.register_script(COUNT)
    slow.script_load(count.script)
    slow.execute_command("CLIENT", "PAUSE", 700, "ALL")

    def impatient(i):
        with gevent.Timeout(0.05, False):
            kept(count, [f"p{i}"], [])
    gevent.joinall([gevent.spawn(impatient, i) for i in range(6)])
    pipe = kept._pipe
    assert len(pipe.waiting) == 6 and pipe.failure is None  # nobody waits, yet they are queued
    gevent.sleep(0.5)  # (the pause still holds: no answer)
    assert isinstance(pipe.failure, redis.exceptions.TimeoutError) and not pipe.waiting
    gevent.sleep(0.3)
    assert kept(count, ["after"], []) == 1 and kept._pipe is not pipe
    kept.close()
    slow.close()


def test_readonly_retires_the_connection(client, made):
    kept = made(client)
    echo, readonly = client.register_script(ECHO), client.register_script(READONLY)
    assert kept(echo, ["a"], ["1"]) == [b"a", b"1"]
    first = kept._pipe
    with pytest.raises(redis.exceptions.ReadOnlyError):
        kept(readonly, ["a"], [])
    assert not first.open
    assert kept(echo, ["a"], ["2"]) == [b"a", b"2"] and kept._pipe is not first
    gevent.sleep(0)
    assert first.sock.fileno() == -1  # closed once nothing waited on it


def test_a_pipe_made_in_another_process_is_left_alone(client, made):
    kept = made(client)
    echo = client.register_script(ECHO)
    assert kept(echo, ["a"], ["1"]) == [b"a", b"1"]
    first = kept._pipe
    first.pid = -1  # as seen from a forked child
    assert kept(echo, ["a"], ["2"]) == [b"a", b"2"] and kept._pipe is not first
    assert first.failure is None  # (the parent's: not read, written or closed here)


def test_a_table_store_writes_through_it(redis_url, client, made):
    store = TableStore(client)
    store._scripts = made(client)  # as in serve's workers
    tables = [store.create(PLAYERS, "xuezhan") for _ in range(16)]

    def play(t):
        w = Access(t.token, write=True)
        store.append(t.id, {"type": "round_start"}, access=w)
        for tile in "123":
            store.append(t.id, {"type": "kong", "seat": 1, "kind": "concealed", "tile": tile + "m"}, access=w)
        return store.append(t.id, {"type": "round_end"}, access=w)

    greenlets = [gevent.spawn(play, t) for t in tables]
    gevent.joinall(greenlets, raise_error=True)
    for t in tables:
        report = store.check(t.id)
        assert report["ok"] and report["version"] == 5


_PATCHED_APP = r'''
from gevent import monkey
monkey.patch_all()  # as serve's gevent workers do before they load the app
import json, sys
import gevent
from service.api import create_app
from service.config import NO_LIMITS

app = create_app({"TESTING": True, "REDIS_URL": sys.argv[1], **{var: 1000000 for var in NO_LIMITS}})
web = app.test_client()
tables = [web.post("/v1/tables", json={"players": ["东", "南", "西", "北"]}).get_json() for _ in range(16)]

def play(t):
    auth = {"Authorization": "Bearer " + t["token"]}
    events = [{"type": "round_start"}] + [
        {"type": "kong", "seat": 1, "kind": "concealed", "tile": f"{n}m"} for n in range(1, 4)] + [{"type": "round_end"}]
    return [web.post(f"/v1/tables/{t['id']}/events", json=e, headers=auth).status_code for e in events]

greenlets = [gevent.spawn(play, t) for t in tables]
gevent.joinall(greenlets, raise_error=True)
store, (limiter,) = app.extensions["tables"], app.extensions["limiter"]
print(json.dumps({
    "statuses": sorted({s for g in greenlets for s in g.value}),
    "versions": sorted({web.get(f"/v1/tables/{t['id']}", headers={"Authorization": "Bearer " + t["token"]})
                        .get_json()["version"] for t in tables}),
    "store": type(store._scripts).__name__,
    "limiter": type(limiter.storage._kept).__name__,
}))
'''


_UNREACHABLE = r'''
from gevent import monkey
monkey.patch_all()  # as serve's workers
import json, socket, sys, time
import gevent
from service.store import client as redis_client

mute = socket.socket()  # takes connections and never answers
mute.bind(("127.0.0.1", 0))
mute.listen(64)
client = redis_client.connect(f"redis://127.0.0.1:{mute.getsockname()[1]}", socket_timeout=0.3)
kept = redis_client.kept_scripts(client)
script = client.register_script("return 1")

def one(i):
    start = time.monotonic()
    try:
        kept(script, ["k"], [])
    except Exception as exc:
        return type(exc).__name__, time.monotonic() - start
    return "answered", time.monotonic() - start

greenlets = [gevent.spawn(one, i) for i in range(10)]
gevent.joinall(greenlets)
print(json.dumps({"kind": type(kept).__name__, "outcomes": sorted({g.value[0] for g in greenlets}),
                  "slowest": max(g.value[1] for g in greenlets)}))
'''


def _patched(code: str, *args: str) -> dict:
    """Run ``code`` in a gevent-patched Python process: the JSON object its last line prints."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=False,
                         cwd=Path(__file__).resolve().parent.parent, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_an_unreachable_server_answers_every_waiting_caller_from_one_try():
    """10 callers find no connection to a server that never answers: one try (0.3 s) answers them all,
    not one try after another (3 s)."""
    report = _patched(_UNREACHABLE)
    assert report["kind"] == "PipelinedScripts" and report["outcomes"] == ["TimeoutError"]
    assert report["slowest"] < 1.0, report


def test_the_app_in_a_gevent_patched_process_pipelines_its_writes(redis_url):
    """serve's workers: the table store's writes and the rate limiter's counts go pipelined."""
    report = _patched(_PATCHED_APP, redis_url)
    assert report == {"statuses": [201], "versions": [5], "store": "PipelinedScripts",
                      "limiter": "PipelinedScripts"}
