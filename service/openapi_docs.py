"""What /docs says of each operation: a description and an example, kept beside the routes
instead of inside them so that a route stays a few lines. ``tests/service`` checks that every
operation the app serves has both."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

Operation = tuple[str, str]  # (method, path template)

_FACT_ID = "8aa477ef-ec2e-5ec4-b2d8-1c33a20002fb"
_FACT = {
    "fact_id": _FACT_ID,
    "kind": "user_knowledge",
    "text": "I live in Lyon.",
    "created_at": "2024-03-01T09:05:00Z",
    "source": {"turn_ids": ["t-0001"], "page_ids": ["3f1c…"]},
    "assistant_id": None,
    "pinned": False,
    "superseded_by": None,
    "superseded_at": None,
}
_ACCEPTED_FACT = {"fact_id": _FACT_ID}
_FACTS = "/v1/users/{user_id}/facts"
_PAGE = {
    "page_id": "3f1c…",
    "turn_id": "t-0001",
    "query": "My dog is called Miso.",
    "response": "Lovely name!",
    "timestamp": "2024-03-01T09:00:00Z",
    "meta": {},
    "chain": {"prev": None, "next": None, "summary": "The user's dog, Miso."},
}
_TURN = {"query": "My dog is called Miso.", "response": "Lovely name!", "channel": "web"}
_MEMORY = {
    "short_term": [_PAGE],
    "mid_term": [],
    "user_profile": {"name": "Alice"},
    "agent_profile": {},
    "user_traits": {},
    "user_knowledge": [
        {"text": "Alice has a dog called Miso.", "score": 0.82, "fact_id": _FACT_ID}
    ],
    "agent_traits": [],
    "context": ["3f1c…"],
}

_MESSAGE = {"user_id": "alice", "conversation_id": "wa-1", "role": "assistant", "channel": "sms"}

# (description, request example or None, 2xx response example)
DOCS: dict[Operation, tuple[str, Any, Any]] = {
    ("get", "/healthz"): (
        "Liveness: the process is up. Unauthenticated, so it shows no configuration.",
        None,
        {"status": "ok"},
    ),
    ("get", "/readyz"): (
        "Readiness: 200 only when a write would be acknowledged now; 503 names each reason "
        "(`starting`, `journal unavailable`, `disk full`).",
        None,
        {"ready": True},
    ),
    ("get", "/metrics"): (
        "Prometheus metrics in base units (seconds, bytes).",
        None,
        "# TYPE memoryos_disk_free_bytes gauge\nmemoryos_disk_free_bytes 5.3e+10\n",
    ),
    ("post", "/v1/users/{user_id}/turns"): (
        "Add one dialogue turn (the customer's query and the assistant's response). 202 once "
        "it is durable; the pipeline places it in memory moments later. `turn_id` and "
        "`timestamp` default to a new id and now.",
        _TURN,
        {"turn_id": "5f0c9a…"},
    ),
    ("post", "/v1/turns"): (
        "Add turns of any users in one request (at most 1,000). Each item is checked on its "
        "own: a bad item is reported by index and does not refuse the others.",
        [_TURN | {"user_id": "alice"}, {"user_id": "bob", "query": "hi", "response": "hello"}],
        {"accepted": 2, "results": [{"index": 0, "turn_id": "…"}, {"index": 1, "turn_id": "…"}]},
    ),
    ("post", "/v1/users/{user_id}/retrieve"): (
        "The user's memory for a query, without an LLM call: every short-term page, the best "
        "mid-term pages, the profile, traits and the closest facts. Counts a visit on the "
        "segments it hits (their heat).",
        {"query": "What is my dog called?", "assistant_id": "support", "top_k": 10},
        _MEMORY,
    ),
    ("post", "/v1/users/{user_id}/respond"): (
        "Answer a query with the user's memory through the LLM. The exchange is remembered "
        "(a new turn) unless `remember` is false; a reply that only says the assistant does "
        "not know is left out (the query alone is kept); `remembered` says which.",
        {"query": "What is my dog called?", "remember": True},
        {
            "response": "Your dog is called Miso.",
            "memory": _MEMORY,
            "usage": {"prompt_tokens": 812, "completion_tokens": 9},
            "remembered": True,
        },
    ),
    ("get", "/v1/users/{user_id}/memory"): (
        "Everything stored for the user: short-term pages, mid-term segments with their heat "
        "and pages, and the persona.",
        None,
        {"user_id": "alice", "short_term": [_PAGE], "mid_term": [], "persona": {"profile": {}}},
    ),
    ("get", "/v1/users/{user_id}/history"): (
        "Where the user's latest turns are in the pipeline, and the user's recent dead letters.",
        None,
        {
            "user_id": "alice",
            "turns": [
                {
                    "turn_id": "t-0001",
                    "page_id": "3f1c…",
                    "seq": 1,
                    "timestamp": "2024-03-01T09:00:00Z",
                    "place": "stm",
                    "segment_id": None,
                    "stages": ["chain", "stm"],
                }
            ],
            "dead_letters": [],
        },
    ),
    ("put", "/v1/users/{user_id}/profile"): (
        "Replace the user's stated profile (at most 64 keys, 4 KiB); it wins over what the "
        "pipeline extracts and appears in every prompt.",
        {"name": "Alice", "plan": "gold"},
        {"user_id": "alice", "profile": {"name": "Alice", "plan": "gold"}},
    ),
    ("put", "/v1/assistants/{assistant_id}/profile"): (
        "Replace an assistant's profile, shown in the prompts it answers.",
        {"role": "support agent", "tone": "friendly"},
        {"assistant_id": "support", "profile": {"role": "support agent", "tone": "friendly"}},
    ),
    ("get", "/v1/assistants/{assistant_id}/profile"): (
        "An assistant's profile.",
        None,
        {"assistant_id": "support", "profile": {"role": "support agent"}},
    ),
    ("delete", "/v1/users/{user_id}"): (
        "Forget the user everywhere: the store now, every stage as the user's forget marker "
        "passes; reads show nothing meanwhile. Durable before destructive: a 503 removed "
        "nothing.",
        None,
        {
            "deleted": {
                "short_term": 7,
                "mid_term_pages": 12,
                "segments": 3,
                "user_knowledge": 5,
                "agent_traits": 2,
            }
        },
    ),
    ("get", _FACTS): (
        "The user's facts, newest first: current ones, and with `include_superseded=true` those "
        "a later fact updated (kept for audit). `kind` picks one kind; page with `cursor`.",
        None,
        {"facts": [_FACT], "next_cursor": None},
    ),
    ("post", _FACTS): (
        "Add a fact (source `api`). 202 once durable; the persona stage applies it in the "
        "user's order within moments. A fact stating the same attribute as a current one "
        "supersedes it; `pinned` keeps it from supersession and ageing out.",
        {"text": "I live in Lyon.", "kind": "user_knowledge", "pinned": True},
        _ACCEPTED_FACT,
    ),
    ("patch", _FACTS + "/{fact_id}"): (
        "Correct a fact's text, or pin or unpin it; it keeps its id, and its old text is never "
        "extracted back. 202, applied in the user's order.",
        {"text": "I live in Lyon, France.", "pinned": True},
        _ACCEPTED_FACT,
    ),
    ("delete", _FACTS + "/{fact_id}"): (
        "Delete one fact: never served again, never extracted again from the turns it came "
        "from; its history keeps when, not its words. 202, applied in the user's order.",
        None,
        _ACCEPTED_FACT,
    ),
    ("get", _FACTS + "/{fact_id}/history"): (
        "Every change of the fact, oldest first: extracted, added, edited, pinned, unpinned, "
        "superseded, deleted, each with its time and source.",
        None,
        {
            "fact_id": _FACT_ID,
            "changes": [
                {
                    "change": "extracted",
                    "at": "2024-03-01T09:05:00Z",
                    "source": {"turn_ids": ["t-0001"], "page_ids": ["3f1c…"]},
                    "text": "I live in Lyon.",
                    "superseded_by": None,
                }
            ],
        },
    ),
    ("post", "/v1/messages"): (
        "Messages of a bus (customer and assistant, any channel), one or a list; the "
        "pipeline pairs them into turns per conversation. A message id sent before is "
        "reported as `duplicate` (with `conflict` if its text differs) and not sent again.",
        [
            {
                "user_id": "alice",
                "conversation_id": "wa-1",
                "role": "user",
                "text": "Is my order late?",
                "channel": "whatsapp",
            },
            {
                "user_id": "alice",
                "conversation_id": "wa-1",
                "role": "assistant",
                "text": "It ships today.",
                "channel": "whatsapp",
            },
        ],
        {
            "accepted": 2,
            "results": [{"index": 0, "message_id": "…"}, {"index": 1, "message_id": "…"}],
        },
    ),
}


def describe_operations(app: FastAPI) -> None:
    """Give the app's OpenAPI document every operation's description and examples."""
    build: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        spec = build()
        for (method, path), (description, request, response) in DOCS.items():
            operation = spec["paths"].get(path, {}).get(method)
            if operation is None:
                continue
            operation["description"] = description
            if request is not None:
                body = operation.setdefault("requestBody", {}).setdefault("content", {})
                body.setdefault("application/json", {})["example"] = request
            ok = next(code for code in operation["responses"] if code.startswith("2"))
            content = operation["responses"][ok].setdefault("content", {})
            kind = "text/plain" if isinstance(response, str) else "application/json"
            content.setdefault(kind, {})["example"] = response
        app.openapi_schema = spec
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
