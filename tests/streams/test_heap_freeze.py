"""The frozen generation is one per process: held by each stack, handed back by the last."""

from __future__ import annotations

import gc

import pytest

from streams import heap_freeze


def test_the_heap_stays_frozen_until_the_last_holder_lets_it_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(heap_freeze, "_holders", 0)  # whatever ran before in this process
    gc.unfreeze()
    try:
        assert heap_freeze.freeze() > 0  # a worker
        heap_freeze.freeze()  # a service replica in the same process
        heap_freeze.release()  # the replica stops
        assert gc.get_freeze_count() > 0, "the worker still holds it"
        heap_freeze.thaw()  # the worker's roll
        assert gc.get_freeze_count() == 0
        assert heap_freeze.refreeze() > 0
        heap_freeze.release()
        assert gc.get_freeze_count() == 0
        assert heap_freeze.refreeze() == 0, "nobody holds it: a late roll freezes nothing"
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
