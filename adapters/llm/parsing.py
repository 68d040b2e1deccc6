"""Reading model replies: tolerant of the usual wrappers, strict about content.

Models wrap answers in ``<think>`` blocks, markdown fences, bold markers and polite prose. Each
parser peels those off and raises ``LLMUnparseable`` when nothing usable is left, so a bad reply
is retried or replaced, never stored as memory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from adapters.llm.traits import canonical_dimension
from adapters.ports import PersonaFacts, Topic
from memory.chain import ContinuityVerdict
from schemas.errors import LLMUnparseable
from schemas.records import Trait

MAX_TOPICS = 2
_MAX_JSON_STARTS = 64  # bounds the quadratic scan on long prose replies

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z]*[ \t]*\n?(.*?)```", re.DOTALL)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+(.*\S)\s*$")
_NONE = re.compile(r"""^[\s"'`*(\[]*none\b[\s"'`*.)\]!]*(?:found)?[\s.]*$""", re.IGNORECASE)
_TRAIT = re.compile(
    r"^[\s\-*\u2022\d.)#]*\**\s*(?P<dim>[A-Za-z][A-Za-z \-()&/']*?)\s*\**\s*:\s*\**\s*"
    r"(?P<level>high|medium|low)\b\**(?:\s*\((?:high|medium|low)[^)]*\))?"
    r"(?P<rest>.*)$",
    re.IGNORECASE,
)
_REASON = re.compile(r"reason\s*:\s*(.*?)\s*\]?\s*$", re.IGNORECASE)
_NO_TRAITS = re.compile(
    r"\bnone\b|\bno (?:preference )?dimensions?\b|cannot be (?:extracted|reflected)",
    re.IGNORECASE,
)
_LABEL = re.compile(
    r"^\s*(?:\**\s*)?(?:updated\s+)?(?:meta[- ]?)?(?:summary|answer|output)\s*\**\s*:\s*",
    re.IGNORECASE,
)
_VERDICT = re.compile(r"^[\s*`\"'#]*(true|false)\b[\s*`\"'.:,-]*(.*)$", re.IGNORECASE)
_YES_NO = re.compile(r"^[\s*`\"']*(yes|no)[\s*`\"'.!]*$", re.IGNORECASE)
_PLACEHOLDERS = ("[Fact", "(Or ")
_LEVELS: dict[str, Literal["High", "Medium", "Low"]] = {
    "high": "High",
    "medium": "Medium",
    "low": "Low",
}
_VERDICT_LINES = 3  # a verdict further down than this is prose, not an answer


def strip_think(text: str) -> str:
    """Drop reasoning blocks; a lone ``</think>`` means everything before it was reasoning."""
    text = _THINK.sub("", text)
    if "</think>" in text.lower():
        text = text[text.lower().rfind("</think>") + len("</think>") :]
    return text.strip()


def _clean(text: str) -> str:
    text = strip_think(text)
    fenced = _FENCE.search(text)
    if fenced:
        # In a structured reply the fenced block is the answer; the prose around it is filler.
        text = fenced.group(1)
    return text.strip()


def _balanced_from(text: str, start: int) -> str | None:
    """The balanced ``[...]``/``{...}`` span opening at ``start``, string-literal aware."""
    stack: list[str] = []
    in_string = escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            stack.append("]" if char == "[" else "}")
        elif char in "]}":
            if char != stack.pop():
                return None
            if not stack:
                return text[start : index + 1]
    return None


def _balanced_spans(text: str) -> Iterator[str]:
    """Balanced spans from each opening bracket in turn, so a stray "[" in prose is skipped."""
    openings = [index for index, char in enumerate(text) if char in "[{"]
    for start in openings[:_MAX_JSON_STARTS]:
        span = _balanced_from(text, start)
        if span is not None:
            yield span


def find_json(text: str) -> Any:
    """The JSON value in a reply: fenced, bare, or the first balanced array/object in prose."""
    cleaned = strip_think(text)
    candidates = [match.group(1) for match in _FENCE.finditer(cleaned)]
    candidates.append(cleaned)
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            pass
        for span in _balanced_spans(candidate):
            try:
                return json.loads(span)
            except ValueError:
                continue
    raise LLMUnparseable(f"no JSON array or object in reply: {_preview(text)}")


def _keywords(value: object) -> list[str]:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list):
        return []
    return [str(item).strip() for item in value if str(item).strip()]


def parse_topics(text: str) -> list[Topic]:
    return _topics_of(find_json(text), text)


def parse_topics_batch(text: str, count: int) -> list[list[Topic]]:
    """``count`` dialogues' topics, from ``{"1": [...], ...}`` or an array of arrays. A reply
    that misses a dialogue is unparseable: guessing which one is missing could give one
    page another's topics."""
    data = find_json(text)
    if isinstance(data, dict):
        wrapped = next((v for v in data.values() if isinstance(v, dict)), None)
        data = wrapped if wrapped is not None and str(1) not in data else data
        try:
            data = [data[str(index)] for index in range(1, count + 1)]
        except KeyError as exc:
            raise LLMUnparseable(f"topics of dialogue {exc} missing: {_preview(text)}") from exc
    if not isinstance(data, list) or len(data) != count:
        raise LLMUnparseable(f"not {count} dialogues' topics: {_preview(text)}")
    return [_topics_of(item, text) for item in data]


def parse_topics_summary(text: str) -> tuple[list[Topic], str]:
    """``{"topics": [...], "summary": "..."}``: both parts, or unparseable."""
    data = find_json(text)
    if not isinstance(data, dict) or not isinstance(data.get("summary"), str):
        raise LLMUnparseable(f"no topics and summary object: {_preview(text)}")
    return _topics_of(data.get("topics"), text), _nonempty(data["summary"])


def _topics_of(data: Any, text: str) -> list[Topic]:
    if isinstance(data, dict):
        # Some models wrap the array: {"topics": [...]}; others return a single object.
        nested = next((v for v in data.values() if isinstance(v, list)), None)
        data = nested if nested is not None and "theme" not in data else [data]
    if not isinstance(data, list):
        raise LLMUnparseable(f"topics reply is not a JSON array: {_preview(text)}")
    topics: list[Topic] = []
    for item in data:
        if not isinstance(item, dict):
            continue
        theme = str(item.get("theme") or item.get("topic") or "").strip()
        content = str(item.get("content") or item.get("summary") or "").strip()
        keywords = _keywords(item.get("keywords"))
        if content and (theme or keywords):
            topics.append(Topic(theme=theme or keywords[0], keywords=keywords, content=content))
    if not topics:
        raise LLMUnparseable(f"no topic with a theme and content: {_preview(text)}")
    return topics[:MAX_TOPICS]


def parse_continuity(text: str) -> ContinuityVerdict:
    """``true|false`` on the first line and the summary after it (or on the same line)."""
    lines = [line.strip() for line in _clean(text).splitlines() if line.strip()]
    for index, line in enumerate(lines[:_VERDICT_LINES]):
        line = re.sub(r"^(?:continuity(?: status)?|continuous)\s*[:?]\s*", "", line, flags=re.I)
        verdict = _VERDICT.match(line) or _YES_NO.match(line)
        if verdict is None:
            continue
        rest = [verdict.group(2) if verdict.re is _VERDICT else "", *lines[index + 1 :]]
        summary = " ".join(_LABEL.sub("", part).strip() for part in rest if part.strip())
        if not summary:
            raise LLMUnparseable(f"continuity reply has no summary: {_preview(text)}")
        return ContinuityVerdict(
            continuous=verdict.group(1).lower() in ("true", "yes"), summary=summary
        )
    raise LLMUnparseable(f"continuity reply has no true/false line: {_preview(text)}")


def parse_traits(text: str) -> dict[str, Trait]:
    """``Dimension: Level [Reason: ...]`` lines; dimensions outside the appendix are dropped."""
    cleaned = _clean(text)
    traits: dict[str, Trait] = {}
    for line in cleaned.splitlines():
        match = _TRAIT.match(line)
        if match is None:
            continue
        name = canonical_dimension(match.group("dim"))
        if name is None:
            continue
        reason_match = _REASON.search(match.group("rest"))
        reason = reason_match.group(1) if reason_match else match.group("rest")
        traits[name] = Trait(
            level=_LEVELS[match.group("level").lower()],
            reason=reason.strip(" []-:*"),
        )
    if traits or (cleaned and _NO_TRAITS.search(cleaned)):
        return traits
    raise LLMUnparseable(f"no 'Dimension: Level' line in reply: {_preview(text)}")


def parse_facts(text: str) -> list[str]:
    """``- fact`` lines; "None" (alone or as the only bullet) means no facts."""
    cleaned = _clean(text)
    facts: list[str] = []
    saw_none = False
    for line in cleaned.splitlines():
        bullet = _BULLET.match(line)
        body = bullet.group(1).strip() if bullet else line.strip()
        if _NONE.match(body):
            saw_none = True
        elif bullet and not body.startswith(_PLACEHOLDERS):
            facts.append(body.strip("*` "))
    if facts or saw_none:
        return list(dict.fromkeys(facts))
    raise LLMUnparseable(f"no '- fact' lines and no 'None' in reply: {_preview(text)}")


_SECTION = re.compile(
    r"^[\s#*]*\[?\s*(user traits|user knowledge|assistant knowledge)\s*\]?[\s*:]*$",
    re.IGNORECASE | re.MULTILINE,
)


def parse_persona(text: str, known: Mapping[str, Trait], known_facts: int = 0) -> PersonaFacts:
    """The three headed sections of the combined persona reply; every one must be there and
    readable on its own (a missing section is not read as "None"). A user fact may end with
    "(updates N, M)": numbers of the ``known_facts`` it updates (others are ignored)."""
    cleaned = _clean(text)
    headers = list(_SECTION.finditer(cleaned))
    bodies: dict[str, str] = {}
    for header, after in zip(headers, [*headers[1:], None], strict=True):
        end = after.start() if after is not None else len(cleaned)
        bodies.setdefault(header.group(1).lower(), cleaned[header.end() : end])
    missing = [name for name in ("user traits", "user knowledge", "assistant knowledge")
               if name not in bodies]  # fmt: skip
    if missing:
        raise LLMUnparseable(f"persona reply lacks {', '.join(missing)}: {_preview(text)}")
    user_facts, updates = split_updates(parse_facts(bodies["user knowledge"]), known_facts)
    return PersonaFacts(
        traits={**known, **parse_traits(bodies["user traits"])},
        user_knowledge=user_facts,
        agent_traits=parse_facts(bodies["assistant knowledge"]),
        user_updates=updates,
    )


_UPDATES = re.compile(r"\s*\((?:updates?|replaces?|contradicts?)\s+([\d,\s and]+)\)\s*\.?$", re.I)


def split_updates(facts: list[str], known_facts: int) -> tuple[list[str], list[tuple[int, ...]]]:
    """Each fact without its "(updates N)" tail, and the known facts' numbers it named."""
    texts: list[str] = []
    updates: list[tuple[int, ...]] = []
    for fact in facts:
        named: tuple[int, ...] = ()
        if match := _UPDATES.search(fact):
            numbers = (int(n) for n in re.findall(r"\d+", match.group(1)))
            named = tuple(n for n in numbers if 1 <= n <= known_facts)
            fact = fact[: match.start()].rstrip()
        if fact:
            texts.append(fact)
            updates.append(named)
    return texts, updates


def parse_summary(text: str) -> str:
    """A summary reply without reasoning, fences and labels; empty is unparseable."""
    return _nonempty(_LABEL.sub("", _clean(text)))


def parse_answer(text: str) -> str:
    """A response without reasoning; fences stay, since an answer may hold a code block."""
    return _nonempty(re.sub(r"^\s*answer\s*:\s*", "", strip_think(text), flags=re.IGNORECASE))


def _nonempty(text: str) -> str:
    text = text.strip()
    if not text:
        raise LLMUnparseable("empty reply")
    return text


def _preview(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "...")
