"""STM stage: pages -> the user's short-term window; the oldest page moves on to MTM.

The window's table (keyed by user) holds which pages it has, in order, and their key
generation: ids only. The pages themselves are in the store, which the stage writes first and
reads them back from; a table entry holding the pages would put the whole window, sealed, on the
changelog at every turn (docs/benchmarks.md, "What a turn puts on the broker"). A missing or
stale entry (another key generation, a page the store no longer has) is answered by the store's
STM tier.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from adapters.deps import Deps, Send
from adapters.events_out import EventOut, NoEvents
from adapters.repository import LEAVING, STM
from agents.forget import check_marker
from agents.runtime import BatchRunner, Consumed, RecordStage
from memory.events import page_stored
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
        events: EventOut | None = None,
    ) -> None:
        self.deps = deps
        self.windows = windows
        self.send_mid_term = send_mid_term
        self.runner = runner
        self.events = events or NoEvents()

    async def handle(self, item: Consumed[PageInput]) -> None:
        await self.apply(item.record.root, item.gen)

    async def apply(self, event: PageEvent | ForgetUser, gen: int | None = None) -> None:
        if isinstance(event, ForgetUser):
            await self.forget(event)
        else:
            await self.push(event.page, gen)

    async def push(self, page: Page, gen: int | None = None) -> None:
        """``gen``: the key generation the page came sealed with; what it becomes here is
        sealed with the same (an unsealed page, from a test or a raw producer, is given the
        user's current one)."""
        user_id = page.user_id
        keyring = self.deps.keyring
        if gen is None:
            gen = await keyring.current(user_id)
        window = await self.window(user_id, gen)
        if window and page.seq <= window[-1].seq:
            return  # a replay of a page the window has already moved past
        new_window, evicted = push_page(window, page, self.deps.settings.stm_capacity)
        if new_window == window:
            return  # already in the window: a replay
        # The store first: evicted pages are marked as leaving (no longer STM, so the window
        # never exceeds its capacity; found by the reconciler if the hand-over below is lost).
        # The window's pages are stored already: only their tier and chain change, in place.
        before = {p.page_id: p for p in window}
        relinked = [p for p in new_window if p.page_id in before and before[p.page_id] != p]
        new = [p for p in new_window if p.page_id not in before]
        # announced before it is written: a crash between leaves the event and the work owed
        stored = next((p for p in new_window if p.page_id == page.page_id), page)
        # the page's key generation is its user's last DELETE (ms) as the stages saw it
        await self.events.emit([page_stored(stored, self.deps.clock.now(), max(gen, 0))])
        repo = self.deps.repo
        await repo.update_pages(evicted, LEAVING)
        await repo.update_pages(relinked, STM)
        await repo.save_pages(new, STM)
        if evicted:  # the window is read without vectors; MTM places a page by its vector
            vectors = await repo.page_vectors([p.page_id for p in evicted])
            evicted = [
                p.model_copy(update={"vector": vectors[p.page_id]})
                for p in evicted
                if p.page_id in vectors  # gone meanwhile: its user forgotten
            ]
        for old in evicted:
            sealed = await keyring.seal(user_id, gen, dumps(EvictedPage(page=old)))
            if sealed is not None:  # None: its key is destroyed, the user forgotten
                await self.send_mid_term(key=user_key(user_id), value=sealed)
        self.windows[user_id] = {"gen": gen, "pages": [p.page_id for p in new_window]}
        transitions = self.deps.metrics.transitions
        transitions.labels(transition="stm_in").inc()
        transitions.labels(transition="stm_to_mtm").inc(len(evicted))

    async def forget(self, marker: ForgetUser) -> None:
        if not await check_marker(self.deps.repo, marker):
            return
        self.windows.pop(marker.user_id, None)
        self.deps.keyring.forget(marker.user_id)
        await self.deps.repo.purge_short_term(marker.user_id)
        await self.send_mid_term(key=user_key(marker.user_id), value=dumps(marker))

    async def window(self, user_id: str, gen: int) -> list[Page]:
        entry = self.windows.get(user_id)
        # an older version's entry was the sealed window itself (a string): read as missing
        ids = entry.get("pages") if isinstance(entry, dict) and entry.get("gen") == gen else None
        if isinstance(ids, list):
            # every page still in STM, or the entry is stale (a write after the store's was lost)
            pages = await self.deps.repo.pages_by_id(user_id, ids, tier=STM)
            if [p.page_id for p in pages] == ids:
                return pages
        return await self.deps.repo.stm_pages(user_id, with_vectors=False)
