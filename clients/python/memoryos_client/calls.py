"""Every route as a ``Call``: built once here, sent by the sync and the async client alike."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from memoryos_client.errors import APIError, error_for
from memoryos_client.models import (
    AssistantProfile,
    BatchAccepted,
    DeadLettersReplayed,
    Deleted,
    FactAccepted,
    FactHistory,
    FactList,
    HistoryResponse,
    Imported,
    KeyCreated,
    KeyList,
    KeyOut,
    MemoryResponse,
    MessagesAccepted,
    RespondResponse,
    RetrieveResponse,
    TurnAccepted,
    UserList,
    UserProfile,
    WhoAmI,
)

Result = TypeVar("Result")
Model = TypeVar("Model", bound=BaseModel)
JSON = dict[str, Any]


@dataclass(frozen=True)
class Call(Generic[Result]):
    method: str
    path: str
    parse: Callable[[httpx.Response], Result]
    body: Any = None
    ndjson: bytes | None = None  # a body of JSON lines instead (import)

    def request(self) -> dict[str, Any]:
        """What httpx's ``request`` takes besides the method and path."""
        if self.ndjson is not None:
            return {"content": self.ndjson, "headers": {"content-type": "application/x-ndjson"}}
        return {"json": self.body}


def _id(value: str) -> str:
    """One path segment. Empty, "." and ".." are refused: a URL's dot segments are resolved
    away, so `delete_fact(user, "..")` would otherwise reach DELETE /v1/users/{user}."""
    if value in ("", ".", ".."):
        raise ValueError(f"an id cannot be {value!r}")
    return quote(value, safe="")


def _present(**values: Any) -> JSON:
    """The fields given; datetimes as ISO 8601."""
    return {
        key: value.isoformat() if isinstance(value, datetime) else value
        for key, value in values.items()
        if value is not None
    }


def _filters(filters: Mapping[str, Any] | None) -> JSON | None:
    """The filters given (after and before as ISO 8601 when datetimes)."""
    return None if filters is None else _present(**filters)


def _model(model: type[Model]) -> Callable[[httpx.Response], Model]:
    return lambda response: model.model_validate(response.json())


def checked(response: httpx.Response) -> httpx.Response:
    """The response, or its error as an exception (a redirect too: the API sends none)."""
    if response.status_code < 300:
        return response
    try:
        body = response.json()
        message, field = str(body["error"]), body.get("field")
    except (ValueError, KeyError, TypeError):
        message, field = response.text[:500] or response.reason_phrase, None
    raise error_for(response.status_code, message, field, _retry_after(response))


def _retry_after(response: httpx.Response) -> float | None:
    """The Retry-After header in seconds (the service sends only that form), if any."""
    try:
        return float(response.headers["retry-after"])
    except (KeyError, ValueError):
        return None


def add_turn(user_id: str, query: str, response: str, **fields: Any) -> Call[str]:
    body = _present(query=query, response=response, **fields)
    return Call("POST", f"/v1/users/{_id(user_id)}/turns", _turn_id, body)


def _turn_id(response: httpx.Response) -> str:
    return TurnAccepted.model_validate(response.json()).turn_id


def add_turns(turns: Sequence[Mapping[str, Any]]) -> Call[BatchAccepted]:
    body = [_present(**turn) for turn in turns]
    return Call("POST", "/v1/turns", _model(BatchAccepted), body)


def add_messages(
    messages: Mapping[str, Any] | Sequence[Mapping[str, Any]],
) -> Call[MessagesAccepted]:
    body = (
        _present(**messages) if isinstance(messages, Mapping) else [_present(**m) for m in messages]
    )
    return Call("POST", "/v1/messages", _model(MessagesAccepted), body)


def add_message(
    user_id: str, conversation_id: str, role: str, text: str, **fields: Any
) -> Call[str]:
    body = _present(
        user_id=user_id, conversation_id=conversation_id, role=role, text=text, **fields
    )
    return Call("POST", "/v1/messages", _message_id, body)


def _message_id(response: httpx.Response) -> str:
    [result] = MessagesAccepted.model_validate(response.json()).results
    if result.message_id is None:  # a single message is refused with a 422 instead
        raise APIError(response.status_code, result.error or "message not accepted")
    return result.message_id


def retrieve(
    user_id: str,
    query: str,
    top_k: int | None,
    assistant_id: str | None,
    filters: Mapping[str, Any] | None = None,
    at: datetime | str | None = None,
    record_visit: bool = True,
) -> Call[RetrieveResponse]:
    body = _present(
        query=query, top_k=top_k, assistant_id=assistant_id, filters=_filters(filters), at=at
    )
    if not record_visit:
        body["record_visit"] = False
    return Call("POST", f"/v1/users/{_id(user_id)}/retrieve", _model(RetrieveResponse), body)


def respond(
    user_id: str,
    query: str,
    assistant_id: str | None,
    remember: bool = True,
    filters: Mapping[str, Any] | None = None,
    at: datetime | str | None = None,
    conversation_id: str | None = None,
) -> Call[RespondResponse]:
    body = _present(
        query=query,
        assistant_id=assistant_id,
        remember=remember,
        filters=_filters(filters),
        at=at,
        conversation_id=conversation_id,
    )
    return Call("POST", f"/v1/users/{_id(user_id)}/respond", _model(RespondResponse), body)


def get_memory(user_id: str) -> Call[MemoryResponse]:
    return Call("GET", f"/v1/users/{_id(user_id)}/memory", _model(MemoryResponse))


def forget_user(user_id: str) -> Call[Deleted]:
    return Call("DELETE", f"/v1/users/{_id(user_id)}", _model(Deleted))


def list_facts(
    user_id: str, kind: str | None, include_superseded: bool, limit: int | None, cursor: str | None
) -> Call[FactList]:
    params = _present(kind=kind, limit=limit, cursor=cursor)
    if include_superseded:
        params["include_superseded"] = "true"
    query = "&".join(f"{key}={_id(str(value))}" for key, value in params.items())
    path = f"/v1/users/{_id(user_id)}/facts" + (f"?{query}" if query else "")
    return Call("GET", path, _model(FactList))


def add_fact(
    user_id: str, text: str, kind: str, assistant_id: str | None, pinned: bool | None
) -> Call[FactAccepted]:
    body = _present(text=text, kind=kind, assistant_id=assistant_id, pinned=pinned)
    return Call("POST", f"/v1/users/{_id(user_id)}/facts", _model(FactAccepted), body)


def edit_fact(
    user_id: str, fact_id: str, text: str | None, pinned: bool | None
) -> Call[FactAccepted]:
    path = f"/v1/users/{_id(user_id)}/facts/{_id(fact_id)}"
    return Call("PATCH", path, _model(FactAccepted), _present(text=text, pinned=pinned))


def delete_fact(user_id: str, fact_id: str) -> Call[FactAccepted]:
    path = f"/v1/users/{_id(user_id)}/facts/{_id(fact_id)}"
    return Call("DELETE", path, _model(FactAccepted))


def fact_history(user_id: str, fact_id: str) -> Call[FactHistory]:
    path = f"/v1/users/{_id(user_id)}/facts/{_id(fact_id)}/history"
    return Call("GET", path, _model(FactHistory))


def set_user_profile(user_id: str, profile: Mapping[str, Any]) -> Call[UserProfile]:
    path = f"/v1/users/{_id(user_id)}/profile"
    return Call("PUT", path, _model(UserProfile), dict(profile))


def set_assistant_profile(assistant_id: str, profile: Mapping[str, Any]) -> Call[AssistantProfile]:
    path = f"/v1/assistants/{_id(assistant_id)}/profile"
    return Call("PUT", path, _model(AssistantProfile), dict(profile))


def get_assistant_profile(assistant_id: str) -> Call[AssistantProfile]:
    path = f"/v1/assistants/{_id(assistant_id)}/profile"
    return Call("GET", path, _model(AssistantProfile))


def whoami() -> Call[WhoAmI]:
    return Call("GET", "/v1/whoami", _model(WhoAmI))


def create_key(
    scopes: Sequence[str], tenant: str | None, name: str, rate_limit: str | None
) -> Call[KeyCreated]:
    body = _present(tenant=tenant, scopes=list(scopes), name=name, rate_limit=rate_limit)
    return Call("POST", "/v1/keys", _model(KeyCreated), body)


def list_keys(tenant: str | None) -> Call[KeyList]:
    query = f"?tenant={_id(tenant)}" if tenant is not None else ""
    return Call("GET", f"/v1/keys{query}", _model(KeyList))


def revoke_key(key_id: str) -> Call[KeyOut]:
    return Call("DELETE", f"/v1/keys/{_id(key_id)}", _model(KeyOut))


def list_users(cursor: str | None, limit: int) -> Call[UserList]:
    query = f"?limit={limit}" + (f"&cursor={_id(cursor)}" if cursor is not None else "")
    return Call("GET", f"/v1/users{query}", _model(UserList))


def get_history(user_id: str, limit: int) -> Call[HistoryResponse]:
    return Call("GET", f"/v1/users/{_id(user_id)}/history?limit={limit}", _model(HistoryResponse))


def replay_dead_letters(
    user_id: str, letters: Sequence[Mapping[str, Any]] | None
) -> Call[DeadLettersReplayed]:
    body = {"letters": [dict(letter) for letter in letters]} if letters is not None else {}
    path = f"/v1/users/{_id(user_id)}/dead-letters/replay"
    return Call("POST", path, _model(DeadLettersReplayed), body)


def export_memory(user_id: str | None) -> Call[list[str]]:
    query = f"?user_id={_id(user_id)}" if user_id is not None else ""
    return Call("GET", f"/v1/export{query}", _lines)


def import_memory(lines: Sequence[str]) -> Call[Imported]:
    content = "".join(f"{line.rstrip()}\n" for line in lines).encode()
    return Call("POST", "/v1/import", _model(Imported), ndjson=content)


def _lines(response: httpx.Response) -> list[str]:
    return [line for line in response.text.splitlines() if line.strip()]


def health() -> Call[JSON]:
    return Call("GET", "/healthz", _json)


def ready() -> Call[bool]:
    return Call("GET", "/readyz", lambda response: bool(response.json().get("ready")))


def metrics() -> Call[str]:
    return Call("GET", "/metrics", lambda response: response.text)


def _json(response: httpx.Response) -> JSON:
    data: JSON = response.json()
    return data
