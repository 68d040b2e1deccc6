"""The persona stage with the real openai client against the OpenAI-compatible fake: the
persona prompt lists the user's current facts, numbered, and a new fact that names one in
"(updates N)" supersedes it, in the same call."""

from __future__ import annotations

import dataclasses

import pytest

from adapters.llm.openai_llm import OpenAILLM
from evaluation.fake_openai import FakeOpenAI
from memory.fact_book import current
from memory.persona import FactKind
from schemas.facts import FactEdit
from service.response import ResponseService
from tests.support.builders import make_turns
from tests.support.fakes import Pipeline, make_deps
from tests.support.fixtures import settings_for

pytestmark = pytest.mark.asyncio

TALK = [
    ("I drink tea now, green tea in the morning.", "Green tea is nice."),
    ("Tea in the morning helps me wake up.", "Morning tea is a good habit."),
    ("My morning tea is sencha.", "Sencha is a green tea."),
    ("I brew tea for three minutes.", "Three minutes suits green tea."),
    ("Green tea tastes bitter if too hot.", "Use water at 80 degrees."),
    ("I buy my tea loose.", "Loose tea is fresher."),
]


async def test_a_fact_the_llm_says_updates_a_known_one_supersedes_it(
    fake_openai: FakeOpenAI,
) -> None:
    deps = await make_deps()
    llm = OpenAILLM(settings_for(fake_openai))
    deps = dataclasses.replace(deps, llm=llm)
    pipeline = Pipeline(deps)
    service = ResponseService(deps, pipeline)
    coffee = "I drink coffee every morning."
    await service.send_fact_edit(
        FactEdit(
            user_id="ann",
            edit_id="e1",
            op="add",
            fact_id="00000000-0000-5000-8000-000000000000",
            fact_kind="user_knowledge",
            text=coffee,
            at=0.0,
        )
    )
    await pipeline.drain()
    fake_openai.replies["persona"] = (
        "[User Traits]\nNone\n[User Knowledge]\n- I drink tea every morning now (updates 1)\n"
        "[Assistant Knowledge]\nNone"
    )
    await service.add_turns(make_turns("ann", TALK))
    await pipeline.drain()
    try:
        prompts = [
            r.body["messages"][-1]["content"] for r in fake_openai.requests if r.task == "persona"
        ]
        assert prompts, "the persona stage ran"
        assert f"[1] {coffee}" in prompts[0]
        # the paper's persona update reads the segment and its pages: the summary is there
        (segment,) = await deps.repo.all_segments("ann")
        assert segment.segment.summary
        assert f"The topic segment these pages belong to: {segment.segment.summary}" in prompts[0]
        book = await deps.repo.load_fact_book("ann")
        assert book is not None
        assert [f.text for f in current(book, FactKind.USER)] == ["I drink tea every morning now"]
        (old,) = [f for f in book.facts if f.text == coffee]
        assert old.superseded_by == current(book, FactKind.USER)[0].fact_id
    finally:
        await llm.close()
