"""`memoryos doctor [--json]`: check each configured backend live, and the data folder as it
is (store, journal, free space); exit 0 only if all pass."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer

from adapters import event_loop
from adapters.disk_space import MIB, DiskGuard
from adapters.embedders import build_embedder
from adapters.journal import journal_path
from adapters.llm import build_llm
from adapters.ports import Point
from adapters.settings import Settings
from adapters.stores import build_store, unshared_store
from adapters.stores.edge import EdgeStore
from schemas.errors import ConfigError, StoreError
from schemas.records import ChainLink, Page
from streams.kafka_security import kafka_client_options

PROBE_USER = "memoryos-doctor"


async def check_embedder(settings: Settings) -> dict[str, Any]:
    result: dict[str, Any] = {"backend": settings.embedder, "ok": False, "dim": 0}
    try:
        embedder = build_embedder(settings)
        try:
            vector = (await embedder.embed(["memoryos doctor"]))[0]
        finally:  # a failed call too: an HTTP client left open is logged as a leak
            await embedder.close()
        result.update(ok=len(vector) == embedder.dim, dim=len(vector), detail="one text embedded")
        if not result["ok"]:
            result["detail"] = f"got {len(vector)} dimensions, expected {embedder.dim}"
    except Exception as exc:
        result["detail"] = f"{type(exc).__name__}: {exc}"
    return result


async def check_store(settings: Settings, dim: int) -> dict[str, Any]:
    result: dict[str, Any] = {"backend": settings.store, "ok": False, "detail": ""}
    try:
        store = build_store(settings)
        await store.ensure_collections(dim)
        vector = [1.0] + [0.0] * (dim - 1)
        probe = Point("00000000-0000-5000-8000-00000000d0c7", vector, {"user_id": PROBE_USER})
        await store.upsert("pages", [probe])
        hits = await store.search("pages", PROBE_USER, vector, 1)
        removed = await store.delete_user("pages", PROBE_USER)
        await store.close()
        result["ok"] = bool(hits) and hits[0].id == probe.id and removed == 1
        result["detail"] = (
            "upsert, search, delete round trip" if result["ok"] else "round trip failed"
        )
    except Exception as exc:
        result["detail"] = f"{type(exc).__name__}: {exc}"
    return result


async def check_llm(settings: Settings) -> dict[str, Any]:
    result: dict[str, Any] = {"backend": settings.llm, "ok": False, "detail": ""}
    try:
        llm = build_llm(settings)
        page = Page(
            page_id="doctor",
            user_id=PROBE_USER,
            turn_id="doctor",
            query="Hello, I am Ada.",
            response="Nice to meet you, Ada.",
            timestamp="2024-01-01T00:00:00Z",
            chain=ChainLink(chain_id="doctor"),
        )
        try:
            verdict = await llm.continuity(None, page)
        finally:
            await llm.close()
        result["ok"] = bool(verdict.summary)
        result["detail"] = f"continuity call answered: {verdict.summary[:60]!r}"
    except Exception as exc:
        result["detail"] = f"{type(exc).__name__}: {exc}"
    return result


async def check_broker(url: str | None, settings: Settings) -> dict[str, Any]:
    if not url:
        return {"url": None, "ok": None, "detail": "embedded broker (started by memoryos up)"}
    try:
        # A TLS or SASL setting that cannot be loaded is this check's failure, not a crash.
        options = kafka_client_options(settings)
    except ConfigError as exc:
        return {"url": url, "ok": False, "detail": str(exc)}
    producer = AIOKafkaProducer(
        bootstrap_servers=url.removeprefix("kafka://"), request_timeout_ms=5000, **options
    )
    try:
        await asyncio.wait_for(producer.start(), 10)
        topics = await producer.client.fetch_all_metadata()
        return {"url": url, "ok": True, "detail": f"metadata: {len(topics.topics())} topics"}
    except Exception as exc:
        return {"url": url, "ok": False, "detail": f"{type(exc).__name__}: {exc}"}
    finally:
        await producer.stop()


async def check_edge_folder(settings: Settings, dim: int) -> dict[str, Any]:
    """The real data folder's store, opened as `memoryos up` opens it (its log replayed): a
    damaged log fails here as it would at start. A folder with no store yet gets a round trip
    in a scratch folder instead; one a running stack holds is left to its /readyz."""
    folder = settings.data_dir / "qdrant"
    if not folder.exists():
        with tempfile.TemporaryDirectory() as scratch:
            probed = await check_store(settings.model_copy(update={"data_dir": Path(scratch)}), dim)
        probed["detail"] += f" (in a scratch folder: {folder} holds no store yet)"
        return probed
    result: dict[str, Any] = {"backend": f"edge at {folder}", "ok": False, "detail": ""}
    store = EdgeStore(folder)
    try:
        await store.ensure_collections(dim)
        pages = await store.count("pages")
        result.update(ok=True, detail=f"opened, its log read whole: {pages} pages")
    except StoreError as exc:
        if "in use by another memoryos process" in str(exc):
            result.update(ok=None, detail="in use by a running stack: its /readyz reports it")
        else:
            result["detail"] = str(exc)
    finally:
        await store.close()
    return result


async def check_journal(settings: Settings) -> dict[str, Any]:
    path = journal_path(settings)
    result: dict[str, Any] = {"backend": f"sqlite at {path}", "ok": None, "detail": ""}
    if settings.journal == "off" or not path.exists():
        result["detail"] = "off" if settings.journal == "off" else "none yet"
        return result
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            verdict = db.execute("PRAGMA quick_check").fetchone()[0]
            waiting = db.execute("SELECT count(*) FROM inbox").fetchone()[0]
        ok = verdict == "ok"
        detail = f"{waiting} turns waiting to be stored" if ok else f"damaged: {verdict}"
        result.update(ok=ok, detail=detail)
    except sqlite3.Error as exc:
        result.update(ok=False, detail=f"cannot be read: {exc}")
    return result


def check_disk(settings: Settings) -> dict[str, Any]:
    guard = DiskGuard(settings.data_dir, settings.min_free_mb * MIB)
    free = guard.free_bytes()
    result: dict[str, Any] = {"backend": str(settings.data_dir), "ok": free >= guard.floor_bytes}
    result["detail"] = (
        f"{free // MIB} MiB free, {settings.min_free_mb} MiB kept"
        if result["ok"]
        else guard.shortfall(free)
    )
    return result


def check_roles(settings: Settings, broker_url: str | None) -> dict[str, Any]:
    """With a Kafka broker, the store must be one that workers and replicas share."""
    result: dict[str, Any] = {"backend": settings.store, "ok": None, "detail": "embedded"}
    if broker_url:
        problem = unshared_store(settings)
        result["ok"] = problem is None
        result["detail"] = (
            f"{problem} (`memoryos worker` and `memoryos serve` refuse it; only "
            "`memoryos up --broker` runs on it)"
            if problem
            else "a store every worker and replica shares"
        )
    return result


async def diagnose(settings: Settings, broker: str | None) -> dict[str, Any]:
    disk = check_disk(settings)  # first: opening a store maps new log segments
    embedder = await check_embedder(settings)
    dim = embedder["dim"] or settings.embedding_dim
    if settings.store == "edge" and not disk["ok"]:
        store = {"backend": "edge", "ok": None, "detail": "not opened: the disk is under its floor"}
    elif settings.store == "edge":
        store = await check_edge_folder(settings, dim)
    else:
        store = await check_store(settings, dim)
    llm = await check_llm(settings)
    broker_url = broker or settings.broker_url
    return {
        "roles": check_roles(settings, broker_url),
        "llm": llm,
        "embedder": embedder,
        "store": store,
        "journal": await check_journal(settings),
        "disk": disk,
        "broker": await check_broker(broker_url, settings),
    }


def main(args: argparse.Namespace, settings: Settings) -> int:
    report = event_loop.run(diagnose(settings, args.broker))
    healthy = all(part["ok"] is not False for part in report.values())
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
    else:
        for name, part in report.items():
            mark = {True: "ok  ", False: "FAIL", None: "skip"}[part["ok"]]
            backend = part.get("backend") or part.get("url") or "embedded"
            print(
                f"{mark} {name:<9} {backend}: {part.get('detail', '')}"
                + (f" (dim {part['dim']})" if name == "embedder" else "")
            )
    if not healthy:
        print("memoryos doctor: some checks failed", file=sys.stderr)
    return 0 if healthy else 1
