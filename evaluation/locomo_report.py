"""`memoryos eval locomo`'s outputs: recall rows per retriever and budget (with a held-out
split), ``retrieval.jsonl``, ``summary.json`` and ``summary.md``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaluation import locomo_data as data
from evaluation.locomo_data import Record

BASELINES = ("bm25", "bm25-stemmed", "dense")


def summarise(
    records: Sequence[Record], modes: Sequence[str] = (), holdout: Sequence[str] = ()
) -> dict[str, Any]:
    """Our recall at 5, 10 and the whole context (and each other mode's), and the baselines
    at 5, 10 and our mean size; with ``holdout``, the same rows for the held-out samples
    and for the rest (the samples tuned on) apart."""
    ours = [record.rankings["ours"] for record in records]
    mean_pages = sum(len(r.pages) for r in ours) / len(ours) if ours else 0.0
    budgets = sorted({5, 10, max(1, round(mean_pages))})
    rows = recall_rows(records, modes, budgets)
    splits: dict[str, Any] = {}
    if holdout:
        held = [record for record in records if record.sample_id in holdout]
        tuned = [record for record in records if record.sample_id not in holdout]
        splits = {
            "held-out": {"samples": list(holdout), "recall": recall_rows(held, modes, budgets)},
            "tuned": {
                "samples": sorted({record.sample_id for record in tuned}),
                "recall": recall_rows(tuned, modes, budgets),
            },
        }
    counts: dict[str, dict[str, int]] = {}
    for record in records:
        question = record.question
        name = data.CATEGORIES.get(question.category, "adversarial")
        count = counts.setdefault(name, {"questions": 0, "with_evidence": 0})
        count["questions"] += 1
        count["with_evidence"] += bool(question.evidence)
    return {
        "questions": counts,
        "context": {
            "mean_pages": mean_pages,
            "mean_mid_term_pages": _mean([float(r.mid_term_count) for r in records]),
            "mean_words": _mean([float(sum(r.words)) for r in ours]),
        },
        "budgets": budgets,
        "modes": list(modes),
        "recall": rows,
        "splits": splits,
        "answers": data.answer_scores(records),
    }


def recall_rows(
    records: Sequence[Record], modes: Sequence[str], budgets: Sequence[int]
) -> list[dict[str, Any]]:
    present = [name for name in BASELINES if records and name in records[0].rankings]
    rows = [data.recall_row(records, name, n) for name in ("ours", *modes) for n in (5, 10, None)]
    return rows + [data.recall_row(records, name, n) for name in present for n in budgets]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def write_outputs(out: Path, records: Sequence[Record], summary: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "retrieval.jsonl").open("w") as lines:
        for record in records:
            lines.write(json.dumps(record.to_json(), ensure_ascii=False) + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.md").write_text(render(summary))


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _rows(rows: Sequence[dict[str, Any]], names: Sequence[str]) -> list[str]:
    lines = []
    for row in rows:
        budget = row["budget"]
        label = "whole context" if budget == "whole" else f"top {budget}"
        cells = [_pct(row["recall"][n]) for n in names[:-1]]
        lines.append(
            f"| {row['retriever']} | {label} | " + " | ".join(cells) + f" | "
            f"**{_pct(row['overall'])}** | {_pct(row['adversarial'])} | "
            f"{row['mean_pages']:.1f} | {row['mean_words']:.0f} |"
        )
    return lines


def render(summary: dict[str, Any]) -> str:
    counts, context, ingest = summary["questions"], summary["context"], summary["ingest"]
    names = [*data.CATEGORIES.values(), "adversarial"]
    header = [f"{n} ({counts.get(n, {}).get('with_evidence', 0)})" for n in names]
    lines = [
        "# LoCoMo evaluation",
        "",
        f"Data `{summary['data']}`, samples {', '.join(summary['samples'])}; "
        f"{sum(c['questions'] for c in counts.values())} questions; k = {summary['k']}; "
        f"llm {summary['llm']}, embedder {summary['embedder']}; settings {summary['settings']}.",
        f"Ingest: {ingest['turns']} turns in {ingest['seconds']} s, complete: "
        f"{ingest['idle'] and not ingest['mismatched_users']}"
        + (f" (MISMATCH: {ingest['mismatched_users']})" if ingest["mismatched_users"] else "")
        + f". Whole run {summary['elapsed_s']} s.",
        "",
        *_fact_lines(summary.get("facts", {})),
        "## Evidence recall (%), turn level",
        "",
        "| retriever | pages | "
        + " | ".join(header[:-1])
        + " | overall 1-4 | "
        + header[-1]
        + " | mean pages | mean words |",
        "|---|---|" + "---:|" * (len(header) + 3),
    ]
    lines += _rows(summary["recall"], names)
    for split, part in summary.get("splits", {}).items():
        lines += [
            "",
            f"### {split}: {', '.join(part['samples'])}",
            "",
            "| retriever | pages | " + " | ".join(names[:-1]) + " | overall 1-4 | "
            f"{names[-1]} | mean pages | mean words |",
            "|---|---|" + "---:|" * (len(header) + 3),
        ]
        lines += _rows(part["recall"], names)
    lines += [
        "",
        f"Our context per question: {context['mean_pages']:.1f} pages on average "
        f"({context['mean_mid_term_pages']:.1f} mid-term, the rest the short-term window), "
        f"{context['mean_words']:.0f} words.",
        "",
        "- ours: the pages `ResponseService.retrieve` returns (`Retrieved.context`: the ranked "
        "pages of either tier, best first, then the rest of the short-term window), with the "
        f"configured mode ({summary['settings'].get('mtm_retrieval')}); other modes "
        f"({', '.join(summary.get('modes', [])) or 'none'}) on the same stored memory; "
        "top N = the first N pages.",
        "- bm25: `bm25s` over the same turns (query + response text), lowercase words, English "
        "stopwords removed. bm25-stemmed: the same with our tokenizer (`memory.text.tokenize`: "
        "stopwords out, light stemming). dense: the pipeline's embedder over the same turn "
        "text, cosine.",
        "- Baselines run at 5, 10 and our mean context size "
        f"({', '.join(str(b) for b in summary['budgets'])} pages).",
        "- Recall of a question: share of its evidence dia_ids (malformed ids repaired) inside "
        "the pages; header counts are questions with evidence, the only ones scored; overall "
        "1-4 is the mean over those questions.",
        "- Words: whitespace-split words of each page's query and response (no labels, "
        "timestamps or summaries), a proxy for context tokens.",
    ]
    answers = summary.get("answers")
    if answers:
        lines += ["", "## Answers (categories 1-4)", ""]
        lines += ["| metric | " + " | ".join([*names[:-1], "overall"]) + " |"]
        lines += ["|---|" + "---:|" * (len(names))]
        for metric in ("f1", "bleu1"):
            cells = [_pct(answers[metric][n]) for n in [*names[:-1], "overall"]]
            lines.append(f"| {metric} | " + " | ".join(cells) + " |")
        lines += [
            "",
            "F1: LoCoMo's normalised token F1 (multi-hop answers split on commas); "
            "BLEU-1: clipped unigram precision with brevity penalty.",
        ]
    return "\n".join(lines) + "\n"


def _fact_lines(facts: dict[str, dict[str, int]]) -> list[str]:
    """Facts held after the run: current, and superseded by a later statement."""
    if not facts:
        return []
    lines = [
        "## Facts held (persona stage)",
        "",
        "| sample | user knowledge | superseded | agent traits | superseded |",
        "|---|---:|---:|---:|---:|",
    ]
    for sample, n in facts.items():
        lines.append(
            f"| {sample} | {n['user_knowledge_current']} | {n['user_knowledge_superseded']} "
            f"| {n['agent_trait_current']} | {n['agent_trait_superseded']} |"
        )
    return [*lines, ""]
