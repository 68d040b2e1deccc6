"""Pairing stage: messages -> turns. The one writer of a user's messages waiting for a reply.

It sits in front of the chain stage: a bus writes one event per message to
``memoryos.messages`` (keyed by user, so one user's messages keep their order), and the stage
joins a customer's message(s) with the assistant's reply into a turn on ``memoryos.turns``
(``memory/pairing.py`` says how, and what an unanswered message becomes).

Durability, as everywhere: the waiting messages are in the store (a per-user document), the
Faust table is a cache rebuilt from it on a miss. A turn it makes is journaled before it is
sent (embedded mode: the broker keeps nothing on disk), and a message's own journal entry is
settled only once the document holding it is stored. Write order: turns first, then the
document; a crash in between replays the message, which makes the same turn (its id derives
from the message), and the chain stage keeps one page per turn id.

Forgetting: a DELETE sends a marker down ``memoryos.messages`` too. Until it arrives, a
message of a user with an open tombstone was sent before the DELETE (it is ahead of the
marker in the partition) and is dropped; the marker itself purges the waiting messages.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from adapters.deps import Deps, Send
from adapters.journal import Journal, NoJournal
from adapters.keyring import generation
from adapters.repository import PAIRING_DOC
from agents.forget import check_marker
from agents.runtime import BatchRunner, Consumed, OrderedStage
from memory.pairing import PairingState
from schemas.codec import dumps
from schemas.message import MessageEvent
from schemas.records import ForgetUser, PairingTick
from schemas.topics import user_key
from schemas.turn import TurnEvent

MessageInput = MessageEvent | ForgetUser | PairingTick
Check = Callable[[], Awaitable[bool]]
# (turns, unless): journal and send the turns unless ``unless()`` says no, asked once nothing
# can come between the answer and the journal write (the user's lock held)
WriteTurns = Callable[[Sequence[TurnEvent], Check], Awaitable[object]]


class PairingAgent(OrderedStage):
    stage = "pairing"

    def __init__(
        self,
        deps: Deps,
        states: MutableMapping[str, Any],
        send_turn: Send,
        runner: BatchRunner[MessageInput],
        journal: Journal | None = None,
        write_turns: WriteTurns | None = None,
    ) -> None:
        """``write_turns``: how the turns made here are journaled and sent, when not by this
        stage itself: the embedded stack writes them as it writes a client's (its writers'
        lock and its gate), so during a broker roll the journal is their only sender."""
        self.deps = deps
        self.states = states
        self.send_turn = send_turn
        self.runner = runner
        self.journal: Journal = journal or NoJournal()
        self.write_turns = write_turns or self._journal_and_send

    async def _journal_and_send(self, turns: Sequence[TurnEvent], unless: Check) -> None:
        if await unless():
            return
        await self.journal.append(turns)
        for turn in turns:
            await self.send_turn(key=user_key(turn.user_id), value=dumps(turn))

    async def handle(self, item: Consumed[MessageInput]) -> None:
        await self.apply(item.record)

    async def apply(self, event: MessageInput) -> None:
        if isinstance(event, ForgetUser):
            await self.forget(event)
            return
        gen, state = await self.state(event.user_id)
        wait_s = self.deps.settings.pairing_wait_s
        now = self.deps.clock.now()
        if await self._sent_before_a_delete(state, event.user_id):
            # Ahead of the DELETE's marker: a message from before it is dropped, and a tick
            # must not turn the waiting pre-DELETE messages into turns behind the marker.
            if isinstance(event, MessageEvent):
                self.deps.metrics.events.labels(stage=self.stage, outcome="forgotten").inc()
                await self.journal.settle_messages(event.user_id, [event.message_id])
            return
        if isinstance(event, PairingTick):
            turns = state.flush_due(min(event.at, now), wait_s)  # no tick from the future
        else:
            turns = state.receive(event, now, wait_s)
        if turns:
            # Asked again where the write holds the user's lock: a DELETE that was deleting
            # when the check above ran has its tombstone by then, and these turns, made of
            # messages sent before it, must not follow its marker.
            await self.write_turns(turns, lambda: self._sent_before_a_delete(state, event.user_id))
        data = state.to_dict()
        waiting = int(state.waiting > 0)  # 0/1: not every engine matches a boolean
        await self.deps.repo.save_doc(event.user_id, PAIRING_DOC, data, waiting=waiting)
        await self._cache(event.user_id, gen, data)
        if isinstance(event, MessageEvent):
            await self.journal.settle_messages(event.user_id, [event.message_id])

    async def _sent_before_a_delete(self, state: PairingState, user_id: str) -> bool:
        tombstone = await self.deps.repo.tombstone(user_id)
        return tombstone is not None and tombstone[1] and tombstone[0] > state.forgotten_through

    async def forget(self, marker: ForgetUser) -> None:
        """Purge the waiting messages; later messages of the user are welcome again."""
        if not await check_marker(self.deps.repo, marker):
            return
        await self.deps.repo.delete_doc(marker.user_id, PAIRING_DOC)
        self.deps.keyring.forget(marker.user_id)
        # Kept in the table only: the store holds nothing of a deleted user.
        fresh = PairingState(forgotten_through=marker.at).to_dict()
        await self._cache(marker.user_id, generation(marker.at), fresh)

    async def state(self, user_id: str) -> tuple[int, PairingState]:
        """The user's key generation here and their waiting messages.

        The table entry (sealed: its changelog is on the broker) is a cache of the store's
        document; without it, the generation comes from the user's tombstone."""
        cached = self.states.get(user_id)
        opened = await self.deps.keyring.open_value(cached) if cached is not None else None
        if opened is not None:
            return opened[0], PairingState.from_dict(opened[1])
        doc = await self.deps.repo.load_doc(user_id, PAIRING_DOC)
        return await self.deps.keyring.current(user_id), PairingState.from_dict(doc)

    async def _cache(self, user_id: str, gen: int, data: dict[str, Any]) -> None:
        value = await self.deps.keyring.seal_value(user_id, gen, data)
        if value is None:  # its key is destroyed: a DELETE's marker is on its way
            self.states.pop(user_id, None)
        else:
            self.states[user_id] = value
