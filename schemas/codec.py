"""JSON (orjson) encoding and validated decoding of every record we put on a topic."""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from schemas.errors import InvalidEvent
from schemas.message import MessageEvent
from schemas.records import ForgetUser, PairingTick
from schemas.turn import TurnEvent

Model = TypeVar("Model", bound=BaseModel)


def dumps(record: BaseModel | dict[str, Any]) -> bytes:
    data = record.model_dump(mode="json") if isinstance(record, BaseModel) else record
    return orjson.dumps(data)


def describe(exc: ValidationError) -> tuple[str, str]:
    """The first problem of a validation error as (field path, readable message)."""
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "body"
    return field, f"{field}: {first['msg']}"


# 19 digits or more may not fit in 64 bits (-(2**63) - 1 has 19)
_LONG_NUMBER = re.compile(rb"\d{19,}")


def _object(raw: bytes | str | dict[str, Any]) -> dict[str, Any]:
    try:
        data = orjson.loads(raw) if isinstance(raw, bytes | str) else raw
    except orjson.JSONDecodeError as exc:
        raise InvalidEvent(f"not valid JSON: {exc}", field="body") from None
    if isinstance(raw, bytes | str) and _LONG_NUMBER.search(_bytes(raw)):
        # orjson turns an integer beyond 64 bits into a float, silently changing it; the
        # standard parser keeps it an int, which the schema then refuses as HTTP does.
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise InvalidEvent(f"not valid JSON: {exc}", field="body") from None
    if not isinstance(data, dict):
        raise InvalidEvent(f"expected a JSON object, got {type(data).__name__}", field="body")
    return data


def decode_turn_input(raw: bytes | str | dict[str, Any]) -> TurnEvent | ForgetUser:
    """A record of ``memoryos.turns``: a public turn, or a DELETE's forget marker."""
    data = _object(raw)
    if data.get("kind") == "forget":
        return decode(ForgetUser, data)
    return decode(TurnEvent, data)


def decode_message_input(
    raw: bytes | str | dict[str, Any],
) -> MessageEvent | ForgetUser | PairingTick:
    """A record of ``memoryos.messages``: a public message, a forget marker or a tick."""
    data = _object(raw)
    if data.get("kind") == "forget":
        return decode(ForgetUser, data)
    if data.get("kind") == "tick":
        return decode(PairingTick, data)
    return decode(MessageEvent, data)


def decode(model: type[Model], raw: bytes | str | dict[str, Any]) -> Model:
    """Parse and validate one record; raise InvalidEvent naming the offending field."""
    data = _object(raw)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        field, message = describe(exc)
        raise InvalidEvent(message, field=field) from None


def _bytes(raw: bytes | str) -> bytes:
    return raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
