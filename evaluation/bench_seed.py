"""Seeding a LoCoMo-sized store for `memoryos bench`: memory as the pipeline would leave it.

Per user: the newest ``stm_capacity`` pages in STM, the rest in mid-term segments (with the
heat bookkeeping, interaction counts already reset as after a persona update), persona, user
knowledge and agent traits. Payloads are realistic (the same synthetic dialogue as the
ingest); vectors are random unit vectors clustered per segment, which is fine for latency.
Everything goes through ``MemoryRepository``, as the agents write it.
"""

from __future__ import annotations

import random

import numpy as np
import numpy.typing as npt

from adapters.deps import Deps
from adapters.llm.traits import TRAIT_GROUPS
from adapters.repository import HEAT_DOC, MTM, STM
from evaluation.bench_data import DAYS, SyntheticTurn, Topic, conversation
from memory import ids
from memory.mtm import MidTermState
from memory.persona import FactKind
from memory.text import normalize_fact
from schemas.records import ChainLink, Page, Persona, Segment, Trait

USER_FACTS = 40
AGENT_FACTS = 20
TRAITS_PER_USER = 8

Matrix = npt.NDArray[np.float64]


def _unit(rows: Matrix) -> Matrix:
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    unit: Matrix = rows / np.maximum(norms, 1e-12)
    return unit


async def seed_user(
    deps: Deps,
    user: str,
    turns: int,
    segments: int,
    rng: random.Random,
    vectors: np.random.Generator,
) -> tuple[list[Topic], int]:
    """One user's memory as the pipeline would have left it; their topics and points."""
    settings, repo, now = deps.settings, deps.repo, deps.clock.now()
    dim = deps.embedder.dim
    talk = conversation(user, turns, rng)
    stm_count = min(settings.stm_capacity, turns)
    mtm_count = turns - stm_count
    groups = max(1, min(segments, mtm_count))
    centroids = _unit(vectors.standard_normal((groups, dim)))
    owner = [index * groups // max(1, mtm_count) for index in range(mtm_count)]
    noise = vectors.standard_normal((turns, dim)) * 0.9
    page_vectors = _unit(
        np.vstack([centroids[owner] + noise[:mtm_count], _unit(noise[mtm_count:])])
    )
    pages = _pages(user, talk, page_vectors)
    await repo.save_pages(pages[mtm_count:], STM)
    state, points = MidTermState(), turns
    for group in range(groups if mtm_count else 0):
        rows = [i for i in range(mtm_count) if owner[i] == group]
        members = [pages[i] for i in rows]
        segment = _segment(user, members, now)
        await repo.save_pages(members, MTM, segment.segment_id)
        centroid = _unit(page_vectors[rows].mean(axis=0))
        await repo.save_segment(segment, [float(x) for x in centroid], len(members))
        for member in members:
            state.add_page(segment.segment_id, member.page_id, now, created=True)
        state.reset_interaction(segment.segment_id)  # as after the persona update at ingest
        points += 1
    await repo.save_doc(user, HEAT_DOC, state.to_dict())
    points += await _seed_persona(deps, user, talk, rng, vectors) + 1
    return list(dict.fromkeys(item.topic for item in talk)), points


def _pages(user: str, talk: list[SyntheticTurn], vectors: Matrix) -> list[Page]:
    pages: list[Page] = []
    chain_id, previous = "", None
    for index, item in enumerate(talk):
        turn = item.turn
        page_id = ids.page_id(user, turn.turn_id)
        continues = previous is not None and talk[index - 1].topic == item.topic
        chain_id = chain_id if continues else page_id
        pages.append(
            Page(
                page_id=page_id,
                user_id=user,
                turn_id=turn.turn_id,
                query=turn.query,
                response=turn.response,
                timestamp=turn.timestamp,
                channel=turn.channel,
                meta=dict(turn.meta),
                chain=ChainLink(
                    chain_id=chain_id,
                    prev=previous if continues else None,
                    summary=f"The user talks about {item.topic.name}: {item.keywords[0]}.",
                ),
                seq=index + 1,
                keywords=list(item.keywords),
                vector=[float(x) for x in vectors[index]],
            )
        )
        previous = page_id
    return pages


def _segment(user: str, members: list[Page], now: float) -> Segment:
    keywords = list(dict.fromkeys(k for page in members for k in page.keywords))[:12]
    subjects = list(dict.fromkeys(page.keywords[0] for page in members))
    return Segment(
        segment_id=ids.segment_id(user, members[0].page_id),
        user_id=user,
        summary="The user discussed " + ", ".join(subjects[:6]) + " and asked for advice.",
        keywords=keywords,
        page_ids=[page.page_id for page in members],
        last_access=now,
        created_at=now,
    )


async def _seed_persona(
    deps: Deps,
    user: str,
    talk: list[SyntheticTurn],
    rng: random.Random,
    vectors: np.random.Generator,
) -> int:
    user_facts = list(dict.fromkeys(
        normalize_fact(f"I {rng.choice(i.topic.actions)} the {i.keywords[0]} with "
                       f"{i.keywords[1]} on {rng.choice(DAYS)}")
        for i in rng.sample(talk, k=min(USER_FACTS, len(talk)))
    ))  # fmt: skip
    agent_facts = list(dict.fromkeys(
        normalize_fact(f"I recommended {i.keywords[1]} for the {i.keywords[0]}")
        for i in rng.sample(talk, k=min(AGENT_FACTS, len(talk)))
    ))  # fmt: skip
    dim = deps.embedder.dim
    for kind, facts in ((FactKind.USER, user_facts), (FactKind.AGENT, agent_facts)):
        fact_vectors = _unit(vectors.standard_normal((len(facts), dim)))
        await deps.repo.save_facts(
            user, kind, facts, [[float(x) for x in row] for row in fact_vectors]
        )
    names = [name for group in TRAIT_GROUPS.values() for name in group]
    traits = {
        name: Trait(level=rng.choice(("High", "Medium", "Low")), reason="seen in the dialogue")
        for name in rng.sample(names, k=TRAITS_PER_USER)
    }
    persona = Persona(
        user_id=user,
        profile={"name": f"Bench user {user[-5:]}", "channel": talk[0].turn.channel},
        traits=traits,
        user_knowledge=user_facts,
        agent_traits=agent_facts,
    )
    await deps.repo.save_persona(persona)
    return len(user_facts) + len(agent_facts)


async def seed_users(
    deps: Deps,
    users: int,
    turns: int,
    segments: int,
    rng: random.Random,
    vectors: np.random.Generator,
) -> list[tuple[str, list[Topic]]]:
    """``users`` users seeded as ``seed_user`` does (ids ``bench-u00000`` on), each with its
    topics; the load tools' store."""
    seeded: list[tuple[str, list[Topic]]] = []
    for index in range(users):
        user = f"bench-u{index:05d}"
        own, _ = await seed_user(deps, user, turns, segments, rng, vectors)
        seeded.append((user, own))
    return seeded
