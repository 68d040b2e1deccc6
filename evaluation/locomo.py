"""`memoryos eval locomo`: LoCoMo through the real pipeline, beside BM25 and dense baselines.

Each sample becomes a fresh user whose sessions are replayed as turns into an embedded stack
(Tansu broker, Faust worker, store in a throw-away folder); once the ingest is verified by
counting pages, every question goes through ``ResponseService.retrieve`` (and ``respond`` with a
real LLM). Outputs: ``retrieval.jsonl`` (one line per question), ``summary.md`` and
``summary.json`` (evidence recall per category, context size, F1/BLEU-1 with a real LLM).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, get_args

import bm25s
import numpy as np
from bm25s.stopwords import STOPWORDS_EN

from adapters import event_loop
from adapters.ports import Embedder
from adapters.settings import MtmRetrieval, Settings
from evaluation import locomo_data as data
from evaluation.fresh_stack import fresh_stack
from evaluation.locomo_data import Ranked, Record, Sample
from evaluation.locomo_report import summarise, write_outputs
from memory.text import tokenize
from schemas.errors import InvalidEvent, MemoryOSError
from schemas.records import Page
from schemas.turn import TurnEvent
from streams.progress import NO_PROGRESS, Progress
from streams.stack import Stack

log = logging.getLogger(__name__)

QUESTION_BATCH = 8  # questions retrieved at once: enough to overlap store reads, not a flood
INGEST_BASE_TIMEOUT_S = 120.0
INGEST_PER_TURN_S = 1.0  # generous: the offline pipeline absorbs several turns per second
COUNT_TIMEOUT_S = 60.0
PROGRESS_EVERY_S = 15.0
STOP_DRAIN_S = 2.0
BASELINE_DEPTH = 50  # baseline rankings kept per question, at least our context's size
_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # bm25s's default token pattern
_STOPWORDS = frozenset(STOPWORDS_EN)
MODES = get_args(MtmRetrieval)


@dataclass
class IngestReport:
    turns: int = 0
    seconds: float = 0.0
    idle: bool = False
    stored: dict[str, dict[str, int]] = field(default_factory=dict)  # user -> tier counts
    mismatched: list[str] = field(default_factory=list)


def main(args: argparse.Namespace, settings: Settings, progress: Progress = NO_PROGRESS) -> int:
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG
    wanted = [s.strip() for s in args.samples.split(",") if s.strip()] if args.samples else None
    if int(args.k) < 1:
        raise InvalidEvent(f"--k must be at least 1, got {args.k}", field="k")
    samples = data.load_samples(Path(args.data), wanted)
    holdout = _ids(getattr(args, "holdout", None))
    unknown = sorted(set(holdout) - {sample.sample_id for sample in samples})
    if unknown:
        raise InvalidEvent(f"--holdout names samples not evaluated: {unknown}", field="holdout")
    modes = [m for m in _ids(getattr(args, "modes", None)) if m != settings.mtm_retrieval]
    bad = sorted(set(modes) - set(MODES))
    if bad:
        raise InvalidEvent(f"--modes: unknown {bad}; known {list(MODES)}", field="modes")
    return event_loop.run(
        evaluate(
            samples, Path(args.out), int(args.k), settings, str(args.data), progress, holdout, modes
        )
    )


def _ids(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


async def evaluate(
    samples: Sequence[Sample],
    out: Path,
    k: int,
    settings: Settings,
    source: str = "",
    progress: Progress = NO_PROGRESS,
    holdout: Sequence[str] = (),
    modes: Sequence[str] = (),
) -> int:
    started = time.perf_counter()
    # LoCoMo scores short entity answers: the paper's benchmark prompt, not the chat reply.
    settings = settings.model_copy(update={"answer_style": "locomo"})
    progress.phase("start stack")
    async with fresh_stack(settings, STOP_DRAIN_S, prefix="memoryos-locomo-") as stack:
        ingest = await ingest_all(stack, samples, started, progress)
        records = await ask_all(stack, samples, k, started, progress, modes)
        facts = await fact_counts(stack, samples)
        run_settings = stack.settings
        assert stack.deps is not None
        embedder = stack.deps.embedder.name  # what the store recorded: which vectors ran
    summary = samples_meta(samples, source, k, run_settings, ingest, embedder)
    summary |= summarise(records, modes, holdout)
    summary["facts"] = facts
    summary["elapsed_s"] = round(time.perf_counter() - started, 1)
    write_outputs(out, records, summary)
    log.info("wrote %s/retrieval.jsonl, summary.md, summary.json", out)
    return 1 if ingest.mismatched else 0


def samples_meta(
    samples: Sequence[Sample],
    source: str,
    k: int,
    settings: Settings,
    ingest: IngestReport,
    embedder: str,
) -> dict[str, Any]:
    return {
        "data": source,
        "samples": [sample.sample_id for sample in samples],
        "k": k,
        "llm": settings.llm,
        "embedder": embedder,
        "settings": {
            name: getattr(settings, name)
            for name in (
                "stm_capacity",
                "mtm_capacity",
                "theta",
                "retrieve_segments",
                "retrieve_pages",
                "segment_vector",
                "mtm_retrieval",
                "answer_style",
            )
        },
        "ingest": {
            "turns": ingest.turns,
            "seconds": round(ingest.seconds, 1),
            "idle": ingest.idle,
            "stored": ingest.stored,
            "mismatched_users": ingest.mismatched,
        },
    }


# --- ingest ---


async def ingest_all(
    stack: Stack, samples: Sequence[Sample], started: float, progress: Progress = NO_PROGRESS
) -> IngestReport:
    """Replay every sample's sessions, then wait until the pipeline has absorbed all of it."""
    assert stack.service is not None
    report = IngestReport()
    begun = time.perf_counter()
    progress.phase("send", total=len(samples), unit="samples")
    for sample in samples:
        for session in sample.sessions:
            await stack.service.add_turns(session)  # one call per session: batched sends
        report.turns += len(sample.turns)
        progress.advance(1)
        log.info(
            "%s: sent %d turns in %d sessions (%.0f s)",
            sample.sample_id,
            len(sample.turns),
            len(sample.sessions),
            time.perf_counter() - started,
        )
    timeout = INGEST_BASE_TIMEOUT_S + INGEST_PER_TURN_S * report.turns
    progress.phase("placed", total=report.turns, unit="pages")
    logger = asyncio.create_task(log_progress(stack, samples, report.turns, started, progress))
    try:
        report.idle = await stack.wait_idle(timeout)
    finally:
        logger.cancel()
    if not report.idle:
        log.warning("the pipeline was still busy after %.0f s", timeout)
    await verify_counts(stack, samples, report)
    report.seconds = time.perf_counter() - begun
    log.info("ingest complete: %d turns in %.0f s", report.turns, report.seconds)
    return report


async def log_progress(
    stack: Stack,
    samples: Sequence[Sample],
    turns: int,
    started: float,
    progress: Progress = NO_PROGRESS,
) -> None:
    """Every PROGRESS_EVERY_S, how many pages the store holds so far: a long ingest shows life."""
    assert stack.deps is not None
    shown = 0
    while True:
        await asyncio.sleep(PROGRESS_EVERY_S)
        counts = [await stack.deps.repo.count_user(sample.user_id) for sample in samples]
        stored = sum(c["short_term"] + c["mid_term_pages"] for c in counts)
        progress.advance(stored - shown)
        shown = stored
        log.info(
            "ingest: %d of %d pages stored (%.0f s)", stored, turns, time.perf_counter() - started
        )


async def verify_counts(stack: Stack, samples: Sequence[Sample], report: IngestReport) -> None:
    """Poll the store until every user has one page per turn and a full STM window.

    Consumer lag at 0 says the topics are read, not that the last pages are written: a page
    evicted from STM stays tier "stm" until the segment agent stores it as "mtm", so the STM
    size catches a segment assignment still under way where the total alone would not.
    """
    assert stack.deps is not None
    repo, capacity = stack.deps.repo, stack.settings.stm_capacity
    deadline = time.monotonic() + COUNT_TIMEOUT_S
    pending = {sample.user_id: len(sample.turns) for sample in samples}
    while True:
        for user_id, expected in list(pending.items()):
            counts = await repo.count_user(user_id)
            stm, mtm = counts["short_term"], counts["mid_term_pages"]
            report.stored[user_id] = {"turns": expected, "short_term": stm, "mid_term": mtm}
            if stm + mtm == expected and stm == min(capacity, expected):
                del pending[user_id]
        if not pending or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    report.mismatched = sorted(pending)
    for user_id in report.mismatched:
        log.error("ingest incomplete for %s: %s", user_id, report.stored[user_id])


async def fact_counts(stack: Stack, samples: Sequence[Sample]) -> dict[str, dict[str, int]]:
    """Per sample, once the questions' visits have been absorbed: the facts the persona stage
    holds, current and superseded (an update said later in the conversation), of each kind."""
    assert stack.deps is not None
    await stack.wait_idle(COUNT_TIMEOUT_S)
    counts: dict[str, dict[str, int]] = {}
    for sample in samples:
        book = await stack.deps.repo.load_fact_book(sample.user_id)
        held = book.facts if book is not None else []
        counts[sample.sample_id] = {
            f"{kind}_{state}": sum(
                1 for f in held if f.kind == kind and f.current == (state == "current")
            )
            for kind in ("user_knowledge", "agent_trait")
            for state in ("current", "superseded")
        }
    return counts


# --- questions ---


async def ask_all(
    stack: Stack,
    samples: Sequence[Sample],
    k: int,
    started: float,
    progress: Progress = NO_PROGRESS,
    modes: Sequence[str] = (),
) -> list[Record]:
    assert stack.deps is not None
    records: list[Record] = []
    progress.phase("questions", total=sum(len(s.questions) for s in samples), unit="questions")
    for sample in samples:
        progress.detail(sample.sample_id)
        baselines = await TurnBaselines.build(sample.turns, stack.deps.embedder)
        depth = max(BASELINE_DEPTH, k + stack.settings.stm_capacity)  # >= our largest context
        texts = [q.text for q in sample.questions]
        flat = {
            "bm25": baselines.bm25(texts, depth),
            "bm25-stemmed": baselines.bm25(texts, depth, stemmed=True),
            "dense": await baselines.dense(texts, depth),
        }
        done = 0
        for start in range(0, len(sample.questions), QUESTION_BATCH):
            batch = sample.questions[start : start + QUESTION_BATCH]
            answered = await asyncio.gather(*(ask(stack, sample, q, k, modes) for q in batch))
            for offset, record in enumerate(answered):
                for name, rankings in flat.items():
                    record.rankings[name] = rankings[start + offset]
            records.extend(answered)
            done += len(batch)
            progress.advance(len(batch))
        log.info(
            "%s: %d questions done (%.0f s)",
            sample.sample_id,
            done,
            time.perf_counter() - started,
        )
    return records


async def ask(
    stack: Stack, sample: Sample, question: data.Question, k: int, modes: Sequence[str] = ()
) -> Record:
    service = stack.service
    assert service is not None
    # LoCoMo's questions have no asking time: the conversation's last session is when
    at = asked_at(sample)
    retrieved = await service.retrieve(sample.user_id, question.text, top_k=k, at=at)
    others = {
        mode: _ranked(
            (
                await service.retrieve(sample.user_id, question.text, top_k=k, mode=mode, at=at)
            ).context()
        )
        for mode in modes
    }
    response = None
    if stack.settings.llm == "openai":
        try:
            # record=False: a question must not become a turn of the memory under test
            response = (await service.respond(sample.user_id, question.text, record=False)).text
        except MemoryOSError as exc:
            # One failed answer should not void the run; it scores 0 like a wrong answer.
            log.warning("%s question %d: no answer (%s)", sample.sample_id, question.index, exc)
            response = ""
    return Record(
        sample_id=sample.sample_id,
        question=question,
        response=response,
        mid_term_count=len(retrieved.mid_term),
        rankings={"ours": _ranked(retrieved.context())} | others,
    )


def _ranked(pages: Sequence[Page]) -> Ranked:
    """A context in its order (``Retrieved.context``: ranked pages first, then the rest of
    the short-term window) as the scorer sees it."""
    return Ranked(
        pages=[[str(d) for d in page.meta.get("dia_ids", [])] for page in pages],
        words=[data.word_count(f"{page.query} {page.response}") for page in pages],
    )


def tokens(text: str) -> list[str]:
    """The baseline's lexical tokenizer: lowercase words of 2+ characters, no stopwords."""
    return [word for word in _TOKEN.findall(text.lower()) if word not in _STOPWORDS]


class TurnBaselines:
    """BM25 and dense retrieval over a sample's turns: the flat memories MemoryOS must beat."""

    def __init__(self, turns: Sequence[TurnEvent], vectors: np.ndarray, embedder: Embedder):
        self.turns = list(turns)
        self.vectors = vectors
        self.embedder = embedder
        self.words = [data.word_count(f"{t.query} {t.response}") for t in self.turns]
        self.index = bm25s.BM25()
        self.stemmed = bm25s.BM25()
        if self.turns:
            self.index.index([tokens(data.turn_text(t)) for t in self.turns], show_progress=False)
            self.stemmed.index(
                [tokenize(data.turn_text(t)) for t in self.turns], show_progress=False
            )

    @classmethod
    async def build(cls, turns: Sequence[TurnEvent], embedder: Embedder) -> TurnBaselines:
        vectors = await embedder.embed([data.turn_text(turn) for turn in turns])
        return cls(turns, np.asarray(vectors, dtype=np.float32), embedder)

    def ranked(self, order: Sequence[int]) -> Ranked:
        return Ranked(
            pages=[list(self.turns[i].meta["dia_ids"]) for i in order],
            words=[self.words[i] for i in order],
        )

    def bm25(self, questions: Sequence[str], depth: int, stemmed: bool = False) -> list[Ranked]:
        """Plain BM25 (``tokens``), or with ``stemmed`` our own tokenizer (``memory.text``:
        stopwords out, light stemming), which alone separates much of our gain from BM25's."""
        if not self.turns:
            return [Ranked([], []) for _ in questions]
        depth = min(depth, len(self.turns))
        index, tokenizer = (self.stemmed, tokenize) if stemmed else (self.index, tokens)
        found, scores = index.retrieve(
            [tokenizer(q) for q in questions], k=depth, show_progress=False
        )
        # A question none of whose words occur gets zero scores: its "ranking" is arbitrary,
        # so it retrieves nothing rather than pages picked by index order.
        return [
            self.ranked([int(i) for i, s in zip(row, row_scores, strict=True) if s > 0])
            for row, row_scores in zip(found, scores, strict=True)
        ]

    async def dense(self, questions: Sequence[str], depth: int) -> list[Ranked]:
        if not questions or not self.turns:
            return [Ranked([], []) for _ in questions]
        queries = np.asarray(await self.embedder.embed(list(questions)), dtype=np.float32)
        similarity = queries @ self.vectors.T  # unit vectors: dot product is cosine
        order = np.argsort(-similarity, axis=1, kind="stable")[:, :depth]
        return [self.ranked([int(i) for i in row]) for row in order]


def asked_at(sample: Sample) -> datetime:
    """When a sample's questions are asked: just after its last session (its last turn)."""
    return max(turn.timestamp for turn in sample.turns) + timedelta(minutes=1)
