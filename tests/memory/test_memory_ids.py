"""Deterministic point ids."""

from __future__ import annotations

import uuid

from memory.ids import NAMESPACE, fact_id, page_id, persona_id, point_id, segment_id


def test_point_id_is_uuid5_of_the_json_array_kind_user_key() -> None:
    expected = str(uuid.uuid5(NAMESPACE, '["page","u1","t1"]'))
    assert point_id("u1", "page", "t1") == expected
    assert uuid.UUID(expected).version == 5


def test_colons_in_user_and_turn_ids_cannot_collide() -> None:
    # ":" is legal in both ids; a separator-joined key gave these two one page.
    assert page_id("org", "bob:t1") != page_id("org:bob", "t1")
    assert segment_id("org", "bob:p1") != segment_id("org:bob", "p1")
    kind = "user_knowledge"
    assert fact_id("org", kind, "bob:likes tea") != fact_id("org:bob", kind, "likes tea")
    assert point_id("a", "page:b", "c") != point_id("a:page", "b", "c")


def test_namespace_never_changes() -> None:
    # Every stored point id depends on it: a change would orphan all existing memory.
    assert str(NAMESPACE) == "6f1c2a9e-4b7d-5e3a-9c1f-0d8e7b6a5c43"


def test_ids_are_stable_and_distinct() -> None:
    assert page_id("u1", "t1") == page_id("u1", "t1")
    ids = {
        page_id("u1", "t1"),
        page_id("u2", "t1"),
        page_id("u1", "t2"),
        segment_id("u1", "t1"),
        fact_id("u1", "user_knowledge", "t1"),
        fact_id("u1", "agent_traits", "t1"),
        persona_id("u1"),
        persona_id("u2"),
    }
    assert len(ids) == 8


def test_helpers_use_their_kind() -> None:
    assert page_id("u1", "t1") == point_id("u1", "page", "t1")
    assert segment_id("u1", "p1") == point_id("u1", "segment", "p1")
    assert persona_id("u1") == point_id("u1", "persona", "")


def test_fact_id_ignores_spelling_differences() -> None:
    a = fact_id("u1", "user_knowledge", "I like jazz.")
    b = fact_id("u1", "user_knowledge", "i like   JAZZ")
    assert a == b
    assert a == point_id("u1", "user_knowledge", "i like jazz")
