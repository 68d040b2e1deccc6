"""How long a thread may hold Python's GIL while another waits for it (``sys.setswitchinterval``).

The embedded process runs the event loop (HTTP, store reads, the worker's stages) beside the
embedder's threads, which drop the GIL inside the model and need it back for a few lines after.
With Python's default of 5 ms, each such thread waits up to 5 ms for the busy loop to hand the
GIL over, so under concurrent retrieves the query embeddings came back late and the loop sat
idle meanwhile. Measured with ``python -m evaluation.retrieve_load --users 30 --turns 300
--callers 1,16`` (README, Results, issue 19): 16 callers 97-99 retrieves/s at 0.5 ms against
74-78 at Python's 5 ms, alternately, one session.
"""

from __future__ import annotations

import sys


def set_switch_interval(ms: float) -> None:
    """Let a waiting thread have the GIL after ``ms`` milliseconds, process-wide; 0 leaves
    the process's interval as it is."""
    if ms > 0:
        sys.setswitchinterval(ms / 1000)
