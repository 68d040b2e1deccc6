"""Write ``schemas/turn.schema.json`` from the TurnEvent model: ``python -m schemas.export``."""

from __future__ import annotations

from pathlib import Path

import orjson

from schemas.turn import TurnEvent

SCHEMA_PATH = Path(__file__).with_name("turn.schema.json")


def turn_schema_json() -> bytes:
    schema = TurnEvent.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://memoryos-streams/schemas/turn.schema.json"
    return orjson.dumps(schema, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def main() -> None:
    SCHEMA_PATH.write_bytes(turn_schema_json())
    print(f"wrote {SCHEMA_PATH}")


if __name__ == "__main__":
    main()
