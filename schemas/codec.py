"""JSON (orjson) encoding and validated decoding of every record we put on a topic."""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from schemas.accept import Accepted, with_defaults
from schemas.errors import InvalidEvent
from schemas.message import MessageEvent
from schemas.records import ForgetUser, PairingTick
from schemas.turn import TurnEvent

Model = TypeVar("Model", bound=BaseModel)


def dumps(record: BaseModel | dict[str, Any]) -> bytes:
    data = record.model_dump(mode="json") if isinstance(record, BaseModel) else record
    return orjson.dumps(data)


def describe(exc: ValidationError) -> tuple[str, str]:
    """A validation error as (the first problem's field path, every problem in one message)."""
    problems = describe_all(exc)
    return problems[0][0], "; ".join(message for _, message in problems)


def describe_all(exc: ValidationError) -> list[tuple[str, str]]:
    """Every problem of a validation error as (field path, readable message)."""
    found = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"]) or "body"
        found.append((field, f"{field}: {error['msg']}"))
    return found


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


def decode_turn_input(
    raw: bytes | str | dict[str, Any], accepted: Accepted | None = None
) -> TurnEvent | ForgetUser:
    """A record of ``memoryos.turns``: a public turn, or a DELETE's forget marker. With
    ``accepted``, a turn gets the input contract's defaults (``schemas.accept``)."""
    data = _object(raw)
    if data.get("kind") == "forget":
        return decode(ForgetUser, data)
    if accepted is not None:
        data = with_defaults(data, "turn_id", accepted)
    return decode(TurnEvent, data)


def decode_message_input(
    raw: bytes | str | dict[str, Any], accepted: Accepted | None = None
) -> MessageEvent | ForgetUser | PairingTick:
    """A record of ``memoryos.messages``: a public message, a forget marker or a tick."""
    data = _object(raw)
    if data.get("kind") == "forget":
        return decode(ForgetUser, data)
    if data.get("kind") == "tick":
        return decode(PairingTick, data)
    if accepted is not None:
        data = with_defaults(data, "message_id", accepted)
    return decode(MessageEvent, data)


def decode_accepted(
    model: type[Model], raw: bytes | str | dict[str, Any], id_field: str, accepted: Accepted
) -> Model:
    """A turn or message by the input contract: its defaults for what the record leaves out."""
    return decode(model, with_defaults(_object(raw), id_field, accepted))


def decode(model: type[Model], raw: bytes | str | dict[str, Any]) -> Model:
    """Parse and validate one record; raise InvalidEvent naming the offending field."""
    data = _object(raw)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        field, message = describe(exc)
        raise InvalidEvent(message, field=field, problems=describe_all(exc)) from None


def _bytes(raw: bytes | str) -> bytes:
    return raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
