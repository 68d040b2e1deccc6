"""The alert rules' unit tests (deploy/prometheus/alerts.test.yml), run by `promtool`."""

from __future__ import annotations

import subprocess
from typing import Any

from tests.support.deploy import DEPLOY, load_yaml
from tests.support.prometheus import binary

RULES = DEPLOY / "prometheus" / "alerts.yml"
RULE_TESTS = DEPLOY / "prometheus" / "alerts.test.yml"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    command = [binary("promtool"), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_rules_are_valid() -> None:
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_rule_tests_pass() -> None:
    result = promtool("test", "rules", str(RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr


def expectations(tests: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """(alert name, whether it is expected to fire) for every check in the test file."""
    return [
        (check["alertname"], bool(check.get("exp_alerts")))
        for test in tests
        for check in test.get("alert_rule_test", [])
    ]


def test_every_alert_is_tested_firing_and_quiet() -> None:
    # promtool only runs the checks that are written: an alert without one passes silently.
    rule_tests = load_yaml(RULE_TESTS)
    assert rule_tests["rule_files"] == [RULES.name]
    checked = set(expectations(rule_tests["tests"]))
    alerts = [rule["alert"] for group in load_yaml(RULES)["groups"] for rule in group["rules"]]
    missing = [(name, fires) for name in alerts for fires in (True, False)]
    missing = [item for item in missing if item not in checked]
    assert not missing, f"(alert, fires) with no promtool check: {missing}"
