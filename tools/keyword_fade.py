"""What a segment's keyword bound and token comparison buy, beside the paper's keywords.

    python -m tools.keyword_fade ../shared/locomo/locomo_dev.json out/keyword-fade

F = cos + Jaccard(segment keywords, page keywords). As built, a segment keeps its newest 24
keyword phrases and F compares keywords as sets of their tokens; the paper keeps every keyword
phrase of the segment and compares phrases. For each way, in one run: ingest the development
slice through the real pipeline (placement uses F), then retrieve every question in the two
modes that read segments by F (``paper``, ``fused``) and print evidence recall (categories 1-4
at 5, 10 and the whole context) per conversation, and the mean Jaccard term of F at placement
by the segment's keyword count: the fade. The default ``structured`` mode reads no segment's F.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import agents.mtm
import memory.segments
import memory.text
import service.response
from adapters import event_loop
from adapters.settings import Settings, load_settings
from adapters.wiring import close_deps
from evaluation import locomo_data as data
from evaluation.locomo import _ranked, asked_at
from memory.scoring import Keywords, SegmentCandidate, choose_segment, jaccard
from memory.text import normalize_fact
from tools.locomo_tune import ingest, open_service

MODES = ("paper", "fused")
BUCKETS = ((0, 8), (9, 16), (17, 32), (33, 64), (65, 10**9))  # a segment's keyword count


def phrases(keywords: Iterable[str]) -> set[str]:
    """The paper's keyword set: the phrases themselves."""
    return {key for key in (normalize_fact(k) for k in keywords) if key}


@contextlib.contextmanager
def paper_keywords() -> Iterator[None]:
    """Every phrase kept and compared whole, for the duration."""
    saved = (memory.segments.merge_keywords.__defaults__, memory.text.keyword_set)
    memory.segments.merge_keywords.__defaults__ = (10**9,)
    for module in (memory.text, agents.mtm, service.response):
        module.keyword_set = phrases  # type: ignore[attr-defined]
    memory.text.phrase_tokens.cache_clear()
    try:
        yield
    finally:
        memory.segments.merge_keywords.__defaults__ = saved[0]
        for module in (memory.text, agents.mtm, service.response):
            module.keyword_set = saved[1]  # type: ignore[attr-defined]
        memory.text.phrase_tokens.cache_clear()


@contextlib.contextmanager
def jaccards_at_placement(seen: list[tuple[int, float]]) -> Iterator[None]:
    """(keyword count, Jaccard term) of the best candidate of every placement."""

    def recording(
        candidates: Iterable[SegmentCandidate], page_keywords: Keywords, theta: float
    ) -> tuple[str | None, float]:
        listed = list(candidates)
        if listed:
            best = max(listed, key=lambda c: c.cosine + jaccard(c.keywords, page_keywords))
            seen.append((len(best.keywords), jaccard(best.keywords, page_keywords)))
        return choose_segment(listed, page_keywords, theta)

    setattr(agents.mtm, "choose_segment", recording)  # noqa: B010 (not exported: patched)
    try:
        yield
    finally:
        setattr(agents.mtm, "choose_segment", choose_segment)  # noqa: B010


async def recall(path: Path, folder: Path, settings: Settings) -> dict[str, dict[str, str]]:
    samples = data.load_samples(path)
    deps, retrieval = await open_service(folder, settings)
    found: dict[str, dict[str, str]] = {}
    try:
        for sample in samples:
            for mode in MODES:
                records = []
                for question in sample.questions:
                    got = await retrieval.retrieve(
                        sample.user_id, question.text, mode=mode, at=asked_at(sample)
                    )
                    ranked = {"ours": _ranked(got.context())}
                    records.append(data.Record(sample.sample_id, question, None, 0, ranked))
                rows = [data.recall_row(records, "ours", n) for n in (5, 10, None)]
                cells = " / ".join(f"{100 * (row['overall'] or 0):.1f}" for row in rows)
                found.setdefault(sample.sample_id, {})[mode] = cells
    finally:
        await close_deps(deps)
    return found


def fade(seen: list[tuple[int, float]]) -> str:
    cells = []
    for low, high in BUCKETS:
        values = [j for size, j in seen if low <= size <= high]
        if values:
            span = f"{low}-{high}" if high < 10**9 else f">{low - 1}"
            cells.append(f"{span}: {sum(values) / len(values):.3f} (n={len(values)})")
    return "; ".join(cells)


async def main(path: Path, out: Path) -> None:
    settings = load_settings()
    results: dict[str, dict[str, dict[str, str]]] = {}
    for label, keywords in (("as built", contextlib.nullcontext), ("paper", paper_keywords)):
        folder = out / label.replace(" ", "-")
        seen: list[tuple[int, float]] = []
        with keywords(), jaccards_at_placement(seen):
            started = time.perf_counter()
            await ingest(path, folder, settings)
            took = time.perf_counter() - started
            results[label] = await recall(path, folder, settings)
        print(f"{label}: ingest {took:.1f} s; Jaccard at placement by keywords: {fade(seen)}")
    print("| held out | mode | as built: 5 / 10 / whole | paper's keywords: 5 / 10 / whole |")
    print("|---|---|---:|---:|")
    for sample_id in results["as built"]:
        for mode in MODES:
            built, paper = results["as built"][sample_id][mode], results["paper"][sample_id][mode]
            print(f"| {sample_id} | {mode} | {built} | {paper} |")


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    event_loop.run(main(Path(sys.argv[1]), Path(sys.argv[2])))
