"""The `memoryos` command: up, worker, serve, ingest, inspect, doctor, eval, bench, mcp.

Each subcommand builds Settings once (flags override the environment) and hands them down.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adapters.settings import Settings, load_settings
from schemas.errors import MemoryOSError

Handler = Callable[[argparse.Namespace, Settings], int]


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {}
    for flag, setting in (
        ("data_dir", "data_dir"),
        ("host", "host"),
        ("port", "port"),
        ("broker_port", "broker_port"),
        ("broker", "broker_url"),
    ):
        value = getattr(args, flag, None)
        if value is not None:
            overrides[setting] = value
    return load_settings(**overrides)


def _lazy(module: str, function: str = "main") -> Handler:
    """Import a subcommand's module only when it runs: start-up stays fast."""

    def run(args: argparse.Namespace, settings: Settings) -> int:
        handler: Handler = getattr(importlib.import_module(module), function)
        return handler(args, settings)

    return run


def _stack_flags(parser: argparse.ArgumentParser, http: bool = True) -> None:
    parser.add_argument("--data-dir", type=Path, help="data folder (default ./.memoryos)")
    parser.add_argument("--broker", help="kafka://host:port of an existing Kafka")
    parser.add_argument("--broker-port", type=int, help="embedded broker port (default 9092)")
    if http:
        parser.add_argument("--host", help="HTTP bind address (default 127.0.0.1)")
        parser.add_argument("--port", type=int, help="HTTP port (default 8080)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memoryos", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="embedded stack: broker + worker + HTTP in one process")
    _stack_flags(up)
    up.add_argument("--demo", action="store_true", help="ingest the bundled sample and print it")
    up.set_defaults(handler=_lazy("streams.commands.up"))

    worker = sub.add_parser("worker", help="a pipeline worker (production; needs --broker)")
    _stack_flags(worker)
    worker.set_defaults(handler=_lazy("streams.commands.up", "worker"))

    serve = sub.add_parser("serve", help="a stateless response-service replica (production)")
    _stack_flags(serve)
    serve.set_defaults(handler=_lazy("streams.commands.up", "serve"))

    ingest = sub.add_parser("ingest", help="send turn events from a JSONL file to memoryos.turns")
    ingest.add_argument("file", type=Path)
    ingest.add_argument("--broker", help="kafka://host:port (default: the embedded broker port)")
    ingest.set_defaults(handler=_lazy("streams.commands.ingest"))

    inspect = sub.add_parser("inspect", help="show one user's memory")
    inspect.add_argument("user")
    inspect.add_argument("--url", default="http://127.0.0.1:8080", help="service URL")
    inspect.add_argument("--json", action="store_true", help="print the JSON document")
    inspect.set_defaults(handler=_lazy("streams.commands.inspect"))

    doctor = sub.add_parser("doctor", help="check every configured backend live")
    doctor.add_argument("--json", action="store_true")
    doctor.add_argument("--broker", help="kafka://host:port to check as well")
    doctor.set_defaults(handler=_lazy("streams.commands.doctor"))

    evaluate = sub.add_parser("eval", help="evaluations")
    eval_sub = evaluate.add_subparsers(dest="dataset", required=True)
    locomo = eval_sub.add_parser("locomo", help="LoCoMo through the real pipeline")
    locomo.add_argument("data", type=Path, help="a LoCoMo-format JSON file")
    locomo.add_argument("--out", type=Path, required=True)
    locomo.add_argument("--k", type=int, default=10)
    locomo.add_argument("--samples", help="comma-separated sample ids")
    locomo.add_argument(
        "--holdout", help="comma-separated sample ids reported apart (not tuned on)"
    )
    locomo.add_argument(
        "--modes", default="paper", help="other retrieval modes measured in the same run"
    )
    locomo.set_defaults(handler=_lazy("evaluation.locomo"))

    bench = sub.add_parser("bench", help="throughput and latency, side by side")
    bench.add_argument("--out", type=Path, required=True)
    bench.add_argument("--quick", action="store_true")
    bench.set_defaults(handler=_lazy("evaluation.bench"))

    mcp = sub.add_parser("mcp", help="MCP server over the memory service")
    mcp.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    mcp.add_argument("--url", default="http://127.0.0.1:8080", help="the memory service")
    mcp.add_argument("--mcp-port", type=int, default=8090, help="port for --transport http")
    mcp.set_defaults(handler=_lazy("service.mcp"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = _settings(args)
        logging.basicConfig(
            level=logging.DEBUG if args.verbose else settings.log_level,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        for noisy in ("faust", "mode", "aiokafka", "httpx", "sentence_transformers"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
        code: int = args.handler(args, settings)
        return code
    except MemoryOSError as exc:
        print(f"memoryos: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
