"""A chain's summary reaches every page of the chain, the mid-term ones too (paper: the chain's
meta summary runs along the chain), not only those still in the STM window."""

from __future__ import annotations

import dataclasses

from adapters.deps import Deps
from memory.chain import ContinuityVerdict
from schemas.records import Page
from service.response import ResponseService
from tests.support.builders import make_turns
from tests.support.fakes import FakeLLM, Pipeline, make_deps


class OneChain(FakeLLM):
    """Every turn continues the last one; the summary names the newest turn."""

    async def continuity(self, previous: Page | None, current: Page) -> ContinuityVerdict:
        await self._enter("continuity")
        return ContinuityVerdict(previous is not None, f"talk up to {current.turn_id}")


async def one_chain_of_eight() -> Deps:
    """Eight turns of one chain through the pipeline, two of them left in STM."""
    deps = await make_deps(stm_capacity=2, continuity_llm="always")
    deps = dataclasses.replace(deps, llm=OneChain())
    pipeline = Pipeline(deps)
    turns = make_turns("ann", [(f"Trail run number {n}.", "Nice.") for n in range(8)])
    await ResponseService(deps, pipeline).add_turns(turns)
    await pipeline.drain()
    return deps


async def test_the_mid_term_pages_of_a_chain_take_its_newest_summary() -> None:
    deps = await one_chain_of_eight()
    placed = await deps.repo.mid_term_pages("ann")
    assert len(placed) == 6  # 8 turns, 2 in STM
    assert {page.chain.chain_id for _, page in placed} == {placed[0][1].page_id}
    # the last page to leave STM (t005, pushed out by t007) took t007's summary in the
    # window; every page of the chain in MTM shows it now, not the one it left STM with
    assert {page.chain.summary for _, page in placed} == {"talk up to t007"}
    assert [p.chain.summary for p in await deps.repo.stm_pages("ann")] == ["talk up to t007"] * 2


async def test_a_page_placed_again_late_does_not_put_an_older_summary_back() -> None:
    deps = await one_chain_of_eight()
    (_, first), *_ = await deps.repo.mid_term_pages("ann")
    stale = first.model_copy(
        update={"chain": first.chain.model_copy(update={"summary": "talk up to t001"})}
    )
    await deps.repo.follow_chain_summary(stale)  # a retry of the first placement, say
    placed = await deps.repo.mid_term_pages("ann")
    assert {page.chain.summary for _, page in placed} == {"talk up to t007"}
