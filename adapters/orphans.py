"""Children that die with their parent, even when the parent is killed with SIGKILL."""

from __future__ import annotations

import contextlib
import ctypes
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """Ask Linux to send ``signum`` to this process when its parent dies, even by kill -9 (a
    child that is stopped or busy notices nothing else). Elsewhere, nothing."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signum)
