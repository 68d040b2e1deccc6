"""`memoryos up --demo`: ingest the bundled conversation, then show memory and answers."""

from __future__ import annotations

from importlib import resources
from typing import Any

import orjson

from schemas.codec import decode
from schemas.turn import TurnEvent
from streams.commands.ingest_wait import service_url
from streams.commands.inspect import render
from streams.progress import open_progress
from streams.stack import Stack


def demo_turns() -> list[TurnEvent]:
    data = resources.files("streams").joinpath("data/demo.jsonl").read_bytes()
    return [decode(TurnEvent, line) for line in data.splitlines() if line.strip()]


def demo_questions() -> list[dict[str, Any]]:
    data = resources.files("streams").joinpath("data/demo_questions.json").read_bytes()
    questions: list[dict[str, Any]] = orjson.loads(data)
    return questions


async def run_demo(stack: Stack, quiet: bool = False) -> None:
    assert stack.service is not None
    turns = demo_turns()
    users = sorted({turn.user_id for turn in turns})
    questions = demo_questions()
    print(f"demo: ingesting {len(turns)} turns of {len(users)} users ...", flush=True)
    with open_progress("demo", quiet) as progress:
        progress.phase("send", total=len(turns), unit="turns")
        await stack.service.add_turns(turns)
        progress.advance(len(turns))
        progress.phase("pipeline")  # until every stage has read everything sent
        await stack.wait_idle(timeout_s=300)
        progress.phase("answer", total=len(questions), unit="questions")
        answers = []
        for question in questions:
            answered = await stack.service.respond(question["user_id"], question["question"])
            answers.append((question, answered.text))
            progress.advance(1)
        progress.phase("pipeline")
        await stack.service.visits.flush(10.0)  # the answers' visits linger: send them now
        await stack.wait_idle(timeout_s=120)  # let the retrieval hits reach the heat agent
    for user in users:
        print("\n" + render(await stack.service.get_memory(user)), flush=True)
    print("\nanswers:")
    for question, text in answers:
        print(f"  {question['user_id']}: {question['question']}\n    -> {text}", flush=True)
    if stack.settings.llm == "offline":
        print(
            "\nThese answers are the offline backend's (no model). With a real LLM: "
            "MEMORYOS_LLM=openai OPENAI_API_KEY=sk-... make run\n"
            "or any OpenAI-compatible server: MEMORYOS_LLM=openai "
            "OPENAI_BASE_URL=http://localhost:11434/v1 MEMORYOS_LLM_MODEL=llama3.1 make run"
        )
    print(f"\ntry: curl -s {service_url(stack.settings, stack.port)}/v1/users/{users[0]}/memory")
