"""`memoryos bench --out DIR [--quick]`: throughput and latency, one run on one machine.

1. the embedder's ceiling (texts/s, the ingest's own texts, batched);
2. end-to-end ingest through Kafka with the offline LLM (turns/s, ratio to the ceiling);
3. ingest with an OpenAI-compatible fake LLM answering in L ms per call, for several limits
   C of calls in flight, against the bound C / (L x calls per turn) and a sequential baseline;
4. retrieve / respond latency on a seeded LoCoMo-sized store, and read-your-writes lag;
5. peak RSS.
Writes DIR/bench.json, DIR/bench.md, DIR/samples.json and the PNG plots; prints progress
and the tables. Each part runs in its own fresh embedded stack on free ports.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from adapters import event_loop
from adapters.settings import Settings
from evaluation import bench_report as report
from evaluation import soak_report
from evaluation.bench_common import ChildMemory, say
from evaluation.bench_data import SyntheticTurn, embedded_text
from evaluation.bench_ingest import (
    IngestResult,
    embedder_ceiling,
    make_conversations,
    measure_ingest,
)
from evaluation.bench_latency import LatencyResult, measure_latency
from evaluation.bench_llm import (
    PAPER_CALLS,
    ConcurrencyRun,
    FakeLLMServer,
    llm_cost,
    measure_concurrency,
    sequential_baseline,
)
from evaluation.bench_soak import SoakPlan, run_soak
from streams.progress import NO_PROGRESS, Progress


@dataclass(frozen=True)
class Sizes:
    name: str
    ingest_users: int
    ingest_turns: int
    llm_latency_ms: int
    llm_concurrency: tuple[int, ...]
    llm_users_per_slot: int  # users = C x this, so C calls can be in flight
    llm_turns: int
    sequential_turns: int
    single_user_turns: int
    latency_users: int
    latency_turns: int
    segments_per_user: int
    retrieves: int
    responds: int
    ryw_tries: int
    seed: int = 20250606


FULL = Sizes("full", 64, 50, 200, (8, 32, 64, 128), 2, 25, 10, 200, 1000, 300, 30, 2000, 500, 50)
QUICK = Sizes("quick", 16, 25, 200, (8, 32), 1, 15, 5, 40, 50, 100, 10, 500, 100, 20)


def main(args: argparse.Namespace, settings: Settings, progress: Progress = NO_PROGRESS) -> int:
    sizes = QUICK if args.quick else FULL
    for noisy in ("httpx", "httpx2", "openai"):  # a line per LLM call would bury the progress
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if args.soak:
        plan = SoakPlan(
            args.soak,
            args.soak_rate,
            args.soak_users,
            args.soak_retrieves,
            heap_profile=args.soak_heap_profile,
        )
        return event_loop.run(run_soak_bench(settings, Path(args.out), plan, progress))
    return event_loop.run(run_bench(settings, Path(args.out), sizes, progress))


async def run_soak_bench(
    settings: Settings, out: Path, plan: SoakPlan, progress: Progress = NO_PROGRESS
) -> int:
    """Memory, store and lag over a long steady ingest; writes bench.json, soak.png."""
    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    load_start = os.getloadavg()
    say(f"soak: {json.dumps(asdict(plan))}")
    progress.phase("soak")
    run = await run_soak(settings, plan)
    result = soak_report.soak_result(run, machine(), settings.broker_memory_budget_mb)
    result["machine"]["load_average_1_5_15_min"] = {
        "start": [round(x, 2) for x in load_start],
        "end": [round(x, 2) for x in os.getloadavg()],
    }
    soak_report.write_soak(out, result)
    say(f"soak: {json.dumps(result['summary'])}")
    say(f"wrote {out}/bench.json, {soak_report.SOAK_PNG}")
    for problem in run.mismatched:
        say(f"store count mismatch: {problem}")
    return 1 if run.mismatched else 0


async def run_bench(
    settings: Settings, out: Path, sizes: Sizes, progress: Progress = NO_PROGRESS
) -> int:
    with ChildMemory() as children:

        def phase(name: str) -> None:
            progress.phase(name)
            children.part = name

        code, result, latency = await _run_parts(settings, out, sizes, phase)
    result["peak_rss_by_child_mb"] = children.report()
    write_outputs(out, result, latency)
    print("\n".join(report.tables(result)), flush=True)
    say(f"wrote {out}/bench.json, bench.md, samples.json, {report.THROUGHPUT_PNG}, "
        f"{report.LATENCY_PNG}")  # fmt: skip
    return code


async def _run_parts(
    settings: Settings, out: Path, sizes: Sizes, phase: Callable[[str], None]
) -> tuple[int, dict[str, Any], LatencyResult]:
    started, load_start = time.perf_counter(), os.getloadavg()
    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    say(f"{sizes.name} run: {json.dumps(asdict(sizes))}")
    conversations = make_conversations(sizes.ingest_users, sizes.ingest_turns, sizes.seed)
    texts = [embedded_text(item.turn) for talk in conversations for item in talk]
    phase("embedder ceiling")
    say(f"embedder ceiling: {len(texts)} texts in batches of {settings.embedding_batch_size}")
    before = await embedder_ceiling(settings, texts)
    say(f"embedder ceiling: {before:.1f} texts/s")
    phase("ingest")
    ingest = await measure_ingest(settings, conversations, sizes.seed)
    phase("embedder ceiling again")
    # measured again after the ingest (a fresh instance: a cold cache): the machine's load
    # can drift, and the ratio should compare like with like
    after = await embedder_ceiling(settings, texts)
    say(f"embedder ceiling again: {after:.1f} texts/s")
    ingest.set_ceiling(before, after)
    say(f"ingest: {ingest.turns_per_s:.1f} turns/s ({ingest.ratio_to_ceiling:.0%} of ceiling)")
    phase("durability cost")
    durability = await measure_durability(settings, conversations, sizes.seed)
    phase("llm concurrency")
    singles: list[ConcurrencyRun] = []
    runs, sequential = await _llm_part(settings, sizes, singles)
    phase("latency")
    latency = await measure_latency(
        settings,
        sizes.latency_users,
        sizes.latency_turns,
        sizes.segments_per_user,
        sizes.retrieves,
        sizes.responds,
        sizes.ryw_tries,
        sizes.seed,
    )
    phase("report")
    result = assemble(settings, sizes, ingest, runs, sequential, latency)
    result["durability"] = durability
    if runs:
        result["llm_cost"] = llm_cost(runs[-1])
    # the defaults, then the paper's calls: one by one, every task apart
    for name, single in zip(("single_user", "single_user_paper_calls"), singles, strict=False):
        result[name] = {
            "latency_ms": sizes.llm_latency_ms,
            "turns": single.turns,
            "turns_per_s": round(single.turns_per_s, 3),
            "calls_per_turn": round(single.calls_per_turn, 3),
            "llm_cost": llm_cost(single),
        }
    result["elapsed_s"] = round(time.perf_counter() - started, 1)
    # other work on the machine skews every figure: say how busy it was
    result["machine"]["load_average_1_5_15_min"] = {
        "start": [round(x, 2) for x in load_start],
        "end": [round(x, 2) for x in os.getloadavg()],
    }
    result["goals"] = report.goals(result)
    failed = ingest.mismatched + [m for run in runs for m in run.mismatched]
    for problem in failed:
        say(f"store count mismatch: {problem}")
    return (1 if failed or latency.ryw_timeouts else 0), result, latency


DURABLE_CHUNK = 32  # turns per request: the journal commits (and fsyncs) once per request


async def measure_durability(
    settings: Settings, conversations: list[list[SyntheticTurn]], seed: int
) -> dict[str, Any]:
    """The same ingest with the turn journal off and on, side by side, as requests of
    ``DURABLE_CHUNK`` turns: what acknowledged-means-durable costs the embedded stack."""
    rates = {}
    for mode in ("off", "on"):
        run = await measure_ingest(
            settings.model_copy(update={"journal": mode}), conversations, seed, DURABLE_CHUNK
        )
        rates[mode] = run.turns_per_s
        say(f"durability: journal {mode}: {run.turns_per_s:.1f} turns/s")
    cost = 1 - rates["on"] / rates["off"] if rates["off"] > 0 else 0.0
    return {
        "chunk_turns": DURABLE_CHUNK,
        "turns_per_s_journal_off": round(rates["off"], 2),
        "turns_per_s_journal_on": round(rates["on"], 2),
        "cost_ratio": round(cost, 4),
    }


async def _llm_part(
    settings: Settings, sizes: Sizes, runs_single: list[ConcurrencyRun]
) -> tuple[list[ConcurrencyRun], float]:
    server = await asyncio.to_thread(FakeLLMServer(sizes.llm_latency_ms / 1000.0).start)
    try:
        runs = []
        for concurrency in sizes.llm_concurrency:
            users = max(2, concurrency * sizes.llm_users_per_slot)
            run = await measure_concurrency(
                settings, server, concurrency, users, sizes.llm_turns, sizes.seed
            )
            say(
                f"llm C={concurrency}: {run.turns_per_s:.1f} turns/s, "
                f"{run.calls_per_turn:.2f} calls/turn, {run.bound_ratio:.0%} of the bound"
            )
            runs.append(run)  # fmt: skip
        turns = sum(run.turns for run in runs)
        mix: dict[str, float] = {}
        for run in runs:
            for task, count in run.by_task.items():
                mix[task] = mix.get(task, 0.0) + count / turns
        say(f"single user: {sizes.single_user_turns} turns of one user")
        single = await measure_concurrency(
            settings, server, sizes.llm_concurrency[-1], 1, sizes.single_user_turns, sizes.seed
        )
        runs_single.append(single)
        say(f"single user: {single.turns_per_s:.2f} turns/s, "
            f"{single.calls_per_turn:.2f} calls/turn")  # fmt: skip
        paper = await measure_concurrency(
            settings.model_copy(update=PAPER_CALLS),
            server,
            sizes.llm_concurrency[-1],
            1,
            sizes.single_user_turns,
            sizes.seed,
        )
        runs_single.append(paper)
        say(f"single user, the paper's calls: {paper.turns_per_s:.2f} turns/s, "
            f"{paper.calls_per_turn:.2f} calls/turn")  # fmt: skip
        say(f"sequential baseline: {sizes.sequential_turns} turns, calls in series")
        sequential = await sequential_baseline(
            settings, server, mix, sizes.sequential_turns, sizes.seed
        )
        say(f"sequential baseline: {sequential:.2f} turns/s")
    finally:
        await asyncio.to_thread(server.stop)
    return runs, sequential


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count() or 0,
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def _peak_rss_mb(who: int) -> float:
    return round(resource.getrusage(who).ru_maxrss / 1024.0, 1)  # Linux: kilobytes


def assemble(
    settings: Settings,
    sizes: Sizes,
    ingest: IngestResult,
    runs: list[ConcurrencyRun],
    sequential: float,
    latency: LatencyResult,
) -> dict[str, Any]:
    busy = {f"stage {k}": v for k, v in ingest.stage_busy_s.items()}
    busy |= {"embedding": ingest.embed_busy_s}
    busy |= {f"offline LLM {k}": v for k, v in ingest.llm_busy_s.items()}
    busy |= {f"store {k}": v for k, v in ingest.store_busy_s.items()}
    summary = latency.summary()
    return {
        "ingest": {
            "turns_per_s": round(ingest.turns_per_s, 2),
            "embedder_texts_per_s": round(ingest.embedder_texts_per_s, 2),
            "ratio_to_ceiling": round(ingest.ratio_to_ceiling, 4),
            "embedder_texts_per_s_runs": [round(run, 2) for run in ingest.ceiling_runs],
            "users": ingest.users,
            "turns_per_user": ingest.turns_per_user,
            "turns": ingest.turns,
            "texts_per_turn": round(ingest.texts_per_turn, 3),
            "embed_calls": ingest.embed_calls,
            "send_s": round(ingest.send_s, 2),
            "placed_s": round(ingest.placed_s, 2),
            "idle_s": round(ingest.idle_s, 2),
            "cpu_cores_used": round(ingest.cpu_cores_used, 2),
            "loop_cpu_ms_per_turn": ingest.loop_cpu_ms_per_turn,
            "cpu_ms_per_turn_by_process": ingest.cpu_ms_per_turn_by_process,
            "bytes_per_turn_by_topic": ingest.bytes_per_turn,
            "bytes_per_turn": round(sum(ingest.bytes_per_turn.values()), 1),
            "records_per_turn_by_topic": ingest.records_per_turn,
            "records_per_turn": round(sum(ingest.records_per_turn.values()), 2),
            "busy_s": {k: round(v, 2) for k, v in busy.items()},
            "stage_events": ingest.stage_events,
            "verified": not ingest.mismatched,
            "embedder": ingest.embedder,
            "embedding_batch_size": settings.embedding_batch_size,
            "batch_size": settings.batch_size,
        },
        "llm_latency": {
            "latency_ms": sizes.llm_latency_ms,
            "concurrency": [run.concurrency for run in runs],
            "turns_per_s": [round(run.turns_per_s, 2) for run in runs],
            "bound_ratio": [round(run.bound_ratio, 4) for run in runs],
            "speedup_vs_sequential": [
                round(run.turns_per_s / sequential, 2) if sequential > 0 else 0.0 for run in runs
            ],
            "bound_turns_per_s": [round(run.bound_turns_per_s, 2) for run in runs],
            "calls_per_turn": [round(run.calls_per_turn, 3) for run in runs],
            "users": [run.users for run in runs],
            "turns": [run.turns for run in runs],
            "seconds": [round(run.seconds, 2) for run in runs],
            "max_in_flight_seen": [run.max_in_flight_seen for run in runs],
            "llm_errors": [run.errors for run in runs],
            "cpu_cores_used": [round(run.cpu_cores_used, 2) for run in runs],
            "calls_by_task": [run.by_task for run in runs],
            "sequential_turns_per_s": round(sequential, 3),
            "sequential_turns": sizes.sequential_turns,
            "verified": not any(run.mismatched for run in runs),
        },
        "retrieve": {
            "users": latency.users,
            "turns_per_user": latency.turns_per_user,
            **summary["retrieve"],
            "calls": len(latency.retrieve_s),
            "seeded": True,
            "segments_per_user": latency.segments_per_user,
            "points_seeded": latency.points_seeded,
            "seed_s": round(latency.seed_s, 1),
            "distinct_queries": latency.distinct_queries,
            "mid_term_pages_per_call": round(latency.mid_term_hits, 2),
            "background_during_calls": {k: round(v, 2) for k, v in latency.background.items()},
        },
        "retrieve_filtered": {
            **summary["retrieve_filtered"],
            "calls": len(latency.filtered_s),
            "filters": "one channel of three, the later half of the user's days",
            "mid_term_pages_per_call": round(latency.filtered_hits, 2),
        },
        "retrieve_concurrency": latency.concurrent,
        "respond": {**summary["respond"], "calls": len(latency.respond_s), "llm": "offline"},
        "read_your_writes_ms": {
            **summary["read_your_writes_ms"],
            "tries": len(latency.ryw_s) + latency.ryw_timeouts,
            "timeouts": latency.ryw_timeouts,
        },
        "peak_rss_mb": _peak_rss_mb(resource.RUSAGE_SELF),
        "peak_rss_children_mb": _peak_rss_mb(resource.RUSAGE_CHILDREN),
        "sizes": asdict(sizes),
        "machine": machine(),
    }


def write_outputs(out: Path, result: dict[str, Any], latency: LatencyResult) -> None:
    samples: dict[str, Sequence[float]] = {
        "retrieve": [round(s * 1000, 3) for s in latency.retrieve_s],
        "respond": [round(s * 1000, 3) for s in latency.respond_s],
        "read_your_writes": [round(s * 1000, 3) for s in latency.ryw_s],
    }
    (out / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "samples.json").write_text(json.dumps(samples) + "\n")
    (out / "bench.md").write_text(report.markdown(result))
    report.plot_throughput(result, out / report.THROUGHPUT_PNG)
    report.plot_latency(samples, out / report.LATENCY_PNG)
