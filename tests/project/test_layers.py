"""The layers hold at run time too: the stateless service loads no worker code."""

from __future__ import annotations

import subprocess
import sys


def test_the_response_service_loads_neither_faust_nor_the_agents() -> None:
    probe = (
        "import sys, service.response, service.http, service.mcp\n"
        "worker = ('faust', 'mode', 'agents')\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in worker)\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_shipped_code_imports_nothing_from_tests() -> None:
    probe = (
        "import sys, streams.cli, evaluation.bench, evaluation.locomo, evaluation.bench_llm\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] == 'tests')))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
