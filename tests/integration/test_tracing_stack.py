"""One turn is one trace on the real stack: HTTP, Tansu record headers, Faust agents."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from adapters import tracing
from tests.support.stacks import eventually, running_stack

pytestmark = pytest.mark.integration
STAGES = ["chain process", "stm process", "mtm process", "persona process"]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)  # the stack's own setup then leaves it in place
    yield exporter
    tracing.uninstall()
    provider.shutdown()


async def test_a_turn_is_one_trace_through_the_real_stages(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    # STM of one page and a low tau: the second turn pushes the first to MTM and the persona.
    async with running_stack(tmp_path, stm_capacity=1, heat_tau=1.5) as stack:
        url = f"http://127.0.0.1:{stack.port}/v1/users/ann/turns"
        async with httpx.AsyncClient(timeout=30) as client:
            first = {"query": "I like hiking in the Alps.", "response": "Nice."}
            assert (await client.post(url, json=first)).status_code == 202
            assert await stack.wait_idle(120)
            second = {"query": "I also climb in the Dolomites.", "response": "Great."}
            assert (await client.post(url, json=second)).status_code == 202

        def second_trace() -> list[str]:
            roots = [s for s in spans.get_finished_spans() if s.name.startswith("POST")]
            if len(roots) < 2:
                return []
            trace_id = roots[1].context.trace_id
            names = [
                s.name
                for s in sorted(spans.get_finished_spans(), key=lambda s: s.start_time or 0)
                if s.context.trace_id == trace_id
            ]
            return names if "persona process" in names else []

        names = await eventually(second_trace, timeout_s=120)
    assert names[:2] == ["POST /v1/users/{user_id}/turns", "memoryos.add_turns"]
    assert [name for name in names if name in STAGES][:4] == STAGES
