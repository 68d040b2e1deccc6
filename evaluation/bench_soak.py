"""`memoryos bench --soak MINUTES`: a steady ingest with retrievals, for memory and lag over time.

One embedded stack (broker, worker, store) in a throw-away folder, as `memoryos up` runs it.
Turns go in through the service's own path (journal first, then the broker) at a fixed rate,
round-robin over the users; a few retrievals a second run beside them. Every few seconds a
sample records this process's RSS, the broker's RSS, the store's size on disk, the consumer
lag, the pages placed and the broker rolls. Turns are made on the fly, a block per user at a
time, so the driver itself holds no growing list. At the end the pipeline drains and every
user's history is checked (``verify_histories``): each turn linked once, in order.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from adapters.deps import Deps
from adapters.ports import PAGES
from adapters.process_stats import rss_bytes
from adapters.settings import Settings
from evaluation.bench_common import parts, percentiles_ms, say
from evaluation.bench_data import START, conversation
from evaluation.fresh_stack import fresh_stack
from evaluation.memory_parts import HeapProfile, memory_parts
from memory.text import _cached_stem, phrase_tokens
from schemas.turn import TurnEvent
from service.structured import _parsed
from streams.stack import Stack

BLOCK = 24  # turns made per user at a time (two sessions)
TICK_S = 0.25


@dataclass(frozen=True)
class SoakPlan:
    minutes: float
    turns_per_s: float
    users: int
    retrieves_per_s: float
    sample_s: float = 5.0
    seed: int = 20250606
    heap_profile: bool = False  # tracemalloc snapshots at half time and at the end


@dataclass
class SoakRun:
    plan: SoakPlan
    samples: list[dict[str, float]] = field(default_factory=list)
    retrieve_s: list[float] = field(default_factory=list)
    sent: dict[str, int] = field(default_factory=dict)
    mismatched: list[str] = field(default_factory=list)
    drained_s: float = -1.0
    heap: HeapProfile = field(default_factory=HeapProfile)


def user_turns(user: str, seed: int) -> Iterator[TurnEvent]:
    """An endless conversation of one user, made a block at a time."""
    block = 0
    while True:
        rng = random.Random(f"{seed}:{user}:{block}")
        start = START + timedelta(days=3 * block)
        for item in conversation(user, BLOCK, rng, start=start, prefix=f"b{block:05d}-"):
            yield item.turn
        block += 1


def folder_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512  # on disk, like du
            except OSError:
                continue
    return total


def cache_entries_k(stack: Stack) -> dict[str, float]:
    """Entries (thousands) of the process's bounded caches: memory that grows toward a fixed
    bound as a long run meets new users, pages and words, then stays."""
    service, deps = parts(stack)
    store = getattr(deps.store, "inner", deps.store)  # under the metrics wrapper
    fields = getattr(store, "cached_field_points", 0)  # Edge only
    return {
        "cache_term_counts_k": round(len(service.term_counts) / 1000, 1),
        "cache_field_points_k": round(fields / 1000, 1),
        "cache_moments_k": round(_parsed.cache_info().currsize / 1000, 1),
        "cache_stems_k": round(_cached_stem.cache_info().currsize / 1000, 1),
        "cache_phrases_k": round(phrase_tokens.cache_info().currsize / 1000, 1),
    }


async def sample(stack: Stack, run: SoakRun, started: float) -> dict[str, float]:
    _, deps = parts(stack)
    lag = -1
    if stack.lag is not None:
        try:
            lag = sum((await stack.lag.lag()).values())
        except Exception:  # mid-roll the probe is being replaced: no figure this time
            lag = -1
    broker_pid = stack.broker.pid if stack.broker is not None else None
    store = stack.settings.data_dir / "qdrant"
    return {
        "t_s": round(time.monotonic() - started, 1),
        "turns_sent": sum(run.sent.values()),
        "pages_stored": await deps.store.count(PAGES),
        "process_rss_mb": round(rss_bytes(os.getpid()) / 2**20, 1),
        **memory_parts(os.getpid(), stack.settings.data_dir),
        "broker_rss_mb": round(rss_bytes(broker_pid) / 2**20, 1),
        "store_mb": round(await asyncio.to_thread(folder_bytes, store) / 2**20, 1),
        "data_dir_mb": round(
            await asyncio.to_thread(folder_bytes, stack.settings.data_dir) / 2**20, 1
        ),
        "consumer_lag": lag,
        **cache_entries_k(stack),
        "broker_rolls": stack.watch.rolls if stack.watch is not None else 0,
        "visits_lost": _visits_lost(stack),
        "load_1min": round(os.getloadavg()[0], 2),
    }


async def _ingest(stack: Stack, plan: SoakPlan, run: SoakRun, deadline: float) -> None:
    service, _ = parts(stack)
    users = [f"soak-u{index:04d}" for index in range(plan.users)]
    streams = {user: user_turns(user, plan.seed) for user in users}
    began, turn = time.monotonic(), 0
    while time.monotonic() < deadline:
        # paced by the clock, not by the ticks: a slow send is caught up, not lost
        due = int(plan.turns_per_s * (time.monotonic() - began))
        batch = []
        for _ in range(due - turn):
            user = users[turn % len(users)]
            batch.append(next(streams[user]))
            run.sent[user] = run.sent.get(user, 0) + 1
            turn += 1
        if batch:
            await service.add_turns(batch)
        await asyncio.sleep(TICK_S)


async def _retrieve(stack: Stack, plan: SoakPlan, run: SoakRun, deadline: float) -> None:
    service, _ = parts(stack)
    rng = random.Random(plan.seed)
    queries = ("what did I plan for the trip", "my training schedule", "the budget", "recipes")
    while time.monotonic() < deadline and plan.retrieves_per_s > 0:
        await asyncio.sleep(1.0 / plan.retrieves_per_s)
        user = f"soak-u{rng.randrange(plan.users):04d}"
        began = time.perf_counter()
        await service.retrieve(user, rng.choice(queries))
        run.retrieve_s.append(time.perf_counter() - began)


def _visits_lost(stack: Stack) -> float:
    """Retrieval visits not recorded so far (sent off the request's path; a roll's gate can
    outlast a send's bound)."""
    if stack.deps is None:
        return 0.0
    metric = stack.deps.metrics.visits_lost
    return sum(sample.value for family in metric.collect() for sample in family.samples
               if sample.name.endswith("_total"))  # fmt: skip


async def wait_drained(stack: Stack, timeout_s: float) -> bool:
    """Lag 0 and no journaled turn unplaced, twice in a row, asking the stack's current probe
    each time (a roll replaces it). Lag alone is not enough: turns still in the producer's
    buffer are on no partition yet, and a 100,000-turn run's check, made at lag 0, found the
    newest turn of 25 users not placed."""
    started, deadline, quiet = time.monotonic(), time.monotonic() + timeout_s, 0
    lag_zero_s: float | None = None
    while time.monotonic() < deadline and quiet < 2:
        try:
            lag = await stack.lag.lag() if stack.lag is not None else {}
            idle = bool(lag) and not any(lag.values())
            if idle and lag_zero_s is None:
                lag_zero_s = time.monotonic() - started
            unplaced = await stack.journal.pending(limit=1)
            quiet = quiet + 1 if idle and not unplaced else 0
        except Exception:  # a probe stopped by a roll, or a slow broker: ask again
            quiet = 0
        if quiet < 2:
            await asyncio.sleep(1.0)
    say(f"soak: lag first 0 after {lag_zero_s} s; drained after {time.monotonic() - started:.1f} s")
    return quiet >= 2


async def run_soak(settings: Settings, plan: SoakPlan) -> SoakRun:
    run = SoakRun(plan)
    async with fresh_stack(settings, drain_timeout_s=30.0, prefix="memoryos-soak-") as stack:
        started = time.monotonic()
        deadline = started + plan.minutes * 60
        if plan.heap_profile:
            run.heap.start()
        halfway: float | None = started + plan.minutes * 30 if plan.heap_profile else None
        tasks = [
            asyncio.create_task(_ingest(stack, plan, run, deadline)),
            asyncio.create_task(_retrieve(stack, plan, run, deadline)),
        ]
        while not all(task.done() for task in tasks):
            point = await sample(stack, run, started)
            run.samples.append(point)
            say(" ".join(f"{k}={v}" for k, v in point.items()))
            if halfway is not None and time.monotonic() >= halfway:
                run.heap.mark()  # after warm-up: the second half's growth is what stays
                halfway = None
            await asyncio.wait(tasks, timeout=plan.sample_s)
        run.heap.finish()
        for task in tasks:
            task.result()  # a failed driver fails the run
        say("soak: ingest over; waiting for the pipeline to drain")
        if await wait_drained(stack, 900.0):
            run.drained_s = round(time.monotonic() - started, 1)
        run.samples.append(await sample(stack, run, started))
        _, deps = parts(stack)
        run.mismatched = await verify_histories(deps, run.sent, settings, plan.seed)
    return run


async def verify_histories(
    deps: Deps, sent: dict[str, int], settings: Settings, seed: int
) -> list[str]:
    """Users whose memory does not show each of their turns linked exactly once, in order.

    Page counts alone cannot tell once MTM is full: past ``mtm_capacity`` segments a user's
    coldest segment is evicted with its pages (the paper's design), so a long soak has fewer
    pages than turns. The chain numbers every linked turn (``seq`` = 1, 2, ...), so the
    newest page's seq equals the turns sent only if none was lost or linked twice; the STM
    window must hold the newest turns in order; and MTM may hold fewer pages than the rest
    only when the user's segments are at capacity.
    """
    wrong = []
    for user, turns in sent.items():
        ids = [turn.turn_id for turn in itertools.islice(user_turns(user, seed), turns)]
        window = await deps.repo.stm_pages(user, with_vectors=False)
        counts = await deps.repo.count_user(user)
        newest = window[-1].seq if window else 0
        expected_window = ids[-min(turns, settings.stm_capacity) :]
        rest = turns - len(expected_window)
        full = counts["segments"] >= settings.mtm_capacity
        if (
            [page.turn_id for page in window] != expected_window
            or newest != turns
            or counts["mid_term_pages"] > rest
            or (counts["mid_term_pages"] < rest and not full)
        ):
            where = chain_shifts(ids, await deps.store.scroll(PAGES, user))
            wrong.append(f"{user}: newest seq {newest}, {counts} for {turns} turns; {where}")
    return wrong


def chain_shifts(ids: list[str], points: list[Any]) -> str:
    """Where a user's chain numbering leaves the turn order: the ``n``-th turn sent should be
    page seq ``n``. Each stored page whose seq is not its turn's position marks a turn lost
    (seq lower) or linked twice (seq higher) before it; evicted pages leave gaps, so this
    names the last page still in step and the first one out of step, with their tiers."""
    position = {turn_id: n for n, turn_id in enumerate(ids, start=1)}
    rows = sorted(
        (position.get(str(p.payload.get("turn_id")), 0), int(p.payload.get("seq", 0)),
         str(p.payload.get("tier")))
        for p in points
    )  # fmt: skip
    unknown = sum(1 for n, _, _ in rows if n == 0)
    in_step = [row for row in rows if row[0] and row[0] == row[1]]
    off = [row for row in rows if row[0] and row[0] != row[1]]
    if not off:
        return f"chain in step over {len(rows)} stored pages ({unknown} of unknown turns)"
    last = max((row for row in in_step if row[0] < off[0][0]), default=None)
    return (
        f"last in step: turn {last[0] if last else None} ({last[2] if last else '-'}); "
        f"first out of step: turn {off[0][0]} as seq {off[0][1]} ({off[0][2]}); "
        f"{len(off)} of {len(rows)} stored pages out of step, {unknown} of unknown turns"
    )


PARTS = (
    "process_rss_mb", "rss_anon_mb", "rss_file_mb", "rss_data_files_mb", "malloc_in_use_mb",
    "malloc_free_mb", "malloc_arenas", "pymalloc_arenas_mb", "pymalloc_in_use_mb",
    "pymalloc_free_mb", "traced_mb", "py_blocks_k", "store_mb", "pages_stored",
)  # fmt: skip


def summary(run: SoakRun) -> dict[str, Any]:
    """Peaks, and the slope over the second half: flat memory shows as ~0 MB per 1,000 turns."""
    points = [p for p in run.samples if p["turns_sent"] > 0]
    half = [p for p in points if p["t_s"] >= points[-1]["t_s"] / 2] if points else []

    def slope(key: str) -> float:
        """MB per 1,000 turns, least squares over the second half: the rolls' and vacuums'
        saw-teeth would swing a slope taken between two samples."""
        rows = [p for p in half if key in p]
        if len(rows) < 2:
            return 0.0
        xs = [p["turns_sent"] / 1000 for p in rows]
        try:
            return round(statistics.linear_regression(xs, [p[key] for p in rows]).slope, 2)
        except statistics.StatisticsError:  # no turns sent over the half
            return 0.0

    def peak(key: str, among: list[dict[str, float]]) -> float:
        return max((p[key] for p in among), default=0.0)

    lags = [p["consumer_lag"] for p in points if p["consumer_lag"] >= 0]
    turns = sum(run.sent.values())
    elapsed = points[-1]["t_s"] if points else 0.0
    return {
        "turns": turns,
        "users": run.plan.users,
        "elapsed_s": elapsed,
        "turns_per_s": round(turns / elapsed, 2) if elapsed else 0.0,
        "retrieves": len(run.retrieve_s),
        "retrieve": percentiles_ms(run.retrieve_s),
        "visits_lost": int(points[-1].get("visits_lost", 0)) if points else 0,
        "broker_rolls": int(points[-1]["broker_rolls"]) if points else 0,
        "process_rss_mb_peak": peak("process_rss_mb", points),
        "process_rss_mb_peak_second_half": peak("process_rss_mb", half),
        "broker_rss_mb_peak": peak("broker_rss_mb", points),
        "process_rss_mb_per_1000_turns_second_half": slope("process_rss_mb"),
        "mb_per_1000_turns_second_half": {
            key: slope(key) for key in PARTS if any(key in p for p in half)
        },
        "store_mb_end": points[-1]["store_mb"] if points else 0.0,
        "consumer_lag_max": max(lags, default=0),
        "drained_after_s": run.drained_s,
        "users_with_wrong_counts": len(run.mismatched),
    }
