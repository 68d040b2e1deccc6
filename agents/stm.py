"""STM agent: pages -> the user's short-term window; the oldest page moves on to MTM."""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from typing import Any

from adapters.deps import Deps, Send
from adapters.repository import STM
from agents.runtime import BatchRunner
from memory.stm import push_page
from schemas.codec import dumps
from schemas.records import EvictedPage, Page, PageEvent
from schemas.topics import user_key


class ShortTermAgent:
    stage = "stm"

    def __init__(
        self,
        deps: Deps,
        windows: MutableMapping[str, Any],
        send_evicted: Send,
        runner: BatchRunner[PageEvent],
    ) -> None:
        self.deps = deps
        self.windows = windows
        self.send_evicted = send_evicted
        self.runner = runner

    async def process(self, events: Sequence[Any]) -> None:
        await self.runner.process(
            events, lambda event: event.page.user_id, lambda e: self.push(e.page)
        )

    async def push(self, page: Page) -> None:
        user_id = page.user_id
        window = await self.window(user_id)
        new_window, evicted = push_page(window, page, self.deps.settings.stm_capacity)
        if new_window == window:
            return  # already in the window: a replay
        # Evicted pages are handed on before the window forgets them: a crash in between
        # replays this page, evicts them again, and the segment agent drops the duplicate.
        for old in evicted:
            await self.send_evicted(key=user_key(user_id), value=dumps(EvictedPage(page=old)))
        before = {p.page_id: p for p in window}
        changed = [p for p in new_window if before.get(p.page_id) != p]
        await self.deps.repo.save_pages(changed, STM)
        self.windows[user_id] = [p.model_dump(mode="json") for p in new_window]
        transitions = self.deps.metrics.transitions
        transitions.labels(transition="stm_in").inc()
        transitions.labels(transition="stm_to_mtm").inc(len(evicted))

    async def window(self, user_id: str) -> list[Page]:
        cached = self.windows.get(user_id)
        if cached is not None:
            return [Page.model_validate(p) for p in cached]
        return await self.deps.repo.stm_pages(user_id)
