"""The arena limit: glibc makes no more arenas than the stack allows.

Each case runs in a fresh interpreter: arenas once made stay for the process's life.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import tempfile

import pytest

from adapters import native_memory

pytestmark = [
    pytest.mark.skipif(native_memory._LIBC is None, reason="glibc's malloc only"),
    pytest.mark.slow,  # each case starts an interpreter of its own
]

# Threads that allocate at once without the GIL (zlib lets it go), as Edge's, ONNX Runtime's
# and sqlite's threads do: each meets a locked arena and glibc makes it another.
PROGRAM = """
import sys, threading, time, zlib
from adapters.native_memory import limit_arenas, malloc_arenas
limit, late = int(sys.argv[1]), sys.argv[2] == "late"
data = bytes(range(256)) * 4000
rounds = [0] * 10
def work(index):
    while rounds[index] < 200:
        zlib.decompress(zlib.compress(data, 6))
        rounds[index] += 1
threads = [threading.Thread(target=work, args=(i,)) for i in range(10)]
if not late:
    took = limit_arenas(limit)
for thread in threads:
    thread.start()
if late:
    while min(rounds) < 5:  # every thread has allocated: their arenas exist
        time.sleep(0.01)
    took = limit_arenas(limit)
for thread in threads:
    thread.join()
print(malloc_arenas(), took)
"""


def arenas_made(limit: int, when: str = "first", **extra: str) -> tuple[int, bool]:
    env = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")}
    env.update(extra)
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(limit), when],
        capture_output=True, text=True, timeout=120, check=True, env=env,
    )  # fmt: skip
    count, took = result.stdout.split()
    return int(count), took == "True"


def test_the_limit_bounds_the_arenas_threads_make() -> None:
    assert arenas_made(0)[0] > 2, "without a limit, new threads get arenas of their own"
    count, took = arenas_made(2)
    assert count <= 2
    assert took is True


def test_a_limit_set_after_the_threads_made_their_arenas_says_it_may_not_hold() -> None:
    count, took = arenas_made(2, "late")
    assert count > 2
    assert took is False


def test_the_stack_asks_for_two_arenas() -> None:
    assert native_memory.ARENAS == 2
    assert inspect.signature(native_memory.limit_arenas).parameters["count"].default == 2


def test_malloc_arena_max_in_the_environment_is_left_to_glibc() -> None:
    count, took = arenas_made(2, MALLOC_ARENA_MAX="4")
    assert took is False, "the operator's own setting wins"
    assert 2 < count <= 4


def test_no_writable_temporary_folder_gives_no_count_and_no_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read-only container: the arena count is only tuning, so start-up goes on."""
    monkeypatch.setattr(tempfile, "tempdir", "/proc/self")  # nothing can be created there
    assert native_memory.malloc_arenas() is None
    native_memory.limit_arenas(2)  # must not raise


def test_an_invalid_malloc_arena_max_does_not_switch_the_limit_off() -> None:
    count, took = arenas_made(2, MALLOC_ARENA_MAX="0")  # glibc ignores 0
    assert took is True
    assert count <= 2
