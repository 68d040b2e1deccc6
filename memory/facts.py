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
from dataclasses import dataclass
from datetime import datetime

from memory.fact_book import (
    KIND_NAMES,
    KINDS,
    MAX_SOURCES,
    BookChange,
    Delta,
    current,
)
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
    FactSource,
    Source,
)
from schemas.records import Persona

_EMPTY_ANSWERS = frozenset({"", "none"})
_WORDY = re.compile(r"[^\W_]")


@dataclass(frozen=True)
class Found:
    """A fact the LLM found in a dialogue, and the ids of known facts it says it updates."""

    text: str
    updates: tuple[str, ...] = ()


@dataclass(frozen=True)
class PageText:
    page_id: str
    turn_id: str
    text: str


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
    work = BookChange(book)
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
    older (``edit.at``) than the last edit applied to the same fact: a copy the reconciler sends
    again after a later edit of that fact went through cannot undo it. Edits of other facts
    are not compared: the user's stream orders them."""
    if edit.edit_id in book.edits:
        return book, Delta()
    work = BookChange(book)
    work.edits.append(edit.edit_id)
    target = edit.fact_id
    if edit.op == "add" and edit.text is not None and edit.fact_kind is not None:
        target = add_id(book, KINDS[edit.fact_kind], edit.text, edit.assistant_id)
    if edit.at < book.edited_at.get(target, float("-inf")):
        return work.done()
    work.edited_at[target] = edit.at
    fact = work.by_id.get(edit.fact_id)
    if edit.op == "add" and edit.text is not None and edit.fact_kind is not None:
        kind = KINDS[edit.fact_kind]
        fid = target
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
        dropped = work.drop(fact.fact_id)
        work.removed.append(fact.fact_id)
        # what was wrong is rectified, not kept: the history keeps when, not the words
        work.history[fact.fact_id] = [
            change.model_copy(update={"text": None})
            for change in work.history.get(fact.fact_id, [])
        ]
        work.note(fact.fact_id, FactChange(change="deleted", at=at, source=API), dropped)
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
    held = {f.fact_id: f for f in book.facts}
    for again in range(len(book.facts) + 1):  # each id held by a corrected fact: the next
        key = text if again == 0 else f"\u2063again {again}: {text}"
        fid = fact_id(book.user_id, kind, key, scope)
        if fid not in held or normalize_fact(held[fid].text) == wanted:
            return fid
    raise AssertionError("unreachable: more ids tried than facts held")


def said_something(text: str) -> bool:
    """Whether a fact's text holds a word: not blank, not "None", not invisible characters."""
    return normalize_fact(text) not in _EMPTY_ANSWERS and _WORDY.search(text) is not None


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


def _pages_of_successor(work: BookChange, fact: Fact) -> set[str]:
    return _pages_of(work.by_id.get(fact.superseded_by or ""))
