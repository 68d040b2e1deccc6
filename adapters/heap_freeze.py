"""The start-up heap kept out of Python's full garbage collections (``gc.freeze``).

A started process holds a few hundred thousand long-lived objects (the modules, torch, ONNX
Runtime's bindings, Faust's services) that a full (generation 2) collection walks every time
one runs, on the event loop, while retrieves wait. ``freeze`` moves everything alive after
start-up to a permanent generation that collections skip; ``unfreeze`` at stop hands it
back. What start-up leaves as cyclic garbage is collected first. An object frozen here that
becomes cyclic garbage later waits for ``unfreeze`` (refcounting still frees everything not in
a cycle); a broker roll replaces the whole worker, so the stack unfreezes and freezes again
after each roll.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)


def freeze() -> int:
    """Collect, then freeze what is alive; how many objects are frozen in all."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("start-up heap frozen: %d objects kept out of full collections", frozen)
    return frozen


def unfreeze() -> None:
    gc.unfreeze()
