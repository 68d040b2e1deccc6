"""`memoryos keys create|list|revoke`: tenants' API keys.

On the data folder of a stopped embedded stack (or a shared Qdrant server) the keys are written
to the store directly; when a running stack holds the data folder, the command goes through its
HTTP API (``/v1/keys``) with the operator's key (the first of MEMORYOS_API_KEYS). A new key is
printed once, alone on the last line of stdout: only its hash is kept.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import httpx

from adapters import event_loop
from adapters.api_keys import ApiKeys
from adapters.repository import MemoryRepository
from adapters.settings import Settings
from adapters.stores import build_store
from adapters.wiring import open_store
from schemas.errors import MemoryOSError, StoreError
from schemas.tenants import DEFAULT_TENANT, parse_scopes

IN_USE = "in use by another memoryos process"


def main(args: argparse.Namespace, settings: Settings) -> int:
    try:
        if args.action == "create":
            parse_scopes(args.scopes or "")  # refused before anything is opened
        if args.action == "revoke" and not args.key_id:
            raise ValueError("revoke needs the key's id: memoryos keys revoke KEY_ID")
        try:
            result = event_loop.run(_on_store(args, settings))
        except StoreError as exc:
            if IN_USE not in str(exc):
                raise
            result = _through_service(args, settings)
    except (MemoryOSError, ValueError) as exc:
        print(f"memoryos keys: {exc}", file=sys.stderr)
        return 2
    except httpx.HTTPError as exc:
        print(f"memoryos keys: the data folder is in use, and no service answers at the URL "
              f"(pass --url of the running stack): {exc!r}", file=sys.stderr)  # fmt: skip
        return 2
    _print(args.action, result)
    return 0


async def _on_store(args: argparse.Namespace, settings: Settings) -> Any:
    store = build_store(settings)
    try:
        await open_store(store, settings, settings.embedding_dim)
        keys = ApiKeys(MemoryRepository(store))
        if args.action == "create":
            record, key = await keys.create(
                args.tenant or DEFAULT_TENANT, parse_scopes(args.scopes), args.name or "", args.rate
            )
            return record.public() | {"key": key}
        if args.action == "list":
            return [record.public() for record in await keys.all(args.tenant)]
        return (await keys.revoke(args.key_id)).public()
    finally:
        await store.close()


def _through_service(args: argparse.Namespace, settings: Settings) -> Any:
    url = (args.url or f"http://{settings.host}:{settings.port}").rstrip("/")
    operator = settings.api_key_list
    headers = {"Authorization": f"Bearer {operator[0]}"} if operator else {}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        if args.action == "create":
            tenant = args.tenant or DEFAULT_TENANT
            body = {"tenant": tenant, "scopes": list(parse_scopes(args.scopes))}
            extra = {"name": args.name or "", "rate_limit": args.rate}
            reply = client.post("/v1/keys", json=body | extra)
        elif args.action == "list":
            reply = client.get("/v1/keys", params={"tenant": args.tenant} if args.tenant else {})
        else:
            reply = client.delete(f"/v1/keys/{args.key_id}")
    if reply.status_code >= 400:
        try:
            reason = reply.json().get("error", reply.text)
        except ValueError:
            reason = reply.text[:300]
        raise ValueError(f"the running service at {url} answered {reply.status_code}: {reason}")
    data = reply.json()
    return data["keys"] if args.action == "list" else data


def _print(action: str, result: Any) -> None:
    if action == "list":
        for key in result:
            state = "revoked" if key["revoked_at"] else "live"
            print(f"{key['key_id']}  {key['tenant']}  {','.join(key['scopes'])}  {state}  "
                  f"{key['name']}")  # fmt: skip
        return
    if action == "revoke":
        print(f"revoked {result['key_id']} of tenant {result['tenant']}")
        return
    print(f"key {result['key_id']} of tenant {result['tenant']}, scopes "
          f"{','.join(result['scopes'])}: shown once, keep it now")  # fmt: skip
    print(result["key"])
