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

# Fixed forever: changing it would orphan every point already stored.
NAMESPACE = UUID("6f1c2a9e-4b7d-5e3a-9c1f-0d8e7b6a5c43")

PAGE = "page"
SEGMENT = "segment"
PERSONA = "persona"


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


def fact_id(user_id: str, kind: str, normalized_text: str) -> str:
    """A user-KB fact or agent trait (``kind`` tells which) by its normalized text.

    The text is normalized again here (normalization is idempotent), so two spellings of
    one fact can never get two points even if a caller forgets to normalize.
    """
    return point_id(user_id, kind, normalize_fact(normalized_text))


def persona_id(user_id: str) -> str:
    """The single persona point of a user."""
    return point_id(user_id, PERSONA, "")
