"""Schemathesis against a real `memoryos up`: no 5xx, and every reply as the OpenAPI spec says.

The server runs as a child process (as a user runs it), so schemathesis's synchronous client
talks to it over a real socket. Generated data is mostly invalid (4xx), which is the point:
bad input of any shape must get a documented error, never a 5xx.

The spec is built at collection time from the same app factory the server uses (schemathesis's
lazy `from_fixture` loader does not run under pytest 9); the first test checks that the running
server serves exactly that spec.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from adapters.api_keys import ApiKeys
from adapters.metrics import Metrics
from adapters.repository import MemoryRepository
from adapters.settings import Settings
from evaluation.fake_openai import FakeOpenAI
from service.http import create_http_app
from service.response import ResponseService
from tests.support.stacks import UpProcess
from tests.support.tenant_app import Replays

pytestmark = pytest.mark.integration

API_KEY = "schema-key"
AUTH = {"Authorization": f"Bearer {API_KEY}"}
CHECKS = [
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
    content_type_conformance,
]


async def _status() -> dict[str, Any]:
    return {"ready": True}


def _spec() -> dict[str, Any]:
    app = create_http_app(
        cast(ResponseService, None),
        Settings(api_keys=API_KEY),
        Metrics(),
        _status,
        _status,
        tenant_keys=ApiKeys(cast(MemoryRepository, None)),  # the routes only, as a stack has
        dead_letters=Replays(),
    )
    return app.openapi()


SPEC = _spec()
schema = schemathesis.openapi.from_dict(SPEC)
# POST /v1/import takes NDJSON, a text body: sent as text, as a client would
schemathesis.serializer.alias("application/x-ndjson", "text/plain")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpProcess]:
    # Embeddings come from a fake OpenAI server of the module's own (a shared one may hold
    # another test's faults): this run is about the HTTP contract, and the local model
    # (robust to any text, see its contract tests) would double the time.
    with FakeOpenAI() as embeddings:
        process = UpProcess(
            Path(tmp_path_factory.mktemp("schemathesis")),
            MEMORYOS_API_KEYS=API_KEY,
            MEMORYOS_STM_CAPACITY="3",
            MEMORYOS_EMBEDDER="openai",
            MEMORYOS_OPENAI_BASE_URL=embeddings.base_url,
            MEMORYOS_OPENAI_API_KEY="test-key",
            MEMORYOS_EMBEDDING_MODEL="fake-embedding",
        )
        process.start()
        try:
            asyncio.run(process.wait_ready())
            yield process
        finally:
            process.terminate()


def test_the_server_serves_this_spec(server: UpProcess) -> None:
    served = httpx.get(f"{server.url}/openapi.json", timeout=10)
    assert served.status_code == 200
    assert served.json() == SPEC


@schema.parametrize()
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_api_conforms_to_its_spec(case: schemathesis.Case[Any], server: UpProcess) -> None:
    case.call_and_validate(base_url=server.url, headers=AUTH, checks=CHECKS, timeout=60)
