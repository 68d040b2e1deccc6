"""Hypothesis-generated bodies against the HTTP routes and the MCP tools.

Invariants: no 5xx; an invalid body is a 4xx naming the field; a valid one is accepted. The
oracle below restates the documented limits (docs/api.md) independently of schemas/limits.py.
Examples are bounded so this runs in `make test`.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import httpx
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent

from adapters.settings import Settings
from service.mcp import build_server
from tests.support.fake_service import AUTH, KEYS, FakeMemory, build

MAX_BODY_BYTES = Settings().max_body_bytes

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
APP = build(FakeMemory(), max_body_bytes=1_048_576)  # the default: 413 is not under test
HTTP = TestClient(APP, raise_server_exceptions=False)

# any character, lone surrogates included (JSON can escape them; UTF-8 cannot carry them)
CHARS = st.characters(codec=None, exclude_categories=())
TEXT = st.text(CHARS, max_size=20) | st.integers(0, 17_000).map(lambda n: "é" * n)
NUMBER = (
    st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([float("nan"), float("inf"), -float("inf"), 2**64, -(2**63) - 1])
)


def json_values(chars: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    text = st.text(chars, max_size=20) | st.integers(0, 17_000).map(lambda n: "é" * n)
    return st.recursive(
        st.none() | st.booleans() | NUMBER | text,
        lambda inner: (
            st.lists(inner, max_size=6)
            | st.dictionaries(st.text(chars, max_size=8), inner, max_size=6)
        ),
        max_leaves=40,
    )


JSON = json_values(CHARS)


def meta_ok(value: Any, depth: int = 1) -> bool:
    """The documented meta rule: 32 levels, finite, 64-bit ints, valid Unicode, 16 KiB."""
    if isinstance(value, dict | list):
        if depth > 32:
            return False
        items = value.items() if isinstance(value, dict) else enumerate(value)
        return all(
            (not isinstance(key, str) or text_ok(key)) and meta_ok(child, depth + 1)
            for key, child in items
        )
    if isinstance(value, str):
        return text_ok(value)
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return -(2**63) <= value < 2**64
    return True


def text_ok(text: str, limit: int | None = None) -> bool:
    encodable = not any(0xD800 <= ord(char) <= 0xDFFF for char in text)
    return encodable and (limit is None or len(text) <= limit)


def meta_fits(meta: dict[str, Any]) -> bool:
    return (
        meta_ok(meta)
        and len(json.dumps(meta, ensure_ascii=False, separators=(",", ":")).encode()) <= 16_384
    )


def encode(body: Any) -> bytes:
    # ensure_ascii escapes lone surrogates; allow_nan writes NaN/Infinity as a client might
    return json.dumps(body, ensure_ascii=True, allow_nan=True).encode()


def deep_meta(levels: int) -> bytes:
    """A turn whose meta is ``levels`` objects deep, written by hand: json.dumps would recurse."""
    meta = '{"a":' * (levels - 1) + "{}" + "}" * (levels - 1)
    return f'{{"query": "q", "response": "r", "meta": {meta}}}'.encode()


def post(path: str, raw: bytes) -> httpx.Response:
    headers = AUTH | {"content-type": "application/json"}
    return HTTP.post(path, content=raw, headers=headers)


def assert_rejected(reply: httpx.Response, *fields: str) -> None:
    assert 400 <= reply.status_code < 500, (reply.status_code, reply.text[:300])
    assert reply.json()["field"] in fields, reply.text[:300]


@FUZZ
@given(meta=st.dictionaries(st.text(CHARS, max_size=8), JSON, max_size=8))
def test_turn_meta(meta: dict[str, Any]) -> None:
    reply = post("/v1/users/alice/turns", encode({"query": "q", "response": "r", "meta": meta}))
    if meta_fits(meta):
        assert reply.status_code == 202, reply.text[:300]
    else:
        assert_rejected(reply, "meta")


@FUZZ
@given(levels=st.integers(1, 40) | st.integers(100, 140) | st.integers(900, 5000))
def test_turn_meta_depth(levels: int) -> None:
    reply = post("/v1/users/alice/turns", deep_meta(levels))
    if levels <= 32:
        assert reply.status_code == 202, reply.text[:300]
    else:  # json.loads gives up around 1,000 levels: then the body as a whole is refused
        assert_rejected(reply, "meta", "body")


@FUZZ
@given(query=TEXT, response=TEXT, channel=st.none() | TEXT)
def test_turn_texts(query: str, response: str, channel: str | None) -> None:
    body = {"query": query, "response": response, "channel": channel}
    reply = post("/v1/users/alice/turns", encode(body))
    bad = [
        name
        for name, value, limit in (
            ("query", query, 16_000),
            ("response", response, 16_000),
            ("channel", channel, 64),
        )
        if value is not None and not text_ok(value, limit)
    ]
    if bad:
        assert_rejected(reply, *bad)
    else:
        assert reply.status_code == 202, reply.text[:300]


@FUZZ
@given(
    top_k=st.none() | NUMBER | st.text(max_size=3), query=st.text(CHARS, min_size=1, max_size=10)
)
def test_retrieve_top_k_and_query(top_k: Any, query: str) -> None:
    reply = post("/v1/users/alice/retrieve", encode({"query": query, "top_k": top_k}))
    if isinstance(top_k, str):  # lax like every JSON API here: "7" is 7, "x" is a 422
        assert reply.status_code == 200 or reply.json()["field"] in ("query", "top_k")
        return
    query_ok = text_ok(query)
    top_k_ok = top_k is None or (
        math.isfinite(top_k) and top_k == int(top_k) and 1 <= top_k <= 100
    )  # NaN and Infinity included: never a number here
    if query_ok and top_k_ok:
        assert reply.status_code == 200, reply.text[:300]
    else:
        assert_rejected(
            reply, *(["query"] if not query_ok else []), *(["top_k"] if not top_k_ok else [])
        )


@FUZZ
@given(body=JSON)
def test_any_json_anywhere_is_never_a_5xx(body: Any) -> None:
    for path in ("/v1/users/alice/turns", "/v1/users/alice/retrieve", "/v1/users/alice/respond",
                 "/v1/turns"):  # fmt: skip
        reply = post(path, encode(body))
        assert reply.status_code < 500, (path, reply.text[:300])
        if reply.status_code >= 400:
            assert reply.json()["field"] is not None or reply.status_code in (401, 413)


@FUZZ
@given(items=st.lists(st.fixed_dictionaries({"user_id": st.just("bob"), "query": st.just("q"),
       "response": st.just("r"), "meta": st.dictionaries(st.text(max_size=4), JSON, max_size=3)}),
       max_size=4))  # fmt: skip
def test_batch_items_are_judged_one_by_one(items: list[dict[str, Any]]) -> None:
    body = encode(items)
    reply = post("/v1/turns", body)
    if len(body) > MAX_BODY_BYTES:  # the whole body is refused before any item is judged
        assert reply.status_code == 413, reply.text[:300]
        return
    assert reply.status_code == 202, reply.text[:300]
    for item, result in zip(items, reply.json()["results"], strict=True):
        if meta_fits(item["meta"]):
            assert "turn_id" in result, result
        else:
            assert "meta" in result["error"], result


async def call_add_turn(meta: Any) -> tuple[bool, str]:
    """The tool as the server runs it once JSON-RPC is parsed (NaN, lone surrogates and all:
    the SDK's own client would turn NaN into null and cannot send a lone surrogate)."""
    server = build_server("http://memoryos", KEYS[0], httpx.ASGITransport(APP))
    arguments = {"user_id": "alice", "query": "q", "response": "r", "meta": meta}
    try:
        result = await server.call_tool("add_turn", arguments)
    except ToolError as exc:  # a crash would be UnexpectedToolError and fail the test
        return True, str(exc)
    assert isinstance(result, CallToolResult)
    text = " ".join(block.text for block in result.content if isinstance(block, TextContent))
    return bool(result.is_error), text


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(meta=st.dictionaries(st.text(CHARS, max_size=8), JSON, max_size=6) | st.integers(30, 40).map(
    lambda n: json.loads(deep_meta(n))["meta"]))  # fmt: skip
def test_mcp_add_turn_meta(meta: dict[str, Any]) -> None:
    failed, text = asyncio.run(call_add_turn(meta))
    if meta_fits(meta):
        assert not failed, text
    else:
        assert failed
        assert "meta" in text, text
