"""The gatekeeper: an open API acts as the default tenant's operator, a tenant key always acts
as its own tenant, and a key made by another process closes the open API within seconds."""

from __future__ import annotations

import pytest

from adapters.api_keys import ApiKeys
from service import auth
from service.auth import OPERATOR, Gatekeeper
from tests.support.fakes import make_deps


async def test_a_key_made_elsewhere_acts_as_its_tenant_and_closes_the_open_api(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keys = ApiKeys((await make_deps()).repo)
    gate = Gatekeeper([], keys)
    assert await gate.principal("") == OPERATOR, "no keys at all: open, on loopback"
    _, key = await keys.create("acme", ("read",))  # another process, say the CLI
    found = await gate.principal(f"Bearer {key}")
    assert found is not None
    assert (found.tenant, found.key_id) == ("acme", key[4:20]), "never the operator"
    assert await gate.principal("Bearer mos_0000000000000000_" + "x" * 43) is None
    monkeypatch.setattr(auth, "OPEN_RECHECK_S", 0.0)
    assert await gate.principal("") is None, "the open API closed once it saw the key"


async def test_operator_keys_and_wrong_schemes() -> None:
    gate = Gatekeeper(["op-key"], ApiKeys((await make_deps()).repo))
    assert await gate.principal("Bearer op-key") == OPERATOR
    assert await gate.principal("Basic op-key") is None
    assert await gate.principal("Bearer op-keyX") is None
    assert await gate.principal("") is None
