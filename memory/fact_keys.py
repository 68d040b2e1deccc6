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
_NOT = r"(?!not\b|n't\b|never\b)"
_NAMED = re.compile(r"\b(?i:my) " + _THING + r"(?:'s name is| is (?:called|named)) [A-Z]")
_FAVOURITE = re.compile(r"\b(?i:my) (favou?rite [a-z]+(?: [a-z]+)?) (?:is|are) " + _NOT + r"\w")
# attributes whose statement carries a value of a telling shape (digits for a number or an
# address): "my phone number is not working" states no number
_STATED = re.compile(
    r"\b(?i:my) (?:(phone number|mobile number|address|postcode|zip code) (?:is|are) "
    + _NOT
    + r"[^.!?]*\d|(birthday|date of birth) is "
    + _NOT
    + r"[^.!?]*(?:\d|January|February|March|April|May|June|July|August|September|October"
    r"|November|December)|(time ?zone) is (?:UTC|GMT|[A-Z]{2,5}\b|[A-Z][a-z]+/))"
)
_DATE_SUFFIX = re.compile(r"\s*\(on [^)]*\)\s*\.?\s*$")
ALONE_SHARE = 0.6  # of a fact's words: what its attribute's statement must cover


def attribute_of(text: str) -> str | None:
    """The attribute ``text`` states, as a key that two statements of it share; None if it
    states none this module knows."""
    found = _stated(text)
    return found[0] if found else None


def states_only(text: str) -> bool:
    """Whether ``text`` is about its attribute and little else: "My name is Ann." is, "My
    name is Ann and I am allergic to penicillin." is not. Only such a fact may be superseded
    by a newer statement of its attribute: the rest of a longer one would be lost with it."""
    found = _stated(text)
    if found is None:
        return False
    core = _DATE_SUFFIX.sub("", text).strip(" .!")
    return len(core) > 0 and found[1] / len(core) >= ALONE_SHARE


def _stated(text: str) -> tuple[str, int] | None:
    """(attribute, characters of the statement) of the first attribute ``text`` states."""
    for attribute, pattern in PATTERNS:
        if match := pattern.search(text):
            return attribute, match.end() - match.start()
    if match := _NAMED.search(text):
        return "name of " + _singular(match.group(1).lower()), _to_sentence_end(text, match)
    if match := _FAVOURITE.search(text):
        key = match.group(1).lower().replace("favourite", "favorite")
        return key, _to_sentence_end(text, match)
    if match := _STATED.search(text):
        key = next(group for group in match.groups() if group).lower()
        return key.replace("time zone", "timezone"), _to_sentence_end(text, match)
    return None


def _to_sentence_end(text: str, match: re.Match[str]) -> int:
    """A statement's value runs to the end of its clause."""
    end = len(text)
    for stop in (",", ";", " and ", " but ", " so ", "."):
        found = text.find(stop, match.end())
        if found != -1:
            end = min(end, found)
    return end - match.start()


def _singular(thing: str) -> str:
    return thing.removeprefix("new ").removeprefix("little ")
