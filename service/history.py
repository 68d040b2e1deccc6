"""One user's recent pipeline history, for operators (`GET /v1/users/{id}/history`).

Built from what the stack already records, so the stages pay nothing for it:

- where each of the user's latest turns is, from the store: a page exists once the chain
  and STM stages handled the turn (``stm``); evicted and waiting for the MTM stage
  (``leaving``); placed in a segment (``mtm``); its persona job out (``persona_pending``) or
  applied (``persona``), from the MTM stage's heat state. With the embedded journal, an
  accepted turn without a page yet is ``accepted``;
- the user's recent dead letters, from the small per-stage rings `adapters/history.py`
  keeps (written only when a record is dead-lettered).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from adapters import history
from adapters.deps import Deps
from adapters.journal import Journal
from adapters.ports import PAGES
from adapters.repository import HEAT_DOC
from memory.mtm import MidTermState

STAGES_BY_PLACE = {
    "accepted": [],
    "stm": ["chain", "stm"],
    "leaving": ["chain", "stm"],
    "mtm": ["chain", "stm", "mtm"],
    "persona_pending": ["chain", "stm", "mtm"],
    "persona": ["chain", "stm", "mtm", "persona"],
}


async def user_history(deps: Deps, journal: Journal, user_id: str, limit: int) -> dict[str, Any]:
    """The user's ``limit`` latest turns (newest first) and noted dead letters."""
    store = deps.repo.store
    points, heat_doc, dead_letters, journaled = await asyncio.gather(
        store.scroll(PAGES, user_id),
        deps.repo.load_doc(user_id, HEAT_DOC),
        history.dead_letters(deps.repo, user_id),
        journal.pending(),
    )
    state = MidTermState.from_dict(heat_doc)
    transferred = {p for s in state.segments.values() for p in s.transferred}
    pending = {p for s in state.segments.values() if s.persona_pending for p in s.page_ids}
    turns = []
    for point in points:
        payload = point.payload
        place = str(payload.get("tier"))
        if place == "mtm" and point.id in transferred:
            place = "persona"
        elif place == "mtm" and point.id in pending:
            place = "persona_pending"
        turns.append(_turn(payload, place))
    stored = {point.id for point in points}
    for entry in journaled:
        if entry.user_id == user_id and entry.page_id not in stored:
            turn_id = orjson.loads(entry.value).get("turn_id")
            turns.append({"turn_id": turn_id, "page_id": entry.page_id, "seq": None,
                          "timestamp": None, "place": "accepted", "segment_id": None})  # fmt: skip
    # Accepted turns have no sequence number yet: they are the newest.
    turns.sort(key=lambda t: float("inf") if t["seq"] is None else t["seq"], reverse=True)
    latest = turns[:limit]
    for turn in latest:
        turn["stages"] = STAGES_BY_PLACE.get(turn["place"], [])
    return {"user_id": user_id, "turns": latest, "dead_letters": dead_letters[-limit:]}


def _turn(payload: dict[str, Any], place: str) -> dict[str, Any]:
    return {
        "turn_id": payload.get("turn_id"),
        "page_id": payload.get("page_id"),
        "seq": int(payload.get("seq", 0)),
        "timestamp": payload.get("timestamp"),
        "place": place,
        "segment_id": payload.get("segment_id"),
    }


def empty_history(user_id: str) -> dict[str, Any]:
    return {"user_id": user_id, "turns": [], "dead_letters": []}
