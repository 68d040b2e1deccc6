"""The console's pages as HTTP (their behaviour in a browser: tests/integration/test_console.py)
and the API's refusal of what a browser sends on another site's behalf."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from service.cross_origin import cross_site_write, loopback_host
from tests.support.fake_service import AUTH, FakeMemory, build

TURN = {"query": "I like tea.", "response": "Noted."}


async def client_of(base_url: str, **settings: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(build(FakeMemory(), **settings))
    return httpx.AsyncClient(transport=transport, base_url=base_url)


@pytest.fixture
async def keyed() -> AsyncIterator[httpx.AsyncClient]:
    async with await client_of("http://memoryos.example") as http:
        yield http


@pytest.fixture
async def open_api() -> AsyncIterator[httpx.AsyncClient]:
    async with await client_of("http://127.0.0.1:8080", api_keys="") as http:
        yield http


@pytest.mark.parametrize("path", ["/console", "/console/users/alice", "/console/users/%3Cb%3E"])
async def test_every_view_is_the_same_shell_with_a_strict_policy(
    keyed: httpx.AsyncClient, path: str
) -> None:
    page = await keyed.get(path)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy
    assert "frame-ancestors 'none'" in policy
    assert page.headers["referrer-policy"] == "no-referrer"
    assert "<b>" not in page.text, "the shell holds no data"
    assert "alice" not in page.text


async def test_the_assets_are_served_and_nothing_else(keyed: httpx.AsyncClient) -> None:
    script = await keyed.get("/console/assets/console.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert ".innerHTML" not in script.text, "text goes into the page as text nodes only"
    for name in ("index.html", "..%2Fconsole.py", "%2E%2E", "missing.js"):
        missing = await keyed.get(f"/console/assets/{name}")
        assert missing.status_code == 404, name
        assert "no console asset" in missing.json()["error"] or missing.json()["error"] == (
            "Not Found"
        )


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},  # another port or subdomain is another origin
        {"Origin": "http://evil.example"},
        {"Origin": "http://memoryos.example:9999"},
        {"Origin": "null"},  # a sandboxed frame or a file
    ],
)
async def test_a_write_a_browser_sends_for_another_origin_is_refused(
    keyed: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    for method, path, body in (
        ("POST", "/v1/users/alice/turns", TURN),
        ("DELETE", "/v1/users/alice", None),
        ("PUT", "/v1/users/alice/profile", {"name": "x"}),
    ):
        reply = await keyed.request(method, path, json=body, headers=AUTH | headers)
        assert reply.status_code == 403, (method, headers)
        assert "cross-site" in reply.json()["error"]


@pytest.mark.parametrize(
    "headers",
    [
        {},  # not a browser: curl, the clients
        {"Sec-Fetch-Site": "same-origin"},
        {"Sec-Fetch-Site": "none"},
        {"Origin": "http://memoryos.example"},
    ],
)
async def test_a_write_from_the_consoles_own_origin_or_no_browser_passes(
    keyed: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    reply = await keyed.post("/v1/users/alice/turns", json=TURN, headers=AUTH | headers)
    assert reply.status_code == 202, reply.text


async def test_a_cross_site_read_is_left_to_the_browsers_own_rules(
    keyed: httpx.AsyncClient,
) -> None:
    """No CORS header is ever sent, so another site's script cannot read a reply."""
    reply = await keyed.get(
        "/v1/users/alice/memory", headers=AUTH | {"Sec-Fetch-Site": "cross-site"}
    )
    assert reply.status_code == 200
    assert "access-control-allow-origin" not in reply.headers


async def test_an_open_api_answers_only_on_a_loopback_name(open_api: httpx.AsyncClient) -> None:
    """DNS rebinding: a page of rebound.example re-pointed at 127.0.0.1 is same-origin to
    itself, and Chromium's same-origin GET over http carries neither Origin nor Sec-Fetch-*:
    only the Host it names gives it away."""
    for headers in ({"Host": "rebound.example:8080"},
                    {"Host": "rebound.example:8080", "Sec-Fetch-Site": "same-origin"}):  # fmt: skip
        reply = await open_api.get("/v1/users/alice/memory", headers=headers)
        assert reply.status_code == 403
        assert "loopback host name" in reply.json()["error"]
    for host in ("127.0.0.1:8080", "localhost:8080", "[::1]:8080", "localhost"):
        assert (await open_api.get("/v1/users/alice/memory", headers={"Host": host})).is_success
    pages = await open_api.get("/console", headers={"Host": "rebound.example:8080"})
    assert pages.status_code == 200, "the pages hold no data: the API behind them refuses"


async def test_with_keys_any_host_name_is_answered(keyed: httpx.AsyncClient) -> None:
    """A keyed API may sit behind any name (a proxy, a load balancer): its key guards it."""
    reply = await keyed.get("/v1/users/alice/memory", headers=AUTH)
    assert reply.status_code == 200


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("LOCALHOST:80", True),
        ("[::1]:8080", True),
        ("127.0.0.1.evil.example", False),
        ("localhost.evil.example:80", False),
        ("[::1].evil", False),
        ("", False),
    ],
)
def test_loopback_names(host: str, loopback: bool) -> None:
    assert loopback_host(host) is loopback


def test_safe_methods_are_never_cross_site_writes() -> None:
    assert not cross_site_write("GET", {"sec-fetch-site": "cross-site"})
    assert not cross_site_write("HEAD", {"origin": "http://evil.example"})
    assert cross_site_write("PATCH", {"origin": "http://[::1", "host": "x"})  # unparsable
