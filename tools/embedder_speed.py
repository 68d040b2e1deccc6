"""The embedder alone on LoCoMo's texts: questions one at a time and in batches of 8 (what
retrieves send), turns in batches of 64 (what ingest sends), and the RSS after: this
process's, and the model's own process's (``MEMORYOS_MINILM_HOST=process``, the default).

    python -m tools.embedder_speed DATA.json          # MEMORYOS_MINILM_RUNTIME picks

No cache: every text is encoded (a suffix makes each question distinct).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import psutil  # type: ignore[import-untyped]

from adapters import event_loop
from adapters.embedders import build_embedder
from adapters.embedders.minilm import MiniLMEmbedder
from adapters.embedders.model_process import model_pids
from adapters.embedders.precision import new_store_precision
from adapters.ports import Embedder
from adapters.process_stats import cpu_seconds, rss_bytes
from adapters.settings import load_settings


def texts_of(path: Path) -> tuple[list[str], list[str]]:
    """(questions, turns): a turn is two consecutive utterances, as the replay pairs them."""
    questions: list[str] = []
    utterances: list[str] = []
    for sample in json.loads(path.read_text()):
        questions += [qa["question"] for qa in sample["qa"]]
        for key, session in sample["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                utterances += [turn["text"] for turn in session]
    turns = [f"{a} {b}" for a, b in zip(utterances[::2], utterances[1::2], strict=False)]
    return questions, turns


def cpu_now() -> float:
    """This process's CPU seconds and its model processes' together."""
    return time.process_time() + sum(cpu_seconds(pid) for pid in model_pids())


async def rate(embedder: Embedder, texts: Sequence[str], batch: int) -> tuple[float, float]:
    """Texts per second, and the CPU milliseconds per text, the model's process's included
    (on a loaded machine the second tells two runs apart better than the first)."""
    started, cpu = time.perf_counter(), cpu_now()
    for start in range(0, len(texts), batch):
        await embedder.embed(list(texts[start : start + batch]))
    cpu_ms = (cpu_now() - cpu) / len(texts) * 1000
    return len(texts) / (time.perf_counter() - started), cpu_ms


async def main(path: Path) -> None:
    settings = load_settings()
    embedder = build_embedder(settings)
    if isinstance(embedder, MiniLMEmbedder):
        embedder = MiniLMEmbedder(settings, cache_size=0)
    questions, turns = texts_of(path)
    await embedder.embed(["warm up"])
    row: dict[str, object] = {
        "host": settings.minilm_host,
        "runtime": settings.minilm_runtime,
        "precision": new_store_precision(settings),
    }
    runs = {
        "questions_one_at_a_time": (questions[:300], 1),
        "questions_in_batches_of_8": ([f"{q} ?" for q in questions], 8),
        "turns_in_batches_of_64": (turns[:640], 64),
    }
    for name, (texts, batch) in runs.items():
        row[f"{name}_per_s"], row[f"{name}_cpu_ms_per_text"] = await rate(embedder, texts, batch)
    row["rss_mb"] = psutil.Process().memory_info().rss / 2**20
    row["model_process_rss_mb"] = sum(rss_bytes(pid) for pid in model_pids()) / 2**20
    print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()}))
    await embedder.close()


if __name__ == "__main__":
    event_loop.run(main(Path(sys.argv[1])))
