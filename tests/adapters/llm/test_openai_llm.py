"""OpenAILLM driving the real ``openai`` client against the fake server."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from adapters.llm import build_llm
from adapters.llm.offline_llm import OfflineLLM
from adapters.llm.openai_llm import Completion, OpenAILLM, read_completion
from adapters.llm.retry import ErrorReply, RetryPolicy, openai_client
from adapters.ports import PromptMemory
from adapters.settings import Settings
from evaluation.fake_openai import FakeOpenAI, Fault
from schemas.errors import LLMError, LLMQuotaExceeded
from schemas.records import Page, Trait
from tests.support.builders import page
from tests.support.fixtures import settings_for

DIALOGUE = "User: I plan a trip to Berlin.\nAssistant: Visit the Pergamon museum.\nTime: 2023-10-01"


class RecordingSleep:
    """Records backoff delays instead of waiting them out."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


class TopOfRange(random.Random):
    """Full jitter always drawing the ceiling, so the exponential growth is visible."""

    def uniform(self, a: float, b: float) -> float:
        return b


def exchange(query: str, response: str = "Sure.") -> Page:
    """Page ``p1`` of 1 October 2023, in chain ``c1`` about a trip."""
    return page(
        1,
        query,
        response,
        timestamp=datetime(2023, 10, 1, tzinfo=UTC),
        chain_id="c1",
        summary="User plans a trip.",
    )


@pytest.fixture
def sleeps() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture
async def llm(fake_openai: FakeOpenAI, sleeps: RecordingSleep) -> AsyncIterator[OpenAILLM]:
    client = OpenAILLM(settings_for(fake_openai), sleep=sleeps, rng=TopOfRange())
    yield client
    await client.close()


async def make(fake: FakeOpenAI, sleeps: RecordingSleep, **overrides: Any) -> OpenAILLM:
    return OpenAILLM(settings_for(fake, **overrides), sleep=sleeps, rng=TopOfRange())


async def test_every_task_parses_the_canned_replies(
    llm: OpenAILLM, fake_openai: FakeOpenAI
) -> None:
    verdict = await llm.continuity(exchange("Berlin trip"), exchange("Which museum in Berlin?"))
    assert verdict.continuous is True
    assert "Berlin" in verdict.summary
    first = await llm.continuity(None, exchange("Hello"))
    assert first.continuous is False  # nothing to continue, whatever the model says
    topics = await llm.topics(DIALOGUE)
    assert [t.theme for t in topics] == ["Business trip", "Health"]
    assert await llm.segment_summary("", DIALOGUE)
    known = {"Openness": Trait(level="Low")}
    traits = await llm.user_traits(known, DIALOGUE)
    assert traits["Travel Interest"].level == "High"
    assert traits["Openness"].level == "Low"
    assert len(await llm.user_knowledge(DIALOGUE)) == 2
    assert await llm.agent_traits(DIALOGUE) == ["I recommended the Pergamon museum on 2023-10-01."]
    answer = await llm.respond(
        "You are role-playing as Assistant", "Where?", PromptMemory("Where?", [])
    )
    assert answer.text == "Berlin"
    assert answer.prompt_tokens > 0
    assert answer.completion_tokens == 1
    tasks = [r.task for r in fake_openai.requests]
    assert tasks == [
        "continuity", "continuity", "topics", "segment_summary", "user_traits",
        "user_knowledge", "agent_traits", "respond",
    ]  # fmt: skip


async def test_usage_is_counted_per_task(llm: OpenAILLM, fake_openai: FakeOpenAI) -> None:
    await llm.topics(DIALOGUE)
    await llm.topics(DIALOGUE)
    usage = llm.usage["topics"]
    assert usage.calls == 2
    assert usage.completion_tokens > 0
    assert usage.prompt_tokens > 100
    assert usage.failures == 0


async def test_retry_after_is_honoured(
    llm: OpenAILLM, fake_openai: FakeOpenAI, sleeps: RecordingSleep
) -> None:
    fake_openai.inject(Fault.rate_limit(retry_after=2))
    assert await llm.topics(DIALOGUE)
    assert len(sleeps.delays) == 1
    assert sleeps.delays[0] >= 2
    assert len(fake_openai.requests) == 2


async def test_server_errors_retry_with_growing_backoff(
    llm: OpenAILLM, fake_openai: FakeOpenAI, sleeps: RecordingSleep
) -> None:
    fake_openai.inject(Fault.server_error(500), Fault.unavailable(), Fault.rate_limit())
    assert await llm.segment_summary("", DIALOGUE)
    assert sleeps.delays == pytest.approx([0.001, 0.002, 0.004])
    assert llm.usage["segment_summary"].failures == 3
    assert llm.usage["segment_summary"].calls == 4


def test_backoff_is_full_jitter_under_the_cap() -> None:
    policy = RetryPolicy(max_retries=5, base_s=0.5, max_s=4.0)
    rng = random.Random(7)
    for attempt in range(10):
        ceiling = min(4.0, 0.5 * 2**attempt)
        delays = [policy.backoff(attempt, rng) for _ in range(50)]
        assert all(0.0 <= delay <= ceiling for delay in delays)
    assert policy.backoff(100, TopOfRange()) == 4.0


async def test_timeouts_are_retried(fake_openai: FakeOpenAI, sleeps: RecordingSleep) -> None:
    llm = await make(fake_openai, sleeps, llm_timeout_s=0.2)
    fake_openai.inject(Fault.delay(0.6))
    try:
        assert await llm.topics(DIALOGUE)
    finally:
        await llm.close()
    assert len(sleeps.delays) == 1
    assert len(fake_openai.calls("topics")) == 2


async def test_an_answer_trickled_past_the_timeout_is_cut_and_retried(
    fake_openai: FakeOpenAI, sleeps: RecordingSleep
) -> None:
    """Each byte comes well within the client's read timeout; the call as a whole does not."""
    llm = await make(fake_openai, sleeps, llm_timeout_s=1.0, llm_max_retries=1, llm_max_in_flight=1)
    fake_openai.inject(Fault.trickle(0.05), Fault.trickle(0.05))
    try:
        with pytest.raises(LLMError, match=r"gave up after 2 attempts \(AttemptTimeout"):
            await llm.respond("You are role-playing as Assistant", "Hi", PromptMemory("Hi", []))
        assert await llm.topics(DIALOGUE)  # the calls' slots were given back
    finally:
        await llm.close()
    assert len(sleeps.delays) == 1
    assert llm.usage["respond"].failures == 2


async def test_the_wait_for_a_slot_among_the_calls_in_flight_is_not_the_timeout(
    fake_openai: FakeOpenAI, sleeps: RecordingSleep
) -> None:
    """One slot: the second call waits for the first's answer, then answers within its own
    bound; timed from the wait, both together would be past it."""
    llm = await make(fake_openai, sleeps, llm_timeout_s=1.0, llm_max_in_flight=1)
    fake_openai.inject(Fault.delay(0.6), Fault.delay(0.6))
    try:
        assert all(await asyncio.gather(llm.topics(DIALOGUE), llm.topics(DIALOGUE)))
    finally:
        await llm.close()
    assert sleeps.delays == []
    assert llm.usage["topics"].failures == 0
    assert len(fake_openai.calls("topics")) == 2


async def test_insufficient_quota_is_not_retried(
    llm: OpenAILLM, fake_openai: FakeOpenAI, sleeps: RecordingSleep
) -> None:
    fake_openai.inject(Fault.quota(), Fault.quota())
    with pytest.raises(LLMQuotaExceeded):
        await llm.topics(DIALOGUE)
    assert len(fake_openai.requests) == 1
    assert sleeps.delays == []


async def test_exhausted_retries_raise_and_return_no_text(
    llm: OpenAILLM, fake_openai: FakeOpenAI, sleeps: RecordingSleep
) -> None:
    fake_openai.inject(*[Fault.server_error()] * 4)  # 1 try + llm_max_retries=3
    with pytest.raises(LLMError) as caught:
        await llm.respond("You are role-playing as Assistant", "Hi", PromptMemory("Hi", []))
    assert not isinstance(caught.value, LLMQuotaExceeded)
    assert "gave up after 4 attempts" in str(caught.value)
    assert len(fake_openai.requests) == 4
    assert len(sleeps.delays) == 3


async def test_client_errors_are_not_retried(llm: OpenAILLM, fake_openai: FakeOpenAI) -> None:
    fake_openai.inject(Fault.bad_request())
    with pytest.raises(LLMError, match="HTTP 400"):
        await llm.user_knowledge(DIALOGUE)
    assert len(fake_openai.requests) == 1


async def test_fenced_json_and_think_blocks_parse(llm: OpenAILLM, fake_openai: FakeOpenAI) -> None:
    fake_openai.inject(Fault.fenced_json(), Fault.think(), Fault.think())
    assert len(await llm.topics(DIALOGUE)) == 2
    assert (await llm.continuity(exchange("a trip"), exchange("the trip"))).continuous is True
    assert "Travel Interest" in await llm.user_traits({}, DIALOGUE)
    assert len(fake_openai.requests) == 3  # no repair turns were needed


async def test_garbage_gets_one_repair_turn(llm: OpenAILLM, fake_openai: FakeOpenAI) -> None:
    fake_openai.inject(Fault.garbage())
    topics = await llm.topics(DIALOGUE)
    assert topics[0].theme == "Business trip"  # the model's repaired reply
    repair = fake_openai.requests[1].body["messages"]
    assert repair[-2]["role"] == "assistant"
    assert "could not be parsed" in repair[-1]["content"]
    assert "Reply again with only" in repair[-1]["content"]
    assert llm.usage["topics"].fallbacks == 0


async def test_garbage_twice_falls_back_to_offline(llm: OpenAILLM, fake_openai: FakeOpenAI) -> None:
    fake_openai.inject(Fault.garbage(), Fault.garbage())
    topics = await llm.topics(DIALOGUE)
    assert topics == await OfflineLLM(announce=False).topics(DIALOGUE)
    assert len(fake_openai.requests) == 2
    assert llm.usage["topics"].fallbacks == 1
    assert llm.usage["topics"].failures == 2


@pytest.mark.parametrize(
    "body",
    [
        "<html>Bad gateway</html>",
        '{"choices": []}',
        '{"choices": [{"message": {"content": 42}}]}',
        '["not", "a", "completion"]',
        '{"error": {"message": "beside choices"}, "choices": []}',
    ],
)
async def test_a_body_that_is_not_a_chat_completion_is_refused_like_garbage(
    llm: OpenAILLM, fake_openai: FakeOpenAI, body: str
) -> None:
    fake_openai.inject(Fault.body(body), Fault.body(body))
    topics = await llm.topics(DIALOGUE)
    assert topics == await OfflineLLM(announce=False).topics(DIALOGUE)
    assert llm.usage["topics"].fallbacks == 1
    assert llm.usage["topics"].failures == 2
    assert llm.usage["topics"].prompt_tokens == 0  # nothing counted from a body without usage


async def test_the_client_talks_through_aiohttp_and_keeps_the_proxy_variables(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ALL_PROXY", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    http = openai_client(settings_for(fake_openai))._client
    proxied = list(http._mounts.values())
    assert [str(t.proxy.url) for t in proxied] == ["http://proxy.example:3128"]
    assert {type(t).__name__ for t in [http._transport, *proxied]} == {"AiohttpTransport"}


async def test_a_reply_that_is_not_http_is_retried_then_an_llm_error(
    sleeps: RecordingSleep,
) -> None:
    """A peer that answers with something other than HTTP (here an SSH banner)."""
    attempts = 0

    async def banner(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal attempts
        attempts += 1
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(banner, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    settings = Settings(
        llm="openai", openai_base_url=f"http://127.0.0.1:{port}/v1", llm_max_retries=2
    )
    llm = OpenAILLM(settings, sleep=sleeps, rng=TopOfRange())
    try:
        with pytest.raises(LLMError, match="gave up after 3 attempts"):
            await llm.continuity(None, exchange("Hello"))
    finally:
        await llm.close()
        server.close()
    assert attempts == 3
    assert llm.usage["continuity"].failures == 3
    assert len(sleeps.delays) == 2


def test_a_completion_body_is_read_for_its_text_and_token_counts() -> None:
    body = b'{"choices": [{"message": {"role": "assistant", "content": "Hi"}}],'
    body += b' "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}}'
    assert read_completion(body) == Completion("Hi", 12, 3)
    odd = b'{"choices": [{"message": {"content": "Hi"}}], "usage": {"prompt_tokens": -1,'
    odd += b' "completion_tokens": true}}'
    assert read_completion(odd) == Completion("Hi", 0, 0)
    assert read_completion(b"") == Completion("")
    # what orjson refuses and the client's own JSON reader took: a byte-order mark
    assert read_completion(b"\xef\xbb\xbf" + body) == Completion("Hi", 12, 3)


def test_a_content_in_parts_is_read_as_its_text_parts() -> None:
    parts = [{"type": "text", "text": "Hel"}, {"type": "image_url"}, {"type": "text", "text": "lo"}]
    body = orjson.dumps({"choices": [{"message": {"content": parts}}]})
    assert read_completion(body) == Completion("Hello")


def test_an_error_object_in_a_200_is_an_error_reply_not_an_empty_answer() -> None:
    with pytest.raises(ErrorReply, match="upstream overloaded") as caught:
        read_completion(b'{"error": {"message": "upstream overloaded", "type": "server_error"}}')
    assert caught.value.transient
    assert not caught.value.quota
    with pytest.raises(ErrorReply) as caught:
        read_completion(b'{"error": {"message": "no such model", "type": "invalid_request_error"}}')
    assert not caught.value.transient
    with pytest.raises(ErrorReply) as caught:
        read_completion(b'{"error": {"code": "insufficient_quota"}}')
    assert caught.value.quota
    nested = b'{"error": ' + b"[" * 1000 + b"]" * 1000 + b"}"  # no repr of it in the message
    with pytest.raises(ErrorReply, match=r"the body is an error: \{"):
        read_completion(nested)
    with pytest.raises(ErrorReply) as caught:  # fields of any JSON type
        read_completion(b'{"error": {"type": ["a"], "code": {"b": 1}, "message": 7}}')
    assert caught.value.transient
    beside = b'{"error": null, "choices": [{"message": {"content": "Hi"}}]}'
    assert read_completion(beside) == Completion("Hi")
    assert read_completion(b"[" * 5000 + b"]" * 5000) == Completion("")  # too deep to read
    # what json reads and orjson refuses, and nothing downstream could write
    assert read_completion(b'{"choices": [{"message": {"content": "ok \\ud800"}}]}') == Completion(
        ""
    )
    assert read_completion(b'{"error": {"message": "\\udc80 boom"}}') == Completion("")
    huge = b'{"choices": [{"message": {"content": "Hi"}}], "usage": {"prompt_tokens": 1' + b"0" * 30
    assert read_completion(huge + b"}}") == Completion("Hi")  # orjson's float: not a count
    assert read_completion(b"\xef\xbb\xbf" + huge + b"}}") == Completion("")  # json's int


ERROR_BODY = '{"error": {"message": "upstream overloaded", "type": "server_error"}}'


async def test_an_error_object_in_a_200_is_retried_like_a_5xx(
    llm: OpenAILLM, fake_openai: FakeOpenAI, sleeps: RecordingSleep
) -> None:
    fake_openai.inject(Fault.body(ERROR_BODY))
    assert await llm.topics(DIALOGUE)
    assert len(fake_openai.calls("topics")) == 2
    assert len(sleeps.delays) == 1
    assert llm.usage["topics"].failures == 1
    assert llm.usage["topics"].fallbacks == 0
    fake_openai.inject(*[Fault.body(ERROR_BODY)] * 4)  # 1 try + llm_max_retries=3
    with pytest.raises(LLMError, match=r"gave up after 4 attempts .*upstream overloaded"):
        await llm.topics(DIALOGUE)


async def test_an_error_object_that_says_the_request_is_wrong_is_not_retried(
    llm: OpenAILLM, fake_openai: FakeOpenAI, sleeps: RecordingSleep
) -> None:
    fake_openai.inject(
        Fault.body('{"error": {"message": "no such model", "type": "invalid_request_error"}}')
    )
    with pytest.raises(LLMError, match="no such model"):
        await llm.topics(DIALOGUE)
    fake_openai.inject(Fault.body('{"error": {"message": "spent", "code": "insufficient_quota"}}'))
    with pytest.raises(LLMQuotaExceeded):
        await llm.topics(DIALOGUE)
    assert len(fake_openai.calls("topics")) == 2
    assert sleeps.delays == []


async def test_several_pages_topics_in_one_call(llm: OpenAILLM, fake_openai: FakeOpenAI) -> None:
    dialogues = [DIALOGUE, DIALOGUE.replace("Berlin", "Rome"), DIALOGUE.replace("trip", "move")]
    found = await llm.topics_many(dialogues)
    assert [r.task for r in fake_openai.requests] == ["topics_batch"]
    alone = await llm.topics(DIALOGUE)
    assert found == [alone, alone, alone]  # the fake's canned topics, once per dialogue
    prompt = fake_openai.requests[0].body["messages"][-1]["content"]
    assert all(f"Dialogue {n}:" in prompt for n in (1, 2, 3))
    assert "Rome" in prompt


async def test_an_unreadable_batch_reply_asks_each_page_alone(
    llm: OpenAILLM, fake_openai: FakeOpenAI
) -> None:
    # A reply with one dialogue missing, twice (the repair turn too): never guessed at.
    fake_openai.replies["topics_batch"] = '{"1": [{"theme": "T", "content": "c"}]}'
    found = await llm.topics_many([DIALOGUE, DIALOGUE])
    tasks = [r.task for r in fake_openai.requests]
    assert tasks == ["topics_batch", "topics_batch", "topics", "topics"]
    assert found == [await llm.topics(DIALOGUE)] * 2
    assert llm.usage["topics_batch"].fallbacks == 1


async def test_topics_and_a_merged_summary_in_one_call(
    llm: OpenAILLM, fake_openai: FakeOpenAI
) -> None:
    topics, summary = await llm.topics_summary(DIALOGUE, "The user plans a trip.")
    assert [r.task for r in fake_openai.requests] == ["topics_summary"]
    assert topics == await llm.topics(DIALOGUE)
    assert summary == await llm.segment_summary("The user plans a trip.", DIALOGUE)
    prompt = fake_openai.requests[0].body["messages"][-1]["content"]
    assert "The user plans a trip." in prompt
    assert "Pergamon" in prompt


async def test_an_unreadable_combined_reply_asks_both_tasks_apart(
    llm: OpenAILLM, fake_openai: FakeOpenAI
) -> None:
    fake_openai.replies["topics_summary"] = '{"topics": []}'  # no summary, twice
    topics, summary = await llm.topics_summary(DIALOGUE, "Before.")
    tasks = sorted(r.task for r in fake_openai.requests)
    assert tasks == ["segment_summary", "topics", "topics_summary", "topics_summary"]
    assert topics == await llm.topics(DIALOGUE)
    assert summary == await llm.segment_summary("Before.", DIALOGUE)


async def test_persona_analyses_in_one_call(llm: OpenAILLM, fake_openai: FakeOpenAI) -> None:
    known = {"Openness": Trait(level="Medium", reason="earlier")}
    found = await llm.persona(known, DIALOGUE)
    assert [r.task for r in fake_openai.requests] == ["persona"]
    assert found.traits == await llm.user_traits(known, DIALOGUE)
    assert found.user_knowledge == await llm.user_knowledge(DIALOGUE)
    assert found.agent_traits == await llm.agent_traits(DIALOGUE)
    prompt = fake_openai.requests[0].body["messages"][-1]["content"]
    assert "Openness: Medium" in prompt
    assert "Pergamon" in prompt


async def test_an_unreadable_persona_reply_asks_the_three_apart(
    llm: OpenAILLM, fake_openai: FakeOpenAI
) -> None:
    fake_openai.replies["persona"] = "[User Traits]\nNone"  # two sections missing, twice
    found = await llm.persona({}, DIALOGUE)
    tasks = sorted(r.task for r in fake_openai.requests)
    assert tasks == ["agent_traits", "persona", "persona", "user_knowledge", "user_traits"]
    assert found.user_knowledge == await llm.user_knowledge(DIALOGUE)
    assert llm.usage["persona"].fallbacks == 1


async def test_in_flight_limit_is_respected(
    fake_openai: FakeOpenAI, sleeps: RecordingSleep
) -> None:
    llm = await make(fake_openai, sleeps, llm_max_in_flight=3)
    fake_openai.latency_s = 0.1
    memory = PromptMemory("Where?", [])
    try:
        answers = await asyncio.gather(
            *(llm.respond("You are role-playing as A", f"q{i}", memory) for i in range(10))
        )
    finally:
        await llm.close()
    assert all(answer.text == "Berlin" for answer in answers)
    assert fake_openai.max_in_flight == 3
    starts = sorted(record.at for record in fake_openai.requests)
    assert starts[-1] - starts[0] >= 0.25  # 10 calls through 3 slots: at least 4 waves


async def test_build_llm_chooses_openai(fake_openai: FakeOpenAI) -> None:
    llm = build_llm(settings_for(fake_openai))
    assert llm.backend == "openai"
    await llm.close()
