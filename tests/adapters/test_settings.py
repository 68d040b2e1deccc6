from __future__ import annotations

import pytest

from adapters.settings import GROUPS, Settings, load_settings
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
        ("MEMORYOS_BROKER_URL", "localhost", "host:port"),
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


SECRETS = {
    "MEMORYOS_API_KEYS": "api-secret-1,api-secret-2",
    "OPENAI_API_KEY": "sk-openai-secret",
    "MEMORYOS_QDRANT_API_KEY": "qdrant-secret",
}


@pytest.mark.parametrize(
    ("variable", "value", "rule"),
    [
        ("MEMORYOS_STM_CAPACITY", "0", "greater than or equal to 1"),
        ("MEMORYOS_BROKER_URL", "http://localhost:9092", "host:port"),
        ("MEMORYOS_EMBEDDER", "openai", "needs OPENAI_API_KEY"),  # a rule over all settings
    ],
)
def test_a_configuration_error_names_the_variable_and_rule_never_a_value(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, rule: str
) -> None:
    for name, secret in SECRETS.items():
        monkeypatch.setenv(name, secret)
    if variable == "MEMORYOS_EMBEDDER":  # the whole-settings rule needs no key to fire
        monkeypatch.delenv("OPENAI_API_KEY")
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert rule in message
    if variable != "MEMORYOS_EMBEDDER":  # that rule's text itself says "=openai"
        assert variable in message
        assert repr(value) not in message
    for secret in ("api-secret", "sk-openai-secret", "qdrant-secret"):
        assert secret not in message


def test_keys_are_secret_in_repr_and_usable_in_code(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, secret in SECRETS.items():
        monkeypatch.setenv(name, secret)
    settings = load_settings()
    shown = repr(settings) + str(settings.model_dump())
    for secret in ("api-secret", "sk-openai-secret", "qdrant-secret"):
        assert secret not in shown
    assert settings.api_key_list == ["api-secret-1", "api-secret-2"]
    assert settings.openai_key == "sk-openai-secret"
    assert settings.qdrant_key == "qdrant-secret"


def test_keys_set_by_model_copy_still_work() -> None:
    # evaluation and doctor derive settings with model_copy(update=...), which skips validation
    copied = load_settings().model_copy(
        update={"openai_api_key": "sk-x", "api_keys": "a,b", "qdrant_api_key": "q"}
    )
    assert (copied.openai_key, copied.api_key_list, copied.qdrant_key) == ("sk-x", ["a", "b"], "q")


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("127.0.0.1:9092", "kafka://127.0.0.1:9092"),
        ("kafka://kafka:9092", "kafka://kafka:9092"),
        ("k1:9092, k2:9093", "kafka://k1:9092,k2:9093"),
        ("kafka://[::1]:9092", "kafka://[::1]:9092"),
    ],
)
def test_the_broker_url_takes_host_port_lists_as_kafka_tools_do(given: str, kept: str) -> None:
    assert load_settings(broker_url=given).broker_url == kept


@pytest.mark.parametrize("given", ["localhost", "http://k:9092", "k:port", "k:9092,"])
def test_a_broker_url_without_host_and_port_is_refused_naming_the_variable(given: str) -> None:
    with pytest.raises(ConfigError, match="MEMORYOS_BROKER_URL"):
        load_settings(broker_url=given)


def test_every_setting_is_in_exactly_one_group() -> None:
    grouped = [name for _, _, names in GROUPS for name in names]
    assert sorted(grouped) == sorted(Settings.model_fields), "a setting in no group, or in two"
    assert GROUPS[-1][0] == "Advanced", "the advanced group comes last"
