"""Tuning loop for retrieval: ingest LoCoMo once into a kept folder, then retrieve many times.

``python -m evaluation.locomo_tune ingest DATA.json FOLDER`` replays the samples through the
real pipeline into FOLDER (kept); ``evaluation.locomo_tune.open_service(FOLDER)`` reopens
that store without a broker, so retrieval variants are measured on the same stored memory.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from pathlib import Path

from adapters.deps import Deps
from adapters.settings import Settings, load_settings
from adapters.wiring import build_deps
from evaluation import locomo_data as data
from evaluation.locomo import ingest_all
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


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    asyncio.run(ingest(Path(sys.argv[2]), Path(sys.argv[3]), load_settings()))
