"""An OpenAI-compatible HTTP server for tests and benchmarks, run in-process on 127.0.0.1.

It serves ``POST /v1/chat/completions`` and ``POST /v1/embeddings`` from a background thread
(its own event loop, so injected delays never block the code under test) with:

- canned replies per MemoryOS task, recognised by the task marker in the prompt
  (``adapters.llm.prompts.TASK_MARKERS``); override with ``server.replies[task] = text`` or a
  function of the prompt text;
- a FIFO of faults consumed one per request: ``server.inject(Fault.rate_limit(1), ...)``;
- ``server.latency_s``: added to every call (benchmarks use e.g. 0.2);
- ``server.embedding_dim``: force a vector size regardless of the requested ``dimensions``;
- ``server.requests``: a log of (time, path, task, status, fault, body) per request, and
  ``server.max_in_flight``: the most requests it ever held at once.

Embeddings are pseudo-random vectors seeded by a hash of the text (not unit length, so the
client's normalisation is exercised). Token usage counts words.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from adapters.llm.prompts import task_of
from evaluation.fake_openai.payloads import (
    DEFAULT_REPLIES,
    Fault,
    Reply,
    completion,
    error_response,
    pseudo_embedding,
    transform,
    words,
)


@dataclass(frozen=True)
class RequestRecord:
    at: float  # time.monotonic() on arrival
    path: str
    task: str  # the MemoryOS task, "embeddings" or "unknown"
    status: int
    fault: str | None
    body: dict[str, Any] = field(repr=False, compare=False)


class FakeOpenAI:
    def __init__(self, *, latency_s: float = 0.0) -> None:
        self.latency_s = latency_s
        # When set, embeddings ignore the requested ``dimensions`` (like ada-002 or a local model).
        self.embedding_dim: int | None = None
        self.replies: dict[str, Reply] = dict(DEFAULT_REPLIES)
        self.requests: list[RequestRecord] = []
        self.in_flight = 0
        self.max_in_flight = 0
        # Requests still sleeping from an earlier test (a delay fault outlives the client's
        # timeout) must not count towards this test's in-flight numbers.
        self._generation = 0
        self._faults: deque[Fault] = deque()
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # --- test-facing API ---

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def inject(self, *faults: Fault) -> None:
        """Queue faults; each request takes the oldest one."""
        self._faults.extend(faults)

    @property
    def pending_faults(self) -> int:
        return len(self._faults)

    def calls(self, task: str | None = None) -> list[RequestRecord]:
        with self._lock:
            return [r for r in self.requests if task is None or r.task == task]

    def reset(self) -> None:
        """Back to defaults: no faults, no latency, empty log, default replies."""
        self._faults.clear()
        self.latency_s = 0.0
        self.embedding_dim = None
        self.replies = dict(DEFAULT_REPLIES)
        with self._lock:
            self.requests.clear()
        self._generation += 1
        self.in_flight = self.max_in_flight = 0

    def start(self) -> FakeOpenAI:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # uvicorn leaves Nagle on for a socket it is handed: ~44 ms stalls per keep-alive call.
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        config = uvicorn.Config(
            self._app(), log_level="warning", lifespan="off", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fake OpenAI server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # --- the server side (runs on the server thread's loop) ---

    def _app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/embeddings", self._embeddings, methods=["POST"]),
            ]
        )

    async def _serve(
        self,
        request: Request,
        body: dict[str, Any],
        task: str,
        answer: Callable[[Fault | None], dict[str, Any]],
    ) -> Response:
        fault = self._faults.popleft() if self._faults else None
        status, kind = (fault.status, fault.kind) if fault is not None else (200, None)
        record = RequestRecord(time.monotonic(), request.url.path, task, status, kind, body)
        with self._lock:
            self.requests.append(record)
        generation = self._generation
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if fault is not None and fault.kind == "trickle":
                # not counted in flight: the body streams after this returns, until the client
                # goes away
                return StreamingResponse(trickle(fault.delay_s), media_type="application/json")
            await asyncio.sleep(self.latency_s + (fault.delay_s if fault else 0.0))
            if fault is not None and fault.kind == "status":
                return error_response(fault)
            if fault is not None and fault.kind == "body":
                return Response(fault.text, media_type="text/html")
            return JSONResponse(answer(fault))
        finally:
            if generation == self._generation:
                self.in_flight -= 1

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        messages = body.get("messages", [])
        system = next((m.get("content", "") for m in messages if m.get("role") == "system"), "")
        everything = "\n".join(str(m.get("content", "")) for m in messages)
        task = task_of(str(system)) or task_of(everything) or "unknown"

        def answer(fault: Fault | None) -> dict[str, Any]:
            reply = self.replies.get(task, DEFAULT_REPLIES["unknown"])
            text = reply(everything) if callable(reply) else reply
            text = transform(text, fault)
            return completion(body.get("model", "fake"), text, everything)

        return await self._serve(request, body, task, answer)

    async def _embeddings(self, request: Request) -> Response:
        body = await request.json()
        raw = body.get("input", [])
        inputs = [raw] if isinstance(raw, str) else [str(item) for item in raw]
        dim = self.embedding_dim or int(body.get("dimensions") or 384)
        as_base64 = body.get("encoding_format") == "base64"

        def answer(_: Fault | None) -> dict[str, Any]:
            data = []
            for index, text in enumerate(inputs):
                vector = pseudo_embedding(text, dim)
                encoded: Any = (
                    base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode()
                    if as_base64
                    else vector
                )
                data.append({"object": "embedding", "index": index, "embedding": encoded})
            tokens = sum(words(text) for text in inputs)
            return {
                "object": "list",
                "data": data,
                "model": body.get("model", "fake"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }

        return await self._serve(request, body, "embeddings", answer)


def main() -> None:
    """`python -m evaluation.fake_openai`: the server on its own, for a soak with
    MEMORYOS_EMBEDDER=openai (its base URL goes to OPENAI_BASE_URL). Its request log is
    cleared every 30 s, so a long run does not grow it."""
    server = FakeOpenAI().start()
    print(server.base_url, flush=True)
    try:
        while True:
            time.sleep(30)
            with server._lock:
                server.requests.clear()
    finally:
        server.stop()


async def trickle(every_s: float) -> AsyncIterator[bytes]:
    """White space, a byte at a time, until the client goes away."""
    while True:
        yield b" "
        await asyncio.sleep(every_s)
