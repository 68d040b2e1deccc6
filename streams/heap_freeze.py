"""The start-up heap kept out of Python's full garbage collections (``gc.freeze``).

A started process holds a few hundred thousand long-lived objects (the modules, torch, ONNX
Runtime's bindings, Faust's services) that a full (generation 2) collection walks every time
one runs, on the event loop, while retrieves wait. ``freeze`` moves everything alive after
start-up to a permanent generation that collections skip; ``release`` at stop hands it back.
What start-up leaves as cyclic garbage is collected first. An object frozen here that becomes
cyclic garbage later waits until it is handed back (refcounting still frees everything not in
a cycle), with whatever it points to; a broker roll replaces the whole worker, so the stack
hands the heap back when the old worker has stopped and freezes again once the new one runs.

The frozen generation is one per process: stacks sharing a process (a worker and a service
replica in a test) each hold the freeze, and it is handed back when the last lets it go.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)

_holders = 0  # stacks of this process holding the freeze


def freeze() -> int:
    """Hold the freeze: collect, then freeze what is alive; how many objects are frozen."""
    global _holders
    _holders += 1
    return _collect_and_freeze()


def release() -> None:
    """Let the freeze go; the heap is handed back when no stack holds it."""
    global _holders
    _holders = max(0, _holders - 1)
    if _holders == 0:
        gc.unfreeze()


def thaw() -> None:
    """Hand the heap back for a while (a roll replaces the worker), the holders kept."""
    gc.unfreeze()


def refreeze() -> int:
    """After ``thaw``: collect what became garbage, and freeze what is alive now."""
    return _collect_and_freeze() if _holders else 0


def _collect_and_freeze() -> int:
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("heap frozen: %d objects kept out of full collections", frozen)
    return frozen
