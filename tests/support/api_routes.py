"""Every route of the HTTP API with its counterpart in the Python client and in MCP: the one
table the parity tests hold the live routes against."""

from __future__ import annotations

Route = tuple[str, str]
DOCS = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc"})  # the API's own pages
KEYS = "tenant keys are made and revoked by the operator (`memoryos keys`), not by an agent"
OPS = "for orchestrators and Prometheus; no memory capability"

# route: (the Python clients' method, the MCP tool, or why MCP has none)
ROUTES: dict[Route, tuple[str, str]] = {
    ("POST", "/v1/users/{user_id}/turns"): ("add_turn", "add_turn"),
    ("POST", "/v1/turns"): ("add_turns", "add_turns"),
    ("POST", "/v1/messages"): ("add_messages", "add_messages"),
    ("POST", "/v1/users/{user_id}/retrieve"): ("retrieve", "retrieve_memory"),
    ("POST", "/v1/users/{user_id}/respond"): ("respond", "respond"),
    ("GET", "/v1/users/{user_id}/memory"): ("get_memory", "get_memory"),
    ("GET", "/v1/users/{user_id}/history"): ("get_history", "get_history"),
    ("POST", "/v1/users/{user_id}/dead-letters/replay"): (
        "replay_dead_letters",
        "an operator's repair, from the console or `memoryos dlq replay`, not an agent's",
    ),
    ("PUT", "/v1/users/{user_id}/profile"): ("set_user_profile", "set_user_profile"),
    ("PUT", "/v1/assistants/{assistant_id}/profile"): (
        "set_assistant_profile",
        "set_assistant_profile",
    ),
    ("GET", "/v1/assistants/{assistant_id}/profile"): (
        "get_assistant_profile",
        "get_assistant_profile",
    ),
    ("DELETE", "/v1/users/{user_id}"): ("forget_user", "forget_user"),
    ("GET", "/v1/users/{user_id}/facts"): ("list_facts", "list_facts"),
    ("POST", "/v1/users/{user_id}/facts"): ("add_fact", "add_fact"),
    ("PATCH", "/v1/users/{user_id}/facts/{fact_id}"): ("edit_fact", "edit_fact"),
    ("DELETE", "/v1/users/{user_id}/facts/{fact_id}"): ("delete_fact", "delete_fact"),
    ("GET", "/v1/users/{user_id}/facts/{fact_id}/history"): ("fact_history", "fact_history"),
    ("GET", "/v1/users"): ("list_users", "list_users"),
    ("GET", "/v1/whoami"): ("whoami", "whoami"),
    ("POST", "/v1/keys"): ("create_key", KEYS),
    ("GET", "/v1/keys"): ("list_keys", KEYS),
    ("DELETE", "/v1/keys/{key_id}"): ("revoke_key", KEYS),
    ("GET", "/v1/export"): ("export_memory", "a tenant as an NDJSON stream: `memoryos export`"),
    ("POST", "/v1/import"): (
        "import_memory",
        "an NDJSON stream by the operator: `memoryos import`",
    ),
    ("GET", "/healthz"): ("health", OPS),
    ("GET", "/readyz"): ("ready", OPS),
    ("GET", "/metrics"): ("metrics", OPS),
}
TOOLS = {route: tool for route, (_, tool) in ROUTES.items() if " " not in tool}
PYTHON = {route: method for route, (method, _) in ROUTES.items()}
