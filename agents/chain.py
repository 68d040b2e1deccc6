"""Chain stage: turns -> pages. Decides continuity and links each page into its chain."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import MutableMapping, Sequence
from typing import Any

from adapters.deps import Deps, Send
from adapters.keyring import generation
from adapters.llm.extractive import Line, dialogue_lines, summarize, tokens
from agents.forget import check_marker
from agents.runtime import BatchRunner, Consumed, OrderedStage
from memory.chain import ContinuityVerdict, clear_continuity, link_page, page_from_turn
from memory.scoring import cosine, jaccard
from schemas.codec import dumps
from schemas.records import ForgetUser, Page, PageEvent
from schemas.topics import user_key
from schemas.turn import TurnEvent

log = logging.getLogger(__name__)
TurnInput = TurnEvent | ForgetUser


class ChainAgent(OrderedStage):
    stage = "chain"

    def __init__(
        self,
        deps: Deps,
        tails: MutableMapping[str, Any],
        send_page: Send,
        runner: BatchRunner[TurnInput],
    ) -> None:
        self.deps = deps
        self.tails = tails
        self.send_page = send_page
        self.runner = runner

    async def prepare(self, events: Sequence[Any]) -> list[Consumed[TurnInput]]:
        """Decode the batch and embed all its turns in one call: batched MiniLM costs far less
        per text than one text at a time."""
        items = await self.runner.decode_batch(events)
        turns = [item.record for item in items if isinstance(item.record, TurnEvent)]
        try:
            vectors = await self.deps.embedder.embed([_text(t) for t in turns]) if turns else []
        except Exception as exc:
            # Each turn is then embedded in ``handle``, under the error policy's retries.
            log.warning("batch embedding failed (%r); embedding turn by turn", exc)
            return items
        pages = iter(page_from_turn(t, v) for t, v in zip(turns, vectors, strict=True))
        return [
            dataclasses.replace(item, prepared=next(pages))
            if isinstance(item.record, TurnEvent)
            else item
            for item in items
        ]

    async def handle(self, item: Consumed[TurnInput]) -> None:
        record = item.record
        if isinstance(record, ForgetUser):
            await self.forget(record)
            return
        page = item.prepared
        if page is None:  # the batch embedding failed: embed this turn alone
            page = page_from_turn(record, (await self.deps.embedder.embed([_text(record)]))[0])
        await self.link(page)

    async def link(self, page: Page) -> None:
        gen, tail = await self._tail(page.user_id)
        if tail is not None and tail.page_id == page.page_id:
            return  # the same turn again: already linked
        stored = await self.deps.repo.page_tiers([page.page_id])
        if page.page_id in stored and not await self._being_forgotten(page.user_id):
            return  # a replayed turn whose page is already in memory
        verdict = self._settled_without_llm(tail, page) or await self.deps.llm.continuity(
            tail, page
        )
        linked = link_page(tail, page, verdict).model_copy(
            update={"seq": (tail.seq + 1) if tail else 1}
        )
        keyring = self.deps.keyring
        event = await keyring.seal(page.user_id, gen, dumps(PageEvent(page=linked)))
        if event is None:
            # A turn from before a DELETE whose key is gone: the user is forgotten.
            self.deps.metrics.events.labels(stage=self.stage, outcome="forgotten").inc()
            return
        await self.send_page(key=user_key(page.user_id), value=event)
        sealed_tail = await keyring.seal_value(page.user_id, gen, linked.model_dump(mode="json"))
        self.tails[page.user_id] = {"gen": gen, "tail": sealed_tail}

    def _settled_without_llm(self, tail: Page | None, page: Page) -> ContinuityVerdict | None:
        """With ``MEMORYOS_CONTINUITY_LLM=unclear``: decide clear cases from the signals, and
        write the chain summary extractively, as the offline backend does."""
        settings = self.deps.settings
        if settings.continuity_llm == "always":
            return None
        lines = dialogue_lines(page.text)
        if tail is None:
            return ContinuityVerdict(False, summarize(lines) or page.query[:200])
        if tail.vector is None or page.vector is None:
            return None
        continues = clear_continuity(
            cosine(tail.vector, page.vector),
            jaccard(tokens(tail.text), tokens(page.text)),
            settings.continuity_clear_low,
            settings.continuity_clear_high,
        )
        if continues is None:
            return None
        history = [Line("", tail.chain.summary)] if continues and tail.chain.summary else []
        summary = summarize([*history, *lines], limit=2) or page.query[:200]
        self.deps.metrics.transitions.labels(transition="continuity_without_llm").inc()
        return ContinuityVerdict(continues, summary)

    async def forget(self, marker: ForgetUser) -> None:
        """The first stage checks the marker against the DELETE's tombstone, then passes it on:
        every later stage trusts it, since only this stage reads the public topic."""
        if not await check_marker(self.deps.repo, marker):
            return
        # Not a pop: with the entry gone, the next turn would read its tail from the store,
        # where the STM stage (behind us) may still hold the user's pre-DELETE pages. The
        # entry also says which key generation the user's later turns are sealed with.
        self.deps.keyring.forget(marker.user_id)
        self.tails[marker.user_id] = {"gen": generation(marker.at), "tail": None}
        await self.send_page(key=user_key(marker.user_id), value=dumps(marker))

    async def _being_forgotten(self, user_id: str) -> bool:
        """A DELETE's marker is still on its way through the stages: a page stored now is
        about to be purged by it, so a turn re-sent behind the marker must be linked again."""
        tombstone = await self.deps.repo.tombstone(user_id)
        return tombstone is not None and tombstone[1]

    async def _tail(self, user_id: str) -> tuple[int, Page | None]:
        """The user's key generation here, and the last page of their chain.

        The table entry (sealed: its changelog is on the broker) is a cache; without it the
        tail comes from the store and the generation from the user's tombstone."""
        cached = self.tails.get(user_id)
        if isinstance(cached, dict) and "gen" in cached:  # an older format (no "gen") is not used
            gen = int(cached["gen"])
            opened = await self.deps.keyring.open_value(cached["tail"])
            # Unreadable: its key is destroyed by a DELETE whose marker is still to come.
            return gen, Page.model_validate(opened[1]) if opened is not None else None
        window = await self.deps.repo.stm_pages(user_id)
        return await self.deps.keyring.current(user_id), window[-1] if window else None


def _text(turn: TurnEvent) -> str:
    return f"{turn.query}\n{turn.response}"
