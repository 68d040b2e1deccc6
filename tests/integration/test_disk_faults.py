"""Faults of the disk under the embedded stack: a filling disk, a start on a full one.

A real tmpfs is filled with a real file: the stack must refuse writes (503, not ready) while
the data folder is under MEMORYOS_MIN_FREE_MB, never die of SIGBUS from the store's mapped
log, and take writes again once space returns.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.builders import make_turns
from tests.support.stacks import eventually, running_stack, the_line, up_once
from tests.support.tmpfs import MIB, fill_until, free_bytes, mounted_tmpfs

pytestmark = [pytest.mark.integration]

FLOOR_MB = 96


def turn_body(n: int) -> dict[str, str]:
    turn = make_turns("disk-user", [(f"My locker number is {n}.", f"Locker {n} noted.")])[0]
    return {"turn_id": f"d{n:03d}", "query": turn.query, "response": turn.response}


async def test_a_filling_disk_refuses_writes_and_readiness_then_takes_them_again(
    tmp_path: Path,
) -> None:
    with mounted_tmpfs(tmp_path / "disk", 512) as disk:
        async with running_stack(disk / "data", min_free_mb=FLOOR_MB) as stack:
            base = f"http://127.0.0.1:{stack.port}"
            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                url = "/v1/users/disk-user/turns"
                assert (await http.post(url, json=turn_body(1))).status_code == 202
                assert (await http.get("/readyz")).status_code == 200

                filler = fill_until(disk, (FLOOR_MB - 16) * MIB)
                refused = await http.post(url, json=turn_body(2))
                assert refused.status_code == 503
                assert refused.json()["error"].startswith("disk full")
                ready = await http.get("/readyz")
                assert ready.status_code == 503
                assert ready.json()["reasons"] == ["disk full"]
                profile = await http.put("/v1/users/disk-user/profile", json={"name": "Ann"})
                assert profile.status_code == 503
                metrics = (await http.get("/metrics")).text
                free = _gauge(metrics, "memoryos_disk_free_bytes")
                assert free < _gauge(metrics, "memoryos_disk_floor_bytes") == FLOOR_MB * MIB

                filler.unlink()  # space returns: writes resume by themselves
                assert (await http.get("/readyz")).status_code == 200
                assert (await http.post(url, json=turn_body(3))).status_code == 202

                async def stored() -> bool:
                    memory = (await http.get("/v1/users/disk-user/memory")).json()
                    turns = sorted(page["turn_id"] for page in memory["short_term"])
                    return turns == ["d001", "d003"]

                await eventually(stored, timeout_s=90)


def _gauge(metrics: str, name: str) -> float:
    [line] = [line for line in metrics.splitlines() if line.startswith(name + " ")]
    return float(line.split()[1])


def test_up_refuses_to_start_on_a_too_full_disk_with_one_line(tmp_path: Path) -> None:
    with mounted_tmpfs(tmp_path / "disk", 64) as disk:
        done, took = up_once(disk / "data")
        assert took < 30
        line = the_line(done)
        assert "MiB free, under the 256 MiB that MEMORYOS_MIN_FREE_MB keeps" in line
        assert free_bytes(disk) > 32 * MIB  # nothing was written there before refusing
