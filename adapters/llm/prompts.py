"""Prompt templates for the MemoryOS tasks, from the paper's appendix (arXiv 2506.06326).

Each builder returns ``(system, user)``. Where the appendix has a prompt (continuity + meta
summary, topic summaries, assistant knowledge, response, user traits) the wording is the
paper's; the segment-summary and user-knowledge prompts are not in the appendix and are
written in the same style. Every system prompt starts with a phrase listed in ``TASK_MARKERS``
so test servers and logs can tell the tasks apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from adapters.llm.traits import TRAIT_GROUPS
from schemas.records import Page, Trait

Prompt = tuple[str, str]

TASK_MARKERS: dict[str, str] = {
    "continuity": "combined conversation continuity detector and meta-summary updater",
    "topics": "expert in analyzing dialogue topics",
    "topics_batch": "expert in analyzing the topics of numbered dialogues",
    "topics_summary": "expert in analyzing a dialogue's topics and updating a segment summary",
    "segment_summary": "conversation segment summary updater",
    "user_traits": "professional user preference analysis assistant",
    "user_knowledge": "user knowledge extraction engine",
    "agent_traits": "assistant knowledge extraction engine",
    "persona": "persona analyst of user traits, user knowledge and assistant knowledge",
    "respond": "You are role-playing as",
}


def task_of(text: str) -> str | None:
    """Which task a prompt belongs to, by its marker; None when it carries none."""
    return next((task for task, marker in TASK_MARKERS.items() if marker in text), None)


def dialogue_text(pages: Iterable[Page]) -> str:
    """Pages as the tasks read them: the two turns, then the time (the LPM prompt wants it)."""
    return "\n".join(
        f"User: {page.query}\nAssistant: {page.response}\nTime: {page.timestamp.isoformat()}"
        for page in pages
    )


def continuity(previous: Page | None, current: Page) -> Prompt:
    system = (
        f"You are a {TASK_MARKERS['continuity']}.\n"
        "Your task is to:\n"
        "1. Determine if the two conversation pages are continuous (i.e., a true continuation "
        "without a significant topic shift).\n"
        "2. Based on this determination, provide a combined output as specified below."
    )
    if previous is None:
        context = "Previous Meta-summary: (none; this is the first page)\nUser: \nAssistant: "
    else:
        context = (
            f"Previous Meta-summary: {previous.chain.summary or '(none)'}\n"
            f"User: {previous.query}\nAssistant: {previous.response}"
        )
    user = (
        "Output Instructions:\n"
        "- If the conversation pages ARE continuous:\n"
        "  - Preserve relevant context from the previous meta-summary.\n"
        "  - Integrate new information from the current dialogue to update the meta-summary.\n"
        "  - The meta-summary should be concise (1-2 sentences max).\n"
        '  - Output ONLY the word "true" on the first line, followed by the updated '
        "meta-summary on the second line.\n"
        "- If the conversation pages are NOT continuous (i.e., there is a topic shift or it's "
        "a new conversation):\n"
        "  - Create a new concise meta-summary (1-2 sentences max) based only on the current "
        'dialogue (this will be the "current summary").\n'
        '  - Output ONLY the word "false" on the first line, followed by this new '
        "current-page meta-summary on the second line.\n"
        "- Do NOT include any explanations, conversational filler, or any text other than "
        '"true" or "false" on the first line and the summary on the second line.\n\n'
        f"Previous Page Context:\n{context}\n\n"
        f"Current Page Dialogue:\nUser: {current.query}\nAssistant: {current.response}\n\n"
        "Combined Output (Continuity Status and Meta-Summary):"
    )
    return system, user


def topics(dialogue: str) -> Prompt:
    system = f"You are an {TASK_MARKERS['topics']}. No more than two topics."
    user = (
        "Please analyze the following dialogue and generate multiple subtopic summaries (if "
        "applicable), with a maximum of two themes.\n"
        "Each summary should include the subtopic name, keywords (separated by commas), and the "
        "summary text, formatted as a JSON array, with an example format as follows:\n"
        "[\n"
        '  {"theme": "Business trip", "keywords": ["Business trip", "Itinerary", "Work"], '
        '"content": "User mentioned the troubles related to business trips."},\n'
        '  {"theme": "Health", "keywords": ["Cold", "Uncomfortable", "Sick"], '
        '"content": "User reported feeling unwell due to a cold."}\n'
        "]\n"
        "Please directly output the JSON array, without adding any other content.\n"
        f"Conversation content:\n{dialogue}"
    )
    return system, user


def topics_batch(dialogues: Sequence[str]) -> Prompt:
    """The topics prompt for several dialogues at once: one call instead of one per page."""
    system = f"You are an {TASK_MARKERS['topics_batch']}. No more than two topics per dialogue."
    numbered = "\n\n".join(
        f"Dialogue {index}:\n{dialogue}" for index, dialogue in enumerate(dialogues, 1)
    )
    user = (
        f"Please analyze each of the following {len(dialogues)} dialogues on its own and "
        "generate subtopic summaries for it (if applicable), with a maximum of two themes per "
        "dialogue.\n"
        "Each summary should include the subtopic name, keywords (separated by commas), and the "
        "summary text. Output one JSON object whose keys are the dialogue numbers and whose "
        "values are that dialogue's JSON array of summaries, for example:\n"
        '{"1": [{"theme": "Business trip", "keywords": ["Business trip", "Itinerary"], '
        '"content": "User mentioned the troubles related to business trips."}],\n'
        ' "2": [{"theme": "Health", "keywords": ["Cold", "Sick"], '
        '"content": "User reported feeling unwell due to a cold."}]}\n'
        "Every dialogue number must appear. Please directly output the JSON object, without "
        "adding any other content.\n"
        f"{numbered}"
    )
    return system, user


def topics_summary(dialogue: str, previous_summary: str) -> Prompt:
    """The topics prompt and the segment-summary prompt in one call: a page's topics, and the
    summary of the segment it most likely joins, updated with it."""
    system = (
        f"You are an {TASK_MARKERS['topics_summary']}. No more than two topics. "
        "Output ONLY the JSON object (no explanations)."
    )
    user = (
        "1. Please analyze the following dialogue and generate multiple subtopic summaries (if "
        "applicable), with a maximum of two themes. Each should include the subtopic name, "
        "keywords, and the summary text.\n"
        "2. Update the summary of the topic segment below by incorporating the new dialogue: "
        "start from the previous summary, add or update information from the dialogue, keep "
        "it concise (under 100 words).\n"
        "Output one JSON object, for example:\n"
        '{"topics": [{"theme": "Business trip", "keywords": ["Business trip", "Itinerary"], '
        '"content": "User mentioned the troubles related to business trips."}], '
        '"summary": "The user is planning a business trip to Berlin and asked about hotels."}\n'
        f"Previous segment summary:\n{previous_summary or '(none)'}\n"
        f"Conversation content:\n{dialogue}"
    )
    return system, user


def segment_summary(previous_summary: str, dialogue: str) -> Prompt:
    system = (
        f"You are a {TASK_MARKERS['segment_summary']}. Your task is to:\n"
        "1. Preserve relevant context from the previous segment summary\n"
        "2. Integrate new information from the new dialogue\n"
        "3. Output ONLY the updated summary (no explanations)"
    )
    user = (
        "Update the summary of this topic segment by incorporating the new dialogue.\n\n"
        "Guidelines:\n"
        "1. Start from the previous summary (if exists)\n"
        "2. Add/update information based on the new dialogue\n"
        "3. Keep it concise (2-3 sentences max)\n"
        "4. Keep names, dates and concrete entities\n\n"
        f"Previous summary: {previous_summary or '(none)'}\n"
        f"New Dialogue:\n{dialogue}\n\n"
        "Updated summary:"
    )
    return system, user


def _format_known(known: Mapping[str, Trait]) -> str:
    if not known:
        return "(none)"
    return "\n".join(
        f"{name}: {trait.level}" + (f" [Reason: {trait.reason}]" if trait.reason else "")
        for name, trait in known.items()
    )


def _format_dimensions() -> str:
    blocks = []
    for group, dimensions in TRAIT_GROUPS.items():
        lines = "\n".join(f"* {name}: {text}" for name, text in dimensions.items())
        blocks.append(f"[{group}]\n\n{lines}")
    return "\n\n".join(blocks)


def user_traits(known: Mapping[str, Trait], dialogue: str) -> Prompt:
    # "90" is the paper's wording; TRAIT_GROUPS holds the dimensions the appendix actually lists.
    system = (
        f"You are a {TASK_MARKERS['user_traits']}. Your task is to analyze and update a user's "
        "personality preferences based on 90 defined dimensions, using provided user-AI "
        "dialogue text. For each dimension:\n\n"
        "1. Carefully read the dialogue to determine if the dimension is reflected.\n"
        "2. If reflected, determine the user's preference level: High/Medium/Low, and briefly "
        "provide the reason or cite dialogue.\n"
        "3. If not reflected, do not list the dimension."
    )
    user = (
        "The 90 dimensions and their explanations are as follows:\n\n"
        f"{_format_dimensions()}\n\n"
        "Based on the above dimension definitions, analyze the following user-AI dialogue text. "
        "List only the preference dimensions that can be extracted, item by item, in the "
        "following format:\n\n"
        "Dimension: Level (High/Medium/Low) [Reason: Briefly explain the reason or cite "
        "specific dialogue content as evidence]\n\n"
        "If a dimension cannot be reflected in the dialogue, do not list it.\n\n"
        "Known user personality (if any, please update based on this; otherwise, skip):\n"
        f"{_format_known(known)}\n\n"
        f"The latest user-AI dialogue text is as follows:\n{dialogue}\n\n"
        "Please begin the analysis."
    )
    return system, user


def user_knowledge(dialogue: str) -> Prompt:
    system = (
        f"You are a {TASK_MARKERS['user_knowledge']}. Rules:\n"
        "1. Extract ONLY explicit statements by the user about themselves: facts, events, "
        "plans, preferences, people and possessions.\n"
        "2. Use concise and factual statements in the first person, as the user would say them.\n"
        '3. If no relevant information is found, output "None".'
    )
    user = (
        "# User Knowledge Extraction Task\n"
        "Analyze the conversation and extract any fact about the user.\n"
        'If no facts can be extracted, reply with "None". Use the following format for output:\n'
        "The generated content should be as concise as possible --- the more concise, the "
        "better. Include the time and event(s) where the conversation gives them.\n"
        '[User Knowledge]\n- [Fact 1]\n- [Fact 2]\n- (Or "None" if none found)\n\n'
        "Few-shot examples:\n"
        "1. User: I adopted a puppy named Max last weekend.\n"
        "   AI: Congratulations! Puppies are a lot of fun.\n"
        "   Time: 2023-10-01\n"
        "   [User Knowledge]\n"
        "   - I adopted a puppy named Max in the week before 2023-10-01.\n\n"
        "2. User: That's interesting. I didn't know you could do that.\n"
        "   AI: I'm glad you find it interesting!\n"
        "   [User Knowledge]\n"
        "   - None\n\n"
        f"Conversation:\n{dialogue}"
    )
    return system, user


def agent_traits(dialogue: str) -> Prompt:
    system = (
        f"You are an {TASK_MARKERS['agent_traits']}. Rules:\n"
        "1. Extract ONLY explicit statements about the assistant's identity or knowledge.\n"
        "2. Use concise and factual statements in the first person.\n"
        '3. If no relevant information is found, output "None".'
    )
    user = (
        "# Assistant Knowledge Extraction Task\n"
        "Analyze the conversation and extract any fact or identity traits about the assistant.\n"
        'If no traits can be extracted, reply with "None". Use the following format for output:\n'
        "The generated content should be as concise as possible --- the more concise, the "
        "better.Must include time and event(s)\n"
        '[Assistant Knowledge]\n- [Fact 1]\n- [Fact 2]\n- (Or "None" if none found)\n\n'
        "Few-shot examples:\n"
        "1. User: Can you recommend some movies.\n"
        "   AI: Yes, I recommend Interstellar.\n"
        "   Time: 2023-10-01\n"
        "   [Assistant Knowledge]\n"
        "   - I recommend Interstellar on 2023-10-01.\n\n"
        "2. User: That's interesting. I didn't know you could do that.\n"
        "   AI: I'm glad you find it interesting!\n"
        "   [Assistant Knowledge]\n"
        "   - None\n\n"
        f"Conversation:\n{dialogue}"
    )
    return system, user


PERSONA_SECTIONS = ("User Traits", "User Knowledge", "Assistant Knowledge")


def persona(
    known: Mapping[str, Trait], dialogue: str, facts: Sequence[str] = (), summary: str = ""
) -> Prompt:
    """The user-traits, user-knowledge and assistant-knowledge prompts as one call: the three
    analyses read the same dialogue, so one reply in three sections replaces three calls.
    ``facts``: the user's current facts, numbered, so a new fact can name those it updates.
    ``summary``: the segment the dialogue's pages belong to (the paper's persona update reads
    "segments and their dialogue pages")."""
    numbered = _known_facts(facts)
    traits, knowledge, agent = (f"[{name}]" for name in PERSONA_SECTIONS)
    system = (
        f"You are a {TASK_MARKERS['persona']}. From one user-AI dialogue you produce three "
        "analyses, each under its own header, and nothing else."
    )
    user = (
        f"{traits}\nAnalyze the user's personality preferences on the dimensions below. For "
        "each dimension reflected in the dialogue, write one line:\n"
        "Dimension: Level (High/Medium/Low) [Reason: briefly explain or cite the dialogue]\n"
        'Do not list dimensions the dialogue does not reflect; write "None" if there are none.'
        f"\n\nThe dimensions:\n\n{_format_dimensions()}\n\n"
        "Known user personality (update based on this):\n"
        f"{_format_known(known)}\n\n"
        f"{knowledge}\nExtract ONLY explicit statements by the user about themselves (facts, "
        "events, plans, preferences, people, possessions) as concise first-person '- fact' "
        'lines, with the time and event where the conversation gives them, or "None".'
        f"{numbered}\n\n"
        f"{agent}\nExtract ONLY explicit statements about the assistant's identity or knowledge "
        "as concise first-person '- fact' lines with time and event, or \"None\".\n\n"
        "Reply in exactly this shape:\n"
        f"{traits}\nDimension: Level [Reason: ...]\n{knowledge}\n- [Fact 1]\n{agent}\n- None\n\n"
        f"{_segment(summary)}Conversation:\n{dialogue}"
    )
    return system, user


def repair(task_format: str, problem: str) -> str:
    """The follow-up message after a reply that could not be parsed."""
    return (
        f"Your previous reply could not be parsed: {problem}. "
        f"Reply again with only {task_format}, and nothing else."
    )


REPLY_FORMATS: dict[str, str] = {
    "continuity": '"true" or "false" on the first line and the meta-summary on the second line',
    "topics": 'a JSON array of at most two {"theme", "keywords", "content"} objects',
    "topics_batch": "a JSON object with every dialogue number as a key and, as its value, "
    'a JSON array of at most two {"theme", "keywords", "content"} objects',
    "topics_summary": 'a JSON object {"topics": [at most two {"theme", "keywords", '
    '"content"} objects], "summary": "the updated segment summary"}',
    "segment_summary": "the updated summary as plain text",
    "user_traits": 'lines of the form "Dimension: High|Medium|Low [Reason: ...]", or "None"',
    "user_knowledge": 'a list of "- fact" lines, or "None"',
    "agent_traits": 'a list of "- fact" lines, or "None"',
    "persona": "the three headers [User Traits], [User Knowledge] and [Assistant Knowledge], "
    'each followed by its lines ("Dimension: Level [Reason: ...]" or "- fact"), or "None"',
    "respond": "the answer text",
}


def _known_facts(facts: Sequence[str]) -> str:
    if not facts:
        return ""
    numbered = "\n".join(f"[{number}] {fact}" for number, fact in enumerate(facts, 1))
    return (
        " When a new fact updates or contradicts known facts (a new address, a changed "
        "plan, a pet's new name), end its line with (updates N) naming their numbers, e.g. "
        f"'- I live in Paris (updates 2)'. Known facts:\n{numbered}"
    )


def _segment(summary: str) -> str:
    return f"The topic segment these pages belong to: {summary}\n\n" if summary.strip() else ""
