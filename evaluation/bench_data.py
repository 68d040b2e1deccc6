"""Synthetic but realistic dialogue for `memoryos bench`: deterministic from one seed.

Each user talks about a few topics of their own, a few turns at a time, with varied wording
and concrete details (names, numbers, days), so texts are distinct (the embedder's cache
never answers for them) and topics group into segments the way real conversations do.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from schemas.turn import TurnEvent

START = datetime(2024, 1, 8, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Topic:
    name: str
    subjects: tuple[str, ...]
    details: tuple[str, ...]
    actions: tuple[str, ...]


TOPICS: tuple[Topic, ...] = (
    Topic(
        "travel",
        ("flight to Lisbon", "train to Vienna", "hotel in Kyoto", "road trip along the coast",
         "weekend in Edinburgh", "visa appointment", "hostel near the old town"),
        ("window seat", "late check-out", "two suitcases", "a layover in Zurich",
         "the museum pass", "a rental car", "the night ferry"),
        ("book", "cancel", "reschedule", "compare prices for", "pack for", "plan"),
    ),
    Topic(
        "cooking",
        ("sourdough starter", "vegetable curry", "lemon tart", "ramen broth",
         "birthday cake", "tomato sauce", "meal prep for the week"),
        ("smoked paprika", "a cast-iron pan", "fresh basil", "coconut milk",
         "brown butter", "a pressure cooker", "gluten-free flour"),
        ("bake", "cook", "try", "improve", "freeze", "season"),
    ),
    Topic(
        "fitness",
        ("half marathon", "knee injury", "yoga class", "swimming lessons",
         "climbing gym", "cycling commute", "rowing machine"),
        ("interval training", "a foam roller", "new running shoes", "a heart-rate monitor",
         "stretching routine", "protein shakes", "rest days"),
        ("train for", "recover from", "sign up for", "track", "warm up before", "schedule"),
    ),
    Topic(
        "work",
        ("quarterly report", "job interview", "team offsite", "promotion review",
         "client presentation", "database migration", "hiring plan"),
        ("the Friday deadline", "my manager Priya", "the budget spreadsheet", "slide deck",
         "a new intern", "the Berlin office", "overtime"),
        ("prepare", "finish", "present", "negotiate", "delegate", "review"),
    ),
    Topic(
        "pets",
        ("puppy Biscuit", "cat Miso", "parrot Kiwi", "aquarium", "rabbit Clover",
         "dog walker", "vet appointment"),
        ("flea treatment", "a new leash", "grain-free food", "a scratching post",
         "obedience school", "the microchip", "a heated bed"),
        ("adopt", "train", "feed", "groom", "take to the vet", "find a sitter for"),
    ),
    Topic(
        "finance",
        ("mortgage", "retirement savings", "tax return", "credit card debt",
         "emergency fund", "index funds", "car loan"),
        ("a fixed rate", "the 401k match", "receipts from March", "an interest-free period",
         "six months of expenses", "low fees", "early repayment"),
        ("pay off", "refinance", "file", "budget for", "invest in", "set up"),
    ),
    Topic(
        "music",
        ("piano lessons", "jazz concert", "guitar amp", "choir rehearsal", "vinyl collection",
         "songwriting", "music festival"),
        ("Chopin nocturnes", "a metronome", "front-row tickets", "open mic night",
         "a used Fender", "harmony parts", "noise-cancelling headphones"),
        ("practise", "learn", "record", "buy", "listen to", "perform"),
    ),
    Topic(
        "health",
        ("sleep schedule", "allergy season", "dentist visit", "migraine", "blood test",
         "physiotherapy", "new glasses"),
        ("melatonin", "an antihistamine", "a night guard", "less caffeine",
         "vitamin D levels", "shoulder exercises", "blue-light filter"),
        ("fix", "manage", "book", "ask about", "keep track of", "cut down on"),
    ),
    Topic(
        "home",
        ("kitchen renovation", "leaking roof", "new sofa", "balcony garden",
         "moving apartments", "smart thermostat", "noisy neighbours"),
        ("oak flooring", "a plumber", "tomato seedlings", "the landlord", "moving boxes",
         "energy bills", "soundproof curtains"),
        ("repair", "decorate", "plan", "measure", "replace", "deal with"),
    ),
    Topic(
        "family",
        ("sister's wedding", "dad's birthday", "kids' school play", "grandma's recipes",
         "family reunion", "nephew's graduation", "parents' anniversary"),
        ("a speech", "matching outfits", "the seating plan", "a photo album",
         "a surprise party", "train tickets for everyone", "a gift card"),
        ("organise", "write", "prepare for", "help with", "celebrate", "remember"),
    ),
    Topic(
        "learning",
        ("Spanish course", "machine learning class", "pottery workshop", "driving test",
         "chess club", "history podcast", "photography course"),
        ("irregular verbs", "gradient descent", "the kiln schedule", "parallel parking",
         "the Sicilian defence", "a 50mm lens", "weekly flashcards"),
        ("study", "practise", "finish", "pass", "get better at", "understand"),
    ),
    Topic(
        "books",
        ("book club", "fantasy series", "biography of Lincoln", "poetry collection",
         "library card", "audiobook subscription", "mystery novel"),
        ("the final chapter", "a signed copy", "the author's interview", "reading goals",
         "a Kindle", "the plot twist", "annotated margins"),
        ("read", "recommend", "discuss", "finish", "borrow", "review"),
    ),
)  # fmt: skip

QUERY_TEMPLATES = (
    "I want to {action} the {subject}; any tips about {detail}?",
    "Can you remind me what we said about the {subject} and {detail}?",
    "I finally managed to {action} the {subject} on {day}, with {detail}.",
    "Should I {action} the {subject} before {day}? I'm worried about {detail}.",
    "My {relation} thinks I should {action} the {subject} with {detail}. What do you think?",
    "Quick update on the {subject}: {detail} cost me {amount} dollars.",
    "I keep putting off the {subject}. How do I {action} it with {detail}?",
)
RESPONSE_TEMPLATES = (
    "Good idea to {action} the {subject}. With {detail}, start small and plan for {day}.",
    "Last time you mentioned the {subject}; {detail} sounded like the sticking point.",
    "Well done on the {subject}! Keeping {detail} in mind will help next time.",
    "Before {day} works if you sort out {detail} first; the {subject} can wait a week.",
    "Your {relation} has a point: {detail} makes it easier to {action} the {subject}.",
    "{amount} dollars for {detail} is reasonable for the {subject}; keep the receipt.",
    "Try to {action} the {subject} for ten minutes a day; {detail} can come later.",
)
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
        "the weekend", "next month", "the holidays")  # fmt: skip
RELATIONS = ("partner", "brother", "sister", "friend Sam", "colleague", "mother", "flatmate")


@dataclass(frozen=True)
class SyntheticTurn:
    turn: TurnEvent
    topic: Topic
    keywords: tuple[str, ...]  # the subject and detail: what an LLM would call the topic


def user_id(index: int) -> str:
    return f"bench-u{index:05d}"


def user_topics(rng: random.Random, count: int = 4) -> list[Topic]:
    return rng.sample(TOPICS, k=min(count, len(TOPICS)))


def conversation(
    user: str, turns: int, rng: random.Random, start: datetime = START, prefix: str = "t"
) -> list[SyntheticTurn]:
    """``turns`` turns of one user: stretches of 3-8 turns per topic over a few topics."""
    topics = user_topics(rng, rng.randint(3, 5))
    result: list[SyntheticTurn] = []
    topic = rng.choice(topics)
    stretch = rng.randint(3, 8)
    for index in range(turns):
        if stretch == 0:
            topic, stretch = rng.choice(topics), rng.randint(3, 8)
        stretch -= 1
        result.append(_turn(user, index, topic, rng, start, prefix))
    return result


def _turn(
    user: str, index: int, topic: Topic, rng: random.Random, start: datetime, prefix: str
) -> SyntheticTurn:
    slots = {
        "subject": rng.choice(topic.subjects),
        "detail": rng.choice(topic.details),
        "action": rng.choice(topic.actions),
        "day": rng.choice(DAYS),
        "relation": rng.choice(RELATIONS),
        "amount": str(rng.randint(5, 2000)),
    }
    query = rng.choice(QUERY_TEMPLATES).format(**slots)
    response = rng.choice(RESPONSE_TEMPLATES).format(**slots)
    # a session every 12 turns, a day apart; a minute or two between turns inside one
    at = start + timedelta(days=index // 12, minutes=2 * (index % 12))
    turn = TurnEvent(
        user_id=user,
        turn_id=f"{prefix}{index:05d}",
        query=query,
        response=response,
        timestamp=at,
        channel=rng.choice(("web", "sms", "app")),
        meta={"bench": True, "topic": topic.name},
    )
    return SyntheticTurn(turn, topic, (slots["subject"], slots["detail"], topic.name))


def interleaved(conversations: list[list[SyntheticTurn]]) -> list[TurnEvent]:
    """Every user's first turn, then every user's second turn...: users talk at once."""
    longest = max((len(turns) for turns in conversations), default=0)
    return [
        turns[index].turn for index in range(longest) for turns in conversations
        if index < len(turns)
    ]  # fmt: skip


def query_for(topic: Topic, rng: random.Random) -> str:
    """A question a user might ask later about one of their topics (varied, mostly unique)."""
    subject, detail = rng.choice(topic.subjects), rng.choice(topic.details)
    forms = (
        f"What did I decide about the {subject}?",
        f"When did we talk about {detail} for the {subject}?",
        f"Remind me how the {subject} went, and what about {detail}?",
        f"What was my plan for {detail} on {rng.choice(DAYS)}?",
        f"Did my {rng.choice(RELATIONS)} like the {subject} idea with {detail}?",
    )
    return f"{rng.choice(forms)} ({rng.randint(1, 99999)})"


def embedded_text(turn: TurnEvent) -> str:
    """The text the chain agent embeds for a turn (agents/chain.py: query, newline, response)."""
    return f"{turn.query}\n{turn.response}"
