"""``AsyncMemoryClient``: the same API as ``MemoryClient``, for asyncio (httpx.AsyncClient)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import httpx

from memoryos_client import calls
from memoryos_client.errors import ConnectionFailed, ServiceUnavailable, UnexpectedReply
from memoryos_client.models import (
    AssistantProfile,
    BatchAccepted,
    DeadLettersReplayed,
    DeletedCounts,
    FactAccepted,
    FactHistory,
    FactList,
    HistoryResponse,
    Imported,
    KeyCreated,
    KeyOut,
    MemoryResponse,
    MessagesAccepted,
    RespondResponse,
    RetrieveResponse,
    UserList,
    UserProfile,
    WhoAmI,
)
from memoryos_client.sync import DEFAULT_URL, TIMEOUT, headers

Result = TypeVar("Result")


class AsyncMemoryClient:
    """Every route of the API; results are the API's typed models, errors ``APIError``s.

    >>> async with AsyncMemoryClient("http://127.0.0.1:8080") as memory:
    ...     await memory.add_turn("alice", "My dog is called Miso.", "Lovely name!")
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        api_key: str | None = None,
        *,
        timeout: httpx.Timeout | float = TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=base_url, headers=headers(api_key), timeout=timeout, transport=transport
        )

    async def _send(self, call: calls.Call[Result]) -> Result:
        try:
            response = await self._http.request(call.method, call.path, **call.request())
        except httpx.HTTPError as exc:
            raise ConnectionFailed(f"no reply from {self._http.base_url}: {exc!r}") from exc
        checked = calls.checked(response)
        try:
            return call.parse(checked)
        except (ValueError, RecursionError) as exc:  # not JSON, not the API's model, too deep
            raise UnexpectedReply(checked.status_code, f"an unexpected reply: {exc}") from exc

    # --- turns and messages in ---

    async def add_turn(
        self,
        user_id: str,
        query: str,
        response: str,
        *,
        timestamp: datetime | str | None = None,
        turn_id: str | None = None,
        assistant_id: str | None = None,
        channel: str | None = None,
        meta: Mapping[str, Any] | None = None,
        conversation_id: str | None = None,
    ) -> str:
        """Add one turn; its turn_id. It shows up in memory moments later (asynchronous)."""
        fields = {"timestamp": timestamp, "turn_id": turn_id, "assistant_id": assistant_id,
                  "channel": channel, "meta": meta,
                  "conversation_id": conversation_id}  # fmt: skip
        return await self._send(calls.add_turn(user_id, query, response, **fields))

    async def add_turns(self, turns: Sequence[Mapping[str, Any]]) -> BatchAccepted:
        """Many turns of any users (each with its user_id), checked one by one."""
        return await self._send(calls.add_turns(turns))

    async def add_message(
        self,
        user_id: str,
        conversation_id: str,
        role: str,
        text: str,
        *,
        message_id: str | None = None,
        timestamp: datetime | str | None = None,
        channel: str | None = None,
        assistant_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> str:
        """One bus message (role "user" or "assistant"); its message_id."""
        fields = {"message_id": message_id, "timestamp": timestamp, "channel": channel,
                  "assistant_id": assistant_id, "meta": meta}  # fmt: skip
        return await self._send(calls.add_message(user_id, conversation_id, role, text, **fields))

    async def add_messages(
        self, messages: Mapping[str, Any] | Sequence[Mapping[str, Any]]
    ) -> MessagesAccepted:
        """One message object or a list of them, paired into turns by the pipeline."""
        return await self._send(calls.add_messages(messages))

    # --- memory out ---

    async def retrieve(
        self,
        user_id: str,
        query: str,
        *,
        top_k: int | None = None,
        assistant_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        at: datetime | str | None = None,
        record_visit: bool = True,
    ) -> RetrieveResponse:
        """``filters``: channel, assistant_id, conversation_id, after, before, meta (all must
        hold); ``at``: when the question is asked, for "yesterday", "last week" and the like;
        ``record_visit=False``: look without counting a visit (the segments' heat stays)."""
        return await self._send(
            calls.retrieve(user_id, query, top_k, assistant_id, filters, at, record_visit)
        )

    async def respond(
        self,
        user_id: str,
        query: str,
        *,
        assistant_id: str | None = None,
        remember: bool = True,
        filters: Mapping[str, Any] | None = None,
        at: datetime | str | None = None,
        conversation_id: str | None = None,
    ) -> RespondResponse:
        """``remember=False``: an answer for a draft, not kept in the user's memory;
        ``conversation_id``: the conversation the remembered exchange belongs to."""
        return await self._send(
            calls.respond(user_id, query, assistant_id, remember, filters, at, conversation_id)
        )

    async def get_memory(self, user_id: str) -> MemoryResponse:
        return await self._send(calls.get_memory(user_id))

    async def get_history(self, user_id: str, limit: int = 20) -> HistoryResponse:
        """The user's recent pipeline history: where each turn is, and what failed."""
        return await self._send(calls.get_history(user_id, limit))

    async def replay_dead_letters(
        self, user_id: str, letters: Sequence[Mapping[str, Any]] | None = None
    ) -> DeadLettersReplayed:
        """Send the user's dead letters back to their topics (admin): ``letters`` as the
        history lists them (topic, partition, offset); none: all of the user's."""
        return await self._send(calls.replay_dead_letters(user_id, letters))

    async def export_memory(self, user_id: str | None = None) -> list[str]:
        """The tenant's memory (or one user's) as NDJSON lines, the header first (admin)."""
        return await self._send(calls.export_memory(user_id))

    async def import_memory(self, lines: Sequence[str]) -> Imported:
        """Load an export's lines into this deployment (the operator's key)."""
        return await self._send(calls.import_memory(lines))

    async def forget_user(self, user_id: str) -> DeletedCounts:
        return (await self._send(calls.forget_user(user_id))).deleted

    # --- facts ---

    async def list_facts(
        self,
        user_id: str,
        kind: str | None = None,
        include_superseded: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> FactList:
        """One page of the user's facts, newest first (``kind``: user_knowledge or
        agent_trait); ``include_superseded`` adds the updated ones, ``next_cursor`` the next."""
        return await self._send(calls.list_facts(user_id, kind, include_superseded, limit, cursor))

    async def add_fact(
        self,
        user_id: str,
        text: str,
        kind: str = "user_knowledge",
        assistant_id: str | None = None,
        pinned: bool | None = None,
    ) -> FactAccepted:
        """Add a fact (source "api"); its fact_id. Applied in the user's order moments later."""
        return await self._send(calls.add_fact(user_id, text, kind, assistant_id, pinned))

    async def edit_fact(
        self, user_id: str, fact_id: str, text: str | None = None, pinned: bool | None = None
    ) -> FactAccepted:
        """Correct a fact's text, or pin or unpin it; it keeps its id. ``NotFoundError``: no
        such fact; ``Conflict``: the user's DELETE has not completed."""
        return await self._send(calls.edit_fact(user_id, fact_id, text, pinned))

    async def delete_fact(self, user_id: str, fact_id: str) -> FactAccepted:
        """Delete one fact: never served, never extracted again from its turns."""
        return await self._send(calls.delete_fact(user_id, fact_id))

    async def fact_history(self, user_id: str, fact_id: str) -> FactHistory:
        """Every change of the fact, oldest first."""
        return await self._send(calls.fact_history(user_id, fact_id))

    # --- profiles ---

    async def set_user_profile(self, user_id: str, profile: Mapping[str, Any]) -> UserProfile:
        return await self._send(calls.set_user_profile(user_id, profile))

    async def set_assistant_profile(
        self, assistant_id: str, profile: Mapping[str, Any]
    ) -> AssistantProfile:
        return await self._send(calls.set_assistant_profile(assistant_id, profile))

    async def get_assistant_profile(self, assistant_id: str) -> AssistantProfile:
        return await self._send(calls.get_assistant_profile(assistant_id))

    # --- tenants: keys and users ---

    async def whoami(self) -> WhoAmI:
        """The tenant and scopes of this client's key."""
        return await self._send(calls.whoami())

    async def create_key(
        self,
        scopes: Sequence[str],
        tenant: str | None = None,
        name: str = "",
        rate_limit: str | None = None,
    ) -> KeyCreated:
        """A new key (scope admin); ``.key`` is the key itself, shown this once."""
        return await self._send(calls.create_key(scopes, tenant, name, rate_limit))

    async def list_keys(self, tenant: str | None = None) -> list[KeyOut]:
        return (await self._send(calls.list_keys(tenant))).keys

    async def revoke_key(self, key_id: str) -> KeyOut:
        return await self._send(calls.revoke_key(key_id))

    async def list_users(self, cursor: str | None = None, limit: int = 100) -> UserList:
        """One page of the tenant's users (scope admin); ``next_cursor`` asks for the next."""
        return await self._send(calls.list_users(cursor, limit))

    # --- operations ---

    async def health(self) -> dict[str, Any]:
        return await self._send(calls.health())

    async def ready(self) -> bool:
        try:
            return await self._send(calls.ready())
        except ServiceUnavailable:  # 503 is /readyz's "not yet"
            return False

    async def metrics(self) -> str:
        return await self._send(calls.metrics())

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
