"""The TypeScript client (clients/typescript): its types are what openapi-typescript makes of the
live `/openapi.json` (a route or model the client misses fails here), and `npm test` (Node's own
test runner) passes against the embedded stack, with an operator key."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from streams.stack import Stack
from tests.support.paths import ROOT
from tests.support.readme import DEFAULT_URL, typescript_quick_start
from tests.support.stacks import running_stack

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

CLIENT = ROOT / "clients" / "typescript"
OPERATOR = "ts-operator-key"


@pytest.fixture(scope="module")
def npm() -> str:
    found = shutil.which("npm")
    assert found, "npm is needed (Node 20): `make test` runs the TypeScript client's tests"
    assert (CLIENT / "node_modules" / ".bin" / "tsc").exists(), "run `make test` (npm ci first)"
    return found


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    folder = tmp_path_factory.mktemp("typescript")
    async with running_stack(folder, stm_capacity=3, api_keys=OPERATOR) as running:
        yield running


def url_of(stack: Stack) -> str:
    return f"http://127.0.0.1:{stack.port}"


async def run(command: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        command,
        cwd=CLIENT,
        env=os.environ | env,
        capture_output=True,
        text=True,
        timeout=300,
    )


async def test_the_generated_types_are_the_live_apis(
    npm: str, stack: Stack, tmp_path: Path
) -> None:
    made = tmp_path / "schema.ts"
    generator = CLIENT / "node_modules" / ".bin" / "openapi-typescript"
    spec = f"{url_of(stack)}/openapi.json"
    done = await run([str(generator), spec, "--default-non-nullable=false", "-o", str(made)])
    assert done.returncode == 0, done.stdout + done.stderr
    assert made.read_text() == (CLIENT / "src" / "schema.ts").read_text(), (
        "clients/typescript/src/schema.ts is stale: with the stack up, `npm run generate`"
    )


async def test_npm_test_passes_against_the_stack(npm: str, stack: Stack) -> None:
    done = await run(
        [npm, "test", "--silent"], MEMORYOS_URL=url_of(stack), MEMORYOS_API_KEY=OPERATOR
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout


async def test_the_readme_typescript_quick_start_runs_as_written(
    npm: str, stack: Stack, tmp_path: Path
) -> None:
    """As a bot would: the package installed in its node_modules, the code as the README has it
    (TypeScript with nothing to strip, so Node runs it as a module)."""
    build = await run([str(CLIENT / "node_modules" / ".bin" / "tsc"), "-p", "."])
    assert build.returncode == 0, build.stdout + build.stderr
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "memoryos-client").symlink_to(CLIENT)
    script = tmp_path / "quick.mjs"
    script.write_text(typescript_quick_start().replace(DEFAULT_URL, url_of(stack)))
    # the operator key the stack asks for (a bot's own key, as MemoryClient's second argument)
    code = script.read_text().replace(
        f'new MemoryClient("{url_of(stack)}")',
        f'new MemoryClient("{url_of(stack)}", {{ apiKey: "{OPERATOR}" }})',
    )
    assert code != script.read_text(), "the quick start makes its client as expected"
    script.write_text(code)
    node = shutil.which("node")
    assert node is not None
    done = await asyncio.to_thread(
        subprocess.run, [node, str(script)], cwd=tmp_path, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "I ordered boots in size 39." in done.stdout
