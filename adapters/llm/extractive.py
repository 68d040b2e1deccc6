"""Model-free text tools for the offline LLM: tokens, sentences, centrality, keywords.

Everything here is deterministic: the same input gives the same output on every machine, so
the offline backend can stand in for a model in tests, demos and replays.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import yake

from memory.scoring import jaccard
from memory.text import STOPWORDS, tokenize

# Words of chat filler and speaker labels that retrieval keeps but a summary should not pick
# as content; the stop words themselves are retrieval's (memory.text), one list for both.
FILLER = frozenset(
    [
        "well",
        "really",
        "sure",
        "thanks",
        "thank",
        "please",
        "user",
        "assistant",
        "ai",
        "i'm",
        "i've",
    ]
)
IGNORED = STOPWORDS | FILLER

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_SPEAKER = re.compile(r"^\s*(user|assistant|ai|time)\s*:\s*", re.IGNORECASE)
MAX_SENTENCES = 200  # centrality is quadratic; longer inputs keep their first sentences
MAX_SENTENCE_CHARS = 240


def tokens(text: str) -> set[str]:
    """Content words: retrieval's tokenizer (memory.text), chat filler removed.

    The same tokenizer as retrieval's keywords, so "dog's name" meets "a dog named Miso" here
    as it does there.
    """
    return {word for word in tokenize(text) if word not in FILLER}


@dataclass(frozen=True)
class Line:
    """One turn of a dialogue: who said it and what."""

    speaker: str  # "user", "assistant", "time" or "" when unlabelled
    text: str


def dialogue_lines(dialogue: str) -> list[Line]:
    lines = []
    for raw in dialogue.splitlines():
        if not raw.strip():
            continue
        label = _SPEAKER.match(raw)
        speaker = label.group(1).lower() if label else ""
        lines.append(Line("assistant" if speaker == "ai" else speaker, _SPEAKER.sub("", raw)))
    return lines


def sentences(text: str) -> list[str]:
    parts = (part.strip() for part in _SENTENCE_END.split(text))
    return [part[:MAX_SENTENCE_CHARS] for part in parts if part]


def speech(lines: Iterable[Line]) -> str:
    """The spoken text of lines, without labels or timestamps (keywords must not be 'User')."""
    return "\n".join(line.text for line in lines if line.speaker != "time")


def central_sentences(candidates: Sequence[str], limit: int) -> list[str]:
    """The ``limit`` sentences most similar on average to the others, in original order.

    Ties keep the earlier sentence, so the output is stable.
    """
    pool = list(dict.fromkeys(candidates))[:MAX_SENTENCES]
    if len(pool) <= limit:
        return pool
    bags = [tokens(sentence) for sentence in pool]
    scores = [
        sum(jaccard(bag, other) for j, other in enumerate(bags) if j != i) + 0.01 * bool(bag)
        for i, bag in enumerate(bags)
    ]
    chosen = sorted(range(len(pool)), key=lambda i: (-scores[i], i))[:limit]
    return [pool[i] for i in sorted(chosen)]


def summarize(lines: Sequence[Line], limit: int = 2) -> str:
    """An extractive summary: the most central sentences, each tagged with its speaker."""
    candidates = [
        f"{line.speaker.capitalize()}: {sentence}" if line.speaker else sentence
        for line in lines
        if line.speaker != "time"
        for sentence in sentences(line.text)
    ]
    return " ".join(central_sentences(candidates, limit))


@lru_cache(maxsize=1)
def _extractor() -> yake.KeywordExtractor:
    # Bigrams and five keywords: enough to match segments, and cheap per dialogue.
    return yake.KeywordExtractor(lan="en", n=2, top=5, dedup_lim=0.9)


_CHITCHAT_TEXT = """
    hey hi hello wow yeah yep great awesome cool thanks thank good glad love amazing sound
    really totally agree nice happy lot sweet fun super wonderful incredible gonna wanna
    right definitely absolutely guess feel felt think know mean made make got get way thing
    pic photo image picture"""
CHITCHAT = frozenset(tokenize(_CHITCHAT_TEXT))  # not topic words: what a keyword must go past
_DATE = re.compile(
    r"\b(?:(?:19|20)\d\d|january|february|march|april|may|june|july|august|september|"
    r"october|november|december|monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"yesterday|weekend|tomorrow)\b",
    re.IGNORECASE,
)
KeywordMode = Literal["yake", "content"]


def keywords(text: str, limit: int = 5, mode: KeywordMode = "yake") -> list[str]:
    """YAKE keywords; the most frequent content words when YAKE finds none.

    ``content``: YAKE's phrases without chit-chat, then the dates said (``content_keywords``).
    """
    if mode == "content" and text:
        found = content_keywords(text, limit)
        if found:
            return found
    found = [str(phrase) for phrase, _ in _extractor().extract_keywords(text)] if text else []
    found = [phrase for phrase in found if phrase.lower() not in IGNORED]
    if not found:
        counts: dict[str, int] = {}
        for word in _WORD.findall(text.lower()):
            if word not in IGNORED:
                counts[word] = counts.get(word, 0) + 1
        found = sorted(counts, key=lambda word: (-counts[word], word))
    return list(dict.fromkeys(found))[:limit]


@lru_cache(maxsize=1)
def _wide_extractor() -> yake.KeywordExtractor:
    # three times the phrases: room for the chit-chat that is dropped
    return yake.KeywordExtractor(lan="en", n=2, top=15, dedup_lim=0.9)


def content_keywords(text: str, limit: int = 5, dates: int = 2) -> list[str]:
    """The first ``limit`` YAKE phrases that hold a word beyond chit-chat (greetings, praise,
    "photo": ``CHITCHAT``), then up to ``dates`` years, months, weekdays or relative days said.

    Chat pages are full of "Hey Mel" and "Wow, awesome"; as segment keywords those join
    unrelated pages and match every query, while a topic's nouns and dates tell segments apart.
    """
    phrases = [str(phrase) for phrase, _ in _wide_extractor().extract_keywords(text)]
    content = [p for p in phrases if set(tokenize(p)) - CHITCHAT - STOPWORDS]
    said = list(dict.fromkeys(match.group(0).lower() for match in _DATE.finditer(text)))
    return list(dict.fromkeys([*content[:limit], *said[:dates]]))
