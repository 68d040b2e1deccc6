"""A start that cannot work fails at once: one line saying what to set, exit 2, no child left.

Each of these once started the broker, the model and the worker first, then printed a
traceback (and, for the HTTP port, stayed up logging thousands of broker errors).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from streams.broker import free_port
from tests.support.stacks import the_line, up_once

pytestmark = pytest.mark.integration


def test_an_unreachable_kafka_fails_in_seconds_with_one_line(tmp_path: Path) -> None:
    done, took = up_once(tmp_path / "data", "--broker", f"kafka://127.0.0.1:{free_port()}")
    assert took < 20
    line = the_line(done)
    assert "cannot reach the Kafka broker" in line
    assert "MEMORYOS_BROKER_URL" in line
    assert done.stderr.count("\n") <= 3  # no aiokafka error line per try


def test_up_refuses_a_journal_that_is_not_a_database_with_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "journal.sqlite3").write_bytes(b"\xab" * 65536)
    done, _ = up_once(data)
    line = the_line(done)
    assert "journal.sqlite3 cannot be opened (file is not a database)" in line
    assert "move it aside" in line


def test_up_on_a_busy_http_port_exits_at_once_with_one_line_and_no_child(tmp_path: Path) -> None:
    """Before: the broker, the model and the worker started, a bind traceback was printed and
    the process stayed up logging aiokafka errors."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker_port = free_port()
        env = os.environ | {
            "MEMORYOS_DATA_DIR": str(tmp_path / "data"),
            "MEMORYOS_BROKER_PORT": str(broker_port),
            "MEMORYOS_PORT": str(port),
        }
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "streams.cli", "up", "--quiet"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert time.monotonic() - started < 10
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("memoryos:")]
    assert f"cannot listen on 127.0.0.1:{port}" in line
    assert "MEMORYOS_PORT" in line
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(broker_port) in " ".join(
        p.info["cmdline"] or [])]  # fmt: skip


def test_an_unreachable_qdrant_server_fails_in_seconds_with_one_line(tmp_path: Path) -> None:
    """After the broker started: the line, and the broker child stopped with the process."""
    broker_port = str(free_port())
    done, took = up_once(
        tmp_path / "data",
        MEMORYOS_STORE="qdrant",
        MEMORYOS_QDRANT_URL="http://127.0.0.1:1",
        MEMORYOS_BROKER_PORT=broker_port,
    )
    assert took < 30
    line = the_line(done)
    commands = [" ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"])]
    assert not [command for command in commands if broker_port in command]
    assert "cannot reach the Qdrant server at http://127.0.0.1:1 after 3 tries" in line
    assert "MEMORYOS_QDRANT_URL" in line
