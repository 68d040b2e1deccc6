"""MiniLM in a process of its own (``MEMORYOS_MINILM_HOST=process``, the default): the same
vectors as in a thread, answers in order whatever callers give up, a dead child reported and
replaced, a close that answers what was sent, and no child left behind by a killed parent."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adapters import event_loop
from adapters.embedders.minilm import MiniLMEmbedder
from adapters.embedders.model_process import ProcessHost, model_pids
from adapters.settings import Settings
from schemas.errors import EmbedderError
from tests.support.paths import ROOT
from tests.support.stacks import child_outlives_killed_parent, model_processes, running

TEXTS = [
    "When is my sister's birthday?",
    "I booked the Lisbon hotel for three nights.",
    "order 1234 arrived broken 😞",
    "",
]


def host(precision: str = "int8") -> ProcessHost:
    return ProcessHost("onnx", Settings().model_cache_path, 1, precision)


@pytest.mark.parametrize("precision", ["int8", "fp32"])
async def test_the_process_gives_the_vectors_the_thread_gives(precision: str) -> None:
    settings = {"minilm_precision": precision}
    in_process = MiniLMEmbedder(Settings(**settings, minilm_host="process"), cache_size=0)
    in_thread = MiniLMEmbedder(Settings(**settings, minilm_host="thread"), cache_size=0)
    try:
        assert await in_process.embed(TEXTS) == await in_thread.embed(TEXTS)
        assert len(model_pids()) >= 1
    finally:
        await in_process.close()
        await in_thread.close()


async def test_answers_stay_in_order_when_a_caller_gives_up() -> None:
    models = host()
    try:
        alone = {text: await models.encode([text]) for text in TEXTS}
        given_up = asyncio.create_task(models.encode([TEXTS[0]]))
        kept = [asyncio.create_task(models.encode([text])) for text in TEXTS[1:]]
        await asyncio.sleep(0)  # the first request is written before it is cancelled
        given_up.cancel()
        for text, task in zip(TEXTS[1:], kept, strict=True):
            assert np.array_equal(await task, alone[text])
    finally:
        await models.close()


async def test_a_text_with_no_utf8_is_an_embedder_error_and_the_child_goes_on() -> None:
    models = host()
    try:
        with pytest.raises(EmbedderError, match="could not embed"):
            await models.encode(["fine", "lone \ud800 surrogate"])
        (vector,) = await models.encode(["fine"])
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
    finally:
        await models.close()


async def test_a_killed_child_fails_its_batches_and_the_next_batch_starts_another() -> None:
    models = host()
    try:
        await models.encode(["warm up"])
        first = models.pid
        assert first is not None
        in_flight = [asyncio.create_task(models.encode([f"text {i}"] * 8)) for i in range(20)]
        await asyncio.sleep(0.01)
        os.kill(first, signal.SIGKILL)
        outcomes = await asyncio.gather(*in_flight, return_exceptions=True)
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        assert failures, "a batch was in flight when the child died"
        assert all(isinstance(f, EmbedderError) for f in failures), failures
        assert any("ended (exit code -9)" in str(f) for f in failures), failures
        (vector,) = await models.encode(["after the crash"])
        assert models.pid not in (None, first)
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
    finally:
        await models.close()


async def test_close_answers_what_was_sent_and_the_child_exits() -> None:
    models = host()
    await models.encode(["warm up"])
    pid = models.pid
    assert pid is not None
    sent = [asyncio.create_task(models.encode([f"question {i}"] * 8)) for i in range(10)]
    await asyncio.sleep(0)  # every request is written before the close
    await models.close()
    assert all(len(rows) == 8 for rows in await asyncio.gather(*sent))
    assert not running(pid)
    assert models.pid is None


@pytest.mark.parametrize("run", [asyncio.run, event_loop.run], ids=["asyncio", "uvloop"])
def test_a_host_used_from_two_event_loops_starts_a_child_for_each(
    run: Callable[[Coroutine[Any, Any, Any]], Any],
) -> None:
    """Two loops in turn (a CLI command, a test): the first loop's child is killed."""
    models = host()

    async def encode() -> tuple[Any, int | None]:
        (rows,) = await models.encode(["one"])
        return rows, models.pid  # read on the loop: a closed uvloop may have reaped the child

    first, first_pid = run(encode())
    second, second_pid = run(encode())
    assert np.array_equal(first, second)
    assert first_pid is not None
    assert second_pid is not None
    assert second_pid != first_pid
    run(models.close())


async def test_a_child_that_never_says_ready_is_killed_at_the_start_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child hung before its "ready" (an import that never returns, say)."""
    pid_file = tmp_path / "pid"
    (tmp_path / "hung_child.py").write_text(
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))

    class Hung(ProcessHost):
        module = "hung_child"
        start_s = 2.0

    models = Hung("onnx", tmp_path, 1, "int8")
    with pytest.raises(EmbedderError, match="did not say it was ready within 2 s: killed"):
        await models.encode(["hello"])
    assert models.pid is None
    assert not running(int(pid_file.read_text()))


async def test_a_model_that_cannot_load_is_a_clear_error(tmp_path: Path) -> None:
    blocked = tmp_path / "models"
    blocked.write_text("a file where the cache folder should be")
    models = ProcessHost("onnx", blocked, 1, "int8")
    with pytest.raises(EmbedderError, match="cannot load all-MiniLM-L6-v2"):
        await models.encode(["hello"])


@pytest.mark.parametrize("stopped", [False, True], ids=["idle", "stopped"])
def test_no_child_outlives_a_parent_killed_by_sigkill(stopped: bool) -> None:
    """A stopped child reads no end of its stdin: only the kernel's parent-death signal ends it."""
    script = textwrap.dedent(
        f"""
        import asyncio, os, signal, sys, time
        from pathlib import Path
        from adapters.embedders.model_process import ProcessHost

        async def main():
            models = ProcessHost("onnx", Path({str(Settings().model_cache_path)!r}), 1, "int8")
            await models.encode(["hello"])
            if {stopped!r}:
                os.kill(models.pid, signal.SIGSTOP)
            print(models.pid, flush=True)
            await asyncio.sleep(600)

        asyncio.run(main())
        """
    )
    assert not child_outlives_killed_parent(script), "the model process outlived its killed parent"


def own_model_processes() -> set[int]:
    return {pid for pid in model_processes(os.getpid()) if running(pid)}


async def test_a_caller_cancelled_while_the_child_starts_leaves_no_child() -> None:
    before = own_model_processes()
    models = host()
    starting = asyncio.create_task(models.encode(["hello"]))
    for _ in range(1000):  # cancelled as soon as the child exists: it is still importing
        if own_model_processes() - before:
            break
        await asyncio.sleep(0.005)
    assert not starting.done(), "the child answered before it could be cancelled"
    starting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await starting
    for _ in range(100):  # 10 s for the kill to be seen
        if not own_model_processes() - before:
            break
        await asyncio.sleep(0.1)
    assert not own_model_processes() - before, "the half-started child was left running"
    (vector,) = await models.encode(["hello"])  # the next call starts a child of its own
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
    await models.close()


async def test_a_close_while_the_child_starts_waits_for_it_and_stops_it() -> None:
    before = own_model_processes()
    models = host()
    starting = asyncio.create_task(models.encode(["hello"]))
    await asyncio.sleep(0.1)
    await models.close()
    (vector,) = await starting  # sent before the close: answered
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
    assert not own_model_processes() - before, "a child outlived the close"


async def test_what_the_child_prints_never_lands_in_an_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module that prints at import (here a sitecustomize), or a same-named module in the
    working folder, must not reach the answers: they have a pipe of their own, and ``-P``
    keeps the working folder off the child's path."""
    printing = tmp_path / "site"
    printing.mkdir()
    (printing / "sitecustomize.py").write_text("print('hello from sitecustomize')\n")
    shadow = tmp_path / "cwd"
    shadow.mkdir()
    (shadow / "orjson.py").write_text("raise SystemExit('the working folder was imported')\n")
    # (an empty entry in PYTHONPATH would name the working folder itself)
    paths = [str(printing), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    monkeypatch.chdir(shadow)
    models = host()
    try:
        (vector,) = await asyncio.wait_for(models.encode(["hello"]), 60)
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
    finally:
        await models.close()


async def test_the_model_processes_memory_and_starts_are_on_the_metrics(tmp_path: Path) -> None:
    from adapters.wiring import build_deps, close_deps

    others = set(model_pids())
    deps = await build_deps(Settings(data_dir=tmp_path))
    try:
        await deps.embedder.embed(["warm"])

        def sample(name: str) -> float:
            value = deps.metrics.registry.get_sample_value(name)
            assert value is not None, name
            return value

        assert sample("memoryos_model_process_resident_bytes") > 10 * 2**20
        before = sample("memoryos_model_process_starts_total")
        assert before >= 1
        for pid in set(model_pids()) - others:  # this stack's child only
            os.kill(pid, signal.SIGKILL)
        for _ in range(100):  # the batch right after the kill may still go to the dead child
            with contextlib.suppress(EmbedderError):
                await deps.embedder.embed([f"after {_}"])
                break
        assert sample("memoryos_model_process_starts_total") > before
    finally:
        await close_deps(deps)


def test_a_child_whose_work_fails_unexpectedly_ends() -> None:
    """A failure the work did not expect ends the child (its parent then fails what it sent,
    and the next request starts another): it never lives on without answering."""
    script = textwrap.dedent(
        """
        import io, os
        from adapters.embedders.model_process import Answers, serve

        def work(request):
            raise RuntimeError("unexpected")

        serve(Answers(io.BytesIO()), work)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT
    )
    assert child.stdin is not None
    body = b'["hello"]'
    child.stdin.write(len(body).to_bytes(4, "little") + body)
    child.stdin.flush()  # and stdin stays open: the parent is alive
    try:
        assert child.wait(30) == 1
    finally:
        child.kill()
        child.wait()
    assert child.stderr is not None
    assert b"RuntimeError: unexpected" in child.stderr.read()
