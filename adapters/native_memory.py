"""Handing memory that glibc keeps after frees back to the OS (``malloc_trim``), and fewer
malloc arenas to keep it in.

glibc returns freed memory to the OS only from the top of an arena; what is freed in the
middle stays in the process's anonymous RSS. Native code in the worker (Qdrant Edge's Rust
engine and its threads, sqlite, the HTTP clients) allocates and frees in every turn, each
thread in an arena of its own, and a broker roll frees a whole worker. MiniLM trims after each
batch; without MiniLM (``MEMORYOS_EMBEDDER=openai``) nothing else would. So the stack trims
every ``TRIM_INTERVAL_S`` whatever the embedder, and asks glibc for ``ARENAS`` arenas at start
(the soaks behind both are in docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
from typing import Any

log = logging.getLogger(__name__)


def _load_libc() -> Any:
    with contextlib.suppress(OSError):
        libc = ctypes.CDLL("libc.so.6")  # CDLL releases the GIL during the call
        if hasattr(libc, "malloc_trim"):
            return libc
    return None  # not glibc (musl, macOS): nothing to trim


_LIBC = _load_libc()


def release_freed_memory() -> None:
    """Give the free pages of every glibc arena back to the OS; a no-op without glibc."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


M_ARENA_MAX = -8  # glibc's malloc.h: the most arenas malloc will create
ARENA_TEST = 8  # 64-bit glibc: past this many arenas it settles its limit for good


class _File(ctypes.Structure):
    pass  # C's FILE, only ever handled by pointer


def _declare(libc: Any) -> None:
    libc.fopen.restype = ctypes.POINTER(_File)
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.POINTER(_File)]
    libc.fclose.argtypes = [ctypes.POINTER(_File)]


if _LIBC is not None and hasattr(_LIBC, "malloc_info"):
    _declare(_LIBC)


ARENAS = 2  # each arena keeps its own free memory idle: fewer arenas keep less
TRIM_INTERVAL_S = 5.0  # how often memory freed by native code goes back to the OS


def limit_arenas(count: int = ARENAS) -> bool:
    """Let glibc create at most ``count`` arenas; 0 leaves its default. True if it holds.

    glibc gives new threads arenas of their own, up to eight per core; each keeps its own
    free chunks, so memory freed in one cannot serve another and the process keeps the sum.
    glibc settles its limit once the process has more than ``ARENA_TEST`` arenas (a static
    inside ``arena_get2``): a later ``mallopt`` is taken and then ignored. So it must come
    before the process's threads start (``memoryos``'s main does it first), and a process
    past that gets a warning and False. A valid ``MALLOC_ARENA_MAX`` (or the tunable) in the
    environment is left to glibc. Never raises: it is tuning, not a reason not to start.
    """
    if _LIBC is None or count <= 0 or not hasattr(_LIBC, "mallopt"):
        return False
    if _operator_limit():
        return False  # the operator's own setting, read by glibc at the first allocation, wins
    made = malloc_arenas() or 0
    if made > ARENA_TEST:
        log.warning(
            "glibc has made %d malloc arenas already: a limit of %d may not hold in this "
            "process (set MALLOC_ARENA_MAX in its environment instead)",
            made,
            count,
        )
        return False
    return bool(_LIBC.mallopt(M_ARENA_MAX, count))


def _operator_limit() -> bool:
    value = os.environ.get("MALLOC_ARENA_MAX", "").strip()
    if value.isdigit() and int(value) > 0:  # glibc ignores 0 and what is not a number
        return True
    return "arena_max" in os.environ.get("GLIBC_TUNABLES", "")


def malloc_arenas() -> int | None:
    """How many arenas glibc has made in this process (``malloc_info``); None without glibc."""
    if _LIBC is None or not hasattr(_LIBC, "malloc_info"):
        return None
    import tempfile  # only the soak's sampling and the limit's check ask

    try:  # no writable temporary folder (a read-only container): no count, no failure
        with tempfile.NamedTemporaryFile(suffix=".xml") as sink:
            stream = _LIBC.fopen(sink.name.encode(), b"w")
            if not stream:
                return None
            try:
                _LIBC.malloc_info(0, stream)
            finally:
                _LIBC.fclose(stream)
            return sink.read().count(b"<heap nr=")
    except OSError:
        return None


async def release_forever(interval_s: float = TRIM_INTERVAL_S) -> None:
    """Trim every ``interval_s`` until cancelled.

    The trim runs in a worker thread: it walks every arena under its lock, and the event loop
    need not wait for that. A failed trim is logged and the next one still runs.
    """
    while True:
        await asyncio.sleep(interval_s)
        try:
            await asyncio.to_thread(release_freed_memory)
        except Exception:  # never let memory housekeeping stop the process
            log.warning("malloc_trim failed", exc_info=True)
