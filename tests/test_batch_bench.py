"""bench/batch.py still runs, at tiny sizes, and prints the fields its figures are read from.

No speed is asserted (a test times nothing): what is checked is that each phase runs to the end on
its own servers, that HTTP and the in-process core agreed on every answer (the script asserts it),
and that each line holds its counts, its ratio and its memory figures.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.served import ROOT

pytestmark = pytest.mark.slow


def test_each_phase_prints_its_figures():
    out = subprocess.run([sys.executable, "bench/batch.py", "--batch", "40", "--rounds", "1", "--ndjson-n", "2000",
                          "--distinct", "300", "--inproc-n", "500", "--cli-n", "1000", "--cli-rounds", "1"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    http = {line["op"]: line for line in lines if line.get("phase") == "http"}
    assert set(http) == {"ting", "score", "discards"}
    for line in http.values():
        assert line["items"] == 40 and line["ratio"] == pytest.approx(
            line["http_us"] / line["inproc_us"], rel=0.01, abs=0.002
        )
    ndjson = next(line for line in lines if line.get("phase") == "ndjson")
    assert ndjson["hands"] == 2000 and ndjson["start_kib"] > 0 and ndjson["middle_kib"] > 0 and ndjson["end_kib"] > 0
    assert ndjson["ratio"] == pytest.approx(ndjson["hands_per_s"] / ndjson["inproc_hands_per_s"], rel=0.01, abs=0.002)
    cli = next(line for line in lines if line.get("phase") == "cli")
    assert cli["lines"] == 1000 and cli["speedup"] == pytest.approx(
        cli["jobs1_s"] / cli["jobs2_s"], rel=0.02, abs=0.002
    )
