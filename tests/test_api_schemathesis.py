"""Property-based tests of the whole OpenAPI document, in-process (schemathesis 4).

Positive and negative cases for every operation, checking that no input
gives a 5xx, that every status, content type and body conforms to the
document, and that input the document forbids is rejected.
"""

from __future__ import annotations

import tempfile

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from service.api import create_app
from service.store.embedded import EmbeddedRedis
from tests.fuzz import negative_data_rejected  # counts 413 as a rejection

pytestmark = pytest.mark.slow  # (long: generated clients, fuzzing or a state machine)

# The tables endpoints need a real Redis.  schemathesis parametrizes at import
# time (its fixture-based loader does not work with this pytest), so this
# module starts its own private redis-server; it is stopped at interpreter exit.
_redis = EmbeddedRedis(tempfile.mkdtemp(prefix="schemathesis-redis-")).start()
app = create_app({"TESTING": True, "REDIS_URL": _redis.url})
schema = schemathesis.openapi.from_wsgi("/openapi.json", app)


@pytest.fixture(scope="module", autouse=True)
def _stop_redis():
    yield
    _redis.stop()

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejected,
]


@schema.parametrize()
@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_document(case):
    response = case.call_and_validate(checks=CHECKS)
    assert "x-request-id" in response.headers
