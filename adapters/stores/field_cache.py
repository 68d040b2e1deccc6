"""A few payload fields of recently searched points, for Qdrant Edge searches.

Edge reads a point's whole payload from its storage to hand back even four fields of it: for
a retrieve's two pools of 100 pages that was most of each search's time; without the payload,
and the fields from here, a search takes far less (`python -m tools.edge_search_speed`
times both).

Coherent because one process owns an Edge folder (its lock) and every write goes through the
one ``EdgeStore`` that owns this cache: a write forgets the points it touches before it goes
to the shard and again once it has landed, so a search that ran while a write was in a worker
thread cannot leave the old fields behind. Bounded: least recently used entries go first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

Fields = tuple[str, ...]


class FieldCache:
    def __init__(self, max_points: int) -> None:
        self.max_points = max_points
        # (collection, fields) -> point id -> those fields of its payload
        self._entries: dict[tuple[str, Fields], OrderedDict[str, dict[str, Any]]] = {}

    def get(self, collection: str, fields: Fields, point_ids: Iterable[str]) -> dict[str, Any]:
        """The cached fields of those points that are cached (each one marked as used)."""
        entries = self._entries.get((collection, fields))
        found: dict[str, Any] = {}
        if not entries:
            return found
        for point_id in point_ids:
            value = entries.get(point_id)
            if value is not None:
                entries.move_to_end(point_id)
                found[point_id] = value
        return found

    def put(self, collection: str, fields: Fields, payloads: Mapping[str, dict[str, Any]]) -> None:
        if self.max_points <= 0:
            return
        entries = self._entries.setdefault((collection, fields), OrderedDict())
        entries.update(payloads)
        for point_id in payloads:
            entries.move_to_end(point_id)
        while len(entries) > self.max_points:
            entries.popitem(last=False)

    def forget(self, collection: str, point_ids: Iterable[str]) -> None:
        ids = list(point_ids)
        for (name, _), entries in self._entries.items():
            if name == collection:
                for point_id in ids:
                    entries.pop(point_id, None)

    def forget_collection(self, collection: str) -> None:
        for key in [key for key in self._entries if key[0] == collection]:
            del self._entries[key]

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._entries.values())
