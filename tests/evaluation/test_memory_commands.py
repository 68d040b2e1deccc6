"""The memory checks of issue 18 run as commands: Edge under churn, and broker rolls alone."""

from __future__ import annotations

import json

import pytest

from evaluation import edge_churn, roll_memory


def _rows(capsys: pytest.CaptureFixture[str]) -> list[dict[str, float]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]


@pytest.mark.asyncio
async def test_edge_churn_keeps_the_live_count_while_the_written_grow(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await edge_churn.run(live=300, churn=100, rounds=2)
    rows = _rows(capsys)
    assert [row["written"] for row in rows] == [300, 400, 500]
    assert {row["live"] for row in rows} == {300}
    assert all(row["rss_anon_mb"] > 0 and row["rss_data_files_mb"] > 0 for row in rows)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.asyncio
async def test_roll_memory_rolls_the_broker_and_samples_after_each(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await roll_memory.run(rolls=1)
    rows = _rows(capsys)
    assert [row["rolls"] for row in rows] == [0, 1]
    assert rows[0]["broker_pid"] != rows[1]["broker_pid"], "a fresh broker after the roll"
    assert all(row["rss_anon_mb"] > 0 and row["py_blocks_k"] > 0 for row in rows)
