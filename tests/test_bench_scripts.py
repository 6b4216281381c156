"""The benchmark scripts still run, at tiny sizes, and print what docs/performance.md reads off them.

The figures of docs/performance.md come from these commands; a script that no
longer runs, or prints a line without the fields the page quotes, would leave
those figures without a way to check them.  The sizes here
are too small to say anything about speed (no test here times anything): what
is checked is that each script runs to the end on its own Redis and servers,
and what its lines must hold whatever the machine (no request failed, the
counts it was asked for, an append in one Redis round trip, memory figures
that add up).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest

from tests.served import ROOT

pytestmark = pytest.mark.slow  # (a real server, or long runs: the fast lane leaves it out)


def run_bench(script: str, *args: str) -> dict[str, dict]:
    """Run ``bench/<script>`` with ``args``; its JSON lines by their ``op`` (or ``target``/``ratio``).

    A service it starts without ``REDIS_URL`` keeps its embedded Redis in a directory of its own
    (``REDIS_DATA_DIR``), not in the tree's ``var/redis``, which a test on the other worker may be using.
    """
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as data:
        done = subprocess.run([sys.executable, f"bench/{script}", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=180, env={**os.environ, "REDIS_DATA_DIR": data})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stdout
    return {str(line.get("op") or line.get("target") or line.get("ratio")): line for line in lines}


def test_core_prints_every_operation_for_the_hands_it_was_given():
    out = run_bench("core.py", "--n", "120", "--reps", "1", "--mahjong-reps", "1")
    assert {"tables", "first_seen", "parse", "win", "ting", "discards", "score", "settle", "shanten", "useful_tiles",
            "shanten_options"} <= set(out)
    for op in ("win", "ting", "discards", "score"):
        line = out[op]
        assert line["hands"] == 120
        assert line["ours_us"] > 0 and line["from_str_us"] > 0 and line["mahjong_us"] > 0
    assert out["first_seen"]["hands"] == 120 and out["settle"]["ours_us"] > 0
    assert out["shanten"]["hands"] == 120 and out["shanten"]["from_str_us"] > 0 and out["shanten"]["mahjong_us"] > 0
    assert out["useful_tiles"]["from_str_us"] > 0 and out["shanten_options"]["from_str_us"] > 0
    assert out["first_seen"]["shanten_us"] > 0 and out["tables"]["shanten_mib"] > 7


def test_clubs_reads_the_standings_of_both_seasons():
    out = run_bench("clubs.py", "--small", "2", "--large", "6", "--reads", "5")
    for way in ("standings_http", "standings_store"):
        assert out[way]["large_tables"] == 6 and out[way]["small_us"] > 0 and out[way]["ratio"] > 0


def test_rounds_settles_the_rounds_it_was_given():
    out = run_bench("rounds.py", "--n", "40", "--reps", "1")
    assert out["settle"]["rounds"] == 40 and out["settle"]["ours_us"] > 0


def test_mending_corrects_a_round_and_reads_rounds_of_a_table_it_built():
    for stakes in ((), ("--stakes",)):
        line = run_bench("mending.py", "--rounds", "6", "--samples", "3", *stakes)["mending"]
        assert line["rounds"] == 6 and line["stakes"] == bool(stakes)
        assert line["correct_round_1_us"] > 0 and line["append_us"] > 0 and line["get_round_us"] > 0
        assert line["correct_over_append"] > 0 and line["get_round_ms"] > 0


def test_store_in_process_phases_print_memory_that_adds_up_and_a_get_of_200_rounds():
    out = run_bench("store.py", "--phases", "memory,get,length,replay,void", "--long", "300", "--replay-length", "400")
    memory = out["memory"]
    for n in (500, 2000):
        unkeyed, keyed = memory[f"{n}_unkeyed"], memory[f"{n}_keyed"]
        for usage in (unkeyed, keyed):
            assert usage["total"] == sum(v for k, v in usage.items() if k != "total")
        assert "idem" in keyed and "idem" not in unkeyed and keyed["total"] > unkeyed["total"]
    assert out["get_table"]["ended_rounds"] == 200 and out["get_table"]["response_bytes"] > 0
    assert out["append_vs_length"]["long_len"] == 300 and out["append_vs_length"]["short_us"] > 0
    assert out["refused_void_vs_append"]["log_len"] == 3999 and out["refused_void_vs_append"]["refused_void_us"] > 0
    replay = out["idempotent_replay"]
    assert replay["length"] == 400 and min(replay[f"{k}_us"] for k in ("first", "middle", "last")) > 0


def test_store_versus_with_a_baseline_prints_each_sides_runs_and_their_medians():
    out = run_bench("store.py", "--phases", "versus", "--duration", "1", "--rounds", "1", "--tables", "2",
                    "--baseline", str(ROOT), "--runs", "1")
    medians = out["append_vs_ting_medians"]
    assert medians["runs"] == {"after": 1, "before": 1}
    for side in ("after", "before"):
        assert medians[side]["appends_per_s"] > 0 and medians[side]["ting_per_s"] > 0


def test_store_versus_runs_both_loads_without_an_error_and_appends_in_one_round_trip():
    out = run_bench("store.py", "--phases", "versus", "--duration", "2", "--rounds", "1", "--tables", "4")
    line = out["append_vs_ting"]
    assert line["errors"] == {"append": 0, "ting": 0}
    assert line["appends_per_s"] > 0 and line["ting_per_s"] > 0
    assert line["ratio"] == pytest.approx(line["appends_per_s"] / line["ting_per_s"], abs=0.002)
    # item 1: the common append is one round trip (two before the states were kept); only the first
    # append of a table on a worker that has not seen it yet reads the table first
    assert 1.0 <= line["redis_commands_per_append"] < 1.1


def test_ladder_prints_every_rung_and_its_piece():
    done = subprocess.run([sys.executable, "bench/ladder.py", "--rounds", "2", "--requests", "20"], cwd=ROOT,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    rungs = [line for line in lines if "rung" in line]
    assert [r["rung"] for r in rungs] == ["bare", "flask", "schemas", "limiter", "metrics", "log", "service"]
    assert all(r["us_p10"] <= r["us_median"] <= r["us_p90"] for r in rungs)
    assert all("piece_us_median" in r for r in rungs[1:]) and 0 < lines[-1]["bare_over_service"] < 1


def test_workers_measures_both_worker_classes_on_both_loads():
    done = subprocess.run([sys.executable, "bench/workers.py", "--rounds", "1", "--duration", "0.5", "--warmup", "0.1",
                           "--connections", "2"], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    cells = {(x["worker"], x["load"]): x for x in lines if "worker" in x}
    assert set(cells) == {(w, load) for w in ("gevent", "gthread") for load in ("ting", "append")}
    assert all(x["errors"] == 0 and x["rps"] > 0 and x["cpu_us_per_request"] > 0 for x in cells.values())
    assert {x["ratio"] for x in lines if "ratio" in x} == {"gthread/gevent ting 2", "gthread/gevent append 2"}


def test_load_ting_runs_the_service_and_the_bare_app_without_an_error():
    out = run_bench("load_ting.py", "--duration", "0.5", "--rounds", "1", "--warmup", "0.1")
    for target in ("flask", "bare"):
        assert out[target]["errors"] == 0 and out[target]["requests"] > 0
    assert out["flask/bare"]["rps"] == pytest.approx(out["flask"]["rps"] / out["bare"]["rps"], abs=0.002)


def test_stream_opens_phase_prints_each_open_and_the_never_reading_streams():
    done = subprocess.run(
        [
            sys.executable,
            "bench/stream.py",
            "--phases",
            "opens",
            "--records",
            "300",
            "--opens",
            "2",
            "--never-reading",
            "4",
            "--hold",
            "1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [line["phase"] for line in lines] == ["opens_setup", "stream_open", "stream_open", "stream_open",
                                                "never_reading_streams"]
    opens = lines[1:4]
    assert [line["after"] for line in opens] == [0, 150, 299]  # the start, the middle, the last but one
    for line in opens:
        assert line["opens"] == 2 and line["records"] == 300
        assert line["first_record_ms_p50"] > 0 and line["worker_cpu_ms_p50"] > 0
    assert opens[2]["bytes_read_p50"] < opens[0]["bytes_read_p50"]  # from the last but one: one record to send
    held = lines[4]
    assert held["streams"] == 4 and len(held["workers"]) == 2
    for worker in held["workers"]:
        assert worker["growth_kib"] == worker["rss_kib_peak"] - worker["rss_kib_before"] >= 0
    assert held["probe"]["requests"] > 0 and held["probe"]["errors"] == 0


def test_serializers_prints_each_shape_with_both_costs():
    out = run_bench("serializers.py", "--n", "40", "--rounds", "1")
    assert set(out) == {"validate", "ting", "discards", "score", "shanten", "settle"}
    for line in out.values():
        assert line["answers"] > 0 and line["dump_us"] > 0 and line["schema_us"] > 0 and line["schema_over_dump"] > 0
