"""The forget marker's authorisation: only a DELETE that stored a tombstone can erase a user."""

from __future__ import annotations

from adapters.repository import MemoryRepository
from schemas.errors import UnauthorizedForget
from schemas.records import ForgetUser


async def check_marker(repo: MemoryRepository, marker: ForgetUser) -> bool:
    """Whether to act on ``marker``: refused without its DELETE's tombstone, skipped (False)
    when a later DELETE's marker follows it anyway."""
    tombstone = await repo.tombstone(marker.user_id)
    if tombstone is None or marker.at > tombstone[0]:
        raise UnauthorizedForget(
            f"no DELETE of {marker.user_id!r} at {marker.at}: forget marker refused",
            field="at",
        )
    return marker.at == tombstone[0]
