"""`MEMORYOS_MALLOC_ARENA_MAX`: glibc makes no more arenas than it allows (issue 18).

Each case runs in a fresh interpreter: arenas once made stay for the process's life.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from adapters.settings import Settings

pytestmark = pytest.mark.skipif(os.uname().sysname != "Linux", reason="glibc's malloc only")

# Threads that allocate at once without the GIL (zlib lets it go), as Edge's, ONNX Runtime's
# and sqlite's threads do: each meets a locked arena and glibc makes it another.
PROGRAM = """
import sys, threading, zlib
from adapters.native_memory import limit_arenas, malloc_arenas
limit_arenas(int(sys.argv[1]))
data = bytes(range(256)) * 4000
def work():
    for _ in range(200):
        zlib.decompress(zlib.compress(data, 6))
threads = [threading.Thread(target=work) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(malloc_arenas())
"""


def arenas_made(limit: int) -> int:
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(limit)],
        capture_output=True, text=True, timeout=120, check=True,
        env={**os.environ, "MALLOC_ARENA_MAX": ""},  # the test decides, not the caller's shell
    )  # fmt: skip
    return int(result.stdout.strip())


def test_the_limit_bounds_the_arenas_threads_make() -> None:
    assert arenas_made(0) > 2, "without a limit, threads that meet a locked arena get their own"
    assert arenas_made(2) <= 2


def test_the_default_is_two_arenas() -> None:
    assert Settings().malloc_arena_max == 2
