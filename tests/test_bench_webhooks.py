"""bench/webhooks.py still runs, at a tiny size, and prints the figures it is read for (no timing is
checked here: the sizes say nothing about speed)."""

from __future__ import annotations

import pytest

from tests.test_bench_scripts import run_bench

pytestmark = pytest.mark.slow  # (a bench script and its servers: the fast lane leaves it out)


def test_webhooks_prints_both_rates_their_ratio_and_the_latency_of_every_delivery():
    out = run_bench("webhooks.py", "--tables", "2", "--rounds", "1", "--block", "0.5", "--fsync", "everysec")
    assert out["append_webhooks_off"]["events_per_s"] > 0 and out["append_webhooks_on"]["events_per_s"] > 0
    assert out["on_vs_off"]["value"] > 0
    latency = out["delivery_latency"]
    assert latency["appended"] > 0 and latency["delivered"] >= latency["appended"] - 2  # (a round's end may follow)
    assert 0 <= latency["p50_ms"] <= latency["p99_ms"]


def test_webhooks_idle_prints_the_cpu_of_an_idle_serve_with_its_dispatcher_on_and_off():
    out = run_bench("webhooks.py", "--idle", "0.5", "--rounds", "1", "--fsync", "everysec")
    idle = out["idle_cpu"]
    assert idle["on_cpu_s"] >= 0 and idle["off_cpu_s"] >= 0 and len(idle["rounds"]["on"]) == 1
