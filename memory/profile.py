"""Profile attributes a user states about themselves, read from the extracted user facts.

The persona stage's LLM extraction already turns a dialogue into first-person facts ("My name
is Ann.", "I live in Bergen (on 2024-05-01)."). Static attributes are read from those facts by
the patterns below rather than by another LLM call per persona update: deterministic, free, and
the same for every backend. Only what a fact states plainly is taken; later facts win.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_NAME = r"([A-Z][\w'-]*(?:[ -][A-Z][\w'-]*){0,3})"  # capitalised words: Ann, Mary-Jo Smith
# "call me Tomorrow", "call me Back": capitalised, and no name
_NOT_A_NAME = (
    r"(?!(?:Tomorrow|Today|Tonight|Later|Back|Anytime|Monday|Tuesday|Wednesday|Thursday"
    r"|Friday|Saturday|Sunday)\b)"
)
_PLACE = r"([A-Z][\w'.-]*(?:[ -](?:[A-Z][\w'.-]*|of|de|la|upon)){0,4})"
_END = r"(?=\s+(?:at|in|for|since|on|and|with|now)\b|\s*[(.,;!]|$)"
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "name",
        re.compile(r"\b(?i:my name is|I'm called|I am called|call me) " + _NOT_A_NAME + _NAME),
    ),
    ("location", re.compile(r"\b(?:I|[Ww]e) (?:live|am living|'m living|are living) in " + _PLACE)),
    (
        "location",
        re.compile(
            r"\b(?:I|[Ww]e) (?:have |'ve )?(?:just |recently )?(?:moved|relocated) to " + _PLACE
        ),
    ),
    ("hometown", re.compile(r"\bI(?: am|'m| come) from " + _PLACE)),
    ("occupation", re.compile(r"\bI work as (?:an? )?([a-z][\w-]*(?: [a-z][\w-]*){0,3}?)" + _END)),
    ("age", re.compile(r"\bI(?: am|'m) (\d{1,3}) years old\b")),
    ("email", re.compile(r"\b(?i:my e-?mail(?: address)? is) ([\w.+-]+@[\w-]+(?:\.[\w-]+)+)")),
)
TRAILING = " .'-"


def profile_from_facts(facts: Iterable[str]) -> dict[str, str]:
    """Attributes stated in ``facts`` (oldest first), the latest statement of each winning."""
    found: dict[str, str] = {}
    for fact in facts:
        for attribute, pattern in PATTERNS:
            if match := pattern.search(fact):
                found[attribute] = match.group(1).strip(TRAILING)
    return found
