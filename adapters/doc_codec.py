"""Per-user documents (heat, persona, tombstones, keys, rings) as payload-only points.

A document's data is stored as one JSON string, not as a nested payload: the engine converts
a nested value element by element on every write, and the heat document, which lists every
segment's page ids and is saved on every MTM event, made that conversion most of the MTM
stage's time (a py-spy profile showed it). Documents written as nested payloads by earlier
versions still read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from schemas.errors import StoreError

DATA = "data"


def encode_doc(data: Mapping[str, Any]) -> str:
    return orjson.dumps(dict(data)).decode()


def doc_data(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The document held by a point's payload, in either form."""
    value = payload.get(DATA)
    if isinstance(value, str):
        try:
            decoded = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise StoreError(f"a stored document is not JSON: {exc}") from exc
        if isinstance(decoded, dict):
            return decoded
    elif isinstance(value, Mapping):
        return dict(value)
    raise StoreError(f"a stored document holds {type(value).__name__}, not an object")
