"""Level-triggered recovery: derive from the store what each stage still owes, drive it again.

The store is the source of truth and every stage is idempotent, so re-sending is always safe.
Kubernetes controllers work this way: not "replay what was lost" but "look at what is, and
ask again for what should be". It heals a crash of the embedded stack (whose broker forgets
everything), a lost event, and work dead-lettered for a transient cause.

What is owed, and to whom:
- a journaled turn whose page is not stored -> the turn again, to the chain stage;
- a page that left STM but is in no segment (``leaving``) -> the page again, to the MTM stage;
- a DELETE whose marker has not passed the last stage -> the marker again;
- at start, every user with mid-term state -> ``Resume``: a persona job may have been lost;
- a journaled message the pairing stage has not stored -> the message again, to that stage;
- a journaled fact edit the persona stage has not applied -> the edit again, to that stage;
- every pass, a user with messages waiting for a reply -> a ``PairingTick``, so a message
  left unanswered for MEMORYOS_PAIRING_WAIT_S becomes a turn (a forget marker goes to
  ``memoryos.messages`` too).

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

import orjson

from adapters.events_out import NoOutbox, Outbox
from adapters.journal import Entry, Journal
from adapters.keyring import Keyring
from adapters.metrics import Metrics
from adapters.ports import PERSONAS, Clock, SystemClock
from adapters.repository import HEAT_DOC, PAIRING_DOC, MemoryRepository
from schemas.codec import dumps
from schemas.events import EventType
from schemas.records import EvictedPage, ForgetUser, PairingTick, Resume
from schemas.topics import EVENTS, MESSAGES, MTM, PERSONA, TURNS, user_key

log = logging.getLogger(__name__)
Send = Callable[[str, bytes, bytes], Awaitable[None]]
JOURNAL_READ = 10_000  # journaled turns read per pass; the stack catches up past them at start


@dataclass
class Owed:
    turns: int = 0
    settled: int = 0
    leaving: int = 0
    forgets: int = 0
    resumed: int = 0
    messages: int = 0
    ticks: int = 0
    fact_edits: int = 0
    events: int = 0


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
    clock: Clock = field(default_factory=SystemClock)
    keyring: Keyring | None = None  # the stages' (one cache per process); made if not given
    metrics: Metrics | None = None
    # a user whose tenant has spent its LLM tokens of the day: their work waits in the stages
    # already, and a copy sent again would wait beside it (and be charged again next day)
    paused: Callable[[str], bool] = field(default=lambda _: False)
    outbox: Outbox = field(default_factory=NoOutbox)  # events the webhooks have not had
    _seen: set[str] = field(default_factory=set)
    # the newest journal seqs the last pass read (turns, messages): the stack's catch-up
    # sends what was journaled after them
    read_through: int = 0
    messages_read_through: int = 0

    def __post_init__(self) -> None:
        if self.keyring is None:
            self.keyring = Keyring(self.repo)

    async def start(self) -> Owed:
        """Everything owed, now: called once the stages run, before clients are served."""
        async with self.lock:
            settled = await self._settle_past_one_read()
            owed = await self._pass(everything=True)
        owed.settled += settled
        if self.embedded:
            for user_id in await self.repo.users_with_doc(HEAT_DOC):
                await self.send(MTM, user_key(user_id), dumps(Resume(user_id=user_id)))
                owed.resumed += 1
            owed.events = await self._send_kept_events()
        log.info("reconciled at start: %s", owed)
        return owed

    async def _send_kept_events(self) -> int:
        """The outbox's events again, in order, with their ids: the broker lost its copies.
        A user's forgotten event waits while the DELETE is open: the stage sends it when
        the DELETE's marker (sent again above) completes."""
        sent, after = 0, 0
        while entries := await self.outbox.pending(limit=JOURNAL_READ, after=after):
            for entry in entries:
                after = entry.seq
                if orjson.loads(entry.value).get("type") == EventType.USER_FORGOTTEN:
                    stone = await self.repo.tombstone(entry.user_id)
                    if stone is not None and stone[1]:
                        continue
                await self.send(EVENTS, user_key(entry.user_id), entry.value)
                sent += 1
        return sent

    async def run_pass(self, everything: bool = False) -> Owed:
        async with self.lock:
            return await self._pass(everything)

    async def _pass(self, everything: bool) -> Owed:
        owed, seen = Owed(), set[str]()
        await self.journal.settle_queued(self.repo.store.flush)

        def due(key: str) -> bool:
            seen.add(key)
            return everything or key in self._seen

        def held_back(user_id: str) -> bool:
            """A spent tenant's user, on a running pass: their work waits in the stages. A
            start pass (after a crash or a broker roll lost the broker's copies) sends all."""
            return not everything and self.paused(user_id)

        entries = await self.journal.pending(limit=JOURNAL_READ)
        self.read_through = max((entry.seq for entry in entries), default=0)
        messages = await self.journal.pending_messages(limit=JOURNAL_READ)
        self.messages_read_through = max((entry.seq for entry in messages), default=0)
        forgetting = await self.repo.open_tombstones()
        # A user being forgotten keeps every journaled turn until the marker has passed:
        # a marker sent again purges what those turns wrote, so they must follow it again.
        for user_id, at in forgetting.items():
            if self.embedded and not held_back(user_id) and due(f"forget:{user_id}:{at}"):
                marker = dumps(ForgetUser(user_id=user_id, at=at))
                await self.send(TURNS, user_key(user_id), marker)
                await self.send(MESSAGES, user_key(user_id), marker)
                owed.forgets += 1
                for entry in messages:
                    if entry.user_id == user_id:
                        await self.send(MESSAGES, user_key(user_id), entry.value)
                        owed.messages += 1
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
        # A held-back user's turn below their newest page may be one whose copy was lost and
        # not sent again: it is not settled while they are held back.
        done = {
            e.seq
            for e in entries
            if e.page_id in stored
            or (e.seq < newest.get(e.user_id, -1) and not held_back(e.user_id))
        }
        settled = sorted(done)
        await self._settle(settled)
        owed.settled = len(settled)
        self._count_settled(
            len(settled), [e for e in entries if e.seq in done and e.page_id not in stored]
        )
        for entry in entries:
            if entry.seq not in done and not held_back(entry.user_id) and due(f"turn:{entry.seq}"):
                await self.send(TURNS, user_key(entry.user_id), entry.value)
                owed.turns += 1
        for entry in messages:
            # settled by the pairing stage once stored; owed only if still here a pass later
            if (
                entry.user_id not in forgetting
                and not held_back(entry.user_id)
                and due(f"message:{entry.seq}")
            ):
                await self.send(MESSAGES, user_key(entry.user_id), entry.value)
                owed.messages += 1
        owed.fact_edits = await self._resend_fact_edits(forgetting, due, held_back)
        owed.ticks = await self._tick_waiting(forgetting, everything)
        for page in await self.repo.leaving_pages():
            paused = held_back(page.user_id)
            if page.user_id not in forgetting and not paused and due(f"page:{page.page_id}"):
                keyring = self.keyring
                assert keyring is not None  # made in __post_init__
                gen = await keyring.current(page.user_id)
                sealed = await keyring.seal(page.user_id, gen, dumps(EvictedPage(page=page)))
                if sealed is not None:  # sealed like the STM stage's: text on the broker
                    await self.send(MTM, user_key(page.user_id), sealed)
                    owed.leaving += 1
        self._seen = seen
        return owed

    async def _resend_fact_edits(
        self,
        forgetting: dict[str, float],
        due: Callable[[str], bool],
        held_back: Callable[[str], bool],
    ) -> int:
        """Edits not applied yet, sealed as the API sealed them (none of a user being
        forgotten: the DELETE dropped them from the journal, and its marker purges)."""
        keyring = self.keyring
        assert keyring is not None  # made in __post_init__
        sent = 0
        for entry in await self.journal.pending_fact_edits(limit=JOURNAL_READ):
            if entry.user_id in forgetting or held_back(entry.user_id):
                continue
            if not due(f"fact:{entry.seq}"):
                continue
            gen = await keyring.current(entry.user_id)
            sealed = await keyring.seal(entry.user_id, gen, entry.value)
            if sealed is not None:
                await self.send(PERSONA, user_key(entry.user_id), sealed)
                sent += 1
        return sent

    async def _settle(self, seqs: list[int]) -> None:
        """Journal entries go only once the store has flushed the pages read as stored: a
        damaged store log after a crash loses applied writes, never flushed ones."""
        if seqs:
            await self.repo.store.flush()
        await self.journal.settle(seqs)

    def _count_settled(self, settled: int, passed: list[Entry]) -> None:
        """Said aloud: a turn settled without its page is right only if it was dead-lettered
        or its segment evicted since; a turn whose send was lost looks the same from here."""
        if self.metrics is not None:
            self.metrics.journal_settled.labels(how="stored").inc(settled - len(passed))
            self.metrics.journal_settled.labels(how="passed").inc(len(passed))
        if passed:
            log.warning(
                "settled %d journaled turns with no page, a later turn of their user stored "
                "(dead-lettered, evicted, or lost): %s",
                len(passed),
                ", ".join(f"{e.user_id}/{e.page_id}" for e in passed[:10]),
            )

    async def _settle_past_one_read(self) -> int:
        """A pass reads the oldest ``JOURNAL_READ`` turns, and the stack sends the rest of a
        longer backlog unjudged: so the pass's "below the newest stored page" rule is applied
        here first, over the whole journal, or an old turn whose page has been evicted since
        would be linked anew as its user's newest page."""
        forgetting = await self.repo.open_tombstones()
        read: list[tuple[Entry, bool]] = []  # each entry, and whether its page is stored
        newest: dict[str, int] = {}
        after = 0
        while entries := await self.journal.pending(limit=JOURNAL_READ, after=after):
            if not after and len(entries) < JOURNAL_READ:
                return 0  # one read holds it all: the pass judges it whole
            after = entries[-1].seq
            entries = [entry for entry in entries if entry.user_id not in forgetting]
            stored = await self.repo.page_tiers([entry.page_id for entry in entries])
            for entry in entries:
                read.append((entry, entry.page_id in stored))
                if entry.page_id in stored:
                    newest[entry.user_id] = max(newest.get(entry.user_id, -1), entry.seq)
        done = [(e, has) for e, has in read if e.seq <= newest.get(e.user_id, -1)]
        await self._settle([e.seq for e, _ in done])
        self._count_settled(len(done), [e for e, has in done if not has])
        return len(done)

    async def _tick_waiting(self, forgetting: dict[str, float], everything: bool) -> int:
        """Time, for every user with messages waiting: the pairing stage flushes the overdue.

        At start every pairing document is read, so one that an older version flagged
        ``True`` (which no engine-neutral filter matches) is found too."""
        where: dict[str, str | int] = {"kind": PAIRING_DOC}
        if not everything:
            where["waiting"] = 1
        docs = await self.repo.store.scroll(PERSONAS, None, where)
        waiting = {str(p.payload["user_id"]) for p in docs if p.payload.get("waiting")}
        users = sorted(waiting - set(forgetting))
        now = self.clock.now()
        for user_id in users:
            await self.send(
                MESSAGES, user_key(user_id), dumps(PairingTick(user_id=user_id, at=now))
            )
        return len(users)

    async def run_forever(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                owed = await self.run_pass()
                if owed.turns or owed.leaving or owed.forgets or owed.messages:
                    log.warning("reconciler re-sent stuck work: %s", owed)
            except Exception as exc:  # the next pass tries again; never kill the process
                log.warning("reconciler pass failed: %r", exc)
