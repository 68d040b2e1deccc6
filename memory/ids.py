"""Deterministic point ids, so a replayed event rewrites the same Qdrant point.

Every id is a UUID5 of the JSON array ``[kind, user_id, key]`` under one fixed project
namespace: Qdrant accepts UUID strings as point ids, and the same natural key always maps to
the same point. The parts are JSON-encoded, not joined with a separator, because ``:`` is legal
in user and turn ids: joined, user ``org`` turn ``bob:t1`` and user ``org:bob`` turn ``t1``
would share one page. (Versions before this encoding made other ids: re-ingest their stores.)
"""

from __future__ import annotations

import json
from uuid import UUID, uuid5

from memory.text import normalize_fact
from schemas.profile import DEFAULT_ASSISTANT

# Fixed forever: changing it would orphan every point already stored.
NAMESPACE = UUID("6f1c2a9e-4b7d-5e3a-9c1f-0d8e7b6a5c43")

PAGE = "page"
SEGMENT = "segment"
PERSONA = "persona"
MESSAGE = "message"


def point_id(user_id: str, kind: str, key: str) -> str:
    """The point id of the object ``key`` of type ``kind`` that belongs to ``user_id``."""
    name = json.dumps([kind, user_id, key], ensure_ascii=False, separators=(",", ":"))
    return str(uuid5(NAMESPACE, name))


def page_id(user_id: str, turn_id: str) -> str:
    """One page per turn: replaying a turn lands on the same page."""
    return point_id(user_id, PAGE, turn_id)


def segment_id(user_id: str, first_page_id: str) -> str:
    """A segment is named after the page that opened it, so a replay reopens the same one."""
    return point_id(user_id, SEGMENT, first_page_id)


def fact_id(user_id: str, kind: str, normalized_text: str, assistant_id: str | None = None) -> str:
    """A user-KB fact or agent trait (``kind`` tells which) by its normalized text.

    The text is normalized again here (normalization is idempotent), so two spellings of
    one fact can never get two points even if a caller forgets to normalize. A named
    assistant's trait gets its own point (``/`` cannot occur in an id); the default
    assistant's keeps the id it always had.
    """
    scoped = kind if assistant_id in (None, DEFAULT_ASSISTANT) else f"{kind}/{assistant_id}"
    return point_id(user_id, scoped, normalize_fact(normalized_text))


def message_turn_id(user_id: str, message_id: str) -> str:
    """The turn the pairing stage makes from a message (the assistant's reply, or the last
    unanswered customer message): replaying the message lands on the same turn, so the same
    page."""
    return "msg-" + uuid5(NAMESPACE, point_id(user_id, MESSAGE, message_id)).hex


def persona_id(user_id: str) -> str:
    """The single persona point of a user."""
    return point_id(user_id, PERSONA, "")
