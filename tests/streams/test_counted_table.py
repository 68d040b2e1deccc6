"""A table's writes counted as its changelog's records (the bench's records per turn)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from streams.counted_table import CountedTable


class DefaultNone(dict[str, object]):
    """A Faust table with ``default=None``: a missing key reads as None, and del raises."""

    def __getitem__(self, key: str) -> object:
        return self.get(key)


def counted() -> tuple[CountedTable, Counter, Counter]:
    registry = CollectorRegistry()
    records = Counter("records", "", registry=registry)
    size = Counter("bytes", "", registry=registry)
    return CountedTable(DefaultNone(), records, size), records, size


def test_sets_and_deletes_are_records_reads_are_not() -> None:
    table, records, size = counted()
    table["ann"] = b"12345"
    table["bob"] = {"gen": 1, "tail": None}
    assert table["ann"] == b"12345"
    assert table.get("carl") is None
    assert table["carl"] is None, "the table's default, not a KeyError"
    assert "ann" in table
    assert len(table) == 2
    del table["ann"]
    assert records._value.get() == 3
    assert size._value.get() == 5 + len(b'{"gen":1,"tail":null}')


def test_pop_of_a_missing_key_is_no_record_and_no_error() -> None:
    table, records, _ = counted()
    assert table.pop("ann", None) is None
    assert records._value.get() == 0
    table["ann"] = "x"
    assert table.pop("ann", None) == "x"
    assert records._value.get() == 2
