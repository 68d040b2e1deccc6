"""Shared pieces of `memoryos bench`: fresh stacks, progress lines, percentiles, metrics."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

import numpy as np
import psutil  # type: ignore[import-untyped]

from adapters.deps import Deps
from adapters.ports import PAGES
from adapters.repository import MTM
from service.response import ResponseService
from streams.stack import Stack

_STARTED = time.perf_counter()


def say(message: str) -> None:
    """A progress line on stdout, with the seconds since the bench started."""
    print(f"[bench {time.perf_counter() - _STARTED:7.1f} s] {message}", flush=True)


def cpu_seconds() -> float:
    """CPU time of this process and its children (broker, fake LLM server) so far."""
    return sum(seconds for _, seconds in cpu_by_process().values())


def cpu_by_process() -> dict[tuple[int, float], tuple[str, float]]:
    """CPU seconds so far of this process and of each child, by (pid, start time) so that a
    child replaced by another is never taken for it, with its kind (``child_kind``)."""
    me = psutil.Process()
    found = {(me.pid, me.create_time()): ("this process", float(sum(me.cpu_times()[:2])))}
    for child in me.children(recursive=True):
        try:
            key = (child.pid, child.create_time())
            found[key] = (child_kind(child), float(sum(child.cpu_times()[:2])))
        except psutil.Error:
            continue
    return found


def cpu_spent_by_kind(
    before: dict[tuple[int, float], tuple[str, float]],
    after: dict[tuple[int, float], tuple[str, float]],
) -> dict[str, float]:
    """CPU seconds between two ``cpu_by_process`` snapshots, by kind: a child started in
    between counts whole; one that ended in between is not counted (its CPU is gone)."""
    spent: dict[str, float] = {}
    for key, (kind, seconds) in after.items():
        spent[kind] = spent.get(kind, 0.0) + seconds - before.get(key, (kind, 0.0))[1]
    return spent


def child_kind(child: psutil.Process) -> str:
    """What a child of the bench runs: the model, the text work, a broker, the fake LLM."""
    line = " ".join(child.cmdline())
    return next((kind for key, kind in _CHILD_KINDS if key in line), "other")


_CHILD_KINDS = (
    ("adapters.embedders.model_process", "model process"),
    ("adapters.llm.text_process", "text process"),
    ("tansu", "broker"),
    ("FakeOpenAI", "fake LLM server"),
)


class ChildMemory:
    """The peak resident memory of each kind of child, and the bench part it was in, sampled
    every ``every_s`` on a thread of its own: the kernel's peak for children names no child."""

    def __init__(self, every_s: float = 0.5) -> None:
        self.every_s = every_s
        self.part = "start"
        self.peaks: dict[str, tuple[float, str]] = {}  # kind -> (MB, part)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-child-memory", daemon=True)

    def __enter__(self) -> ChildMemory:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.wait(self.every_s):
            for child in me.children(recursive=True):
                try:
                    kind, mb = child_kind(child), child.memory_info().rss / 2**20
                except psutil.Error:
                    continue
                if mb > self.peaks.get(kind, (0.0, ""))[0]:
                    self.peaks[kind] = (mb, self.part)

    def report(self) -> dict[str, dict[str, float | str]]:
        return {kind: {"mb": round(mb, 1), "part": part} for kind, (mb, part) in self.peaks.items()}


def parts(stack: Stack) -> tuple[ResponseService, Deps]:
    assert stack.service is not None, "stack not started"
    assert stack.deps is not None, "stack not started"
    return stack.service, stack.deps


async def wait_placed(
    deps: Deps, pages: int, mtm_pages: int, timeout_s: float, every_s: float = 0.1
) -> float | None:
    """``time.monotonic()`` when the store holds ``pages`` pages, ``mtm_pages`` of them in MTM.

    Every turn is then in its final tier (the newest in STM, the rest placed in a segment):
    queryable everywhere. None on timeout.
    """
    deadline = time.monotonic() + timeout_s
    store = deps.store
    while time.monotonic() < deadline:
        if await store.count(PAGES) >= pages and await store.count(PAGES, None, {"tier": MTM}) >= (
            mtm_pages
        ):
            return time.monotonic()
        await asyncio.sleep(every_s)
    return None


async def verify_counts(deps: Deps, expected: dict[str, int], stm_capacity: int) -> list[str]:
    """Users whose stored pages differ from what their turns should have produced."""
    wrong = []
    for user, turns in expected.items():
        counts = await deps.repo.count_user(user)
        stm = min(turns, stm_capacity)
        if counts["short_term"] != stm or counts["mid_term_pages"] != turns - stm:
            wrong.append(f"{user}: {counts} for {turns} turns")
    return wrong


def percentiles_ms(seconds: Sequence[float]) -> dict[str, float]:
    if not seconds:
        return {"p50_ms": 0.0, "p95_ms": 0.0, "p99_ms": 0.0}
    values = np.asarray(seconds, dtype=np.float64) * 1000.0
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return {"p50_ms": round(float(p50), 2), "p95_ms": round(float(p95), 2),
            "p99_ms": round(float(p99), 2)}  # fmt: skip


class MetricsSnapshot:
    """The samples of a stack's registry at one moment; differences give what happened since."""

    def __init__(self, deps: Deps) -> None:
        self.values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        for family in deps.metrics.registry.collect():
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                self.values[key] = float(sample.value)

    def value(self, name: str, **labels: str) -> float:
        return self.values.get((name, tuple(sorted(labels.items()))), 0.0)

    def by_label(self, name: str, label: str) -> dict[str, float]:
        return {
            dict(labels)[label]: value
            for (sample, labels), value in self.values.items()
            if sample == name and label in dict(labels)
        }


def delta(after: MetricsSnapshot, before: MetricsSnapshot, name: str, **labels: str) -> float:
    return after.value(name, **labels) - before.value(name, **labels)


def delta_by_label(
    after: MetricsSnapshot, before: MetricsSnapshot, name: str, label: str
) -> dict[str, float]:
    old = before.by_label(name, label)
    return {key: value - old.get(key, 0.0) for key, value in after.by_label(name, label).items()}
