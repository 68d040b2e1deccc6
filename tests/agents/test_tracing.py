"""Tracing a turn: one trace from POST /v1/users/{id}/turns through every stage it reaches.

The stages run in the in-memory ``Pipeline``, whose senders put the trace context in record
headers as `streams/app.py`'s do; an in-memory exporter collects the spans.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from adapters import tracing
from adapters.metrics import Metrics
from adapters.settings import Settings
from schemas.codec import dumps
from schemas.topics import DLQ, TURNS, user_key
from service.http import create_http_app
from service.response import ResponseService
from tests.support.builders import turn
from tests.support.fakes import FakeLLM, Pipeline, make_deps
from tests.support.pipelines import placed

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    yield exporter
    tracing.uninstall()
    provider.shutdown()


async def small_pipeline() -> Pipeline:
    """STM of one page and a low tau: the second turn pushes the first one through MTM to the
    persona, so that turn's trace reaches every stage."""
    return Pipeline(await make_deps(stm_capacity=1, heat_tau=1.5, continuity_llm="always"))


def http_client(pipeline: Pipeline) -> httpx.AsyncClient:
    service = ResponseService(pipeline.deps, pipeline)

    async def status() -> dict[str, Any]:
        return {"status": "ok", "ready": True}

    app = create_http_app(service, Settings(), Metrics(), status, status)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


def lineage(finished: tuple[ReadableSpan, ...]) -> list[str]:
    """Span names from the root down, following parent links (each span has one child)."""
    ours = {span.context.span_id for span in finished}
    by_parent = {span.parent.span_id if span.parent else None: span for span in finished}
    [root] = [s for s in finished if s.parent is None or s.parent.span_id not in ours]
    names, span = [], root
    while True:
        names.append(span.name)
        if span.context.span_id not in by_parent:
            return names
        span = by_parent[span.context.span_id]


async def test_one_turn_is_one_trace_from_the_api_to_the_persona(
    spans: InMemorySpanExporter,
) -> None:
    pipeline = await small_pipeline()
    async with http_client(pipeline) as client:
        await client.post("/v1/users/ann/turns", json={"query": "I hike.", "response": "Nice."})
        await pipeline.drain()
        spans.clear()
        reply = await client.post(
            "/v1/users/ann/turns",
            json={"query": "I climb too.", "response": "Great."},
            headers={"traceparent": CALLER},
        )
        assert reply.status_code == 202
        await pipeline.drain()
    finished = spans.get_finished_spans()
    assert {format(span.context.trace_id, "032x") for span in finished} == {CALLER_TRACE}
    assert lineage(finished) == [
        "POST /v1/users/{user_id}/turns",
        "memoryos.add_turns",
        "chain process",
        "stm process",
        "mtm process",  # the first turn's page, pushed out of STM by this one
        "persona process",
        "mtm process",  # the persona's acknowledgement
    ]
    stage = next(span for span in finished if span.name == "persona process")
    assert stage.attributes is not None
    assert stage.attributes["memoryos.user_id"] == "ann"
    assert stage.attributes["messaging.destination.name"] == "memoryos.persona"


async def test_every_record_a_stage_emits_carries_its_trace(spans: InMemorySpanExporter) -> None:
    pipeline = await small_pipeline()
    service = ResponseService(pipeline.deps, pipeline)
    await service.add_turns([turn("ann", 0), turn("ann", 1)])
    await pipeline.drain()
    records = [sent for topic in pipeline.ORDER for sent in pipeline.topics[topic]]
    assert records
    assert all(sent.headers.get("traceparent") for sent in records)
    assert len({span.context.trace_id for span in spans.get_finished_spans()}) == 1


async def test_a_dead_letter_keeps_its_trace_and_marks_its_span(
    spans: InMemorySpanExporter,
) -> None:
    pipeline = await small_pipeline()
    with tracing.tracer().start_as_current_span("producer"):
        await pipeline.send(TURNS, user_key("ann"), b'{"user_id": "ann", "query": 1}')
    assert isinstance(pipeline.deps.llm, FakeLLM)
    pipeline.deps.llm.hook = fail
    await pipeline.send(TURNS, user_key("ann"), dumps(turn("ann", 0)))
    await pipeline.drain()
    undecodable, failed = pipeline.topics[DLQ]
    [producer] = spans.get_finished_spans()[:1]
    assert producer.name == "producer"
    assert trace_of(undecodable.headers) == format(producer.context.trace_id, "032x")
    [marked] = [s for s in spans.get_finished_spans() if s.status.status_code is StatusCode.ERROR]
    assert marked.attributes is not None
    assert marked.attributes["memoryos.dead_letter"] == "bug"
    assert trace_of(failed.headers) == format(marked.context.trace_id, "032x")


async def fail(task: str) -> None:
    raise TypeError("a bug in the continuity call")


def trace_of(headers: dict[str, bytes]) -> str:
    return headers["traceparent"].decode().split("-")[1]


async def test_off_there_are_no_spans_and_no_headers() -> None:
    assert not tracing.enabled()
    pipeline = await small_pipeline()
    for index in range(3):
        await pipeline.send(TURNS, user_key("ann"), dumps(turn("ann", index)))
    await pipeline.drain()
    records = [sent for topic in pipeline.ORDER for sent in pipeline.topics[topic]]
    assert records
    assert not any("traceparent" in sent.headers for sent in records)


def test_the_standard_endpoint_variable_switches_tracing_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://tempo:4318/")
    assert Settings().otlp_traces_endpoint == "http://tempo:4318/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector/traces")
    assert Settings().otlp_traces_endpoint == "http://collector/traces"
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert Settings().otlp_traces_endpoint is None
    monkeypatch.delenv("OTEL_SDK_DISABLED")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with pytest.raises(ValueError, match="http/protobuf"):
        Settings()


def test_setup_installs_an_otlp_exporter_only_when_configured() -> None:
    assert not tracing.setup(Settings(), "all")
    assert not tracing.enabled()
    on = Settings(otel_exporter_otlp_endpoint="http://127.0.0.1:9/")
    assert tracing.setup(on, "worker")
    try:
        assert tracing.enabled()
        assert not tracing.setup(on, "worker"), "a second setup leaves the first in place"
    finally:
        tracing.shutdown()
    assert not tracing.enabled()


async def test_a_run_of_visits_handled_together_leads_from_every_visits_trace(
    spans: InMemorySpanExporter,
) -> None:
    from schemas.records import RetrievalHit
    from schemas.topics import MTM

    pipeline, _ = await placed(run_max=8)
    segment_ids = [k.segment.segment_id for k in await pipeline.deps.repo.all_segments("ann")]
    tracer = tracing._tracer  # the fixture's provider
    sent = set()
    for index in range(5):
        with tracer.start_as_current_span(f"retrieve {index}") as span:
            sent.add(span.get_span_context().trace_id)
            hit = RetrievalHit(user_id="ann", segment_ids=segment_ids, at=1.8e9 + index)
            await pipeline.send(MTM, user_key("ann"), dumps(hit))
    metrics = pipeline.deps.metrics
    timed_before = _sample(metrics, "memoryos_stage_duration_seconds_count", "mtm")
    spans.clear()
    await pipeline.drain()
    [run] = [s for s in spans.get_finished_spans() if s.name == "mtm process"]
    assert run.attributes is not None
    assert run.attributes["messaging.batch.message_count"] == 5
    reached = {run.context.trace_id} | {link.context.trace_id for link in run.links}
    assert reached == sent
    assert _sample(metrics, "memoryos_stage_duration_seconds_count", "mtm") == timed_before + 5
    assert _sample(metrics, "memoryos_in_flight", "mtm") == 0


def _sample(metrics: Metrics, name: str, stage: str) -> float:
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name == name and sample.labels.get("stage") == stage:
                return sample.value
    raise AssertionError(f"no {name} for {stage}")
