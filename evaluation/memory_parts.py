"""Where a process's resident memory is, for the soak: which part grows per turn.

RSS alone cannot tell a leak from the store's growth. The parts sampled here:

- ``rss_anon_mb`` / ``rss_file_mb``: anonymous memory (heaps, native buffers) against pages of
  mapped files (``/proc/PID/status``);
- ``rss_data_files_mb``: of the file-backed part, the pages of files under the data folder
  (the store's mapped segments, the journal): the store, not the process, and clean pages the
  kernel can drop under pressure (``/proc/PID/smaps``);
- ``malloc_in_use_mb`` / ``malloc_free_mb``: glibc's heap, in use and free (``mallinfo2``:
  Rust's and sqlite's allocations, Python's objects over 512 bytes). Free chunks stay counted
  after ``malloc_trim`` hands their pages back, so the free figure is not all resident;
- ``malloc_arenas``: how many arenas glibc has made (the stack bounds it);
- ``py_blocks_k``: Python's live allocated blocks in thousands (``sys.getallocatedblocks``);
- ``pymalloc_arenas_mb`` / ``pymalloc_in_use_mb`` / ``pymalloc_free_mb``: Python's own
  allocator (objects up to 512 bytes, in 1 MiB arenas it maps itself, outside glibc's heap):
  what its arenas hold, what live blocks use, and what is free inside them (free blocks and
  unused pools). An arena is handed back only when every block in it is free, so the free
  part is what fragmentation keeps (``sys._debugmallocstats``);
- ``traced_mb``: bytes Python allocated since tracing began, when the soak traces the heap.

A heap profile (:class:`HeapProfile`) compares two ``tracemalloc`` snapshots and names the
source lines whose memory grew most between them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import tempfile
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.native_memory import malloc_arenas

MB = 2**20


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
            "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def _mallinfo2() -> Any:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6")
        function = libc.mallinfo2  # glibc 2.33 and later
        function.restype = _Mallinfo2
        return function
    return None


_MALLINFO2 = _mallinfo2()


def status_parts_mb(pid: int) -> dict[str, float]:
    """Anonymous and file-backed RSS from ``/proc/PID/status``; zeros when unreadable."""
    parts_mb = {"rss_anon_mb": 0.0, "rss_file_mb": 0.0}
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return parts_mb
    for line in status.splitlines():
        name, _, value = line.partition(":")
        if name in ("RssAnon", "RssFile"):
            parts_mb[f"rss_{name[3:].lower()}_mb"] = round(int(value.split()[0]) / 1024, 1)
    return parts_mb


def mapped_under_mb(pid: int, folder: Path) -> float:
    """Resident pages of files under ``folder`` mapped by the process (``smaps``), in MB."""
    prefix = str(folder.resolve()) + os.sep  # not a sibling folder sharing the name's start
    total_kb, inside = 0, False
    try:
        smaps = Path(f"/proc/{pid}/smaps").read_text()
    except OSError:
        return 0.0
    for line in smaps.splitlines():
        head = line.split(None, 5)
        if head and "-" in head[0] and len(head) >= 5:  # a mapping's header line
            inside = len(head) == 6 and head[5].startswith(prefix)
        elif inside and line.startswith("Rss:"):
            total_kb += int(line.split()[1])
    return round(total_kb / 1024, 1)


# the lines of ``sys._debugmallocstats`` read, and the part each one gives
_PYMALLOC_LINES = {
    "bytes/arena": "arenas",  # "N arenas * 1048576 bytes/arena = total bytes"
    "# bytes in allocated blocks": "in_use",
    "# bytes in available blocks": "free_blocks",
    "unused pools *": "free_pools",
}


def parse_pymalloc_stats(text: str) -> dict[str, float]:
    """``pymalloc_*_mb`` from the text ``sys._debugmallocstats`` writes; empty if absent."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition("=")
        for start, part in _PYMALLOC_LINES.items():
            if start in name and value.strip():
                found[part] = int(value.strip().replace(",", ""))
    if not {"arenas", "in_use", "free_blocks"} <= found.keys():
        return {}
    return {
        "pymalloc_arenas_mb": round(found["arenas"] / MB, 1),
        "pymalloc_in_use_mb": round(found["in_use"] / MB, 1),
        "pymalloc_free_mb": round((found["free_blocks"] + found.get("free_pools", 0)) / MB, 1),
    }


def pymalloc_parts_mb() -> dict[str, float]:
    """Python's allocator's arenas, in use and free; empty where CPython gives no stats.

    ``sys._debugmallocstats`` writes to the C-level stderr only, so file descriptor 2 points
    at a temporary file for the call: another thread's stderr output in that instant lands
    there too and is lost, which a soak's sampling accepts.
    """
    if not hasattr(sys, "_debugmallocstats"):
        return {}
    sys.stderr.flush()
    with tempfile.TemporaryFile() as sink:
        try:
            saved = os.dup(2)
        except OSError:  # no stderr at all (a daemon): nothing to point back
            return {}
        try:
            os.dup2(sink.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        sink.seek(0)
        return parse_pymalloc_stats(sink.read().decode(errors="replace"))


def heap_parts_mb() -> dict[str, float]:
    """This process's glibc heap and Python's block count; empty without glibc 2.33+."""
    parts: dict[str, float] = {"py_blocks_k": round(sys.getallocatedblocks() / 1000, 1)}
    if _MALLINFO2 is not None:
        info = _MALLINFO2()
        parts["malloc_in_use_mb"] = round((info.uordblks + info.hblkhd) / MB, 1)
        parts["malloc_free_mb"] = round(info.fordblks / MB, 1)
    arenas = malloc_arenas()
    if arenas is not None:
        parts["malloc_arenas"] = arenas
    parts.update(pymalloc_parts_mb())
    if tracemalloc.is_tracing():
        parts["traced_mb"] = round(tracemalloc.get_traced_memory()[0] / MB, 1)
    return parts


def memory_parts(pid: int, data_dir: Path) -> dict[str, float]:
    """Every part above for ``pid``; the heap parts only when ``pid`` is this process."""
    parts = {**status_parts_mb(pid), "rss_data_files_mb": mapped_under_mb(pid, data_dir)}
    if pid == os.getpid():
        parts.update(heap_parts_mb())
    return parts


@dataclass
class HeapProfile:
    """Python's heap by source line after warm-up and at the end; the growth between them.

    One frame per allocation keeps tracing's cost down; the line that allocated is enough to
    name the holder. Only the per-line totals of the first snapshot are kept: the snapshot
    itself, held to the end, put a step of about 25 MB into the anonymous memory it measures.
    """

    top: int = 25
    _first: dict[str, tuple[int, int]] | None = None
    growth: list[dict[str, Any]] = field(default_factory=list)

    def start(self) -> None:
        tracemalloc.start(1)

    def mark(self) -> None:
        self._first = self._by_line()

    def finish(self) -> None:
        if self._first is None or not tracemalloc.is_tracing():
            if tracemalloc.is_tracing():  # no mark (a run shorter than half its plan)
                tracemalloc.stop()
            return
        first, last = self._first, self._by_line()
        tracemalloc.stop()
        rows = [
            (where, size - first.get(where, (0, 0))[0], count - first.get(where, (0, 0))[1], size)
            for where, (size, count) in last.items()
        ]
        rows += [(where, -size, -count, 0) for where, (size, count) in first.items()
                 if where not in last]  # fmt: skip
        rows.sort(key=lambda row: abs(row[1]), reverse=True)
        self.growth = [
            {
                "where": where,
                "grew_kb": round(grew / 1024, 1),
                "blocks_grew": blocks,
                "kb_at_end": round(size / 1024, 1),
            }
            for where, grew, blocks, size in rows[: self.top]
        ]

    @staticmethod
    def _by_line() -> dict[str, tuple[int, int]]:
        """Bytes and blocks alive per ``file:line``; the snapshot is dropped at return."""
        ignored = (tracemalloc.__file__, "<unknown>")
        snapshot = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, name) for name in ignored]
        )
        return {
            f"{stat.traceback[0].filename}:{stat.traceback[0].lineno}": (stat.size, stat.count)
            for stat in snapshot.statistics("lineno")
        }
