"""Running MemoryOS for integration tests: in-process stacks and `memoryos up` subprocesses."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import psutil

from adapters.settings import load_settings
from evaluation.fake_openai import FakeOpenAI
from streams.broker import free_port
from streams.stack import Stack
from tests.support.paths import ROOT

FAST_GROUP = {"consumer_session_timeout_s": 6.0, "consumer_rebalance_timeout_s": 2.0}


@asynccontextmanager
async def running_stack(data_dir: Path, **overrides: Any) -> AsyncIterator[Stack]:
    settings = load_settings(
        data_dir=data_dir, broker_port=free_port(), port=0, **(FAST_GROUP | overrides)
    )
    stack = Stack(settings)
    try:
        await stack.start()  # a start that fails half way still stops what it started
        yield stack
    finally:
        await stack.stop()


async def eventually(
    check: Callable[[], Any], timeout_s: float = 60.0, every_s: float = 0.2
) -> Any:
    """Poll ``check`` (sync or async) until it returns something truthy; fail on timeout."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if asyncio.iscoroutine(last):
            last = await last
        if last:
            return last
        await asyncio.sleep(every_s)
    raise AssertionError(f"condition not met within {timeout_s} s (last value: {last!r})")


def strip_volatile(memory: dict[str, Any]) -> dict[str, Any]:
    """A memory document without what changes with the wall clock (heat's recency)."""
    copy = {**memory, "mid_term": [{**s, "heat": round(s["heat"], 3)} for s in memory["mid_term"]]}
    return copy


def up_env(server: FakeOpenAI) -> dict[str, str]:
    """The embedded default with a slow OpenAI-compatible fake, to hold work in flight."""
    return {
        "MEMORYOS_LLM": "openai",
        "MEMORYOS_EMBEDDER": "openai",
        "MEMORYOS_OPENAI_BASE_URL": server.base_url,
        "MEMORYOS_OPENAI_API_KEY": "test-key",
        "MEMORYOS_LLM_MODEL": "fake-model",
        "MEMORYOS_EMBEDDING_MODEL": "fake-embedding",
        "MEMORYOS_RECONCILE_INTERVAL_S": "5",
    }


class UpProcess:
    """`memoryos up` as a child process, as a user runs it."""

    def __init__(
        self, data_dir: Path, broker: str | None = None, args: tuple[str, ...] = (), **env: str
    ) -> None:
        self.data_dir = data_dir
        self.args = args
        self.port = free_port()
        self.broker_port = free_port()
        self.broker = broker
        self.env = {
            **os.environ,
            "MEMORYOS_CONSUMER_SESSION_TIMEOUT_S": "6",
            "MEMORYOS_CONSUMER_REBALANCE_TIMEOUT_S": "2",
            **env,
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.log = data_dir / "up.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        command = [
            sys.executable,
            "-m",
            "streams.cli",
            "up",
            "--data-dir",
            str(self.data_dir),
            "--port",
            str(self.port),
            "--broker-port",
            str(self.broker_port),
        ]
        if self.broker:
            command += ["--broker", self.broker]
        command += self.args
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            # Its own process group, so `interrupt` can do what Ctrl-C in a terminal does.
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
            )

    async def wait_ready(self, timeout_s: float = 90.0) -> None:
        async def ready() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"memoryos up exited: {self.log.read_text()[-3000:]}")
            try:
                async with httpx.AsyncClient() as client:
                    return (await client.get(f"{self.url}/readyz", timeout=2)).status_code == 200
            except httpx.HTTPError:
                return False

        await eventually(ready, timeout_s, every_s=0.5)

    async def memory(self, user: str) -> dict[str, Any]:
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{self.url}/v1/users/{user}/memory", timeout=30)
            response.raise_for_status()
            data: dict[str, Any] = response.json()
            return data

    def terminate(self, timeout_s: float = 60.0) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout_s)

    def interrupt(self, timeout_s: float = 90.0) -> int:
        """Ctrl-C as a terminal sends it: SIGINT to the whole foreground process group."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGINT)
        return self.process.wait(timeout=timeout_s)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=10)


@asynccontextmanager
async def up_running(data_dir: Path, *args: str, **env: str) -> AsyncIterator[UpProcess]:
    """`memoryos up` (with ``args``) as a child process, ready; stopped as a user stops it."""
    process = UpProcess(data_dir, args=args, **env)
    process.start()
    try:
        await process.wait_ready()
        yield process
    finally:
        process.terminate()


def model_processes(parent: int) -> list[int]:
    """The MiniLM processes (``adapters.embedders.model_process``) that ``parent`` started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:"))
        if int(ppid) == parent and b"adapters.embedders.model_process" in command:
            found.append(int(entry.name))
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def up_once(
    data_dir: Path, *args: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    """`memoryos up` on ``data_dir`` as a user runs it, for a start expected to fail: what it
    printed and how long it took."""
    settings = {
        "MEMORYOS_DATA_DIR": str(data_dir),
        "MEMORYOS_BROKER_PORT": str(free_port()),
        "MEMORYOS_PORT": str(free_port()),
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "streams.cli", "up", "--quiet", *args],
        env=os.environ | settings | env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done, time.monotonic() - started


def the_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a failed start says why in: exit 2, no traceback."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("memoryos:")]
    return line


def kill_everything(up: UpProcess) -> None:
    """SIGKILL to memoryos up and every process it started (the broker has its own session)."""
    assert up.process is not None
    family = [psutil.Process(up.process.pid), *psutil.Process(up.process.pid).children(True)]
    os.killpg(up.process.pid, signal.SIGKILL)
    for process in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.send_signal(signal.SIGKILL)
    up.process.wait(timeout=10)
    psutil.wait_procs(family, timeout=10)


async def memory_with(up: UpProcess, user: str, pages: int) -> dict[str, Any]:
    """The user's memory once it lists at least ``pages`` pages (recovery takes a while)."""

    async def complete() -> Any:
        memory = await up.memory(user)
        return memory if len(summary(memory)[2]) >= pages else None

    found: dict[str, Any] = await eventually(complete, 240, every_s=1.0)
    return found


def summary(memory: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """(STM turn ids, MTM turn ids, every turn id listed) of one memory document."""
    short = [p["turn_id"] for p in memory["short_term"]]
    mid = [p["turn_id"] for s in memory["mid_term"] for p in s["pages"]]
    return short, mid, short + mid


def child_outlives_killed_parent(script: str, timeout_s: float = 30.0) -> bool:
    """Runs ``script`` in a Python process of its own (it starts a child and prints the child's
    pid), SIGKILLs it, and tells whether the child was still running ``timeout_s`` later."""
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert running(child)
    finally:
        parent.kill()
        parent.wait(10)
    deadline = time.monotonic() + timeout_s
    while running(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    return running(child)
