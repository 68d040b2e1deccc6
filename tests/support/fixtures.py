"""Pytest fixtures for the fake OpenAI server.

- ``fake_openai_server`` (session): one server for the whole run.
- ``fake_openai`` (function): that server, reset before each test (no faults, no latency,
  empty request log, default replies). Inject faults with ``fake_openai.inject(Fault...)``,
  add latency with ``fake_openai.latency_s = 0.2``.
- ``fake_openai_settings`` (function): Settings pointing both OpenAI adapters at the server,
  with millisecond backoff and a 1 s client timeout so fault tests stay fast.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from adapters.settings import Settings
from evaluation.fake_openai import FakeOpenAI

FAST_RETRIES: dict[str, Any] = {
    "llm_backoff_base_s": 0.001,
    "llm_backoff_max_s": 0.01,
    "llm_timeout_s": 1.0,
    "llm_max_retries": 3,
}


def settings_for(server: FakeOpenAI, **overrides: Any) -> Settings:
    """Settings for the OpenAI LLM and embedder against ``server`` (fast retries by default)."""
    values: dict[str, Any] = {
        "llm": "openai",
        "embedder": "openai",
        "openai_base_url": server.base_url,
        "openai_api_key": "test-key",
        "llm_model": "fake-model",
        "embedding_model": "fake-embedding",
        **FAST_RETRIES,
        **overrides,
    }
    return Settings(**values)


@pytest.fixture(scope="session")
def fake_openai_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def fake_openai(fake_openai_server: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """The shared server, reset before and after: faults a test injected and did not use
    must not reach the next test a worker runs (pytest-xdist orders files as it likes)."""
    fake_openai_server.reset()
    yield fake_openai_server
    fake_openai_server.reset()


@pytest.fixture
def fake_openai_settings(fake_openai: FakeOpenAI) -> Settings:
    return settings_for(fake_openai)
