"""A user's fact book being changed, and the bounds it is kept within.

``BookChange`` holds a book's facts by id while ``memory.facts`` applies an extraction or an
edit to it, and says at the end which retrieval points to write and delete (``Delta``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from memory.fact_keys import attribute_of, states_only
from memory.persona import FactKind
from memory.text import normalize_fact
from schemas.facts import API, Fact, FactBook, FactChange, FactKindName, FactSource, Source
from schemas.profile import DEFAULT_ASSISTANT

KIND_NAMES: dict[FactKind, FactKindName] = {
    FactKind.USER: "user_knowledge",
    FactKind.AGENT: "agent_trait",
}
KINDS: dict[FactKindName, FactKind] = {name: kind for kind, name in KIND_NAMES.items()}
MAX_SOURCES = 20  # page ids (and turn ids) a fact keeps, newest last
MAX_CHANGES = 30  # history entries a fact keeps, newest last
MAX_REMOVED = 1_000  # ids of deleted or edited-away facts held back from extraction
MAX_EDITS = 500  # ids of applied API edits remembered against re-sends
MAX_PINNED = 100  # pinned facts per kind (and per assistant for agent traits)
MAX_BOOK_BYTES = 512 * 1024  # a user's book as JSON: half the store's payload limit
KEPT_WHEN_FULL = 3  # history entries a fact keeps once the book is at its bound
KEPT_REMOVED = 200


@dataclass
class Delta:
    """Points are named by a fact's current text (``ids.fact_id``), so an import can check
    them; the fact's own id is in the payload."""

    stored: list[Fact] = field(default_factory=list)  # points to write (new, revived, new text)
    unstored: list[Fact] = field(default_factory=list)  # points to delete, as they were written
    # every change made, in order, with its fact (for memoryos.events); a fact dropped past
    # the capacity is a "deleted" change whose source is not the API
    changes: list[tuple[Fact, FactChange]] = field(default_factory=list)


def current(book: FactBook, kind: FactKind, assistant_id: str | None = None) -> list[Fact]:
    """Current facts of a kind, oldest first; agent traits of one assistant only."""
    name = KIND_NAMES[kind]
    scope = scope_key(kind, assistant_id)
    return [f for f in book.facts if f.kind == name and f.current and scope_of(f) == scope]


def fit(book: FactBook, max_bytes: int = MAX_BOOK_BYTES) -> tuple[FactBook, list[Fact]]:
    """The book within ``max_bytes`` as JSON, and the current facts it had to drop (their
    points must go): histories shortened first, then superseded facts, then the oldest
    unpinned current facts. A store refuses a document past its limit, and a user whose book
    cannot be stored could not be changed any more."""
    if _size(book) <= max_bytes:
        return book, []
    history = {fid: changes[-KEPT_WHEN_FULL:] for fid, changes in book.history.items()}
    book = book.model_copy(update={"history": history, "removed": book.removed[-KEPT_REMOVED:]})
    dropped: list[Fact] = []
    while (total := _size(book)) > max_bytes:
        # one serialisation per pass, not one per fact: each fact's share is estimated
        order = sorted(book.facts, key=lambda f: (f.current, f.pinned, f.created_at))
        going: set[str] = set()
        for fact in order:
            if total <= max_bytes:
                break
            going.add(fact.fact_id)
            total -= _share(book, fact)
        if not going:
            break
        dropped += [f for f in book.facts if f.fact_id in going and f.current]
        book = book.model_copy(
            update={
                "facts": [f for f in book.facts if f.fact_id not in going],
                "history": {k: v for k, v in book.history.items() if k not in going},
            }
        )
    return book, dropped


def _share(book: FactBook, fact: Fact) -> int:
    """About what ``fact`` and its history add to the book as JSON."""
    changes = book.history.get(fact.fact_id, [])
    return len(fact.model_dump_json()) + sum(len(c.model_dump_json()) for c in changes) + 50


def _size(book: FactBook) -> int:
    return len(book.model_dump_json())


def scope_key(kind: FactKind, assistant_id: str | None) -> str | None:
    return (assistant_id or DEFAULT_ASSISTANT) if kind is FactKind.AGENT else None


def scope_of(fact: Fact) -> str | None:
    return scope_key(KINDS[fact.kind], fact.assistant_id)


class BookChange:
    """A book being changed: facts by id in order, and the current set it started with."""

    def __init__(self, book: FactBook) -> None:
        self.user_id = book.user_id
        self.by_id: dict[str, Fact] = {fact.fact_id: fact for fact in book.facts}
        self.history = {fid: list(changes) for fid, changes in book.history.items()}
        self.removed = list(book.removed)
        self.edits = list(book.edits)
        self.edited_at = dict(book.edited_at)
        self.before = {f.fact_id: f for f in book.facts if f.current}
        self.changes: list[tuple[Fact, FactChange]] = []

    def same_text(self, kind: FactKind, assistant_id: str | None, text: str) -> Fact | None:
        """A current fact of the same scope whose text (as edited, say) says the same."""
        wanted = normalize_fact(text)
        scope, name = scope_key(kind, assistant_id), KIND_NAMES[kind]
        for fact in self.by_id.values():
            same_scope = fact.kind == name and fact.current and scope_of(fact) == scope
            if same_scope and normalize_fact(fact.text) == wanted:
                return fact
        return None

    def may_pin(self, fact: Fact) -> bool:
        """Under MAX_PINNED pinned facts of its kind and scope (itself aside)."""
        scope = scope_of(fact)
        pinned = [
            f
            for f in self.by_id.values()
            if f.pinned and f.current and f.kind == fact.kind and scope_of(f) == scope
        ]
        return len([f for f in pinned if f.fact_id != fact.fact_id]) < MAX_PINNED

    def supersede_same_text(self, fact: Fact, at: datetime) -> None:
        """Two current facts never say the same: the other one is superseded by ``fact``."""
        wanted, scope = normalize_fact(fact.text), scope_of(fact)
        for other in list(self.by_id.values()):
            same = other.kind == fact.kind and scope_of(other) == scope and other.current
            if same and other.fact_id != fact.fact_id and normalize_fact(other.text) == wanted:
                self.supersede(other, fact, at, API)

    def supersede(self, old: Fact, new: Fact, at: datetime, source: Source) -> None:
        self.replace(old.model_copy(update={"superseded_by": new.fact_id, "superseded_at": at}))
        change = FactChange(change="superseded", at=at, source=source, superseded_by=new.fact_id)
        self.note(old.fact_id, change)

    def put_newest(self, fact: Fact) -> None:
        self.by_id.pop(fact.fact_id, None)
        self.by_id[fact.fact_id] = fact

    def replace(self, fact: Fact) -> None:
        self.by_id[fact.fact_id] = fact

    def drop(self, fid: str) -> Fact | None:
        return self.by_id.pop(fid, None)

    def note(self, fid: str, change: FactChange, fact: Fact | None = None) -> None:
        self.history[fid] = [*self.history.get(fid, []), change][-MAX_CHANGES:]
        fact = fact or self.by_id.get(fid)
        if fact is not None:
            self.changes.append((fact, change))

    def _dropped_for_room(self, fact: Fact) -> None:
        self.drop(fact.fact_id)
        self.history.pop(fact.fact_id, None)
        if fact.current:
            room = FactChange(change="deleted", at=fact.created_at, source=FactSource())
            self.changes.append((fact, room))

    def supersede_for(
        self, new: Fact, updates: Sequence[str], at: datetime, source: Source
    ) -> None:
        attribute = attribute_of(new.text)
        scope = scope_of(new)
        for old in list(self.by_id.values()):
            if old.fact_id == new.fact_id or not old.current or old.pinned:
                continue
            if old.kind != new.kind or scope_of(old) != scope:
                continue
            same_attribute = (
                attribute is not None
                and attribute_of(old.text) == attribute
                and states_only(old.text)
            )
            if same_attribute or old.fact_id in updates:
                self.supersede(old, new, at, source)

    def trim(self, kind: FactKind, assistant_id: str | None, capacity: int) -> None:
        """The FIFO bound on current facts (pinned exempt), and on superseded ones kept."""
        live = [f for f in self.by_id.values() if f.current and not f.pinned]
        scoped = [
            f
            for f in live
            if f.kind == KIND_NAMES[kind] and scope_of(f) == scope_key(kind, assistant_id)
        ]
        for fact in scoped[: max(0, len(scoped) - capacity)]:
            self._dropped_for_room(fact)
        old = sorted(
            (f for f in self.by_id.values() if not f.current and f.kind == KIND_NAMES[kind]),
            key=lambda f: f.superseded_at or f.created_at,
        )
        for fact in old[: max(0, len(old) - capacity)]:
            self._dropped_for_room(fact)

    def done(self) -> tuple[FactBook, Delta]:
        facts = list(self.by_id.values())
        after = {f.fact_id: f for f in facts if f.current}
        delta = Delta(changes=self.changes)
        for fid, fact in after.items():
            earlier = self.before.get(fid)
            if earlier is None or earlier.text != fact.text:
                delta.stored.append(fact)
            if earlier is not None and earlier.text != fact.text:
                delta.unstored.append(earlier)
        delta.unstored += [fact for fid, fact in self.before.items() if fid not in after]
        removed = self.removed[-MAX_REMOVED:]
        kept = set(self.by_id) | set(removed[-MAX_REMOVED // 5 :])  # deleted facts' history
        book = FactBook(
            user_id=self.user_id,
            facts=facts,
            history={fid: h for fid, h in self.history.items() if fid in kept},
            removed=removed,
            edits=self.edits[-MAX_EDITS:],
            # kept for the facts held and those held back: bounded as they are
            edited_at={k: v for k, v in self.edited_at.items() if k in kept or k in self.by_id},
        )
        return book, delta
