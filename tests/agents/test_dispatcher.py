"""Key-ordered concurrency: one key in order, keys independent, pending work bounded."""

from __future__ import annotations

import asyncio

from adapters.token_budget import TokenBudget, acting_for, current_tenant
from agents.runtime import KeyedDispatcher


async def test_one_key_in_order_keys_concurrently_and_a_slow_key_holds_back_only_itself() -> None:
    dispatcher = KeyedDispatcher(max_pending=100)
    log: list[tuple[str, int, str]] = []
    slow_release = asyncio.Event()

    def work(key: str, index: int) -> object:
        async def run() -> None:
            log.append((key, index, "start"))
            if key == "slow" and index == 0:
                await slow_release.wait()
            await asyncio.sleep(0)
            log.append((key, index, "end"))

        return run

    for index in range(3):
        for key in ("slow", "fast"):
            await dispatcher.submit(key, work(key, index))  # type: ignore[arg-type]
    for _ in range(20):
        await asyncio.sleep(0)
    # The fast key finished while the slow one is still inside its first event.
    assert [e for e in log if e[0] == "fast" and e[2] == "end"] == [
        ("fast", 0, "end"),
        ("fast", 1, "end"),
        ("fast", 2, "end"),
    ]
    assert ("slow", 1, "start") not in log
    slow_release.set()
    await dispatcher.join()
    slow = [(i, what) for key, i, what in log if key == "slow"]
    assert slow == [(0, "start"), (0, "end"), (1, "start"), (1, "end"), (2, "start"), (2, "end")]
    assert dispatcher.pending_users == 0


async def test_submit_waits_when_too_much_is_pending() -> None:
    dispatcher = KeyedDispatcher(max_pending=2)
    release = asyncio.Event()

    async def blocked() -> None:
        await release.wait()

    await dispatcher.submit("a", blocked)
    await dispatcher.submit("b", blocked)
    third = asyncio.create_task(dispatcher.submit("c", blocked))
    await asyncio.sleep(0.01)
    assert not third.done(), "a third event waits for a free slot"
    release.set()
    await third
    await dispatcher.join()


async def test_a_failing_event_does_not_stop_its_key() -> None:
    dispatcher = KeyedDispatcher(max_pending=10)
    done: list[int] = []

    async def boom() -> None:
        raise RuntimeError("escaped the runner")

    async def fine() -> None:
        done.append(1)

    await dispatcher.submit("k", boom)
    await dispatcher.submit("k", fine)
    await dispatcher.join()
    assert done == [1]


async def test_a_key_s_queued_events_come_in_runs_in_order() -> None:
    runs: list[list[tuple[str, int]]] = []
    first_started, release = asyncio.Event(), asyncio.Event()

    async def handle_run(run: list[tuple[str, int]]) -> None:
        runs.append(run)
        first_started.set()
        if len(runs) == 1:
            await release.wait()  # while the first run is held, the key's next events queue

    dispatcher: KeyedDispatcher[tuple[str, int]] = KeyedDispatcher(100, handle_run, run_max=3)
    await dispatcher.submit("a", ("a", 0))
    await first_started.wait()
    for index in range(1, 6):
        await dispatcher.submit("a", ("a", index))
    await dispatcher.submit("b", ("b", 0))
    release.set()
    await dispatcher.join()
    by_key = {key: [run for run in runs if run[0][0] == key] for key in ("a", "b")}
    assert by_key["a"] == [[("a", 0)], [("a", 1), ("a", 2), ("a", 3)], [("a", 4), ("a", 5)]]
    assert by_key["b"] == [[("b", 0)]]
    assert dispatcher.pending_users == 0


async def test_work_waiting_for_a_spent_tenant_gives_its_places_to_the_other_tenants() -> None:
    """acme has spent its LLM tokens of the day: its users' events wait for the next day, in
    their users' order, and zeta's pass them, though acme's waiting events outnumber every
    shared place."""
    now = [0.0]
    budget = TokenBudget(100, clock=lambda: now[0], poll_s=0.01)
    budget.charge(100, tenant="acme")
    dispatcher = KeyedDispatcher(max_pending=4)
    done: list[str] = []

    def work(user: str, index: int) -> object:
        async def run() -> None:
            with acting_for(user):
                await budget.wait_until_open(current_tenant())
            done.append(f"{user}#{index}")

        return run

    acme = [(f"acme/u{n % 6}", n) for n in range(20)]  # 6 users, 20 events: 5x the places
    for user, index in acme:
        await asyncio.wait_for(dispatcher.submit(user, work(user, index)), 1.0)  # type: ignore[arg-type]
    for n in range(8):
        await asyncio.wait_for(dispatcher.submit(f"zeta/u{n}", work(f"zeta/u{n}", n)), 1.0)  # type: ignore[arg-type]
    for _ in range(50):
        await asyncio.sleep(0)
    assert sorted(done) == sorted(f"zeta/u{n}#{n}" for n in range(8))
    now[0] = 86_400.0  # the next day: acme's work goes on, each user's in order
    await asyncio.wait_for(dispatcher.join(), 5.0)
    for user in {user for user, _ in acme}:
        mine = [entry for entry in done if entry.startswith(user + "#")]
        assert mine == [f"{user}#{index}" for u, index in acme if u == user]
    assert dispatcher._slots._value == 4, "every shared place is back"
