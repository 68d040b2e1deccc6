"""How a segment absorbs a page: its keywords and its embedding (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from memory.text import normalize_fact
from schemas.records import Page, Segment

SEGMENT_KEYWORDS = 24  # the newest keywords a segment keeps; Jaccard loses meaning on huge sets


def merge_keywords(
    old: Sequence[str], new: Sequence[str], limit: int = SEGMENT_KEYWORDS
) -> list[str]:
    """Union of both keyword lists without repeats, newest kept when over ``limit``."""
    merged: dict[str, str] = {}
    for keyword in [*old, *new]:
        key = normalize_fact(keyword)
        if key:
            merged.pop(key, None)
            merged[key] = keyword.strip()
    return list(merged.values())[-limit:]


def centroid_update(old: Sequence[float], size: int, new: Sequence[float]) -> list[float]:
    """The unit-length mean of ``size`` page vectors (``old``) and one more (``new``).

    A segment's vector is the centroid of its pages, so e_segment stays comparable with
    page and query embeddings without an embedding call per merge.
    """
    if size <= 0 or not old:
        total = list(new)
    else:
        total = [a * size + b for a, b in zip(old, new, strict=True)]
    norm = math.sqrt(sum(x * x for x in total))
    return [x / norm for x in total] if norm > 0 else list(total)


def new_segment(
    segment_id: str, page: Page, summary: str, keywords: Sequence[str], now: float
) -> Segment:
    """A segment opened by ``page`` (named after it, so a replay reopens the same one)."""
    return Segment(
        segment_id=segment_id,
        user_id=page.user_id,
        summary=summary or page.text,
        keywords=list(keywords),
        page_ids=[page.page_id],
        last_access=now,
        created_at=now,
    )


def merged_segment(segment: Segment, page: Page, summary: str, keywords: Sequence[str]) -> Segment:
    """``segment`` with ``page`` joined: the new summary, keywords merged, the page listed once."""
    page_ids = (
        segment.page_ids if page.page_id in segment.page_ids else [*segment.page_ids, page.page_id]
    )
    return segment.model_copy(
        update={
            "summary": summary,
            "keywords": merge_keywords(segment.keywords, keywords),
            "page_ids": page_ids,
        }
    )
