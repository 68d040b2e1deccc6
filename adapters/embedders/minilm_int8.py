"""all-MiniLM-L6-v2 with int8 weights (``MEMORYOS_MINILM_PRECISION=int8``).

ONNX Runtime's dynamic quantization of the exported fp32 graph: the weights of its matrix
products become int8, and each activation is quantized at run time with a scale taken from
the whole tensor. That scale spans every text of a model call, so a text run in a batch would
get another vector than the same text alone, as LoCoMo questions showed.
The int8 model therefore runs one text per call: a text's vector never depends on what else
was embedded with it, and one text per call also took less CPU per text than chunks did on a
single thread (and both far less than fp32).

The graph is made once from the fp32 graph and kept beside it, with its own probe vectors for
the check at each load, exactly as the fp32 export is (``minilm_models``). A quantization is
kept only if every probe's vector stays within ``MIN_COSINE`` of the fp32 one.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np

from adapters.embedders.minilm_models import (
    PROBES,
    OnnxModel,
    _cached,
    _exclusive,
    _onnx_model,
    graph_path,
    publish_graph,
)
from schemas.errors import EmbedderError

log = logging.getLogger(__name__)

ONE_TEXT = 1  # texts per model call: see the module's docstring
# The check at each load compares with the probe vectors saved when the graph was made by
# cosine, not coordinate by coordinate as for fp32: int8 kernels may round otherwise on
# another CPU (an image built on one host runs on others), while a damaged or foreign graph
# falls far below this.
SAME_GRAPH_COSINE = 0.99
MIN_COSINE = 0.8  # each probe's cosine to its fp32 vector, at the least (short texts score lowest)


def int8_graph_path(cache_dir: Path) -> Path:
    fp32 = graph_path(cache_dir)
    return fp32.with_name(fp32.name.removesuffix(".onnx") + "-int8.onnx")


def int8_model(cache_dir: Path, threads: int) -> OnnxModel:
    """The cached int8 graph, made from the fp32 graph (exported first if need be) when it is
    missing or no longer gives the vectors saved beside it."""
    graph = int8_graph_path(cache_dir)
    model = _cached(graph, threads, quiet=True, chunk=ONE_TEXT, min_cosine=SAME_GRAPH_COSINE)
    if model is not None:
        return model
    fp32 = _onnx_model(cache_dir, threads)
    with _exclusive(cache_dir):  # one process quantizes, the others wait and reuse it
        model = _cached(graph, threads, quiet=False, chunk=ONE_TEXT, min_cosine=SAME_GRAPH_COSINE)
        if model is None:
            for stale in cache_dir.glob(f"{graph.name}.*.partial"):
                stale.unlink(missing_ok=True)
            quantize(graph_path(cache_dir), graph, fp32)
            model = OnnxModel(graph, threads, ONE_TEXT)
    return model


def quantize(source: Path, graph: Path, reference: OnnxModel) -> None:
    """Write the int8 quantization of ``source`` to ``graph``, refusing one whose vectors
    stray from ``reference``'s; its own vectors of the probe texts are saved beside it."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    log.info("quantizing all-MiniLM-L6-v2 to int8 at %s (once)", graph)

    def quantized() -> bytes:
        # ONNX Runtime writes by name, and beside its input too (a shape-inferred copy), so
        # it works on a copy in a private folder outside the cache: nothing planted in the
        # cache is written through.
        with tempfile.TemporaryDirectory(prefix="memoryos-int8-") as private:
            copy, made = Path(private) / "fp32.onnx", Path(private) / "int8.onnx"
            copy.write_bytes(source.read_bytes())
            quantize_dynamic(str(copy), str(made), weight_type=QuantType.QInt8)
            return made.read_bytes()

    def probe_vectors(partial: Path) -> np.ndarray:
        got = OnnxModel(partial, threads=1, chunk=ONE_TEXT).encode(PROBES)
        cosine = (got * reference.encode(PROBES)).sum(axis=1)
        if float(cosine.min()) < MIN_COSINE:
            raise EmbedderError(
                f"the int8 quantization of all-MiniLM-L6-v2 strays from fp32 (cosine "
                f"{float(cosine.min()):.3f} on a probe text, allowed {MIN_COSINE})"
            )
        return got

    publish_graph(graph, "quantize all-MiniLM-L6-v2 to int8", quantized, probe_vectors)
