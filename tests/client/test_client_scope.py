"""The client's retrieve and respond send their filters, time of asking and conversation as
the API takes them (times in ISO 8601)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import httpx

from memoryos_client import MemoryClient

MEMORY = {"short_term": [], "mid_term": [], "user_profile": {}, "user_traits": {},
          "user_knowledge": [], "agent_traits": []}  # fmt: skip


def test_retrieve_and_respond_send_their_scope() -> None:
    bodies: list[Any] = []

    def reply(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        if request.url.path.endswith("/respond"):
            usage = {"prompt_tokens": 1, "completion_tokens": 1}
            body = {"response": "Ok.", "memory": MEMORY, "usage": usage, "remembered": True}
            return httpx.Response(200, json=body)
        return httpx.Response(200, json=MEMORY)

    at = datetime(2025, 6, 9, 12, tzinfo=UTC)
    filters = {"channel": ["sms", "web"], "after": datetime(2025, 6, 1, tzinfo=UTC)}
    with MemoryClient("http://memoryos", transport=httpx.MockTransport(reply)) as memory:
        memory.retrieve("cara", "my parcel", filters=filters, at=at)
        memory.respond("cara", "my parcel", filters={"conversation_id": "c1"}, at=at,
                       conversation_id="c1")  # fmt: skip
    assert bodies[0] == {
        "query": "my parcel",
        "filters": {"channel": ["sms", "web"], "after": "2025-06-01T00:00:00+00:00"},
        "at": "2025-06-09T12:00:00+00:00",
    }
    assert bodies[1]["filters"] == {"conversation_id": "c1"}
    assert bodies[1]["conversation_id"] == "c1"
    assert bodies[1]["at"] == "2025-06-09T12:00:00+00:00"
