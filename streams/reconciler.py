"""Level-triggered recovery: derive from the store what each stage still owes, drive it again.

The store is the source of truth and every stage is idempotent, so re-sending is always safe.
Kubernetes controllers work this way: not "replay what was lost" but "look at what is, and
ask again for what should be". It heals a crash of the embedded stack (whose broker forgets
everything), a lost event, and work dead-lettered for a transient cause.

What is owed, and to whom:
- a journaled turn whose page is not stored -> the turn again, to the chain stage;
- a page that left STM but is in no segment (``leaving``) -> the page again, to the MTM stage;
- a DELETE whose marker has not passed the last stage -> the marker again;
- at start, every user with mid-term state -> ``Resume``: a persona job may have been lost.

At start everything owed is re-sent at once (the embedded broker is empty). While running, a
pass re-sends only what was already owed at the previous pass: work in flight is left alone.
A forget marker goes first, followed again by every journaled turn of that user: turns
acknowledged after the DELETE stay journaled until its marker has passed every stage.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from adapters.journal import Journal
from adapters.repository import HEAT_DOC, MemoryRepository
from schemas.codec import dumps
from schemas.records import EvictedPage, ForgetUser, Resume
from schemas.topics import MTM, TURNS, user_key

log = logging.getLogger(__name__)
Send = Callable[[str, bytes, bytes], Awaitable[None]]


@dataclass
class Owed:
    turns: int = 0
    settled: int = 0
    leaving: int = 0
    forgets: int = 0
    resumed: int = 0


@dataclass
class Reconciler:
    """``embedded``: the broker lost everything on a restart (markers, persona jobs), so they
    are sent again; a real Kafka kept them, and sending them again would only repeat work.
    ``lock`` is held by every pass and by every DELETE of this process, so a pass never sends
    work it read before a DELETE after that DELETE's marker."""

    repo: MemoryRepository
    journal: Journal
    send: Send
    embedded: bool = True
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _seen: set[str] = field(default_factory=set)

    async def start(self) -> Owed:
        """Everything owed, now: called once the stages run, before clients are served."""
        owed = await self.run_pass(everything=True)
        if self.embedded:
            for user_id in await self.repo.users_with_doc(HEAT_DOC):
                await self.send(MTM, user_key(user_id), dumps(Resume(user_id=user_id)))
                owed.resumed += 1
        log.info("reconciled at start: %s", owed)
        return owed

    async def run_pass(self, everything: bool = False) -> Owed:
        async with self.lock:
            return await self._pass(everything)

    async def _pass(self, everything: bool) -> Owed:
        owed, seen = Owed(), set[str]()

        def due(key: str) -> bool:
            seen.add(key)
            return everything or key in self._seen

        entries = await self.journal.pending()
        forgetting = await self.repo.open_tombstones()
        # A user being forgotten keeps every journaled turn until the marker has passed:
        # a marker sent again purges what those turns wrote, so they must follow it again.
        for user_id, at in forgetting.items():
            if self.embedded and due(f"forget:{user_id}:{at}"):
                await self.send(TURNS, user_key(user_id), dumps(ForgetUser(user_id=user_id, at=at)))
                owed.forgets += 1
                for entry in entries:
                    if entry.user_id == user_id:
                        await self.send(TURNS, user_key(user_id), entry.value)
                        owed.turns += 1
        entries = [entry for entry in entries if entry.user_id not in forgetting]
        stored = await self.repo.page_tiers([entry.page_id for entry in entries])
        # One user's turns are processed in order: below the newest stored page of a user,
        # a turn without a page was processed too (its segment evicted since, or it was
        # dead-lettered). Sending it again would link it anew as the newest page.
        newest: dict[str, int] = {}
        for entry in entries:
            if entry.page_id in stored:
                newest[entry.user_id] = max(newest.get(entry.user_id, -1), entry.seq)
        done = {e.seq for e in entries if e.page_id in stored or e.seq < newest.get(e.user_id, -1)}
        settled = sorted(done)
        await self.journal.settle(settled)
        owed.settled = len(settled)
        for entry in entries:
            if entry.seq not in done and due(f"turn:{entry.seq}"):
                await self.send(TURNS, user_key(entry.user_id), entry.value)
                owed.turns += 1
        for page in await self.repo.leaving_pages():
            if page.user_id not in forgetting and due(f"page:{page.page_id}"):
                await self.send(MTM, user_key(page.user_id), dumps(EvictedPage(page=page)))
                owed.leaving += 1
        self._seen = seen
        return owed

    async def run_forever(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                owed = await self.run_pass()
                if owed.turns or owed.leaving or owed.forgets:
                    log.warning("reconciler re-sent stuck work: %s", owed)
            except Exception as exc:  # the next pass tries again; never kill the process
                log.warning("reconciler pass failed: %r", exc)
