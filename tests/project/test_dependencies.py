"""What shipped code imports is declared in pyproject.toml: the core in `dependencies`,
`evaluation/` also in the `eval` extra. A package that is only in the test extras works in
`make test` and fails for a user who ran `pip install .` (crypto-shredding's `cryptography`
once was such a case)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions

from tests.support.paths import ROOT

CORE = ("schemas", "memory", "adapters", "agents", "service", "streams", "client")
OURS = {*CORE, "evaluation"}
# Installed with a declared dependency, and part of its public API.
TRANSITIVE = {"pydantic_core": "pydantic", "starlette": "fastapi"}


def _names(specs: list[str]) -> set[str]:
    return {re.split(r"[<>=\[ ;]", spec)[0].lower().replace("_", "-") for spec in specs}


def _undeclared(packages: tuple[str, ...], declared: set[str]) -> dict[str, set[str]]:
    distributions = packages_distributions()
    found: dict[str, set[str]] = {}
    for package in packages:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules = [node.module]
                else:
                    continue
                for module in modules:
                    top = module.split(".")[0]
                    if top in sys.stdlib_module_names or top in OURS or top == "__future__":
                        continue
                    names = {d.lower().replace("_", "-") for d in distributions.get(top, [])}
                    if TRANSITIVE.get(top) in declared or names & declared:
                        continue
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_shipped_code_imports_only_declared_packages() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = _names(project["dependencies"])
    assert _undeclared(CORE, core) == {}
    evaluation = core | _names(project["optional-dependencies"]["eval"])
    assert _undeclared(("evaluation",), evaluation) == {}
