"""Offline topic keywords: YAKE's phrases, or (content) without chit-chat and with dates."""

from __future__ import annotations

from adapters.llm import build_llm
from adapters.llm.extractive import CHITCHAT, content_keywords, keywords
from adapters.llm.offline_llm import OfflineLLM
from adapters.settings import Settings
from memory.text import tokenize

CHAT = (
    "Wow, awesome photo! Hey Mel, thanks so much. "
    "We went camping in the mountains in July 2023 with the kids, and roasted marshmallows."
)


def test_content_keywords_drop_chit_chat_and_add_dates() -> None:
    found = content_keywords(CHAT, limit=5)
    assert found[-2:] == ["july", "2023"]  # the dates said, in order, after the phrases
    phrases = found[:-2]
    assert 1 <= len(phrases) <= 5
    for phrase in phrases:
        assert set(tokenize(phrase)) - CHITCHAT, f"{phrase!r} is chit-chat only"
    assert not any(p.lower() in ("wow", "awesome photo", "thanks") for p in phrases)
    assert any("camping" in p.lower() or "marshmallows" in p.lower() for p in phrases)


def test_content_mode_falls_back_to_yake_on_pure_chit_chat() -> None:
    assert content_keywords("Wow! Thanks!") == []
    assert keywords("Wow! Thanks!", mode="content") == keywords("Wow! Thanks!")
    assert keywords("", mode="content") == []


def test_yake_mode_is_unchanged_and_the_setting_reaches_the_backend() -> None:
    assert keywords(CHAT) == keywords(CHAT, mode="yake")
    for mode in ("yake", "content"):
        llm = build_llm(Settings(offline_keywords=mode))
        assert isinstance(llm, OfflineLLM)
        assert llm._keyword_mode == mode


async def test_topics_use_the_configured_mode() -> None:
    dialogue = f"User: {CHAT}\nAssistant: Sounds lovely, July in the mountains!"
    content = await OfflineLLM(announce=False, keyword_mode="content").topics(dialogue)
    plain = await OfflineLLM(announce=False, keyword_mode="yake").topics(dialogue)
    assert "2023" in content[0].keywords
    assert "2023" not in plain[0].keywords
