"""`memoryos keys` on a stopped stack's data folder: a key printed once, only its hash kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.cli import main


def test_keys_are_made_on_a_stopped_stacks_data_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMORYOS_API_KEYS", raising=False)
    argv = ["keys", "create", "--tenant", "acme", "--scopes", "read,write", "--data-dir"]
    assert main([*argv, str(tmp_path), "--name", "bot"]) == 0
    key = capsys.readouterr().out.strip().splitlines()[-1]
    assert key.startswith("mos_")
    assert main(["keys", "list", "--data-dir", str(tmp_path)]) == 0
    listed = capsys.readouterr().out
    assert "acme" in listed
    assert "read,write" in listed
    assert "live" in listed
    assert key[21:] not in listed
    assert key not in listed
    stored = b"".join(path.read_bytes() for path in tmp_path.rglob("*") if path.is_file())
    assert key[21:].encode() not in stored, "only the hash is kept"
    assert main(["keys", "create", "--scopes", "read,delete", "--data-dir", str(tmp_path)]) == 2
    assert "scopes must be" in capsys.readouterr().err
