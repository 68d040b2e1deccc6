"""The response prompt: the paper's structure, in one of two answer styles.

STM pages form the recent conversation, MTM pages (each with its chain's meta summary) the
relevant past conversations, and the LPM the character traits of both speakers (paper appendix,
"Prompt Template for Response Generation").

- ``chat`` (the default): reply to the customer, in full sentences, as a chat assistant would.
- ``locomo``: the appendix's benchmark wording ("answer ... in an extremely concise manner",
  dates as '17 July 2025', entity-style answers); the LoCoMo evaluation turns it on, because
  its scoring compares short answers. A support bot given it would send entity fragments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from schemas.records import Page, Persona

AnswerStyle = Literal["chat", "locomo"]
_NONE = "None"

_CONCISE = (
    "Your task is to answer questions about {user} or {assistant} in an extremely concise manner."
)

_SYSTEM = (
    "You are role-playing as {assistant} in a conversation with the user who is playing "
    "{user}.\n"
    "Here are some of your character traits and knowledge:\n"
    "{assistant_knowledge}\n"
    "Any content referring to 'User' in the prompt refers to {user}'s content, and any "
    "content referring to 'AI' or 'assistant' refers to {assistant}'s content.\n"
    + _CONCISE
    + "\nWhen the question is: 'What did the charity race raise awareness for?', you should "
    "not answer in the form of: 'The charity race raised awareness for mental health.' "
    "Instead, it should be: 'mental health', as this is more concise."
)

_USER = (
    "<CONTEXT>\n"
    "Recent conversation between {user} and {assistant}:\n"
    "{history}\n"
    "<MEMORY>\n"
    "Relevant past conversations:\n"
    "{retrieval}\n"
    "<CHARACTER TRAITS>\n"
    "Characteristics of {user}:\n"
    "{background}\n"
    "The question is: {query}\n"
    + _CONCISE
    + "\nPlease only provide the content of the answer, without including 'answer:'\n"
    "For questions that require answering a date or time, strictly follow the format "
    "'17 July 2025' and provide a specific date whenever possible. For example, if you need "
    "to answer 'last year,' give the specific year of last year rather than just saying "
    "'last year.' Only provide one year, date, or time, without any extra responses.\n"
    "If the question is about the duration, answer in the form of several years, months, "
    "or days.\n"
    "Generate answers primarily composed of concrete entities, such as Mentoring program, "
    "school speech, etc."
)


# "You are role-playing as" stays first in both styles: test servers tell the task by it.
_CHAT_SYSTEM = (
    "You are role-playing as {assistant} in a conversation with the user who is playing "
    "{user}.\n"
    "Here are some of your character traits and knowledge:\n"
    "{assistant_knowledge}\n"
    "Any content referring to 'User' in the prompt refers to {user}'s content, and any "
    "content referring to 'AI' or 'assistant' refers to {assistant}'s content.\n"
    "Reply to {user}'s latest message as {assistant} would in a chat: directly, helpfully and "
    "in full sentences. Use the memory when it is relevant. Do not invent facts about {user} "
    "that the memory does not hold; if you do not know, say so."
)

_CHAT_USER = (
    "<CONTEXT>\n"
    "Recent conversation between {user} and {assistant}:\n"
    "{history}\n"
    "<MEMORY>\n"
    "Relevant past conversations:\n"
    "{retrieval}\n"
    "<CHARACTER TRAITS>\n"
    "Characteristics of {user}:\n"
    "{background}\n"
    "<MESSAGE>\n"
    "{user} says: {query}\n"
    "Write {assistant}'s reply to {user}, without a speaker label."
)

_TEMPLATES = {"chat": (_CHAT_SYSTEM, _CHAT_USER), "locomo": (_SYSTEM, _USER)}


def build_prompt(
    query: str,
    short_term: Sequence[Page],
    mid_term: Sequence[Page],
    persona: Persona,
    user_knowledge: Sequence[str],
    agent_traits: Sequence[str],
    user_name: str = "User",
    assistant_name: str = "Assistant",
    style: AnswerStyle = "chat",
) -> tuple[str, str]:
    """The (system, user) messages answering ``query`` from the three memory tiers.

    ``user_knowledge`` and ``agent_traits`` are the retrieved top entries (not the whole
    queues); the persona contributes the profiles and traits, which are used whole. An MTM
    page that is also in the STM window is shown once, in the recent conversation.
    """
    names = {"user": user_name, "assistant": assistant_name}
    system_template, user_template = _TEMPLATES[style]
    system = system_template.format(
        assistant_knowledge=_assistant_knowledge(persona.agent_profile, agent_traits), **names
    )
    user = user_template.format(
        history=_lines(_page_block(page) for page in short_term),
        retrieval=_lines(_memory_block(page) for page in _past_only(mid_term, short_term)),
        background=_background(persona, user_knowledge),
        query=query,
        **names,
    )
    return system, user


def prompt_texts(
    short_term: Sequence[Page],
    mid_term: Sequence[Page],
    user_knowledge: Sequence[str],
    agent_traits: Sequence[str],
) -> list[str]:
    """The memory behind a prompt as plain strings, for the offline LLM's extractive answer.

    STM pages in order, then MTM pages, then user facts, then agent traits; blanks and exact
    repeats left out.
    """
    texts = [_page_block(page) for page in short_term]
    texts += [_page_block(page) for page in _past_only(mid_term, short_term)]
    texts += [fact.strip() for fact in (*user_knowledge, *agent_traits)]
    return [text for text in dict.fromkeys(texts) if text]


def _past_only(mid_term: Sequence[Page], short_term: Sequence[Page]) -> list[Page]:
    recent = {page.page_id for page in short_term}
    return [page for page in mid_term if page.page_id not in recent]


def _page_block(page: Page) -> str:
    return f"{page.text}\nTime: {page.timestamp:%Y-%m-%d %H:%M %Z}".rstrip()


def _memory_block(page: Page) -> str:
    summary = page.chain.summary.strip() or _NONE
    return f"[Conversation summary] {summary}\n{_page_block(page)}"


def _assistant_knowledge(profile: Mapping[str, Any], traits: Sequence[str]) -> str:
    lines = [f"{key}: {value}" for key, value in profile.items()]
    lines += [f"- {trait.strip()}" for trait in traits if trait.strip()]
    return _lines(lines)


def _background(persona: Persona, user_knowledge: Sequence[str]) -> str:
    profile = _lines(f"{key}: {value}" for key, value in persona.profile.items())
    traits = _lines(
        f"{dimension}: {trait.level}" + (f" ({trait.reason})" if trait.reason else "")
        for dimension, trait in persona.traits.items()
    )
    knowledge = _lines(f"- {fact.strip()}" for fact in user_knowledge if fact.strip())
    return f"User profile:\n{profile}\nUser traits:\n{traits}\nUser knowledge:\n{knowledge}"


def _lines(items: Iterable[str]) -> str:
    text = "\n".join(items)
    return text if text else _NONE
