"""Relative time in a question, resolved against when it is asked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory.dates import Window, relative_windows

# --- relative time, seen from a fixed moment: Wednesday 15 May 2024, noon UTC ---

AT = datetime(2024, 5, 15, 12, 0, tzinfo=UTC)


def day(month: int, number: int, year: int = 2024) -> datetime:
    return datetime(year, month, number, tzinfo=UTC)


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        ("What did I buy yesterday?", day(5, 14), day(5, 15)),
        ("What did I eat today?", day(5, 15), day(5, 16)),
        ("Where did I go last week?", day(5, 6), day(5, 13)),
        ("What am I doing this week?", day(5, 13), day(5, 20)),
        ("Who did I meet last weekend?", day(5, 11), day(5, 13)),
        ("What did I read last month?", day(4, 1), day(5, 1)),
        ("What happened this month?", day(5, 1), day(6, 1)),
        ("Where did I travel last year?", day(1, 1, 2023), day(1, 1, 2024)),
        ("What did I start this year?", day(1, 1), day(1, 1, 2025)),
        ("What did I order two months ago?", day(3, 1), day(4, 1)),
        ("Which film did I see 3 days ago?", day(5, 12), day(5, 13)),
        ("What did I do a week ago?", day(5, 6), day(5, 13)),
        ("Where was I a year ago?", day(1, 1, 2023), day(1, 1, 2024)),
        ("What did I say on Monday?", day(5, 13), day(5, 14)),
        ("What happened last Friday?", day(5, 10), day(5, 11)),
        ("What did I say on Wednesday?", day(5, 8), day(5, 9)),  # today is one: a week back
        ("What have I bought recently?", day(5, 1), AT + timedelta(seconds=1)),
    ],
)
def test_a_relative_phrase_points_at_its_span(
    question: str, start: datetime, end: datetime
) -> None:
    assert relative_windows(question, AT) == (Window(start, end),)


def test_no_relative_phrase_points_nowhere() -> None:
    assert relative_windows("What is my dog called?", AT) == ()
    assert relative_windows("Monday " * 10_000, AT) == ()  # a weekday alone says nothing
    window = Window(day(5, 14), day(5, 15))
    assert window.holds(datetime(2024, 5, 14, 23, 59, tzinfo=UTC))
    assert not window.holds(day(5, 15))


@pytest.mark.parametrize(
    "at",
    [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(1, 2, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, tzinfo=UTC),
    ],
)
def test_a_span_outside_the_calendar_is_left_out(at: datetime) -> None:
    question = "yesterday, today, recently, last week, this year, a year ago, 999 years ago"
    assert all(w.start < w.end for w in relative_windows(question, at))  # and no error


@pytest.mark.parametrize(
    "question",
    ["Where did I go the day before yesterday?", "Is Today's special vegan?",
     "Play This Year's Hits."],
)  # fmt: skip
def test_names_and_the_day_before_yesterday_are_not_yesterday(question: str) -> None:
    assert relative_windows(question, AT) == ()
