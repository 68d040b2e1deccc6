"""Messages in, turns out: the pure state of the pairing stage for one user.

A message bus carries the customer's message(s), then the assistant's reply, per conversation.
Pairing joins them into the dialogue turn the paper's pages are made of:

- a customer message waits, per conversation, for the assistant's reply; several customer
  messages in a row become one query (joined by newlines);
- the assistant's message closes the turn at once (the reply is what memory is for; waiting for
  a second assistant message would delay read-your-writes). A second assistant message with
  nothing pending is a turn with an empty query, as is a message the assistant starts with;
- a customer message left without a reply for ``wait_s`` becomes a turn with an empty response:
  what a customer said is memory even if no one answered (dropping it would lose it), and an
  empty response says plainly that no reply came. A reply after that is a turn of its own;
- a turn's id derives from the message that closed it (``memory.ids.message_turn_id``), so a
  replay lands on the same page; the ids of consumed messages are kept (a bounded window) so a
  replayed message is not paired twice.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from memory.ids import message_turn_id
from schemas.limits import MAX_META_BYTES
from schemas.message import MessageEvent
from schemas.turn import MAX_TEXT_CHARS, TurnEvent

RECENT_IDS = 1024  # consumed message ids remembered per user, against replays
MAX_PENDING = 32  # waiting customer messages per user: bounds the state document


def message_digest(message: MessageEvent) -> str:
    """What a re-sent message id must carry again to be the same message: role and text."""
    return hashlib.sha256(f"{message.role}\0{message.text}".encode()).hexdigest()[:16]


@dataclass
class PairingState:
    pending: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # conversation -> msgs
    recent: list[str] = field(default_factory=list)
    forgotten_through: float = float("-inf")  # the latest DELETE whose marker this stage saw
    digests: dict[str, str] = field(default_factory=dict)  # recent id -> message_digest

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> PairingState:
        if not data:
            return cls()
        through = data.get("forgotten_through")
        return cls(
            {conversation: list(messages) for conversation, messages in data["pending"].items()},
            list(data.get("recent", [])),
            float("-inf") if through is None else float(through),
            dict(data.get("digests", {})),  # none in documents of older versions
        )

    def to_dict(self) -> dict[str, Any]:
        through = None if self.forgotten_through == float("-inf") else self.forgotten_through
        return {
            "pending": self.pending,
            "recent": self.recent,
            "forgotten_through": through,
            "digests": self.digests,
        }

    @property
    def waiting(self) -> int:
        return sum(len(messages) for messages in self.pending.values())

    def receive(self, message: MessageEvent, arrived: float, wait_s: float) -> list[TurnEvent]:
        """Take one message; the turns it completes (none, one, or two when it also flushes a
        conversation that waited too long). A message seen before changes nothing."""
        if message.message_id in self.recent:
            return []
        self.recent = [*self.recent, message.message_id][-RECENT_IDS:]
        kept = set(self.recent)
        self.digests = {k: v for k, v in self.digests.items() if k in kept}
        self.digests[message.message_id] = message_digest(message)
        waiting = self.pending.pop(message.conversation_id, [])
        if message.role == "assistant":
            return [_turn([_message(m) for m in waiting], message)]
        turns = []
        if waiting and _overdue(waiting, message, wait_s):
            turns.append(_unanswered([_message(m) for m in waiting]))
            waiting = []
        waiting.append(message.model_dump(mode="json") | {"arrived": arrived})
        self.pending[message.conversation_id] = waiting
        while self.waiting > MAX_PENDING:  # the conversation waiting longest gives way
            oldest = min(self.pending, key=lambda c: self.pending[c][-1]["arrived"])
            turns.append(_unanswered([_message(m) for m in self.pending.pop(oldest)]))
        return turns

    def flush_due(self, now: float, wait_s: float) -> list[TurnEvent]:
        """Conversations whose last customer message arrived ``wait_s`` before ``now``."""
        due = [c for c, messages in self.pending.items() if messages[-1]["arrived"] + wait_s <= now]
        return [_unanswered([_message(m) for m in self.pending.pop(c)]) for c in sorted(due)]


def _message(data: dict[str, Any]) -> MessageEvent:
    return MessageEvent.model_validate({k: v for k, v in data.items() if k != "arrived"})


def _overdue(waiting: list[dict[str, Any]], message: MessageEvent, wait_s: float) -> bool:
    """The new message cannot join the waiting ones: they waited too long (by the messages'
    own times, so a replayed history pairs as it happened) or the query would be too long."""
    last = _message(waiting[-1])
    length = sum(len(m["text"]) + 1 for m in waiting) + len(message.text)
    return (message.timestamp - last.timestamp).total_seconds() > wait_s or length > MAX_TEXT_CHARS


def _turn(asked: list[MessageEvent], reply: MessageEvent) -> TurnEvent:
    return _make(asked, reply, reply.text, reply)


def _unanswered(asked: list[MessageEvent]) -> TurnEvent:
    return _make(asked, asked[-1], "", None)


def _make(
    asked: list[MessageEvent], closing: MessageEvent, response: str, reply: MessageEvent | None
) -> TurnEvent:
    messages = [*asked, *([reply] if reply else [])]
    meta: dict[str, Any] = {}
    for message in messages:
        meta |= message.meta
    ids = {
        "conversation_id": closing.conversation_id,
        "message_ids": [m.message_id for m in messages],
    }
    if len(orjson.dumps(meta | ids)) > MAX_META_BYTES:
        meta = {}  # the messages' own meta does not fit a turn: their ids still lead to them
    return TurnEvent(
        user_id=closing.user_id,
        turn_id=message_turn_id(closing.user_id, closing.message_id),
        query="\n".join(m.text for m in asked)[:MAX_TEXT_CHARS],
        response=response,
        timestamp=closing.timestamp,
        assistant_id=(reply.assistant_id if reply else None) or closing.assistant_id,
        channel=closing.channel or next((m.channel for m in reversed(messages) if m.channel), None),
        conversation_id=closing.conversation_id,
        meta=meta | ids,
    )
