"""The HTTP API (FastAPI): thin routes over ResponseService.

Bad input never yields a 5xx: unknown JSON -> 400/422 naming the field, oversized -> 413,
missing or wrong bearer key -> 401, a key without the route's scope -> 403. A failing backend
yields 503 saying which one, never its internal error (that goes to the log), and /healthz says
only whether the process is up. A write refused while the embedded broker restarts is a 503
with ``Retry-After``: nothing of it was written, so the client sends it again as is.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Annotated, Any

import orjson
from fastapi import Body, FastAPI, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi_offline import FastAPIOffline
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adapters import tracing
from adapters.api_keys import ApiKeys
from adapters.metrics import Metrics
from adapters.settings import Settings
from memoryos_client.models import (
    AssistantProfile,
    BatchAccepted,
    Deleted,
    HistoryResponse,
    MemoryResponse,
    RespondResponse,
    RetrieveResponse,
    TurnAccepted,
    UserProfile,
    error_responses,
)
from schemas.accept import Accepted, with_defaults
from schemas.codec import describe
from schemas.errors import (
    BrokerError,
    BudgetExhausted,
    Conflict,
    DiskFull,
    EmbedderError,
    Forbidden,
    InvalidEvent,
    JournalError,
    LLMError,
    MemoryOSError,
    NotFound,
    Restarting,
    StoreError,
)
from schemas.filters import Filters, UtcTime
from schemas.profile import DEFAULT_ASSISTANT, Profile
from schemas.tenants import SEPARATOR, Limit, parse_limit, user_of
from schemas.turn import ID_PATTERN, Channel, Meta, Text, TurnEvent
from service.auth import Admin, Forgetter, Gatekeeper, Reader, Writer
from service.console import add_console_routes
from service.cross_origin import cross_site_write, loopback_host
from service.dead_letter_routes import DeadLetterReplay, add_dead_letter_routes
from service.export_routes import add_export_routes
from service.fact_routes import add_fact_routes
from service.key_routes import add_key_routes
from service.message_routes import add_message_routes
from service.openapi_docs import describe_operations
from service.rate_limit import RateLimiter
from service.response import ResponseService
from service.user_routes import add_user_routes

UserId = Annotated[str, Path(pattern=ID_PATTERN, max_length=128, description="the user's id")]
AssistantId = Annotated[
    str,
    Path(
        pattern=ID_PATTERN,
        max_length=128,
        description=f"the assistant's id; {DEFAULT_ASSISTANT!r} is the one of turns without one",
    ),
]
HealthCheck = Callable[[], Awaitable[dict[str, Any]]]
log = logging.getLogger(__name__)
# What a 503 says: the failing part, not its message (hosts, paths, engine internals).
UNAVAILABLE: tuple[tuple[type[MemoryOSError], str], ...] = (
    (StoreError, "store unavailable"),
    (EmbedderError, "embedder unavailable"),
    (LLMError, "LLM unavailable"),
    (Restarting, "the embedded broker is restarting: send the write again after Retry-After"),
    (BrokerError, "broker unavailable"),
    (JournalError, "journal unavailable"),
    (DiskFull, "disk full: writes are refused until space is freed"),
)


Id = Annotated[str, Field(pattern=ID_PATTERN, max_length=128)]


class TurnIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: Text
    response: Text
    timestamp: datetime | None = None
    turn_id: Id | None = None
    assistant_id: Id | None = None
    channel: Channel | None = None
    conversation_id: Id | None = None
    meta: Meta = Field(default_factory=dict)  # bounded by the turn schema (schemas.limits)


class BatchTurnIn(TurnIn):
    """One item of POST /v1/turns (documentation only: items are validated one by one)."""

    user_id: Id


class Scoped(BaseModel):
    """What a retrieve and a respond share: the pages' filters and the time of asking."""

    model_config = ConfigDict(extra="forbid")
    filters: Filters | None = Field(
        None,
        description="scope the pages: channel, assistant_id, conversation_id, after, before, "
        "meta (all must hold)",
    )
    at: UtcTime | None = Field(
        None,
        description="when the question is asked (ISO 8601; default now): relative time in it "
        "(yesterday, last week, two months ago...) is read from here",
    )


class QueryIn(Scoped):
    query: Annotated[Text, Field(min_length=1)]
    assistant_id: Id | None = None
    top_k: int | None = Field(None, ge=1, le=100)
    record_visit: bool = Field(
        True,
        description="count the segments found as visited (N_visit, recency: their heat); "
        "false to look without changing the memory, as the console's why view does",
    )


class RespondIn(Scoped):
    query: Annotated[Text, Field(min_length=1)]
    assistant_id: Id | None = None
    conversation_id: Id | None = Field(
        None,
        description="the conversation the question belongs to: the remembered exchange is a "
        "turn of it",
    )
    remember: bool | None = Field(
        True,
        description="store the exchange as a turn of the user's memory (the paper's "
        "behaviour); false for drafts and internal questions. A reply that only says the "
        "assistant does not know is left out (the turn keeps the query alone)",
    )


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"body is larger than {limit} bytes")


class BodyLimit:
    """413 for a body over the limit, declared (Content-Length) or streamed (chunked)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length", b"")
        if length.isdigit() and int(length) > self.limit:
            response = _error(413, f"body is {int(length)} bytes; at most {self.limit}")
            await response(scope, receive, send)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        await self.app(scope, limited, send)


def published(value: Any, ref: str) -> Any:
    """A reply with the pipeline's reference of the user turned back into the caller's id (the
    default tenant's reference is the id: its replies, on every read, are not walked)."""
    if SEPARATOR not in ref:
        return value
    if isinstance(value, dict):
        return {
            key: user_of(item) if key == "user_id" and item == ref else published(item, ref)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [published(item, ref) for item in value]
    return value


def _turn(user_id: str, body: dict[str, Any]) -> TurnEvent:
    """A turn by the input contract (``schemas.accept``): the API's defaults for the rest."""
    data = with_defaults(body, "turn_id", Accepted.now())
    return TurnEvent.model_validate(data | {"user_id": user_id})


def _too_many(limit: Limit, wait_s: float) -> JSONResponse:
    retry = max(1, math.ceil(wait_s))
    message = (
        f"rate limit: this key may make {limit.rate:g} requests a second (a burst of "
        f"{limit.burst}); retry after {retry} s"
    )
    response = _error(429, message)
    response.headers["Retry-After"] = str(retry)
    return response


def _error(status: int, message: str, field: str | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "field": field}, status_code=status)


def create_http_app(
    service: ResponseService,
    settings: Settings,
    metrics: Metrics,
    health: HealthCheck,
    ready: HealthCheck,
    api: bool = True,
    tenant_keys: ApiKeys | None = None,
    dead_letters: DeadLetterReplay | None = None,
) -> FastAPI:
    """The HTTP app; ``api=False`` (a worker) serves only health and metrics. ``tenant_keys``:
    where tenants' keys are kept (None: the operator's keys only); ``dead_letters``: the
    dead-letter topic, for the replay route (None: no such route)."""
    # Swagger UI and ReDoc from files in the wheel: the CDN's /docs is blank offline.
    # No redirect to the same path with or without a trailing slash: a client that follows it
    # (fetch does, keeping the method) would turn DELETE /v1/users/bob/facts/.. into a DELETE
    # of the user once the dot segment is resolved; every route has one spelling.
    app = FastAPIOffline(title="MemoryOS Streams", version="0.1.0", redirect_slashes=False)
    describe_operations(app)
    keys = settings.api_key_list
    gate = Gatekeeper(keys, tenant_keys, parse_limit(settings.rate_limit))
    limiter = RateLimiter()
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)  # inside `guard`: auth first

    @app.middleware("http")
    async def guard(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        if cross_site_write(request.method, request.headers):
            return _error(403, "cross-site request refused: this API takes writes from its own "
                          "pages and from clients that are not browsers")  # fmt: skip
        if request.url.path.startswith("/v1"):
            try:
                principal = await gate.principal(request.headers.get("authorization", ""))
            except MemoryOSError as exc:
                return await backend_failed(request, exc)
            # DNS rebinding: a page whose name now points at 127.0.0.1 sends neither Origin nor
            # Sec-Fetch-* on a same-origin GET over http; only its Host gives it away.
            if gate.open and not loopback_host(request.headers.get("host", "")):
                return _error(403, "an API without keys answers only on a loopback host name "
                              "(localhost, 127.0.0.1, [::1])")  # fmt: skip
            if principal is None:
                denied = _error(
                    401, "missing or invalid bearer token (Authorization: Bearer <key>)"
                )
                denied.headers["WWW-Authenticate"] = "Bearer"
                return denied
            request.state.principal = principal
            if principal.limit is not None:
                wait = limiter.wait_s(principal.key_id or "operator", principal.limit)
                if wait > 0:
                    label = limiter.tenant_label(principal.tenant)
                    metrics.rate_limited.labels(tenant=label).inc()
                    return _too_many(principal.limit, wait)
        started = time.perf_counter()
        spanned = (
            tracing.server_span(request.method, request.url.path, request.headers)
            if tracing.enabled() and request.url.path.startswith("/v1")  # not probes, scrapes
            else contextlib.nullcontext()
        )
        with spanned as span:
            response = await call_next(request)
            route = request.scope.get("route")
            if span is not None:
                span.update_name(f"{request.method} {getattr(route, 'path', 'unmatched')}")
                span.set_attribute("http.response.status_code", response.status_code)
        name = getattr(route, "name", "unmatched")
        metrics.request_seconds.labels(route=name).observe(time.perf_counter() - started)
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _invalid(exc.errors())

    @app.exception_handler(InvalidEvent)
    async def invalid_event(_: Request, exc: InvalidEvent) -> JSONResponse:
        errors = [{"field": field, "error": message} for field, message in exc.problems]
        body = {"error": str(exc), "field": exc.field, "errors": errors}
        return JSONResponse(body, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        # FastAPI's own 400 is a body it could not parse, e.g. nested ~1,000 levels deep
        # (json.loads gives up): name the body, as for any other unparsable JSON
        field = "body" if exc.status_code == 400 else None
        response = _error(exc.status_code, str(exc.detail), field)
        response.headers.update(exc.headers or {})
        return response

    @app.exception_handler(NotFound)
    async def not_found(_: Request, exc: NotFound) -> JSONResponse:
        return _error(404, str(exc))

    @app.exception_handler(Conflict)
    async def conflict(_: Request, exc: Conflict) -> JSONResponse:
        return _error(409, str(exc))

    @app.exception_handler(BudgetExhausted)
    async def out_of_tokens(_: Request, exc: BudgetExhausted) -> JSONResponse:
        response = _error(429, str(exc))
        response.headers["Retry-After"] = str(exc.retry_after_s)
        return response

    @app.exception_handler(Forbidden)
    async def forbidden(_: Request, exc: Forbidden) -> JSONResponse:
        return _error(403, str(exc))

    @app.exception_handler(MemoryOSError)
    async def backend_failed(request: Request, exc: MemoryOSError) -> JSONResponse:
        what = next((text for kind, text in UNAVAILABLE if isinstance(exc, kind)), None)
        if isinstance(exc, Restarting):  # expected, and many while it lasts: no warning each
            response = _error(503, what or "service unavailable")
            response.headers["Retry-After"] = str(exc.retry_after_s)
            return response
        log.warning("%s %s failed: %s: %s", request.method, request.url.path,
                    type(exc).__name__, exc)  # fmt: skip
        return _error(503, what or "service unavailable")

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        # anyone may probe it: the status only, no configuration (broker URL, backends)
        return {"status": (await health()).get("status", "ok")}

    @app.get("/readyz", responses={503: {"description": "not ready yet"}})
    async def readyz() -> JSONResponse:
        status = await ready()
        return JSONResponse(status, status_code=200 if status.get("ready") else 503)

    @app.get(
        "/metrics",
        response_class=PlainTextResponse,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
    )
    async def metrics_endpoint() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    if api:
        _add_api_routes(app, service)
        add_message_routes(app, service)
        add_fact_routes(app, service)
        if tenant_keys is not None:
            add_key_routes(app, tenant_keys, gate)
            add_user_routes(app, tenant_keys.repo)
            add_export_routes(app, tenant_keys.repo, settings.embedding_dim)
        if dead_letters is not None:
            add_dead_letter_routes(app, dead_letters)
        add_console_routes(app)
        if keys:
            _declare_bearer(app)
    return app


def _invalid(errors: Sequence[Any]) -> JSONResponse:
    """400 for JSON that does not parse, else 422 listing every offending field (``field``
    names the first, ``errors`` has each)."""
    if not errors:
        return _error(422, "invalid request", "body")
    first = errors[0]
    if first.get("type") == "json_invalid":
        reason = first.get("ctx", {}).get("error", "JSON decode error")
        position = first["loc"][-1]
        return _error(400, f"body is not valid JSON: {reason} (at character {position})", "body")
    problems = []
    for error in errors:
        loc = [str(part) for part in error["loc"]]
        if len(loc) > 1 and loc[0] in ("body", "path", "query", "header"):
            loc = loc[1:]
        field = ".".join(loc) or "body"
        message = error["msg"]
        if field == "body" and error.get("type") in ("dict_type", "model_attributes_type"):
            message = "expected a JSON object (send it with Content-Type: application/json)"
        problems.append({"field": field, "error": f"{field}: {message}"})
    response = _error(422, "; ".join(p["error"] for p in problems), problems[0]["field"])
    body = orjson.loads(response.body)
    return JSONResponse(body | {"errors": problems}, status_code=422)


def _declare_bearer(app: FastAPI) -> None:
    """Put the bearer scheme in the OpenAPI spec, for every /v1 operation."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = build()
            spec.setdefault("components", {})["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer"}
            }
            for path, operations in spec["paths"].items():
                if path.startswith("/v1"):
                    for operation in operations.values():
                        operation["security"] = [{"bearer": []}]
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


INPUT_ERRORS = error_responses(400, 401, 403, 413, 422, 429)
READ_ERRORS = error_responses(401, 403, 422, 429, 503)


def _add_api_routes(app: FastAPI, service: ResponseService) -> None:
    @app.post(
        "/v1/users/{user_id}/turns",
        status_code=202,
        response_model=TurnAccepted,
        responses=INPUT_ERRORS | error_responses(503),
    )
    async def add_turn(user_id: UserId, turn: TurnIn, who: Writer) -> dict[str, str]:
        try:
            event = _turn(who.user(user_id), turn.model_dump())
        except ValidationError as exc:
            field, message = describe(exc)
            raise InvalidEvent(message, field=field) from None
        [turn_id] = await service.add_turns([event])
        return {"turn_id": turn_id}

    @app.post(
        "/v1/turns",
        status_code=202,
        response_model=BatchAccepted,
        response_model_exclude_none=True,  # an item has either "turn_id" or "error"
        responses=INPUT_ERRORS | error_responses(503),
        openapi_extra={"requestBody": _batch_body()},
    )
    async def add_turns(items: Annotated[list[Any], Body(max_length=1000)], who: Writer) -> Any:
        results: list[dict[str, Any]] = []
        accepted = []
        for index, item in enumerate(items):
            try:
                if not isinstance(item, dict):
                    raise InvalidEvent(f"expected a JSON object, got {_json_type(item)}")
                user_id = item.get("user_id")
                if not isinstance(user_id, str):
                    raise InvalidEvent("user_id: required string", field="user_id")
                rest = {k: v for k, v in item.items() if k != "user_id"}
                event = _turn(who.user(user_id), TurnIn.model_validate(rest).model_dump())
            except ValidationError as exc:
                results.append({"index": index, "error": describe(exc)[1]})
                continue
            except InvalidEvent as exc:
                results.append({"index": index, "error": str(exc)})
                continue
            accepted.append(event)
            results.append({"index": index, "turn_id": event.turn_id})
        await service.add_turns(accepted)
        return {"accepted": len(accepted), "results": results}

    @app.post(
        "/v1/users/{user_id}/retrieve",
        response_model=RetrieveResponse,
        responses=INPUT_ERRORS | error_responses(403, 503),
    )
    async def retrieve(user_id: UserId, body: QueryIn, who: Reader) -> dict[str, Any]:
        ref = who.user(user_id)
        memory = await service.retrieve(
            ref,
            body.query,
            body.top_k,
            body.assistant_id,
            filters=body.filters,
            at=body.at,
            visit=body.record_visit,
        )
        return published(memory.to_json(), ref)  # type: ignore[no-any-return]

    @app.post(
        "/v1/users/{user_id}/respond",
        response_model=RespondResponse,
        responses=INPUT_ERRORS | error_responses(403, 503),
    )
    async def respond(user_id: UserId, body: RespondIn, who: Writer) -> dict[str, Any]:
        """Answer with memory through the LLM; the exchange is remembered unless
        ``remember`` is false (a reply that only says it does not know: the query alone)."""
        ref = who.user(user_id)
        answered = await service.respond(
            ref,
            body.query,
            body.assistant_id,
            record=body.remember is not False,
            filters=body.filters,
            at=body.at,
            conversation_id=body.conversation_id,
        )
        return {
            "response": answered.text,
            "memory": published(answered.memory.to_json(), ref),
            "usage": answered.usage,
            "remembered": answered.remembered,
        }

    @app.get("/v1/users/{user_id}/memory", response_model=MemoryResponse, responses=READ_ERRORS)
    async def get_memory(user_id: UserId, who: Reader) -> dict[str, Any]:
        ref = who.user(user_id)
        return published(await service.get_memory(ref), ref)  # type: ignore[no-any-return]

    @app.get("/v1/users/{user_id}/history", response_model=HistoryResponse, responses=READ_ERRORS)
    async def get_history(
        user_id: UserId, who: Reader, limit: Annotated[int, Query(ge=1, le=200)] = 20
    ) -> dict[str, Any]:
        ref = who.user(user_id)
        return published(await service.history(ref, limit), ref)  # type: ignore[no-any-return]

    @app.put(
        "/v1/users/{user_id}/profile",
        response_model=UserProfile,
        responses=INPUT_ERRORS | error_responses(403, 503),
    )
    async def set_user_profile(
        user_id: UserId, profile: Annotated[Profile, Body()], who: Writer
    ) -> dict[str, Any]:
        """Replace the user's profile (static attributes, shown in every prompt). It wins over
        attributes the persona stage extracts from the dialogue."""
        return {
            "user_id": user_id,
            "profile": await service.set_profile(who.user(user_id), profile),
        }

    @app.put(
        "/v1/assistants/{assistant_id}/profile",
        response_model=AssistantProfile,
        responses=INPUT_ERRORS | error_responses(403, 503),
    )
    async def set_assistant_profile(
        assistant_id: AssistantId, profile: Annotated[Profile, Body()], who: Admin
    ) -> dict[str, Any]:
        """Replace an assistant's profile (its agent profile, shown to it for every user of
        the tenant)."""
        stored = await service.set_assistant_profile(
            who.user(assistant_id, "assistant_id"), profile
        )
        return {"assistant_id": assistant_id, "profile": stored}

    @app.get(
        "/v1/assistants/{assistant_id}/profile",
        response_model=AssistantProfile,
        responses=READ_ERRORS,
    )
    async def get_assistant_profile(assistant_id: AssistantId, who: Reader) -> dict[str, Any]:
        profile = await service.assistant_profile(who.user(assistant_id, "assistant_id"))
        return {"assistant_id": assistant_id, "profile": profile}

    @app.delete("/v1/users/{user_id}", response_model=Deleted, responses=READ_ERRORS)
    async def forget_user(user_id: UserId, who: Forgetter) -> dict[str, dict[str, int]]:
        return {"deleted": await service.forget(who.user(user_id))}


def _json_type(value: Any) -> str:
    names = {str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    if value is None:
        return "null"
    return "an array" if isinstance(value, list) else names.get(type(value), type(value).__name__)


def _batch_body() -> dict[str, Any]:
    """The documented body of POST /v1/turns; items are checked one by one, not all-or-nothing."""
    item = BatchTurnIn.model_json_schema()
    item["title"] = "BatchTurnIn"
    schema = {"type": "array", "maxItems": 1000, "items": item}
    return {"required": True, "content": {"application/json": {"schema": schema}}}
