"""``bench/hostile.py`` still runs, at tiny sizes, and prints what its lines promise.

Nothing here is timed (the script's figures are for a quiet machine): what is checked is that
the script runs each attack to its end against its own Redis and ``serve``, that every attacker
was cut off, that each body trickler got its 408 problem, that the NDJSON line streamer got results
back, and that the service logged no error meanwhile (a client dropped for not reading is no error
of the service).  The never-reading streams and NDJSON jobs are dropped by the 30 s send timeout, so
this takes about 75 s.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.served import ROOT

pytestmark = pytest.mark.slow  # (a real server and a 30 s send timeout: the fast lane leaves it out)


def test_hostile_runs_every_attack_and_each_attacker_is_cut_off():
    done = subprocess.run(
        [sys.executable, "bench/hostile.py", "--headers", "5", "--bodies", "4", "--streams", "3", "--records", "1000",
         "--ndjson", "3", "--streamer-seconds", "3", "--keepalive", "1", "--request-timeout", "2", "--interval", "0.5"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines[0]["phase"] == "setup" and lines[0]["records"] == 1000
    attacks = {line["attack"]: line for line in lines[1:]}
    assert list(attacks) == ["header_tricklers", "body_tricklers", "never_reading_streams", "never_reading_ndjson",
                             "ndjson_streamer"]
    streamer = attacks.pop("ndjson_streamer")
    assert streamer["lines_sent"] > 0 and streamer["results"] > 0 and streamer["server_errors_logged"] == 0, streamer
    assert streamer["probe"]["requests"] > 0 and streamer["probe"]["errors"] == {}, streamer
    for name, count in (("header_tricklers", 5), ("body_tricklers", 4), ("never_reading_streams", 3),
                        ("never_reading_ndjson", 3)):
        line = attacks[name]
        assert line["attackers"] == line["connected"] == line["cut_off"] == count, line
        assert set(line["cut_off_s"]) == {"min", "p50", "max"}
        assert line["cut_off_s"]["min"] <= line["cut_off_s"]["p50"] <= line["cut_off_s"]["max"]
        probe = line["probe"]
        assert probe["requests"] > 0 and probe["errors"] == {}, probe
        assert {"p50_ms", "p99_ms", "max_ms"} <= set(probe)
        assert line["server_errors_logged"] == 0, line
        assert line["worker_growth_mb"] >= 0, line
    assert attacks["header_tricklers"]["answers"] == {"none": 5}  # a head never whole: closed, nothing to answer
    assert attacks["header_tricklers"]["408s"] == 0
    assert attacks["body_tricklers"]["408s"] == 4  # each body not whole in time: its 408 problem
    assert attacks["never_reading_streams"]["answers"] is None  # (never read)
