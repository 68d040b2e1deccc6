"""docs/configuration.md, made from ``Settings`` by ``make docs``.

The page shows the groups of ``GROUPS`` in order, each setting with its environment variable(s),
its default and its description, then the notes below. A test fails when the page is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import AliasChoices, SecretStr
from pydantic.fields import FieldInfo

from adapters.settings import ENV_PREFIX, GROUPS, Settings

PAGE = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"

INTRO = """\
# Configuration

<!-- Made by `make docs` (adapters/settings_doc.py) from adapters/settings.py: edit there. -->

Every setting is an environment variable, read once at start into one `Settings` object that is
passed down; nothing else reads the environment. An invalid value stops start-up with a message
naming the variable and what it allows, never the value, for example
`MEMORYOS_THETA: Input should be a valid number`. A deployment usually sets a few of the first
groups; the advanced group's defaults are the values measured best.
"""

NOTES = """\
## Notes

**Consumer timeouts and fetch wait.** The embedded broker holds a new group's first join for
about the rebalance timeout, and a restarted worker waits out the old member's session: short
values make `memoryos up` start in a few seconds. On a Kafka cluster with several workers use
30 s for both (`docker-compose.yml` and `deploy/k8s` do). faust-streaming hard-codes a 1.5 s
fetch wait and the embedded broker holds a waiting fetch for the whole wait, so every hop of
the pipeline could take that long; `streams/faust_transport.py` applies
`MEMORYOS_CONSUMER_FETCH_MAX_WAIT_MS` instead.

**Kafka over TLS and SASL.** The `MEMORYOS_KAFKA_*` settings are one set for every Kafka client
MemoryOS runs: the Faust worker (its consumers, producer and topic creation), a service
replica's producer, `memoryos ingest`, `memoryos dlq`, the consumer-lag probe and
`memoryos doctor` (`streams/kafka_security.py`). A half-configured set stops start-up instead
of being ignored: a CA file without an `SSL` protocol, SASL without both user and password, a
certificate without its key, or any of them without `MEMORYOS_BROKER_URL` (the embedded broker
listens on 127.0.0.1 in plaintext). `SASL_PLAINTEXT` sends the password in clear; use it only on
a trusted network.

**What the process sets for itself.** These were settings and are now the behaviour, each at the
value measured best (docs/benchmarks.md): the start-up heap is kept out of Python's full garbage
collections (`gc.freeze`: shorter pauses of the event loop), glibc makes at most two malloc
arenas (a valid `MALLOC_ARENA_MAX` in the environment wins) and memory freed by native code is
handed back to the OS every 5 s (`malloc_trim`).
"""


def variables(name: str, field: FieldInfo) -> str:
    """The variable(s) a setting is read from: its MEMORYOS_ name, and a standard alias."""
    alias = field.validation_alias
    names = list(alias.choices) if isinstance(alias, AliasChoices) else []
    return " or ".join(f"`{n}`" for n in names if isinstance(n, str)) or (
        f"`{ENV_PREFIX}{name.upper()}`"
    )


def choices(field: FieldInfo) -> str:
    """`` (one of `a`, `b`)`` for a setting that takes one of a few values."""
    annotation = field.annotation
    if get_origin(annotation) is not Literal:
        return ""
    return " (one of " + ", ".join(f"`{value}`" for value in get_args(annotation)) + ")"


def default_text(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, SecretStr):
        return "empty" if not value.get_secret_value() else "(secret)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if value == "":
        return "empty"
    return f"`{value}`"


def render() -> str:
    fields = Settings.model_fields
    parts = [INTRO]
    for title, about, names in GROUPS:
        rows = [f"## {title}", "", about, "", "| variable | default | meaning |", "|---|---|---|"]
        for name in names:
            field = fields[name]
            meaning = (field.description or "") + choices(field)
            meaning = meaning.replace("|", "\\|")
            rows.append(f"| {variables(name, field)} | {default_text(field.default)} | {meaning} |")
        parts.append("\n".join(rows) + "\n")
    parts.append(NOTES)
    return "\n".join(parts)


def main() -> None:
    if sys.argv[1:] == ["--check"]:
        raise SystemExit(0 if PAGE.read_text() == render() else "docs/configuration.md is stale")
    PAGE.write_text(render())


if __name__ == "__main__":
    main()
