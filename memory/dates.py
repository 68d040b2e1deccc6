"""The months and years a question names, the spans its relative phrases point at ("last
week", "two months ago", seen from when it is asked), and whether a page's date is one of them.

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
from datetime import datetime, timedelta

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


# --- relative time: "yesterday", "last week", "two months ago", "recently", "on Monday" ---

_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2,
    "a few": 3, "several": 3,
}  # fmt: skip
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_AGO = re.compile(
    r"\b(\d{1,3}|a couple of|a few|several|an?|one|two|three|four|five|six|seven|eight|nine|"
    r"ten|eleven|twelve)\s+(day|week|month|year)s?\s+ago\b",
    re.IGNORECASE,
)
# not a possessive ("This Year's Hits", "Today's special"), nor "the day before yesterday"
_NOT_NAMED = r"(?!'s\b|\u2019s\b)"
_CALENDAR = re.compile(
    r"\b(last|this|past|previous)\s+(week|month|year|weekend)\b" + _NOT_NAMED, re.IGNORECASE
)
_DAY = re.compile(
    r"(?<!before )\b(yesterday|today|tonight|recently|lately)\b" + _NOT_NAMED, re.IGNORECASE
)
_WEEKDAY = re.compile(r"\b(last|on|this|past)\s+(" + "|".join(_WEEKDAYS) + r")\b", re.IGNORECASE)
RECENT_DAYS = 14


@dataclass(frozen=True)
class Window:
    """A span of time a question points at: [start, end)."""

    start: datetime
    end: datetime

    def holds(self, moment: datetime) -> bool:
        return self.start <= moment < self.end


def relative_windows(text: str, at: datetime) -> tuple[Window, ...]:
    """The spans of time relative phrases in ``text`` point at, seen from ``at`` (the time the
    question is asked): calendar days, weeks (from Monday), months and years, and the last
    ``RECENT_DAYS`` for "recently". Linear in the text: one pass of each pattern. A span that
    would fall outside the calendar (asked in year 1, "999 years ago") is left out."""
    try:
        return _windows(text, at)
    except (OverflowError, ValueError):
        return tuple(w for w in _each_safely(text, at))


def _each_safely(text: str, at: datetime) -> list[Window]:
    """The spans one phrase at a time, each that cannot be computed left out."""
    found: list[Window] = []
    for part in re.split(r"[,.;?!]", text):
        try:
            found.extend(_windows(part, at))
        except (OverflowError, ValueError):
            continue
    return list(dict.fromkeys(found))


def _windows(text: str, at: datetime) -> tuple[Window, ...]:
    day = datetime(at.year, at.month, at.day, tzinfo=at.tzinfo)
    found: list[Window] = []
    for match in _DAY.finditer(text):
        word = match.group(1).lower()
        if word == "yesterday":
            found.append(Window(day - timedelta(days=1), day))
        elif word in ("today", "tonight"):
            found.append(Window(day, day + timedelta(days=1)))
        else:
            found.append(Window(day - timedelta(days=RECENT_DAYS), at + timedelta(seconds=1)))
    for match in _CALENDAR.finditer(text):
        back = 0 if match.group(1).lower() == "this" else 1
        found.append(_unit(day, match.group(2).lower(), back))
    for match in _AGO.finditer(text):
        amount = match.group(1).lower()
        count = int(amount) if amount.isdigit() else _NUMBERS[amount]
        found.append(_unit(day, match.group(2).lower(), count))
    for match in _WEEKDAY.finditer(text):
        wanted = _WEEKDAYS.index(match.group(2).lower())
        back = (day.weekday() - wanted) % 7 or 7  # the latest such day before today
        start = day - timedelta(days=back)
        found.append(Window(start, start + timedelta(days=1)))
    return tuple(dict.fromkeys(found))


def _unit(day: datetime, unit: str, back: int) -> Window:
    """The calendar ``unit`` (day, week, weekend, month, year) ``back`` units before the one
    holding ``day``."""
    if unit == "day":
        start = day - timedelta(days=back)
        return Window(start, start + timedelta(days=1))
    if unit in ("week", "weekend"):
        monday = day - timedelta(days=day.weekday()) - timedelta(weeks=back)
        if unit == "weekend":
            saturday = monday + timedelta(days=5)
            return Window(saturday, saturday + timedelta(days=2))
        return Window(monday, monday + timedelta(weeks=1))
    if unit == "month":
        months = day.year * 12 + day.month - 1 - back
        start = day.replace(year=months // 12, month=months % 12 + 1, day=1)
        following = months + 1
        return Window(start, start.replace(year=following // 12, month=following % 12 + 1))
    start = day.replace(year=day.year - back, month=1, day=1)
    return Window(start, start.replace(year=start.year + 1))
