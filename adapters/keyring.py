"""Crypto-shredding: the user's text on our topics and changelogs is sealed with a data key
of the user's, kept in the store; DELETE destroys the key, so every copy a topic keeps until
its retention runs out is unreadable from then on.

Keys belong to a *generation*: the time (ms) of the user's last DELETE that the data was
written after, 0 before any. A DELETE deletes every document of the user, keys included, and
a key is only ever made for a generation no DELETE has ended, so data from before a DELETE
can never get a key again. Sealed records name their generation; a stage that cannot open one
drops it: it belongs to a forgotten user, and the DELETE's marker purges what it would have
become anyway.

Wire format: ``MAGIC``, the generation (int64), the user id (length-prefixed UTF-8), a 12-byte
nonce, then AES-256-GCM of the plaintext with everything before the nonce as associated data,
so a sealed record cannot be passed off as another user's or another generation's.
"""

from __future__ import annotations

import asyncio
import base64
import os
import struct
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from adapters.doc_codec import doc_data
from adapters.ports import PERSONAS
from adapters.repository import MemoryRepository
from schemas.errors import InvalidEvent

MAGIC = b"\x00mos1"
KEY_DOC = "data_key"
NONCE_BYTES = 12
_HEADER = struct.Struct(">qH")  # generation, length of the user id
SAME_DELETE_MS = 1  # stores keep ~15 digits of a float: one DELETE's time within a millisecond
BEFORE_OPEN_DELETE = 2  # a generation ended by the open DELETE (see ``Keyring.current``)
CACHED_KEYS = 100_000
CACHE_TTL_S = 60.0  # a key another process's DELETE destroyed stays usable here at most this long
MAX_USER_ID_BYTES = 2**16 - 1  # its length is an unsigned short


def _now() -> float:
    return time.monotonic()


def generation(at: float) -> int:
    """The generation a DELETE at ``at`` (epoch seconds) starts."""
    return round(at * 1000)


def is_sealed(raw: bytes) -> bool:
    return raw.startswith(MAGIC)


@dataclass(frozen=True)
class Opened:
    user_id: str
    gen: int
    plain: bytes


def _header(raw: bytes) -> tuple[int, str, int]:
    """(generation, user id, offset of the nonce) of a sealed record."""
    start = len(MAGIC)
    try:
        gen, size = _HEADER.unpack_from(raw, start)
        end = start + _HEADER.size + size
        user_id = raw[start + _HEADER.size : end].decode()
    except (struct.error, UnicodeDecodeError) as exc:
        raise InvalidEvent(f"sealed record has a malformed header: {exc}", field="body") from None
    if len(raw) < end + NONCE_BYTES + 16:
        raise InvalidEvent("sealed record is truncated", field="body")
    return gen, user_id, end


def describe_sealed(raw: bytes) -> str:
    """What can be said of a sealed record without its key (``memoryos dlq list``)."""
    try:
        gen, user_id, _ = _header(raw)
    except InvalidEvent as exc:
        return f"sealed, unreadable: {exc}"
    return f"sealed for user {user_id!r}, generation {gen}"


class Keyring:
    """Per-user data keys: made on first use, cached, destroyed with the user's documents."""

    def __init__(self, repo: MemoryRepository) -> None:
        self._repo = repo
        self._keys: OrderedDict[tuple[str, int], tuple[AESGCM, float]] = OrderedDict()
        # Striped: two stages of one process must not make two keys for one generation.
        self._locks = [asyncio.Lock() for _ in range(64)]

    async def latest(self, user_id: str) -> int:
        """The generation of the user's last DELETE, 0 if none."""
        stone = await self._repo.tombstone(user_id)
        return generation(stone[0]) if stone else 0

    async def current(self, user_id: str) -> int:
        """The generation of a user's event when the stage has no state of its own for them.

        While a DELETE is open (its marker has not passed every stage), a stage without state
        has not seen the marker either, so the event is from before the DELETE: its generation
        is one the DELETE ended, and no key is made for it.
        """
        stone = await self._repo.tombstone(user_id)
        if stone is None:
            return 0
        at, still_open = stone
        return generation(at) - BEFORE_OPEN_DELETE if still_open else generation(at)

    async def seal(self, user_id: str, gen: int, plain: bytes) -> bytes | None:
        """``plain`` sealed with the user's key of ``gen``; None if a DELETE ended ``gen``."""
        uid = user_id.encode()
        if len(uid) > MAX_USER_ID_BYTES:  # ids are validated long before; this is the format's
            raise InvalidEvent(f"user id of {len(uid)} bytes cannot be sealed", field="user_id")
        cipher = await self._cipher(user_id, gen, create=True)  # checked first: no key made
        if cipher is None:
            return None
        header = MAGIC + _HEADER.pack(gen, len(uid)) + uid
        nonce = os.urandom(NONCE_BYTES)
        return header + nonce + cipher.encrypt(nonce, plain, header)

    async def open(self, raw: bytes) -> Opened | None:
        """The plaintext of a sealed record; None if its key is destroyed (user forgotten)."""
        gen, user_id, end = _header(raw)
        cipher = await self._cipher(user_id, gen, create=False)
        if cipher is None:
            return None
        try:
            plain = cipher.decrypt(
                raw[end : end + NONCE_BYTES], raw[end + NONCE_BYTES :], raw[:end]
            )
        except InvalidTag:
            raise InvalidEvent("sealed record fails authentication", field="body") from None
        return Opened(user_id, gen, plain)

    async def seal_value(self, user_id: str, gen: int, value: Any) -> str | None:
        """A table value sealed (the changelog keeps it): base64 text, JSON-serialisable."""
        sealed = await self.seal(user_id, gen, orjson.dumps(value))
        return base64.b64encode(sealed).decode() if sealed is not None else None

    async def open_value(self, stored: Any) -> tuple[int, Any] | None:
        """(generation, value) of a sealed table value; None if unreadable or not sealed."""
        if not isinstance(stored, str):
            return None
        try:
            opened = await self.open(base64.b64decode(stored, validate=True))
        except (InvalidEvent, ValueError):
            return None
        return (opened.gen, orjson.loads(opened.plain)) if opened is not None else None

    async def last_delete(self, user_id: str) -> int:
        """The time of the user's last DELETE in ms, 0 if none (its store's answer)."""
        return await self._repo.last_delete(user_id)

    def forget(self, user_id: str) -> None:
        """Drop the user's cached keys: after a DELETE's marker, nothing older is sealed here."""
        for entry in [entry for entry in self._keys if entry[0] == user_id]:
            del self._keys[entry]

    async def destroy_before(self, user_id: str, gen: int) -> None:
        """Delete keys of generations before ``gen``: one made while its DELETE ran (it read
        no tombstone yet) outlives the DELETE's own purge; the last stage's pass ends it."""
        self.forget(user_id)
        points = await self._repo.flagged_docs(user_id, KEY_DOC)
        stale = [p.id for p in points if int(doc_data(p.payload)["gen"]) < gen - SAME_DELETE_MS]
        if stale:
            await self._repo.store.delete(PERSONAS, stale)

    async def _cipher(self, user_id: str, gen: int, create: bool) -> AESGCM | None:
        cached = self._keys.get((user_id, gen))
        if cached is not None and _now() - cached[1] < CACHE_TTL_S:
            self._keys.move_to_end((user_id, gen))
            return cached[0]
        async with self._locks[hash(user_id) % len(self._locks)]:
            doc = await self._repo.load_doc(user_id, _doc_kind(gen))
            if doc is not None:
                key = base64.b64decode(doc["key"])
            elif create and gen >= await self.latest(user_id) - SAME_DELETE_MS:
                key = AESGCM.generate_key(bit_length=256)
                data = {"gen": gen, "key": base64.b64encode(key).decode()}
                await self._repo.save_doc(user_id, _doc_kind(gen), data, **{KEY_DOC: 1})
            else:
                return None
            cipher = AESGCM(key)
            self._keys[(user_id, gen)] = (cipher, _now())
            self._keys.move_to_end((user_id, gen))
            if len(self._keys) > CACHED_KEYS:
                self._keys.popitem(last=False)
            return cipher


def _doc_kind(gen: int) -> str:
    """One document per generation: making a new generation's key never overwrites another."""
    return f"{KEY_DOC}:{gen}"
