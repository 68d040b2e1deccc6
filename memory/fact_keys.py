"""Which attribute of which thing a fact states: two facts stating the same one cannot both
be current, so the newer supersedes the older.

Read by patterns, as ``memory/profile.py`` reads profile attributes, so the offline backend
needs no model for it: every profile attribute ("I live in Lyon" / "we moved to Paris"), a
named thing ("my dog is called Miso" / "my dog's name is Rex"), a favourite ("my favourite
colour is blue"), and a few attributes people restate ("my phone number is ...").
"""

from __future__ import annotations

import re

from memory.profile import PATTERNS

_THING = r"((?:[a-z]+ ){0,2}[a-z]+?)"
_NAMED = re.compile(r"\b(?i:my) " + _THING + r"(?:'s name is| is (?:called|named)) [A-Z]")
_FAVOURITE = re.compile(r"\b(?i:my) (favou?rite [a-z]+(?: [a-z]+)?) (?:is|are) \w")
_STATED = re.compile(
    r"\b(?i:my) (phone number|mobile number|address|birthday|date of birth|job|employer"
    r"|company|partner|husband|wife|boyfriend|girlfriend|diet|car|team|school|university"
    r"|major|title|role|timezone|time zone) (?:is|are) \w"
)


def attribute_of(text: str) -> str | None:
    """The attribute ``text`` states, as a key that two statements of it share; None if it
    states none this module knows."""
    for attribute, pattern in PATTERNS:
        if pattern.search(text):
            return attribute
    if match := _NAMED.search(text):
        return "name of " + _singular(match.group(1).lower())
    if match := _FAVOURITE.search(text):
        return match.group(1).lower().replace("favourite", "favorite")
    if match := _STATED.search(text):
        return match.group(1).lower().replace("time zone", "timezone")
    return None


def _singular(thing: str) -> str:
    return thing.removeprefix("new ").removeprefix("little ")
