"""What the fake OpenAI server says: canned replies, faults and OpenAI-shaped bodies."""

from __future__ import annotations

import hashlib
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.responses import JSONResponse

Reply = str | Callable[[str], str]  # a fixed reply, or one computed from the prompt text

_TOPICS_REPLY = (
    '[{"theme": "Business trip", "keywords": ["business trip", "Berlin", "itinerary"], '
    '"content": "The user is planning a business trip to Berlin."}, '
    '{"theme": "Health", "keywords": ["cold", "sick"], '
    '"content": "The user reported feeling unwell due to a cold."}]'
)
_DIALOGUE_HEADER = re.compile(r"^Dialogue (\d+):$", re.M)


def topics_batch_reply(prompt: str) -> str:
    """The canned topics once for every numbered dialogue of a batch prompt."""
    count = len(_DIALOGUE_HEADER.findall(prompt))
    return "{" + ", ".join(f'"{n}": {_TOPICS_REPLY}' for n in range(1, count + 1)) + "}"


DEFAULT_REPLIES: dict[str, Reply] = {
    "continuity": "true\nThe user is planning a business trip to Berlin and asks for advice.",
    "topics": _TOPICS_REPLY,
    "topics_batch": topics_batch_reply,
    "topics_summary": (
        '{"topics": ' + _TOPICS_REPLY + ', "summary": '
        '"The user planned a business trip to Berlin and caught a cold."}'
    ),
    "segment_summary": "The user planned a business trip to Berlin and caught a cold.",
    "user_traits": (
        "Travel Interest: High [Reason: the user is planning a business trip]\n"
        "Health Focus: Medium [Reason: the user mentions a cold]"
    ),
    "user_knowledge": (
        "[User Knowledge]\n- I am planning a business trip to Berlin on 2023-10-01.\n"
        "- I caught a cold."
    ),
    "agent_traits": "[Assistant Knowledge]\n- I recommended the Pergamon museum on 2023-10-01.",
    "respond": "Berlin",
    "unknown": "OK",
}
# The combined persona reply: the three canned analyses, each under its header.
DEFAULT_REPLIES["persona"] = "\n".join(
    [f"[User Traits]\n{DEFAULT_REPLIES['user_traits']}"]
    + [str(DEFAULT_REPLIES[task]) for task in ("user_knowledge", "agent_traits")]
)
GARBAGE = "~~ lorem ipsum dolor sit amet; the model rambled off ~~"
THINKING = "<think>Let me think about the format first.</think>\n"


@dataclass(frozen=True)
class Fault:
    """What the next request gets instead of a plain canned reply."""

    kind: str  # "status" | "delay" | "fence" | "think" | "garbage" | "text" | "body" | "trickle"
    status: int = 200
    code: str | None = None
    retry_after: float | None = None
    delay_s: float = 0.0
    text: str = ""

    @classmethod
    def rate_limit(cls, retry_after: float | None = None) -> Fault:
        return cls("status", 429, "rate_limit_exceeded", retry_after=retry_after)

    @classmethod
    def quota(cls) -> Fault:
        return cls("status", 429, "insufficient_quota")

    @classmethod
    def server_error(cls, status: int = 500) -> Fault:
        return cls("status", status, "server_error")

    @classmethod
    def unavailable(cls) -> Fault:
        return cls.server_error(503)

    @classmethod
    def bad_request(cls) -> Fault:
        return cls("status", 400, "invalid_request_error")

    @classmethod
    def delay(cls, seconds: float) -> Fault:
        """Answer normally, but only after ``seconds`` (longer than the client's timeout)."""
        return cls("delay", delay_s=seconds)

    @classmethod
    def fenced_json(cls) -> Fault:
        return cls("fence")

    @classmethod
    def think(cls) -> Fault:
        return cls("think")

    @classmethod
    def garbage(cls) -> Fault:
        return cls("garbage")

    @classmethod
    def reply(cls, text: str) -> Fault:
        return cls("text", text=text)

    @classmethod
    def body(cls, raw: str) -> Fault:
        """A 200 whose whole body is ``raw``, not a chat completion (a proxy's page, say)."""
        return cls("body", text=raw)

    @classmethod
    def trickle(cls, every_s: float) -> Fault:
        """A 200 whose body never ends: a space every ``every_s``, each read well within the
        client's timeout (JSON allows leading white space, so no byte of it is wrong)."""
        return cls("trickle", delay_s=every_s)


def pseudo_embedding(text: str, dim: int) -> list[float]:
    """Deterministic, text-specific, deliberately not unit length."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    rng = random.Random(seed)
    return [rng.gauss(0.0, 1.0) * 3.0 for _ in range(dim)]


def words(text: str) -> int:
    return max(1, len(text.split()))


def transform(text: str, fault: Fault | None) -> str:
    if fault is None or fault.kind == "delay":
        return text
    if fault.kind == "fence":
        return f"Here is the result:\n```json\n{text}\n```\nHope this helps!"
    if fault.kind == "think":
        return THINKING + text
    if fault.kind == "garbage":
        return GARBAGE
    return fault.text


def completion(model: str, text: str, prompt: str) -> dict[str, Any]:
    prompt_tokens, completion_tokens = words(prompt), words(text)
    return {
        "id": f"chatcmpl-{hashlib.sha1(prompt.encode()).hexdigest()[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def error_response(fault: Fault) -> JSONResponse:
    headers = {} if fault.retry_after is None else {"retry-after": f"{fault.retry_after:g}"}
    kind = "insufficient_quota" if fault.code == "insufficient_quota" else "requests"
    if fault.status >= 500:
        kind = "server_error"
    body = {
        "error": {
            "message": f"fake {fault.status} ({fault.code})",
            "type": kind,
            "param": None,
            "code": fault.code,
        }
    }
    return JSONResponse(body, status_code=fault.status, headers=headers)
