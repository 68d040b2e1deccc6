"""Builders of what the tests feed in: one builder of each kind, every field open to override.

A builder's defaults are what most tests want; a test that relies on another value passes it
(``turn("ann", 3, response="Order 3 noted.")``), so what a test depends on is in the test.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from adapters.ports import Point
from schemas.message import MessageEvent
from schemas.records import ChainLink, Page
from schemas.turn import TurnEvent

if TYPE_CHECKING:
    import qdrant_edge as qe

T0 = datetime.fromtimestamp(1_700_000_000, UTC)  # where the fakes' clock starts (FakeClock)
PAGE_T0 = datetime(2024, 1, 1, tzinfo=UTC)
EDGE_DIM = 4
EDGE_VECTOR = [1.0, 0.0, 0.0, 0.0]


def turn(user: str = "ann", index: int = 0, text: str = "", **fields: Any) -> TurnEvent:
    """Turn ``index`` of ``user``: id ``t007``, ``index`` minutes after T0, ``text`` what the user
    said (by default hiking trip number ``index``). Any other field of TurnEvent may be given."""
    values: dict[str, Any] = {
        "user_id": user,
        "turn_id": f"t{index:03d}",
        "query": text or f"I like hiking trip number {index} in the mountains",
        "response": f"Noted, trip {index}.",
        "timestamp": T0 + timedelta(minutes=index),
    }
    return TurnEvent(**(values | fields))


def make_turns(
    user_id: str,
    texts: Iterable[tuple[str, str]],
    start: datetime | None = None,
    prefix: str = "t",
) -> list[TurnEvent]:
    """One turn per (query, response), a minute apart from ``start``: ``t000``, ``t001``..."""
    start = start or datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
    return [
        turn(
            user_id,
            index,
            turn_id=f"{prefix}{index:03d}",
            query=query,
            response=response,
            timestamp=start + timedelta(minutes=index),
        )
        for index, (query, response) in enumerate(texts)
    ]


def turn_json(**changes: Any) -> dict[str, Any]:
    """A turn as the JSON fields a client sends, before any validation."""
    base: dict[str, Any] = {
        "user_id": "u-1",
        "turn_id": "t-1",
        "query": "I moved to Lisbon last spring.",
        "response": "How do you like it?",
        "timestamp": "2024-05-08T13:56:00+00:00",
    }
    return base | changes


def msg(
    n: int,
    role: str,
    text: str,
    conversation: str,
    channel: str,
    at: int | None = None,
    user: str = "ann",
) -> MessageEvent:
    """Message ``m<n>`` of a bus, ``at`` seconds after T0 (by default ``n * 10``)."""
    return MessageEvent.model_validate(
        {
            "user_id": user,
            "conversation_id": conversation,
            "message_id": f"m{n}",
            "role": role,
            "text": text,
            "timestamp": T0 + timedelta(seconds=at if at is not None else n * 10),
            "channel": channel,
            "meta": {"n": n},
        }
    )


def page(
    n: int = 1,
    query: str | None = None,
    response: str | None = None,
    *,
    chain_id: str | None = None,
    prev: str | None = None,
    summary: str = "",
    **fields: Any,
) -> Page:
    """Page ``p<n>`` of user ``u1`` (turn ``t<n>``, ``n`` minutes after PAGE_T0), the head of its
    own chain unless ``chain_id``/``prev`` say otherwise. Any other field of Page may be given."""
    page_id = fields.pop("page_id", f"p{n}")
    values: dict[str, Any] = {
        "page_id": page_id,
        "user_id": "u1",
        "turn_id": f"t{n}",
        "query": f"question {n}" if query is None else query,
        "response": f"answer {n}" if response is None else response,
        "timestamp": PAGE_T0 + timedelta(minutes=n),
        "chain": ChainLink(chain_id=chain_id or page_id, prev=prev, summary=summary),
    }
    return Page(**(values | fields))


def nested(levels: int) -> dict[str, Any]:
    """A JSON object ``levels`` deep, counting itself: nested(1) == {}."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def point(
    user: str, turn_id: str, meta: dict[str, Any], vector: Sequence[float] = EDGE_VECTOR
) -> Point:
    """A store point of ``user``'s turn, its id derived from both, ``meta`` in its payload."""
    point_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{user}/{turn_id}"))
    return Point(point_id, list(vector), {"user_id": user, "turn_id": turn_id, "meta": meta})


def edge_config(dim: int = EDGE_DIM) -> qe.EdgeConfig:
    """A bare Qdrant Edge shard's configuration: one cosine vector named ``dense``."""
    import qdrant_edge as qe  # here: only the store tests need the native module

    return qe.EdgeConfig(
        vectors={"dense": qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)}
    )
