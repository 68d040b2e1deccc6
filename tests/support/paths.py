"""Where the project's files are, for tests that read them or start a child process there."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # tests/support/paths.py -> the project root
