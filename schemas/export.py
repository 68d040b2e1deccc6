"""Write the public JSON Schemas (``turn.schema.json``, ``message.schema.json`` and
``event.schema.json``) from their models: ``python -m schemas.export``."""

from __future__ import annotations

from pathlib import Path

import orjson
from pydantic import BaseModel

from schemas.events import MemoryEvent
from schemas.message import MessageEvent
from schemas.turn import TurnEvent

SCHEMA_PATH = Path(__file__).with_name("turn.schema.json")
MESSAGE_SCHEMA_PATH = Path(__file__).with_name("message.schema.json")
EVENT_SCHEMA_PATH = Path(__file__).with_name("event.schema.json")


DEFAULTED = {
    "timestamp": "optional: defaults to when the entry accepted it (a raw topic: the record's "
    "Kafka timestamp)",
    "turn_id": "optional: defaults to an id made at acceptance (a raw topic: from the record's "
    "topic, partition and offset, so a replay keeps it)",
    "message_id": "optional: defaults to an id made at acceptance (a raw topic: from the "
    "record's topic, partition and offset, so a replay keeps it)",
}


def schema_json(model: type[BaseModel], name: str) -> bytes:
    """The public schema of what a producer sends: the input contract (``schemas.accept``),
    so the fields it defaults are not required."""
    schema = model.model_json_schema()
    schema["required"] = [field for field in schema["required"] if field not in DEFAULTED]
    for field, note in DEFAULTED.items():
        if field in schema["properties"]:
            described = schema["properties"][field].get("description", "")
            schema["properties"][field]["description"] = f"{described}; {note}".lstrip("; ")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://memoryos-streams/schemas/{name}"
    return orjson.dumps(schema, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def turn_schema_json() -> bytes:
    return schema_json(TurnEvent, SCHEMA_PATH.name)


def message_schema_json() -> bytes:
    return schema_json(MessageEvent, MESSAGE_SCHEMA_PATH.name)


def event_schema_json() -> bytes:
    """What memoryos.events carries (and a webhook receives): made by us, so every field the
    model fills is in it, defaults too."""
    schema = MemoryEvent.model_json_schema(mode="serialization")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://memoryos-streams/schemas/{EVENT_SCHEMA_PATH.name}"
    return orjson.dumps(schema, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def main() -> None:
    SCHEMA_PATH.write_bytes(turn_schema_json())
    MESSAGE_SCHEMA_PATH.write_bytes(message_schema_json())
    EVENT_SCHEMA_PATH.write_bytes(event_schema_json())
    print(f"wrote {SCHEMA_PATH}, {MESSAGE_SCHEMA_PATH} and {EVENT_SCHEMA_PATH}")


if __name__ == "__main__":
    main()
