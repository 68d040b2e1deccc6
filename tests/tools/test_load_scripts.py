"""The load scripts (tools/): each prints its JSON rows in the shape the docs read.

Only the shape is checked: a timing is never a test assertion.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import embedder_speed, filter_latency, llm_load, respond_load, retrieve_load


@pytest.mark.integration
@pytest.mark.timeout(300)
async def test_retrieve_load_prints_one_row_per_caller_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await retrieve_load.run(users=2, turns=12, callers=[1, 3], calls=9, seed=3)
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    assert [row["callers"] for row in rows] == [1, 3]
    assert all(row["calls"] == 9 and row["retrieves_per_s"] > 0 for row in rows)
    assert all(row["gc_full_collections"] >= 0 and row["gc_full_max_ms"] >= 0 for row in rows)
    # each retrieve costs the loop some CPU, and the process at least as much (the two clocks
    # are read one after the other, and rounded per call: a hair of slack between them)
    for row in rows:
        loop, process = row["loop_cpu_ms_per_call"], row["process_cpu_ms_per_call"]
        assert 0 < loop <= process * 1.02 + 0.05, row
    # the model's own process is counted apart (clock ticks: 9 calls may show none)
    assert all(row["model_process_cpu_ms_per_call"] >= 0 for row in rows)


@pytest.mark.integration
@pytest.mark.timeout(300)
async def test_filter_latency_prints_both_kinds_side_by_side(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await filter_latency.run(users=3, turns=48, calls=6)
    lines = capsys.readouterr().out.splitlines()
    (row,) = [json.loads(line) for line in lines if line.startswith("{")]
    assert row["calls"] == 6
    assert set(row["retrieve"]) == set(row["retrieve_filtered"]) == {"p50_ms", "p95_ms", "p99_ms"}
    # a scope of one channel in three and half the days leaves fewer pages to return
    assert 0 < row["mid_term_pages_filtered"] < row["mid_term_pages"]


async def test_embedder_speed_prints_its_rates(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    session = [{"speaker": "A", "text": f"utterance {i} about boats"} for i in range(6)]
    sample = {"qa": [{"question": f"What about boat {i}?"} for i in range(3)],
              "conversation": {"session_1": session, "session_1_date_time": "x"}}  # fmt: skip
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([sample]))
    questions, turns = embedder_speed.texts_of(path)
    assert len(questions) == 3
    assert turns[0] == "utterance 0 about boats utterance 1 about boats"
    await embedder_speed.main(path)
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["runtime"] == "onnx"
    assert row["precision"] == "int8"  # auto: what a new store gets
    assert row["turns_in_batches_of_64_per_s"] > 0
    assert row["turns_in_batches_of_64_cpu_ms_per_text"] > 0
    assert row["rss_mb"] > 0
    assert row["host"] == "process"
    assert row["model_process_rss_mb"] > 0, "the model's process is measured too"


@pytest.mark.integration
@pytest.mark.timeout(300)
async def test_respond_load_prints_one_row_per_way(capsys: pytest.CaptureFixture[str]) -> None:
    await respond_load.run(users=2, turns=12, calls=3)
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    assert [row["way"] for row in rows] == list(respond_load.WAYS)
    assert all(row["calls"] == 3 and row["p99_ms"] >= row["p50_ms"] > 0 for row in rows)


@pytest.mark.integration
@pytest.mark.timeout(300)
async def test_llm_load_prints_its_share_of_the_concurrency_bound(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await llm_load.run([1, 2], latency_ms=20, turns=9)
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line[:1] == "{"]
    assert [row["concurrency"] for row in rows] == [1, 2], "one row per limit, in order"
    for row in rows:
        assert row["turns"] == max(2, row["concurrency"] * 2) * 9, "two users per slot"
        assert row["users_wrong"] == 0
        assert row["errors"] == 0
        assert row["calls_per_turn"] > 0
        assert row["bound_ratio"] > 0
