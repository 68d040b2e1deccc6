"""The HTTP API (FastAPI): thin routes over MemoryService.

Bad input never yields a 5xx: unknown JSON -> 400/422 naming the field, oversized -> 413,
missing or wrong bearer key -> 401.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import uuid4

from fastapi import Body, FastAPI, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from schemas.codec import describe
from schemas.turn import ID_PATTERN, TurnEvent
from service.memory import MemoryService
from streams.errors import InvalidEvent
from streams.metrics import Metrics
from streams.settings import Settings

UserId = Annotated[str, Path(pattern=ID_PATTERN, max_length=128, description="the user's id")]
HealthCheck = Callable[[], Awaitable[dict[str, Any]]]


class TurnIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(max_length=16_000)
    response: str = Field(max_length=16_000)
    timestamp: datetime | None = None
    turn_id: str | None = Field(None, pattern=ID_PATTERN, max_length=128)
    assistant_id: str | None = Field(None, pattern=ID_PATTERN, max_length=128)
    channel: str | None = Field(None, max_length=64)
    meta: dict[str, Any] = Field(default_factory=dict)


class QueryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=16_000)
    assistant_id: str | None = Field(None, pattern=ID_PATTERN, max_length=128)
    top_k: int | None = Field(None, ge=1, le=100)


def _turn(user_id: str, body: dict[str, Any]) -> TurnEvent:
    data = {"turn_id": uuid4().hex, "timestamp": datetime.now(UTC)} | {
        k: v for k, v in body.items() if v is not None
    }
    return TurnEvent.model_validate(data | {"user_id": user_id})


def _error(status: int, message: str, field: str | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "field": field}, status_code=status)


def create_http_app(
    service: MemoryService,
    settings: Settings,
    metrics: Metrics,
    health: HealthCheck,
    ready: HealthCheck,
    api: bool = True,
) -> FastAPI:
    """The HTTP app; ``api=False`` (a worker) serves only health and metrics."""
    app = FastAPI(title="MemoryOS Streams", version="0.1.0")
    keys = settings.api_key_list

    @app.middleware("http")
    async def guard(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > settings.max_body_bytes:
            return _error(413, f"body is {length} bytes; at most {settings.max_body_bytes}")
        if keys and request.url.path.startswith("/v1"):
            supplied = request.headers.get("authorization", "")
            token = supplied.removeprefix("Bearer ").strip()
            if not any(hmac.compare_digest(token, key) for key in keys):
                return _error(401, "missing or invalid bearer token (Authorization: Bearer <key>)")
        started = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        name = getattr(route, "name", "unmatched")
        metrics.request_seconds.labels(route=name).observe(time.perf_counter() - started)
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"] if p != "body") or "body"
        status = 400 if first.get("type") == "json_invalid" else 422
        return _error(status, f"{field}: {first['msg']}", field)

    @app.exception_handler(InvalidEvent)
    async def invalid_event(_: Request, exc: InvalidEvent) -> JSONResponse:
        return _error(422, str(exc), exc.field)

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return await health()

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        status = await ready()
        return JSONResponse(status, status_code=200 if status.get("ready") else 503)

    @app.get("/metrics")
    async def metrics_endpoint() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    if api:
        _add_api_routes(app, service)
    return app


def _add_api_routes(app: FastAPI, service: MemoryService) -> None:
    @app.post("/v1/users/{user_id}/turns", status_code=202)
    async def add_turn(user_id: UserId, turn: TurnIn) -> dict[str, str]:
        try:
            event = _turn(user_id, turn.model_dump())
        except ValidationError as exc:
            field, message = describe(exc)
            raise InvalidEvent(message, field=field) from None
        [turn_id] = await service.add_turns([event])
        return {"turn_id": turn_id}

    @app.post("/v1/turns", status_code=202)
    async def add_turns(items: Annotated[list[dict[str, Any]], Body(max_length=1000)]) -> Any:
        results: list[dict[str, Any]] = []
        accepted = []
        for index, item in enumerate(items):
            try:
                user_id = item.get("user_id")
                if not isinstance(user_id, str):
                    raise InvalidEvent("user_id: required string", field="user_id")
                rest = {k: v for k, v in item.items() if k != "user_id"}
                event = _turn(user_id, TurnIn.model_validate(rest).model_dump())
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

    @app.post("/v1/users/{user_id}/retrieve")
    async def retrieve(user_id: UserId, body: QueryIn) -> dict[str, Any]:
        memory = await service.retrieve(user_id, body.query, body.top_k)
        return memory.to_json()

    @app.post("/v1/users/{user_id}/respond")
    async def respond(user_id: UserId, body: QueryIn) -> dict[str, Any]:
        text, memory, usage = await service.respond(user_id, body.query)
        event = _turn(
            user_id, {"query": body.query, "response": text, "assistant_id": body.assistant_id}
        )
        await service.add_turns([event])
        return {"response": text, "memory": memory.to_json(), "usage": usage}

    @app.get("/v1/users/{user_id}/memory")
    async def get_memory(user_id: UserId) -> dict[str, Any]:
        return await service.get_memory(user_id)

    @app.delete("/v1/users/{user_id}")
    async def forget_user(user_id: UserId) -> dict[str, dict[str, int]]:
        return {"deleted": await service.forget(user_id)}
