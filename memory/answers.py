"""Which answers are worth remembering: a reply that only says the assistant does not know adds
nothing to memory, and quoted back later ("As I mentioned before: I don't know") it does harm.
Only a short reply that is nothing else counts: "I don't know your address, but your dog is
Miso." says something."""

from __future__ import annotations

import re

MAX_CHARS = 200  # a non-answer is short; a longer reply carries something else too

_PREFIX = (
    r"(?:(?:sorry|unfortunately|hmm|well|i'm afraid|i am afraid|i'm sorry|i am sorry)"
    r"[,.!]?\s*)*(?:but\s+)?"
)
_NOTHING = (
    r"(?:i(?:'m|\s+am)\s+not\s+sure"
    r"|i\s+(?:do\s*n[o']?t|don't|cannot|can't|could\s*n[o']?t|couldn't)\s+"
    r"(?:know|have\s+(?:any|anything|that|this|enough|information|a\s+record|access)|recall|"
    r"remember|find|tell|say)"
    r"|i\s+have\s+no\s+(?:information|record|memory|idea)"
    r"|there\s+is\s+no\s+(?:information|record|mention)|no\s+information)"
)
_DOES_NOT_KNOW = re.compile(rf"^\W*{_PREFIX}{_NOTHING}", re.IGNORECASE)
_SAYS_MORE = re.compile(r"\bbut\b|;|\bhowever\b", re.IGNORECASE)


def says_it_does_not_know(answer: str) -> bool:
    """True for a short reply that only says the assistant lacks the information."""
    text = answer.strip().replace("\u2019", "'")
    if not text or len(text) > MAX_CHARS:
        return False
    if not _DOES_NOT_KNOW.match(text):
        return False
    rest = _DOES_NOT_KNOW.sub("", text, count=1)
    return not _SAYS_MORE.search(rest)
