from __future__ import annotations

import pytest

from adapters.settings import load_settings
from schemas.errors import ConfigError


def test_paper_defaults() -> None:
    settings = load_settings()
    assert settings.stm_capacity == 7
    assert settings.mtm_capacity == 200
    assert settings.theta == 0.6
    assert (settings.heat_alpha, settings.heat_beta, settings.heat_gamma) == (1.0, 1.0, 1.0)
    assert settings.heat_mu == 1e7
    assert settings.heat_tau == 5
    assert settings.user_kb_capacity == settings.agent_traits_capacity == 100
    assert (settings.retrieve_segments, settings.retrieve_pages, settings.retrieve_lpm) == (
        5,
        10,
        10,
    )
    assert settings.llm == "offline"
    assert settings.store == "edge"


def test_environment_is_read_with_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYOS_STM_CAPACITY", "3")
    monkeypatch.setenv("MEMORYOS_API_KEYS", "a, b,,c")
    settings = load_settings()
    assert settings.stm_capacity == 3
    assert settings.api_key_list == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("MEMORYOS_STM_CAPACITY", "0", "MEMORYOS_STM_CAPACITY"),
        ("MEMORYOS_THETA", "abc", "MEMORYOS_THETA"),
        ("MEMORYOS_LLM", "gpt", "MEMORYOS_LLM"),
        ("MEMORYOS_BROKER_URL", "localhost:9092", "kafka://"),
    ],
)
def test_invalid_value_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, expected: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert expected in str(info.value)


def test_openai_backend_needs_a_key_or_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("MEMORYOS_LLM", "openai")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        load_settings()
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    assert load_settings().openai_base_url == "http://127.0.0.1:1/v1"
