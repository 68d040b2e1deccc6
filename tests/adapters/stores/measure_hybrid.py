"""Evidence recall@10 on the LoCoMo dev slice: dense vs hybrid (RRF) vs sparse. Not a test.

Run by hand from the project root:

    .venv/bin/python tests/adapters/stores/measure_hybrid.py [/work/shared/locomo/locomo_dev.json]

Each conversation becomes one user of a throw-away EdgeStore; each turn (a speaker_a utterance
and the speaker_b reply after it, or a lone utterance) one point in ``pages`` with its MiniLM
vector and its lexical vector. For every question of categories 1-4, recall@10 is the share of
its evidence dia_ids found in the top 10 turns. The data is read in place, never copied.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import sys
import tempfile
import time
import uuid
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]  # tests/adapters/stores/ -> the project root
sys.path.insert(0, str(ROOT))

from adapters.embedders.minilm import MiniLMEmbedder  # noqa: E402
from adapters.ports import PAGES, Point  # noqa: E402
from adapters.settings import Settings  # noqa: E402
from adapters.stores.edge import EdgeStore  # noqa: E402

DEFAULT_DATA = Path("/work/shared/locomo/locomo_dev.json")
TOP_K = 10
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
# "D8:6", and the malformed "D:11:26" and "D8:6; D9:17"
_DIA_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
_WORD = re.compile(r"[a-z0-9]+")
_STOPWORD_TEXT = """
    a about after all also am an and any are as at be been but by can could did do does for
    from had has have he her his how i if in into is it its just me my no not of on or our she
    so than that the their them then there they this to too up was we were what when where
    which who why will with would you your
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def _own_lexical_vector(text: str) -> dict[int, float]:
    """Fallback when memory/text.py is absent: lowercase, no stopwords, crc32, 1 + log(tf)."""
    tokens = [t for t in _WORD.findall(text.lower()) if t not in _STOPWORDS]
    counts = Counter(zlib.crc32(t.encode()) & 0x7FFFFFFF for t in tokens)
    return {index: 1.0 + math.log(count) for index, count in counts.items()}


def _lexical() -> tuple[Callable[[str], dict[int, float]], str]:
    try:
        from memory.text import lexical_vector
    except ImportError:
        return _own_lexical_vector, "own tokenizer"
    return lexical_vector, "memory.text.lexical_vector"


@dataclass(frozen=True)
class Turn:
    dia_ids: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class Question:
    category: int
    text: str
    evidence: frozenset[str]


def turns_of(conversation: dict[str, Any]) -> list[Turn]:
    speaker_a, speaker_b = conversation["speaker_a"], conversation["speaker_b"]
    sessions = sorted(
        (int(key.split("_")[1]), value)
        for key, value in conversation.items()
        if re.fullmatch(r"session_\d+", key) and isinstance(value, list)
    )
    turns: list[Turn] = []
    for _, utterances in sessions:
        i = 0
        while i < len(utterances):
            group = utterances[i : i + 1]
            pairs = i + 1 < len(utterances) and utterances[i + 1]["speaker"] == speaker_b
            if utterances[i]["speaker"] == speaker_a and pairs:
                group = utterances[i : i + 2]
            i += len(group)
            turns.append(
                Turn(
                    dia_ids=tuple(u["dia_id"] for u in group),
                    text="\n".join(f"{u['speaker']}: {u['text']}" for u in group),
                )
            )
    return turns


def questions_of(sample: dict[str, Any]) -> tuple[list[Question], int]:
    """Questions of categories 1-4 with their evidence; also how many had none to score."""
    questions: list[Question] = []
    without_evidence = 0
    for qa in sample["qa"]:
        if qa["category"] not in CATEGORIES:
            continue
        evidence = frozenset(
            f"D{session}:{index}"
            for item in qa.get("evidence", [])
            for session, index in _DIA_ID.findall(item)
        )
        if evidence:
            questions.append(Question(qa["category"], qa["question"], evidence))
        else:
            without_evidence += 1
    return questions, without_evidence


async def measure(samples: list[dict[str, Any]]) -> None:
    lexical, lexical_name = _lexical()
    embedder = MiniLMEmbedder(Settings())
    started = time.perf_counter()
    modes = ("dense", "hybrid", "sparse")
    recalls: dict[str, dict[int, list[float]]] = {m: defaultdict(list) for m in modes}
    skipped = 0
    with tempfile.TemporaryDirectory() as folder:
        store = EdgeStore(Path(folder))
        await store.ensure_collections(embedder.dim)
        for sample in samples:
            user = sample["sample_id"]
            turns = turns_of(sample["conversation"])
            vectors = await embedder.embed([turn.text for turn in turns])
            points = [
                Point(
                    id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{user}:{n}")),
                    vector=vector,
                    payload={"user_id": user, "dia_ids": list(turn.dia_ids)},
                    sparse=lexical(turn.text),
                )
                for n, (turn, vector) in enumerate(zip(turns, vectors, strict=True))
            ]
            await store.upsert(PAGES, points)
            questions, without = questions_of(sample)
            skipped += without
            query_vectors = await embedder.embed([q.text for q in questions])
            for question, vector in zip(questions, query_vectors, strict=True):
                sparse = lexical(question.text)
                for mode in modes:
                    if mode != "dense" and not sparse:
                        hits = await store.search(PAGES, user, vector, TOP_K)
                    else:
                        hits = await store.search(
                            PAGES,
                            user,
                            vector,
                            TOP_K,
                            sparse=sparse if mode != "dense" else None,
                            lexical_only=mode == "sparse",
                        )
                    covered = {dia for hit in hits for dia in hit.payload["dia_ids"]}
                    share = len(question.evidence & covered) / len(question.evidence)
                    recalls[mode][question.category].append(share)
        await store.close()
    await embedder.close()

    count = sum(len(v) for v in recalls["dense"].values())
    print(f"LoCoMo dev ({len(samples)} conversations), {count} questions of categories 1-4")
    print(f"({skipped} without usable evidence left out); sparse side: {lexical_name}")
    print(f"evidence recall@{TOP_K} at turn level, in %:")
    header = "".join(f"{CATEGORIES[c]:>13}" for c in CATEGORIES)
    print(f"{'':8}{'all':>8}{header}")
    for mode in modes:
        every = [share for shares in recalls[mode].values() for share in shares]
        per_category = "".join(
            f"{100 * sum(recalls[mode][c]) / max(1, len(recalls[mode][c])):13.1f}"
            for c in CATEGORIES
        )
        print(f"{mode:8}{100 * sum(every) / len(every):8.1f}{per_category}")
    print(f"took {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    data = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DATA
    asyncio.run(measure(json.loads(data.read_text())))
