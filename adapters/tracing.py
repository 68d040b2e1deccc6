"""Tracing: one turn is one trace, from the HTTP request through every stage it reaches.

The trace context travels in Kafka record headers as a W3C ``traceparent``: ``inject`` adds
the current one to what a sender writes, and ``stage_span`` continues the one a consumed
record carries. Off by default, and then free: no SDK tracer provider is built, the tracer
is the API's no-op one, and the hot paths check ``enabled()`` before touching headers.

The tracer is held here rather than set as OpenTelemetry's global provider: the global can
be set only once per process, and tests install and remove an in-memory exporter per test.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

if TYPE_CHECKING:  # the SDK is imported only when tracing is switched on
    from opentelemetry.sdk.trace import TracerProvider

    from adapters.settings import Settings

TRACEPARENT = "traceparent"
_PROPAGATOR = TraceContextTextMapPropagator()  # W3C only, whatever OTEL_PROPAGATORS says
_NOOP: Tracer = trace.NoOpTracer()
_tracer: Tracer = _NOOP
_provider: TracerProvider | None = None

Headers = Mapping[str, bytes] | Sequence[tuple[str, bytes]] | None
Attributes = dict[str, str | int]
P = ParamSpec("P")
R = TypeVar("R")


def enabled() -> bool:
    return _tracer is not _NOOP


def tracer() -> Tracer:
    return _tracer


def install(provider: TracerProvider) -> None:
    """Trace through ``provider`` from now on (``setup`` in a process, tests directly)."""
    global _tracer, _provider
    _provider, _tracer = provider, provider.get_tracer("memoryos")


def uninstall() -> None:
    global _tracer, _provider
    _provider, _tracer = None, _NOOP


def setup(settings: Settings, role: str) -> bool:
    """Export spans over OTLP (HTTP/protobuf) when an endpoint is configured; whether this
    call switched tracing on (then the caller owns the ``shutdown``).

    Settings decides whether and where; the exporter itself still reads the other standard
    ``OTEL_EXPORTER_OTLP_*`` variables (headers, timeout, compression, certificates), and the
    resource ``OTEL_RESOURCE_ATTRIBUTES``: they are the OpenTelemetry specification's
    configuration surface, and copying each into Settings would only be a worse copy of it.
    """
    endpoint = settings.otlp_traces_endpoint
    if endpoint is None or enabled():
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = settings.otel_service_name or f"memoryos-{role}"
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    install(provider)
    return True


def shutdown() -> None:
    """Flush what is buffered and stop exporting (bounded by the exporter's own timeout)."""
    provider = _provider
    uninstall()
    if provider is not None:
        provider.shutdown()


def inject(headers: Headers) -> Headers:
    """``headers`` plus the current trace context (unchanged when there is none)."""
    if not enabled():
        return headers
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    if TRACEPARENT not in carrier:
        return headers
    added = [(key, value.encode()) for key, value in carrier.items()]
    if headers is None:
        return dict(added)
    if isinstance(headers, Mapping):
        return {**headers, **dict(added)}
    return [*((k, v) for k, v in headers if k not in carrier), *added]


def _carrier(headers: Mapping[str, Any] | Sequence[tuple[str, Any]] | None) -> dict[str, str]:
    return {name: value for name in (TRACEPARENT, "tracestate") if (value := header(headers, name))}


def header(headers: Mapping[str, Any] | Sequence[tuple[str, Any]] | None, name: str) -> str | None:
    """A record's header by name, as text (a Kafka record's headers are a list of pairs)."""
    items = headers.items() if isinstance(headers, Mapping) else (headers or ())
    for key, value in items:
        if key == name:
            return value.decode("latin-1") if isinstance(value, bytes) else str(value)
    return None


def context_headers(headers: Headers) -> dict[str, bytes]:
    """The trace context among ``headers`` (e.g. to keep it with a dead letter)."""
    return {key: value.encode("latin-1") for key, value in _carrier(headers).items()}


@contextlib.contextmanager
def stage_span(
    stage: str, source: Any, user_id: str, together: Sequence[Any] = ()
) -> Iterator[Span | None]:
    """The span of one stage's work on one consumed record, a child of the record's context.

    ``together``: the other records handled in the same call; the span links their contexts,
    so each of their traces leads to it. Attributes follow the OpenTelemetry messaging
    conventions; the user id is on the span (a trace is found by user), never on a metric label.
    """
    if not enabled():
        yield None
        return
    parent = _PROPAGATOR.extract(_carrier(source.headers))
    links = []
    for other in together:
        linked = trace.get_current_span(_PROPAGATOR.extract(_carrier(other.headers)))
        if linked.get_span_context().is_valid:
            links.append(trace.Link(linked.get_span_context()))
    attributes = {
        "messaging.system": "kafka",
        "messaging.operation.type": "process",
        "messaging.destination.name": source.topic,
        "messaging.destination.partition.id": str(source.partition),
        "messaging.kafka.offset": source.offset,
        "memoryos.stage": stage,
        "memoryos.user_id": user_id,
    }
    if together:
        attributes["messaging.batch.message_count"] = len(together) + 1
    with _tracer.start_as_current_span(
        f"{stage} process",
        context=parent,
        kind=SpanKind.CONSUMER,
        attributes=attributes,
        links=links,
    ) as current:
        yield current


def traced(
    name: str, attributes: Callable[..., Attributes] | None = None
) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """Run an async function inside a span ``name``; ``attributes`` sees its arguments.

    A decorator rather than a ``with`` block, so the traced function's body is unchanged.
    """

    def decorate(function: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        @functools.wraps(function)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            if not enabled():
                return await function(*args, **kwargs)
            found = attributes(*args, **kwargs) if attributes else {}
            with _tracer.start_as_current_span(name, attributes=found):
                return await function(*args, **kwargs)

        return wrapper

    return decorate


def of_user(_: object, user_id: str, *args: object, **kwargs: object) -> Attributes:
    """Span attributes of a method whose first argument is the user id."""
    return {"memoryos.user_id": user_id}


def of_turns(_: object, turns: Sequence[Any], *args: object, **kwargs: object) -> Attributes:
    users = {turn.user_id for turn in turns}
    found: Attributes = {"memoryos.turns": len(turns)}
    if len(users) == 1:
        found["memoryos.user_id"] = users.pop()
    return found


@contextlib.contextmanager
def server_span(method: str, path: str, headers: Mapping[str, str]) -> Iterator[Span | None]:
    """An HTTP request's span, continuing the caller's trace when it sends a traceparent.
    The caller renames it to the matched route once routing is done."""
    if not enabled():
        yield None
        return
    parent = _PROPAGATOR.extract(_carrier(headers))
    attributes = {"http.request.method": method, "url.path": path}
    with _tracer.start_as_current_span(
        f"{method} {path}", context=parent, kind=SpanKind.SERVER, attributes=attributes
    ) as current:
        yield current


def dead_lettered(reason: str, error: str) -> None:
    """Mark the current stage span: its event went to the dead letters."""
    if enabled():
        current = trace.get_current_span()
        current.set_attribute("memoryos.dead_letter", reason)
        current.set_status(Status(StatusCode.ERROR, error[:300]))


def trace_id(headers: Headers = None) -> str | None:
    """The current trace's id (hex), else the one in ``headers``' traceparent, else None."""
    current = trace.get_current_span().get_span_context()
    if current.is_valid:
        return format(current.trace_id, "032x")
    parent = _carrier(headers).get(TRACEPARENT, "")
    parts = parent.split("-")
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else None
