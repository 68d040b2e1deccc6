"""The `memoryos` command line: one subcommand per task a user has.

Each subcommand builds Settings once (flags override the environment) and hands them down.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from adapters.native_memory import limit_arenas
from adapters.settings import Settings, load_settings
from schemas.errors import MemoryOSError
from streams.cli_help import (
    BENCH_EPILOG,
    DESCRIPTION,
    EVAL_EPILOG,
    HELP,
    INGEST_EPILOG,
    KEYS_EPILOG,
    UP_EPILOG,
)
from streams.log_rate import limit_noisy_loggers

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
    parser.add_argument(
        "--data-dir", type=Path, metavar="DIR", help="data folder (default ./.memoryos)"
    )
    parser.add_argument(
        "--broker", metavar="URL", help="host:port[,host:port] of an existing Kafka"
    )
    parser.add_argument(
        "--broker-port", type=int, metavar="PORT", help="embedded broker port (default 9092)"
    )
    if http:
        parser.add_argument("--host", help="HTTP bind address (default 127.0.0.1)")
        parser.add_argument("--port", type=int, help="HTTP port (default 8080)")


def _service_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="the running service (default http://HOST:PORT of settings)")
    parser.add_argument(
        "--key", help="an admin key of the tenant (default: the first of MEMORYOS_API_KEYS)"
    )


def _quiet_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bar: one plain line per step"
    )


def _version() -> str:
    try:
        return version("memoryos-streams")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _command(
    sub: Any, name: str, help_text: str, epilog: str | None = None
) -> argparse.ArgumentParser:
    """A subcommand whose --help starts with the same line the command list shows."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=help_text,
        description=help_text[0].upper() + help_text[1:] + ".",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memoryos",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"memoryos {_version()}",
        help="print the version and exit",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")

    up = _command(sub, "up", HELP["up"], UP_EPILOG)
    _stack_flags(up)
    up.add_argument(
        "--demo", action="store_true", help="then load a sample conversation and show its memory"
    )
    _quiet_flag(up)
    up.set_defaults(handler=_lazy("streams.commands.up"))

    ingest = _command(sub, "ingest", HELP["ingest"], INGEST_EPILOG)
    ingest.add_argument(
        "file", type=Path, metavar="FILE", help="a JSONL file, one turn per line (format below)"
    )
    ingest.add_argument(
        "--broker",
        metavar="URL",
        help="a Kafka's host:port[,host:port], produced to directly (default: the embedded "
        "stack, through its HTTP API at --url)",
    )
    ingest.add_argument(
        "--messages",
        action="store_true",
        help="the file holds message events (one per line) for memoryos.messages, not turns",
    )
    ingest.add_argument(
        "--data-dir",
        type=Path,
        metavar="DIR",
        help="the data folder of the settings (default .memoryos); the embedded stack journals "
        "the turns it accepts itself",
    )
    ingest.add_argument(
        "--wait", action="store_true", help="then wait until every sent turn is placed in memory"
    )
    ingest.add_argument(
        "--wait-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="stop waiting when no turn was placed for this long (default 300)",
    )
    ingest.add_argument(
        "--url",
        help="the memory service: where the turns go with the embedded broker, and what --wait "
        "reads (default http://HOST:PORT of settings)",
    )
    _quiet_flag(ingest)
    ingest.set_defaults(handler=_lazy("streams.commands.ingest"))

    inspect = _command(sub, "inspect", HELP["inspect"])
    inspect.add_argument("user", help="the user id, as in the turns' user_id")
    inspect.add_argument("--url", default="http://127.0.0.1:8080", help="the memory service")
    inspect.add_argument("--json", action="store_true", help="print the JSON document instead")
    inspect.set_defaults(handler=_lazy("streams.commands.inspect"))

    doctor = _command(sub, "doctor", HELP["doctor"])
    doctor.add_argument("--json", action="store_true", help="print the results as JSON")
    doctor.add_argument("--broker", metavar="URL", help="host:port to check as well")
    doctor.set_defaults(handler=_lazy("streams.commands.doctor"))

    dlq = _command(sub, "dlq", HELP["dlq"])
    dlq.add_argument("action", choices=["list", "replay"], help="list them, or send them back")
    dlq.add_argument(
        "--reason",
        help="only this reason: invalid, permanent, bug, exhausted, too_large, forgotten, webhook",
    )
    _stack_flags(dlq, http=False)
    dlq.set_defaults(handler=_lazy("streams.commands.dlq"))

    events = _command(sub, "events", HELP["events"])
    events_sub = events.add_subparsers(dest="action", required=True, metavar="ACTION")
    tail = _command(events_sub, "tail", HELP["events tail"])
    tail.add_argument("--user", metavar="ID", help="only this user's events")
    tail.add_argument("--type", action="append", metavar="T", help="only this type (repeatable)")
    tail.add_argument(
        "--from-beginning", action="store_true", help="what the topic still holds, then new ones"
    )
    tail.add_argument("--max", type=int, metavar="N", help="stop after N events")
    _stack_flags(tail, http=False)
    tail.set_defaults(handler=_lazy("streams.commands.events"))

    evaluate = _command(sub, "eval", HELP["eval"])
    eval_sub = evaluate.add_subparsers(dest="dataset", required=True, metavar="DATASET")
    locomo = _command(eval_sub, "locomo", HELP["eval locomo"], EVAL_EPILOG)
    locomo.add_argument("data", type=Path, help="a LoCoMo-format JSON file")
    locomo.add_argument("--out", type=Path, required=True, help="folder for the results")
    locomo.add_argument("--k", type=int, default=10, help="mid-term pages retrieved (default 10)")
    locomo.add_argument("--samples", help="comma-separated sample ids (default: all)")
    locomo.add_argument(
        "--holdout", help="comma-separated sample ids reported apart (not tuned on)"
    )
    locomo.add_argument(
        "--modes", default="paper", help="other retrieval modes measured in the same run"
    )
    _quiet_flag(locomo)
    locomo.set_defaults(handler=_lazy("evaluation.commands", "locomo"))

    bench = _command(sub, "bench", HELP["bench"], BENCH_EPILOG)
    bench.add_argument("--out", type=Path, required=True, help="folder for the results")
    bench.add_argument("--quick", action="store_true", help="smaller sizes: minutes, not an hour")
    bench.add_argument("--soak", type=float, metavar="MINUTES",
                       help="instead: a steady ingest with retrievals for MINUTES, sampling "
                       "memory, store size and lag (bench.json, soak.png)")  # fmt: skip
    bench.add_argument("--soak-rate", type=float, default=20.0, metavar="TURNS_PER_S",
                       help="soak: turns per second (default 20)")  # fmt: skip
    bench.add_argument("--soak-users", type=int, default=200, metavar="N",
                       help="soak: users, round-robin (default 200)")  # fmt: skip
    bench.add_argument("--soak-retrieves", type=float, default=2.0, metavar="PER_S",
                       help="soak: retrievals per second (default 2)")  # fmt: skip
    bench.add_argument("--soak-heap-profile", action="store_true",
                       help="soak: trace Python's heap (tracemalloc) and list the source lines "
                       "whose memory grew over the second half (bench.json)")  # fmt: skip
    _quiet_flag(bench)
    bench.set_defaults(handler=_lazy("evaluation.commands", "bench"))

    worker = _command(sub, "worker", HELP["worker"])
    _stack_flags(worker)
    _quiet_flag(worker)
    worker.set_defaults(handler=_lazy("streams.commands.up", "worker"))

    serve = _command(sub, "serve", HELP["serve"])
    _stack_flags(serve)
    _quiet_flag(serve)
    serve.set_defaults(handler=_lazy("streams.commands.up", "serve"))

    keys = _command(sub, "keys", HELP["keys"], KEYS_EPILOG)
    keys.add_argument("action", choices=["create", "list", "revoke"], help="what to do")
    keys.add_argument("key_id", nargs="?", help="revoke: the key's id (from `keys list`)")
    keys.add_argument("--tenant", help="the key's tenant (create: default 'default')")
    keys.add_argument("--scopes", help="create: comma-separated read,write,forget,admin")
    keys.add_argument("--name", help="create: a label for people")
    keys.add_argument(
        "--rate", help="create: RATE or RATE/BURST requests a second (default MEMORYOS_RATE_LIMIT)"
    )
    keys.add_argument("--data-dir", type=Path, metavar="DIR", help="data folder (./.memoryos)")
    keys.add_argument("--url", help="a running service (default http://HOST:PORT of settings)")
    keys.set_defaults(handler=_lazy("streams.commands.keys"))

    export = _command(sub, "export", HELP["export"])
    export.add_argument("--user", help="only this user (default: every user of the tenant)")
    _service_flags(export)
    export.set_defaults(handler=_lazy("streams.commands.export", "export_main"))

    load = _command(sub, "import", HELP["import"])
    load.add_argument("file", type=Path, metavar="FILE", help="an export (memoryos export)")
    _service_flags(load)
    load.set_defaults(handler=_lazy("streams.commands.export", "import_main"))

    mcp = _command(sub, "mcp", HELP["mcp"])
    mcp.add_argument(
        "--transport", choices=["stdio", "http"], default="stdio", help="how clients connect"
    )
    mcp.add_argument("--url", default="http://127.0.0.1:8080", help="the memory service")
    mcp.add_argument("--mcp-port", type=int, default=8090, help="port for --transport http")
    mcp.set_defaults(handler=_lazy("service.mcp"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = _settings(args)
        limit_arenas()  # before any thread: glibc settles its limit early
        logging.basicConfig(
            level=logging.DEBUG if args.verbose else settings.log_level,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        for noisy in ("faust", "mode", "aiokafka", "httpx", "sentence_transformers"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
        limit_noisy_loggers()  # a broker gone away: a line every 10 s, not thousands
        code: int = args.handler(args, settings)
        return code
    except MemoryOSError as exc:
        print(f"memoryos: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader (`| head`) stopped reading: no traceback, and none at exit either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
