"""`memoryos bench`: one run at tiny sizes writes bench.json in its documented shape, and plots.

Only the shape is checked: a timing is never a test assertion.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from evaluation import bench, bench_data
from evaluation.bench import Sizes
from evaluation.bench_common import cpu_spent_by_kind
from evaluation.bench_llm import plan_calls
from evaluation.bench_report import LATENCY_PNG, THROUGHPUT_PNG
from streams.cli import main

TINY = Sizes(
    name="tiny",
    ingest_users=3,
    ingest_turns=10,
    llm_latency_ms=20,
    llm_concurrency=(4,),
    llm_users_per_slot=1,
    llm_turns=9,
    sequential_turns=2,
    single_user_turns=9,
    latency_users=4,
    latency_turns=20,
    segments_per_user=3,
    retrieves=20,
    responds=5,
    ryw_tries=2,
)

SHAPE: dict[str, dict[str, Any]] = {
    "ingest": {"turns_per_s": float, "embedder_texts_per_s": float, "ratio_to_ceiling": float},
    "llm_latency": {
        "latency_ms": int,
        "concurrency": [int],
        "turns_per_s": [float],
        "bound_ratio": [float],
        "speedup_vs_sequential": [float],
    },
    "retrieve": {
        "users": int,
        "turns_per_user": int,
        "p50_ms": float,
        "p95_ms": float,
        "p99_ms": float,
    },
    "respond": {"p50_ms": float, "p95_ms": float, "p99_ms": float},
    "read_your_writes_ms": {"p50": float, "p99": float},
    "durability": {
        "turns_per_s_journal_off": float,
        "turns_per_s_journal_on": float,
        "cost_ratio": float,
    },
    "llm_cost": {"calls_per_turn": float, "tokens_per_turn": dict, "by_task": dict},
    "single_user": {"turns": int, "turns_per_s": float, "llm_cost": dict},
    "single_user_paper_calls": {"turns": int, "turns_per_s": float, "calls_per_turn": float},
}


def _check(value: Any, kind: Any, where: str) -> None:
    if isinstance(kind, list):
        assert isinstance(value, list), where
        assert value, f"{where} is empty"
        for index, item in enumerate(value):
            _check(item, kind[0], f"{where}[{index}]")
    elif kind is float:
        # JSON writes 3.0 as 3.0, but a float field must never come back as a bool or a str
        assert isinstance(value, float), f"{where}: {value!r} is not a float"
    else:
        assert isinstance(value, kind), f"{where}: {value!r} is not {kind.__name__}"
        assert not isinstance(value, bool), where


# --- pure parts ---


def test_conversations_are_deterministic_and_varied() -> None:
    first = bench_data.conversation("u1", 40, random.Random(3))
    again = bench_data.conversation("u1", 40, random.Random(3))
    assert [t.turn for t in first] == [t.turn for t in again]
    texts = [bench_data.embedded_text(t.turn) for t in first]
    assert len(set(texts)) == len(texts)  # distinct: the embedder's cache never answers
    assert len({t.topic.name for t in first}) >= 2


def test_interleaved_sends_every_users_turn_in_order() -> None:
    rng = random.Random(1)
    talks = [bench_data.conversation(f"u{i}", n, rng) for i, n in enumerate((3, 1, 2))]
    order = [(turn.user_id, turn.turn_id) for turn in bench_data.interleaved(talks)]
    assert order[:3] == [("u0", "t00000"), ("u1", "t00000"), ("u2", "t00000")]
    assert sorted(order) == sorted((t.turn.user_id, t.turn.turn_id) for c in talks for t in c)


def test_plan_calls_follows_the_measured_mix() -> None:
    plan = plan_calls({"continuity": 1.0, "topics": 0.5, "user_traits": 0.25}, 4)
    assert sorted(plan) == sorted(["continuity"] * 4 + ["topics"] * 2 + ["user_traits"])


def test_cpu_by_kind_never_takes_a_replaced_child_for_the_one_before() -> None:
    """A model process killed and replaced between the snapshots: the new one counts whole,
    the old one's CPU is not subtracted from it (which made a negative figure)."""
    before = {(1, 0.0): ("this process", 10.0), (2, 5.0): ("model process", 40.0)}
    after = {(1, 0.0): ("this process", 12.5), (3, 9.0): ("model process", 1.5)}
    assert cpu_spent_by_kind(before, after) == {"this process": 2.5, "model process": 1.5}


# --- one tiny run ---


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_bench_shows_each_phase_and_writes_its_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One run through the command (a run takes a minute: the phases and the report are
    checked on the same one)."""
    monkeypatch.setattr(bench, "QUICK", TINY)  # --quick, only smaller
    monkeypatch.setenv("MEMORYOS_CONSUMER_REBALANCE_TIMEOUT_S", "1")
    out = tmp_path / "bench"

    code = main(["bench", "--quick", "--out", str(out)])

    assert code == 0  # every ingest verified by counting pages, every write read back
    steps = [line for line in capsys.readouterr().err.splitlines() if ": done in " in line]
    assert [line.split(":")[1].strip() for line in steps] == [
        "embedder ceiling",
        "ingest",
        "embedder ceiling again",
        "durability cost",
        "llm concurrency",
        "latency",
        "report",
    ]
    result = json.loads((out / "bench.json").read_text())
    for section, fields in SHAPE.items():
        for name, kind in fields.items():
            _check(result[section][name], kind, f"{section}.{name}")
    _check(result["peak_rss_mb"], float, "peak_rss_mb")
    assert result["ingest"]["cpu_ms_per_turn_by_process"]["model process"] > 0
    children = result["peak_rss_by_child_mb"]  # each kind of child, with the part it was in
    assert {"model process", "broker", "fake LLM server"} <= set(children), children
    assert children["fake LLM server"]["part"] == "llm concurrency"
    # a child caught just as it started may show next to nothing; these three ran for long
    assert all(children[kind]["mb"] > 0 for kind in ("model process", "broker", "fake LLM server"))
    assert result["llm_latency"]["concurrency"] == [4]
    assert len(result["llm_latency"]["turns_per_s"]) == 1
    assert result["retrieve"]["users"] == TINY.latency_users
    assert result["retrieve"]["seeded"] is True
    assert result["sizes"]["name"] == "tiny"
    callers = [row["callers"] for row in result["retrieve_concurrency"]]
    assert callers == [1, 4, 16, 64]
    assert result["llm_cost"]["tokens_per_turn"]["prompt"] > 0  # the fake server counts words
    tasks = set(result["llm_cost"]["by_task"])
    assert "continuity" in tasks
    assert tasks & {"topics", "topics_batch", "topics_summary"}, "evicted pages had topics"
    assert result["ingest"]["bytes_per_turn"] > 0
    records = result["ingest"]["records_per_turn_by_topic"]
    assert records["memoryos.turns"] == pytest.approx(1.0), "one record per turn sent"
    assert records["memoryos.pages"] >= 1.0, "a page per turn, and forget markers"
    assert records["memoryos-chain-tails-changelog"] >= 1.0, "the tail, written each turn"
    assert result["ingest"]["records_per_turn"] == pytest.approx(sum(records.values()), abs=0.05)
    markdown = (out / "bench.md").read_text()
    assert "seeded, not ingested" in markdown
    assert "records per turn" in markdown
    assert "respond p99 <= 60 ms" in markdown
    for png in (THROUGHPUT_PNG, LATENCY_PNG):
        assert (out / png).read_bytes().startswith(b"\x89PNG")
