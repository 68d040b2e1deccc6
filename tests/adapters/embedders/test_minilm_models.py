"""The two MiniLM runtimes: the ONNX export gives torch's vectors, is made once, a graph that
differs from torch is refused, a damaged cache is exported again, and an unusable cache folder
falls back to torch."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adapters.embedders import minilm_models
from adapters.embedders.minilm_models import (
    PROBES,
    OnnxModel,
    TorchModel,
    check,
    graph_path,
    load_model,
)
from adapters.settings import Settings
from schemas.errors import EmbedderError

pytestmark = pytest.mark.slow  # each test exports or loads the model

TEXTS = [
    *PROBES,
    "What did Caroline paint after the art class in May?",
    "A sunset over the lake, with the boats coming in.",
    "order 1234 arrived broken 😞 — can I get a refund?",
]


@pytest.fixture(scope="module")
def torch_model() -> TorchModel:
    return TorchModel()


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache of this module's own: a graph left in the user's cache is not what is tested."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def onnx_model(cache: Path) -> OnnxModel:
    model = load_model("onnx", cache, threads=0)
    assert isinstance(model, OnnxModel)
    return model


@pytest.fixture
def exports(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The graphs exported during a test (each export runs for real)."""
    made: list[Path] = []
    real_export = minilm_models.export

    def counted(graph: Path) -> None:
        made.append(graph)
        real_export(graph)

    monkeypatch.setattr(minilm_models, "export", counted)
    return made


def test_onnx_gives_the_torch_vectors(torch_model: TorchModel, onnx_model: OnnxModel) -> None:
    want = torch_model.encode(TEXTS)
    got = onnx_model.encode(TEXTS)
    assert got.shape == (len(TEXTS), 384)
    assert np.abs(want - got).max() < 1e-5
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # one text alone (no padding) is the same vector as inside a padded batch
    alone = np.vstack([onnx_model.encode([text]) for text in TEXTS])
    assert np.abs(alone - got).max() < 1e-5


def test_many_texts_of_mixed_length_keep_their_order(
    torch_model: TorchModel, onnx_model: OnnxModel
) -> None:
    """More texts than one model call takes: sorted by length, run in chunks, put back."""
    texts = [" ".join(["word"] * ((i * 7) % 23 + 1)) + f" number {i}" for i in range(21)]
    texts += TEXTS
    got = onnx_model.encode(texts)
    assert np.abs(got - torch_model.encode(texts)).max() < 1e-5
    alone = np.vstack([onnx_model.encode([text]) for text in texts])
    assert np.abs(got - alone).max() < 1e-5


def test_the_chunks_of_one_batch_run_on_the_lanes_at_once(
    cache: Path, onnx_model: OnnxModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each chunk runs on one thread; a batch of several chunks spreads them over the lanes
    and gives the vectors one lane gives, in order; a batch of one chunk stays on the
    calling thread (a retrieve's query batch leaves the other core to the event loop)."""
    two = OnnxModel(graph_path(cache), threads=2)
    one = OnnxModel(graph_path(cache), threads=1)
    assert two.session.get_session_options().intra_op_num_threads == 1
    threads: set[str] = set()
    seen_run = OnnxModel._run
    started = threading.Barrier(2, timeout=30)

    def run(self: OnnxModel, encoded: Any) -> Any:
        threads.add(threading.current_thread().name)
        if self is two and len(threads) <= 2 and threading.current_thread().name != "MainThread":
            started.wait()  # both lanes inside a model call at the same time, or this times out
        return seen_run(self, encoded)

    texts = [" ".join(["word"] * ((i * 5) % 17 + 1)) + f" item {i}" for i in range(16)]
    want = one.encode(texts)
    threads.clear()
    monkeypatch.setattr(OnnxModel, "_run", run)
    got = two.encode(texts)
    assert np.abs(got - want).max() < 1e-6
    assert len(threads) == 2
    assert all(name.startswith("minilm-lane") for name in threads)
    threads.clear()
    two.encode(texts[:8])
    assert threads == {threading.current_thread().name}
    # int8 runs one text per chunk: a query batch still stays on the calling thread
    per_text = OnnxModel(graph_path(cache), threads=2, chunk=1)
    threads.clear()
    per_text.encode(texts[:8])
    assert threads == {threading.current_thread().name}
    # closed: the lanes are gone, a big batch runs on the calling thread
    two.close()
    threads.clear()
    assert np.abs(two.encode(texts) - want).max() < 1e-6
    assert threads == {threading.current_thread().name}
    for model in (one, per_text):
        model.close()


def test_a_close_while_a_batch_hands_its_chunks_to_the_lanes_waits_for_it(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A close between a batch's chunks being handed over must not fail that batch."""
    model = OnnxModel(graph_path(cache), threads=2)
    texts = [f"text number {i} about the lake" for i in range(24)]
    want = OnnxModel(graph_path(cache), threads=1).encode(texts)
    pool = model._pool
    assert pool is not None
    real_submit = pool.submit
    handing = threading.Event()

    def slow_submit(*args: Any) -> Any:
        handing.set()
        time.sleep(0.1)  # hold the window between two chunks open
        return real_submit(*args)

    monkeypatch.setattr(pool, "submit", slow_submit)
    got: list[Any] = []
    worker = threading.Thread(target=lambda: got.append(model.encode(texts)))
    worker.start()
    assert handing.wait(10)
    model.close()
    worker.join(30)
    assert got, "the batch failed"
    assert np.abs(got[0] - want).max() < 1e-6


def test_a_graph_that_differs_from_torch_is_refused(torch_model: TorchModel) -> None:
    class Off:
        def encode(self, batch: list[str]) -> np.ndarray:
            rows = torch_model.encode(batch)
            rows[-1, 0] += 0.01  # one coordinate of one text: an export gone wrong
            return rows

    with pytest.raises(EmbedderError, match="differs from torch"):
        check(Off(), torch_model, PROBES)
    check(torch_model, torch_model, PROBES)  # the same model passes


def test_the_export_is_made_once_and_then_reused(
    tmp_path: Path, exports: list[Path], onnx_model: OnnxModel
) -> None:
    made = exports
    stale = tmp_path / f"{graph_path(tmp_path).name}.4242.partial"
    stale.write_bytes(b"left by a process killed mid-export")
    (tmp_path / "download.partial").write_bytes(b"another program's half-written file")
    first = load_model("onnx", tmp_path, threads=1)
    second = load_model("onnx", tmp_path, threads=1)
    assert len(made) == 1
    assert made[0].exists()
    assert [p.name for p in tmp_path.glob("*.partial")] == ["download.partial"]
    # readable by other users (the image exports as root and runs as another user)
    assert made[0].stat().st_mode & 0o044 == 0o044
    assert np.abs(first.encode(TEXTS) - second.encode(TEXTS)).max() == 0.0
    assert np.abs(first.encode(TEXTS) - onnx_model.encode(TEXTS)).max() < 1e-5


def test_links_planted_in_the_cache_are_never_written_through(
    tmp_path: Path, exports: list[Path]
) -> None:
    cache, victim = tmp_path / "cache", tmp_path / "victim.txt"
    cache.mkdir()
    victim.write_text("precious data")
    graph = graph_path(cache)
    # the names an earlier release wrote its partial files under, and the graph itself
    for name in (f"{graph.name}.{os.getpid()}.partial", graph.name):
        (cache / name).symlink_to(victim)
    model = load_model("onnx", cache, threads=1)
    assert isinstance(model, OnnxModel)
    assert victim.read_text() == "precious data"
    assert not graph.is_symlink()
    # a lock file planted as a link is refused (torch then), never truncated
    (cache / ".export.lock").unlink()
    (cache / ".export.lock").symlink_to(victim)
    graph.unlink()
    assert isinstance(load_model("onnx", cache, threads=1), TorchModel)
    assert victim.read_text() == "precious data"


def exported_into(folder: Path, cache: Path) -> Path:
    """The module's exported graph and its probes, copied into ``folder``: a cache as an
    export leaves it, without exporting again."""
    graph = graph_path(cache)
    for source in (graph, graph.with_name(f"{graph.name}.probes.npy")):
        (folder / source.name).write_bytes(source.read_bytes())
    return graph_path(folder)


def test_a_damaged_cached_graph_is_exported_again(
    tmp_path: Path, exports: list[Path], onnx_model: OnnxModel, cache: Path
) -> None:
    graph = exported_into(tmp_path, cache)
    graph.write_bytes(graph.read_bytes()[: 1 << 20])  # truncated: a disk that filled up
    again = load_model("onnx", tmp_path, threads=1)
    assert exports == [graph]
    assert isinstance(again, OnnxModel)
    assert np.abs(again.encode(TEXTS) - onnx_model.encode(TEXTS)).max() < 1e-5


def test_a_graph_whose_vectors_moved_is_exported_again(
    tmp_path: Path, exports: list[Path], onnx_model: OnnxModel, cache: Path
) -> None:
    graph = exported_into(tmp_path, cache)
    load_model("onnx", tmp_path, threads=1)
    assert exports == [], "a copied export is taken as it is"
    probes = graph.with_name(f"{graph.name}.probes.npy")
    saved = np.load(probes)
    np.save(probes, saved + 0.01)  # the graph no longer gives what torch gave at export
    load_model("onnx", tmp_path, threads=1)
    assert exports == [graph]
    assert np.abs(np.load(probes) - saved).max() < 1e-6
    probes.unlink()  # a graph without its probes is not trusted either
    load_model("onnx", tmp_path, threads=1)
    assert exports == [graph, graph]


def test_an_unusable_cache_folder_falls_back_to_torch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, torch_model: TorchModel
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    with caplog.at_level("WARNING"):
        model = load_model("onnx", blocked / "memoryos", threads=1)
    assert isinstance(model, TorchModel)
    assert "MEMORYOS_MODEL_CACHE_DIR" in caplog.text
    assert np.abs(model.encode(TEXTS) - torch_model.encode(TEXTS)).max() == 0.0


def test_an_empty_cache_setting_means_the_default() -> None:
    assert Settings(model_cache_dir="").model_cache_path == Settings().model_cache_path
    assert Settings().model_cache_path.name == "memoryos"


def test_a_cache_setting_is_made_absolute_once() -> None:
    home = Path.home()
    assert Settings(model_cache_dir=" ~/models ").model_cache_path == home / "models"
    assert Settings(model_cache_dir="rel/cache").model_cache_path == Path.cwd() / "rel/cache"


def test_loading_an_exported_graph_imports_no_torch(cache: Path, onnx_model: OnnxModel) -> None:
    """A process with the graph cached never loads torch (about 300 MB less RSS)."""
    import subprocess

    code = (
        "import sys; from pathlib import Path; "
        "from adapters.embedders.minilm_models import load_model; "
        f"m = load_model('onnx', Path({str(cache)!r}), 1); m.encode(['hello']); "
        "print('torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == ["False", "False"]


def test_the_runtime_is_a_setting(tmp_path: Path) -> None:
    assert Settings().minilm_runtime == "onnx"
    assert Settings(model_cache_dir=tmp_path).model_cache_path == tmp_path
    assert isinstance(load_model("torch", tmp_path, threads=1), TorchModel)
    assert list(tmp_path.iterdir()) == []  # torch exports nothing


def test_the_export_command_fails_instead_of_falling_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make install` and the image build run it: they must stop, not ship without a graph."""
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("MEMORYOS_MODEL_CACHE_DIR", str(blocked / "memoryos"))
    with pytest.raises(NotADirectoryError):
        minilm_models.main()


def test_fresh_files_that_cannot_all_be_made_leave_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = tmp_path / "model.onnx"
    calls = [0]
    fchmod = os.fchmod

    def second_fails(fd: int, mode: int) -> None:
        calls[0] += 1
        if calls[0] == 2:
            raise PermissionError("no chmod here")
        fchmod(fd, mode)

    monkeypatch.setattr(os, "fchmod", second_fails)
    open_before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(PermissionError):
        minilm_models._fresh_files(graph, [".partial", ".probes.partial"])
    assert list(tmp_path.iterdir()) == []
    assert len(os.listdir("/proc/self/fd")) == open_before
