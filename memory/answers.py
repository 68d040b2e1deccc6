"""Which answers are worth remembering: an answer that says the assistant does not know adds
nothing to memory, and quoted back later ("As I mentioned before: I don't know") it does harm."""

from __future__ import annotations

import re

# The usual ways a model (and the offline backend) says it has nothing: checked on the
# answer's start and its short forms, not anywhere in a long reply that merely mentions one.
_DOES_NOT_KNOW = re.compile(
    r"^\W*(?:sorry[,.!]?\s*)?(?:i'?m sorry[,.!]?\s*)?(?:but\s+)?"
    r"(?:i(?:'m|\s+am)\s+not\s+sure|i\s+(?:do\s*n[o']?t|don't|cannot|can't)\s+"
    r"(?:know|have\s+(?:any|anything|that|this|enough|information|a\s+record)|recall|remember|find|"
    r"tell)|i\s+have\s+no\s+(?:information|record|memory|idea)|there\s+is\s+no\s+"
    r"(?:information|record|mention)|no\s+information)",
    re.IGNORECASE,
)


def says_it_does_not_know(answer: str) -> bool:
    """True for an answer that only says the assistant lacks the information."""
    return bool(_DOES_NOT_KNOW.match(answer.strip().replace("\u2019", "'")))
