"""`memoryos doctor` tells the truth about each backend: the default embedded set-up, a working
OpenAI-compatible endpoint and a failing one."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from adapters.journal import SqliteJournal, journal_path
from adapters.settings import load_settings
from adapters.stores.edge import EdgeStore
from evaluation.fake_openai import FakeOpenAI, Fault
from streams.broker import EmbeddedBroker, free_port
from streams.cli import main
from streams.commands.doctor import diagnose
from tests.support.fixtures import settings_for


async def test_default_embedded_configuration_passes(tmp_path: Path) -> None:
    report = await diagnose(load_settings(data_dir=tmp_path), broker=None)
    assert report["llm"] == report["llm"] | {"backend": "offline", "ok": True}
    assert report["embedder"]["ok"] is True
    assert report["embedder"]["dim"] == 384
    assert report["store"]["ok"] is True
    assert report["broker"]["ok"] is None


async def test_working_openai_endpoint_passes(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    settings = settings_for(fake_openai, data_dir=tmp_path, embedding_dim=384)
    report = await diagnose(settings, broker=None)
    assert report["llm"]["ok"] is True, report
    assert report["embedder"]["ok"] is True, report
    assert fake_openai.calls("continuity"), "the LLM was really called"


async def test_failing_openai_endpoint_fails_with_a_reason(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.inject(*[Fault.server_error(500)] * 20)
    settings = settings_for(fake_openai, data_dir=tmp_path, llm_max_retries=1, embedder="minilm")
    report = await diagnose(settings, broker=None)
    assert report["llm"]["ok"] is False
    assert "LLMError" in report["llm"]["detail"]
    assert report["embedder"]["ok"] is True


async def test_unreachable_broker_fails(tmp_path: Path) -> None:
    report = await diagnose(load_settings(data_dir=tmp_path), f"kafka://127.0.0.1:{free_port()}")
    assert report["broker"]["ok"] is False


async def test_a_broker_with_a_store_each_process_keeps_for_itself_fails(tmp_path: Path) -> None:
    kafka = f"kafka://127.0.0.1:{free_port()}"
    report = await diagnose(load_settings(data_dir=tmp_path), kafka)
    assert report["roles"]["ok"] is False
    assert "MEMORYOS_STORE=qdrant" in report["roles"]["detail"]
    assert (await diagnose(load_settings(data_dir=tmp_path), None))["roles"]["ok"] is None


@pytest.mark.integration
def test_cli_json_and_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with EmbeddedBroker(free_port()) as broker:
        code = main(["doctor", "--json", "--broker", broker.url])
    report = orjson.loads(capsys.readouterr().out)
    assert code == 1  # a Kafka broker with the default, unshared store: roles fails, alone
    assert set(report) == {"roles", "llm", "embedder", "store", "journal", "disk", "broker"}
    assert [part for part, result in report.items() if result["ok"] is False] == ["roles"]
    assert report["broker"] == report["broker"] | {"url": broker.url, "ok": True}


async def test_doctor_checks_the_real_data_folder_and_fails_on_each_fault(tmp_path: Path) -> None:
    """A damaged store log, a journal that is not a database, a disk under its floor: each
    fails doctor, as each would fail (or silently hurt) `memoryos up` on that folder."""
    settings = load_settings(data_dir=tmp_path)
    store = EdgeStore(tmp_path / "qdrant")
    await store.ensure_collections(384)
    await store.close()
    SqliteJournal(journal_path(settings)).close()
    report = await diagnose(settings, broker=None)
    assert [report[part]["ok"] for part in ("store", "journal", "disk")] == [True, True, True]
    assert str(tmp_path / "qdrant") in report["store"]["backend"]

    with (tmp_path / "qdrant" / "pages" / "wal" / "open-1").open("r+b") as log:
        log.write(b"\xab" * 4096)
    journal_path(settings).write_bytes(b"not a database at all" * 100)
    report = await diagnose(settings, broker=None)
    assert report["store"]["ok"] is False
    assert "write-ahead log is damaged" in report["store"]["detail"]
    report = await diagnose(settings.model_copy(update={"min_free_mb": 1 << 30}), broker=None)
    assert report["store"]["ok"] is None  # not opened under the floor: it would map more
    assert report["journal"]["ok"] is False
    assert "not a database" in report["journal"]["detail"]
    assert report["disk"]["ok"] is False
    assert "MEMORYOS_MIN_FREE_MB" in report["disk"]["detail"]


async def test_doctor_leaves_a_folder_a_running_stack_holds_to_its_readyz(tmp_path: Path) -> None:
    held = EdgeStore(tmp_path / "qdrant")
    await held.ensure_collections(384)
    try:
        report = await diagnose(load_settings(data_dir=tmp_path), broker=None)
    finally:
        await held.close()
    assert report["store"]["ok"] is None
    assert "running stack" in report["store"]["detail"]
