"""`memoryos export` and `memoryos import`: a tenant's memory to an NDJSON file and back,
through a running service's ``/v1/export`` and ``/v1/import`` (scope admin; the key is
``--key``, or the first of MEMORYOS_API_KEYS).

An import is sent in parts of at most ``PART_BYTES``, each with the header line first, so a
file of any size fits under the service's body limit; importing twice changes nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import httpx

from adapters.settings import Settings

PART_BYTES = 512 * 1024
TIMEOUT = httpx.Timeout(600.0, connect=5.0)


def export_main(args: argparse.Namespace, settings: Settings) -> int:
    params = {"user_id": args.user} if args.user else {}
    try:
        with (
            _client(args, settings) as client,
            client.stream("GET", "/v1/export", params=params) as reply,
        ):
            if reply.status_code >= 400:
                reply.read()
                return _failed("export", reply)
            for line in reply.iter_lines():
                if line:
                    sys.stdout.write(line + "\n")
    except httpx.HTTPError as exc:
        print(f"memoryos export: cannot reach the service: {exc!r}", file=sys.stderr)
        return 2
    return 0


def import_main(args: argparse.Namespace, settings: Settings) -> int:
    path: Path = args.file
    if not path.is_file():
        print(f"memoryos import: no file {path}", file=sys.stderr)
        return 2
    totals: dict[str, int] = {}
    with path.open("rb") as lines, _client(args, settings) as client:
        head = lines.readline()
        part: list[bytes] = []
        size = 0
        for line in lines:
            if size + len(line) > PART_BYTES and part:
                if not _send(client, head, part, totals):
                    return 1
                part, size = [], 0
            part.append(line if line.endswith(b"\n") else line + b"\n")
            size += len(line)
        if not _send(client, head, part, totals):
            return 1
    print(f"imported {sum(totals.values())} points: " + ", ".join(
        f"{count} {collection}" for collection, count in sorted(totals.items())))  # fmt: skip
    return 0


def _send(client: httpx.Client, head: bytes, part: list[bytes], totals: dict[str, int]) -> bool:
    body = head if head.endswith(b"\n") else head + b"\n"
    reply = client.post(
        "/v1/import",
        content=body + b"".join(part),
        headers={"Content-Type": "application/x-ndjson"},
    )
    if reply.status_code >= 400:
        _failed("import", reply)
        return False
    for collection, count in reply.json()["imported"].items():
        totals[collection] = totals.get(collection, 0) + count
    return True


def _client(args: argparse.Namespace, settings: Settings) -> httpx.Client:
    url = (args.url or f"http://{settings.host}:{settings.port}").rstrip("/")
    key = args.key or next(iter(settings.api_key_list), None)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=url, headers=headers, timeout=TIMEOUT)


def _failed(what: str, reply: httpx.Response) -> int:
    try:
        reason: Any = reply.json().get("error", reply.text)
    except ValueError:
        reason = reply.text[:300]
    print(f"memoryos {what}: the service answered {reply.status_code}: {reason}", file=sys.stderr)
    return 1
