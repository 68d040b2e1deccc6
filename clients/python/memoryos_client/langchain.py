"""LangChain and LangGraph over MemoryOS: a chat message history and a retriever.

``pip install './clients/python[langchain]'``. ``MemoryOSChatMessageHistory`` writes what a
chain says as the user's turns and reads the short-term window back as messages;
``MemoryOSRetriever`` turns ``retrieve`` into ``Document`` objects with page and fact metadata.
Both take a ``MemoryClient`` (and, for the async methods, an ``AsyncMemoryClient``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from memoryos_client.aio import AsyncMemoryClient
from memoryos_client.models import MemoryResponse, PageOut, RetrieveResponse, Scored
from memoryos_client.sync import MemoryClient

__all__ = ["MemoryOSChatMessageHistory", "MemoryOSRetriever"]


class MemoryOSChatMessageHistory(BaseChatMessageHistory):
    """One user's conversation, kept by MemoryOS.

    ``add_messages``: a human message followed by an AI message is one turn; a message left
    without its partner goes as a bus message of ``conversation_id`` (the pipeline pairs it
    with the reply when that comes, or keeps it alone after MEMORYOS_PAIRING_WAIT_S).
    ``messages``: the short-term window's pages of ``conversation_id`` (the user's newest),
    oldest first, each a human and an AI message; what the user said on other channels comes
    through ``MemoryOSRetriever``. Memory is asynchronous: a turn just added shows here moments
    later. ``clear`` forgets the user (DELETE): everything MemoryOS holds of them, not only
    this window.
    """

    def __init__(
        self,
        client: MemoryClient,
        user_id: str,
        *,
        async_client: AsyncMemoryClient | None = None,
        assistant_id: str | None = None,
        channel: str | None = None,
        conversation_id: str = "langchain",
    ) -> None:
        self.client = client
        self.async_client = async_client
        self.user_id = user_id
        self.assistant_id = assistant_id
        self.channel = channel
        self.conversation_id = conversation_id

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return _window(self.client.get_memory(self.user_id), self.conversation_id)

    async def aget_messages(self) -> list[BaseMessage]:
        if self.async_client is None:
            return await super().aget_messages()
        memory = await self.async_client.get_memory(self.user_id)
        return _window(memory, self.conversation_id)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        for turn in _turns(messages):
            if isinstance(turn, tuple):
                self.client.add_turn(self.user_id, *turn, **self._where())
            else:
                role, text = turn
                self.client.add_message(
                    self.user_id, self.conversation_id, role, text, **self._from()
                )

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        if self.async_client is None:
            return await super().aadd_messages(messages)
        for turn in _turns(messages):
            if isinstance(turn, tuple):
                await self.async_client.add_turn(self.user_id, *turn, **self._where())
            else:
                role, text = turn
                await self.async_client.add_message(
                    self.user_id, self.conversation_id, role, text, **self._from()
                )
        return None

    def clear(self) -> None:
        self.client.forget_user(self.user_id)

    async def aclear(self) -> None:
        if self.async_client is None:
            return await super().aclear()
        await self.async_client.forget_user(self.user_id)
        return None

    def _where(self) -> dict[str, Any]:
        return {**self._from(), "conversation_id": self.conversation_id}

    def _from(self) -> dict[str, Any]:
        return {"assistant_id": self.assistant_id, "channel": self.channel}


class MemoryOSRetriever(BaseRetriever):
    """``retrieve`` as Documents: the pages in context order (short- and mid-term, with their
    ids, time, tier and segment), then the user knowledge and agent traits it found (with
    ``fact_id`` and score)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: MemoryClient
    user_id: str
    async_client: AsyncMemoryClient | None = None
    top_k: int | None = None
    assistant_id: str | None = None
    filters: dict[str, Any] | None = None

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        found = self.client.retrieve(
            self.user_id,
            query,
            top_k=self.top_k,
            assistant_id=self.assistant_id,
            filters=self.filters,
        )
        return documents(found)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.async_client is None:
            return await super()._aget_relevant_documents(query, run_manager=run_manager)
        found = await self.async_client.retrieve(
            self.user_id,
            query,
            top_k=self.top_k,
            assistant_id=self.assistant_id,
            filters=self.filters,
        )
        return documents(found)


def documents(found: RetrieveResponse) -> list[Document]:
    pages: dict[str, tuple[PageOut, str, str | None]] = {
        page.page_id: (page, "short_term", None) for page in found.short_term
    }
    pages.update({page.page_id: (page, "mid_term", page.segment_id) for page in found.mid_term})
    order = [pid for pid in found.context if pid in pages] or list(pages)
    docs = [_page_document(*pages[pid]) for pid in order]
    docs += [_fact_document(fact, "user_knowledge") for fact in found.user_knowledge]
    docs += [_fact_document(fact, "agent_trait") for fact in found.agent_traits]
    return docs


def _page_document(page: PageOut, tier: str, segment_id: str | None) -> Document:
    metadata: dict[str, Any] = {
        "kind": "page",
        "tier": tier,
        "page_id": page.page_id,
        "turn_id": page.turn_id,
        "timestamp": page.timestamp.isoformat(),
        "assistant_id": page.assistant_id,
        "channel": page.channel,
        "conversation_id": page.conversation_id,
        "segment_id": segment_id,
    }
    text = f"User: {page.query}\nAssistant: {page.response}"
    return Document(page_content=text, metadata=metadata, id=page.page_id)


def _fact_document(fact: Scored, kind: str) -> Document:
    metadata = {"kind": kind, "fact_id": fact.fact_id, "score": fact.score}
    return Document(page_content=fact.text, metadata=metadata, id=fact.fact_id)


def _window(memory: MemoryResponse, conversation_id: str) -> list[BaseMessage]:
    """This conversation's pages of the STM window (other channels' are the retriever's)."""
    messages: list[BaseMessage] = []
    for page in memory.short_term:
        if page.conversation_id == conversation_id:
            messages += [HumanMessage(page.query), AIMessage(page.response)]
    return messages


def _turns(messages: Sequence[BaseMessage]) -> list[tuple[str, str] | list[str]]:
    """Human then the AI's answer: a turn (query, response); a message alone: [role, text].

    An AI message that only calls tools is the chain at work, not an answer: skipped, as are
    tool and system messages; the answer after the tool results pairs with the question."""
    out: list[tuple[str, str] | list[str]] = []
    pending: str | None = None
    for message in messages:
        text = str(message.text).strip()  # the text parts, joined (a str in every version)
        if isinstance(message, HumanMessage) and text:
            if pending is not None:
                out.append(["user", pending])
            pending = text
        elif isinstance(message, AIMessage) and text:
            if pending is not None:
                out.append((pending, text))
                pending = None
            else:
                out.append(["assistant", text])
    if pending is not None:
        out.append(["user", pending])
    return out
