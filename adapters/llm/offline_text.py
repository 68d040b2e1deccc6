"""The offline LLM's text work that costs: topic keywords (YAKE) and extractive summaries.

Pure functions of plain values (strings in, lists and strings out), so they give the same
answer in this process or in the text process (``text_process``), which runs them off the
event loop. ``InlineText`` runs them here: the OpenAI backend's fallback copy and unit tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from adapters.llm.extractive import (
    KeywordMode,
    Line,
    dialogue_lines,
    keywords,
    speech,
    summarize,
    tokens,
)
from memory.scoring import jaccard

# A second theme is split off only where the two halves share (almost) no content words.
TOPIC_SPLIT_MAX_JACCARD = 0.05
FACT_MAX_CHARS = 200

TopicRow = tuple[str, list[str], str]  # theme, keywords, content


def topics(dialogue: str, mode: KeywordMode) -> list[TopicRow]:
    lines = [line for line in dialogue_lines(dialogue) if line.speaker != "time"]
    if not speech(lines).strip():
        return []
    return [_topic(part, mode) for part in _split_themes(lines)]


def topics_many(dialogues: Sequence[str], mode: KeywordMode) -> list[list[TopicRow]]:
    return [topics(dialogue, mode) for dialogue in dialogues]


def segment_summary(previous_summary: str, dialogue: str) -> str:
    history = [Line("", previous_summary)] if previous_summary.strip() else []
    summary = summarize([*history, *dialogue_lines(dialogue)], limit=3)
    return summary or previous_summary.strip() or dialogue.strip()[:FACT_MAX_CHARS]


def topics_summary(
    dialogue: str, previous_summary: str, mode: KeywordMode
) -> tuple[list[TopicRow], str]:
    return topics(dialogue, mode), segment_summary(previous_summary, dialogue)


OPS: dict[str, Callable[..., Any]] = {
    "topics": topics,
    "topics_many": topics_many,
    "segment_summary": segment_summary,
    "topics_summary": topics_summary,
}


class TextWork(Protocol):
    """Runs one of ``OPS`` by name."""

    async def run(self, op: str, *args: Any) -> Any: ...

    async def close(self) -> None: ...


class InlineText:
    async def run(self, op: str, *args: Any) -> Any:
        return OPS[op](*args)

    async def close(self) -> None:
        return None


def _split_themes(lines: Sequence[Line]) -> list[Sequence[Line]]:
    """One theme, or two when the dialogue has a point where its halves share no words.

    Conversations change topic in sequence, so the cut is searched along the dialogue instead
    of clustering; each half must keep at least two lines to be a theme of its own.
    """
    best_cut, best_overlap = 0, TOPIC_SPLIT_MAX_JACCARD
    for cut in range(2, len(lines) - 1):
        overlap = jaccard(tokens(speech(lines[:cut])), tokens(speech(lines[cut:])))
        if overlap < best_overlap:
            best_cut, best_overlap = cut, overlap
    if best_cut == 0:
        return [lines]
    return [lines[:best_cut], lines[best_cut:]]


def _topic(lines: Sequence[Line], mode: KeywordMode) -> TopicRow:
    found = keywords(speech(lines), mode=mode) or ["dialogue"]
    content = summarize(lines) or speech(lines)[:FACT_MAX_CHARS]
    return found[0][:1].upper() + found[0][1:], found, content
