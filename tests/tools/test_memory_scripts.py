"""Measurements run as commands: Edge under churn and broker rolls alone, ingest alone."""

from __future__ import annotations

import json

import pytest

from tools import edge_churn, ingest_load, roll_memory


def _rows(capsys: pytest.CaptureFixture[str]) -> list[dict[str, float]]:
    # the JSON lines; the bench's own progress lines ("ingest: sending ...") are not rows
    lines = capsys.readouterr().out.splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


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


@pytest.mark.integration
@pytest.mark.asyncio
async def test_ingest_load_places_every_turn_and_prints_its_rate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await ingest_load.run(users=2, turns=12)
    (row,) = _rows(capsys)
    assert row["turns"] == 24
    assert row["users_wrong"] == 0
    assert row["turns_per_s"] > 0
    assert row["loop_cpu_ms_per_turn"] > 0
    by_process = row["cpu_ms_per_turn_by_process"]
    assert {"this process", "model process", "broker"} <= set(by_process), by_process
    assert by_process["this process"] >= row["loop_cpu_ms_per_turn"] * 0.9, "the loop is in it"
    # the embedder the store recorded (bench.json's ingest carries the same field)
    assert row["embedder"] in ("minilm:all-MiniLM-L6-v2:int8", "openai:text-embedding-3-small")


def test_keyword_fade_switches_to_the_papers_keywords_and_back() -> None:
    """The paper's way, while measured: every phrase kept, compared whole; then ours again."""
    import memory.text
    from memory.segments import merge_keywords
    from tools.keyword_fade import paper_keywords

    many = [f"topic {i}" for i in range(40)]
    assert len(merge_keywords([], many)) == 24
    assert memory.text.keyword_set(["trail shoes"]) == {"trail", "shoe"}
    with paper_keywords():
        assert len(merge_keywords([], many)) == 40
        assert memory.text.keyword_set(["trail shoes"]) == {"trail shoes"}
    assert len(merge_keywords([], many)) == 24
    assert memory.text.keyword_set(["trail shoes"]) == {"trail", "shoe"}
