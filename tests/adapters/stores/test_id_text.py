"""Point ids as text: Edge's ``uuid.UUID`` ids give their canonical text, from the kept texts
or formatted anew, and the kept texts stay bounded."""

from __future__ import annotations

import uuid

import pytest

from adapters.stores import common
from adapters.stores.common import id_text


def test_a_uuid_gives_its_canonical_text_each_time() -> None:
    point_id = uuid.uuid5(uuid.NAMESPACE_URL, "page-1")
    assert id_text(point_id) == str(point_id)
    assert id_text(uuid.UUID(str(point_id))) == str(point_id)  # an equal id, another object
    assert id_text(str(point_id)) == str(point_id)
    assert id_text(7) == "7"
    assert common._ID_TEXTS[point_id.int] == str(point_id), "kept for the next time"


def test_the_kept_texts_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "ID_TEXTS_MAX", 10)
    monkeypatch.setattr(common, "_ID_TEXTS", {})
    ids = [uuid.uuid4() for _ in range(25)]
    assert [id_text(point_id) for point_id in ids] == [str(point_id) for point_id in ids]
    assert 0 < len(common._ID_TEXTS) <= 10
