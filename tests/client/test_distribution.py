"""`pip install ./clients/python` in a fresh virtualenv: the client and the API's models, and
nothing of the server (no torch, Faust, Kafka, Qdrant, FastAPI, openai); then the README's
quick start runs with that virtualenv's Python against `memoryos up`."""

from __future__ import annotations

import asyncio
import subprocess
import venv
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.paths import ROOT
from tests.support.readme import DEFAULT_URL, python_quick_start
from tests.support.stacks import UpProcess, up_running

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

SERVER_ONLY = {"torch", "faust-streaming", "aiokafka", "qdrant-client", "qdrant-edge-py", "fastapi",
               "openai", "sentence-transformers", "onnxruntime", "memoryos-streams"}  # fmt: skip


@pytest.fixture(scope="module")
def client_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv with only `pip install ./clients/python` in it."""
    home = tmp_path_factory.mktemp("client-venv")
    venv.EnvBuilder(with_pip=True).create(home)
    python = home / "bin" / "python"
    install = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         str(ROOT / "clients" / "python")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    return python


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def up(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[UpProcess]:
    async with up_running(tmp_path_factory.mktemp("client-up"), MEMORYOS_STM_CAPACITY="3") as up:
        yield up


def installed(python: Path) -> set[str]:
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return {line.split("==")[0].lower() for line in listed.stdout.splitlines() if line}


async def test_the_client_installs_alone_without_the_server(client_env: Path) -> None:
    packages = installed(client_env)
    assert "memoryos-client" in packages
    assert {"httpx", "pydantic"} <= packages
    assert not packages & SERVER_ONLY, sorted(packages & SERVER_ONLY)
    probe = await asyncio.to_thread(
        subprocess.run,
        [client_env, "-c", "import sys, memoryos_client; from memoryos_client.models import "
         "RetrieveResponse; print(sorted(m for m in sys.modules if m.split('.')[0] in "
         "('faust', 'aiokafka', 'torch', 'schemas', 'service', 'memory')))"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "[]"


async def test_the_readme_quick_start_runs_in_that_virtualenv(
    client_env: Path, up: UpProcess, tmp_path: Path
) -> None:
    code = python_quick_start()
    script = tmp_path / "quick_start.py"
    script.write_text(code.replace(DEFAULT_URL, up.url))
    run = await asyncio.to_thread(
        subprocess.run,
        [client_env, str(script)], capture_output=True, text=True, timeout=180, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "I am allergic to latex. api" in run.stdout, "the added fact is listed"
