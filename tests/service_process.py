"""The real server for the tables API tests (:class:`tests.served.Served`, restartable on its port), and a
JSON request to it."""

from __future__ import annotations

import http.client
import json
import os
from pathlib import Path

from service.store.embedded import free_port  # noqa: F401 - the tests' one free_port, imported from here too
from tests.served import Served, service_env  # noqa: F401 - service_env: imported from here by the tests

ROOT = Path(__file__).resolve().parent.parent
PLAYERS = ["东", "南", "西", "北"]


def request(port, method, path, body=None, headers=None, timeout=15):
    """(status, headers with lower-case names, parsed JSON body or None)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        payload = None if body is None else json.dumps(body).encode()
        hdrs = {"Content-Type": "application/json"} if body is not None else {}
        hdrs.update(headers or {})
        conn.request(method, path, body=payload, headers=hdrs)
        r = conn.getresponse()
        raw = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, json.loads(raw) if raw else None
    finally:
        conn.close()


class Service(Served):
    """:class:`tests.served.Served` on ``port``, started by ``start()`` and ready once ``/readyz`` answers
    (its Redis reachable), whose ``request`` parses the JSON body (:func:`request`)."""

    def __init__(self, port: int, env: dict, log: Path) -> None:
        super().__init__(log, env, port=port, ready="/readyz", timeout=30, start=False)

    def request(self, *args, **kwargs):
        return request(self.port, *args, **kwargs)


def new_table(srv, ruleset="xuezhan") -> tuple[dict, dict]:
    status, headers, t = srv.request("POST", "/v1/tables", {"players": PLAYERS, "ruleset": ruleset})
    assert status == 201, t
    return t, {"Authorization": "Bearer " + t["token"]}


def append(srv, t, auth, event, **headers) -> dict:
    status, _, body = srv.request("POST", f"/v1/tables/{t['id']}/events", event, {**auth, **headers})
    assert status == 201, (event, body)
    return body


def redis_servers_on(data_dir: Path) -> list[int]:
    """PIDs of live redis-server processes working in ``data_dir`` (EmbeddedRedis runs it there).

    redis-server rewrites its command line, so it is found by name and working directory.
    """
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if comm.startswith("redis-server") and state != "Z" and Path(cwd) == data_dir:
            pids.append(int(entry.name))
    return pids
