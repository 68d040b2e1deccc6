"""Tuning loop for retrieval: ingest LoCoMo once into a kept folder, then retrieve many times.

    python -m tools.locomo_tune ingest DATA.json FOLDER
    python -m tools.locomo_tune measure DATA.json FOLDER conv-26,conv-30 \
        mtm_retrieval=paper segment_vector=summary ...

``ingest`` replays the samples through the real pipeline into FOLDER (kept). ``measure``
reopens that store without a broker and prints evidence recall (categories 1-4, at 5, 10 and
the whole context) of ``ResponseService.retrieve`` for the named samples, once with the
settings as configured and once per ``name=value`` override of a setting: variants compared on
one stored memory in seconds instead of a full run. The structured ranking's weights are
constants (``memory.ranking.RankWeights``): change one there to measure it. Retrieval hits go
nowhere, so the memory stays as ingested.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from adapters import event_loop
from adapters.deps import Deps
from adapters.settings import Settings, load_settings
from adapters.wiring import build_deps, close_deps
from evaluation import locomo_data as data
from evaluation.locomo import _ranked, ingest_all
from evaluation.locomo_data import Record
from service.response import ResponseService
from streams.broker import free_port
from streams.stack import Stack


class NullSink:
    """Retrieval hits go nowhere: the stored memory stays exactly as ingested."""

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        return None


async def ingest(path: Path, folder: Path, settings: Settings) -> None:
    samples = data.load_samples(path)
    run = settings.model_copy(
        update={"data_dir": folder, "broker_url": None, "broker_port": free_port(), "port": 0}
    )
    stack = Stack(run, serve_http=False)
    await stack.start()
    try:
        report = await ingest_all(stack, samples, time.perf_counter())
        logging.info("ingest: %s", report)
    finally:
        await stack.stop(drain_timeout_s=10.0)


async def open_service(folder: Path, settings: Settings) -> tuple[Deps, ResponseService]:
    deps = await build_deps(settings.model_copy(update={"data_dir": folder}))
    return deps, ResponseService(deps, NullSink())


async def measure(
    path: Path, folder: Path, wanted: Sequence[str], overrides: Sequence[str], settings: Settings
) -> None:
    samples = data.load_samples(path, wanted)
    deps, service = await open_service(folder, settings)
    try:
        for label in ["as configured", *overrides]:
            name, _, value = label.partition("=")
            if value and name not in Settings.model_fields:
                raise SystemExit(f"{name} is not a setting (docs/configuration.md lists them)")
            update = {name: value} if value else {}
            variant = Settings(**(settings.model_dump() | update)) if update else settings
            service.deps = replace(deps, settings=variant)
            records = []
            for sample in samples:
                for question in sample.questions:
                    found = await service.retrieve(sample.user_id, question.text)
                    ranked = {"ours": _ranked(found.context())}
                    records.append(Record(sample.sample_id, question, None, 0, ranked))
            rows = [data.recall_row(records, "ours", n) for n in (5, 10, None)]
            cells = " / ".join(f"{100 * (row['overall'] or 0):.1f}" for row in rows)
            print(f"{label}: recall 1-4 at 5 / 10 / whole {cells}", flush=True)
    finally:
        await close_deps(deps)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    command, source, target = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    if command == "ingest":
        logging.getLogger().setLevel(logging.INFO)
        event_loop.run(ingest(source, target, load_settings()))
    else:
        names = sys.argv[4].split(",") if len(sys.argv) > 4 else []
        event_loop.run(measure(source, target, names, sys.argv[5:], load_settings()))
