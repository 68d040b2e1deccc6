"""`memoryos ingest` into the embedded stack, through its HTTP API (streams/commands/ingest.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson
import pytest

from memoryos_client.aio import AsyncMemoryClient
from schemas.errors import ConfigError
from streams.commands import ingest as ingest_command
from streams.progress import NO_PROGRESS
from tests.support.builders import make_turns
from tests.support.stacks import running_stack

pytestmark = pytest.mark.integration


@pytest.mark.asyncio
async def test_long_turns_are_split_under_the_body_limit_and_all_acknowledged(
    tmp_path: Path,
) -> None:
    """256 turns of 4 KB pass the API's 1 MiB body limit: one request per chunk answered
    413 and counted every line failed (a review; 44 of 300 acknowledged)."""
    turns = make_turns("long", [(f"q{i} " + "words " * 700, f"a{i}") for i in range(300)])
    path = tmp_path / "long.jsonl"
    path.write_bytes(b"".join(orjson.dumps(t.model_dump(mode="json")) + b"\n" for t in turns))
    assert path.stat().st_size > 300 * 4000
    # acknowledged is what is asked here: the stop need not wait for one user's 300 turns
    async with running_stack(tmp_path / "data", drain_timeout_s=0) as stack:
        async with AsyncMemoryClient(f"http://127.0.0.1:{stack.port}") as client:
            report = await ingest_command.post_file(path, client, NO_PROGRESS)
        assert report.acknowledged == 300, report.first_failure
        assert report.failed == 0


def test_a_chunk_is_split_by_bytes_and_an_oversized_line_goes_alone() -> None:
    turns = make_turns("u", [("x" * size, "ok") for size in (100, 100, 5000, 100)])
    requests = list(ingest_command._requests(list(turns), max_bytes=3000))
    assert [len(r) for r in requests] == [2, 1, 1]
    assert [event for request in requests for event, _ in request] == list(turns)


@pytest.mark.asyncio
async def test_requests_stay_under_a_lower_configured_body_limit(tmp_path: Path) -> None:
    """MEMORYOS_MAX_BODY_BYTES below the 1 MiB default: the fixed 512 KB requests were all
    answered 413 (a review: 0 of 1,000 acknowledged at 256 KB)."""
    turns = make_turns("small", [(f"q{i} " + "words " * 250, f"a{i}") for i in range(300)])
    path = tmp_path / "turns.jsonl"
    path.write_bytes(b"".join(orjson.dumps(t.model_dump(mode="json")) + b"\n" for t in turns))
    async with running_stack(
        tmp_path / "data", max_body_bytes=64 * 1024, drain_timeout_s=0
    ) as stack:
        args = argparse.Namespace(
            file=path, url=f"http://127.0.0.1:{stack.port}", wait=False, messages=False
        )
        report = await ingest_command._post(args, stack.settings, NO_PROGRESS)
        assert report.acknowledged == 300, report.first_failure


@pytest.mark.asyncio
async def test_a_refused_api_key_stops_the_ingest_with_a_clear_error(tmp_path: Path) -> None:
    """A wrong key made every request fail with 401 and the command exit 1 after the whole
    file; it now stops at the first refusal with a message (exit 2, as any MemoryOSError)."""
    turns = make_turns("keyed", [(f"q{i}", f"a{i}") for i in range(5)])
    path = tmp_path / "turns.jsonl"
    path.write_bytes(b"".join(orjson.dumps(t.model_dump(mode="json")) + b"\n" for t in turns))
    async with running_stack(tmp_path / "data", api_keys="the-right-key") as stack:
        args = argparse.Namespace(
            file=path, url=f"http://127.0.0.1:{stack.port}", wait=False, messages=False
        )
        wrong = stack.settings.model_copy(update={"api_keys": "a-wrong-key"})
        with pytest.raises(ConfigError, match=r"refused the API key \(401.*0 lines were ack"):
            await ingest_command._post(args, wrong, NO_PROGRESS)
        right = await ingest_command._post(args, stack.settings, NO_PROGRESS)
        assert right.acknowledged == 5
