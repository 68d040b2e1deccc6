"""How long a thread may hold Python's GIL while another waits for it (``sys.setswitchinterval``).

The embedded process runs the event loop (HTTP, store reads, the worker's stages) beside
threads that drop the GIL inside native code (the store's searches, the model when it runs in a
thread) and need it back for a few lines after. At Python's default of 5 ms each such thread
waits up to that long for the busy loop to hand the GIL over, and the loop then waits for its
result; a shorter interval hands it over sooner (docs/benchmarks.md).
"""

from __future__ import annotations

import sys

SWITCH_INTERVAL_MS = 0.5


def set_switch_interval(ms: float = SWITCH_INTERVAL_MS) -> None:
    """Let a waiting thread have the GIL after ``ms`` milliseconds, process-wide."""
    sys.setswitchinterval(ms / 1000)
