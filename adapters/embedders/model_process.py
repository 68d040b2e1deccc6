"""MiniLM in a child process: the parent's side (``ProcessHost``) and the child's (``main``).

The child is ``python -P -m adapters.embedders.model_process FD RUNTIME CACHE THREADS PRECISION``.
It loads the model, says it is ready, then answers batches one at a time in the order they
come; the parent's event loop writes requests to its stdin and reads the answers from a pipe
of their own as they arrive, so no thread of the parent ever waits on the model (``model_hosts``).

Frames: a request is a u32 length and the texts as a JSON list. An answer is one kind byte, a
u32 length and a body: ``R`` ready (empty), ``V`` the rows as float32, ``E`` an error's text.
A failed batch is answered with ``E`` and the child goes on; a model that cannot load is
answered with ``E`` and the child exits.

The answers go to a pipe of their own (its descriptor is the first argument); the child's
stdout goes to the parent's stderr, so nothing a library prints can land in an answer, and
``-P`` keeps the working folder's modules out of the child's imports.

A child that leaves its oldest request unanswered past that request's deadline (counted from
the answer before it, or from its write if the child was idle) is killed: a stopped or looping
child would otherwise hold every later request, a user's DELETE queued behind one among them.
That request fails; the ones queued behind it go to the next child. A child that does not say
it is ready within ``START_S`` of its start is killed too.

Lifetime: the child's only way out is the end of its stdin. The parent closes it to stop the
child (the batches already sent are answered first); a parent that dies, even by SIGKILL,
closes it too, so no child outlives its parent. The child has a process group of its own:
Ctrl-C in a terminal reaches the parent alone, which, stopping gracefully, may still need
vectors for the work it drains, and stops the child last. A child that dies fails the
batches sent to it with an ``EmbedderError``; the next batch starts a new one.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import itertools
import logging
import os
import signal
import struct
import sys
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from adapters.embedders.minilm_models import Matrix
from adapters.orphans import die_with_parent
from adapters.process_stats import rss_bytes
from schemas.errors import EmbedderError, MemoryOSError

log = logging.getLogger(__name__)
LENGTH = struct.Struct("<I")
READY, VECTORS, ERROR = b"R", b"V", b"E"
DIM = 384
MAX_FRAME = 1 << 28  # an answer's body at the most: 4,096 texts' rows take 6.3 MB
CLOSE_S = 10.0  # for the batches in flight at a close, then the child is killed
# A request's time at the head of the queue before its child is taken for stuck: the base,
# and more for a big request at a slow device's pace (a 4,096-text batch, about 1 MB, takes
# about 10 s here and is given 220 s)
DEADLINE_S = 120.0
DEADLINE_BYTES_PER_S = 10_000
# From the child's start to its "ready": a first start may export the model's graphs, which
# takes minutes on a slow machine; a child hung in its imports is killed after it.
START_S = 900.0
RESENDS = 2  # a request queued behind a stuck one goes to a new child at most this often


class _Resend(Exception):
    """Queued behind a request its child did not answer in time: sent again to the next."""


_HOSTS: weakref.WeakSet[ProcessHost] = weakref.WeakSet()
_STARTS = [0]  # model processes this process started and saw ready: more than one is a restart


@dataclasses.dataclass
class _Child:
    """One model process: its answers' pipe, its batches not yet answered, their reader."""

    proc: asyncio.subprocess.Process
    answers: asyncio.StreamReader
    pipe: asyncio.ReadTransport
    waiting: collections.deque[tuple[asyncio.Future[Any], float]]  # with its deadline, s
    reader: asyncio.Task[None] | None = None
    watch: asyncio.Task[None] | None = None
    progress: float = 0.0  # loop time of its last answer, or of a write to it while idle
    overdue: bool = False  # killed for keeping its oldest request past the deadline


class ProcessHost:
    """The parent's side of a child that answers requests one at a time, in order. The model
    is one such child; ``adapters.llm.text_process`` is another (its class attributes name its
    module, what it is called in errors, and its error)."""

    module = __name__
    what = "the model process"
    error: type[MemoryOSError] = EmbedderError
    deadline_s = DEADLINE_S
    start_s = START_S

    def __init__(self, runtime: str, cache_dir: Path, threads: int, precision: str) -> None:
        self._open([runtime, str(cache_dir), str(threads), precision])
        _HOSTS.add(self)

    def _open(self, args: list[str]) -> None:
        self._args = args
        self._child: _Child | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._starting: asyncio.Lock | None = None

    @property
    def pid(self) -> int | None:
        child = self._child
        return child.proc.pid if child is not None and child.proc.returncode is None else None

    async def encode(self, batch: list[str]) -> Matrix:
        try:
            body = orjson.dumps(batch)
        except TypeError as exc:  # a lone surrogate: no UTF-8 for it, as in the thread's tokenizer
            raise EmbedderError(f"MiniLM could not embed {len(batch)} texts: {exc}") from exc
        matrix: Matrix = await self.ask(body)
        return matrix

    def decode(self, body: bytes) -> Any:
        """An answer's body as the caller gets it: the model's rows."""
        return np.frombuffer(body, dtype=np.float32).reshape(-1, DIM)

    async def ask(self, body: bytes) -> Any:
        """One request's answer, as ``decode`` gives it, in the order asked."""
        frame = LENGTH.pack(len(body)) + body
        deadline_s = self.deadline_s + len(body) / DEADLINE_BYTES_PER_S
        for resend in itertools.count():
            child = await self._running()
            answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            # queued and written with no await between: answers come back in this order
            if not child.waiting:
                child.progress = answer.get_loop().time()
            child.waiting.append((answer, deadline_s))
            stdin = child.proc.stdin
            assert stdin is not None
            try:
                stdin.write(frame)
                await stdin.drain()
                return await answer
            except _Resend:
                if resend >= RESENDS:  # child after child stalls: the caller hears of it
                    raise self.error(
                        f"{self.what} was killed {resend + 1} times with this request queued"
                    ) from None
                continue
            except (ConnectionError, RuntimeError) as exc:  # the child is gone; its reader says why
                raise self.error(f"{self.what} did not take a request: {exc}") from exc
            finally:
                answer.cancel()  # a caller gone before its answer: the reader skips it

    async def _running(self) -> _Child:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a child started by another event loop cannot be read here
            self._abandon()
            self._loop, self._starting = loop, asyncio.Lock()
        assert self._starting is not None
        async with self._starting:
            child = self._child
            if child is None or child.proc.returncode is not None or child.overdue or _ended(child):
                if child is not None:
                    self._stop_now(child)
                child = self._child = await self._start()
                child.reader = asyncio.create_task(self._read(child))
                child.watch = asyncio.create_task(self._watch(child))
            return child

    async def _start(self) -> _Child:
        loop = asyncio.get_running_loop()
        theirs, ours = os.pipe()[::-1]  # the child writes its answers to ``theirs``
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-P",  # not the working folder's modules: a numpy.py there is not numpy
                "-m",
                self.module,
                str(theirs),
                *self._args,
                stdin=asyncio.subprocess.PIPE,
                stdout=2,  # what a library prints goes to stderr, never into an answer
                pass_fds=(theirs,),
                # a group of its own, so Ctrl-C in a terminal stops the parent, which stops it
                # (a session of its own: uvloop's subprocess takes no process_group)
                start_new_session=True,
            )
        except BaseException:
            os.close(ours)
            raise
        finally:
            os.close(theirs)
        try:
            answers = asyncio.StreamReader(limit=MAX_FRAME)
            pipe, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(answers), os.fdopen(ours, "rb", buffering=0)
            )
        except BaseException:
            proc.kill()
            raise
        child = _Child(proc, answers, pipe, collections.deque())
        start = asyncio.timeout(self.start_s)
        try:
            async with start:
                kind, body = await _answer(answers)
        except TimeoutError:
            if not start.expired():
                raise
            self._stop_now(child)
            await proc.wait()
            raise self.error(
                f"{self.what} did not say it was ready within {self.start_s:g} s: killed; its "
                "stderr above says more"
            ) from None
        except BaseException as exc:
            self._stop_now(child)  # a caller cancelled mid-start leaves no child behind
            if not isinstance(exc, (asyncio.IncompleteReadError, ConnectionError, EmbedderError)):
                raise
            code = await proc.wait()
            raise self.error(
                f"{self.what} ended (exit code {code}) before it was ready: {exc}; its "
                "stderr above says more"
            ) from None
        if kind != READY:
            self._stop_now(child)
            raise self.error(self.not_ready(body.decode(errors="replace")))
        if type(self) is ProcessHost:
            _STARTS[0] += 1
        return child

    def not_ready(self, why: str) -> str:
        return f"cannot load all-MiniLM-L6-v2: {why}"

    def failure(self, why: str) -> Exception:
        """The error a caller gets for an ``E`` answer."""
        return self.error(why)

    async def _read(self, child: _Child) -> None:
        code: int | None = None
        try:
            while True:
                kind, body = await _answer(child.answers)
                if not child.waiting:
                    raise EmbedderError(f"{self.what} answered a request nobody sent")
                answer, _ = child.waiting.popleft()
                child.progress = answer.get_loop().time()
                if answer.done():  # its caller was cancelled
                    continue
                if kind != VECTORS:
                    answer.set_exception(self.failure(body.decode(errors="replace")))
                    continue
                try:
                    answer.set_result(self.decode(body))
                except ValueError as exc:  # a body that is not what was asked: this call fails
                    answer.set_exception(
                        self.error(f"{self.what} sent an unreadable answer: {exc}")
                    )
        except (asyncio.IncompleteReadError, ConnectionError, EmbedderError):
            self._stop_now(child)  # a malformed answer: the child may still be running
            code = await child.proc.wait()
        finally:  # however the reading ended, this child answers no more
            if child.watch is not None:
                child.watch.cancel()
            self._stop_now(child)
            if child.overdue and child.waiting:
                stuck, deadline_s = child.waiting.popleft()
                if not stuck.done():
                    why = f"{self.what} did not answer within {deadline_s:g} s: killed"
                    stuck.set_exception(self.error(why))
                while child.waiting:  # not started: they go to the next child
                    behind, _ = child.waiting.popleft()
                    if not behind.done() and not behind.get_loop().is_closed():
                        behind.set_exception(_Resend())
            unanswered = len(child.waiting)
            if unanswered:
                log.warning(
                    "%s ended (exit code %s) with %d requests unanswered",
                    self.what,
                    code,
                    unanswered,
                )
            _fail(child, self.error(f"{self.what} ended (exit code {code})"))

    async def _watch(self, child: _Child) -> None:
        """Kill the child once its oldest request has been at the head past its deadline."""
        loop = asyncio.get_running_loop()
        every = min(1.0, self.deadline_s / 4)
        while True:
            await asyncio.sleep(every)
            if child.waiting and loop.time() - child.progress > child.waiting[0][1]:
                log.error(
                    "%s left a request unanswered for %g s: killing it (pid %d)",
                    self.what,
                    child.waiting[0][1],
                    child.proc.pid,
                )
                child.overdue = True
                self._stop_now(child)  # its reader fails what it was sent
                return

    async def close(self) -> None:
        """Stop the child once it has answered what it was sent (at most ``CLOSE_S``); a start
        in progress is waited for first. A later ``encode`` starts a new child."""
        if self._loop is not None and self._loop is not asyncio.get_running_loop():
            self._abandon()
            return
        if self._starting is None:
            return
        async with self._starting:
            child, self._child = self._child, None
        if child is None:
            return
        assert child.proc.stdin is not None
        if child.watch is not None:  # the close's own bound from here: nothing is resent
            child.watch.cancel()
        child.proc.stdin.close()  # the end of its stdin: it answers what it has, then exits
        try:
            await asyncio.wait_for(child.proc.wait(), CLOSE_S)
        except TimeoutError:
            self._stop_now(child)
            await child.proc.wait()
        for task in (child.reader, child.watch):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _abandon(self) -> None:
        """Kill the child of a loop no longer running (its transports cannot be used here)."""
        child, self._child = self._child, None
        if child is None:
            return
        self._stop_now(child)
        _forget_transports(child, self._loop)
        _fail(child, self.error(f"{self.what} was left behind by a closed event loop"))

    @staticmethod
    def _stop_now(child: _Child) -> None:
        if child.proc.returncode is None:  # once reaped, its pid may be another's
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.proc.pid, signal.SIGKILL)
        # its pipes closed, asyncio closes the process's transport once it has exited
        with contextlib.suppress(RuntimeError):  # its loop may be closed already
            if child.proc.stdin is not None:
                child.proc.stdin.close()
            if not child.pipe.is_closing():
                child.pipe.close()


def _fail(child: _Child, failure: Exception) -> None:
    while child.waiting:
        answer, _ = child.waiting.popleft()
        if not answer.done() and not answer.get_loop().is_closed():
            answer.set_exception(failure)


def _ended(child: _Child) -> bool:
    return child.reader is not None and child.reader.done()


def _forget_transports(child: _Child, loop: asyncio.AbstractEventLoop | None) -> None:
    """A closed loop's transports, closed by their collector, ask that loop to run their last
    callbacks and print "Event loop is closed": their pipes are closed here and the
    transports marked closed (asyncio's own flags: it has no public way)."""
    if loop is None or not loop.is_closed():
        return
    transport = getattr(child.proc, "_transport", None)
    pipes: list[Any] = [child.pipe]
    if transport is not None:
        pipes += [transport.get_pipe_transport(fd) for fd in range(3)]
        with contextlib.suppress(AttributeError):  # uvloop's transport has no such flag
            transport._closed = True
    for pipe in pipes:
        raw = getattr(pipe, "_pipe", None)
        if raw is not None:
            with contextlib.suppress(OSError):
                raw.close()
            pipe._pipe = None
        if hasattr(pipe, "_closing"):
            with contextlib.suppress(AttributeError):  # read-only on uvloop's transports
                pipe._closing = True


def model_pids() -> list[int]:
    """The running model processes this process started (for CPU and memory figures)."""
    return [pid for host in list(_HOSTS) if (pid := host.pid) is not None]


class ModelProcessCollector:
    """Prometheus figures of the model processes, read at each scrape: their memory is not
    this process's, and a count of starts above one tells of children that died."""

    def collect(self) -> Iterator[Metric]:
        memory = GaugeMetricFamily(
            "memoryos_model_process_resident_bytes",
            "Resident memory of the MiniLM processes this process runs (MEMORYOS_MINILM_HOST)",
        )
        memory.add_metric([], sum(rss_bytes(pid) for pid in model_pids()))
        yield memory
        starts = CounterMetricFamily(
            "memoryos_model_process_starts",
            "MiniLM processes this process started that loaded the model (more than one: a "
            "child ended and another took its place)",
        )
        starts.add_metric([], _STARTS[0])
        yield starts


async def _answer(stream: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await stream.readexactly(1 + LENGTH.size)
    kind, (length,) = head[:1], LENGTH.unpack(head[1:])
    if kind not in (READY, VECTORS, ERROR) or length > MAX_FRAME:
        raise EmbedderError(f"the model process sent a malformed answer ({head!r})")
    return kind, await stream.readexactly(length)


# --- the child ---


class Answers:
    """The child's answer pipe: whole frames."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out

    def send(self, kind: bytes, body: bytes) -> None:
        self.out.write(kind + LENGTH.pack(len(body)) + body)
        self.out.flush()


def read_request(source: BinaryIO) -> Any:
    """The request's JSON; None once the parent closed our stdin, or is gone."""
    head = source.read(LENGTH.size)
    if len(head) < LENGTH.size:
        return None
    (length,) = LENGTH.unpack(head)
    return orjson.loads(source.read(length))


def serve(answers: Answers, work: Callable[[Any], tuple[bytes, bytes]]) -> None:
    """Each request in order, until stdin ends. What the work does not expect ends the child
    (its parent then fails what it sent, and the next request starts another)."""
    while (request := read_request(sys.stdin.buffer)) is not None:
        kind, body = work(request)
        answers.send(kind, body)


def _embed(model: Any, batch: list[str]) -> tuple[bytes, bytes]:
    from adapters.embedders.model_hosts import encode_and_trim

    try:
        rows = np.ascontiguousarray(encode_and_trim(model, batch), dtype=np.float32)
    except EmbedderError as exc:
        return ERROR, str(exc).encode()
    return VECTORS, rows.tobytes()


def main(argv: list[str]) -> int:
    # its stdin's end tells it the parent is gone, but only once it reads: a stopped or busy
    # child, in a session of its own, would outlive a parent killed with SIGKILL
    die_with_parent(signal.SIGKILL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # in its own process group already; belt
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.WARNING, format="model process: %(levelname)s %(message)s")
    from adapters.embedders.minilm_models import load_model

    answers_fd, runtime, cache_dir, threads, precision = argv
    answers = Answers(os.fdopen(int(answers_fd), "wb"))  # its own pipe: stdout goes to stderr
    try:
        try:
            model = load_model(runtime, Path(cache_dir), threads=int(threads), precision=precision)
        except Exception as exc:
            answers.send(ERROR, str(exc).encode())
            return 1
        answers.send(READY, b"")
        # texts not coerced: the tokenizer judges
        serve(answers, lambda batch: _embed(model, batch))
    except BrokenPipeError:
        return 0  # the parent is gone: nobody to answer
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
