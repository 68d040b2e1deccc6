"""``MEMORYOS_MINILM_PRECISION=auto``: which precision a store gets, without loading a model."""

from __future__ import annotations

import pytest

from adapters.embedders.precision import for_store, minilm_name, new_store_precision
from adapters.settings import Settings


def test_auto_is_the_default_and_gives_a_new_store_int8_on_onnx_and_fp32_on_torch() -> None:
    assert Settings().minilm_precision == "auto"
    assert new_store_precision(Settings()) == "int8"
    assert new_store_precision(Settings(minilm_runtime="torch")) == "fp32"
    assert new_store_precision(Settings(minilm_precision="fp32")) == "fp32"


@pytest.mark.parametrize(
    ("stored", "runtime", "expected"),
    [
        (None, "onnx", "int8"),
        (minilm_name("fp32"), "onnx", "fp32"),
        (minilm_name("int8"), "onnx", "int8"),
        (None, "torch", "fp32"),
        (minilm_name("int8"), "torch", "fp32"),  # refused by the embedder check, by name
        ("openai:text-embedding-3-small", "onnx", "int8"),  # likewise
    ],
)
def test_auto_follows_the_stores_own_precision(
    stored: str | None, runtime: str, expected: str
) -> None:
    resolved = for_store(Settings(minilm_runtime=runtime), stored)  # type: ignore[arg-type]
    assert resolved.minilm_precision == expected


def test_a_precision_set_explicitly_or_another_embedder_is_left_as_it_is() -> None:
    fp32 = Settings(minilm_precision="fp32")
    assert for_store(fp32, minilm_name("int8")) is fp32  # the embedder check refuses it
    other = Settings(embedder="openai", openai_api_key="k")
    assert for_store(other, None) is other
