"""A Faust table whose writes are counted: each set or delete is one record on its changelog
(`memoryos bench` reports records and bytes per turn, the tables' changelogs with the topics)."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

import orjson
from prometheus_client import Counter


class CountedTable(MutableMapping[str, Any]):
    def __init__(self, table: Any, records: Counter, size: Counter) -> None:
        self.table = table
        self.records = records  # the changelog's records, labelled with its topic
        self.size = size  # their value bytes

    def __getitem__(self, key: str) -> Any:
        return self.table[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.table.get(key, default)

    def __setitem__(self, key: str, value: Any) -> None:
        self.records.inc()
        self.size.inc(len(value) if isinstance(value, bytes | str) else len(orjson.dumps(value)))
        self.table[key] = value

    def __delitem__(self, key: str) -> None:
        self.records.inc()  # a tombstone
        del self.table[key]

    def pop(self, key: str, *default: Any) -> Any:
        # the table's own pop: a missing key reads as the table's default, not a KeyError
        if key in self.table:
            self.records.inc()
        return self.table.pop(key, *default)

    def __contains__(self, key: object) -> bool:
        return key in self.table

    def __iter__(self) -> Iterator[str]:
        return iter(self.table)

    def __len__(self) -> int:
        return len(self.table)
