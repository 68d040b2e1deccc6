"""The months and years a question names, and whether a page's date is one of them.

"What did Maria donate in December 2023?" asks about the pages of that month: their words
often say nothing of the date ("I gave my old coats away"), while the page's timestamp does.
Only written-out English month names count ("Dec" is also a name), and the months that are
also given names (April, May, June, August) only beside a day, a year or a preposition ("May
I ask..." names no month).
"""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MONTH = {name: number for number, name in enumerate(MONTHS, start=1)}
# Months that are also given names (or a verb): a month only beside a day, a year or a
# preposition ("What did June say?" names nobody's month; "in June" does).
_NAMES_TOO = frozenset({"April", "May", "June", "August"})
_YEAR = r"(?:19|20)\d\d"
# A month, then optionally its day and year ("May 23, 2023", "July 2023", "December of 2023");
# or a day first ("3 June, 2023"). Months are matched case-sensitively: a capital is what makes
# them names.
_MENTION = re.compile(
    rf"(?:\b(?P<day>\d{{1,2}})\s+)?\b(?P<month>{'|'.join(MONTHS)})\b"
    rf"(?:\s+(?P<day2>\d{{1,2}})(?:st|nd|rd|th)?\b)?(?:(?:,?\s+|\s+of\s+)(?P<year>{_YEAR})\b)?"
)
_LONE_YEAR = re.compile(rf"\b{_YEAR}\b")
_PREPOSITION = re.compile(
    r"\b(?:in|of|on|since|until|till|during|by|before|after|early|late|mid|last|next|this)\s*$",
    re.IGNORECASE,
)
_LOOK_BACK = 12  # characters before a month searched for its preposition ("during" and spaces)


@dataclass(frozen=True)
class NamedDate:
    """A month (1-12) and/or a year the text names; None where it names none."""

    year: int | None
    month: int | None


def named_dates(text: str) -> tuple[NamedDate, ...]:
    """The months (with their year, if written beside them) and lone years ``text`` names.

    Linear in the text: each month looks back a few characters only, and the years inside a
    month's mention are skipped by walking both lists of matches in order."""
    found: list[NamedDate] = []
    taken: list[tuple[int, int]] = []
    for mention in _MENTION.finditer(text):
        month, start = mention.group("month"), mention.start()
        dated = mention.group("day") or mention.group("day2") or mention.group("year")
        # pos/endpos rather than a slice: the word boundary still sees the real text before
        context = _PREPOSITION.search(text, max(0, start - _LOOK_BACK), start)
        if month in _NAMES_TOO and not dated and not context:
            continue
        year = mention.group("year")
        found.append(NamedDate(int(year) if year else None, _MONTH[month]))
        taken.append(mention.span())
    spans = iter(taken)
    span = next(spans, None)
    for lone in _LONE_YEAR.finditer(text):
        while span is not None and span[1] <= lone.start():
            span = next(spans, None)
        if span is None or lone.start() < span[0]:
            found.append(NamedDate(int(lone.group()), None))
    return tuple(dict.fromkeys(found))


def date_named(named: AbstractSet[NamedDate], year: int, month: int) -> bool:
    """Whether a page of ``year``/``month`` falls in a month or year the question names.

    Three lookups whatever the question: a hostile one names over a thousand month-years, and
    every page of the pool is asked."""
    return bool(named) and (
        NamedDate(year, month) in named
        or NamedDate(year, None) in named
        or NamedDate(None, month) in named
    )
