"""A local webhook receiver on a real socket, with the behaviours a test needs per path:
``/ok`` answers 204, ``/flaky`` 503 three times per webhook-id then 204, ``/hang`` never
answers (until the receiver stops), ``/picky`` never answers for user ann's events and 204 for
the others, ``/redirect`` redirects to itself, ``/huge`` answers 200
and then trickles a body of 64 MiB, ``/gone`` answers 410, ``/slow`` answers 204 after
``slow_s`` seconds. ``probe``, if given, is called with each event ``/ok`` receives before it
answers (what the receiver could see at that moment), and its result kept by webhook-id."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
from standardwebhooks import Webhook as Verifier

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # 24 bytes, base64
FLAKY_FAILURES = 3


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def event(self) -> dict[str, Any]:
        data: dict[str, Any] = orjson.loads(self.body)
        return data

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]


Probe = Callable[[dict[str, Any]], Any]


class Receiver:
    def __init__(self, slow_s: float = 0.0, probe: Probe | None = None) -> None:
        self.slow_s = slow_s
        self.probe = probe
        self.probed: dict[str, Any] = {}
        self.received: list[Received] = []  # answered 2xx
        self.attempts: Counter[tuple[str, str]] = Counter()  # (path, webhook-id) -> attempts
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = self.rfile.read(length)
                if len(body) < length:
                    return  # the sender died mid-request (a SIGKILL): nothing was delivered
                headers = {key.lower(): value for key, value in self.headers.items()}
                receiver.answer(self, self.path, headers, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def hook(self, path: str, types: list[str] | None = None) -> dict[str, Any]:
        hook: dict[str, Any] = {"url": self.base + path, "secret": SECRET}
        if types is not None:
            hook["types"] = types
        return hook

    def answer(
        self, handler: BaseHTTPRequestHandler, path: str, headers: dict[str, str], body: bytes
    ) -> None:
        key = (path, headers.get("webhook-id", ""))
        with self.lock:
            self.attempts[key] += 1
            attempt = self.attempts[key]
        if path == "/hang" or (path == "/picky" and b'"subject":"ann"' in body):
            self.stopping.wait(600)
            return
        if path == "/flaky" and attempt <= FLAKY_FAILURES:
            return self._status(handler, 503)
        if path == "/redirect":
            handler.send_response(302)
            handler.send_header("location", self.base + "/redirect")
            handler.send_header("content-length", "0")
            handler.end_headers()
            return
        if path == "/gone":
            return self._status(handler, 410)
        if path == "/huge":
            handler.send_response(200)
            handler.send_header("content-length", str(64 * 1024 * 1024))
            handler.end_headers()
            self._record(path, headers, body)
            try:
                while not self.stopping.is_set():
                    handler.wfile.write(b"x" * 1024)
                    time.sleep(0.05)
            except OSError:
                pass  # the sender hung up without reading: what it should do
            return
        if path == "/slow":
            time.sleep(self.slow_s)
        if path == "/ok" and self.probe is not None:
            seen = self.probe(orjson.loads(body))
            with self.lock:
                self.probed[headers.get("webhook-id", "")] = seen
        self._record(path, headers, body)
        self._status(handler, 204)

    def _record(self, path: str, headers: dict[str, str], body: bytes) -> None:
        with self.lock:
            self.received.append(Received(path, headers, body))

    def _status(self, handler: BaseHTTPRequestHandler, status: int) -> None:
        handler.send_response(status)
        handler.send_header("content-length", "0")
        handler.end_headers()

    def at(self, path: str) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.path == path]

    def events(self, path: str, user: str | None = None) -> list[dict[str, Any]]:
        return [r.event for r in self.at(path) if user is None or r.event["subject"] == user]


def verified(received: Received, secret: str = SECRET) -> dict[str, Any]:
    """The body, once Standard Webhooks' own library has checked its signature and time."""
    payload: dict[str, Any] = Verifier(secret).verify(received.body, received.headers)
    return payload


@contextmanager
def receiving(slow_s: float = 0.0, probe: Probe | None = None) -> Iterator[Receiver]:
    receiver = Receiver(slow_s, probe)
    receiver.thread.start()
    try:
        yield receiver
    finally:
        receiver.stopping.set()
        receiver.server.shutdown()
        receiver.server.server_close()
