"""MiniLM in a child process: the parent's side (``ProcessHost``) and the child's (``main``).

The child is ``python -m adapters.embedders.model_process RUNTIME CACHE THREADS PRECISION``.
It loads the model, says it is ready, then answers batches one at a time in the order they
come; the parent's event loop writes requests to its stdin and reads answers from its stdout
as they arrive, so no thread of the parent ever waits on the model (``model_hosts``).

Frames: a request is a u32 length and the texts as a JSON list. An answer is one kind byte, a
u32 length and a body: ``R`` ready (empty), ``V`` the rows as float32, ``E`` an error's text.
A failed batch is answered with ``E`` and the child goes on; a model that cannot load is
answered with ``E`` and the child exits.

Lifetime: the child's only way out is the end of its stdin. The parent closes it to stop the
child (the batches already sent are answered first); a parent that dies, even by SIGKILL,
closes it too, so no child outlives its parent. The child ignores SIGINT and SIGTERM: Ctrl-C
in a terminal reaches the whole process group, and the parent, stopping gracefully, may still
need vectors for the work it drains. A child that dies fails the batches it was given with an
``EmbedderError``; the next batch starts a new one.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import signal
import struct
import sys
import weakref
from pathlib import Path
from typing import BinaryIO

import numpy as np
import orjson

from adapters.embedders.minilm_models import Matrix
from schemas.errors import EmbedderError

log = logging.getLogger(__name__)
LENGTH = struct.Struct("<I")
READY, VECTORS, ERROR = b"R", b"V", b"E"
DIM = 384
CLOSE_S = 10.0  # for the batches in flight at a close, then the child is killed

_HOSTS: weakref.WeakSet[ProcessHost] = weakref.WeakSet()


class ProcessHost:
    def __init__(self, runtime: str, cache_dir: Path, threads: int, precision: str) -> None:
        self._args = [runtime, str(cache_dir), str(threads), precision]
        self._proc: asyncio.subprocess.Process | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._starting: asyncio.Lock | None = None
        self._waiting: collections.deque[asyncio.Future[Matrix]] = collections.deque()
        self._reader: asyncio.Task[None] | None = None
        _HOSTS.add(self)

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.returncode is None else None

    async def encode(self, batch: list[str]) -> Matrix:
        try:
            body = orjson.dumps(batch)
        except TypeError as exc:  # a lone surrogate: no UTF-8 for it, as in the thread's tokenizer
            raise EmbedderError(f"MiniLM could not embed {len(batch)} texts: {exc}") from exc
        proc = await self._running()
        answer: asyncio.Future[Matrix] = asyncio.get_running_loop().create_future()
        # queued and written with no await between: answers come back in this order
        self._waiting.append(answer)
        assert proc.stdin is not None
        try:
            proc.stdin.write(LENGTH.pack(len(body)) + body)
            await proc.stdin.drain()
        except (ConnectionError, RuntimeError) as exc:  # the child is gone; the reader says why
            if not answer.done():
                answer.set_exception(
                    EmbedderError(f"the model process did not take a batch: {exc}")
                )
        return await answer

    async def _running(self) -> asyncio.subprocess.Process:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a child started by another event loop cannot be read here
            self._abandon()
            self._loop, self._starting = loop, asyncio.Lock()
        assert self._starting is not None
        async with self._starting:
            if self._proc is None or self._proc.returncode is not None:
                self._proc = await self._start()
                # each child its own queue: a dead one's reader fails only its own batches
                self._waiting = collections.deque()
                self._reader = asyncio.create_task(self._read(self._proc, self._waiting))
            return self._proc

    async def _start(self) -> asyncio.subprocess.Process:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            __name__,
            *self._args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        try:
            kind, body = await _answer(proc.stdout)
        except (asyncio.IncompleteReadError, ConnectionError):
            code = await proc.wait()
            raise EmbedderError(
                f"the model process exited with code {code} before it was ready (its stderr "
                "above says why)"
            ) from None
        if kind != READY:
            await proc.wait()
            raise EmbedderError(f"cannot load all-MiniLM-L6-v2: {body.decode(errors='replace')}")
        return proc

    async def _read(
        self,
        proc: asyncio.subprocess.Process,
        waiting: collections.deque[asyncio.Future[Matrix]],
    ) -> None:
        assert proc.stdout is not None
        try:
            while True:
                kind, body = await _answer(proc.stdout)
                answer = waiting.popleft()
                if answer.done():  # its caller was cancelled
                    continue
                if kind == VECTORS:
                    answer.set_result(np.frombuffer(body, dtype=np.float32).reshape(-1, DIM))
                else:
                    answer.set_exception(EmbedderError(body.decode(errors="replace")))
        except (asyncio.IncompleteReadError, ConnectionError):
            code = await proc.wait()
            if waiting:
                log.warning(
                    "the model process ended with code %s, %d batches unanswered",
                    code,
                    len(waiting),
                )
            failure = EmbedderError(f"the model process ended (exit code {code})")
            while waiting:
                answer = waiting.popleft()
                if not answer.done():
                    answer.set_exception(failure)

    async def close(self) -> None:
        """Stop the child once it has answered what it was sent (at most ``CLOSE_S``)."""
        proc, reader = self._proc, self._reader
        self._proc = self._reader = None
        if proc is None:
            return
        if self._loop is not asyncio.get_running_loop():
            self._kill(proc)
            _forget_transport(proc, self._loop)
            return
        assert proc.stdin is not None
        proc.stdin.close()  # the end of its stdin: it answers what it has, then exits
        try:
            await asyncio.wait_for(proc.wait(), CLOSE_S)
        except TimeoutError:
            self._kill(proc)
            await proc.wait()
        if reader is not None:
            await reader

    def _abandon(self) -> None:
        proc, self._proc, self._reader = self._proc, None, None
        if proc is not None:
            self._kill(proc)
            _forget_transport(proc, self._loop)
        failure = EmbedderError("the model process was left behind by a closed event loop")
        while self._waiting:
            answer = self._waiting.popleft()
            if not answer.done() and not answer.get_loop().is_closed():
                answer.set_exception(failure)

    @staticmethod
    def _kill(proc: asyncio.subprocess.Process) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)


def _forget_transport(
    proc: asyncio.subprocess.Process, loop: asyncio.AbstractEventLoop | None
) -> None:
    """A closed loop's subprocess transport, closed by its collector, asks that loop to run
    its last callbacks and prints "Event loop is closed": its pipes are closed here and the
    transport marked closed (asyncio's own flag: it has no public way)."""
    if loop is None or not loop.is_closed():
        return
    transport = getattr(proc, "_transport", None)
    if transport is None:
        return
    for fd in range(3):
        pipe = transport.get_pipe_transport(fd)
        raw = getattr(pipe, "_pipe", None)
        if raw is not None:
            with contextlib.suppress(OSError):
                raw.close()
            pipe._pipe = None
    transport._closed = True


def model_pids() -> list[int]:
    """The running model processes this process started (for CPU and memory figures)."""
    return [pid for host in list(_HOSTS) if (pid := host.pid) is not None]


def cpu_seconds(pid: int) -> float:
    """The CPU (user and system) ``pid`` has used; 0 once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()  # after the command's name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _answer(stream: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await stream.readexactly(1 + LENGTH.size)
    (length,) = LENGTH.unpack(head[1:])
    return head[:1], await stream.readexactly(length)


# --- the child ---


def _send(out: BinaryIO, kind: bytes, body: bytes) -> None:
    out.write(kind + LENGTH.pack(len(body)) + body)
    out.flush()


def _request(source: BinaryIO) -> list[str] | None:
    head = source.read(LENGTH.size)
    if len(head) < LENGTH.size:
        return None  # the parent closed our stdin, or is gone
    (length,) = LENGTH.unpack(head)
    texts = orjson.loads(source.read(length))
    return [str(text) for text in texts]


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # The answers get a descriptor of their own; whatever a library prints goes to stderr
    # instead of into a frame.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    logging.basicConfig(level=logging.WARNING, format="model process: %(levelname)s %(message)s")
    from adapters.embedders.minilm_models import load_model
    from adapters.embedders.model_hosts import encode_and_trim

    runtime, cache_dir, threads, precision = argv
    try:
        model = load_model(runtime, Path(cache_dir), threads=int(threads), precision=precision)
    except Exception as exc:
        _send(out, ERROR, str(exc).encode())
        return 1
    _send(out, READY, b"")
    while (batch := _request(sys.stdin.buffer)) is not None:
        try:
            rows = np.ascontiguousarray(encode_and_trim(model, batch), dtype=np.float32)
        except EmbedderError as exc:
            _send(out, ERROR, str(exc).encode())
        else:
            _send(out, VECTORS, rows.tobytes())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
