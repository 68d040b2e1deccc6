"""A user's facts: what extraction adds, what it supersedes, what the API's edits change.

Pure functions over ``FactBook``. Each returns the new book and a ``Delta``: the facts whose
retrieval points must be written and the ids whose points must go. Only current facts have
points, so retrieval ranks current facts only. The rules:
- a fact's id is deterministic (``ids.fact_id`` of its first text), so a replay finds it;
- a newer fact stating the same attribute (``fact_keys``), or one the LLM says it updates,
  supersedes an older current fact: kept for audit, never served; pinned facts never are;
- a deleted fact, and the first text of an edited one, are never extracted again;
- current facts form the paper's FIFO of ``capacity`` per kind (and per assistant for agent
  traits), pinned facts exempt; superseded ones are kept up to ``capacity`` per kind.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from memory.fact_keys import attribute_of, states_only
from memory.ids import fact_id
from memory.persona import FactKind
from memory.text import STOPWORDS, normalize_fact, tokenize
from schemas.facts import (
    API,
    MAX_FACT_CHARS,
    Fact,
    FactBook,
    FactChange,
    FactEdit,
    FactKindName,
    FactSource,
    Source,
)
from schemas.profile import DEFAULT_ASSISTANT
from schemas.records import Persona

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
_EMPTY_ANSWERS = frozenset({"", "none"})
_WORDY = re.compile(r"[^\W_]")


@dataclass(frozen=True)
class Found:
    """A fact the LLM found in a dialogue, and the ids of known facts it says it updates."""

    text: str
    updates: tuple[str, ...] = ()


@dataclass
class Delta:
    """Points are named by a fact's current text (``ids.fact_id``), so an import can check
    them; the fact's own id is in the payload."""

    stored: list[Fact] = field(default_factory=list)  # points to write (new, revived, new text)
    unstored: list[Fact] = field(default_factory=list)  # points to delete, as they were written


@dataclass(frozen=True)
class PageText:
    page_id: str
    turn_id: str
    text: str


def current(book: FactBook, kind: FactKind, assistant_id: str | None = None) -> list[Fact]:
    """Current facts of a kind, oldest first; agent traits of one assistant only."""
    name = KIND_NAMES[kind]
    scope = _scope(kind, assistant_id)
    return [f for f in book.facts if f.kind == name and f.current and _scope_of(f) == scope]


def extracted(
    book: FactBook,
    kind: FactKind,
    found: Sequence[Found],
    assistant_id: str | None,
    pages: Sequence[PageText],
    at: datetime,
    capacity: int,
) -> tuple[FactBook, Delta]:
    """``found`` (oldest first) merged into the book as facts extracted from ``pages``."""
    work = _Work(book)
    job_pages = {page.page_id for page in pages}
    for item in found:
        text = item.text.strip()[:MAX_FACT_CHARS]
        if not said_something(text):
            continue
        fid = fact_id(book.user_id, kind, text, _assistant_key(kind, assistant_id))
        if fid in work.removed:
            continue
        source = provenance(text, pages)
        fact = work.by_id.get(fid) or work.same_text(kind, assistant_id, text)
        if fact is not None and fact.current:
            # said again: newest in the FIFO, its sources grow; no history entry, or a fact
            # restated in every job would fill its history with nothing new
            work.put_newest(fact.model_copy(update={"source": _merged(fact.source, source)}))
            continue
        if fact is None:
            fact = Fact(
                fact_id=fid,
                kind=KIND_NAMES[kind],
                text=text,
                created_at=at,
                source=source,
                assistant_id=assistant_id if kind is FactKind.AGENT else None,
            )
        elif job_pages & (_pages_of(fact) | _pages_of_successor(work, fact)):
            continue  # pages it (or what replaced it) came from, read again: still superseded
        else:
            fact = fact.model_copy(
                update={
                    "source": _merged(fact.source, source),
                    "superseded_by": None,
                    "superseded_at": None,
                }
            )
        work.put_newest(fact)
        work.note(fact.fact_id, FactChange(change="extracted", at=at, source=source, text=text))
        work.supersede_for(fact, item.updates, at, source)
    work.trim(kind, assistant_id, capacity)
    return work.done()


def edited(book: FactBook, edit: FactEdit, at: datetime, capacity: int) -> tuple[FactBook, Delta]:
    """An API edit applied. A re-sent one (same ``edit_id``) changes nothing, nor does one
    older than the last edit applied (``edit.at``): a copy the reconciler sends again after a
    later edit went through cannot undo it."""
    if edit.edit_id in book.edits:
        return book, Delta()
    work = _Work(book)
    work.edits.append(edit.edit_id)
    if edit.at < book.last_edit_at:
        return work.done()
    work.last_edit_at = edit.at
    fact = work.by_id.get(edit.fact_id)
    if edit.op == "add" and edit.text is not None and edit.fact_kind is not None:
        kind = KINDS[edit.fact_kind]
        fid = add_id(book, kind, edit.text, edit.assistant_id)
        fact = work.by_id.get(fid)
        if fid in work.removed:
            work.removed.remove(fid)  # added again on purpose: it may be extracted again too
        pinned = edit.pinned if edit.pinned is not None else bool(fact and fact.pinned)
        fact = (
            fact
            or Fact(
                fact_id=fid,
                kind=edit.fact_kind,
                text=edit.text,
                created_at=at,
                source=API,
                assistant_id=edit.assistant_id if kind is FactKind.AGENT else None,
            )
        ).model_copy(update={"superseded_by": None, "superseded_at": None})
        fact = fact.model_copy(update={"pinned": pinned and work.may_pin(fact)})
        work.put_newest(fact)
        work.note(fid, FactChange(change="added", at=at, source=API, text=fact.text))
        work.supersede_for(fact, (), at, API)
        work.trim(kind, fact.assistant_id, capacity)
    elif edit.op == "edit" and fact is not None:
        if edit.text is not None and edit.text != fact.text:
            fact = fact.model_copy(update={"text": edit.text})
            work.note(fact.fact_id, FactChange(change="edited", at=at, source=API, text=edit.text))
            if fact.current:  # another current fact saying the same is now this one
                work.supersede_same_text(fact, at)
        pin = edit.pinned is not None and edit.pinned != fact.pinned
        if pin and (not edit.pinned or (fact.current and work.may_pin(fact))):
            fact = fact.model_copy(update={"pinned": edit.pinned})
            change = "pinned" if edit.pinned else "unpinned"
            work.note(fact.fact_id, FactChange(change=change, at=at, source=API))
        work.replace(fact)
    elif edit.op == "delete" and fact is not None:
        work.drop(fact.fact_id)
        work.removed.append(fact.fact_id)
        # what was wrong is rectified, not kept: the history keeps when, not the words
        work.history[fact.fact_id] = [
            change.model_copy(update={"text": None})
            for change in work.history.get(fact.fact_id, [])
        ]
        work.note(fact.fact_id, FactChange(change="deleted", at=at, source=API))
    return work.done()


def add_id(book: FactBook, kind: FactKind, text: str, assistant_id: str | None) -> str:
    """The id a fact added through the API gets: the current fact that says the same if there
    is one; else the id of its text, unless that id names a fact whose text was corrected to
    something else since, and then an id of its own."""
    wanted = normalize_fact(text)
    for fact in current(book, kind, assistant_id):
        if normalize_fact(fact.text) == wanted:
            return fact.fact_id  # a current fact says it already: that one
    scope = _assistant_key(kind, assistant_id)
    fid = fact_id(book.user_id, kind, text, scope)
    held = next((f for f in book.facts if f.fact_id == fid), None)
    if held is None or normalize_fact(held.text) == normalize_fact(text):
        return fid
    return fact_id(book.user_id, kind, "\u2063again: " + text, scope)


def said_something(text: str) -> bool:
    """Whether a fact's text holds a word: not blank, not "None", not invisible characters."""
    return normalize_fact(text) not in _EMPTY_ANSWERS and _WORDY.search(text) is not None


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
    facts = list(book.facts)
    for fact in sorted(facts, key=lambda f: (f.current, f.pinned, f.created_at)):
        if _size(book) <= max_bytes:
            break
        facts.remove(fact)
        book.history.pop(fact.fact_id, None)
        if fact.current:
            dropped.append(fact)
        book = book.model_copy(update={"facts": list(facts)})
    return book, dropped


def _size(book: FactBook) -> int:
    return len(book.model_dump_json())


def provenance(text: str, pages: Sequence[PageText]) -> FactSource:
    """The pages a fact most likely came from: those sharing most of its words; every page
    of the dialogue when none shares enough to tell."""
    words = _content(text)
    if not words or not pages:
        return _source(pages)
    overlaps = [(len(words & _content(page.text)) / len(words), page) for page in pages]
    best = max(share for share, _ in overlaps)
    if best < 0.5:
        return _source(pages)
    return _source([page for share, page in overlaps if share == best])


def history_of(book: FactBook, fid: str) -> list[FactChange] | None:
    return book.history.get(fid)


def book_from_persona(persona: Persona, at: datetime) -> FactBook:
    """The book of a persona stored before facts were records, made of its fact lists: no
    provenance is known."""
    held: list[tuple[FactKind, str | None, str]] = [
        (FactKind.USER, None, text) for text in persona.user_knowledge
    ]
    held += [(FactKind.AGENT, None, text) for text in persona.agent_traits]
    for assistant, texts in persona.assistant_traits.items():
        held += [(FactKind.AGENT, assistant, text) for text in texts]
    return bare_book(persona.user_id, held, at)


def bare_book(
    user_id: str, texts: Iterable[tuple[FactKind, str | None, str]], at: datetime
) -> FactBook:
    """A book of facts with no provenance known."""
    facts = [
        Fact(
            fact_id=fact_id(user_id, kind, text, _assistant_key(kind, assistant)),
            kind=KIND_NAMES[kind],
            text=text,
            created_at=at,
            source=FactSource(),
            assistant_id=assistant if kind is FactKind.AGENT else None,
        )
        for kind, assistant, text in texts
    ]
    return FactBook(user_id=user_id, facts=list({f.fact_id: f for f in facts}.values()))


# --- helpers ---


def _scope(kind: FactKind, assistant_id: str | None) -> str | None:
    return (assistant_id or DEFAULT_ASSISTANT) if kind is FactKind.AGENT else None


def _scope_of(fact: Fact) -> str | None:
    return _scope(KINDS[fact.kind], fact.assistant_id)


def _assistant_key(kind: FactKind, assistant_id: str | None) -> str | None:
    return assistant_id if kind is FactKind.AGENT else None


def _content(text: str) -> set[str]:
    return {word for word in tokenize(text) if word not in STOPWORDS}


def _source(pages: Sequence[PageText]) -> FactSource:
    return FactSource(
        turn_ids=[page.turn_id for page in pages][-MAX_SOURCES:],
        page_ids=[page.page_id for page in pages][-MAX_SOURCES:],
    )


def _merged(old: Source, new: FactSource) -> Source:
    if not isinstance(old, FactSource):
        return old  # added through the API: that stays its origin
    turns = list(dict.fromkeys([*old.turn_ids, *new.turn_ids]))[-MAX_SOURCES:]
    pages = list(dict.fromkeys([*old.page_ids, *new.page_ids]))[-MAX_SOURCES:]
    return FactSource(turn_ids=turns, page_ids=pages)


def _pages_of(fact: Fact | None) -> set[str]:
    return set(fact.source.page_ids) if fact and isinstance(fact.source, FactSource) else set()


def _pages_of_successor(work: _Work, fact: Fact) -> set[str]:
    return _pages_of(work.by_id.get(fact.superseded_by or ""))


class _Work:
    """A book being changed: facts by id in order, and the current set it started with."""

    def __init__(self, book: FactBook) -> None:
        self.user_id = book.user_id
        self.by_id: dict[str, Fact] = {fact.fact_id: fact for fact in book.facts}
        self.history = {fid: list(changes) for fid, changes in book.history.items()}
        self.removed = list(book.removed)
        self.edits = list(book.edits)
        self.last_edit_at = book.last_edit_at
        self.before = {f.fact_id: f for f in book.facts if f.current}

    def same_text(self, kind: FactKind, assistant_id: str | None, text: str) -> Fact | None:
        """A current fact of the same scope whose text (as edited, say) says the same."""
        wanted = normalize_fact(text)
        scope, name = _scope(kind, assistant_id), KIND_NAMES[kind]
        for fact in self.by_id.values():
            same_scope = fact.kind == name and fact.current and _scope_of(fact) == scope
            if same_scope and normalize_fact(fact.text) == wanted:
                return fact
        return None

    def may_pin(self, fact: Fact) -> bool:
        """Under MAX_PINNED pinned facts of its kind and scope (itself aside)."""
        scope = _scope_of(fact)
        pinned = [
            f
            for f in self.by_id.values()
            if f.pinned and f.current and f.kind == fact.kind and _scope_of(f) == scope
        ]
        return len([f for f in pinned if f.fact_id != fact.fact_id]) < MAX_PINNED

    def supersede_same_text(self, fact: Fact, at: datetime) -> None:
        """Two current facts never say the same: the other one is superseded by ``fact``."""
        wanted, scope = normalize_fact(fact.text), _scope_of(fact)
        for other in list(self.by_id.values()):
            same = other.kind == fact.kind and _scope_of(other) == scope and other.current
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

    def drop(self, fid: str) -> None:
        self.by_id.pop(fid, None)

    def note(self, fid: str, change: FactChange) -> None:
        self.history[fid] = [*self.history.get(fid, []), change][-MAX_CHANGES:]

    def supersede_for(
        self, new: Fact, updates: Sequence[str], at: datetime, source: Source
    ) -> None:
        attribute = attribute_of(new.text)
        scope = _scope_of(new)
        for old in list(self.by_id.values()):
            if old.fact_id == new.fact_id or not old.current or old.pinned:
                continue
            if old.kind != new.kind or _scope_of(old) != scope:
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
            if f.kind == KIND_NAMES[kind] and _scope_of(f) == _scope(kind, assistant_id)
        ]
        for fact in scoped[: max(0, len(scoped) - capacity)]:
            self.drop(fact.fact_id)
            self.history.pop(fact.fact_id, None)
        old = sorted(
            (f for f in self.by_id.values() if not f.current and f.kind == KIND_NAMES[kind]),
            key=lambda f: f.superseded_at or f.created_at,
        )
        for fact in old[: max(0, len(old) - capacity)]:
            self.drop(fact.fact_id)
            self.history.pop(fact.fact_id, None)

    def done(self) -> tuple[FactBook, Delta]:
        facts = list(self.by_id.values())
        after = {f.fact_id: f for f in facts if f.current}
        delta = Delta()
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
            last_edit_at=self.last_edit_at,
        )
        return book, delta
