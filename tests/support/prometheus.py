"""Prometheus' own binaries for the deploy tests: `promtool` and a throw-away `prometheus`.

Both come from Debian's `prometheus` package (`make test` installs it). A machine without them
fails the tests that need them, naming the package: a skip would hide that the alert rules
and the dashboard went untested.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from streams.broker import free_port
from tests.support.stacks import eventually

PACKAGE = "prometheus"


def binary(name: str) -> str:
    """The path of `prometheus` or `promtool`, or a failure that says what to install."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"{name} is not on PATH: install Debian's {PACKAGE!r} package "
            f"(apt-get install -y {PACKAGE}); `make test` does this itself",
            pytrace=False,
        )
    return path


class LivePrometheus:
    """A `prometheus` child process scraping one target every second, with its own config,
    storage and port under ``workdir``; ``rule_files`` are evaluated every second too."""

    def __init__(self, workdir: Path, target: str, job: str, rule_files: list[Path]) -> None:
        self.workdir = workdir
        self.target = target
        self.job = job
        self.rule_files = rule_files
        self.port = free_port()
        self.log = workdir / "prometheus.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config(self) -> dict[str, Any]:
        return {
            "global": {
                "scrape_interval": "1s",
                "scrape_timeout": "1s",
                "evaluation_interval": "1s",
            },
            "rule_files": [str(path) for path in self.rule_files],
            "scrape_configs": [
                {"job_name": self.job, "static_configs": [{"targets": [self.target]}]}
            ],
        }

    def start(self) -> None:
        command = binary("prometheus")
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "prometheus.yml"
        config.write_text(yaml.safe_dump(self.config()))
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    command,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={self.workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    async def wait_ready(self, timeout_s: float = 30.0) -> None:
        async def ready() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"prometheus exited: {self.log.read_text()[-3000:]}")
            try:
                async with httpx.AsyncClient() as client:
                    return (await client.get(f"{self.url}/-/ready", timeout=2)).status_code == 200
            except httpx.HTTPError:
                return False

        await eventually(ready, timeout_s, every_s=0.2)

    async def api(self, path: str, **params: str) -> Any:
        """The `data` of a /api/v1 answer; an error answer (a bad query) fails the test."""
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{self.url}/api/v1/{path}", params=params, timeout=10)
        body = response.json()
        assert body["status"] == "success", f"{path} {params}: {body}"
        return body["data"]

    async def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant vector's samples; a scalar answer comes back as one sample."""
        data = await self.api("query", query=expr)
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        result: list[dict[str, Any]] = data["result"]
        return result

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
