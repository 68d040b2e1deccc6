"""The months and years a question names, and the pages they date."""

from __future__ import annotations

import pytest

from memory.dates import MONTHS, NamedDate, date_named, named_dates
from memory.ranking import PoolPage, base_scores


@pytest.mark.parametrize(
    ("question", "named"),
    [
        ("What did Maria donate in December 2023?", [NamedDate(2023, 12)]),
        ("What did Gina find on 1 February, 2023?", [NamedDate(2023, 2)]),
        ("What was accepted on May 23, 2023?", [NamedDate(2023, 5)]),
        ("When did Melanie go camping in June?", [NamedDate(None, 6)]),
        ("How many times has she gone to the beach in 2023?", [NamedDate(2023, None)]),
        ("Between March 2022 and July 2023?", [NamedDate(2022, 3), NamedDate(2023, 7)]),
        ("What happened in May?", [NamedDate(None, 5)]),
        ("May I ask what she painted?", []),  # a verb, not the month
        ("Did May visit her sister?", []),  # a name
        ("What did she do in december?", []),  # a month is a name: capitalised
        ("Who sent 2023 roses?", [NamedDate(2023, None)]),
        ("What did Jan paint?", []),  # abbreviations are names too often
        ("What did June tell August?", []),  # names, as April and May can be
        ("What did she paint in June?", [NamedDate(None, 6)]),
        ("What happened in December of 2023?", [NamedDate(2023, 12)]),
        ("Explain          May I ask", []),  # no "in" inside "Explain"
    ],
)
def test_named_dates(question: str, named: list[NamedDate]) -> None:
    assert list(named_dates(question)) == named


def test_a_page_is_dated_by_its_month_and_year() -> None:
    def named(text: str) -> frozenset[NamedDate]:
        return frozenset(named_dates(text))

    assert date_named(named("in December 2023"), 2023, 12)
    assert not date_named(named("in December 2023"), 2022, 12)
    assert not date_named(named("in December 2023"), 2023, 11)
    assert date_named(named("in June"), 2021, 6)
    assert date_named(named("in 2023"), 2023, 1)
    assert not date_named(frozenset(), 2023, 1)
    every = named(" ".join(f"{m} {y}" for y in range(1900, 2024) for m in MONTHS))
    assert len(every) > 1000  # a hostile question: still three lookups per page
    assert date_named(every, 1999, 3)
    assert not date_named(every, 2024, 3)


def test_a_dated_page_gets_the_date_weight() -> None:
    pool = [
        PoolPage("a", 1, 0.0, lexical=1.0, dense=0.4, dated=True),
        PoolPage("b", 2, 0.0, lexical=1.0, dense=0.4),
    ]
    scores = base_scores(pool, 0.0, date_weight=0.2)
    assert scores == pytest.approx({"a": 1.2, "b": 1.0})
    assert base_scores(pool, 0.0) == pytest.approx({"a": 1.0, "b": 1.0})


def test_a_long_text_of_many_mays_is_read_in_linear_time() -> None:
    text = "May " * 50_000  # the verb, never a month: nothing before it is a preposition
    assert named_dates(text) == ()
    assert named_dates("in " + "May " * 3) == (NamedDate(None, 5),)


def test_years_inside_many_month_mentions_are_read_in_linear_time() -> None:
    text = "May 1 " * 3000 + " 2023" * 3000  # quadratic before: each year against each mention
    # the last "May 1" takes the first year as its own
    assert named_dates(text) == (NamedDate(None, 5), NamedDate(2023, 5), NamedDate(2023, None))
