"""The retention in the deployment files is the retention in the code (streams/retention.py).

Compose and the Kubernetes ConfigMap set the settings the worker creates topics with; the
Strimzi KafkaTopic resources declare the same per topic, for the topic operator.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import yaml

from adapters.settings import ENV_PREFIX, Settings
from streams.retention import topic_configs
from tests.support.paths import ROOT

RETENTION_ENV = ("TURNS_RETENTION_S", "STAGE_RETENTION_S", "DLQ_RETENTION_S", "TOPIC_SEGMENT_S")


def settings_of(env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name in [n for n in os.environ if n.startswith(ENV_PREFIX)]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        if name.startswith(ENV_PREFIX):
            monkeypatch.setenv(name, str(value))
    return Settings()


def compose_env() -> dict[str, Any]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    env: dict[str, Any] = compose["services"]["worker"]["environment"]
    return env


def configmap_env() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "deploy/k8s/configmap.yaml").read_text())["data"]
    return data


@pytest.mark.parametrize("env", [compose_env, configmap_env], ids=["compose", "k8s"])
def test_deployments_set_every_retention_explicitly(env: Any) -> None:
    values = env()
    for name in RETENTION_ENV:
        assert ENV_PREFIX + name in values, f"{name} left to the default"


def test_strimzi_topics_are_the_codes_topics_and_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = settings_of(configmap_env(), monkeypatch)
    docs = [
        doc
        for doc in yaml.safe_load_all((ROOT / "deploy/k8s/kafka/topics.yaml").read_text())
        if doc
    ]
    declared = {doc["spec"]["topicName"]: doc["spec"] for doc in docs}
    expected = topic_configs(settings)
    assert set(declared) == set(expected)
    for name, spec in declared.items():
        assert {k: str(v) for k, v in spec["config"].items()} == expected[name], name
        assert spec["partitions"] == settings.topic_partitions
        assert spec["replicas"] == settings.topic_replication_factor
    for doc in docs:
        assert doc["kind"] == "KafkaTopic"
        assert doc["metadata"]["labels"]["strimzi.io/cluster"] == "memoryos"
