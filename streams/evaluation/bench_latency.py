"""Bench part 4: retrieve and respond latency on a LoCoMo-sized store, and read-your-writes.

Pushing 300k turns through the pipeline at a few hundred embeddings per second would take
hours, so this store is SEEDED directly through ``MemoryRepository``: per user, the newest
``stm_capacity`` pages in STM, the rest in mid-term segments, persona, user knowledge and
agent traits, with realistic payloads (the same synthetic dialogue as the ingest) and random
unit vectors clustered per segment. Latency is then measured one call at a time, so it is
service time, not queueing. Read-your-writes goes through the real pipeline: a turn is
posted with ``add_turns`` and ``retrieve`` is polled until the turn is in ``short_term``.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from agents.context import Services
from memory import ids
from memory.mtm import MidTermState
from memory.text import normalize_fact
from schemas.records import ChainLink, Page, Persona, Segment, Trait
from schemas.turn import TurnEvent
from service.memory import MemoryService
from streams.evaluation.bench_common import fresh_stack, parts, percentiles_ms, say
from streams.evaluation.bench_data import DAYS, SyntheticTurn, Topic, conversation, query_for
from streams.llm.traits import TRAIT_GROUPS
from streams.repository import HEAT_DOC, MTM, STM
from streams.settings import Settings

USER_FACTS = 40
AGENT_FACTS = 20
TRAITS_PER_USER = 8
WARMUP_CALLS = 20
RYW_TIMEOUT_S = 30.0
RYW_POLL_S = 0.005


@dataclass
class LatencyResult:
    users: int
    turns_per_user: int
    segments_per_user: int
    points_seeded: int = 0
    seed_s: float = 0.0
    retrieve_s: list[float] = field(default_factory=list)
    respond_s: list[float] = field(default_factory=list)
    ryw_s: list[float] = field(default_factory=list)
    ryw_timeouts: int = 0
    distinct_queries: int = 0
    mid_term_hits: float = 0.0  # mean MTM pages returned per retrieve

    def summary(self) -> dict[str, Any]:
        ryw = percentiles_ms(self.ryw_s)
        return {
            "retrieve": percentiles_ms(self.retrieve_s),
            "respond": percentiles_ms(self.respond_s),
            "read_your_writes_ms": {"p50": ryw["p50_ms"], "p99": ryw["p99_ms"]},
        }


Matrix = npt.NDArray[np.float64]


def _unit(rows: Matrix) -> Matrix:
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    unit: Matrix = rows / np.maximum(norms, 1e-12)
    return unit


async def seed_user(
    services: Services,
    user: str,
    turns: int,
    segments: int,
    rng: random.Random,
    vectors: np.random.Generator,
) -> tuple[list[Topic], int]:
    """One user's memory as the pipeline would have left it; their topics and points."""
    settings, repo, now = services.settings, services.repo, services.clock.now()
    dim = services.embedder.dim
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
    points += await _seed_persona(services, user, talk, rng, vectors) + 1
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
    services: Services,
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
    dim = services.embedder.dim
    for kind, facts in (("user_knowledge", user_facts), ("agent_traits", agent_facts)):
        fact_vectors = _unit(vectors.standard_normal((len(facts), dim)))
        await services.repo.save_facts(
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
    await services.repo.save_persona(persona)
    return len(user_facts) + len(agent_facts)


async def _flush(services: Services) -> None:
    """Write the bulk load out of the WAL, as a store that has run for a while would have."""
    inner = getattr(services.store, "inner", services.store)
    flush = getattr(inner, "flush", None)
    if flush is not None:
        await flush()


async def measure_latency(
    settings: Settings,
    users: int,
    turns_per_user: int,
    segments_per_user: int,
    retrieves: int,
    responds: int,
    ryw_tries: int,
    seed: int,
) -> LatencyResult:
    result = LatencyResult(users, turns_per_user, segments_per_user)
    rng, vectors = random.Random(seed), np.random.default_rng(seed)
    async with fresh_stack(settings) as stack:
        service, services = parts(stack)
        say(f"latency: seeding {users} users x {turns_per_user} turns into the store")
        started = time.perf_counter()
        topics: list[tuple[str, list[Topic]]] = []
        for index in range(users):
            user = f"bench-u{index:05d}"
            user_topics, points = await seed_user(
                services, user, turns_per_user, segments_per_user, rng, vectors
            )
            topics.append((user, user_topics))
            result.points_seeded += points
            if (index + 1) % max(1, users // 10) == 0:
                say(f"latency: seeded {index + 1}/{users} users ({result.points_seeded} points)")
        await _flush(services)
        result.seed_s = time.perf_counter() - started
        await _time_calls(service, topics, rng, retrieves, responds, result)
        await _read_your_writes(service, topics, ryw_tries, result)
    return result


async def _time_calls(
    service: MemoryService,
    topics: list[tuple[str, list[Topic]]],
    rng: random.Random,
    retrieves: int,
    responds: int,
    result: LatencyResult,
) -> None:
    def pick() -> tuple[str, str]:
        user, own = rng.choice(topics)
        return user, query_for(rng.choice(own), rng)

    for _ in range(WARMUP_CALLS):  # first calls: embedder thread, code paths
        await service.respond(*pick())
    say(f"latency: {retrieves} retrieves, one at a time")
    queries, hits = set(), 0
    for _ in range(retrieves):
        user, query = pick()
        queries.add(query)
        started = time.perf_counter()
        memory = await service.retrieve(user, query)
        result.retrieve_s.append(time.perf_counter() - started)
        hits += len(memory.mid_term)
    result.distinct_queries = len(queries)
    result.mid_term_hits = hits / max(1, retrieves)
    say(f"latency: {responds} responds (offline LLM), one at a time")
    for _ in range(responds):
        user, query = pick()
        started = time.perf_counter()
        await service.respond(user, query)
        result.respond_s.append(time.perf_counter() - started)


async def _read_your_writes(
    service: MemoryService, topics: list[tuple[str, list[Topic]]], tries: int, result: LatencyResult
) -> None:
    say(f"latency: read-your-writes, {tries} turns")
    for attempt in range(tries):
        user = topics[attempt % len(topics)][0]
        turn = TurnEvent(
            user_id=user,
            turn_id=f"ryw{attempt:05d}",
            query=f"Note for later, number {attempt}: my locker code is {1000 + attempt}.",
            response="Noted, I will remember your locker code.",
            timestamp=datetime.now(UTC),
        )
        started = time.perf_counter()
        await service.add_turns([turn])
        while time.perf_counter() - started < RYW_TIMEOUT_S:
            memory = await service.retrieve(user, turn.query)
            if any(page.turn_id == turn.turn_id for page in memory.short_term):
                result.ryw_s.append(time.perf_counter() - started)
                break
            await asyncio.sleep(RYW_POLL_S)
        else:
            result.ryw_timeouts += 1
