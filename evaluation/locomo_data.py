"""LoCoMo parsing and scoring: turns from sessions, questions with evidence, recall, F1, BLEU-1.

No pipeline here: ``evaluation.locomo`` runs these against the real one.
The data format is described in the benchmark's repository (snap-research/LoCoMo); the file
itself is read in place and never copied into the project.
"""

from __future__ import annotations

import json
import math
import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory.text import stem
from schemas.errors import InvalidEvent
from schemas.turn import TurnEvent

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
ADVERSARIAL = 5
# "D8:6", and the malformed forms found in the data: "D:11:26" and "D8:6; D9:17"
_DIA_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
_SESSION_KEY = re.compile(r"session_(\d+)")
_DATE_TIME = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$",
    re.IGNORECASE,
)
# Month names by hand rather than strptime's %B: strptime follows the process locale.
_MONTH_NAMES = ["january", "february", "march", "april", "may", "june", "july"]
_MONTH_NAMES += ["august", "september", "october", "november", "december"]
_MONTHS = {name: n for n, name in enumerate(_MONTH_NAMES, start=1)}
_MONTHS |= {name[:3]: n for name, n in list(_MONTHS.items())} | {"sept": 9}
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._:@-]+")
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


@dataclass(frozen=True)
class Question:
    index: int  # position in the sample's ``qa`` list
    category: int
    text: str
    answer: str | None  # None for adversarial questions (they carry adversarial_answer)
    evidence: tuple[str, ...]  # sanitised dia_ids, in order, without repeats


@dataclass
class Sample:
    sample_id: str
    user_id: str
    sessions: list[list[TurnEvent]]
    questions: list[Question]

    @property
    def turns(self) -> list[TurnEvent]:
        return [turn for session in self.sessions for turn in session]


def load_samples(path: Path, wanted: Sequence[str] | None = None) -> list[Sample]:
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InvalidEvent(f"cannot read LoCoMo data {path}: {exc}", field="data") from exc
    if not isinstance(raw, list):
        raise InvalidEvent(f"{path}: expected a JSON list of samples", field="data")
    try:
        by_id = {str(sample["sample_id"]): sample for sample in raw}
    except (KeyError, TypeError) as exc:
        raise InvalidEvent(f"{path}: a sample without sample_id", field="sample_id") from exc
    missing = [sample_id for sample_id in wanted or [] if sample_id not in by_id]
    if missing:
        raise InvalidEvent(f"{path} has no sample {', '.join(missing)}", field="samples")
    chosen = [by_id[sample_id] for sample_id in wanted] if wanted else raw
    return [_sample(path, sample) for sample in chosen]


def _sample(path: Path, sample: Mapping[str, Any]) -> Sample:
    sample_id = str(sample["sample_id"])
    try:
        return Sample(
            sample_id=sample_id,
            user_id=user_id_of(sample_id),
            sessions=sample_sessions(sample),
            questions=questions_of(sample),
        )
    except (KeyError, TypeError, ValueError) as exc:  # a field missing or of the wrong type
        raise InvalidEvent(f"{path}: sample {sample_id} is malformed: {exc!r}") from exc


# --- identifiers and dates ---


def safe_id(raw: str) -> str:
    """``raw`` made into a valid TurnEvent identifier: unsafe runs become one dash."""
    cleaned = _ID_UNSAFE.sub("-", raw.strip()).strip("-")
    if not cleaned:
        raise InvalidEvent(f"cannot make an identifier of {raw!r}", field="sample_id")
    return cleaned[:100]


def user_id_of(sample_id: str) -> str:
    return f"locomo-{safe_id(sample_id)}"


def parse_session_time(text: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" as an aware UTC datetime (the data has no zone)."""
    match = _DATE_TIME.match(text)
    month = _MONTHS.get(match.group(5).lower()) if match else None
    if match is None or month is None or not 1 <= int(match.group(1)) <= 12:
        raise InvalidEvent(f"not a LoCoMo session time: {text!r}", field="session_date_time")
    hour, minute = int(match.group(1)) % 12, int(match.group(2))
    if match.group(3).lower() == "p":
        hour += 12
    day, year = int(match.group(4)), int(match.group(6))
    try:
        return datetime(year, month, day, hour, minute, tzinfo=UTC)
    except ValueError as exc:  # 30 February, minute 75
        raise InvalidEvent(f"not a date: {text!r} ({exc})", field="session_date_time") from exc


# --- turns ---


def utterance_text(utterance: Mapping[str, Any]) -> str:
    """What was said, with a shared image's caption appended (the caption is all we have of it)."""
    text = str(utterance.get("text", "")).strip()
    caption = str(utterance.get("blip_caption") or "").strip()
    return f"{text} [image: {caption}]" if caption else text


def sessions_of(conversation: Mapping[str, Any]) -> list[tuple[int, list[dict[str, Any]]]]:
    """(session number, utterances) in session order; date keys without a session are skipped."""
    found = []
    for key, value in conversation.items():
        match = _SESSION_KEY.fullmatch(key)
        if match and isinstance(value, list):
            found.append((int(match.group(1)), value))
    return sorted(found, key=lambda pair: pair[0])


def session_turns(
    sample_id: str,
    conversation: Mapping[str, Any],
    number: int,
    utterances: Sequence[Mapping[str, Any]],
) -> list[TurnEvent]:
    """One session as turns: speaker_a's utterance is the query, speaker_b's reply the response.

    A speaker_b utterance with no speaker_a utterance before it (a session opening with
    speaker_b) is a turn with an empty query; a speaker_a utterance with no reply (the session
    ends on speaker_a) a turn with an empty response. A turn is stamped with the session's
    time plus the index of its first utterance in seconds, so the order survives sorting.
    """
    speaker_a, speaker_b = conversation["speaker_a"], conversation["speaker_b"]
    date_key = f"session_{number}_date_time"
    if date_key not in conversation:
        raise InvalidEvent(f"{sample_id}: session {number} has no {date_key}", field=date_key)
    start = parse_session_time(str(conversation[date_key]))
    sample, user_id = safe_id(sample_id), user_id_of(sample_id)
    turns: list[TurnEvent] = []
    index = 0
    while index < len(utterances):
        first = utterances[index]
        speaker = first.get("speaker")
        if speaker not in (speaker_a, speaker_b):
            raise InvalidEvent(
                f"{sample_id}: {first.get('dia_id')} is said by {speaker!r}, "
                f"neither {speaker_a!r} nor {speaker_b!r}",
                field="speaker",
            )
        if speaker == speaker_b:
            group, query, response = [first], "", utterance_text(first)
        else:
            following = utterances[index + 1] if index + 1 < len(utterances) else None
            replied = following is not None and following.get("speaker") == speaker_b
            group = [first, following] if replied and following is not None else [first]
            query = utterance_text(first)
            response = utterance_text(group[1]) if len(group) == 2 else ""
        dia_ids = [str(u["dia_id"]) for u in group]
        turns.append(
            TurnEvent(
                user_id=user_id,
                turn_id=f"{sample}-{safe_id(dia_ids[0])}",
                query=query,
                response=response,
                timestamp=start + timedelta(seconds=index),
                meta={"dia_ids": dia_ids, "session": number},
            )
        )
        index += len(group)
    return turns


def sample_sessions(sample: Mapping[str, Any]) -> list[list[TurnEvent]]:
    """Every session of a sample as its turns, in session order."""
    conversation = sample["conversation"]
    sample_id = str(sample["sample_id"])
    return [
        session_turns(sample_id, conversation, number, utterances)
        for number, utterances in sessions_of(conversation)
    ]


def turn_text(turn: TurnEvent) -> str:
    """The text the chain agent embeds for a page, so the dense baseline sees the same text."""
    return f"{turn.query}\n{turn.response}"


# --- questions and evidence ---


def sanitise_evidence(items: Sequence[object]) -> tuple[str, ...]:
    """Evidence dia_ids as "D<session>:<index>", repairing "D:11:26" and "D8:6; D9:17"."""
    found = [
        f"D{int(session)}:{int(index)}"
        for item in items
        for session, index in _DIA_ID.findall(str(item))
    ]
    return tuple(dict.fromkeys(found))


def questions_of(sample: Mapping[str, Any]) -> list[Question]:
    questions = []
    for index, qa in enumerate(sample.get("qa", [])):
        category = int(qa["category"])
        answer = qa.get("answer")
        questions.append(
            Question(
                index=index,
                category=category,
                text=str(qa["question"]),
                # adversarial questions have no answer (only adversarial_answer); some answers
                # are numbers (years) in the file
                answer=None if category == ADVERSARIAL or answer is None else str(answer),
                evidence=sanitise_evidence(qa.get("evidence", [])),
            )
        )
    return questions


# --- retrieval scoring ---


def recall_at(evidence: Sequence[str], pages: Sequence[Sequence[str]], n: int | None) -> float:
    """Share of ``evidence`` covered by the first ``n`` pages (all of them when n is None)."""
    if not evidence:
        raise ValueError("recall is undefined for a question without evidence")
    covered = {dia_id for page in (pages if n is None else pages[:n]) for dia_id in page}
    return sum(1 for dia_id in evidence if dia_id in covered) / len(evidence)


def word_count(text: str) -> int:
    return len(text.split())


# --- answer scoring (LoCoMo's task_eval/evaluation.py, BLEU-1 as in the MemoryOS paper) ---


def answer_tokens(text: str) -> list[str]:
    """LoCoMo's normalisation: no commas, lowercase, no punctuation or articles, then stems.

    LoCoMo stems with NLTK's Porter stemmer; ``memory.text.stem`` (Porter steps 1a/1b) stands
    in for it, so figures may differ from the paper's script in the last digit.
    """
    folded = text.replace(",", "").lower().translate(_PUNCTUATION)
    return [stem(word) for word in _ARTICLES.sub(" ", folded).split()]


def token_f1(prediction: str, reference: str) -> float:
    predicted, wanted = answer_tokens(prediction), answer_tokens(reference)
    common = sum((Counter(predicted) & Counter(wanted)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


def answer_f1(prediction: str, answer: str, category: int) -> float:
    """LoCoMo's per-category F1: multi-hop answers are comma-separated parts, each scored
    against its best predicted part and averaged; open-domain answers keep their first
    ';'-separated alternative."""
    if category == 3:
        answer = answer.split(";")[0].strip()
    if category != 1:
        return token_f1(prediction, answer)
    predictions = [part.strip() for part in prediction.split(",")]
    parts = [part.strip() for part in answer.split(",")]
    return sum(max(token_f1(p, part) for p in predictions) for part in parts) / len(parts)


def bleu1(prediction: str, reference: str) -> float:
    """Clipped unigram precision times the brevity penalty exp(1 - r/c) when c < r."""
    predicted, wanted = answer_tokens(prediction), answer_tokens(reference)
    if not predicted or not wanted:
        return 0.0
    clipped = sum((Counter(predicted) & Counter(wanted)).values())
    penalty = 1.0 if len(predicted) > len(wanted) else math.exp(1 - len(wanted) / len(predicted))
    return penalty * clipped / len(predicted)


# --- per-question outcomes and their aggregate ---


@dataclass(frozen=True)
class Ranked:
    """Pages in the order a retriever offers them: each page's dia_ids and its word count."""

    pages: list[list[str]]
    words: list[int]

    def head(self, n: int | None) -> Ranked:
        return self if n is None else Ranked(self.pages[:n], self.words[:n])


@dataclass
class Record:
    """One question's outcome: our context, the baselines' rankings, the LLM's answer."""

    sample_id: str
    question: Question
    response: str | None
    mid_term_count: int
    rankings: dict[str, Ranked] = field(default_factory=dict)  # "ours", "bm25", "dense"

    def to_json(self) -> dict[str, Any]:
        return {
            "sample_id": self.sample_id,
            "qa_index": self.question.index,
            "category": self.question.category,
            "question": self.question.text,
            "answer": self.question.answer,
            "evidence": list(self.question.evidence),
            "context_pages": self.rankings["ours"].pages,
            "mid_term_count": self.mid_term_count,
            "response": self.response,
        }


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def recall_row(records: Sequence[Record], system: str, n: int | None) -> dict[str, Any]:
    """Evidence recall of one retriever at one page budget (None: its whole context).

    Per category the mean over questions with evidence; "overall" is the mean over every
    such question of categories 1-4 (micro average), adversarial questions reported apart.
    """
    by_category: dict[int, list[float]] = {c: [] for c in (*CATEGORIES, ADVERSARIAL)}
    pages, words = 0, 0
    for record in records:
        ranked = record.rankings[system].head(n)
        pages += len(ranked.pages)
        words += sum(ranked.words)
        if record.question.evidence and record.question.category in by_category:
            share = recall_at(record.question.evidence, ranked.pages, None)
            by_category[record.question.category].append(share)
    scored = [share for c in CATEGORIES for share in by_category[c]]
    return {
        "retriever": system,
        "budget": "whole" if n is None else n,
        "recall": {name: _mean(by_category[c]) for c, name in CATEGORIES.items()},
        "overall": _mean(scored),
        "adversarial": _mean(by_category[ADVERSARIAL]),
        "mean_pages": pages / len(records) if records else 0.0,
        "mean_words": words / len(records) if records else 0.0,
    }


def answer_scores(records: Sequence[Record]) -> dict[str, Any] | None:
    """Mean F1 and BLEU-1 per category 1-4 and overall; None when nothing was answered."""
    f1s: dict[int, list[float]] = {c: [] for c in CATEGORIES}
    bleus: dict[int, list[float]] = {c: [] for c in CATEGORIES}
    for record in records:
        question, response = record.question, record.response
        if response is None or question.answer is None or question.category not in CATEGORIES:
            continue
        f1s[question.category].append(answer_f1(response, question.answer, question.category))
        bleus[question.category].append(bleu1(response, question.answer))
    if not any(f1s.values()):
        return None
    return {
        metric: {name: _mean(values[c]) for c, name in CATEGORIES.items()}
        | {"overall": _mean([v for c in CATEGORIES for v in values[c]])}
        for metric, values in (("f1", f1s), ("bleu1", bleus))
    }
