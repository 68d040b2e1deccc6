"""``MEMORYOS_MINILM_PRECISION=auto`` made concrete: fp32 or int8.

int8 takes about half the CPU of fp32 per text, so a new store gets it; but a store's vectors
come from one precision (the other's would be searched without an error and found by chance),
so a store made by fp32 stays on fp32 and upgrading never strands a store.
"""

from __future__ import annotations

from typing import Literal

from adapters.settings import Settings

MINILM_NAME = "minilm:all-MiniLM-L6-v2"
Precision = Literal["fp32", "int8"]


def minilm_name(precision: Precision) -> str:
    """The embedder name a store records: the precisions make different vectors."""
    return MINILM_NAME if precision == "fp32" else f"{MINILM_NAME}:{precision}"


def new_store_precision(settings: Settings) -> Precision:
    """The precision ``settings`` give a store that records none yet."""
    if settings.minilm_precision != "auto":
        return settings.minilm_precision
    # the int8 graph is ONNX Runtime's quantization; torch runs the published weights only
    return "int8" if settings.minilm_runtime == "onnx" else "fp32"


def for_store(settings: Settings, stored: str | None) -> Settings:
    """``settings`` with ``auto`` replaced by the precision of the store whose vectors were made
    by the embedder named ``stored`` (None: a new store). Another embedder's name resolves as a
    new store would: the embedder check then refuses that store, naming both."""
    if settings.embedder != "minilm" or settings.minilm_precision != "auto":
        return settings
    precision = new_store_precision(settings)
    if stored == minilm_name("fp32"):
        precision = "fp32"
    elif stored == minilm_name("int8") and settings.minilm_runtime == "onnx":
        precision = "int8"
    return settings.model_copy(update={"minilm_precision": precision})
