"""`memoryos up` (embedded), `memoryos worker` and `memoryos serve` (production roles)."""

from __future__ import annotations

import argparse
import asyncio
import signal

from adapters import event_loop
from adapters.settings import Settings
from streams.commands.ingest_wait import service_url
from streams.progress import Step, open_progress
from streams.stack import Role, Stack


def main(args: argparse.Namespace, settings: Settings) -> int:
    demo = bool(getattr(args, "demo", False))
    return event_loop.run(_run(settings, "all", demo=demo, quiet=args.quiet))


def worker(args: argparse.Namespace, settings: Settings) -> int:
    return event_loop.run(_run(settings, "worker", quiet=args.quiet))


def serve(args: argparse.Namespace, settings: Settings) -> int:
    return event_loop.run(_run(settings, "service", quiet=args.quiet))


INSPECT_URL = "http://127.0.0.1:8080"  # `memoryos inspect`'s default
COMMAND = {"all": "up", "worker": "worker", "service": "serve"}


def started_lines(stack: Stack, steps: list[Step]) -> list[str]:
    """What is up, how long each step took, and the URLs to try next."""
    settings, role = stack.settings, stack.role
    url = service_url(settings, stack.port)
    inspect = "memoryos inspect alice" + ("" if url == INSPECT_URL else f" --url {url}")
    name = "memoryos" if role == "all" else f"memoryos {COMMAND[role]}"
    took = ", ".join(f"{step.name} {step.seconds:.1f} s" for step in steps)
    lines = [
        f"{name} is up in {sum(step.seconds for step in steps):.1f} s ({took})",
        f"  broker {stack.broker_url}  data {settings.data_dir}  llm {settings.llm}  "
        f"store {settings.store}",
    ]
    if role != "worker":
        lines += [
            f"  add a turn:   curl -s -X POST {url}/v1/users/alice/turns "
            '-H \'content-type: application/json\' -d \'{"query": "My dog is Miso.", '
            '"response": "Lovely name!"}\'',
            f"  its memory:   curl -s {url}/v1/users/alice/memory   or: {inspect}",
            f"  API docs:     {url}/docs",
        ]
    lines += [f"  health:       {url}/healthz   metrics: {url}/metrics", "  Ctrl-C stops."]
    return lines


async def _run(settings: Settings, role: Role, demo: bool = False, quiet: bool = False) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    stack = Stack(settings, role)
    try:
        with open_progress(COMMAND[role], quiet=quiet) as steps:
            await stack.start(steps)
        print("\n".join(started_lines(stack, steps.finished)), flush=True)
        if demo:
            from streams.commands.demo import run_demo

            await run_demo(stack, quiet)
        await stop.wait()
        print("memoryos: stopping (finishing work in flight)...", flush=True)
    finally:
        await stack.stop()
    return 0
