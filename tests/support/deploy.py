"""The deployment files (deploy/) as the tests read them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import ROOT

DEPLOY = ROOT / "deploy"


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def load_dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DEPLOY / "grafana/dashboards/memoryos.json").read_text())
    return data


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel of the dashboard, those of collapsed rows included."""
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # collapsed rows hold their panels
