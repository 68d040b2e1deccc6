"""The offline backend's answers to a customer: plain sentences from the retrieved memory.

No model: the answer is the remembered sentence that best fits the question, told back in the
second person, or the profile and facts when the question is about the customer as a whole.
What a person would not call a fact (a greeting, "different question:", a question) is never
told back, and what the customer said wins over what the assistant said.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from adapters.llm.extractive import Line, dialogue_lines, sentences, tokens

NOTHING_REMEMBERED = "I'm sorry, I don't have anything about that from our conversations yet."
I_DONT_KNOW = "I don't know."
MIN_CONTENT_WORDS = 2  # fewer after the opener is stripped: chit-chat, not a fact
_WHO_I_AM = re.compile(r"^(?:I'm|I am|my name is|call me)\s+[A-Z]", re.IGNORECASE)

# Second person for a reply that quotes what the user said ("my dog" -> "your dog").
_YOU = {
    "i": "you",
    "me": "you",
    "my": "your",
    "mine": "yours",
    "myself": "yourself",
    "i'm": "you're",
    "i've": "you've",
    "i'd": "you'd",
    "i'll": "you'll",
    "am": "are",
    "was": "were",
    "we": "you",
    "us": "you",
    "our": "your",
    "ours": "yours",
}
_PRONOUN = re.compile(
    r"\b(?:" + "|".join(sorted(map(re.escape, _YOU), key=len, reverse=True)) + r")\b", re.IGNORECASE
)
_OPENER = re.compile(
    r"^(?:(?:hi|hello|hey|thanks|thank you|ok|okay|so|well|yes|no|sure|great|right|"
    r"good point|also|oh|anyway|actually|by the way|as i said|as i mentioned|like i said)"
    r"\b[\s,!.:-]*)+",
    re.IGNORECASE,
)
# "Different question: ...": a label of the conversation, not "My new address: 5 Elm Street"
_LABEL = re.compile(
    r"^(?:(?:a |one )?(?:different|another|other|quick|last|new|side) (?:question|thing|topic)"
    r"|one (?:more )?thing|also|btw|ps|update|question|note):\s+",
    re.IGNORECASE,
)
_ABOUT_ME = re.compile(
    r"\b(?:what do you (?:know|remember) about me|who am i|tell me about (?:me|myself)|"
    r"what have i told you)\b",
    re.IGNORECASE,
)
_WHERE_I_LIVE = re.compile(
    r"\b(?:where do i live|which (?:city|town|country) do i live|where am i (?:based|from)|"
    r"what is my (?:city|town|home town|address))\b",
    re.IGNORECASE,
)
_I_LIVE = re.compile(
    r"\b(?:I live in|I'm in|I am in|I'm from|I am from|I moved to|we moved to|I'm based in|"
    r"I am based in|we live in)\s+[A-Z]"
)


def chat_answer(
    query: str,
    texts: Sequence[str],
    profile: Mapping[str, Any] | None = None,
    facts: Sequence[str] = (),
) -> str:
    """A full sentence to the customer, or ``NOTHING_REMEMBERED``."""
    if _ABOUT_ME.search(query):
        return _about_me(profile or {}, facts)
    said = [line for text in texts for line in dialogue_lines(text) if line.speaker != "time"]
    if _WHERE_I_LIVE.search(query):
        for line in said:
            if line.speaker in ("user", "") and _I_LIVE.search(line.text):
                return _told(next(s for s in sentences(line.text) if _I_LIVE.search(s)))
    best = best_sentence(query, said)
    if best is None:
        return NOTHING_REMEMBERED
    if best.speaker == "assistant":
        return f"As I mentioned before: {best.text.rstrip(' .!')}."
    return _told(best.text)


def best_sentence(query: str, said: Sequence[Line]) -> Line | None:
    """The remembered statement sharing most content words with the query; on a tie, the
    customer's over the assistant's, then the earliest. Questions and chit-chat never win."""
    wanted = tokens(query)
    best: Line | None = None
    best_rank = (0, 0)
    for line in said:
        for sentence in sentences(line.text):
            if sentence.endswith("?"):
                continue  # questions are what we are answering, not answers
            statement = plain(sentence)
            content = tokens(statement)
            if len(content) < MIN_CONTENT_WORDS and not _WHO_I_AM.match(statement):
                continue  # "It's Alice again.": chit-chat; "I'm Sam.": who they are
            rank = (len(wanted & content), 0 if line.speaker == "assistant" else 1)
            if rank[0] > 0 and rank > best_rank:
                best, best_rank = Line(line.speaker, statement), rank
    return best


def plain(sentence: str) -> str:
    """The sentence without its opener ("Hi, ", "Different question: ")."""
    stripped = _LABEL.sub("", _OPENER.sub("", sentence.strip()))
    stripped = _OPENER.sub("", stripped)
    return stripped[:1].upper() + stripped[1:] if stripped else stripped


def _told(sentence: str) -> str:
    text = plain(sentence).rstrip(" .!")
    told = _PRONOUN.sub(lambda word: _YOU[word.group(0).lower()], text)
    return f"You told me that {told[:1].lower() + told[1:]}."


def _about_me(profile: Mapping[str, Any], facts: Sequence[str]) -> str:
    parts = []
    if profile:
        shown = ", ".join(f"{key}: {value}" for key, value in list(profile.items())[:8])
        parts.append(f"Here is what I know about you: {shown}.")
    if facts:
        told = "; ".join(
            _PRONOUN.sub(lambda w: _YOU[w.group(0).lower()], plain(f).rstrip(" .!"))
            for f in facts[:5]
        )
        parts.append(f"You told me: {told}.")
    return " ".join(parts) or NOTHING_REMEMBERED
