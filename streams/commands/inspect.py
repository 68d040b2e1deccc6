"""`memoryos inspect USER`: one user's memory and recent pipeline history, from
GET /v1/users/{user}/memory and GET /v1/users/{user}/history."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import httpx
import orjson

from adapters.settings import Settings


def fetch_memory(
    url: str, user: str, api_key: str | None = None, what: str = "memory"
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    response = httpx.get(f"{url.rstrip('/')}/v1/users/{user}/{what}", headers=headers, timeout=30)
    response.raise_for_status()
    data: dict[str, Any] = response.json()
    return data


def render_history(history: dict[str, Any]) -> str:
    """Which stages handled each recent turn, newest first, then the user's dead letters."""
    lines = [f"recent turns ({len(history['turns'])}, newest first):"]
    for turn in history["turns"]:
        stages = " → ".join(turn["stages"]) or "waiting for the chain stage"
        segment = f" segment {turn['segment_id'][:8]}" if turn.get("segment_id") else ""
        lines.append(f"  {turn['turn_id']}: {turn['place']} ({stages}){segment}")
    letters = history["dead_letters"]
    lines.append(f"dead letters ({len(letters)}):")
    for letter in letters:
        trace = f" trace {letter['trace_id']}" if letter.get("trace_id") else ""
        lines.append(
            f"  [{letter['at']}] {letter['stage']} {letter['error']} after "
            f"{letter['attempts']} attempt(s), {letter['topic']}@{letter['partition']}/"
            f"{letter['offset']}{trace}: {_cut(letter['reason'], 110)}"
        )
    return "\n".join(lines)


def render(memory: dict[str, Any]) -> str:
    lines = [f"user {memory['user_id']}", f"short-term memory ({len(memory['short_term'])} pages):"]
    for page in memory["short_term"]:
        lines.append(
            f"  [{page['timestamp']}] Q: {_cut(page['query'])}  A: {_cut(page['response'])}"
        )
    lines.append(f"mid-term memory ({len(memory['mid_term'])} segments):")
    for segment in sorted(memory["mid_term"], key=lambda s: -s["heat"]):
        lines.append(
            f"  heat {segment['heat']:.2f} (N_visit {segment['n_visit']}, "
            f"L_interaction {segment['l_interaction']}), {len(segment['pages'])} pages, "
            f"keywords: {', '.join(segment['keywords'][:6])}"
        )
        lines.append(f"    {_cut(segment['summary'], 110)}")
    persona = memory["persona"]
    lines.append("persona:")
    lines.append("  profile: " + _attributes(persona.get("profile", {})))
    lines.append(
        "  traits: " + ", ".join(f"{k}={v['level']}" for k, v in persona["traits"].items())
    )
    for fact in persona["user_knowledge"]:
        lines.append(f"  user: {_cut(fact, 110)}")
    assistants = {"default": {"agent_profile": persona.get("agent_profile", {}),
                              "agent_traits": persona["agent_traits"]}}  # fmt: skip
    for name, seen in (assistants | persona.get("assistants", {})).items():
        if seen["agent_profile"] or seen["agent_traits"]:
            lines.append(f"  assistant {name}: {_attributes(seen['agent_profile'])}")
        for fact in seen["agent_traits"]:
            lines.append(f"    {_cut(fact, 110)}")
    return "\n".join(lines)


def _attributes(profile: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in profile.items()) or "(none)"


def _cut(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def main(args: argparse.Namespace, settings: Settings) -> int:
    keys = settings.api_key_list
    try:
        memory = fetch_memory(args.url, args.user, keys[0] if keys else None)
        history = fetch_memory(args.url, args.user, keys[0] if keys else None, "history")
    except httpx.HTTPError as exc:
        print(f"memoryos inspect: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(orjson.dumps(memory | {"history": history}, option=orjson.OPT_INDENT_2).decode())
    else:
        print(render(memory) + "\n" + render_history(history))
    return 0
