"""A small tmpfs of our own, to fill a disk for real: the tests run as root (CI does too)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.disk_space import free_bytes_of as free_bytes

MIB = 1 << 20


@contextlib.contextmanager
def mounted_tmpfs(path: Path, size_mb: int) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    mount = ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)]
    done = subprocess.run(mount, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill_until(path: Path, free_left: int) -> Path:
    """Write a filler file until only ``free_left`` bytes are free (tmpfs: no sparse tricks)."""
    filler = path / "filler.bin"
    block = b"\0" * MIB
    with filler.open("ab") as out:
        while free_bytes(path) - MIB >= free_left:
            out.write(block)
            out.flush()
            os.fsync(out.fileno())
    return filler
