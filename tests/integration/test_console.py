"""The memory console in a real headless Chromium (Debian's, driven by Playwright) against
`memoryos up --demo`, as `make run` starts it: find a user, read each tier, correct, pin, delete
and add facts and see the API agree, ask why, replay a dead letter, forget a user, hostile text
shown as text, and a read-only key that sees no control to edit and is refused anyway.

The views' screenshots land in MEMORYOS_SCREENSHOT_DIR (`make screenshots`: docs/console, the
README's); otherwise in a temporary folder. The tests share one stack, in this order: the last
one makes a tenant key, which closes the open API.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import AsyncIterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from aiokafka import AIOKafkaProducer
from playwright.async_api import Browser, Page, async_playwright, expect

from tests.support.stacks import UpProcess, eventually, up_running

pytestmark = [
    pytest.mark.integration,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(not shutil.which("chromium"), reason="needs Debian's chromium (make test)"),
]
# Chromium as root in a container, with nothing of its own reaching for the internet
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HOSTILE = "<script>alert(1)</script>"
LAPTOP = {"width": 1366, "height": 768}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def up(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[UpProcess]:
    async with up_running(tmp_path_factory.mktemp("console-up"), "--demo") as up:
        # the demo runs once the stack is ready: its last line comes after its answers' visits
        await eventually(lambda: "try: curl" in up.log.read_text(), timeout_s=180)
        yield up


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(
            executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS
        )
        yield chromium
        await chromium.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = os.environ.get("MEMORYOS_SCREENSHOT_DIR")
    return Path(folder) if folder else tmp_path_factory.mktemp("screenshots")


@pytest_asyncio.fixture(loop_scope="module")
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport=LAPTOP)
    tab = await context.new_page()
    tab.dialogs = []  # type: ignore[attr-defined]
    tab.on("dialog", lambda dialog: tab.dialogs.append(dialog.message))  # type: ignore[attr-defined]
    yield tab
    await context.close()


async def api(up: UpProcess, method: str, path: str, key: str | None = None, **kw: Any) -> Any:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(base_url=up.url, headers=headers, timeout=30) as http:
        reply = await http.request(method, path, **kw)
        reply.raise_for_status()
        return reply.json()


async def facts_of(up: UpProcess, user: str) -> list[dict[str, Any]]:
    found = await api(up, "GET", f"/v1/users/{user}/facts", params={"limit": 500})
    return found["facts"]  # type: ignore[no-any-return]


async def view(page: Page, selector: str, path: Path) -> None:
    """A laptop screen's worth of the page from ``selector`` down."""
    await page.locator(selector).evaluate("element => element.scrollIntoView()")
    await page.screenshot(path=path)


async def open_user(page: Page, up: UpProcess, user: str) -> None:
    await page.goto(f"{up.url}/console/users/{user}")
    await page.wait_for_selector("body[data-ready]")
    await expect(page.locator("h1")).to_contain_text(user)


async def test_find_a_user_by_keyboard_and_read_each_tier(
    page: Page, up: UpProcess, shots: Path
) -> None:
    await page.goto(f"{up.url}/console")
    await page.wait_for_selector("body[data-ready]")
    await expect(page.locator("#user-list a")).to_have_text(["alice", "bob"])
    await page.screenshot(path=shots / "find.png")
    for _ in range(10):  # Tab through the page to the search field, as a keyboard user does
        await page.keyboard.press("Tab")
        if await page.evaluate("document.activeElement.id") == "find-user":
            break
    await page.keyboard.type("alice")
    await page.keyboard.press("Enter")
    await page.wait_for_url("**/console/users/alice")
    await page.wait_for_selector("body[data-ready]")

    memory = await api(up, "GET", "/v1/users/alice/memory")
    facts = await facts_of(up, "alice")
    await expect(page.locator("#short-term > ol > li")).to_have_count(len(memory["short_term"]))
    first = memory["short_term"][0]
    await expect(page.locator(f"#page-{first['page_id']}")).to_contain_text(first["query"])
    segments = page.locator("#mid-term article.segment")
    await expect(segments).to_have_count(len(memory["mid_term"]))
    hottest = max(memory["mid_term"], key=lambda s: s["heat"])
    heat = segments.first.locator("meter")
    await expect(heat).to_have_count(4)  # heat, N_visit, L_interaction, recency
    assert float(await heat.first.get_attribute("value") or 0) == pytest.approx(hottest["heat"])
    await expect(page.locator("#persona")).to_contain_text(memory["persona"]["user_knowledge"][0])
    stated = json.loads(await page.locator("#profile-json").input_value())
    assert stated == memory["persona"]["stated_profile"], "only what the API set is edited"
    await expect(page.locator("#facts tbody tr")).to_have_count(len(facts))
    await page.screenshot(path=shots / "user.png")

    # provenance: a fact's source turn links to its page in the tiers above
    extracted = next(f for f in facts if f["source"] != "api")
    link = page.locator(f"#fact-{extracted['fact_id']} a").first
    await link.click()
    assert page.url.endswith(f"#page-{extracted['source']['page_ids'][0]}")
    await expect(page.locator(f"#page-{extracted['source']['page_ids'][0]}")).to_be_visible()
    await view(page, "#facts", shots / "facts.png")

    history = await api(up, "GET", "/v1/users/alice/history")
    await expect(page.locator("#history tbody tr")).to_have_count(
        len(history["turns"]) + len(history["dead_letters"])
    )
    unlabelled = await page.evaluate(
        """[...document.querySelectorAll('input, select, textarea')]
           .filter(c => c.type !== 'hidden' && !c.labels.length && !c.getAttribute('aria-label'))
           .map(c => c.id || c.outerHTML)"""
    )
    assert unlabelled == [], "every control has a label"


async def test_why_this_answer_shows_the_context_in_prompt_order(
    page: Page, up: UpProcess, shots: Path
) -> None:
    question = "What size are my hiking boots?"
    before = await api(up, "GET", "/v1/users/alice/memory")
    await open_user(page, up, "alice")
    await page.get_by_role("textbox", name="Question", exact=True).fill(question)
    await page.get_by_role("button", name="Show the context").click()
    pages = page.locator("#why-result li.context-page")
    await expect(pages.first).to_be_visible()
    body = {"query": question, "record_visit": False}
    expected = await api(up, "POST", "/v1/users/alice/retrieve", json=body)
    await expect(pages).to_have_count(len(expected["context"]))
    best = expected["context"][0]
    await expect(pages.first).to_contain_text(f"#1 · score {expected['scores'][best]:.3f}")
    last = expected["context"][-1]
    if last not in expected["scores"]:  # the rest of the window follows the ranked pages
        await expect(pages.last).to_contain_text("unranked")
    await view(page, "#why", shots / "why.png")
    after = await api(up, "GET", "/v1/users/alice/memory")
    visits = {s["segment_id"]: s["n_visit"] for s in before["mid_term"]}
    assert {s["segment_id"]: s["n_visit"] for s in after["mid_term"]} == visits, (
        "looking is not a visit: the heat stays"
    )


async def test_correct_pin_delete_and_add_facts(page: Page, up: UpProcess) -> None:
    facts = [f for f in await facts_of(up, "bob") if not f["pinned"]]
    wrong, other = facts[0], facts[1]
    await open_user(page, up, "bob")
    row = page.locator(f"#fact-{wrong['fact_id']}")
    await row.get_by_role("button", name="Edit").click()
    await row.get_by_label("New text").fill("Bob's order number is TH-777.")
    await row.get_by_role("button", name="Save").click()
    await expect(page.locator("#status")).to_have_text("Applied.")
    corrected = {f["fact_id"]: f for f in await facts_of(up, "bob")}
    assert corrected[wrong["fact_id"]]["text"] == "Bob's order number is TH-777."

    await page.locator(f"#fact-{wrong['fact_id']}").get_by_role("button", name="Pin").click()
    await expect(page.locator(f"#fact-{wrong['fact_id']}")).to_contain_text("current, pinned")
    assert {f["fact_id"]: f for f in await facts_of(up, "bob")}[wrong["fact_id"]]["pinned"]

    page.once("dialog", lambda dialog: dialog.accept())
    await page.locator(f"#fact-{other['fact_id']}").get_by_role("button", name="Delete").click()
    await expect(page.locator(f"#fact-{other['fact_id']}")).to_have_count(0)
    assert other["fact_id"] not in {f["fact_id"] for f in await facts_of(up, "bob")}

    await page.get_by_label("New fact").fill("Bob prefers email to phone calls.")
    await page.get_by_role("button", name="Add fact").click()
    await expect(page.locator("#facts")).to_contain_text("Bob prefers email to phone calls.")
    added = [f for f in await facts_of(up, "bob") if f["text"].startswith("Bob prefers email")]
    assert [f["source"] for f in added] == ["api"]


async def test_hostile_text_is_shown_as_text(page: Page, up: UpProcess) -> None:
    hostile = {"query": HOSTILE, "response": '<img src=x onerror="alert(2)">'}
    await api(up, "POST", "/v1/users/mallory/turns", json=hostile)
    await api(up, "POST", "/v1/users/mallory/facts", json={"text": f"likes {HOSTILE}"})
    await api(up, "PUT", "/v1/users/mallory/profile", json={"<b>name</b>": HOSTILE})

    async def arrived() -> bool:
        memory = await api(up, "GET", "/v1/users/mallory/memory")
        return bool(memory["short_term"]) and bool(await facts_of(up, "mallory"))

    await eventually(arrived, timeout_s=60)
    await open_user(page, up, "mallory")
    await expect(page.locator("#short-term")).to_contain_text(HOSTILE)
    await expect(page.locator("#short-term")).to_contain_text('<img src=x onerror="alert(2)">')
    await expect(page.locator("#facts")).to_contain_text(f"likes {HOSTILE}")
    await expect(page.locator("#persona dl")).to_contain_text("<b>name</b>")
    assert await page.locator("main script, main img, main b").count() == 0
    assert page.dialogs == [], "nothing the customer wrote ran"  # type: ignore[attr-defined]


async def test_replay_a_dead_letter_from_the_pipeline_view(
    page: Page, up: UpProcess, shots: Path
) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{up.broker_port}")
    await producer.start()
    try:  # a record the chain stage cannot read: dead-lettered, noted in erin's history
        await producer.send_and_wait("memoryos.turns", b"{not json", key=b"erin")
    finally:
        await producer.stop()

    async def letters() -> int:
        history = await api(up, "GET", "/v1/users/erin/history")
        return len(history["dead_letters"])

    await eventually(letters, timeout_s=60)
    await open_user(page, up, "erin")
    await expect(page.locator("#history")).to_contain_text("invalid")
    await page.get_by_role("button", name="Replay the dead letter").first.click()
    await expect(page.locator("#status")).to_contain_text("Sent back 1")
    # sent back, it fails again the same way: a second note proves it went round the stage
    await eventually(lambda: _at_least(letters, 2), timeout_s=60)
    await view(page, "#history", shots / "pipeline.png")
    # once erin is forgotten, what failed before is never sent back
    await api(up, "DELETE", "/v1/users/erin")
    await eventually(lambda: _erased(up, "erin"), timeout_s=60)
    done = await api(up, "POST", "/v1/users/erin/dead-letters/replay", json={})
    assert (done["replayed"], done["skipped"]) == (0, 2)


async def _at_least(count: Any, n: int) -> bool:
    return bool(await count() >= n)


async def test_forget_a_user_with_a_confirmation_that_names_them(
    page: Page, up: UpProcess, shots: Path
) -> None:
    for n in range(2):
        turn = {"query": f"My locker code is 40{n}.", "response": "Noted."}
        await api(up, "POST", "/v1/users/dave/turns", json=turn)
    await eventually(lambda: _at_least(lambda: _pages(up, "dave"), 2), timeout_s=60)
    await open_user(page, up, "dave")
    await page.get_by_role("button", name="Forget dave…").click()
    dialog = page.locator("#forget-dialog")
    await expect(dialog).to_be_visible()
    await expect(dialog).to_contain_text("Type dave to confirm")
    confirm = dialog.get_by_role("button", name="Forget dave")
    await expect(confirm).to_be_disabled()
    await dialog.get_by_label("Type dave to confirm").fill("dav")
    await expect(confirm).to_be_disabled()
    await dialog.get_by_label("Type dave to confirm").fill("dave")
    await page.screenshot(path=shots / "forget.png")
    await confirm.click()
    await expect(page.locator("#erasure-state")).to_contain_text("Erasure complete", timeout=60_000)
    assert await _pages(up, "dave") == 0
    history = await api(up, "GET", "/v1/users/dave/history")
    assert history["erasure"]["complete"] is True
    await expect(page.locator("#short-term")).to_contain_text("No page")  # shown again


async def _erased(up: UpProcess, user: str) -> bool:
    erasure = (await api(up, "GET", f"/v1/users/{user}/history"))["erasure"]
    return bool(erasure and erasure["complete"])


async def test_a_page_whose_name_was_rebound_to_this_machine_reads_nothing(
    up: UpProcess,
) -> None:
    """DNS rebinding against the open API: rebound.test resolves to 127.0.0.1, so its pages are
    same-origin with the API, and a GET carries neither Origin nor Sec-Fetch-Site."""
    rebound = f"http://rebound.test:{up.port}"
    rules = "--host-resolver-rules=MAP rebound.test 127.0.0.1"
    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(
            executable_path=shutil.which("chromium"), args=[*CHROMIUM_ARGS, rules]
        )
        try:
            tab = await chromium.new_page()
            await tab.goto(f"{rebound}/console/users/alice")
            status = await tab.evaluate("fetch('/v1/users/alice/memory').then(r => r.status)")
            assert status == 403
            await tab.wait_for_selector("body[data-ready]")
            await expect(tab.locator("#who")).to_contain_text("loopback host name")
            await expect(tab.locator("main")).not_to_contain_text("Alpine Trek")
        finally:
            await chromium.close()


async def _pages(up: UpProcess, user: str) -> int:
    memory = await api(up, "GET", f"/v1/users/{user}/memory")
    return len(memory["short_term"]) + sum(len(s["pages"]) for s in memory["mid_term"])


class EvilPage(BaseHTTPRequestHandler):
    """Another site on this machine (another port: another origin), whose page posts to the
    API as a cross-site request forgery does."""

    target = ""

    def do_GET(self) -> None:
        script = (
            f"fetch({self.target!r}, {{method: 'POST', mode: 'no-cors'}})"
            ".finally(() => {{ document.title = 'sent'; }});"
        )
        body = f"<!doctype html><title>evil</title><script>{script}</script>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


async def test_another_sites_page_cannot_make_the_browser_write(page: Page, up: UpProcess) -> None:
    """A POST without a body (a replay) passes any content-type check: only the origin check
    stops it. The API has no keys here, as `make run` starts it."""
    EvilPage.target = f"{up.url}/v1/users/erin/dead-letters/replay"
    server = ThreadingHTTPServer(("127.0.0.1", 0), EvilPage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        async with page.expect_response(lambda r: "dead-letters/replay" in r.url) as sent:
            await page.goto(f"http://127.0.0.1:{server.server_port}/")
        assert (await sent.value).status == 403
    finally:
        server.shutdown()


async def test_scoped_keys_see_only_their_controls_and_are_refused_the_rest(
    page: Page, up: UpProcess
) -> None:
    """Last: a tenant key closes the open API for good."""
    admin = await api(up, "POST", "/v1/keys", json={"tenant": "default", "scopes": ["admin"]})
    keys = {"key": admin["key"]}  # the API is closed now: the tenant's admin makes the rest
    reader = await api(up, "POST", "/v1/keys", **keys, json={"scopes": ["read"]})
    agent = await api(up, "POST", "/v1/keys", **keys, json={"scopes": ["read", "write"]})
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    await page.goto(f"{up.url}/console/users/alice")
    await page.wait_for_selector("body[data-ready]")
    await expect(page.locator("#who")).to_contain_text("needs an API key")
    await page.get_by_label("API key").fill(reader["key"])
    await page.get_by_role("button", name="Use key").click()
    await page.wait_for_selector("body[data-ready]")
    await expect(page.locator("#short-term")).to_contain_text("User:")
    await expect(page.locator("#who")).to_contain_text("may read")
    for control in ("Edit", "Pin", "Delete", "Add fact", "Set profile", "Forget alice…", "Replay"):
        await expect(page.get_by_role("button", name=control, exact=True)).to_have_count(0)
    assert not any(reader["key"] in url for url in requests), "the key is never in an address"
    fact = (await facts_of_with(up, "alice", reader["key"]))[0]
    async with httpx.AsyncClient(base_url=up.url) as http:
        edit = await http.patch(
            f"/v1/users/alice/facts/{fact['fact_id']}",
            json={"text": "changed"},
            headers={"Authorization": f"Bearer {reader['key']}"},
        )
    assert edit.status_code == 403
    assert "write" in edit.json()["error"]

    # a support agent's key (read, write): facts and profile, but neither forget nor replay
    await page.get_by_role("button", name="Forget key").click()
    await page.wait_for_selector("body[data-ready]")
    await page.get_by_label("API key").fill(agent["key"])
    await page.get_by_role("button", name="Use key").click()
    await page.wait_for_selector("body[data-ready]")
    await expect(page.locator("#who")).to_contain_text("may read, write")
    await expect(page.get_by_role("button", name="Add fact", exact=True)).to_have_count(1)
    await expect(page.get_by_role("button", name="Set profile", exact=True)).to_have_count(1)
    for control in ("Forget alice…", "Replay all of this user's dead letters"):
        await expect(page.get_by_role("button", name=control, exact=True)).to_have_count(0)


async def facts_of_with(up: UpProcess, user: str, key: str) -> list[dict[str, Any]]:
    found = await api(up, "GET", f"/v1/users/{user}/facts", key=key)
    return found["facts"]  # type: ignore[no-any-return]
