"""Measure the embedded broker's log roll under a steady write load.

For each source tree given (``--tree label=path``, e.g. two git worktrees holding two ways of
rolling) it starts ``memoryos up`` from that tree on a fresh data folder, with a small broker
budget so the broker is rolled every few seconds, and posts turns over HTTP at a fixed rate for
several users (one turn per request, each user's turns in order). A turn counts as
acknowledged only when its request got 202; a 503 is retried (the same turn, the same id) a
short pause later. Once the load stops and the pipeline has placed everything, every user's
memory is read back and compared with the acknowledged turns.

Per roll it reports: how long it took end to end (its log lines: "recycling it" to "log roll
done"), how many requests got 503 in it and the longest run of 503s a user saw (from the
first refused request's send to the last refused answer), the slowest 202 in it, and the
time /readyz said "not ready". At the end: acknowledged turns missing from memory, and turns
listed twice. The LLM and the embedder are the fake OpenAI server of the tests (a few ms per
call), so the figures are the roll's, not a model's.

    PYTHONPATH=. python tools/roll_measure.py --seconds 90 --rate 25 \
        --tree today=../roll-base --tree plain=. --env plain:MEMORYOS_DRAIN_TIMEOUT_S=0
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from adapters import event_loop
from evaluation.fake_openai import FakeOpenAI

ROLL_START = "over its budget: recycling it"
ROLL_DONE = re.compile(r"log roll done in ([0-9.]+) s")
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Request:
    user: str
    turn_id: str
    sent: float  # wall clock, as the stack's log lines
    answered: float
    status: int  # 0: no answer (connection failed)
    retry_after: str | None = None


@dataclass
class Run:
    label: str
    requests: list[Request] = field(default_factory=list)
    acked: dict[str, list[str]] = field(default_factory=dict)
    not_ready: list[tuple[float, float]] = field(default_factory=list)  # spans /readyz != 200
    readyz_seen: dict[str, Any] = field(default_factory=dict)  # one not-ready answer


async def write_load(
    url: str, run: Run, users: list[str], rate: float, stop: asyncio.Event
) -> None:
    period = len(users) / rate  # each user's share of the rate

    async def one(user: str, offset: float) -> None:
        run.acked[user] = []
        n = 0
        async with httpx.AsyncClient(timeout=60) as client:
            next_at = time.monotonic() + offset
            while not stop.is_set():
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
                turn_id = f"t{n:05d}"
                body = {"query": f"{user} asks about thing {n}", "response": f"thing {n} noted",
                        "turn_id": turn_id}  # fmt: skip
                sent = time.time()
                try:
                    response = await client.post(f"{url}/v1/users/{user}/turns", json=body)
                    status, after = response.status_code, response.headers.get("retry-after")
                except httpx.HTTPError:
                    status, after = 0, None
                run.requests.append(Request(user, turn_id, sent, time.time(), status, after))
                if status == 202:
                    run.acked[user].append(turn_id)
                    n += 1
                    next_at += period
                else:  # refused: the same turn again shortly (a client honouring Retry-After
                    next_at = time.monotonic() + 0.1  # would wait longer; this measures)

    await asyncio.gather(*(one(u, i * len(users) / rate / len(users)) for i, u in enumerate(users)))


async def watch_ready(url: str, run: Run, stop: asyncio.Event) -> None:
    since: float | None = None
    async with httpx.AsyncClient(timeout=10) as client:
        while not stop.is_set():
            at = time.time()
            try:
                response = await client.get(f"{url}/readyz")
                ok = response.status_code == 200
                if not ok and not run.readyz_seen:
                    run.readyz_seen = {"status": response.status_code, "body": response.json()}
            except httpx.HTTPError:
                ok = False
            if not ok and since is None:
                since = at
            elif ok and since is not None:
                run.not_ready.append((since, at))
                since = None
            await asyncio.sleep(0.1)
    if since is not None:
        run.not_ready.append((since, time.time()))


def log_rolls(log: Path) -> list[dict[str, Any]]:
    """Each roll: its start and end (wall clock), and the duration it logged."""
    rolls: list[dict[str, Any]] = []
    for line in log.read_text(errors="replace").splitlines():
        stamp = STAMP.match(line)
        if stamp is None:
            continue
        at = datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if ROLL_START in line:
            rolls.append({"start": at, "end": None, "logged_s": None})
        elif (done := ROLL_DONE.search(line)) and rolls and rolls[-1]["end"] is None:
            rolls[-1].update(end=at, logged_s=float(done.group(1)))
    return rolls


def refusal_runs(requests: list[Request]) -> list[tuple[float, float, int]]:
    """Per user, each run of consecutive refused requests: (first sent, last answered, count)."""
    runs: list[tuple[float, float, int]] = []
    by_user: dict[str, list[Request]] = {}
    for request in requests:
        by_user.setdefault(request.user, []).append(request)
    for mine in by_user.values():
        current: list[Request] = []
        for each in [*sorted(mine, key=lambda r: r.sent), None]:
            if each is not None and each.status != 202:
                current.append(each)
                continue
            if current:
                runs.append((current[0].sent, current[-1].answered, len(current)))
                current = []
    return runs


def per_roll(run: Run, rolls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    runs = refusal_runs(run.requests)
    out = []
    for i, roll in enumerate(rolls):
        start, end = roll["start"], roll["end"] or time.time()
        lo, hi = start - 0.5, end + 1.0  # a request in flight as the roll began or ended

        def inside(t: float, lo: float = lo, hi: float = hi) -> bool:
            return lo <= t <= hi

        refused = [r for r in run.requests if r.status != 202 and inside(r.sent)]
        accepted = [r for r in run.requests if r.status == 202 and inside(r.sent)]
        spans = [last - first for first, last, _ in runs if inside(first)]
        unready = [min(b, hi) - max(a, lo) for a, b in run.not_ready if a <= hi and b >= lo]
        out.append({
            "roll": i + 1,
            "duration_s": round(roll["logged_s"], 2) if roll["logged_s"] is not None else None,
            "refused_503": sum(1 for r in refused if r.status == 503),
            "other_failures": sum(1 for r in refused if r.status != 503),
            "longest_503_span_s": round(max(spans, default=0.0), 2),
            "accepted_202": len(accepted),
            "slowest_202_s": round(max((r.answered - r.sent for r in accepted), default=0.0), 2),
            "not_ready_s": round(sum(unready), 2),
            "retry_after": sorted({r.retry_after for r in refused if r.retry_after}),
        })  # fmt: skip
    return out


async def memory_turns(client: httpx.AsyncClient, url: str, user: str) -> list[str]:
    response = await client.get(f"{url}/v1/users/{user}/memory", timeout=60)
    response.raise_for_status()
    memory = response.json()
    listed = [p["turn_id"] for p in memory["short_term"]]
    return listed + [p["turn_id"] for s in memory["mid_term"] for p in s["pages"]]


async def settle(url: str, run: Run, timeout_s: float) -> dict[str, list[str]]:
    """Every user's listed turns once all acknowledged ones are there (or the timeout)."""
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient() as client:
        while True:
            listed = {}
            for user in run.acked:
                try:
                    listed[user] = await memory_turns(client, url, user)
                except httpx.HTTPError:
                    listed[user] = []
            complete = all(set(run.acked[u]) <= set(listed[u]) for u in run.acked)
            if complete or time.monotonic() > deadline:
                await asyncio.sleep(5 if complete else 0)  # a late duplicate shows up too
                if complete:
                    listed = {u: await memory_turns(client, url, u) for u in run.acked}
                return listed
            await asyncio.sleep(2)


async def measure(
    label: str, tree: Path, args: argparse.Namespace, server: FakeOpenAI, extra: dict[str, str]
) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix=f"roll-{label}-"))
    port, broker_port = free_port(), free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "MEMORYOS_LLM": "openai",
        "MEMORYOS_EMBEDDER": "openai",
        "MEMORYOS_OPENAI_BASE_URL": server.base_url,
        "MEMORYOS_OPENAI_API_KEY": "test-key",
        "MEMORYOS_LLM_MODEL": "fake-model",
        "MEMORYOS_EMBEDDING_MODEL": "fake-embedding",
        "MEMORYOS_MTM_CAPACITY": "100000",  # nothing evicted: every turn stays listed
        "MEMORYOS_BROKER_MEMORY_BUDGET_MB": str(args.budget_mb),
        "MEMORYOS_BROKER_CHECK_INTERVAL_S": str(args.check_s),
        **extra,
    }
    log = data / "up.log"
    command = [sys.executable, "-m", "streams.cli", "up", "--data-dir", str(data / "d"),
               "--port", str(port), "--broker-port", str(broker_port)]  # fmt: skip
    with log.open("ab") as out:
        process = subprocess.Popen(command, cwd=tree, env=env, stdout=out,  # noqa: ASYNC220
                                   stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    run = Run(label)
    try:
        async with httpx.AsyncClient() as client:
            deadline = time.monotonic() + 120
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"memoryos up exited: {log.read_text()[-2000:]}")
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{url}/readyz", timeout=2)).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError("memoryos up did not become ready")
                await asyncio.sleep(0.3)
        users = [f"{label}-u{i}" for i in range(args.users)]
        stop, began = asyncio.Event(), time.monotonic()
        load = asyncio.create_task(write_load(url, run, users, args.rate, stop))
        ready = asyncio.create_task(watch_ready(url, run, stop))
        while time.monotonic() - began < args.seconds or (  # noqa: ASYNC110 (polls the log)
            len([r for r in log_rolls(log) if r["end"]]) < args.min_rolls
            and time.monotonic() - began < args.seconds * 3
        ):
            await asyncio.sleep(1)
        stop.set()
        await asyncio.gather(load, ready)
        load_s = time.monotonic() - began
        listed = await settle(url, run, args.settle_s)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    rolls = log_rolls(log)
    lost = {u: sorted(set(run.acked[u]) - set(listed.get(u, []))) for u in run.acked}
    twice = {u: len(listed.get(u, [])) - len(set(listed.get(u, []))) for u in run.acked}
    acked = sum(len(v) for v in run.acked.values())
    return {
        "variant": label,
        "tree": str(tree),
        "env": extra,
        "load_s": round(load_s, 1),
        "requests": len(run.requests),
        "acknowledged": acked,
        "acked_per_s": round(acked / load_s, 1),
        "refused_503": sum(1 for r in run.requests if r.status == 503),
        "other_failures": sum(1 for r in run.requests if r.status not in (202, 503)),
        "rolls": len(rolls),
        "rolls_done": sum(1 for r in rolls if r["end"]),
        "per_roll": per_roll(run, rolls),
        "acked_lost": sum(len(v) for v in lost.values()),
        "lost_ids": {u: v[:10] for u, v in lost.items() if v},
        "listed_twice": sum(twice.values()),
        "readyz_when_not_ready": run.readyz_seen,
        "log": str(log),
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        f"== {result['variant']} ({result['tree']} {result['env'] or ''}): "
        f"{result['rolls_done']} rolls done in "
        f"{result['load_s']} s of load, {result['acknowledged']} turns acknowledged "
        f"({result['acked_per_s']}/s), {result['refused_503']} refused (503), "
        f"{result['other_failures']} other failures; acknowledged turns lost: "
        f"{result['acked_lost']}, listed twice: {result['listed_twice']}",
        "roll  duration_s  503s  longest_503_span_s  202s  slowest_202_s  not_ready_s  retry_after",
    ]
    for r in result["per_roll"]:
        lines.append(
            f"{r['roll']:>4}  {r['duration_s']!s:>10}  {r['refused_503']:>4}  "
            f"{r['longest_503_span_s']:>18}  {r['accepted_202']:>4}  {r['slowest_202_s']:>13}  "
            f"{r['not_ready_s']:>11}  {','.join(r['retry_after'])}"
        )
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", required=True, help="label=path, repeatable")
    parser.add_argument(
        "--env", action="append", default=[], help="label:NAME=VALUE, for that tree's stack"
    )
    parser.add_argument("--rate", type=float, default=25.0, help="turns per second, all users")
    parser.add_argument("--users", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=90.0, help="load duration (at least)")
    parser.add_argument("--min-rolls", type=int, default=3)
    parser.add_argument("--budget-mb", type=int, default=60)
    parser.add_argument("--check-s", type=float, default=0.5)
    parser.add_argument("--settle-s", type=float, default=300.0)
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args()
    results = []
    with FakeOpenAI(latency_s=0.01) as server:
        for spec in args.tree:
            label, _, path = spec.partition("=")
            extra = dict(
                item.partition(":")[2].split("=", 1)
                for item in args.env
                if item.partition(":")[0] == label
            )
            tree = Path(path).resolve()  # noqa: ASYNC240 (no I/O of note)
            result = await measure(label, tree, args, server, extra)
            print(table(result), flush=True)
            results.append(result)
    if args.json:
        await asyncio.to_thread(args.json.write_text, json.dumps(results, indent=2))


if __name__ == "__main__":
    event_loop.run(main())
