"""`ResponseService.retrieve` in each mode, over the in-memory pipeline with fakes."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from adapters.ports import AGENT_TRAITS, USER_KNOWLEDGE
from adapters.repository import MTM, TIERS
from memory import ids
from memory.ids import page_id
from memory.ranking import RankWeights
from memory.text import query_keywords
from schemas.codec import dumps
from schemas.errors import InvalidEvent
from schemas.filters import Filters
from schemas.records import ChainLink, Page, Segment
from schemas.topics import TURNS, user_key
from schemas.turn import TurnEvent
from service.response import ResponseService
from service.structured import structured_pages
from tests.support.fakes import Pipeline, make_deps
from tests.support.pipelines import TOPICS, NullSink


async def test_structured_ranks_either_tier_and_keeps_the_whole_window(
    service: ResponseService,
) -> None:
    memory = await service.retrieve("ann", "What did I say about sourdough?", top_k=2)
    window = [page.page_id for page in memory.short_term]
    assert len(window) == 3
    assert len(memory.mid_term) == 2  # k mid-term pages, whatever STM pages rank among them
    assert all(page.page_id not in window for page, _, _ in memory.mid_term)
    context = [page.page_id for page in memory.context()]
    assert context[: len(memory.ranking)] == memory.ranking
    assert set(window) <= set(context)
    assert len(context) == len(set(context))
    top = next(page for page in memory.context())
    assert "sourdough" in top.query


async def test_paper_mode_ranks_the_chosen_segments_pages_by_cosine(
    service: ResponseService,
) -> None:
    memory = await service.retrieve("ann", "sourdough bread", top_k=3, mode="paper")
    scores = [score for _, _, score in memory.mid_term]
    assert scores == sorted(scores, reverse=True)
    assert all(-1.0 <= score <= 1.0 for score in scores)  # cosines, not fused scores
    assert memory.ranking == [page.page_id for page, _, _ in memory.mid_term]
    context = [page.page_id for page in memory.context()]
    assert context == memory.ranking + [page.page_id for page in memory.short_term]


async def test_an_unknown_mode_is_refused(service: ResponseService) -> None:
    with pytest.raises(InvalidEvent):
        await service.retrieve("ann", "bread", mode="bm25")


@pytest.mark.parametrize(
    ("update", "reads_segments"),
    [
        ({}, False),  # structured ranks pages directly: the segments would be read for nothing
        ({"mtm_retrieval": "paper"}, True),
        ({"mtm_retrieval": "fused"}, True),
    ],
)
async def test_segments_are_read_only_when_the_mode_uses_them(
    service: ResponseService,
    monkeypatch: pytest.MonkeyPatch,
    update: dict[str, object],
    reads_segments: bool,
) -> None:
    repo = service.deps.repo
    service.deps.settings = service.deps.settings.model_copy(update=update)
    calls: list[str] = []
    read = repo.nearest_segments

    async def counted(*args: object, **kwargs: object) -> object:
        calls.append("nearest_segments")
        return await read(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(repo, "nearest_segments", counted)
    memory = await service.retrieve("ann", "sourdough bread", top_k=2)
    assert bool(calls) is reads_segments
    assert memory.mid_term  # pages found either way


async def test_the_stm_pages_the_ranking_holds_are_not_read_again(
    service: ResponseService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The STM window is read whole at the start of a retrieve; the ranked pages are then read
    in full, except those of the window."""
    repo = service.deps.repo
    asked: list[str] = []
    read = repo.pages_by_id

    async def counted(user_id: str, page_ids: list[str]) -> list[Page]:
        asked.extend(page_ids)
        return await read(user_id, page_ids)

    monkeypatch.setattr(repo, "pages_by_id", counted)
    # a question on the latest turns: their STM pages rank among the mid-term pages
    memory = await service.retrieve("ann", "note 9 on garden roses, note 8 on tax forms", top_k=3)
    window = {page.page_id for page in memory.short_term}
    ranked_in_window = [page_id for page_id in memory.ranking if page_id in window]
    assert ranked_in_window, "the question should rank a page of the window"
    assert not set(asked) & window
    assert set(asked) == set(memory.ranking) - window
    shown = {page.page_id: page for page, _, _ in memory.mid_term}
    assert all(page.page_id in memory.ranking for page in shown.values())
    assert [page.page_id for page in memory.context()][: len(memory.ranking)] == memory.ranking


async def test_a_question_naming_a_month_ranks_that_months_pages_first() -> None:
    pipeline = Pipeline(await make_deps())
    said = [
        (datetime(2024, 2, 10, tzinfo=UTC), "I baked, baked and baked all day"),
        (datetime(2024, 3, 12, tzinfo=UTC), "I baked a cake with my aunt for the party"),
    ]
    said += [
        (datetime(2024, 4, 1 + day, tzinfo=UTC), f"{TOPICS[day % 5]} {day}") for day in range(8)
    ]
    for index, (moment, text) in enumerate(said):
        turn = TurnEvent(
            user_id="ann", turn_id=f"t{index}", query=text, response="Nice.", timestamp=moment
        )
        await pipeline.send(TURNS, user_key("ann"), dumps(turn))
    await pipeline.drain()
    service = ResponseService(pipeline.deps, NullSink())
    question = "What did I bake in March 2024?"

    vector = (await service.deps.embedder.embed([question]))[0]

    async def first(date_weight: float) -> str:
        ranking, _, pages, _ = await structured_pages(
            service.deps.repo,
            "ann",
            vector,
            question,
            2,
            service.term_counts,
            weights=RankWeights(date=date_weight),
        )
        return pages[ranking[0]].query

    assert await first(0.0) == said[0][1]  # the word more often, in fewer words
    assert await first(RankWeights().date) == said[1][1]  # the page of the month asked about
    memory = await service.retrieve("ann", question, top_k=2)
    assert next(page for page in memory.context()).query == said[1][1]  # the service's weights


async def test_the_pool_holds_every_tier_and_no_other_tier_is_stored() -> None:
    """The pool searches have no tier condition (every page matched it, and it made Edge's
    search longer): they rely on every page point being in one of the three tiers."""
    deps = await make_deps()
    embedder, repo = deps.embedder, deps.repo
    by_tier = {}
    for index, tier in enumerate(TIERS):
        text = f"sourdough note {index}"
        vector = (await embedder.embed([text]))[0]
        page = Page(
            page_id=page_id("ann", f"t{index}"),
            user_id="ann",
            turn_id=f"t{index}",
            query=text,
            response="ok",
            timestamp=datetime.fromtimestamp(1_700_000_000 + index, UTC),
            chain=ChainLink(chain_id="c"),
            seq=index,
            vector=vector,
        )
        await repo.save_pages([page], tier, "seg-1" if tier == MTM else None)
        by_tier[page.page_id] = tier
    vector = (await embedder.embed(["sourdough"]))[0]
    for lexical in (False, True):
        hits = await repo.pool_hits("ann", vector, "sourdough", 10, lexical_only=lexical)
        assert {str(hit.payload["page_id"]) for hit in hits} == set(by_tier)
    assert await repo.count_pages("ann") == 3
    with pytest.raises(ValueError, match="no such tier"):
        await repo.save_pages([page], "archived")


@pytest.mark.parametrize("mode", ["paper", "fused"])
async def test_a_filtered_retrieve_returns_k_matching_pages_in_the_paper_modes(mode: str) -> None:
    """The segments are chosen by the query alone (here: one); none of its pages is on the
    web, so the k web pages come from the other segments, the filter still the store's."""
    deps = await make_deps(stm_capacity=2, retrieve_segments=1)
    pipeline = Pipeline(deps)
    service = ResponseService(deps, pipeline)
    talk = [
        ("My router setup keeps failing, the router blinks red.", "Reset the router.", "sms"),
        ("Sourdough bread needs a starter fed daily.", "Feed it flour.", "web"),
    ] * 6
    turns = [
        TurnEvent(user_id="ann", turn_id=f"t{n}", query=q, response=r, channel=channel,
                  timestamp=datetime(2024, 3, 1, 9, n, tzinfo=UTC))
        for n, (q, r, channel) in enumerate(talk)
    ]  # fmt: skip
    await service.add_turns(turns)
    await pipeline.drain()
    found = await service.retrieve(
        "ann", "router setup blinking", top_k=3, mode=mode, filters=Filters(channel="web")
    )
    assert len(found.mid_term) == 3
    assert {page.channel for page, _, _ in found.mid_term} == {"web"}


@pytest.mark.parametrize(
    ("mode", "lexical"), [("paper", False), ("fused", True), ("structured", True)]
)
async def test_paper_mode_searches_the_persona_by_meaning_alone(mode: str, lexical: bool) -> None:
    """The paper retrieves user knowledge and agent traits semantically; the other modes fuse
    a keyword search in, as they do for pages."""
    deps = await make_deps()
    searched: list[tuple[str, bool]] = []
    search = deps.store.search

    async def recording(collection: str, *args: object, **kwargs: object) -> object:
        searched.append((collection, kwargs.get("sparse") is not None))
        return await search(collection, *args, **kwargs)  # type: ignore[arg-type]

    deps.store.search = recording  # type: ignore[method-assign]
    await ResponseService(deps, NullSink()).retrieve("ann", "my dog Miso", mode=mode)
    facts = [
        sparse for collection, sparse in searched if collection in (USER_KNOWLEDGE, AGENT_TRAITS)
    ]
    assert facts == [lexical, lexical]


async def test_paper_mode_scores_f_over_every_segment_not_a_cosine_pre_cut() -> None:
    """The paper's F = cosine + keyword overlap over every segment of the user: a segment far
    by cosine whose keywords are the question's still wins (a pool of the nearest by cosine,
    as before, left it out)."""
    deps = await make_deps(retrieve_segments=1)
    service = ResponseService(deps, NullSink())
    query = "kayak paddle river"
    q = np.array((await deps.embedder.embed([query]))[0])
    q /= np.linalg.norm(q)
    other = np.array((await deps.embedder.embed(["unrelated words about taxes"]))[0])
    u = other - q * float(other @ q)
    u /= np.linalg.norm(u)

    def at_cosine(c: float) -> list[float]:  # a unit vector at cosine c from the query's
        return [float(x) for x in c * q + (1 - c * c) ** 0.5 * u]

    decoys = [(f"decoy{n}", at_cosine(0.6), ["weather", f"topic{n}"]) for n in range(30)]
    decoys.append(("target", at_cosine(0.3), keyword_set_of(query)))  # F = 0.3 + 1 > 0.6
    for key, vector, keywords in decoys:
        segment = Segment(segment_id=ids.segment_id("ann", key), user_id="ann", summary=key,
                          keywords=keywords, last_access=0.0, created_at=0.0)  # fmt: skip
        await deps.repo.save_segment(segment, vector, 1)
    found = await service.retrieve("ann", query, mode="paper")
    assert found.segment_ids == [ids.segment_id("ann", "target")]


def keyword_set_of(text: str) -> list[str]:
    return query_keywords(text)
