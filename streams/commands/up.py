"""`memoryos up` (embedded), `memoryos worker` and `memoryos serve` (production roles)."""

from __future__ import annotations

import argparse
import asyncio
import signal

from adapters.settings import Settings
from streams.stack import Role, Stack


def main(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_run(settings, "all", demo=bool(getattr(args, "demo", False))))


def worker(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_run(settings, "worker"))


def serve(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_run(settings, "service"))


async def _run(settings: Settings, role: Role, demo: bool = False) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    stack = Stack(settings, role)
    try:
        await stack.start()
        print(
            f"memoryos {role} is up: http://{settings.host}:{stack.port}"
            f"  broker {stack.broker_url}  data {settings.data_dir}  "
            f"llm {settings.llm}  store {settings.store}  (Ctrl-C stops)",
            flush=True,
        )
        if demo:
            from streams.commands.demo import run_demo

            await run_demo(stack)
        await stop.wait()
        print("memoryos: stopping (finishing work in flight)...", flush=True)
    finally:
        await stack.stop()
    return 0
