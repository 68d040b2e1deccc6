"""Micro-batched embedding: concurrent callers share one embedding call.

Inference servers batch requests this way. MiniLM embeds a batch in far less time than its
texts one by one, so concurrent retrieves, each embedding its query alone, would queue behind
one another on the model; batched, they ride one call.

Adaptive: a call that finds the embedder idle waits ``window_s`` (a few milliseconds) for
company, then goes; calls arriving while a batch is encoding form the next batch, so there
is no fixed delay under load and almost none without it.

Batches are small (``max_batch``, 8) so that two stages overlap: while one
batch encodes in the model's thread, the event loop runs the store reads of the callers of the
batch before. With one batch of all the callers they alternate instead: everyone embeds,
then everyone reads the store, and many concurrent callers get fewer retrieves a second
(``tools.retrieve_load`` shows it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from adapters.ports import Embedder

Waiting = tuple[list[str], "asyncio.Future[list[list[float]]]"]


class MicroBatchingEmbedder:
    def __init__(self, inner: Embedder, window_s: float = 0.002, max_batch: int = 8) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.window_s = window_s
        self.max_batch = max_batch
        self._waiting: list[Waiting] = []
        self._worker: asyncio.Task[None] | None = None
        self.batches = 0  # how many embedding calls served how many callers: for tests

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        future: asyncio.Future[list[list[float]]] = asyncio.get_running_loop().create_future()
        self._waiting.append((list(texts), future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        await asyncio.sleep(self.window_s)
        while self._waiting:
            await self._run(self._take())

    def _take(self) -> list[Waiting]:
        """The oldest callers, up to ``max_batch`` texts (one caller even if it has more)."""
        batch: list[Waiting] = []
        size = 0
        while self._waiting:
            texts = self._waiting[0][0]
            if batch and size + len(texts) > self.max_batch:
                break
            batch.append(self._waiting.pop(0))
            size += len(texts)
        return batch

    async def _run(self, batch: list[Waiting]) -> None:
        texts = [text for texts, _ in batch for text in texts]
        self.batches += 1
        try:
            vectors = await self.inner.embed(texts)
        except Exception as exc:  # every caller of this batch sees the failure
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        start = 0
        for texts_of_one, future in batch:
            if not future.done():
                future.set_result(vectors[start : start + len(texts_of_one)])
            start += len(texts_of_one)

    async def close(self) -> None:
        await self.inner.close()
