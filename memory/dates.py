"""The months and years a question names, and whether a page's date is one of them.

"What did Maria donate in December 2023?" asks about the pages of that month: their words
often say nothing of the date ("I gave my old coats away"), while the page's timestamp does.
Only written-out English month names count ("Dec" is also a name), and "May" only beside a
day, a year or a preposition ("May I ask..." names no month).
"""

from __future__ import annotations

import re
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
_YEAR = r"(?:19|20)\d\d"
# A month, then optionally its day and year ("May 23, 2023", "July 2023"); or a day first
# ("3 June, 2023"). Months are matched case-sensitively: a capital is what makes them names.
_MENTION = re.compile(
    rf"(?:\b(?P<day>\d{{1,2}})\s+)?\b(?P<month>{'|'.join(MONTHS)})\b"
    rf"(?:\s+(?P<day2>\d{{1,2}})(?:st|nd|rd|th)?\b)?(?:,?\s+(?P<year>{_YEAR})\b)?"
)
_LONE_YEAR = re.compile(rf"\b{_YEAR}\b")
_PREPOSITION = re.compile(
    r"\b(?:in|of|on|since|until|till|during|by|before|after|early|late|mid|last|next|this)\s*$",
    re.IGNORECASE,
)
_LONGEST_PREPOSITION = 12  # "during" and the spaces after it


@dataclass(frozen=True)
class NamedDate:
    """A month (1-12) and/or a year the text names; None where it names none."""

    year: int | None
    month: int | None

    def holds(self, year: int, month: int) -> bool:
        return (self.year is None or self.year == year) and (
            self.month is None or self.month == month
        )


def named_dates(text: str) -> tuple[NamedDate, ...]:
    """The months (with their year, if written beside them) and lone years ``text`` names."""
    found: list[NamedDate] = []
    taken: list[tuple[int, int]] = []
    for mention in _MENTION.finditer(text):
        month = mention.group("month")
        dated = mention.group("day") or mention.group("day2") or mention.group("year")
        # Only the few characters before: a search of the whole prefix per mention would make
        # a long text of many "May"s quadratic.
        before = text[max(0, mention.start() - _LONGEST_PREPOSITION) : mention.start()]
        if month == "May" and not dated and not _PREPOSITION.search(before):
            continue
        year = mention.group("year")
        found.append(NamedDate(int(year) if year else None, _MONTH[month]))
        taken.append(mention.span())
    for lone in _LONE_YEAR.finditer(text):
        if not any(start <= lone.start() < end for start, end in taken):
            found.append(NamedDate(int(lone.group()), None))
    return tuple(dict.fromkeys(found))


def date_named(named: tuple[NamedDate, ...], year: int, month: int) -> bool:
    """Whether a page of ``year``/``month`` falls in a month or year the question names."""
    return any(date.holds(year, month) for date in named)
