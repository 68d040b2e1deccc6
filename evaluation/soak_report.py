"""The soak run's outputs: bench.json (plan, summary, series) and soak.png."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # the backend is chosen first

from evaluation.bench_soak import SoakRun, summary

SOAK_PNG = "soak.png"


def soak_result(run: SoakRun, machine: dict[str, Any], budget_mb: int) -> dict[str, Any]:
    return {
        "kind": "soak",
        "plan": asdict(run.plan),
        "broker_memory_budget_mb": budget_mb,
        "summary": summary(run),
        "machine": machine,
        "mismatched": run.mismatched,
        "heap_growth_second_half": run.heap.growth,
        "series": run.samples,
    }


def write_soak(out: Path, result: dict[str, Any]) -> None:
    (out / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
    plot_soak(result, out / SOAK_PNG)


def plot_soak(result: dict[str, Any], path: Path) -> None:
    series = result["series"]
    minutes = [p["t_s"] / 60 for p in series]
    fig, (memory, store, lag) = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    memory.plot(minutes, [p["process_rss_mb"] for p in series], label="memoryos process RSS")
    if "rss_anon_mb" in series[0]:  # heap and native allocations; the rest maps files (store)
        memory.plot(minutes, [p["rss_anon_mb"] for p in series], ls="--", color="tab:blue",
                    label="of which anonymous (not file-backed)")  # fmt: skip
    memory.plot(minutes, [p["broker_rss_mb"] for p in series], label="embedded broker RSS")
    memory.axhline(result["broker_memory_budget_mb"], color="grey", ls=":", label="broker budget")
    memory.set_ylabel("MB")
    memory.set_title(f"Soak: {result['summary']['turns']:,} turns, "
                     f"{result['summary']['broker_rolls']} broker rolls")  # fmt: skip
    store.plot(minutes, [p["store_mb"] for p in series], color="tab:green", label="store on disk")
    turns = store.twinx()
    turns.plot(minutes, [p["turns_sent"] for p in series], color="tab:grey", ls="--",
               label="turns sent")  # fmt: skip
    turns.set_ylabel("turns")
    store.set_ylabel("MB")
    lag.plot(minutes, [max(0, p["consumer_lag"]) for p in series], color="tab:red",
             label="consumer lag (records)")  # fmt: skip
    lag.set_ylabel("records")
    lag.set_xlabel("minutes")
    for ax in (memory, store, lag):
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
