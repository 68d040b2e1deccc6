"""The forget marker's authorisation: only a DELETE that stored a tombstone can erase a user."""

from __future__ import annotations

from adapters.repository import MemoryRepository
from schemas.errors import UnauthorizedForget
from schemas.records import ForgetUser

# Stores may keep fewer digits of a float than Python (Qdrant Edge keeps about 15), so two
# times of one DELETE compare equal within a millisecond; DELETE times are in milliseconds.
SAME_DELETE_S = 1e-3


async def check_marker(repo: MemoryRepository, marker: ForgetUser) -> bool:
    """Whether a stage acts on ``marker``.

    Refused (raises) without its DELETE's tombstone. Skipped (False) when a later DELETE's
    marker follows it anyway, and when its DELETE is complete (the last stage has seen it): a
    marker delivered again (an offset replay, a DLQ replay) must not purge what the user has
    said since.
    """
    tombstone = await repo.tombstone(marker.user_id)
    if tombstone is None or marker.at > tombstone[0] + SAME_DELETE_S:
        raise UnauthorizedForget(
            f"no DELETE of {marker.user_id!r} at {marker.at}: forget marker refused",
            field="at",
        )
    at, still_open = tombstone
    return still_open and marker.at >= at - SAME_DELETE_S
