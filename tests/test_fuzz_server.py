"""A short version of bench/fuzz.py: schemathesis over a real running service.

Stateless cases for every operation plus stateful scenarios that follow the
document's links through real tables (the long run, ≥ 5,000 cases: docs/performance.md).
"""

from __future__ import annotations

import pytest

from tests import fuzz

pytestmark = pytest.mark.slow  # (a real server, or long runs: the fast lane leaves it out)


def test_running_service_survives_hostile_input_and_keeps_to_its_document():
    r = fuzz.run(examples=8, scenarios=25, steps=10, seed=3)
    assert r["failures"] == []
    assert r["stateful"] > 50  # the links were followed into real tables
    assert r["statuses"].get("201", 0) > 5  # tables and events were really created
    assert not any(code.startswith("5") for code in r["statuses"])
