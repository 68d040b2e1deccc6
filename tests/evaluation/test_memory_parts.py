"""The soak's memory breakdown: mapped data files, glibc's heap, and the heap profile."""

from __future__ import annotations

import inspect
import mmap
import os
import tracemalloc
from pathlib import Path
from types import SimpleNamespace

import pytest

from evaluation.memory_parts import (
    HeapProfile,
    heap_parts_mb,
    mapped_under_mb,
    memory_parts,
    parse_pymalloc_stats,
    pymalloc_parts_mb,
)


def test_pages_of_a_mapped_data_file_count_under_the_data_folder(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "segment.bin"
    path.write_bytes(b"\1" * (8 * 2**20))
    before = mapped_under_mb(os.getpid(), data)
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as view:
        touched = sum(view[offset] for offset in range(0, len(view), 4096))  # fault every page
        assert touched == 2048
        assert mapped_under_mb(os.getpid(), data) - before >= 7.9
        assert mapped_under_mb(os.getpid(), tmp_path / "elsewhere") == 0.0
        assert mapped_under_mb(os.getpid(), tmp_path / "dat") == 0.0, "a prefix, not a folder"


def test_the_heap_parts_name_glibcs_heap_and_pythons_blocks() -> None:
    parts = heap_parts_mb()
    assert parts["py_blocks_k"] > 0
    if os.uname().sysname == "Linux":  # glibc 2.33+: every machine we run on
        assert parts["malloc_in_use_mb"] > 0
        assert "malloc_free_mb" in parts
        assert parts["malloc_arenas"] >= 1


def test_pythons_allocator_is_split_into_in_use_and_free_and_follows_what_is_kept() -> None:
    before = pymalloc_parts_mb()
    kept = [str(i) * 3 for i in range(200_000)]  # small objects: pymalloc's, not glibc's
    during = pymalloc_parts_mb()
    del kept[::2]  # half freed in place: their arenas stay, the blocks become free
    after = pymalloc_parts_mb()
    assert during["pymalloc_in_use_mb"] - before["pymalloc_in_use_mb"] > 8
    assert during["pymalloc_arenas_mb"] >= during["pymalloc_in_use_mb"]
    assert after["pymalloc_free_mb"] - during["pymalloc_free_mb"] > 4
    assert after["pymalloc_in_use_mb"] < during["pymalloc_in_use_mb"]
    assert len(kept) == 100_000


def test_the_pymalloc_stats_are_read_from_cpythons_text() -> None:
    text = (
        "# arenas allocated current           =                   25\n"
        "25 arenas * 1048576 bytes/arena    =           26,214,400\n"
        "# bytes in allocated blocks        =           13,401,680\n"
        "# bytes in available blocks        =           11,510,992\n"
        "61 unused pools * 16384 bytes      =              999,424\n"
    )
    assert parse_pymalloc_stats(text) == {
        "pymalloc_arenas_mb": 25.0,
        "pymalloc_in_use_mb": 12.8,
        "pymalloc_free_mb": 11.9,
    }
    assert parse_pymalloc_stats("no stats here") == {}


def test_another_process_gets_no_heap_parts(tmp_path: Path) -> None:
    parts = memory_parts(1, tmp_path)
    assert "py_blocks_k" not in parts
    assert "rss_data_files_mb" in parts


def test_the_heap_profile_names_the_line_that_kept_memory() -> None:
    profile = HeapProfile(top=5)
    profile.start()
    try:
        profile.mark()
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        kept = [bytes(1000) + bytes([i % 256]) for i in range(3000)]  # about 3 MB kept
        profile.finish()
    finally:
        if tracemalloc.is_tracing():  # finish stops it; a failure before must not leave it on
            tracemalloc.stop()
    assert len(kept) == 3000
    top = profile.growth[0]
    assert top["where"] == f"{__file__}:{line}"
    assert top["grew_kb"] == pytest.approx(3000 * 1033 / 1024, rel=0.1)
    assert top["blocks_grew"] >= 3000


def test_the_soak_samples_its_bounded_caches_under_the_metrics_wrapper() -> None:
    from evaluation.bench_soak import cache_entries_k

    store = SimpleNamespace(inner=SimpleNamespace(cached_field_points=1500))
    stack = SimpleNamespace(
        service=SimpleNamespace(term_counts=[0] * 2500), deps=SimpleNamespace(store=store)
    )
    caches = cache_entries_k(stack)  # type: ignore[arg-type]
    assert caches["cache_term_counts_k"] == 2.5
    assert caches["cache_field_points_k"] == 1.5
    assert {"cache_moments_k", "cache_stems_k", "cache_phrases_k"} <= set(caches)
