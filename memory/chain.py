"""Dialogue chains (paper: meta^chain): a page from a turn, and its link to the previous page.

The LLM decides whether a page continues the previous one and writes the chain's summary;
these functions only apply that verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.ids import page_id
from schemas.records import ChainLink, Page
from schemas.turn import TurnEvent


@dataclass(frozen=True)
class ContinuityVerdict:
    """The LLM's answer: does the page continue the chain, and the chain's new summary."""

    continuous: bool
    summary: str


def page_from_turn(turn: TurnEvent, vector: list[float] | None = None) -> Page:
    """The page of a turn, alone in a chain of its own until ``link_page`` says otherwise."""
    pid = page_id(turn.user_id, turn.turn_id)
    return Page(
        page_id=pid,
        user_id=turn.user_id,
        turn_id=turn.turn_id,
        query=turn.query,
        response=turn.response,
        timestamp=turn.timestamp,
        assistant_id=turn.assistant_id,
        channel=turn.channel,
        conversation_id=turn.conversation_id,
        meta=dict(turn.meta),
        chain=ChainLink(chain_id=pid),
        vector=None if vector is None else list(vector),
    )


def link_page(previous: Page | None, current: Page, verdict: ContinuityVerdict) -> Page:
    """``current`` placed in its chain according to the LLM's verdict.

    Continuous (and there is a previous page): same chain as ``previous``, ``prev`` points
    to it, and the chain summary is the verdict's. Otherwise a new chain named after
    ``current`` with the verdict's summary as its own. A replayed turn whose previous page
    is itself keeps the links it already has, instead of pointing to itself.
    """
    if previous is not None and previous.user_id != current.user_id:
        raise ValueError(
            f"cannot chain pages of different users: {previous.user_id!r} -> {current.user_id!r}"
        )
    if previous is not None and previous.page_id == current.page_id:
        return current.model_copy(update={"chain": previous.chain.model_copy()})
    if verdict.continuous and previous is not None:
        chain = ChainLink(
            chain_id=previous.chain.chain_id,
            prev=previous.page_id,
            next=current.chain.next,
            summary=verdict.summary,
        )
    else:
        chain = ChainLink(chain_id=current.page_id, summary=verdict.summary)
    return current.model_copy(update={"chain": chain})


def clear_continuity(cosine: float, overlap: float, low: float, high: float) -> bool | None:
    """Continuity the embedding and keyword signals settle without asking the LLM.

    The score is the mean of the two pages' cosine and their content-word Jaccard: at or
    above ``high`` the page clearly continues the chain, at or below ``low`` it clearly
    starts a new one, and in between (None) only the LLM can tell.
    """
    score = (cosine + overlap) / 2
    if score >= high:
        return True
    if score <= low:
        return False
    return None
