"""Bench parts 1 and 2: the embedder's ceiling, and turns through the whole pipeline.

The ceiling embeds exactly the texts the ingest will embed (the chain agent's query+response
text of each turn), with a separate embedder instance so the ingest's own cache starts cold,
in batches of ``embedding_batch_size``. The ingest then sends the same turns through Kafka
and stops the clock when every page is in its final tier (the newest ``stm_capacity`` per
user in STM, the rest placed in a mid-term segment); the store's counts are verified per
user once the pipeline is idle.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from adapters.embedders import build_embedder
from adapters.settings import Settings
from evaluation.bench_common import (
    MetricsSnapshot,
    cpu_by_process,
    cpu_seconds,
    cpu_spent_by_kind,
    delta,
    delta_by_label,
    parts,
    say,
    verify_counts,
    wait_placed,
)
from evaluation.bench_data import SyntheticTurn, conversation, embedded_text, interleaved
from evaluation.fresh_stack import fresh_stack
from streams.stack import Stack

WARMUP_USER = "bench-warmup"
BASE_TIMEOUT_S = 120.0
PER_TURN_TIMEOUT_S = 0.5


@dataclass
class IngestResult:
    users: int
    turns_per_user: int
    turns: int = 0
    send_s: float = 0.0
    placed_s: float = 0.0
    idle_s: float = 0.0
    turns_per_s: float = 0.0
    embedder_texts_per_s: float = 0.0  # the mean of the ceiling measured before and after
    ceiling_runs: tuple[float, ...] = ()
    texts_per_turn: float = 0.0
    embed_calls: int = 0
    ratio_to_ceiling: float = 0.0
    embedder: str = ""  # the name the run's store recorded: which vectors were measured
    cpu_cores_used: float = 0.0
    # the event loop's thread (the worker's stages and the service): CPU per turn is what tells
    # two runs apart on a machine whose speed drifts
    loop_cpu_ms_per_turn: float = 0.0
    # CPU per turn of this process and of each child (cpu_by_process): where the cores went
    cpu_ms_per_turn_by_process: dict[str, float] = field(default_factory=dict)
    embed_busy_s: float = 0.0
    stage_busy_s: dict[str, float] = field(default_factory=dict)
    stage_events: dict[str, float] = field(default_factory=dict)
    llm_busy_s: dict[str, float] = field(default_factory=dict)
    store_busy_s: dict[str, float] = field(default_factory=dict)
    mismatched: list[str] = field(default_factory=list)
    bytes_per_turn: dict[str, float] = field(default_factory=dict)  # by topic
    records_per_turn: dict[str, float] = field(default_factory=dict)  # by topic

    def set_ceiling(self, *runs: float) -> None:
        """The embedder's ceiling (texts/s), and the pipeline's embedding work against it."""
        self.ceiling_runs = runs
        self.embedder_texts_per_s = sum(runs) / len(runs) if runs else 0.0
        if self.embedder_texts_per_s > 0:
            texts_per_s = self.turns_per_s * self.texts_per_turn
            self.ratio_to_ceiling = texts_per_s / self.embedder_texts_per_s


def make_conversations(users: int, turns: int, seed: int) -> list[list[SyntheticTurn]]:
    rng = random.Random(seed)
    return [conversation(f"bench-u{index:05d}", turns, rng) for index in range(users)]


async def embedder_ceiling(settings: Settings, texts: Sequence[str]) -> float:
    """Texts per second for ``texts`` alone, batched as the pipeline batches them."""
    embedder = build_embedder(settings)
    size = settings.embedding_batch_size
    try:
        # load the model and run one full batch of other texts: first batches are slow
        warm = conversation("bench-ceiling-warmup", size, random.Random(-1))
        await embedder.embed([embedded_text(item.turn) for item in warm])
        started = time.perf_counter()
        for start in range(0, len(texts), size):
            await embedder.embed(texts[start : start + size])
        elapsed = time.perf_counter() - started
    finally:
        await embedder.close()
    return len(texts) / elapsed if elapsed > 0 else 0.0


async def warm_up(stack: Stack, settings: Settings, seed: int) -> int:
    """Send one user of its own through every stage (model load, first batches); its pages."""
    service, deps = parts(stack)
    turns = conversation(WARMUP_USER, settings.stm_capacity + 3, random.Random(seed), prefix="w")
    await service.add_turns([item.turn for item in turns])
    placed = await wait_placed(deps, len(turns), 3, BASE_TIMEOUT_S)
    if placed is None:
        raise RuntimeError("the warm-up user did not come through the pipeline")
    return len(turns)


async def measure_ingest(
    settings: Settings,
    conversations: list[list[SyntheticTurn]],
    seed: int,
    chunk: int | None = None,
) -> IngestResult:
    """Every turn through the pipeline; ``chunk`` sends them as requests of that many turns
    (each one journaled and acknowledged on its own, as the HTTP batch route does)."""
    users, per_user = len(conversations), len(conversations[0]) if conversations else 0
    result = IngestResult(users=users, turns_per_user=per_user)
    async with fresh_stack(settings, prefix="memoryos-bench-") as stack:
        service, deps = parts(stack)
        result.embedder = deps.embedder.name
        warm = await warm_up(stack, settings, seed)
        turns = interleaved(conversations)
        result.turns = len(turns)
        stm = settings.stm_capacity
        mtm_expected = sum(max(0, len(c) - stm) for c in conversations)
        timeout = BASE_TIMEOUT_S + PER_TURN_TIMEOUT_S * len(turns)
        say(f"ingest: sending {len(turns)} turns of {users} users through Kafka")
        before, cpu_before = MetricsSnapshot(deps), cpu_seconds()
        by_process = cpu_by_process()
        loop_before = time.thread_time()
        started = time.monotonic()
        step = chunk or len(turns) or 1
        for start in range(0, len(turns), step):
            await service.add_turns(turns[start : start + step])
        result.send_s = time.monotonic() - started
        placed = await wait_placed(deps, warm + len(turns), 3 + mtm_expected, timeout)
        if placed is None:
            raise RuntimeError(f"ingest did not complete within {timeout:.0f} s")
        after, cpu_after = MetricsSnapshot(deps), cpu_seconds()
        loop_s = time.thread_time() - loop_before
        if turns:
            result.loop_cpu_ms_per_turn = round(1000 * loop_s / len(turns), 2)
            spent = cpu_spent_by_kind(by_process, cpu_by_process())
            result.cpu_ms_per_turn_by_process = {
                kind: round(1000 * seconds / len(turns), 2) for kind, seconds in spent.items()
            }
        result.placed_s = placed - started
        idle = await stack.wait_idle(timeout)  # the lag probe sees commits (every 1 s) late
        result.idle_s = time.monotonic() - started if idle else -1.0
        result.mismatched = await verify_counts(
            deps, {c[0].turn.user_id: len(c) for c in conversations if c}, stm
        )
    _fill_rates(result, before, after, cpu_after - cpu_before)
    return result


def _fill_rates(
    result: IngestResult, before: MetricsSnapshot, after: MetricsSnapshot, cpu_s: float
) -> None:
    texts = delta(after, before, "memoryos_embedding_batch_size_sum")
    result.embed_calls = int(delta(after, before, "memoryos_embedding_batch_size_count"))
    result.texts_per_turn = texts / result.turns if result.turns else 0.0
    result.turns_per_s = result.turns / result.placed_s if result.placed_s > 0 else 0.0
    result.cpu_cores_used = cpu_s / result.placed_s if result.placed_s > 0 else 0.0
    result.embed_busy_s = delta(after, before, "memoryos_embedding_duration_seconds_sum")
    result.stage_busy_s = delta_by_label(
        after, before, "memoryos_stage_duration_seconds_sum", "stage"
    )
    result.stage_events = delta_by_label(
        after, before, "memoryos_stage_duration_seconds_count", "stage"
    )
    result.llm_busy_s = delta_by_label(
        after, before, "memoryos_llm_request_duration_seconds_sum", "task"
    )
    produced = delta_by_label(after, before, "memoryos_produced_bytes_total", "topic")
    result.bytes_per_turn = {
        topic: round(value / result.turns, 1) for topic, value in produced.items() if result.turns
    }
    records = delta_by_label(after, before, "memoryos_produced_records_total", "topic")
    result.records_per_turn = {
        topic: round(value / result.turns, 2) for topic, value in records.items() if result.turns
    }
    result.store_busy_s = delta_by_label(
        after, before, "memoryos_store_operation_duration_seconds_sum", "operation"
    )
