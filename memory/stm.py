"""Short-term memory: a per-user FIFO window of the most recent pages (paper: 7 pages).

Pure: the STM agent keeps the window (its page ids in a table, the pages in the store) and
sends the evicted pages on to MTM.
"""

from __future__ import annotations

from collections.abc import Sequence

from schemas.records import Page


def push_page(window: Sequence[Page], page: Page, capacity: int) -> tuple[list[Page], list[Page]]:
    """Append ``page`` to the window; return (new window, pages pushed out, oldest first).

    A page already in the window is a replay: nothing changes and nothing is evicted. If the
    page continues a page in the window (``chain.prev``), that page's ``chain.next`` now
    points to it, and every page of its chain takes the new chain summary (the paper
    propagates the chain's meta summary along the chain). Evicted pages leave with those
    updates applied. Neither ``window`` nor any page in it is modified: changed pages are
    copies.
    """
    if capacity < 1:
        raise ValueError(f"STM capacity must be >= 1, got {capacity}")
    if any(held.page_id == page.page_id for held in window):
        return list(window), []
    updated = [_follow(held, page) for held in window]
    updated.append(page)
    cut = max(0, len(updated) - capacity)
    return updated[cut:], updated[:cut]


def _follow(held: Page, new: Page) -> Page:
    """``held`` as it looks once ``new`` joined the window."""
    chain = held.chain
    changes: dict[str, str | None] = {}
    if new.chain.prev == held.page_id and chain.next != new.page_id:
        changes["next"] = new.page_id
    if chain.chain_id == new.chain.chain_id and chain.summary != new.chain.summary:
        changes["summary"] = new.chain.summary
    if not changes:
        return held
    return held.model_copy(update={"chain": chain.model_copy(update=changes)})
