"""Bench part 4: retrieve and respond latency on a LoCoMo-sized store, and read-your-writes.

Pushing 300k turns through the pipeline at a few hundred embeddings per second would take
hours, so this store is SEEDED directly through ``MemoryRepository`` (``bench_seed``).
Latency is then measured one call at a time, so it is service time, not queueing.
Read-your-writes goes through the real pipeline: a turn is posted with ``add_turns`` and
``retrieve`` is polled until the turn is in ``short_term``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from adapters.deps import Deps
from adapters.embedders.model_process import model_pids
from adapters.process_stats import cpu_seconds
from adapters.settings import Settings
from evaluation.bench_common import (
    MetricsSnapshot,
    delta,
    parts,
    percentiles_ms,
    say,
)
from evaluation.bench_data import START, Topic, query_for
from evaluation.bench_seed import seed_user
from evaluation.fresh_stack import fresh_stack
from schemas.filters import Filters
from schemas.turn import TurnEvent
from service.response import ResponseService

WARMUP_CALLS = 20
CHANNELS = ("web", "sms", "app")  # the seeded turns' channels (bench_data)
TURNS_A_DAY = 12  # as bench_data seeds them
RYW_TIMEOUT_S = 30.0
RYW_POLL_S = 0.005


@dataclass
class LatencyResult:
    users: int
    turns_per_user: int
    segments_per_user: int
    points_seeded: int = 0
    seed_s: float = 0.0
    retrieve_s: list[float] = field(default_factory=list)
    # the same retrieves, each right after its unfiltered twin, scoped to one channel and the
    # later half of the user's time: what filters cost, side by side
    filtered_s: list[float] = field(default_factory=list)
    filtered_hits: float = 0.0  # mean MTM pages a filtered retrieve returned
    respond_s: list[float] = field(default_factory=list)
    ryw_s: list[float] = field(default_factory=list)
    ryw_timeouts: int = 0
    distinct_queries: int = 0
    mid_term_hits: float = 0.0  # mean MTM pages returned per retrieve
    # what the retrievals set off in the worker of the same process while they were timed
    background: dict[str, float] = field(default_factory=dict)
    concurrent: list[dict[str, float]] = field(default_factory=list)  # one row per caller count

    def summary(self) -> dict[str, Any]:
        ryw = percentiles_ms(self.ryw_s)
        return {
            "retrieve": percentiles_ms(self.retrieve_s),
            "retrieve_filtered": percentiles_ms(self.filtered_s),
            "respond": percentiles_ms(self.respond_s),
            "read_your_writes_ms": {"p50": ryw["p50_ms"], "p99": ryw["p99_ms"]},
        }


async def _flush(deps: Deps) -> None:
    """Write the bulk load out of the WAL, as a store that has run for a while would have."""
    inner = getattr(deps.store, "inner", deps.store)
    flush = getattr(inner, "flush", None)
    if flush is not None:
        await flush()


async def measure_latency(
    settings: Settings,
    users: int,
    turns_per_user: int,
    segments_per_user: int,
    retrieves: int,
    responds: int,
    ryw_tries: int,
    seed: int,
) -> LatencyResult:
    result = LatencyResult(users, turns_per_user, segments_per_user)
    rng, vectors = random.Random(seed), np.random.default_rng(seed)
    # retrieval events may still be queued for the heat agent at the end: nothing to keep
    async with fresh_stack(settings, drain_timeout_s=1.0) as stack:
        service, deps = parts(stack)
        say(f"latency: seeding {users} users x {turns_per_user} turns into the store")
        started = time.perf_counter()
        topics: list[tuple[str, list[Topic]]] = []
        for index in range(users):
            user = f"bench-u{index:05d}"
            user_topics, points = await seed_user(
                deps, user, turns_per_user, segments_per_user, rng, vectors
            )
            topics.append((user, user_topics))
            result.points_seeded += points
            if (index + 1) % max(1, users // 10) == 0:
                say(f"latency: seeded {index + 1}/{users} users ({result.points_seeded} points)")
        await _flush(deps)
        result.seed_s = time.perf_counter() - started
        before = MetricsSnapshot(deps)
        await _time_calls(service, topics, rng, retrieves, responds, result)
        after = MetricsSnapshot(deps)
        result.background = {
            "heat_events": delta(after, before, "memoryos_events_total", stage="mtm", outcome="ok"),
            "persona_updates": delta(
                after, before, "memoryos_memory_transitions_total", transition="persona_update"
            ),
            "heat_busy_s": delta(after, before, "memoryos_stage_duration_seconds_sum", stage="mtm"),
            "persona_busy_s": delta(
                after, before, "memoryos_stage_duration_seconds_sum", stage="persona"
            ),
        }
        await _read_your_writes(service, topics, ryw_tries, result)
    return result


async def _time_calls(
    service: ResponseService,
    topics: list[tuple[str, list[Topic]]],
    rng: random.Random,
    retrieves: int,
    responds: int,
    result: LatencyResult,
) -> None:
    def pick() -> tuple[str, str]:
        user, own = rng.choice(topics)
        return user, query_for(rng.choice(own), rng)

    for _ in range(WARMUP_CALLS):  # first calls: embedder thread, code paths
        await service.respond(*pick())
    say(f"latency: {retrieves} retrieves, one at a time")
    queries, hits, scoped_hits = set(), 0, 0
    # the later half of a user's seeded days, on one channel: about a sixth of the pages
    after = START + timedelta(days=result.turns_per_user // (2 * TURNS_A_DAY))
    for index in range(retrieves):
        user, query = pick()
        queries.add(query)
        started = time.perf_counter()
        memory = await service.retrieve(user, query)
        result.retrieve_s.append(time.perf_counter() - started)
        hits += len(memory.mid_term)
        scope = Filters(channel=CHANNELS[index % len(CHANNELS)], after=after)
        started = time.perf_counter()
        scoped = await service.retrieve(user, query, filters=scope)
        result.filtered_s.append(time.perf_counter() - started)
        scoped_hits += len(scoped.mid_term)
    result.distinct_queries = len(queries)
    result.mid_term_hits = hits / max(1, retrieves)
    result.filtered_hits = scoped_hits / max(1, retrieves)
    for callers in CONCURRENT_CALLERS:
        calls = max(retrieves, 4 * callers)
        say(f"latency: {calls} retrieves, {callers} concurrent callers")
        result.concurrent.append(await _concurrent_retrieves(service, pick, callers, calls))
    say(f"latency: {responds} responds (offline LLM), one at a time")
    for _ in range(responds):
        user, query = pick()
        started = time.perf_counter()
        await service.respond(user, query)
        result.respond_s.append(time.perf_counter() - started)


CONCURRENT_CALLERS = (1, 4, 16, 64)


async def _concurrent_retrieves(
    service: ResponseService, pick: Callable[[], tuple[str, str]], callers: int, calls: int
) -> dict[str, float]:
    """``calls`` retrieves from ``callers`` concurrent callers: throughput and latency."""
    todo = [pick() for _ in range(calls)]
    latencies: list[float] = []

    async def caller() -> None:
        while todo:
            user, query = todo.pop()
            started = time.perf_counter()
            await service.retrieve(user, query)
            latencies.append(time.perf_counter() - started)

    # CPU time per retrieve tells two runs apart on a machine whose speed drifts: the loop
    # thread's (this coroutine's thread: the service and the worker's stages) and the process's.
    # The model's own process (MEMORYOS_MINILM_HOST=process) counts apart: its CPU is not
    # this process's, and a retrieve's full cost is the two together.
    models = model_pids()
    loop_cpu, process_cpu = time.thread_time(), time.process_time()
    model_cpu = sum(cpu_seconds(pid) for pid in models)
    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    elapsed = time.perf_counter() - started
    loop_cpu, process_cpu = time.thread_time() - loop_cpu, time.process_time() - process_cpu
    model_cpu = sum(cpu_seconds(pid) for pid in models) - model_cpu
    return {
        "callers": callers,
        "calls": calls,
        "retrieves_per_s": round(calls / elapsed, 1) if elapsed > 0 else 0.0,
        **percentiles_ms(latencies),
        "loop_cpu_ms_per_call": round(1000 * loop_cpu / calls, 2) if calls else 0.0,
        "process_cpu_ms_per_call": round(1000 * process_cpu / calls, 2) if calls else 0.0,
        "model_process_cpu_ms_per_call": round(1000 * model_cpu / calls, 2) if calls else 0.0,
    }


async def _read_your_writes(
    service: ResponseService,
    topics: list[tuple[str, list[Topic]]],
    tries: int,
    result: LatencyResult,
) -> None:
    say(f"latency: read-your-writes, {tries} turns")
    for attempt in range(tries):
        user = topics[attempt % len(topics)][0]
        turn = TurnEvent(
            user_id=user,
            turn_id=f"ryw{attempt:05d}",
            query=f"Note for later, number {attempt}: my locker code is {1000 + attempt}.",
            response="Noted, I will remember your locker code.",
            timestamp=datetime.now(UTC),
        )
        started = time.perf_counter()
        await service.add_turns([turn])
        while time.perf_counter() - started < RYW_TIMEOUT_S:
            memory = await service.retrieve(user, turn.query)
            if any(page.turn_id == turn.turn_id for page in memory.short_term):
                result.ryw_s.append(time.perf_counter() - started)
                break
            await asyncio.sleep(RYW_POLL_S)
        else:
            result.ryw_timeouts += 1
