"""SIGKILL of the whole embedded stack while webhooks are being delivered, then a restart on
the same data dir: every event reaches the webhook at least once, and none under a new id.

The embedded broker loses ``memoryos.events`` with the process; the outbox on disk and the
reconciler's start pass send what the webhook had not confirmed again, with the same ids.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import orjson
import pytest

from memory.ids import page_id
from tests.support.builders import make_turns
from tests.support.receiver import receiving, verified
from tests.support.stacks import UpProcess, eventually, kill_everything

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

USERS = ("kill-a", "kill-b", "kill-c")
PER_USER = 12


async def test_sigkill_mid_delivery_delivers_every_event_again_with_its_id(
    tmp_path: Path,
) -> None:
    talk = [(f"asks about {i}", f"answer {i}") for i in range(PER_USER)]
    turns = [turn for user in USERS for turn in make_turns(user, talk)]
    pages = {page_id(t.user_id, t.turn_id) for t in turns}
    with receiving(slow_s=0.25) as receiver:  # each delivery takes a while: kill mid-way
        hook = receiver.hook("/slow", ["memory.page.stored", "memory.segment.created"])
        env = {
            "MEMORYOS_WEBHOOKS": orjson.dumps([hook]).decode(),
            "MEMORYOS_WEBHOOK_BACKOFF_S": "0.05",
            "MEMORYOS_STM_CAPACITY": "3",
        }
        data = tmp_path / "data"
        up = UpProcess(data, **env)
        up.start()
        await up.wait_ready()
        async with httpx.AsyncClient() as client:
            batch = [t.model_dump(mode="json") for t in turns]
            reply = await client.post(f"{up.url}/v1/turns", json=batch, timeout=60)
            assert reply.status_code == 202, reply.text
        await eventually(lambda: len(receiver.at("/slow")) >= 4, 120, every_s=0.05)
        kill_everything(up)
        before = {r.webhook_id: r.event for r in receiver.at("/slow")}
        delivered_pages = {e["data"]["page_id"] for e in before.values() if "seq" in e["data"]}
        assert delivered_pages < pages, "killed mid-delivery: some pages not yet delivered"

        up = UpProcess(data, **env)
        up.start()
        try:
            await up.wait_ready()

            def stored() -> set[str]:
                got = [r.event for r in receiver.at("/slow")]
                return {e["data"]["page_id"] for e in got if e["type"] == "memory.page.stored"}

            await eventually(lambda: stored() == pages, 180)
        finally:
            up.terminate()

        received = receiver.at("/slow")
        for one in received:
            verified(one)
        ids_of: dict[tuple[str, str], set[str]] = {}
        for one in received:
            event = one.event
            subject_id = event["data"].get("segment_id") or event["data"]["page_id"]
            ids_of.setdefault((event["type"], subject_id), set()).add(one.webhook_id)
        assert all(len(ids) == 1 for ids in ids_of.values()), "a change under two ids"
        after = {one.webhook_id for one in received}
        assert set(before) <= after
