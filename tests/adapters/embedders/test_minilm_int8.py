"""MiniLM with int8 weights: near the fp32 vectors, the same vector for a text alone or in a
batch, quantized once and then reused, never served by torch; and a store refuses the
vectors of another embedder than the one that made it."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from adapters.embedders import minilm_int8
from adapters.embedders.minilm import MiniLMEmbedder
from adapters.embedders.minilm_int8 import MIN_COSINE, int8_graph_path
from adapters.embedders.minilm_models import PROBES, OnnxModel, graph_path, load_model
from adapters.settings import Settings
from adapters.wiring import build_deps, close_deps
from schemas.errors import ConfigError

pytestmark = pytest.mark.slow  # each test exports or loads the model

QUESTIONS = [
    "What did Caroline paint after the art class in May?",
    "When is my sister's birthday?",
    "Which hotel did I book for the Lisbon trip, and for how many nights?",
    "order 1234 arrived broken 😞 — can I get a refund?",
    *PROBES,
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache of this module's own, with the fp32 graph of the user's cache when there is
    one (`make install` exports it), so that only the quantization runs here."""
    folder = tmp_path_factory.mktemp("models")
    made = graph_path(Settings().model_cache_path)
    for path in (made, made.with_name(made.name + ".probes.npy")):
        if path.exists():
            shutil.copy(path, folder / path.name)
    return folder


@pytest.fixture(scope="module")
def int8(cache: Path) -> OnnxModel:
    return load_model("onnx", cache, threads=1, precision="int8")


def test_int8_vectors_stay_near_fp32(cache: Path, int8: OnnxModel) -> None:
    fp32 = load_model("onnx", cache, threads=1)
    cosine = (int8.encode(QUESTIONS) * fp32.encode(QUESTIONS)).sum(axis=1)
    assert cosine.min() >= MIN_COSINE, cosine
    assert cosine.min() < 0.9999, "the int8 graph is not the fp32 one"
    assert int8_graph_path(cache).stat().st_size < graph_path(cache).stat().st_size / 3


def test_a_texts_int8_vector_does_not_depend_on_its_batch(int8: OnnxModel) -> None:
    together = int8.encode(QUESTIONS)
    alone = np.vstack([int8.encode([text]) for text in QUESTIONS])
    assert np.array_equal(together, alone)


def test_the_int8_graph_is_made_once_then_reused(
    cache: Path, int8: OnnxModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("quantized again")

    monkeypatch.setattr(minilm_int8, "quantize", refuse)
    again = load_model("onnx", cache, threads=1, precision="int8")
    assert np.array_equal(again.encode(QUESTIONS), int8.encode(QUESTIONS))


def test_a_damaged_int8_graph_is_quantized_again(tmp_path: Path, cache: Path) -> None:
    for path in cache.glob("*.onnx*"):
        shutil.copy(path, tmp_path / path.name)
    damaged = int8_graph_path(tmp_path)
    damaged.write_bytes(damaged.read_bytes()[:1000])
    model = load_model("onnx", tmp_path, threads=1, precision="int8")
    assert model.encode(["ok"]).shape == (1, 384)
    assert damaged.stat().st_size > 1000


def test_int8_needs_onnx_runtime() -> None:
    with pytest.raises(ValueError, match="MEMORYOS_MINILM_PRECISION=int8 needs"):
        Settings(minilm_precision="int8", minilm_runtime="torch")
    assert MiniLMEmbedder(Settings(minilm_precision="int8")).name.endswith(":int8")
    assert MiniLMEmbedder(Settings(minilm_precision="fp32")).name == "minilm:all-MiniLM-L6-v2"
    # auto without a store to follow: what a new store gets
    assert MiniLMEmbedder(Settings()).name.endswith(":int8")
    assert MiniLMEmbedder(Settings(minilm_runtime="torch")).name == "minilm:all-MiniLM-L6-v2"


@pytest.mark.asyncio
async def test_a_store_refuses_another_embedders_vectors(tmp_path: Path, cache: Path) -> None:
    fp32 = Settings(data_dir=tmp_path, model_cache_dir=cache, minilm_precision="fp32")
    deps = await build_deps(fp32)  # a new store: it now names MiniLM fp32
    await close_deps(deps)
    with pytest.raises(ConfigError, match=r"'minilm:all-MiniLM-L6-v2'.*MEMORYOS_MINILM_PRECISION"):
        await build_deps(fp32.model_copy(update={"minilm_precision": "int8"}))
    deps = await build_deps(fp32)  # the refusal let the folder go; the same embedder opens it
    await close_deps(deps)


def test_a_link_planted_where_onnx_runtime_writes_is_never_written_through(
    tmp_path: Path, cache: Path
) -> None:
    """ONNX Runtime writes a shape-inferred copy beside the graph it quantizes, by name: the
    quantization works on a private copy, so a link planted in the cache stays untouched."""
    folder, victim = tmp_path / "cache", tmp_path / "victim.txt"
    folder.mkdir()
    victim.write_text("precious")
    fp32 = graph_path(cache)
    for path in (fp32, fp32.with_name(fp32.name + ".probes.npy")):
        shutil.copy(path, folder / path.name)
    planted = folder / f"{fp32.stem}-inferred{fp32.suffix}"
    planted.symlink_to(victim)
    load_model("onnx", folder, threads=1, precision="int8")
    assert victim.read_text() == "precious"
    assert planted.is_symlink()
    int8 = int8_graph_path(folder).name
    expected = [fp32.name, f"{fp32.name}.probes.npy", planted.name, int8, f"{int8}.probes.npy"]
    left = [p.name for p in folder.iterdir() if not p.name.startswith(".")]
    assert sorted(left) == sorted(expected), "nothing else left in the cache"


def test_the_load_check_takes_int8_rounding_but_not_another_graph(
    tmp_path: Path, cache: Path, int8: OnnxModel
) -> None:
    for path in cache.glob("*.onnx*"):
        shutil.copy(path, tmp_path / path.name)
    probes = int8_graph_path(tmp_path).with_name(int8_graph_path(tmp_path).name + ".probes.npy")
    saved = np.load(probes)
    rounded = saved + np.float32(2e-3) * np.sign(saved)  # another CPU's kernels, say
    np.save(probes, rounded / np.linalg.norm(rounded, axis=1, keepdims=True))
    assert minilm_int8._cached(
        int8_graph_path(tmp_path), 1, True, minilm_int8.ONE_TEXT, minilm_int8.SAME_GRAPH_COSINE
    ), "rounding a little otherwise is the same graph"
    np.save(probes, load_model("onnx", tmp_path, threads=1).encode(PROBES))  # fp32's vectors
    assert not minilm_int8._cached(
        int8_graph_path(tmp_path), 1, True, minilm_int8.ONE_TEXT, minilm_int8.SAME_GRAPH_COSINE
    ), "another graph's vectors are not taken"


@pytest.mark.asyncio
async def test_auto_gives_a_new_store_int8_and_keeps_each_stores_own_precision(
    tmp_path: Path, cache: Path
) -> None:
    """The default (auto) never strands a store: one made by fp32 (a release before auto, or
    set so) stays on fp32; a new one gets int8; both then open under auto as they were made."""
    auto = Settings(data_dir=tmp_path / "new", model_cache_dir=cache)
    deps = await build_deps(auto)
    assert deps.settings.minilm_precision == "int8"
    assert deps.embedder.name.endswith(":int8")
    vector = (await deps.embedder.embed(["When is my sister's birthday?"]))[0]
    await close_deps(deps)
    older = Settings(data_dir=tmp_path / "old", model_cache_dir=cache, minilm_precision="fp32")
    await close_deps(await build_deps(older))
    for made, precision in ((auto, "int8"), (older, "fp32")):
        deps = await build_deps(made.model_copy(update={"minilm_precision": "auto"}))
        try:
            assert deps.settings.minilm_precision == precision
            assert deps.embedder.name == (await deps.repo.stored_embedder())
            if precision == "int8":  # the same model as the one that made the store
                again = (await deps.embedder.embed(["When is my sister's birthday?"]))[0]
                assert float(np.dot(vector, again)) > 0.9999
        finally:
            await close_deps(deps)
    # torch runs fp32 only: auto with torch on an int8 store is refused, naming the runtime
    torch = auto.model_copy(update={"minilm_runtime": "torch"})
    with pytest.raises(ConfigError, match=r"int8'.*MEMORYOS_MINILM_RUNTIME=onnx"):
        await build_deps(torch)


@pytest.mark.asyncio
async def test_a_new_store_whose_model_cannot_load_is_left_unclaimed(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start that fails to load the int8 model (say a cache it cannot write) must not bind
    the new store to int8: started again with fp32, the same folder opens. The model in a
    thread of this process, where its loader can be made to fail."""
    from adapters.embedders import model_hosts

    loaded = model_hosts.load_model

    def broken(runtime: str, cache_dir: Path, threads: int, precision: str = "fp32") -> object:
        if precision == "int8":
            raise OSError("the int8 graph cannot be written")
        return loaded(runtime, cache_dir, threads, precision)

    monkeypatch.setattr(model_hosts, "load_model", broken)
    auto = Settings(data_dir=tmp_path, model_cache_dir=cache, minilm_host="thread")
    with pytest.raises(Exception, match="int8 graph cannot be written"):
        await build_deps(auto)
    deps = await build_deps(auto.model_copy(update={"minilm_precision": "fp32"}))
    try:
        assert await deps.repo.stored_embedder() == "minilm:all-MiniLM-L6-v2"
    finally:
        await close_deps(deps)


@pytest.mark.asyncio
async def test_a_model_process_that_cannot_load_int8_leaves_the_store_unclaimed(
    tmp_path: Path, cache: Path
) -> None:
    """The same with the model in its own process (the default): the int8 graph cannot be
    written (a folder stands at its path), the child says why and exits, the start fails
    with that reason, and fp32 opens the store."""
    from schemas.errors import EmbedderError

    blocked = tmp_path / "models"
    shutil.copytree(cache, blocked)
    int8_graph_path(blocked).unlink(missing_ok=True)
    int8_graph_path(blocked).mkdir()
    auto = Settings(data_dir=tmp_path / "data", model_cache_dir=blocked)
    with pytest.raises(EmbedderError, match="cannot load all-MiniLM-L6-v2"):
        await build_deps(auto)
    deps = await build_deps(auto.model_copy(update={"minilm_precision": "fp32"}))
    try:
        assert await deps.repo.stored_embedder() == "minilm:all-MiniLM-L6-v2"
    finally:
        await close_deps(deps)


@pytest.mark.asyncio
@pytest.mark.parametrize("kept", ["a page", "a fact only"])
async def test_a_store_from_before_embedder_records_stays_fp32(
    tmp_path: Path, cache: Path, kept: str
) -> None:
    """A store made before stores recorded their embedder holds fp32 vectors (MiniLM's only
    precision then) and no record: auto keeps it on fp32 and records that; int8 is refused.
    Its pages may all be gone (evicted, forgotten) while facts stay."""
    from adapters.ports import USER_KNOWLEDGE, Point
    from adapters.repository import EMBEDDER_DOC, SYSTEM
    from schemas.records import ChainLink, Page

    fp32 = Settings(data_dir=tmp_path, model_cache_dir=cache, minilm_precision="fp32")
    deps = await build_deps(fp32)
    text = "my sister's birthday is May 3"
    vector = (await deps.embedder.embed([text]))[0]
    if kept == "a page":
        page = Page(
            page_id="00000000-0000-5000-8000-000000000001",
            user_id="ann",
            turn_id="t1",
            query=text,
            response="noted",
            timestamp="2024-01-01T00:00:00Z",
            chain=ChainLink(chain_id="c"),
        )
        page.vector = vector
        await deps.repo.save_pages([page], "stm")
    else:
        fact = Point(
            "00000000-0000-5000-8000-000000000002", vector, {"user_id": "ann", "text": text}
        )
        await deps.store.upsert(USER_KNOWLEDGE, [fact])
    await deps.repo.delete_doc(SYSTEM, EMBEDDER_DOC)  # as a release before records left it
    await close_deps(deps)
    int8 = fp32.model_copy(update={"minilm_precision": "int8"})
    with pytest.raises(ConfigError, match=r"'minilm:all-MiniLM-L6-v2', not by .*:int8"):
        await build_deps(int8)
    deps = await build_deps(fp32.model_copy(update={"minilm_precision": "auto"}))
    try:
        assert deps.settings.minilm_precision == "fp32"
        assert await deps.repo.stored_embedder() == "minilm:all-MiniLM-L6-v2"  # recorded now
    finally:
        await close_deps(deps)
