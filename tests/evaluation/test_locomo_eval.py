"""`memoryos eval locomo`: parsing and scoring on a tiny synthetic sample, and one end-to-end run.

The sample is written here in the LoCoMo format; the real data set is never copied into tests.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from adapters.settings import load_settings
from evaluation import locomo, locomo_report
from evaluation import locomo_data as data
from schemas.errors import InvalidEvent
from streams.broker import free_port


def _utterances(session: int, speakers: str, start: int = 1) -> list[dict[str, Any]]:
    """Utterances of ``session``: one per letter of ``speakers`` ("a": Ann, "b": Bob)."""
    names = {"a": "Ann", "b": "Bob"}
    return [
        {
            "speaker": names[letter],
            "dia_id": f"D{session}:{start + i}",
            "text": f"{names[letter]} line {session}.{start + i} about topic {i // 2}",
        }
        for i, letter in enumerate(speakers)
    ]


def tiny_sample() -> dict[str, Any]:
    """Session 1 opens with Bob and ends on Ann (7 turns); session 2 alternates (5 turns)."""
    first = _utterances(1, "b" + "ab" * 5 + "a")
    first[3]["text"] = "I adopted a puppy named Biscuit last week!"
    first[4]["text"] = "Biscuit is a lovely name for a puppy."
    first[4]["blip_caption"] = "a photo of a dog on a beach"
    second = _utterances(2, "ab" * 5)
    second[2]["text"] = "We went hiking in the Alps with my sister."
    second[3]["text"] = "The Alps in summer sound wonderful."
    return {
        "sample_id": "conv 1",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": first,
            "session_2_date_time": "12:05 am on 1 June, 2023",
            "session_2": second,
            "session_3_date_time": "9:00 am on 2 June, 2023",  # a date without a session
        },
        "qa": [
            {"question": "What is Ann's puppy called?", "answer": "Biscuit", "evidence": ["D1:4"],
             "category": 4},
            {"question": "Where did Ann go hiking?", "answer": 2023, "category": 2,
             "evidence": ["D2:3; D2:4"]},
            {"question": "What did Bob name his cat?", "adversarial_answer": "Biscuit",
             "evidence": ["D:1:4"], "category": 5},
        ],
    }  # fmt: skip


# --- turns and dates ---


def test_turns_follow_the_speakers() -> None:
    sessions = data.sample_sessions(tiny_sample())
    assert [len(turns) for turns in sessions] == [7, 5]
    opening, *_, trailing = sessions[0]
    assert opening.query == ""
    assert opening.response.startswith("Bob line 1.1")
    assert opening.meta == {"dia_ids": ["D1:1"], "session": 1}
    assert trailing.response == ""
    assert trailing.meta == {"dia_ids": ["D1:12"], "session": 1}
    pair = sessions[0][1]
    assert (pair.query, pair.response) == (
        "Ann line 1.2 about topic 0",
        "Bob line 1.3 about topic 1",
    )
    assert pair.meta["dia_ids"] == ["D1:2", "D1:3"]
    assert all(len(t.meta["dia_ids"]) == 2 for t in sessions[1])


def test_turn_ids_users_captions_and_times() -> None:
    first, second = data.sample_sessions(tiny_sample())
    assert {t.user_id for t in first + second} == {"locomo-conv-1"}
    assert first[1].turn_id == "conv-1-D1:2"
    assert (
        first[2].response
        == "Biscuit is a lovely name for a puppy. [image: a photo of a dog on a beach]"
    )
    start = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    # a turn's time is the session's plus the index of its first utterance, in seconds
    assert [(t.timestamp - start).total_seconds() for t in first] == [0, 1, 3, 5, 7, 9, 11]
    assert second[0].timestamp == datetime(2023, 6, 1, 0, 5, tzinfo=UTC)
    assert len({t.turn_id for t in first + second}) == 12


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("12:48 am on 1 February, 2023", datetime(2023, 2, 1, 0, 48, tzinfo=UTC)),
        ("12:05 pm on 30 December, 2022", datetime(2022, 12, 30, 12, 5, tzinfo=UTC)),
        ("9:02 AM on 3 Sept 2023", datetime(2023, 9, 3, 9, 2, tzinfo=UTC)),
    ],
)
def test_session_times_parse(text: str, expected: datetime) -> None:
    assert data.parse_session_time(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "8 May 2023",
        "1:56 pm on 8 Mai, 2023",
        "1:56 pm on 30 February, 2023",
        "13:56 pm on 8 May, 2023",
        "25:00 on 1 May, 2023",
    ],
)
def test_bad_session_times_are_refused(text: str) -> None:
    with pytest.raises(InvalidEvent):
        data.parse_session_time(text)


def test_a_stranger_speaking_is_refused() -> None:
    sample = tiny_sample()
    sample["conversation"]["session_2"][0]["speaker"] = "Eve"
    with pytest.raises(InvalidEvent, match="Eve"):
        data.sample_sessions(sample)


def test_samples_load_by_id_and_refuse_what_is_missing(tmp_path: Path) -> None:
    source = tmp_path / "tiny.json"
    source.write_text(json.dumps([tiny_sample()]))
    (sample,) = data.load_samples(source, ["conv 1"])
    assert (sample.sample_id, sample.user_id, len(sample.turns)) == ("conv 1", "locomo-conv-1", 12)
    with pytest.raises(InvalidEvent, match="conv-99"):
        data.load_samples(source, ["conv-99"])
    broken = tiny_sample()
    del broken["conversation"]["speaker_b"]
    source.write_text(json.dumps([broken]))
    with pytest.raises(InvalidEvent, match="malformed"):
        data.load_samples(source)


# --- questions and evidence ---


def test_evidence_is_sanitised() -> None:
    assert data.sanitise_evidence(["D:11:26"]) == ("D11:26",)
    assert data.sanitise_evidence(["D8:6; D9:17"]) == ("D8:6", "D9:17")
    assert data.sanitise_evidence(["D1:3", "D1:3", "D 2 : 4"]) == ("D1:3", "D2:4")
    assert data.sanitise_evidence(["nothing"]) == ()


def test_questions_keep_their_answers() -> None:
    questions = data.questions_of(tiny_sample())
    assert [q.category for q in questions] == [4, 2, 5]
    assert [q.answer for q in questions] == ["Biscuit", "2023", None]
    assert questions[1].evidence == ("D2:3", "D2:4")
    assert questions[2].evidence == ("D1:4",)
    assert [q.index for q in questions] == [0, 1, 2]


# --- scoring ---


def test_recall_at_n() -> None:
    pages = [["D1:1"], ["D1:2", "D1:3"], ["D2:1", "D2:2"]]
    assert data.recall_at(["D1:3", "D2:2"], pages, 1) == 0.0
    assert data.recall_at(["D1:3", "D2:2"], pages, 2) == 0.5
    assert data.recall_at(["D1:3", "D2:2"], pages, None) == 1.0
    assert data.recall_at(["D9:9"], pages, 10) == 0.0
    with pytest.raises(ValueError, match="evidence"):
        data.recall_at([], pages, 1)


def test_f1_by_hand() -> None:
    # "the" is an article: prediction {sunrise, lake}, answer {sunrise}: P 1/2, R 1 -> 2/3
    assert data.token_f1("The sunrise, lake", "sunrise") == pytest.approx(2 / 3)
    assert data.token_f1("Paris!", "paris") == 1.0
    assert data.token_f1("London", "Paris") == 0.0
    # multi-hop: each comma part of the answer against its best predicted part
    assert data.answer_f1("pottery, camping", "camping, pottery, painting", 1) == pytest.approx(
        2 / 3
    )
    # open-domain: only the first ';' alternative counts
    assert data.answer_f1("yes", "yes; since she likes it", 3) == 1.0


def test_bleu1_by_hand() -> None:
    assert data.bleu1("mental health", "mental health") == 1.0
    # one word of a two-word reference: precision 1, brevity penalty exp(1 - 2/1)
    assert data.bleu1("health", "mental health") == pytest.approx(math.exp(-1))
    # longer than the reference: no penalty, clipped precision 2/4 ("health" counted once)
    assert data.bleu1("mental health health awareness", "mental health") == pytest.approx(0.5)
    assert data.bleu1("", "anything") == 0.0


def _record(category: int, evidence: Sequence[str], pages: list[list[str]]) -> data.Record:
    question = data.Question(0, category, "q?", "a", tuple(evidence))
    ranked = data.Ranked(pages, [10] * len(pages))
    return data.Record("s", question, "a", 0, {"ours": ranked})


def test_recall_rows_average_per_category() -> None:
    records = [
        _record(4, ["D1:1"], [["D1:1"], ["D1:2"]]),
        _record(4, ["D1:2"], [["D1:1"], ["D1:2"]]),
        _record(1, ["D1:1", "D3:3"], [["D1:1"]]),
        _record(5, ["D1:1"], [["D1:1"]]),
        _record(3, [], [["D1:1"]]),  # no evidence: not scored, but its pages count
    ]
    top1 = data.recall_row(records, "ours", 1)
    assert top1["recall"] == {
        "multi-hop": 0.5,
        "temporal": None,
        "open-domain": None,
        "single-hop": 0.5,
    }
    assert top1["overall"] == pytest.approx((1 + 0 + 0.5) / 3)
    assert top1["adversarial"] == 1.0
    assert top1["mean_pages"] == 1.0
    whole = data.recall_row(records, "ours", None)
    assert whole["recall"]["single-hop"] == 1.0
    assert whole["mean_words"] == pytest.approx(10 * 7 / 5)


def test_answers_are_scored_per_category_and_rendered() -> None:
    def answered(category: int, answer: str | None, response: str) -> data.Record:
        question = data.Question(0, category, "q?", answer, ("D1:1",))
        return data.Record("s", question, response, 1, {"ours": data.Ranked([["D1:1"]], [4])})

    records = [
        answered(4, "Biscuit", "Biscuit"),
        answered(4, "mental health", "health"),
        answered(2, "7 May 2023", "8 May 2023"),
        answered(5, None, "Not mentioned"),  # adversarial: no answer, not scored
    ]
    for record in records:
        record.rankings |= {"bm25": record.rankings["ours"], "dense": data.Ranked([], [])}
    scores = data.answer_scores(records)
    assert scores is not None
    assert scores["f1"]["single-hop"] == pytest.approx((1 + 2 / 3) / 2)
    assert scores["f1"]["temporal"] == pytest.approx(2 / 3)
    assert scores["f1"]["multi-hop"] is None
    assert scores["bleu1"]["single-hop"] == pytest.approx((1 + math.exp(-1)) / 2)
    assert data.answer_scores([answered(4, "x", "x")][:0]) is None

    ingest = {"turns": 1, "seconds": 1.0, "idle": True, "mismatched_users": []}
    meta = {"data": "tiny.json", "samples": ["s"], "k": 10, "llm": "openai", "embedder": "e",
            "settings": {}, "elapsed_s": 1.0, "ingest": ingest}  # fmt: skip
    markdown = locomo_report.render(meta | locomo_report.summarise(records))
    assert "| ours | top 5 |" in markdown
    assert "| f1 | - | 66.7 | - | 83.3 | 77.8 |" in markdown


def test_bm25_tokens_drop_case_and_stopwords() -> None:
    assert locomo.tokens("The Puppy is named Biscuit, is it? A 2nd dog") == [
        "puppy",
        "named",
        "biscuit",
        "2nd",
        "dog",
    ]


# --- end to end ---


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_main_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "tiny_locomo.json"
    source.write_text(json.dumps([tiny_sample()]))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the throw-away store goes here
    settings = load_settings(
        data_dir=tmp_path / "data", broker_port=free_port(), port=0, llm="offline"
    )
    out = tmp_path / "out"
    args = argparse.Namespace(
        data=source, out=out, k=10, samples="conv 1", holdout="conv 1", modes="paper,fused"
    )

    assert locomo.main(args, settings) == 0

    lines = [json.loads(line) for line in (out / "retrieval.jsonl").read_text().splitlines()]
    assert [line["qa_index"] for line in lines] == [0, 1, 2]
    expected_keys = {"sample_id", "qa_index", "category", "question", "answer",
                     "context_pages", "response"}  # fmt: skip
    assert all(expected_keys <= set(line) for line in lines)
    assert [line["answer"] for line in lines] == ["Biscuit", "2023", None]
    assert all(line["response"] is None for line in lines)  # offline LLM: no respond
    for line in lines:
        # 12 turns, a window of 7: at least the short-term pages (placed where they rank or
        # after the ranked pages), at most every page once
        pages = line["context_pages"]
        assert 7 <= len(pages) <= 12
        window = [tuple(t.meta["dia_ids"]) for t in _all_turns()[-7:]]
        assert set(window) <= {tuple(p) for p in pages}
        assert len({tuple(p) for p in pages}) == len(pages)

    summary = json.loads((out / "summary.json").read_text())
    # the vectors measured, not only the backend: with auto, MiniLM alone would not say
    assert summary["embedder"] in (
        "minilm:all-MiniLM-L6-v2:int8",
        "openai:" + settings.embedding_model,
    )
    assert summary["ingest"]["stored"]["locomo-conv-1"] == {
        "turns": 12,
        "short_term": 7,
        "mid_term": 5,
    }
    assert summary["ingest"]["mismatched_users"] == []
    systems = {(row["retriever"], row["budget"]) for row in summary["recall"]}
    assert {("ours", 5), ("ours", 10), ("ours", "whole"), ("bm25", 5), ("dense", 10)} <= systems
    assert {("paper", 10), ("fused", "whole"), ("bm25-stemmed", 5)} <= systems
    held = summary["splits"]["held-out"]
    assert held["samples"] == ["conv 1"]
    assert held["recall"][0]["retriever"] == "ours"
    assert summary["splits"]["tuned"]["samples"] == []
    assert summary["answers"] is None
    whole = next(r for r in summary["recall"] if r["budget"] == "whole")
    assert whole["recall"]["single-hop"] == 1.0  # 12 turns: the whole context covers a lot
    markdown = (out / "summary.md").read_text()
    assert "| ours | top 10 |" in markdown
    assert "| bm25 | top 5 |" in markdown
    assert "| paper | whole context |" in markdown
    assert "### held-out: conv 1" in markdown
    assert list(tmp_path.glob("memoryos-locomo-*")) == []  # the throw-away store is gone


def _all_turns() -> list[Any]:
    return [turn for session in data.sample_sessions(tiny_sample()) for turn in session]


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_main_with_an_openai_llm_scores_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MEMORYOS_LLM=openai (here the project's OpenAI-compatible test server): every question
    of categories 1-4 is answered through ``respond`` and scored with F1 and BLEU-1."""
    from evaluation.fake_openai import FakeOpenAI

    source = tmp_path / "tiny_locomo.json"
    source.write_text(json.dumps([tiny_sample()]))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with FakeOpenAI() as server:
        server.replies["respond"] = "Biscuit"
        settings = load_settings(
            data_dir=tmp_path / "data",
            broker_port=free_port(),
            port=0,
            llm="openai",
            openai_base_url=server.base_url,
            openai_api_key="test",
        )
        out = tmp_path / "out"
        args = argparse.Namespace(data=source, out=out, k=10, samples=None, holdout=None, modes="")
        assert locomo.main(args, settings) == 0

    lines = [json.loads(line) for line in (out / "retrieval.jsonl").read_text().splitlines()]
    assert [line["response"] for line in lines] == ["Biscuit", "Biscuit", "Biscuit"]
    answers = json.loads((out / "summary.json").read_text())["answers"]
    assert answers["f1"]["single-hop"] == 1.0  # "Biscuit" is the answer to question 0
    assert answers["f1"]["temporal"] == 0.0
    assert answers["bleu1"]["overall"] == pytest.approx(0.5)
    assert "| f1 |" in (out / "summary.md").read_text()
