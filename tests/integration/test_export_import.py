"""`memoryos export` from one embedded stack, `memoryos import` into a fresh one: every user's
memory document reads the same (pages, segments with their heat counts, persona, facts,
profiles), importing twice changes nothing, and a deleted user is not in the export."""

from __future__ import annotations

import asyncio
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from streams.cli import main
from streams.stack import Stack
from tests.support.stacks import eventually, running_stack

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

OPERATOR = "operator-key"
SAID = {
    "bob": ["I keep bees on the roof.", "The bees made honey in June.", "I sell honey at market.",
            "My sister Ana helps with the hives.", "We moved the hives to Lyon.", "Lyon is warm."],
    "amy": ["I play the cello.", "My cello teacher is Mr. Roth.", "I practise every morning.",
            "The concert is in May.", "I bought new strings.", "The strings sound bright."],
}  # fmt: skip


def http(stack: Stack, key: str = OPERATOR) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{stack.port}",
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )


async def admin_key(stack: Stack, tenant: str) -> str:
    async with http(stack) as client:
        reply = await client.post("/v1/keys", json={"tenant": tenant, "scopes": ["admin", "read"]})
    return str(reply.json()["key"])


async def cli(*argv: str) -> tuple[int, str]:
    out = StringIO()
    with redirect_stdout(out):
        code = await asyncio.to_thread(main, list(argv))
    return code, out.getvalue()


def comparable(memory: dict[str, Any]) -> dict[str, Any]:
    """The memory document without what moves with the wall clock (recency, hence heat)."""
    segments = [
        {key: value for key, value in segment.items() if key not in ("heat", "recency")}
        for segment in memory["mid_term"]
    ]
    return memory | {"mid_term": sorted(segments, key=lambda s: str(s["segment_id"]))}


async def test_an_export_rebuilds_the_same_memory_in_a_fresh_stack(tmp_path: Path) -> None:
    async with running_stack(tmp_path / "a", stm_capacity=3, api_keys=OPERATOR) as source:
        key = await admin_key(source, "acme")
        async with http(source) as client:
            made = await client.post(
                "/v1/keys", json={"tenant": "acme", "scopes": ["read", "write", "forget"]}
            )
        writer = made.json()["key"]
        async with http(source, writer) as client:
            for user, lines in SAID.items():
                for line in lines:
                    reply = await client.post(
                        f"/v1/users/{user}/turns", json={"query": line, "response": "I see."}
                    )
                    assert reply.status_code == 202
                await client.put(f"/v1/users/{user}/profile", json={"city": f"{user}-city"})
            await client.post("/v1/users/gone/turns", json={"query": "Forget me", "response": "Ok"})

        async def settled() -> bool:
            async with http(source, writer) as client:
                docs = [(await client.get(f"/v1/users/{u}/memory")).json() for u in SAID]
            return all(len(d["short_term"]) == 3 and len(d["mid_term"]) >= 1 for d in docs)

        await eventually(settled, timeout_s=120)
        async with http(source, writer) as client:
            for user in SAID:  # a fact added, then corrected: its id stays, its text changes
                reply = await client.post(f"/v1/users/{user}/facts", json={"text": "I bike."})
                fid = reply.json()["fact_id"]
                await eventually(lambda u=user, f=fid: _fact(source, writer, u, f))
                await client.patch(f"/v1/users/{user}/facts/{fid}", json={"text": f"{user} bikes."})
                await eventually(lambda u=user: _fact(source, writer, u, None, f"{u} bikes."))
        async with http(source, key) as client:
            await client.put("/v1/assistants/bot/profile", json={"name": "Acme bot"})
        async with http(source, writer) as client:
            await eventually(lambda: _listed(source, key, "gone"))
            assert (await client.delete("/v1/users/gone")).status_code == 200
            before = {u: (await client.get(f"/v1/users/{u}/memory")).json() for u in SAID}
            facts_before = {u: await _facts(client, u) for u in SAID}
        url = f"http://127.0.0.1:{source.port}"
        code, exported = await cli("export", "--url", url, "--key", key)
        assert code == 0
    lines = [orjson.loads(line) for line in exported.splitlines()]
    assert lines[0]["format"] == "memoryos-export/1"
    assert lines[0]["tenant"] == "acme"
    assert not any("Forget me" in orjson.dumps(line).decode() for line in lines), "deleted"
    assert not any(line.get("payload", {}).get("kind") == "tombstone" for line in lines[1:])
    dump = tmp_path / "acme.ndjson"
    dump.write_text(exported)

    async with running_stack(tmp_path / "b", stm_capacity=3, api_keys=OPERATOR) as target:
        url = f"http://127.0.0.1:{target.port}"
        key = await admin_key(target, "acme")
        code, _ = await cli("import", str(dump), "--url", url, "--key", key)
        assert code == 1, "only the operator imports, not even the tenant's admin"
        for _ in range(2):  # twice: the same memory
            code, said = await cli("import", str(dump), "--url", url, "--key", OPERATOR)
            assert code == 0
            assert said.startswith(f"imported {len(lines) - 1} points")
        async with http(target, key) as client:
            after = {u: (await client.get(f"/v1/users/{u}/memory")).json() for u in SAID}
            facts_after = {u: await _facts(client, u) for u in SAID}
            bot = (await client.get("/v1/assistants/bot/profile")).json()
            users = (await client.get("/v1/users")).json()["users"]
    for user in SAID:
        assert comparable(after[user]) == comparable(before[user])
        assert after[user]["persona"]["profile"] == {"city": f"{user}-city"}
    assert facts_after == facts_before
    assert all(any(f["text"] == f"{u} bikes." for f in facts_after[u]) for u in SAID)
    assert bot["profile"] == {"name": "Acme bot"}
    assert users == sorted(SAID)


async def _listed(stack: Stack, key: str, user: str) -> bool:
    async with http(stack, key) as client:
        return user in (await client.get("/v1/users")).json()["users"]


async def _facts(client: httpx.AsyncClient, user: str) -> Any:
    reply = await client.get(f"/v1/users/{user}/facts", params={"include_superseded": "true"})
    return reply.json()["facts"]


async def _fact(stack: Stack, key: str, user: str, fid: str | None, text: str = "") -> bool:
    async with http(stack, key) as client:
        facts = await _facts(client, user)
    return any(f["fact_id"] == fid or f["text"] == text for f in facts)
