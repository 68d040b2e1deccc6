"""Bench part 3: ingest throughput when every LLM call takes L ms, against C calls in flight.

The LLM is the project's OpenAI-compatible test server (``evaluation/fake_openai.py``)
with ``latency_s`` added per call, run in a child process so that serving hundreds of calls
per second does not compete with the pipeline for this process's GIL; its request log is
read over a pipe. For each C the pipeline ingests ``users x turns`` with
``llm_max_in_flight = C``. LLM calls per turn come from the server's log; the bound is
C / (L x calls per turn). The sequential baseline is the reference code's way of working:
the same calls per turn, in series, one turn after another, through the real ``openai``
client against the same server.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import IO, Any

from adapters.llm.openai_llm import OpenAILLM
from adapters.settings import Settings
from evaluation.bench_common import (
    MetricsSnapshot,
    cpu_seconds,
    parts,
    say,
    verify_counts,
    wait_placed,
)
from evaluation.bench_data import conversation, interleaved
from evaluation.bench_ingest import BASE_TIMEOUT_S, PER_TURN_TIMEOUT_S, warm_up
from evaluation.fresh_stack import fresh_stack
from memory.chain import page_from_turn

_SERVER = """
import collections, json, socket, sys
from evaluation.fake_openai import FakeOpenAI
server = FakeOpenAI(latency_s=float(sys.argv[1])).start()
# uvicorn serving a pre-bound socket leaves Nagle on: every keep-alive request then stalls
# ~40 ms on the client's delayed ACK. Accepted sockets inherit TCP_NODELAY from the listener.
listener = getattr(server, "_socket", None)
if listener is not None:
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
print(json.dumps({"base_url": server.base_url}), flush=True)
for line in sys.stdin:
    command = line.strip()
    if command == "stats":
        chat = [r for r in server.calls() if r.path.endswith("/chat/completions")]
        print(json.dumps({
            "chat": len(chat),
            "by_task": collections.Counter(r.task for r in chat),
            "errors": sum(1 for r in chat if r.status != 200),
            "first_at": min((r.at for r in chat), default=0.0),
            "last_at": max((r.at for r in chat), default=0.0),
            "max_in_flight": server.max_in_flight,
        }), flush=True)
    elif command == "reset":
        latency = server.latency_s
        server.reset()
        server.latency_s = latency
        print("{}", flush=True)
    else:
        break
server.stop()
"""


class FakeLLMServer:
    """FakeOpenAI in a child process; ``stats()`` reads its request log."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.base_url = ""
        self._process: subprocess.Popen[str] | None = None
        self._errors: IO[str] | None = None

    def start(self) -> FakeLLMServer:
        self._errors = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed in stop()
        self._process = subprocess.Popen(
            [sys.executable, "-c", _SERVER, str(self.latency_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors,
            text=True,
        )
        self.base_url = str(self._ask(None)["base_url"])
        return self

    def _ask(self, command: str | None) -> dict[str, Any]:
        process = self._process
        assert process is not None, "start() first"
        assert process.stdin is not None
        assert process.stdout is not None
        if command is not None:
            process.stdin.write(command + "\n")
            process.stdin.flush()
        line = process.stdout.readline()
        if not line:
            errors = ""
            if self._errors is not None:
                self._errors.seek(0)
                errors = self._errors.read()[-2000:]
            raise RuntimeError(f"the fake LLM server stopped: {errors}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    async def stats(self) -> dict[str, Any]:
        return await asyncio.to_thread(self._ask, "stats")

    async def reset(self) -> None:
        await asyncio.to_thread(self._ask, "reset")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            try:
                assert process.stdin is not None
                process.stdin.write("quit\n")
                process.stdin.close()
                process.wait(timeout=15)
            except (OSError, subprocess.TimeoutExpired):
                process.kill()
                process.wait(timeout=5)
        if self._errors is not None:
            self._errors.close()
            self._errors = None


# The paper's LLM calls: every page's continuity asked, one page at a time, each task apart.
PAPER_CALLS = {"continuity_llm": "always", "llm_run_max": 1, "llm_combine": False}


def llm_settings(server: FakeLLMServer, in_flight: int) -> dict[str, Any]:
    return {
        "llm": "openai",
        "openai_base_url": server.base_url,
        "openai_api_key": "bench",
        "llm_model": "bench-fake",
        "llm_max_in_flight": in_flight,
    }


@dataclass
class ConcurrencyRun:
    concurrency: int
    users: int
    turns: int
    seconds: float = 0.0
    turns_per_s: float = 0.0
    llm_calls: int = 0
    calls_per_turn: float = 0.0
    bound_turns_per_s: float = 0.0
    bound_ratio: float = 0.0
    max_in_flight_seen: int = 0
    cpu_cores_used: float = 0.0  # this process and its children, the fake LLM server included
    errors: int = 0
    by_task: dict[str, int] = field(default_factory=dict)
    tokens_by_task: dict[str, dict[str, float]] = field(default_factory=dict)  # prompt/completion
    mismatched: list[str] = field(default_factory=list)


async def measure_concurrency(
    settings: Settings,
    server: FakeLLMServer,
    concurrency: int,
    users: int,
    turns_per_user: int,
    seed: int,
) -> ConcurrencyRun:
    rng = random.Random(seed + concurrency)
    conversations = [
        conversation(f"bench-c{concurrency}-u{i:04d}", turns_per_user, rng) for i in range(users)
    ]
    turns = interleaved(conversations)
    run = ConcurrencyRun(concurrency, users, len(turns))
    stm = settings.stm_capacity
    mtm_expected = sum(max(0, len(c) - stm) for c in conversations)
    timeout = BASE_TIMEOUT_S + PER_TURN_TIMEOUT_S * 4 * len(turns)
    async with fresh_stack(settings, **llm_settings(server, concurrency)) as stack:
        service, deps = parts(stack)
        warm = await warm_up(stack, settings, seed)
        await server.reset()
        say(f"llm C={concurrency}: {len(turns)} turns of {users} users, "
            f"{server.latency_s * 1000:.0f} ms per LLM call")  # fmt: skip
        started, cpu_before = time.monotonic(), cpu_seconds()
        tokens_before = MetricsSnapshot(deps)
        await service.add_turns(turns)
        placed = await wait_placed(deps, warm + len(turns), 3 + mtm_expected, timeout)
        if placed is None:
            raise RuntimeError(f"C={concurrency}: ingest did not complete within {timeout:.0f} s")
        await stack.wait_idle(timeout)  # persona updates run after the pages are placed
        cpu_used = cpu_seconds() - cpu_before
        idle_at = time.monotonic()
        stats = await server.stats()
        run.tokens_by_task = _tokens(tokens_before, MetricsSnapshot(deps))
        run.mismatched = await verify_counts(
            deps, {c[0].turn.user_id: len(c) for c in conversations}, stm
        )
    # the work is done when the pages are placed and the last LLM call has answered
    # (time.monotonic is one clock for every process on Linux)
    finished = max(placed, float(stats["last_at"]) + server.latency_s)
    run.seconds = finished - started
    run.turns_per_s = run.turns / run.seconds
    run.cpu_cores_used = cpu_used / (idle_at - started)
    run.llm_calls = int(stats["chat"])
    run.by_task = {str(k): int(v) for k, v in dict(stats["by_task"]).items()}
    run.errors = int(stats["errors"])
    run.max_in_flight_seen = int(stats["max_in_flight"])
    run.calls_per_turn = run.llm_calls / run.turns
    if run.calls_per_turn > 0:
        run.bound_turns_per_s = concurrency / (server.latency_s * run.calls_per_turn)
        run.bound_ratio = run.turns_per_s / run.bound_turns_per_s
    return run


def _tokens(before: MetricsSnapshot, after: MetricsSnapshot) -> dict[str, dict[str, float]]:
    """Tokens spent per task and kind between two snapshots (the OpenAI adapter counts them)."""
    spent: dict[str, dict[str, float]] = {}
    for (name, labels), value in after.values.items():
        if name != "memoryos_llm_tokens_total":
            continue
        label = dict(labels)
        used = value - before.values.get((name, labels), 0.0)
        spent.setdefault(label["task"], {"prompt": 0.0, "completion": 0.0})[label["kind"]] += used
    return spent


def llm_cost(run: ConcurrencyRun) -> dict[str, object]:
    """Calls and tokens per turn, in all and per task, as bench.json reports them."""
    per_turn = max(1, run.turns)
    by_task: dict[str, object] = {}
    prompt = completion = 0.0
    for task in sorted(set(run.by_task) | set(run.tokens_by_task)):
        tokens = run.tokens_by_task.get(task, {"prompt": 0.0, "completion": 0.0})
        prompt, completion = prompt + tokens["prompt"], completion + tokens["completion"]
        by_task[task] = {
            "calls_per_turn": round(run.by_task.get(task, 0) / per_turn, 3),
            "tokens_per_turn": {k: round(v / per_turn, 1) for k, v in tokens.items()},
        }
    return {
        "calls_per_turn": round(run.calls_per_turn, 3),
        "tokens_per_turn": {
            "prompt": round(prompt / per_turn, 1),
            "completion": round(completion / per_turn, 1),
        },
        "by_task": by_task,
    }


def plan_calls(per_turn: dict[str, float], turns: int) -> list[str]:
    """``turns`` turns' worth of LLM tasks in the measured mix (largest-remainder rounding)."""
    wanted = {task: rate * turns for task, rate in per_turn.items()}
    total = round(sum(wanted.values()))
    counts = {task: math.floor(value) for task, value in wanted.items()}
    by_remainder = sorted(wanted, key=lambda task: wanted[task] - counts[task], reverse=True)
    for task in by_remainder[: max(0, total - sum(counts.values()))]:
        counts[task] += 1
    order = ("continuity", "topics", "topics_batch", "topics_summary", "segment_summary",
             "user_traits", "user_knowledge", "agent_traits", "persona")  # fmt: skip
    ranked = sorted(counts, key=lambda t: (order.index(t) if t in order else len(order), t))
    return [task for task in ranked for _ in range(counts[task])]


async def sequential_baseline(
    settings: Settings, server: FakeLLMServer, per_turn: dict[str, float], turns: int, seed: int
) -> float:
    """Turns per second when each turn's LLM calls run in series, one turn after another."""
    run_settings = settings.model_copy(update=llm_settings(server, 1))
    llm = OpenAILLM(run_settings)
    synthetic = conversation("bench-sequential", turns + 1, random.Random(seed))
    pages = [page_from_turn(item.turn) for item in synthetic]
    dialogue = "\n".join(page.text for page in pages[:5])
    plan = plan_calls(per_turn, turns)
    try:
        await llm.topics(pages[0].text)  # connection set-up, not timed
        started = time.perf_counter()
        for index, task in enumerate(plan):
            page, previous = pages[index % turns + 1], pages[index % turns]
            if task == "topics":
                await llm.topics(page.text)
            elif task == "topics_batch":
                await llm.topics_many([page.text, previous.text])
            elif task == "topics_summary":
                await llm.topics_summary(page.text, "The user talks about their plans.")
            elif task == "segment_summary":
                await llm.segment_summary("The user talks about their plans.", page.text)
            elif task == "user_traits":
                await llm.user_traits({}, dialogue)
            elif task == "user_knowledge":
                await llm.user_knowledge(dialogue)
            elif task == "agent_traits":
                await llm.agent_traits(dialogue)
            elif task == "persona":
                await llm.persona({}, dialogue)
            else:
                await llm.continuity(previous, page)
        elapsed = time.perf_counter() - started
    finally:
        await llm.close()
    return turns / elapsed if elapsed > 0 else 0.0
