"""Profiles: the static attributes of a user or an assistant (paper: LPM user/agent profile).

A profile is a small JSON object ({"name": "Ann", "plan": "gold"}). It is set through the API
(``PUT /v1/users/{id}/profile``, ``PUT /v1/assistants/{id}/profile``) and bounded like a
turn's meta, only smaller: it goes whole into every response prompt.
"""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from schemas.limits import json_problem

MAX_PROFILE_BYTES = 4096  # whole in every prompt: a few hundred tokens at most
MAX_PROFILE_KEYS = 64
MAX_PROFILE_DEPTH = 4
MAX_PROFILE_KEY_CHARS = 64

# Turns and messages without an assistant_id belong to this assistant: its agent profile and
# agent traits are the ones a request without assistant_id reads.
DEFAULT_ASSISTANT = "default"


def check_profile(value: dict[str, Any]) -> dict[str, Any]:
    if problem := json_problem(value, "profile", MAX_PROFILE_DEPTH):
        raise PydanticCustomError("profile_invalid", problem)
    if len(value) > MAX_PROFILE_KEYS:
        raise PydanticCustomError(
            "profile_invalid", f"profile has {len(value)} keys; at most {MAX_PROFILE_KEYS}"
        )
    if long := next((key for key in value if len(key) > MAX_PROFILE_KEY_CHARS), None):
        raise PydanticCustomError(
            "profile_invalid",
            f"profile key {long[:20]!r}... is longer than {MAX_PROFILE_KEY_CHARS} characters",
        )
    size = len(orjson.dumps(value))
    if size > MAX_PROFILE_BYTES:
        raise PydanticCustomError(
            "profile_invalid", f"profile is {size} bytes as JSON; at most {MAX_PROFILE_BYTES}"
        )
    return value


Profile = Annotated[dict[str, Any], AfterValidator(check_profile)]
