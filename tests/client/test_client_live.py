"""The Python client against a live `memoryos up`: with the offline LLM, and with the LLM
behind the real `openai` client and the local fake server. Also runs the README's quick start."""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from evaluation.fake_openai import FakeOpenAI
from memoryos_client import AsyncMemoryClient, ConnectionFailed, InvalidInput, MemoryClient
from streams.broker import free_port
from tests.support.readme import DEFAULT_URL, python_quick_start
from tests.support.stacks import UpProcess, eventually, up_running

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def fake_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["offline", "openai"])
async def up(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    fake_server: FakeOpenAI,
) -> AsyncIterator[UpProcess]:
    # Embeddings from the fake server in both: the LLM backend is what differs.
    env = {
        "MEMORYOS_LLM": request.param,
        "MEMORYOS_EMBEDDER": "openai",
        "OPENAI_BASE_URL": fake_server.base_url,
        "OPENAI_API_KEY": "test-key",
        "MEMORYOS_EMBEDDING_MODEL": "fake-embedding",
        "MEMORYOS_STM_CAPACITY": "3",
    }
    async with up_running(tmp_path_factory.mktemp(f"client-{request.param}"), **env) as process:
        yield process


async def test_the_readme_quick_start_runs_as_written(up: UpProcess) -> None:
    code = python_quick_start()
    output = io.StringIO()

    def run() -> None:
        with contextlib.redirect_stdout(output):
            exec(compile(code.replace(DEFAULT_URL, up.url), "README.md", "exec"), {})

    await asyncio.wait_for(asyncio.to_thread(run), 120)
    assert output.getvalue().strip()
    assert "I am allergic to latex. api" in output.getvalue(), "the added fact is listed"


async def test_every_route_through_the_sync_client(up: UpProcess) -> None:
    def scenario() -> None:
        with MemoryClient(up.url) as memory:
            assert memory.health() == {"status": "ok"}
            assert memory.ready() is True
            assert "memoryos_events_total" in memory.metrics()
            profile = memory.set_user_profile("carol", {"name": "Carol", "plan": "gold"})
            assert profile.profile == {"name": "Carol", "plan": "gold"}
            bot = memory.set_assistant_profile("billing", {"role": "billing assistant"})
            assert memory.get_assistant_profile("billing") == bot
            turn_id = memory.add_turn("carol", "My invoice is 17.", "Thanks!", channel="web")
            batch = memory.add_turns([{"user_id": "carol", "query": "hi", "response": "hello"}])
            assert batch.accepted == 1
            # two channels of one user, as a bus sends them: one memory
            memory.add_messages(
                [
                    {"user_id": "carol", "conversation_id": "wa-1", "role": "user",
                     "text": "Where is my parcel?", "channel": "whatsapp"},
                    {"user_id": "carol", "conversation_id": "wa-1", "role": "assistant",
                     "text": "It ships today.", "channel": "whatsapp"},
                ]
            )  # fmt: skip
            memory.add_message("carol", "mail-1", "user", "Please send a copy.", channel="email")
            memory.add_message(
                "carol", "mail-1", "assistant", "Sent.", channel="email", assistant_id="billing"
            )
            stored = wait_for_pages(memory, "carol", 4)
            assert turn_id in stored
            channels = {page.meta.get("conversation_id") for page in memory_pages(memory)}
            assert {"wa-1", "mail-1"} <= channels
            found = memory.retrieve("carol", "parcel", assistant_id="billing", top_k=3)
            assert (found.user_profile, found.agent_profile) == (profile.profile, bot.profile)
            assert memory.get_history("carol", limit=50).turns
            lines = memory.export_memory("carol")  # open on loopback: the operator
            assert lines[0].startswith('{"format":"memoryos-export/')
            pages = sum('"collection":"pages"' in line for line in lines)
            assert memory.import_memory(lines).imported["pages"] == pages, "upserted as they are"
            draft = memory.respond("carol", "Draft a delay note", remember=False)
            assert draft.response
            assert draft.remembered is False
            answer = memory.respond("carol", "Where is my parcel?", assistant_id="billing")
            assert answer.response
            deleted = memory.forget_user("carol")
            assert deleted.short_term + deleted.mid_term_pages == 4
            assert memory.get_memory("carol").short_term == []

    await asyncio.wait_for(asyncio.to_thread(scenario), 240)


def memory_pages(memory: MemoryClient) -> list[Any]:
    document = memory.get_memory("carol")
    return [*document.short_term, *(p for s in document.mid_term for p in s.pages)]


def wait_for_pages(memory: MemoryClient, user: str, count: int) -> set[str]:
    async def placed() -> set[str] | None:
        turn_ids = {page.turn_id for page in memory_pages(memory)}
        return turn_ids if len(turn_ids) >= count else None

    return asyncio.run(eventually(placed, 60))


async def test_the_async_client_raises_the_apis_errors(
    up: UpProcess, fake_server: FakeOpenAI
) -> None:
    async with AsyncMemoryClient(up.url) as memory:
        assert await memory.ready()
        with pytest.raises(InvalidInput) as invalid:
            await memory.retrieve("dave", "")
        assert (invalid.value.status, invalid.value.field) == (422, "query")
        with pytest.raises(InvalidInput) as bad_profile:
            await memory.set_user_profile("dave", {"bio": "x" * 5000})
        assert "4096" in bad_profile.value.message
        await memory.add_message("dave", "c1", "user", "I live in Oslo.")
        await memory.add_message("dave", "c1", "assistant", "Noted.")

        async def placed() -> bool:
            return len((await memory.get_memory("dave")).short_term) == 1

        await eventually(placed, 60)
        assert (await memory.respond("dave", "Where do I live?")).response
        if up.env["MEMORYOS_LLM"] == "openai":  # the answer came through the openai client
            assert any(request.task == "respond" for request in fake_server.requests)
        assert (await memory.forget_user("dave")).short_term == 1
    async with AsyncMemoryClient(f"http://127.0.0.1:{free_port()}") as nowhere:
        with pytest.raises(ConnectionFailed):
            await nowhere.health()
