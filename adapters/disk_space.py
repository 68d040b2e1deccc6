"""Free space under the data folder, watched so that a full disk is refused, not crashed into.

Qdrant Edge maps its write-ahead log into memory (32 MiB segments per collection): on a full
disk, touching a page of that map kills the process with SIGBUS, before any error could be
logged. SQLite (the journal) fails cleanly, but a turn it refuses is one the store could not
have taken either. So writes are refused while the folder's free space is under a floor that
leaves room for what is already accepted: the backlog the stages still write, a new WAL
segment per collection and a flush.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from adapters.settings import Settings
from schemas.errors import DiskFull

MIB = 1 << 20


def free_bytes_of(path: Path) -> int:
    """Bytes an unprivileged writer may still use on the file system that holds (or will hold)
    ``path``: its nearest existing folder's."""
    while not path.exists() and path != path.parent:
        path = path.parent
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


@dataclass
class DiskGuard:
    """Refuses writes under ``floor_bytes`` free; each check is one ``statvfs`` (microseconds),
    so it runs on every write instead of sampling and missing a fast fill."""

    path: Path
    floor_bytes: int
    free_of: Callable[[Path], int] = free_bytes_of
    on_reading: Callable[[int], None] | None = None  # the metric's setter

    def free_bytes(self) -> int:
        free = self.free_of(self.path)
        if self.on_reading is not None:
            self.on_reading(free)
        return free

    def room(self) -> bool:
        return self.free_bytes() >= self.floor_bytes

    def check(self) -> None:
        """Raise ``DiskFull`` (HTTP 503) while the folder is under its floor."""
        free = self.free_bytes()
        if free < self.floor_bytes:
            raise DiskFull(self.shortfall(free))

    def shortfall(self, free: int) -> str:
        return (
            f"the data folder {self.path} has {free // MIB} MiB free, under the "
            f"{self.floor_bytes // MIB} MiB that MEMORYOS_MIN_FREE_MB keeps for the store and the "
            "journal; free some space (writes resume by themselves) or move MEMORYOS_DATA_DIR"
        )


class NoGuard:
    """For a process that keeps nothing on a local disk (a service against a Qdrant server)."""

    def free_bytes(self) -> int:
        return -1

    def room(self) -> bool:
        return True

    def check(self) -> None:
        return None


def disk_guard(settings: Settings, role: str) -> DiskGuard | NoGuard:
    """The guard of a process that writes under the data folder: the embedded stack (journal
    and Edge store), or any role given the Edge store or the journal."""
    local = role == "all" or settings.store == "edge" or settings.journal == "on"
    if not local:
        return NoGuard()
    return DiskGuard(settings.data_dir, settings.min_free_mb * MIB)
