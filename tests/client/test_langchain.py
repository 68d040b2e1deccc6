"""The LangChain integration against a live `memoryos up`, with the real langchain-core: a
``RunnableWithMessageHistory`` chain (its fake chat model) whose history is MemoryOS (turns
written, the STM window read back into the next prompt), and a retriever whose Documents carry
page and fact metadata; sync and async."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from memoryos_client import AsyncMemoryClient, MemoryClient
from memoryos_client.langchain import MemoryOSChatMessageHistory, MemoryOSRetriever
from tests.support.readme import DEFAULT_URL, langchain_quick_start
from tests.support.stacks import UpProcess, eventually, up_running

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def up(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[UpProcess]:
    async with up_running(tmp_path_factory.mktemp("langchain-up"), MEMORYOS_STM_CAPACITY="3") as up:
        yield up


def support_bot(
    replies: list[str], make_history: Any, prompts: list[list[BaseMessage]]
) -> RunnableWithMessageHistory:
    def spy(prompt: PromptValue) -> PromptValue:
        prompts.append(prompt.to_messages())
        return prompt

    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are a support agent."), MessagesPlaceholder("history"), ("human", "{q}")]
    )
    chain = prompt | RunnableLambda(spy) | FakeListChatModel(responses=replies)
    return RunnableWithMessageHistory(
        chain, make_history, input_messages_key="q", history_messages_key="history"
    )


async def test_a_chain_remembers_through_memoryos(up: UpProcess) -> None:
    prompts: list[list[BaseMessage]] = []

    def run() -> None:
        with MemoryClient(up.url) as client:
            bot = support_bot(
                ["Miso is a lovely name!", "Your dog is called Miso."],
                lambda session_id: MemoryOSChatMessageHistory(client, session_id),
                prompts,
            )
            config: Any = {"configurable": {"session_id": "lc-ann"}}
            first = bot.invoke({"q": "My dog is called Miso."}, config=config)
            assert first.content == "Miso is a lovely name!"
            asyncio.run(eventually(lambda: client.get_memory("lc-ann").short_term, 60))
            second = bot.invoke({"q": "What is my dog called?"}, config=config)
            assert second.content == "Your dog is called Miso."

    await asyncio.wait_for(asyncio.to_thread(run), 180)
    assert prompts[0][1:] == [HumanMessage("My dog is called Miso.")], "no history yet"
    assert prompts[1][1:] == [
        HumanMessage("My dog is called Miso."),
        AIMessage("Miso is a lovely name!"),
        HumanMessage("What is my dog called?"),
    ], "the STM window came back as the history"
    async with AsyncMemoryClient(up.url) as memory:

        async def both() -> list[Any] | None:
            window = (await memory.get_memory("lc-ann")).short_term
            return window if len(window) == 2 else None

        window = await eventually(both, 60)
    assert [(p.query, p.response) for p in window] == [
        ("My dog is called Miso.", "Miso is a lovely name!"),
        ("What is my dog called?", "Your dog is called Miso."),
    ]


async def test_the_retriever_gives_pages_and_facts_as_documents(up: UpProcess) -> None:
    async with AsyncMemoryClient(up.url) as memory:
        await memory.add_turn("lc-bob", "I ordered boots in size 39.", "Noted, size 39.")
        await memory.add_fact("lc-bob", "I am allergic to latex.")

        async def ready() -> bool:
            stored = (await memory.get_memory("lc-bob")).short_term
            return bool(stored) and bool((await memory.list_facts("lc-bob")).facts)

        await eventually(ready, 60)
        with MemoryClient(up.url) as client:
            retriever = MemoryOSRetriever(client=client, async_client=memory, user_id="lc-bob")
            docs = await asyncio.to_thread(retriever.invoke, "boots size and allergies")
            adocs = await retriever.ainvoke("boots size and allergies")
    assert [d.metadata for d in docs] == [d.metadata for d in adocs]
    (page,) = [d for d in docs if d.metadata["kind"] == "page"]
    assert page.page_content == "User: I ordered boots in size 39.\nAssistant: Noted, size 39."
    assert page.metadata["tier"] == "short_term"
    assert page.metadata["page_id"] == page.id
    assert page.metadata["turn_id"]
    facts = [d for d in docs if d.metadata["kind"] == "user_knowledge"]
    assert "I am allergic to latex." in [d.page_content for d in facts]
    assert all(d.metadata["fact_id"] == d.id for d in facts)


async def test_a_lone_message_goes_as_a_bus_message_and_clear_forgets(up: UpProcess) -> None:
    async with AsyncMemoryClient(up.url) as memory:
        history = MemoryOSChatMessageHistory(
            MemoryClient(up.url), "lc-cy", async_client=memory, conversation_id="c1"
        )
        await history.aadd_messages([HumanMessage("Where is my parcel?")])
        await history.aadd_messages([AIMessage("It ships today.")])  # the pipeline pairs them
        await eventually(history.aget_messages, 60)
        assert await history.aget_messages() == [
            HumanMessage("Where is my parcel?"),
            AIMessage("It ships today."),
        ]
        await history.aclear()
        assert await history.aget_messages() == []


async def test_the_readme_langchain_quick_start_runs_as_written(up: UpProcess) -> None:
    code = langchain_quick_start().replace(DEFAULT_URL, up.url)
    output = io.StringIO()

    def run() -> None:
        with contextlib.redirect_stdout(output):
            exec(compile(code, "README.md", "exec"), {})

    await asyncio.wait_for(asyncio.to_thread(run), 120)
    kinds = ast.literal_eval(output.getvalue().strip())  # the kinds it printed
    assert set(kinds) <= {"page", "user_knowledge", "agent_trait"}, kinds
    async with AsyncMemoryClient(up.url) as memory:

        async def stored() -> bool:
            return bool((await memory.get_memory("carol")).short_term)

        await eventually(stored, 60)  # the history it wrote is the user's memory
    with MemoryClient(up.url) as client:  # and the retriever finds it there
        docs = MemoryOSRetriever(client=client, user_id="carol").invoke("cat")
    pages = [doc.page_content for doc in docs if doc.metadata["kind"] == "page"]
    assert pages == ["User: My cat is called Tofu.\nAssistant: Cute!"]


async def test_a_tool_calling_run_pairs_the_question_with_the_answer() -> None:
    """An AI message that only calls a tool is not the answer; tool and system messages are
    the chain's; a question left without an answer goes alone."""
    from langchain_core.messages import SystemMessage, ToolMessage

    from memoryos_client.langchain import _turns

    call = AIMessage("", tool_calls=[{"name": "orders", "args": {}, "id": "c1"}])
    run = [
        SystemMessage("You are a support agent."),
        HumanMessage("Where is my parcel?"),
        call,
        ToolMessage("shipped", tool_call_id="c1"),
        AIMessage("It shipped today."),
        HumanMessage("Thanks!"),
    ]
    assert _turns(run) == [("Where is my parcel?", "It shipped today."), ["user", "Thanks!"]]
