"""Every dashboard and alert query has data against a real Prometheus scraping `memoryos up`.

The static checks (test_deploy_static.py) hold query names and labels against `Metrics`; this
runs the queries. The test drives `memoryos up` (the LLM is the fake OpenAI server, the
embedder the bundled MiniLM): it ingests turns, retrieves, responds, dead-letters a malformed
record and fails two LLM calls, while a Prometheus from Debian's `prometheus` package scrapes
it and evaluates alerts.yml every second. Then each query must return a sample with a value,
unless ALLOWED_EMPTY says why it may not.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from aiokafka import AIOKafkaProducer

from evaluation.fake_openai import FakeOpenAI, Fault
from schemas.topics import TURNS
from tests.support.deploy import DEPLOY, load_dashboard, load_yaml, panels
from tests.support.prometheus import LivePrometheus
from tests.support.receiver import receiving
from tests.support.stacks import UpProcess, eventually

RULES = DEPLOY / "prometheus" / "alerts.yml"
USER = "alice"
CHAT = [
    (f"Question {i}: I am planning trip {i % 3} to the mountains.", "Enjoy!") for i in range(12)
]

# Queries that may have no data at the end of this run although their metrics were exported.
# Alert conditions only: each one's metrics are still required, through the same expression
# with its thresholds taken out (`unconditioned`).
ALLOWED_EMPTY = {
    "alert MemoryOSConsumerLagGrowing": "a dozen turns never lag 1000 records behind",
    "alert MemoryOSTargetDown": "the scraped `memoryos up` is up",
    "alert MemoryOSRetrieveLatencyHigh": "retrieve p99 over 30 ms depends on the machine's load",
    "alert MemoryOSBrokerRollFailing": "a dozen turns never fill the broker's budget",
    "alert MemoryOSDiskAlmostFull": "the test's disk has room (tests/integration fills one)",
}


# --- the queries ---


def substitute(expr: str, dashboard: dict[str, Any], window: str) -> str:
    """What Grafana sends for a panel query: template variables set to "All"."""
    expr = expr.replace("$__rate_interval", window)
    for variable in dashboard["templating"]["list"]:
        expr = re.sub(rf"\$(?:{{{variable['name']}}}|{variable['name']}\b)", ".*", expr)
    assert "$" not in expr, f"unknown template variable in {expr!r}"
    return expr


def dashboard_queries(dashboard: dict[str, Any], window: str) -> Iterator[tuple[str, str]]:
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            name = f"{panel['title']} [{target.get('legendFormat') or target['expr'][:40]}]"
            yield name, substitute(target["expr"], dashboard, window)


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in load_yaml(RULES)["groups"] for rule in group["rules"]]


def unconditioned(expr: str) -> str:
    """The alert's expression with every `op number` comparison made always true, so it keeps
    a sample wherever its metrics and label matching produce one."""
    return re.sub(r"(==|!=|>=|<=|>|<)\s*-?[0-9.]+(?![\w.])", ">= -Inf", expr)


def test_unconditioned_takes_out_thresholds_only() -> None:
    assert unconditioned('up{job="a"} == 0') == 'up{job="a"} >= -Inf'
    assert unconditioned('x{outcome!="ok"} / y > 0.05') == 'x{outcome!="ok"} / y >= -Inf'
    assert (
        unconditioned("histogram_quantile(0.99, z) > 0.030")
        == "histogram_quantile(0.99, z) >= -Inf"
    )


def has_data(samples: list[dict[str, Any]]) -> bool:
    """A sample Grafana would draw: NaN (a quantile of no observations, 0/0) is a gap."""
    return any(not math.isnan(float(sample["value"][1])) for sample in samples)


# --- the run ---


def openai_env(fake: FakeOpenAI) -> dict[str, str]:
    """The LLM is the fake server (for fault injection); embeddings stay on MiniLM, so an
    injected fault can only hit an LLM call."""
    return {
        "MEMORYOS_LLM": "openai",
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": "test-key",
        "MEMORYOS_LLM_MODEL": "fake-model",
        "MEMORYOS_LLM_BACKOFF_BASE_S": "0.001",
        "MEMORYOS_LLM_BACKOFF_MAX_S": "0.01",
        "MEMORYOS_LLM_TIMEOUT_S": "5",
    }


async def post(up: UpProcess, path: str, body: Any) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.post(f"{up.url}/v1{path}", json=body, timeout=30)


async def produce_malformed(up: UpProcess) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{up.broker_port}")
    await producer.start()
    try:
        await producer.send_and_wait(TURNS, b"{not json", key=USER.encode())
    finally:
        await producer.stop()


async def quiet(fake: FakeOpenAI, for_s: float = 2.0) -> None:
    """Wait until the pipeline has made no LLM call for a while, so the next fault is
    taken by the request the test makes."""

    def idle() -> bool:
        calls = fake.calls()
        return bool(calls) and time.monotonic() - calls[-1].at > for_s

    await eventually(idle, 120, every_s=0.5)


async def scraped(prometheus: LivePrometheus, expr: str) -> None:
    """Wait until Prometheus has a sample for ``expr`` (it scrapes every second)."""

    async def present() -> bool:
        return bool(await prometheus.query(expr))

    await eventually(present, 30, every_s=0.5)


async def pages_stored(up: UpProcess, count: int) -> None:
    """Wait until the user's memory holds ``count`` pages, short- and mid-term."""

    async def stored() -> bool:
        memory = await up.memory(USER)
        pages = memory["short_term"] + [p for s in memory["mid_term"] for p in s["pages"]]
        return len(pages) >= count

    await eventually(stored, 120)


async def ingest(up: UpProcess, fake: FakeOpenAI, prometheus: LivePrometheus) -> None:
    turns = [{"user_id": USER, "query": q, "response": r} for q, r in CHAT]
    assert (await post(up, "/turns", turns)).status_code == 202
    await produce_malformed(up)
    await pages_stored(up, len(CHAT))
    await scraped(prometheus, "memoryos_dead_letters_total")
    await quiet(fake)


async def fail_llm_calls(up: UpProcess, fake: FakeOpenAI, prometheus: LivePrometheus) -> None:
    # Two failures, each scraped before the next: an error counter is born at 1, and rate()
    # sees it only once it moves.
    for count in (1, 2):
        fake.inject(Fault.quota())
        response = await post(up, f"/users/{USER}/respond", {"query": "Where am I going?"})
        assert response.status_code == 503, response.text
        assert fake.calls("respond")[-1].fault == "status", "the fault missed the respond call"
        await scraped(prometheus, f'sum(memoryos_llm_requests_total{{outcome="error"}}) == {count}')


async def retrieve(up: UpProcess, query: str) -> None:
    response = await post(up, f"/users/{USER}/retrieve", {"query": query})
    assert response.status_code == 200, response.text


async def serve(up: UpProcess, fake: FakeOpenAI, prometheus: LivePrometheus) -> None:
    # Like every labelled series, retrieve's latency histogram is born at its first request;
    # later requests must land in later scrapes for rate() to see any.
    await retrieve(up, "mountains")
    await scraped(prometheus, 'memoryos_request_duration_seconds_count{route="retrieve"}')
    for query in ("trip 1", "what did I plan?"):
        await retrieve(up, query)
    response = await post(up, f"/users/{USER}/respond", {"query": "Where am I going?"})
    assert response.status_code == 200, response.text
    await pages_stored(up, len(CHAT) + 1)  # the answer went back into the pipeline as a turn
    await quiet(fake)


async def exercise(up: UpProcess, fake: FakeOpenAI, prometheus: LivePrometheus) -> None:
    await ingest(up, fake, prometheus)
    await serve(up, fake, prometheus)
    await fail_llm_calls(up, fake, prometheus)
    await scraped(prometheus, "memoryos_consumer_lag")  # probed every few seconds


# --- the test ---


@asynccontextmanager
async def running(
    tmp_path: Path, fake: FakeOpenAI
) -> AsyncIterator[tuple[UpProcess, LivePrometheus]]:
    """`memoryos up` and a Prometheus scraping it, both ready; a webhook receives its events."""
    with receiving() as receiver:
        hooks = orjson.dumps([receiver.hook("/ok")]).decode()
        up = UpProcess(tmp_path / "data", **openai_env(fake), MEMORYOS_WEBHOOKS=hooks)
        # `memoryos up` is a worker and the service in one process: scraped once, as `service`.
        target = f"127.0.0.1:{up.port}"
        prometheus = LivePrometheus(tmp_path / "prometheus", target, "service", [RULES])
        # First, and not in a fixture: without the binary the test fails (not errors) at once.
        prometheus.start()
        try:
            up.start()
            await prometheus.wait_ready()
            await up.wait_ready()
            yield up, prometheus
        finally:
            prometheus.stop()
            if up.process is not None:
                up.terminate()


async def queries_without_data(prometheus: LivePrometheus, window: str) -> dict[str, str]:
    dashboard = load_dashboard()
    queries = dict(dashboard_queries(dashboard, window))
    for rule in alert_rules():
        queries[f"alert {rule['alert']}"] = rule["expr"]
        queries[f"alert {rule['alert']} (unconditioned)"] = unconditioned(rule["expr"])
    assert set(ALLOWED_EMPTY) <= set(queries), "ALLOWED_EMPTY names a query that is gone"
    return {name: e for name, e in queries.items() if not has_data(await prometheus.query(e))}


async def alert_states(prometheus: LivePrometheus) -> dict[str, str]:
    """Each rule's state once Prometheus has evaluated it without error."""
    [group] = (await prometheus.api("rules"))["groups"]
    for rule in group["rules"]:
        assert rule["health"] == "ok", f"{rule['name']}: {rule.get('lastError')}"
    return {rule["name"]: rule["state"] for rule in group["rules"]}


async def dead_letters_alert_fired(prometheus: LivePrometheus) -> dict[str, str]:
    states = await alert_states(prometheus)
    return states if states["MemoryOSDeadLetters"] == "firing" else {}


async def dead_letters_shown(prometheus: LivePrometheus) -> float:
    [panel] = [p for p in panels(load_dashboard()) if p["title"] == "Dead letters (1h)"]
    [sample] = await prometheus.query(panel["targets"][0]["expr"])
    return float(sample["value"][1])


async def check_queries(prometheus: LivePrometheus, window: str) -> None:
    empty = await queries_without_data(prometheus, window)
    unexpected = sorted(set(empty) - set(ALLOWED_EMPTY))
    assert not unexpected, "no data for:\n" + "\n".join(f"{n}: {empty[n]}" for n in unexpected)
    stages = await prometheus.api("label/stage/values", **{"match[]": "memoryos_events_total"})
    assert "stm" in stages, "the $stage variable lists the stages"
    assert await dead_letters_shown(prometheus) >= 1


async def check_alerts(prometheus: LivePrometheus) -> None:
    states = await eventually(lambda: dead_letters_alert_fired(prometheus), 30, every_s=0.5)
    assert states["MemoryOSLLMFailureRate"] == "pending", "two of three respond calls failed"
    assert states["MemoryOSTargetDown"] == "inactive"


@pytest.mark.integration
async def test_every_dashboard_and_alert_query_has_data(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    async with running(tmp_path, fake_openai) as (up, prometheus):
        started = time.monotonic()
        await exercise(up, fake_openai, prometheus)
        # A rate window over the whole run, so every burst of activity is inside it.
        window = f"{math.ceil(time.monotonic() - started) + 10}s"
        await check_queries(prometheus, window)
        await check_alerts(prometheus)
