"""OfflineLLM: the MemoryOS tasks without a model, deterministic and fast.

It keeps the pipeline usable with no API key (demos, tests, replays) and is the fallback of the
OpenAI backend when a reply cannot be parsed even after a repair attempt. Every answer is
extractive or a documented heuristic: it never invents text that was not in the dialogue.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence

from adapters.llm.extractive import (
    KeywordMode,
    Line,
    dialogue_lines,
    sentences,
    speech,
    summarize,
    tokens,
)
from adapters.llm.offline_answers import I_DONT_KNOW, chat_answer
from adapters.llm.offline_text import FACT_MAX_CHARS, InlineText, TextWork, TopicRow
from adapters.llm.offline_traits import detect_traits, merge_traits
from adapters.ports import Answer, Embedder, PersonaFacts, PromptMemory, Topic
from memory.chain import ContinuityVerdict
from memory.scoring import cosine, jaccard
from schemas.records import Page, Trait

log = logging.getLogger(__name__)

# Continuity thresholds. Lexical only: a shared content word or two in a short exchange
# (Jaccard >= 0.1) is as good as a topic signal gets without vectors. With vectors the score is
# the mean of cosine and Jaccard; sentence-embedding cosine of same-topic turns sits around
# 0.4-0.6 and of unrelated turns below 0.2, so 0.2 splits them with the lexical term as a tiebreak.
LEXICAL_THRESHOLD = 0.1
COMBINED_THRESHOLD = 0.2
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")

_FIRST_PERSON_USER = re.compile(
    r"\bI\b|\bI'(?:m|ve|d|ll)\b|(?i:\b(?:my|mine|we|we're|we've|our)\b)"
)
_FIRST_PERSON_AGENT = re.compile(r"\bI\b|\bI'(?:m|ve|d|ll)\b|(?i:\b(?:my|we|our)\b)")
# Politeness is not knowledge: the paper's own example maps "I'm glad you find it interesting!"
# to None.
_PHATIC = re.compile(
    r"^(?:I'm|I am) (?:glad|sorry|happy|here)|^I (?:understand|hope|see|appreciate|agree)"
    r"|^I'd (?:be happy|love to help)"
    # what the user is about to do in this chat is not knowledge of them
    r"|^I'll (?:attach|send|check|wait|look into|get back to|call|text|email|upload)\b"
    r"|^I (?:just )?(?:sent|attached|uploaded) (?:you|it|the|a|an)\b",
    re.IGNORECASE,
)
# a statement opens with its subject: "I live in Lisbon, so ...", not "If I cancel, will ..."
_A_STATEMENT = re.compile(
    r"^(?:I|I'm|I've|I'd|We|We're|We've)\b|^(?:My|Our)\b.*\b(?:is|are|was|were|has|have)\b"
)
# A question may open with what the user states of themselves: "I live in Lisbon, so will a
# replacement take as long?" The clause before the first comma is kept when it is a statement.
_ASKING = re.compile(
    r"^(?:do|does|did|can|could|will|would|should|is|are|was|were|what|when|where|which|who"
    r"|why|how|may|shall|have|has|if|when|before|after|since|so|once|as|while|because)\b",
    re.IGNORECASE,
)


class OfflineLLM:
    backend = "offline"

    def __init__(
        self,
        embedder: Embedder | None = None,
        *,
        announce: bool = True,
        keyword_mode: KeywordMode = "yake",
        text: TextWork | None = None,
    ) -> None:
        """``embedder`` gives continuity vectors for pages that carry none; ``announce=False``
        is for the OpenAI backend's fallback copy, which is not "the backend in use";
        ``keyword_mode`` picks how topic keywords are extracted (``extractive.keywords``);
        ``text`` runs the keywords and summaries (``offline_text``): in this process unless
        given the text process, which keeps them off the event loop."""
        self._embedder = embedder
        self._keyword_mode: KeywordMode = keyword_mode
        self._text: TextWork = text or InlineText()
        if announce:
            log.warning("offline LLM backend in use: extractive heuristics, no model")

    async def continuity(self, previous: Page | None, current: Page) -> ContinuityVerdict:
        current_lines = dialogue_lines(current.text)
        if previous is None:
            return ContinuityVerdict(False, _nonempty(summarize(current_lines), current))
        continuous = await self._continues(previous, current)
        if continuous:
            history = [Line("", previous.chain.summary)] if previous.chain.summary else []
            summary = summarize([*history, *current_lines], limit=2)
        else:
            summary = summarize(current_lines)
        return ContinuityVerdict(continuous, _nonempty(summary, current))

    async def _continues(self, previous: Page, current: Page) -> bool:
        if not tokens(current.query):
            return True  # "Why?", "Tell me more": a query without content words follows on
        lexical = jaccard(tokens(previous.text), tokens(current.text))
        vectors = await self._vectors(previous, current)
        if vectors is None:
            return lexical >= LEXICAL_THRESHOLD
        return (cosine(*vectors) + lexical) / 2 >= COMBINED_THRESHOLD

    async def _vectors(
        self, previous: Page, current: Page
    ) -> tuple[list[float], list[float]] | None:
        if previous.vector is not None and current.vector is not None:
            return previous.vector, current.vector
        if self._embedder is None:
            return None
        left, right = await self._embedder.embed([previous.text, current.text])
        return left, right

    async def topics(self, dialogue: str) -> list[Topic]:
        return _topics(await self._text.run("topics", dialogue, self._keyword_mode))

    async def topics_many(self, dialogues: Sequence[str]) -> list[list[Topic]]:
        found = await self._text.run("topics_many", list(dialogues), self._keyword_mode)
        return [_topics(rows) for rows in found]

    async def topics_summary(self, dialogue: str, previous_summary: str) -> tuple[list[Topic], str]:
        rows, summary = await self._text.run(
            "topics_summary", dialogue, previous_summary, self._keyword_mode
        )
        return _topics(rows), str(summary)

    async def segment_summary(self, previous_summary: str, dialogue: str) -> str:
        return str(await self._text.run("segment_summary", previous_summary, dialogue))

    async def user_traits(self, known: Mapping[str, Trait], dialogue: str) -> dict[str, Trait]:
        said = speech(line for line in dialogue_lines(dialogue) if line.speaker in ("user", ""))
        return merge_traits(known, detect_traits(said))

    async def user_knowledge(self, dialogue: str) -> list[str]:
        return _first_person_facts(dialogue, ("user", ""), _FIRST_PERSON_USER)

    async def agent_traits(self, dialogue: str) -> list[str]:
        return _first_person_facts(dialogue, ("assistant",), _FIRST_PERSON_AGENT)

    async def persona(
        self,
        known: Mapping[str, Trait],
        dialogue: str,
        facts: Sequence[str] = (),
        summary: str = "",
    ) -> PersonaFacts:
        return PersonaFacts(
            await self.user_traits(known, dialogue),
            await self.user_knowledge(dialogue),
            await self.agent_traits(dialogue),
        )

    async def respond(self, system: str, user: str, memory: PromptMemory) -> Answer:
        """The memory sentence sharing most content words with the query: bare in the
        ``locomo`` style (an entity-style answer), a full reply sentence in ``chat``."""
        wanted = tokens(memory.query)
        best: Line | None = None
        best_overlap = 0
        for text in memory.texts:
            for line in dialogue_lines(text):
                if line.speaker == "time":
                    continue
                for sentence in sentences(line.text):
                    overlap = len(wanted & tokens(sentence))
                    # Questions are what we are answering, not answers.
                    if overlap > best_overlap and not sentence.endswith("?"):
                        best, best_overlap = Line(line.speaker, sentence), overlap
        if memory.style == "locomo":
            return Answer(text=best.text if best else I_DONT_KNOW)
        return Answer(text=chat_answer(memory.query, memory.texts, memory.profile, memory.facts))

    async def close(self) -> None:
        await self._text.close()


def _nonempty(summary: str, page: Page) -> str:
    return summary or page.text[:FACT_MAX_CHARS]


def _topics(rows: Sequence[TopicRow]) -> list[Topic]:
    return [
        Topic(theme=str(theme), keywords=list(found), content=str(content))
        for theme, found, content in rows
    ]


def _first_person_facts(
    dialogue: str, speakers: tuple[str, ...], first_person: re.Pattern[str]
) -> list[str]:
    """First-person statements by ``speakers``, dated with the page's time line if any."""
    lines = dialogue_lines(dialogue)
    if not any(line.speaker for line in lines):
        lines = [Line("user", line.text) for line in lines]  # unlabelled text: the user's
    facts: list[str] = []
    for index, line in enumerate(lines):
        if line.speaker not in speakers:
            continue
        date = _time_after(lines, index)
        for sentence in sentences(line.text):
            if sentence.endswith("?"):
                sentence = _stated_before_asking(sentence)
            if not sentence or _PHATIC.match(sentence):
                continue
            if first_person.search(sentence) and len(tokens(sentence)) >= 2:
                fact = sentence[:FACT_MAX_CHARS].rstrip(" .!")
                facts.append(f"{fact} (on {date})." if date else f"{fact}.")
    return list(dict.fromkeys(facts))


def _time_after(lines: Sequence[Line], index: int) -> str | None:
    """The date of the page a line belongs to: the first time line after it, before a new
    user turn (``dialogue_text`` writes User, Assistant, Time per page)."""
    for line in lines[index + 1 :]:
        if line.speaker == "time":
            iso_date = _ISO_DATE.match(line.text.strip())
            return iso_date.group(0) if iso_date else line.text.strip() or None
        if line.speaker == "user":
            return None
    return None


def _stated_before_asking(question: str) -> str:
    """The statement a question opens with ("I live in Lisbon, so will ...?"), or ""."""
    head, comma, _ = question.partition(",")
    head = head.strip()
    if not comma or _ASKING.match(head) or not _A_STATEMENT.match(head) or "wonder" in head:
        return ""
    return head
