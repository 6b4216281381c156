"""A Python client generated from the committed openapi.yaml drives a whole table against a real serve.

``openapi-python-client`` (a test dependency) generates the client with no warning; the test
then runs ``python -m service serve`` with API keys on and plays a table through the generated
code only: create (API key), a round with kongs, a hu with one winner by fan and one by hand, a
refused event, a stale If-Match, a void, reads with the read token, a 304, the caller's table
list, a settled round, delete.  Expected money comes from the rules core, not from the service.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from service.rules.settle import settle

pytestmark = pytest.mark.slow  # (a real server, or long runs: the fast lane leaves it out)

ROOT = Path(__file__).resolve().parent.parent
API_KEY = "client-test-" + "k" * 32
PACKAGE = "mahjong_client"


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> object:
    """The client package, generated from openapi.yaml (0 warnings), imported."""
    out = tmp_path_factory.mktemp("client")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run(
        [str(Path(sys.executable).parent / "openapi-python-client"), "generate", "--path", str(ROOT / "openapi.yaml"),
         "--meta", "none", "--output-path", str(out / PACKAGE)],
        cwd=out, env=env, capture_output=True, text=True, timeout=300,
    )
    text = run.stdout + run.stderr
    assert run.returncode == 0, text
    assert "warning" not in text.lower() and "error" not in text.lower(), text
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]


@pytest.fixture(scope="module")
def base_url(redis_server, tmp_path_factory):
    """``python -m service serve`` with API keys on (one worker: the test is sequential)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log_path = tmp_path_factory.mktemp("serve") / "serve.log"
    env = {**os.environ, "REDIS_URL": redis_server.url, "API_KEYS": f"acme={API_KEY}", "LOG_LEVEL": "WARNING"}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "service", "serve", "--port", str(port), "--workers", "1"],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        import httpx

        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, log_path.read_text()
            try:
                if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "serve did not start in 30 s"
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_a_whole_table_through_the_generated_client(generated, base_url):
    m = importlib.import_module(PACKAGE + ".models")
    ting_hand = importlib.import_module(PACKAGE + ".api.hands.ting_hand")
    settle_round = importlib.import_module(PACKAGE + ".api.rounds.settle_round")
    client_mod = importlib.import_module(PACKAGE + ".client")
    mods = {name: importlib.import_module(f"{PACKAGE}.api.tables.{name}")
            for name in ("create_table", "get_table", "post_event", "void_event", "list_events", "list_tables",
                         "delete_table")}

    backend = client_mod.AuthenticatedClient(base_url, token=API_KEY, prefix="", auth_header_name="X-API-Key")
    anonymous = client_mod.AuthenticatedClient(base_url, token="", prefix="", auth_header_name="X-Unused")

    # create (the API key is needed; without it: a typed 401 problem)
    body = m.CreateTableRequest(players=["东", "南", "西", "北"], ruleset=m.PresetName.XUEZHAN, dealer=0)
    refused = mods["create_table"].sync_detailed(client=anonymous, body=body, idempotency_key=str(uuid.uuid4()))
    assert refused.status_code == 401 and refused.parsed.code == "api_key_required"  # (a Problem of this operation)
    assert refused.parsed.code == "api_key_required"
    r = mods["create_table"].sync_detailed(client=backend, body=body, idempotency_key=str(uuid.uuid4()))
    assert r.status_code == 201, r.content
    table = r.parsed
    assert isinstance(table, m.TableCreated) and table.version == 0 and table.ruleset.preset == m.PresetName.XUEZHAN
    writer = client_mod.AuthenticatedClient(base_url, token=table.token)
    reader = client_mod.AuthenticatedClient(base_url, token=table.read_token)

    def post(event, **headers):
        return mods["post_event"].sync_detailed(table.id, client=writer, body=event, **headers)

    # a round: start, a concealed kong, a hu on one discard with a winner by fan and one by hand
    events = [
        m.KongEvent(type_="kong", seat=3, kind=m.KongKind.CONCEALED, tile="8s"),
        m.HuEvent(type_="hu", from_=0, tile="9p", winners=[
            m.WinnerWithFan(seat=1, fan=2, patterns=[m.PatternId.DUIDUIHU]),
            m.WinnerWithHand(seat=3, hand=m.Hand(tiles="123456789p99s", melds=[
                m.Meld(type_=m.MeldType.KONG, tile="8s", kind=m.KongKind.CONCEALED)])),
        ]),
    ]
    assert post(m.RoundStartEvent(type_="round_start")).status_code == 201
    replies = [post(e) for e in events]
    assert [x.status_code for x in replies] == [201, 201], [x.content for x in replies]
    appended = replies[-1].parsed
    core = settle([e.to_dict() for e in events], dealer=0)
    assert isinstance(appended, m.EventAppended) and appended.version == 3
    assert appended.balances == list(core.deltas)
    assert [(t.from_, t.to, t.points, t.reason) for t in appended.transfers] == [
        (t.payer, t.payee, t.points, m.TransferReason(t.reason)) for t in core.transfers if t.event == 1]
    assert replies[-1].headers["ETag"] == '"3"'

    # a refused event: a typed problem naming the member and the seq it would have had
    bad = post(m.KongEvent(type_="kong", seat=9, kind=m.KongKind.CONCEALED, tile="1m"))
    assert bad.status_code == 422 and bad.parsed.status == 422  # (a Problem of this operation)
    assert (bad.parsed.code, bad.parsed.event) == ("seat_out_of_range", 4)
    assert list(bad.parsed.errors.additional_properties) == ["seat"]

    # a stale If-Match: 412 with the current version
    stale = post(m.KongEvent(type_="kong", seat=0, kind=m.KongKind.CONCEALED, tile="1m"), if_match='"2"')
    assert stale.status_code == 412 and stale.parsed.code == "version_mismatch" and stale.parsed.version == 3

    # void the hu: its payments are gone, the kong's stand
    v = mods["void_event"].sync_detailed(table.id, 3, client=writer, if_match='"3"')
    assert v.status_code == 201, v.content
    assert v.parsed.voided == 3 and v.parsed.balances == list(settle([events[0].to_dict()], dealer=0).deltas)

    # reads with the read token; a conditional read; the read token cannot write
    view = mods["get_table"].sync_detailed(table.id, client=reader)
    assert view.status_code == 200 and isinstance(view.parsed, m.TableView)
    assert view.parsed.version == 4 and view.parsed.round_.status == m.RoundStatus.PLAYING
    assert mods["get_table"].sync_detailed(table.id, client=reader, if_none_match=view.headers["ETag"]).status_code == 304
    assert post(m.RoundEndEvent(type_="round_end")).status_code == 201
    assert mods["get_table"].sync_detailed(table.id, client=reader, if_none_match='"4"').status_code == 200
    forbidden = mods["post_event"].sync_detailed(table.id, client=reader, body=m.RoundEndEvent(type_="round_end"))
    assert forbidden.status_code == 403 and forbidden.parsed.code == "forbidden"

    # the log, typed record by record
    page = mods["list_events"].sync_detailed(table.id, client=reader, after=0, limit=10).parsed
    assert [type(x).__name__ for x in page.events] == [
        "RoundStartRecord", "KongRecord", "HuRecord", "VoidRecord", "RoundEndRecord"]
    assert page.events[2].voided is True and page.events[3].target == 3 and page.next_ is None

    # the caller's tables
    listed = mods["list_tables"].sync_detailed(client=backend).parsed
    assert table.id in [t.id for t in listed.tables]

    # the stateless endpoints through the same key
    ting = ting_hand.sync_detailed(client=backend, body=m.TingRequest(hand=m.Hand(tiles="1112345678999m")))
    assert ting.status_code == 200 and ting.parsed.ting is True and len(ting.parsed.waits) == 9
    settled = settle_round.sync_detailed(client=backend, body=m.SettleRequest(dealer=0, events=[
        m.DrawEvent(type_="draw", seats=[m.SeatNotTing(seat=s % 4, status=m.SeatStatus.NOT_TING) for s in range(5)])]))
    assert settled.status_code == 422 and (settled.parsed.code, settled.parsed.event) == ("bad_seats", 0)

    # delete
    assert mods["delete_table"].sync_detailed(table.id, client=writer).status_code == 204
    gone = mods["get_table"].sync_detailed(table.id, client=writer)
    assert gone.status_code == 404 and gone.parsed.code == "table_not_found"
