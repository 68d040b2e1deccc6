"""STM stage: pages -> the user's short-term window; the oldest page moves on to MTM."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from adapters.deps import Deps, Send
from adapters.repository import LEAVING, STM
from agents.forget import check_marker
from agents.runtime import BatchRunner, RecordStage
from memory.stm import push_page
from schemas.codec import dumps
from schemas.records import EvictedPage, ForgetUser, Page, PageEvent, PageInput
from schemas.topics import user_key


class ShortTermAgent(RecordStage):
    stage = "stm"

    def __init__(
        self,
        deps: Deps,
        windows: MutableMapping[str, Any],
        send_mid_term: Send,
        runner: BatchRunner[PageInput],
    ) -> None:
        self.deps = deps
        self.windows = windows
        self.send_mid_term = send_mid_term
        self.runner = runner

    async def apply(self, event: PageEvent | ForgetUser) -> None:
        if isinstance(event, ForgetUser):
            await self.forget(event)
        else:
            await self.push(event.page)

    async def push(self, page: Page) -> None:
        user_id = page.user_id
        window = await self.window(user_id)
        if window and page.seq <= window[-1].seq:
            return  # a replay of a page the window has already moved past
        new_window, evicted = push_page(window, page, self.deps.settings.stm_capacity)
        if new_window == window:
            return  # already in the window: a replay
        # The store first: evicted pages are marked as leaving (no longer STM, so the window
        # never exceeds its capacity; found by the reconciler if the hand-over below is lost).
        before = {p.page_id: p for p in window}
        changed = [p for p in new_window if before.get(p.page_id) != p]
        await self.deps.repo.save_pages(evicted, LEAVING)
        await self.deps.repo.save_pages(changed, STM)
        for old in evicted:
            await self.send_mid_term(key=user_key(user_id), value=dumps(EvictedPage(page=old)))
        self.windows[user_id] = [p.model_dump(mode="json") for p in new_window]
        transitions = self.deps.metrics.transitions
        transitions.labels(transition="stm_in").inc()
        transitions.labels(transition="stm_to_mtm").inc(len(evicted))

    async def forget(self, marker: ForgetUser) -> None:
        if not await check_marker(self.deps.repo, marker):
            return
        self.windows.pop(marker.user_id, None)
        await self.deps.repo.purge_short_term(marker.user_id)
        await self.send_mid_term(key=user_key(marker.user_id), value=dumps(marker))

    async def window(self, user_id: str) -> list[Page]:
        cached = self.windows.get(user_id)
        if cached is not None:
            return [Page.model_validate(p) for p in cached]
        return await self.deps.repo.stm_pages(user_id)
