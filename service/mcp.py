"""`memoryos mcp`: the memory service's HTTP API as MCP tools, for any agent framework.

An MCP server (the official SDK's MCPServer, formerly FastMCP) over stdio or streamable HTTP.
It holds no memory itself: every tool is one call to a running memory service (`memoryos up`
or `memoryos serve`) at ``--url``. A reply of 4xx/5xx, or no reply, becomes a tool error
carrying the service's message.

Over HTTP each request carries its caller's bearer key, the API's own (an operator key or a
tenant's key: ``memoryos keys``), and every tool call passes it on to the service: the caller
acts in its key's tenant, within its key's scopes. A request without a valid key is refused
with 401 before it reaches a tool. The server binds to MEMORYOS_MCP_HOST, loopback unless
changed. Over stdio whoever spawns the server owns it: it calls with the first of
MEMORYOS_API_KEYS, or with MEMORYOS_MCP_KEY (a tenant's key) when set.
"""

from __future__ import annotations

import argparse
import hmac
import re
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import quote, urlencode

import httpx
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from adapters.settings import LOOPBACK, Settings
from schemas.errors import ConfigError
from schemas.facts import FactId, FactKindName, FactText
from schemas.filters import Filters
from schemas.profile import Profile
from schemas.turn import ID_PATTERN, Meta, Text

TIMEOUT = httpx.Timeout(120.0, connect=5.0)  # respond waits for the LLM
INSTRUCTIONS = (
    "Long-term memory (MemoryOS) for conversations, per user id. After each exchange call "
    "add_turn; before answering call retrieve_memory (or let respond answer with memory). "
    "get_memory shows everything stored for a user; forget_user deletes it. "
    "set_user_profile and set_assistant_profile set static attributes shown in every answer. "
    "list_facts shows the facts remembered about a user, each with its fact_id; add_fact, "
    "edit_fact and delete_fact correct them, fact_history shows how one changed. "
    "add_turns and add_messages store many at once (add_messages: a message bus's messages, "
    "paired into turns); get_history shows where a user's turns are in the pipeline and what "
    "failed; list_users, whoami and get_assistant_profile read the tenant's setup."
)
UserId = Annotated[str, Field(description="whose memory (letters, digits, . _ : @ -)")]
# The turn schema's own types: a bad argument is refused here, naming it, before any call.
Query = Annotated[Text, Field(description="the user's message")]
ProfileArg = Annotated[
    Profile, Field(description="a JSON object of attributes, at most 64 keys and 4 KiB")
]
AssistantArg = Annotated[
    str | None, Field(description="which assistant (its own profile and traits)")
]
# The facts schema's own types, likewise: a malformed fact id never reaches a URL.
# The retrieve body's own filters: a bad one is refused here, naming it, before any call.
FiltersArg = Annotated[
    Filters | None,
    Field(description="channel, assistant_id, conversation_id, after, before, meta: all hold"),
]
AtArg = Annotated[
    datetime | None, Field(description="when the question is asked (ISO 8601; default now)")
]
ConversationArg = Annotated[
    str | None, Field(description="the conversation the exchange belongs to")
]
FactIdArg = Annotated[FactId, Field(description="the fact's id (from list_facts or retrieve)")]
FactKindArg = Annotated[FactKindName, Field(description="user_knowledge or agent_trait")]


class MemoryAPI:
    """The few HTTP calls the tools make; errors become ToolError with the service's reason."""

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,  # tests: the service in-process
    ) -> None:
        self.url = url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.transport = transport

    async def call(
        self,
        method: str,
        user_id: str,
        path: str = "",
        body: dict[str, Any] | None = None,
        collection: str = "users",
        caller: str | None = None,
    ) -> dict[str, Any]:
        """``collection``/``user_id``: ``users`` and a user, or ``assistants`` and an assistant."""
        if not re.fullmatch(ID_PATTERN, user_id):
            name = "user_id" if collection == "users" else "assistant_id"
            raise ToolError(
                f"{name} must be 1-128 characters of letters, digits and . _ : @ -, "
                f"starting with a letter or digit; got {user_id!r}"
            )
        return await self.request(
            method, f"/v1/{collection}/{quote(user_id, safe='')}{path}", body, caller
        )

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        caller: str | None = None,
    ) -> dict[str, Any]:
        """One call to the service at ``path`` (from /v1 on), as the caller."""
        url = f"{self.url}{path}"
        headers = {"Authorization": caller} if caller else self.headers
        try:
            async with httpx.AsyncClient(
                headers=headers, timeout=TIMEOUT, transport=self.transport
            ) as client:
                reply = await client.request(method, url, json=body)
        except httpx.HTTPError as exc:
            raise ToolError(f"cannot reach the memory service at {self.url}: {exc!r}") from None
        if reply.status_code >= 400:
            raise ToolError(f"memory service answered {reply.status_code}: {_reason(reply)}")
        try:
            data = reply.json()
        except ValueError:
            data = None
        if reply.status_code >= 300 or not isinstance(data, dict):
            raise ToolError(f"not the memory service's answer at {self.url}: {reply.status_code}")
        return data

    async def confirms(self, authorization: str) -> bool:
        """Whether the service takes this Authorization header (a tenant's key)."""
        if not authorization.strip().lower().startswith("bearer mos_"):
            return False
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT, transport=self.transport) as client:
                reply = await client.get(
                    f"{self.url}/v1/whoami", headers={"Authorization": authorization}
                )
        except httpx.HTTPError:
            return False
        return reply.status_code == 200


def _reason(reply: httpx.Response) -> str:
    try:
        body = reply.json()
    except ValueError:
        return reply.text[:500] or reply.reason_phrase
    if isinstance(body, dict) and "error" in body:
        field = body.get("field")
        return f"{body['error']}" + (f" (field: {field})" if field else "")
    return str(body)[:500]


def _caller(ctx: Context | None) -> str | None:
    """The Authorization header of the HTTP request a tool call came in (None over stdio)."""
    try:
        request = ctx.request_context.request if ctx is not None else None
    except ValueError:  # outside a request
        return None
    headers = getattr(request, "headers", None)
    value = headers.get("authorization") if headers is not None else None
    return str(value) if value else None


def _present(**values: Any) -> dict[str, Any]:
    """The arguments given, as JSON takes them (times in ISO 8601)."""
    return {
        key: value.isoformat() if isinstance(value, datetime) else value
        for key, value in values.items()
        if value is not None
    }


def build_server(
    url: str, api_key: str | None = None, transport: httpx.AsyncBaseTransport | None = None
) -> MCPServer:
    """The MCP server with its tools, calling the memory service at ``url``."""
    api = MemoryAPI(url, api_key, transport)
    server: MCPServer = MCPServer("memoryos", instructions=INSTRUCTIONS, version="0.1.0")

    @server.tool()
    async def add_turn(
        user_id: UserId,
        query: Query,
        response: Annotated[Text, Field(description="the assistant's reply")],
        timestamp: Annotated[str | None, Field(description="ISO 8601; default now")] = None,
        meta: Annotated[Meta | None, Field(description="JSON object kept with the turn")] = None,
        turn_id: Annotated[
            str | None, Field(description="the turn's id (sent again: a no-op); default new")
        ] = None,
        assistant_id: AssistantArg = None,
        channel: Annotated[str | None, Field(description="where it was said, e.g. web")] = None,
        conversation_id: ConversationArg = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Store one dialogue turn (the user's query and the assistant's response) in the
        user's memory. timestamp: ISO 8601 (default now); meta: any JSON object kept with the
        turn. Returns {"turn_id"}; the turn shows up in short-term memory moments later."""
        body = _present(
            query=query,
            response=response,
            timestamp=timestamp,
            meta=meta,
            turn_id=turn_id,
            assistant_id=assistant_id,
            channel=channel,
            conversation_id=conversation_id,
        )
        return await api.call("POST", user_id, "/turns", body, caller=_caller(ctx))

    @server.tool()
    async def add_turns(
        turns: Annotated[
            list[Any],
            Field(
                min_length=1,
                max_length=1000,
                description="turn objects, each with user_id, query, response and the "
                "optional fields of add_turn",
            ),
        ],
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Store many turns at once (any users). Returns {"accepted", "results": [{"index",
        "turn_id"} or {"index", "error"}]}: a bad item is refused alone, the rest are kept."""
        return await api.request("POST", "/v1/turns", turns, caller=_caller(ctx))

    @server.tool()
    async def add_messages(
        messages: Annotated[
            list[Any],
            Field(
                min_length=1,
                max_length=1000,
                description="message objects of a bus: user_id, conversation_id, role (user "
                "or assistant), text; optional message_id, timestamp, channel, assistant_id, "
                "meta",
            ),
        ],
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Store messages as a message bus sends them (customer and assistant, any channel):
        the pipeline pairs each customer message with the reply after it into a turn, and keeps
        an unanswered one alone. Returns {"accepted", "results"} as add_turns does."""
        return await api.request("POST", "/v1/messages", messages, caller=_caller(ctx))

    @server.tool()
    async def retrieve_memory(
        user_id: UserId,
        query: Query,
        top_k: Annotated[int | None, Field(description="mid-term pages, 1-100")] = None,
        assistant_id: AssistantArg = None,
        filters: FiltersArg = None,
        at: AtArg = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Memory relevant to a query, without calling the LLM: short_term (recent pages),
        mid_term (best pages of the best-matching topic segments, with scores), user_profile,
        user_traits, user_knowledge and agent_traits (facts with scores and fact_id). top_k:
        how many mid-term pages (default 10); filters scope the pages; at: when asked."""
        body = _present(
            query=query, top_k=top_k, assistant_id=assistant_id, filters=_scope(filters), at=at
        )
        return await api.call("POST", user_id, "/retrieve", body, caller=_caller(ctx))

    @server.tool()
    async def respond(
        user_id: UserId,
        query: Query,
        assistant_id: AssistantArg = None,
        remember: bool = True,
        filters: FiltersArg = None,
        at: AtArg = None,
        conversation_id: ConversationArg = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Answer the user's query with the service's LLM and the user's memory. Returns
        {"response", "memory", "usage", "remembered"}; the exchange is stored in memory unless
        remember is false (a reply that only says it does not know: the query alone).
        assistant_id: which assistant answers (its profile and traits; default: the default
        assistant)."""
        body = _present(
            query=query,
            assistant_id=assistant_id,
            remember=remember,
            filters=_scope(filters),
            at=at,
            conversation_id=conversation_id,
        )
        return await api.call("POST", user_id, "/respond", body, caller=_caller(ctx))

    @server.tool()
    async def get_history(
        user_id: UserId,
        limit: Annotated[int, Field(ge=1, le=200, description="entries, newest first")] = 20,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """The user's recent pipeline history: where each recent turn is (accepted, stm,
        mtm, persona...) and the dead letters of the user's records, with their reasons."""
        return await api.call("GET", user_id, f"/history?limit={limit}", caller=_caller(ctx))

    @server.tool()
    async def get_assistant_profile(
        assistant_id: Annotated[str, Field(description="the assistant's id, e.g. billing-bot")],
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """An assistant's profile: {"assistant_id", "profile"}."""
        return await api.call(
            "GET", assistant_id, "/profile", collection="assistants", caller=_caller(ctx)
        )

    @server.tool()
    async def list_users(
        cursor: Annotated[str | None, Field(description="next_cursor of the last page")] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="users per page")] = 100,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """The users of the caller's tenant that have memory, in order (an admin key):
        {"users", "next_cursor"}."""
        if cursor is not None and not re.fullmatch(ID_PATTERN, cursor):
            raise ToolError(f"cursor must be a user id; got {cursor!r}")
        query = urlencode(_present(cursor=cursor, limit=limit))
        return await api.request("GET", f"/v1/users?{query}", caller=_caller(ctx))

    @server.tool()
    async def whoami(ctx: Context | None = None) -> dict[str, Any]:
        """The caller's tenant and scopes: {"tenant", "scopes", "key_id"}."""
        return await api.request("GET", "/v1/whoami", caller=_caller(ctx))

    @server.tool()
    async def get_memory(user_id: UserId, ctx: Context | None = None) -> dict[str, Any]:
        """Everything stored for a user: short-term pages, mid-term segments (summary,
        keywords, heat, pages) and the persona (profile, traits, knowledge, agent traits)."""
        return await api.call("GET", user_id, "/memory", caller=_caller(ctx))

    @server.tool()
    async def set_user_profile(
        user_id: UserId, profile: ProfileArg, ctx: Context | None = None
    ) -> dict[str, Any]:
        """Replace a user's profile: static attributes such as name, location or plan, shown
        in every answer's prompt. It wins over attributes learned from the dialogue. Returns
        {"user_id", "profile"}."""
        return await api.call("PUT", user_id, "/profile", profile, caller=_caller(ctx))

    @server.tool()
    async def set_assistant_profile(
        assistant_id: Annotated[str, Field(description="the assistant's id, e.g. billing-bot")],
        profile: ProfileArg,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Replace an assistant's profile (name, role, tone, ...): its agent profile for every
        user. Returns {"assistant_id", "profile"}."""
        return await api.call(
            "PUT", assistant_id, "/profile", profile, collection="assistants", caller=_caller(ctx)
        )

    @server.tool()
    async def list_facts(
        user_id: UserId,
        kind: FactKindArg | None = None,
        include_superseded: bool = False,
        limit: Annotated[int | None, Field(description="facts per page, 1-500")] = None,
        cursor: Annotated[str | None, Field(description="next_cursor of the last page")] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """The facts remembered about a user, newest first: {"facts": [{"fact_id", "kind",
        "text", "created_at", "source", "assistant_id", "pinned", "superseded_by",
        "superseded_at"}], "next_cursor"}. include_superseded adds facts updated since; kind
        picks user_knowledge or agent_trait; next_cursor (null: the last page) asks for more."""
        query = _present(kind=kind, limit=limit, cursor=cursor)
        if include_superseded:
            query["include_superseded"] = "true"
        path = "/facts" + (f"?{urlencode(query)}" if query else "")
        return await api.call("GET", user_id, path, caller=_caller(ctx))

    @server.tool()
    async def add_fact(
        user_id: UserId,
        text: Annotated[FactText, Field(description="the fact, 1-1000 characters")],
        kind: FactKindArg = "user_knowledge",
        assistant_id: Annotated[
            str | None, Field(description="agent_trait only: which assistant it describes")
        ] = None,
        pinned: Annotated[
            bool | None,
            Field(description="never superseded, never ages out (absent: as it is; new: no)"),
        ] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Add a fact about a user (its source is "api"). Returns {"fact_id"}; the persona
        stage applies it in the user's order moments later."""
        body = _present(text=text, kind=kind, assistant_id=assistant_id, pinned=pinned)
        return await api.call("POST", user_id, "/facts", body, caller=_caller(ctx))

    @server.tool()
    async def edit_fact(
        user_id: UserId,
        fact_id: FactIdArg,
        text: Annotated[FactText | None, Field(description="the corrected text")] = None,
        pinned: Annotated[bool | None, Field(description="pin (true) or unpin (false)")] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Correct a fact's text, or pin or unpin it (give text, pinned or both); it keeps its
        id. Returns {"fact_id"}; applied in the user's order moments later."""
        body = _present(text=text, pinned=pinned)
        path = f"/facts/{quote(fact_id, safe='')}"
        return await api.call("PATCH", user_id, path, body, caller=_caller(ctx))

    @server.tool()
    async def delete_fact(
        user_id: UserId, fact_id: FactIdArg, ctx: Context | None = None
    ) -> dict[str, Any]:
        """Delete one fact: never served again, never extracted again from the turns it came
        from. Returns {"fact_id"}; applied in the user's order moments later."""
        path = f"/facts/{quote(fact_id, safe='')}"
        return await api.call("DELETE", user_id, path, caller=_caller(ctx))

    @server.tool()
    async def fact_history(
        user_id: UserId, fact_id: FactIdArg, ctx: Context | None = None
    ) -> dict[str, Any]:
        """Every change of a fact, oldest first: {"fact_id", "changes": [{"change", "at",
        "source", "text", "superseded_by"}]} (change: extracted, added, edited, pinned,
        unpinned, superseded or deleted)."""
        path = f"/facts/{quote(fact_id, safe='')}/history"
        return await api.call("GET", user_id, path, caller=_caller(ctx))

    @server.tool()
    async def forget_user(user_id: UserId, ctx: Context | None = None) -> dict[str, Any]:
        """Delete all memory of a user. Returns how many records of each kind were deleted."""
        return await api.call("DELETE", user_id, caller=_caller(ctx))

    return server


class BearerGuard:
    """ASGI wrapper: 401 for an HTTP request without a key the memory service takes: one of
    ``keys`` (the operator's), or a tenant's key the service confirms (``GET /v1/whoami``).
    With no operator keys the server is open (loopback only) and the service decides."""

    def __init__(self, app: ASGIApp, keys: list[str], api: MemoryAPI) -> None:
        self.app = app
        self.keys = keys
        self.api = api

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.keys:
            headers = dict(scope["headers"])
            header = headers.get(b"authorization", b"").decode("latin-1")
            if not (bearer_matches(header, self.keys) or await self.api.confirms(header)):
                denied = JSONResponse(
                    {
                        "error": "missing or invalid bearer token (Authorization: Bearer <key>)",
                        "field": None,
                    },
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await denied(scope, receive, send)
                return
        await self.app(scope, receive, send)


def bearer_matches(header: str, keys: list[str]) -> bool:
    """Whether an Authorization header carries one of ``keys`` (compared in constant time)."""
    scheme, _, token = header.strip().partition(" ")
    supplied = token.strip().encode("latin-1", "replace")
    matches = [hmac.compare_digest(supplied, key.encode()) for key in keys]
    return scheme.lower() == "bearer" and any(matches)


def http_app(url: str, settings: Settings) -> ASGIApp:
    """The streamable-HTTP MCP app behind the API's bearer keys, for MEMORYOS_MCP_HOST."""
    keys = settings.api_key_list
    if not keys and settings.mcp_host not in LOOPBACK:
        raise ConfigError(
            "MEMORYOS_MCP_HOST: serving MCP beyond loopback needs MEMORYOS_API_KEYS, "
            "or anyone who reaches the port reads and deletes every user's memory"
        )
    server = build_server(url, keys[0] if keys else None)
    guard = MemoryAPI(url)
    return BearerGuard(server.streamable_http_app(host=settings.mcp_host), keys, guard)


def main(args: argparse.Namespace, settings: Settings) -> int:
    if args.transport == "stdio":
        keys = settings.api_key_list
        key = settings.mcp_key_secret or (keys[0] if keys else None)
        build_server(args.url, key).run("stdio")
    else:
        app = http_app(args.url, settings)
        uvicorn.run(app, host=settings.mcp_host, port=args.mcp_port, log_level="warning")
    return 0


def _scope(filters: Filters | None) -> dict[str, Any] | None:
    """Filters as the HTTP body takes them (times in ISO 8601)."""
    return None if filters is None else filters.model_dump(mode="json", exclude_none=True)
