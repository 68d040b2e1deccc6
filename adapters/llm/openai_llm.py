"""OpenAILLM: the MemoryOS tasks on any OpenAI-compatible chat completions endpoint.

Failure policy, in order:
- transient errors (429, 5xx, timeouts, connection errors) are retried by ``call_with_retries``
  with full-jitter backoff and Retry-After; an exhausted quota is raised at once
  (``LLMQuotaExceeded``); exhausted retries raise ``LLMError``. Error text never becomes content.
- a reply that cannot be parsed is asked for again once, with a repair instruction;
- if the repaired reply cannot be parsed either, the task returns the offline backend's answer
  (``OfflineLLM``) and counts a fallback, because one malformed reply should not stall a
  user's partition; the offline answers are extractive, so nothing is invented.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import orjson
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam

from adapters.llm import parsing, prompts
from adapters.llm.offline_llm import OfflineLLM
from adapters.llm.retry import (
    ErrorReply,
    RetryPolicy,
    Sleep,
    TaskUsage,
    call_with_retries,
    openai_client,
    whole_answer_within,
)
from adapters.ports import Answer, Embedder, PersonaFacts, PromptMemory, Topic
from adapters.settings import Settings
from memory.chain import ContinuityVerdict
from schemas.errors import LLMError, LLMQuotaExceeded, LLMUnparseable
from schemas.records import Page, Trait

log = logging.getLogger(__name__)

T = TypeVar("T")
REPAIR_ECHO_CHARS = 2000  # how much of a bad reply is echoed back in the repair turn


class OpenAILLM:
    backend = "openai"

    def __init__(
        self,
        settings: Settings,
        *,
        client: AsyncOpenAI | None = None,
        embedder: Embedder | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        on_tokens: Callable[[str, int, int], None] | None = None,
    ) -> None:
        self._model = settings.llm_model
        self._on_tokens = on_tokens
        self._client = client or openai_client(settings)
        self._policy = RetryPolicy.from_settings(settings)
        self._timeout_s = settings.llm_timeout_s
        self._in_flight = asyncio.Semaphore(settings.llm_max_in_flight)
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._fallback = OfflineLLM(
            embedder, announce=False, keyword_mode=settings.offline_keywords
        )
        self.usage: dict[str, TaskUsage] = {}

    # --- the tasks ---

    async def continuity(self, previous: Page | None, current: Page) -> ContinuityVerdict:
        verdict = await self._task(
            "continuity",
            prompts.continuity(previous, current),
            parsing.parse_continuity,
            lambda: self._fallback.continuity(previous, current),
        )
        if previous is None and verdict.continuous:
            # Nothing to continue: keep the model's summary, not its verdict.
            return ContinuityVerdict(False, verdict.summary)
        return verdict

    async def topics(self, dialogue: str) -> list[Topic]:
        return await self._task(
            "topics",
            prompts.topics(dialogue),
            parsing.parse_topics,
            lambda: self._fallback.topics(dialogue),
        )

    async def topics_many(self, dialogues: Sequence[str]) -> list[list[Topic]]:
        """One call for several pages' topics; if the reply cannot be read even after the
        repair turn, each dialogue is asked on its own (not the offline answer: the pages
        deserve the model's topics)."""
        if len(dialogues) == 1:
            return [await self.topics(dialogues[0])]

        async def one_by_one() -> list[list[Topic]]:
            return list(await asyncio.gather(*(self.topics(d) for d in dialogues)))

        return await self._task(
            "topics_batch",
            prompts.topics_batch(dialogues),
            lambda text: parsing.parse_topics_batch(text, len(dialogues)),
            one_by_one,
        )

    async def topics_summary(self, dialogue: str, previous_summary: str) -> tuple[list[Topic], str]:
        async def separately() -> tuple[list[Topic], str]:
            return await asyncio.gather(
                self.topics(dialogue), self.segment_summary(previous_summary, dialogue)
            )

        return await self._task(
            "topics_summary",
            prompts.topics_summary(dialogue, previous_summary),
            parsing.parse_topics_summary,
            separately,
        )

    async def segment_summary(self, previous_summary: str, dialogue: str) -> str:
        return await self._task(
            "segment_summary",
            prompts.segment_summary(previous_summary, dialogue),
            parsing.parse_summary,
            lambda: self._fallback.segment_summary(previous_summary, dialogue),
        )

    async def user_traits(self, known: Mapping[str, Trait], dialogue: str) -> dict[str, Trait]:
        """Known traits updated by the model's analysis (the model's level wins)."""
        found = await self._task(
            "user_traits",
            prompts.user_traits(known, dialogue),
            parsing.parse_traits,
            lambda: self._fallback.user_traits({}, dialogue),
        )
        return {**known, **found}

    async def user_knowledge(self, dialogue: str) -> list[str]:
        return await self._task(
            "user_knowledge",
            prompts.user_knowledge(dialogue),
            parsing.parse_facts,
            lambda: self._fallback.user_knowledge(dialogue),
        )

    async def agent_traits(self, dialogue: str) -> list[str]:
        return await self._task(
            "agent_traits",
            prompts.agent_traits(dialogue),
            parsing.parse_facts,
            lambda: self._fallback.agent_traits(dialogue),
        )

    async def persona(
        self,
        known: Mapping[str, Trait],
        dialogue: str,
        facts: Sequence[str] = (),
        summary: str = "",
    ) -> PersonaFacts:
        async def separately() -> PersonaFacts:
            traits, user_facts, agent_facts = await asyncio.gather(
                self.user_traits(known, dialogue),
                self.user_knowledge(dialogue),
                self.agent_traits(dialogue),
            )
            return PersonaFacts(traits, user_facts, agent_facts)

        return await self._task(
            "persona",
            prompts.persona(known, dialogue, facts, summary),
            lambda text: parsing.parse_persona(text, known, len(facts)),
            separately,
        )

    async def respond(self, system: str, user: str, memory: PromptMemory) -> Answer:
        async def offline() -> str:
            return (await self._fallback.respond(system, user, memory)).text

        text, spent = await self._run("respond", (system, user), parsing.parse_answer, offline)
        return Answer(text, spent.prompt_tokens, spent.completion_tokens)

    async def close(self) -> None:
        await self._client.close()

    # --- plumbing ---

    async def _task(
        self,
        task: str,
        prompt: prompts.Prompt,
        parse: Callable[[str], T],
        fallback: Callable[[], Awaitable[T]],
    ) -> T:
        value, _ = await self._run(task, prompt, parse, fallback)
        return value

    async def _run(
        self,
        task: str,
        prompt: prompts.Prompt,
        parse: Callable[[str], T],
        fallback: Callable[[], Awaitable[T]],
    ) -> tuple[T, TaskUsage]:
        """The parsed reply (or the fallback's) and the tokens this one task spent."""
        spent = TaskUsage()
        messages = _messages(prompt)
        reply = await self._complete(task, messages, spent)
        try:
            return parse(reply), spent
        except LLMUnparseable as problem:
            self._usage(task).failures += 1
            repair = prompts.repair(prompts.REPLY_FORMATS[task], str(problem))
            messages += [
                {"role": "assistant", "content": reply[:REPAIR_ECHO_CHARS]},
                {"role": "user", "content": repair},
            ]
        reply = await self._complete(task, messages, spent)
        try:
            return parse(reply), spent
        except LLMUnparseable as problem:
            usage = self._usage(task)
            usage.failures += 1
            usage.fallbacks += 1
            log.warning("LLM %s unparseable after repair (%s); fallback used", task, problem)
            return await fallback(), spent

    async def _complete(
        self, task: str, messages: list[ChatCompletionMessageParam], spent: TaskUsage
    ) -> str:
        usage = self._usage(task)

        async def attempt() -> Completion:
            async with self._in_flight:  # held per HTTP attempt, not while backing off
                usage.calls += 1
                # The client's own post: `chat.completions.create` first walks the messages
                # to transform them, which for these plain dicts changes nothing and was a
                # tenth of the client's time on the loop under many calls in flight. The body
                # comes back as bytes (`read_completion`), not as the client's model.
                body = {"model": self._model, "messages": messages}
                async with whole_answer_within(self._timeout_s):
                    raw = await self._client.post("/chat/completions", body=body, cast_to=bytes)
                return read_completion(raw)

        def failed(_: BaseException) -> None:
            usage.failures += 1

        completion = await call_with_retries(
            attempt,
            self._policy,
            what=f"LLM {task}",
            error=LLMError,
            quota_error=LLMQuotaExceeded,
            sleep=self._sleep,
            rng=self._rng,
            on_failure=failed,
        )
        for counter in (usage, spent):
            counter.prompt_tokens += completion.prompt_tokens
            counter.completion_tokens += completion.completion_tokens
        if self._on_tokens is not None:
            self._on_tokens(task, completion.prompt_tokens, completion.completion_tokens)
        return completion.text

    def _usage(self, task: str) -> TaskUsage:
        return self.usage.setdefault(task, TaskUsage())


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


def read_completion(body: bytes) -> Completion:
    """The first choice's text and the token counts of a chat completion's body.

    Read with orjson instead of building the client's ``ChatCompletion`` model, which was a
    fifth of the client's time on the loop under many calls in flight. A content given as a
    list of parts is its text parts joined. The provider's error object (``{"error": ...}``,
    no choices) raises ``ErrorReply``, retried like a 5xx unless it says the request is wrong
    or the quota spent. Any other body that is not a chat completion (not JSON, no choices, a
    content that is not text) reads as an empty reply, which the task's parse refuses: it is
    asked again with the repair turn, then answered by the offline backend, and never stored
    as it came."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        try:  # what orjson refuses and json reads: a byte-order mark, NaN
            data = json.loads(body)
            orjson.dumps(data)  # but no lone surrogate nor integer past 64 bits gets further
        except (ValueError, TypeError, RecursionError):  # RecursionError: nested too deep
            return Completion("")
    if not isinstance(data, dict):
        return Completion("")
    choices = data.get("choices")
    if choices is None and data.get("error") is not None:
        raise ErrorReply(data["error"], body)
    usage = data.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    return Completion(
        _text(content),
        _count(usage.get("prompt_tokens")),
        _count(usage.get("completion_tokens")),
    )


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        )
    return ""


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _messages(prompt: prompts.Prompt) -> list[ChatCompletionMessageParam]:
    system, user = prompt
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
