"""Limits on free-form JSON (a turn's ``meta``), checked once for every entry point.

``meta`` is the one field a client fills with any JSON; it travels through Kafka into the
vector store, whose engine (Qdrant Edge) cannot read back a payload nested much over 120
levels and would then fail the whole shard. So meta is bounded here, at the schema every entry
shares (HTTP, MCP, the ``memoryos.turns`` topic, ``memoryos ingest``), and NaN/Infinity are
refused because JSON cannot carry them: they would come back as ``null``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

MAX_META_DEPTH = 32  # objects and arrays nested inside meta, meta itself counted as 1
MAX_META_BYTES = 16_384  # as compact JSON
_INT_RANGE = (-(2**63), 2**64 - 1)  # what orjson and Qdrant's payload encode


def json_problem(value: Any, where: str, max_depth: int) -> str | None:
    """The first reason ``value`` is not plain, finite, bounded JSON, naming the path; or None.

    Walks without recursion, so a body nested thousands of levels deep costs no stack.
    """
    stack: list[tuple[Any, str, int]] = [(value, where, 1)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > max_depth:
                return f"{path}: nested deeper than {max_depth} levels"
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str):
                        return f"{path}: object keys must be strings, got {key!r}"
                    if problem := _text_problem(key, f"{path} key"):
                        return problem
                    stack.append((child, f"{path}.{key[:40]}", depth + 1))  # short path
            else:
                stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(item))
        elif isinstance(item, str):
            if problem := _text_problem(item, path):
                return problem
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not _INT_RANGE[0] <= item <= _INT_RANGE[1]:
                return f"{path}: integer {item} does not fit in 64 bits"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{path}: {item} is not a JSON number (NaN and Infinity are refused)"
        else:
            return f"{path}: {type(item).__name__} is not a JSON value"
    return None


def _text_problem(text: str, path: str) -> str | None:
    try:
        text.encode()
    except UnicodeEncodeError:
        return f"{path}: must be valid Unicode text (no lone surrogates)"
    return None


MAX_EVENT_TIME = 253_402_300_799.0  # 9999-12-31T23:59:59Z, in seconds since the epoch


def utc_in_range(value: datetime) -> datetime:
    """A timestamp as an instant: a time without zone is taken as UTC, and the instant must
    fall by 9999-12-31T23:59:59Z. "9999-12-31T23:59:59-14:00" is in the year 10000 in UTC:
    accepted, it became the MTM stage's clock and no record time or date could hold it."""
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        seconds = aware.timestamp()
    except (OverflowError, ValueError):
        seconds = float("inf")
    if seconds > MAX_EVENT_TIME:
        raise ValueError("the time is past 9999-12-31T23:59:59Z once taken to UTC")
    return aware
