"""``POST /v1/messages``: one bus message, or a list, for the pairing stage.

Kept beside ``http.py`` (which registers it) so the routes of turns and messages stay short.
A single message is checked whole (422 naming the field); a list is checked item by item, like
``POST /v1/turns``, so one bad item does not refuse the others.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Body, FastAPI
from pydantic import ValidationError

from memory.pairing import message_digest
from memoryos_client.models import MessagesAccepted, error_responses
from schemas.accept import Accepted, with_defaults
from schemas.codec import describe, describe_all
from schemas.errors import InvalidEvent
from schemas.message import MessageEvent
from service.auth import Principal, Writer
from service.response import ResponseService

MAX_ITEMS = 1000


def message_of(item: Any, who: Principal) -> MessageEvent:
    """One item as a message of the caller's tenant; ``message_id`` and ``timestamp`` default
    to a new id and now."""
    if not isinstance(item, dict):
        raise InvalidEvent(f"expected a JSON object, got {type(item).__name__}", field="body")
    if isinstance(item.get("user_id"), str):
        item = item | {"user_id": who.user(item["user_id"])}
    try:
        return MessageEvent.model_validate(with_defaults(item, "message_id", Accepted.now()))
    except ValidationError as exc:
        field, message = describe(exc)
        raise InvalidEvent(message, field=field, problems=describe_all(exc)) from None


def add_message_routes(app: FastAPI, service: ResponseService) -> None:
    @app.post(
        "/v1/messages",
        status_code=202,
        response_model=MessagesAccepted,
        response_model_exclude_none=True,
        responses=error_responses(400, 401, 403, 413, 422, 503),
        openapi_extra={"requestBody": _body()},
    )
    async def add_messages(body: Annotated[Any, Body()], who: Writer) -> dict[str, Any]:
        """Messages of a bus (customer and assistant, any channel): paired into turns."""
        if isinstance(body, dict):
            body = [body]
            single = True
        else:
            single = False
        if not isinstance(body, list):
            raise InvalidEvent(
                "expected a message object or a list of them, as JSON (send it with "
                "Content-Type: application/json)",
                field="body",
            )
        if len(body) > MAX_ITEMS:
            raise InvalidEvent(f"at most {MAX_ITEMS} messages per request", field="body")
        results: list[dict[str, Any]] = []
        valid: list[tuple[int, MessageEvent]] = []
        for index, item in enumerate(body):
            try:
                valid.append((index, message_of(item, who)))
            except InvalidEvent as exc:
                if single:
                    raise
                results.append({"index": index, "error": str(exc)})
        outcomes = await service.add_messages([message for _, message in valid])
        accepted = 0
        for (index, message), earlier in zip(valid, outcomes, strict=True):
            if earlier is None:
                accepted += 1
                results.append({"index": index, "message_id": message.message_id})
            else:
                results.append(_duplicate(index, message, earlier))
        results.sort(key=lambda result: int(result["index"]))
        return {"accepted": accepted, "results": results}


def _duplicate(index: int, message: MessageEvent, first: str) -> dict[str, Any]:
    """A message id the user's messages had before: not sent again, and a different role or
    text is said aloud (the first copy is the one memory keeps)."""
    result: dict[str, Any] = {"index": index, "message_id": message.message_id, "duplicate": True}
    if first and first != message_digest(message):
        result["conflict"] = (
            "this message id was accepted before with another role or text; "
            "the first copy is kept and this one is not"
        )
    return result


def _body() -> dict[str, Any]:
    item = MessageEvent.model_json_schema()
    item["title"] = "MessageIn"
    item["required"] = [
        name for name in item["required"] if name not in ("message_id", "timestamp")
    ]
    schema = {"oneOf": [item, {"type": "array", "maxItems": MAX_ITEMS, "items": item}]}
    return {"required": True, "content": {"application/json": {"schema": schema}}}
