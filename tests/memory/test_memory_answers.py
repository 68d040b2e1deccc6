"""An answer that only says the assistant does not know is not remembered (respond's rule)."""

from __future__ import annotations

import pytest

from adapters.llm.offline_answers import I_DONT_KNOW, NOTHING_REMEMBERED
from memory.answers import says_it_does_not_know


@pytest.mark.parametrize(
    "answer",
    [
        I_DONT_KNOW,
        NOTHING_REMEMBERED,
        "I do not know which city you live in.",
        "Sorry, I don't have that information.",
        "I\u2019m sorry, but I can't recall your order number.",
        "I have no information about your trip.",
        "There is no record of a parcel in our conversations.",
        "I'm not sure what your dog is called.",
        "Unfortunately, I don't know that.",
        "I'm afraid I don't know.",
        "I couldn't find anything about that.",
        "I don't have access to that.",
        "Hmm, I'm not sure.",
    ],
)
def test_replies_that_only_say_nothing_are_recognised(answer: str) -> None:
    assert says_it_does_not_know(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "You live in Toronto.",
        "Your parcel 42 ships today; I don't know the exact hour yet, but it leaves this morning.",
        "I don't know your address, but your dog is Miso.",
        "There is no record of a second account; your email is a@b.c",
        "I can't tell you how happy that makes me! " * 6,
        "Miso, your dog.",
        "I know you moved to Paris last month.",
        "",
    ],
)
def test_replies_that_say_something_are_kept(answer: str) -> None:
    assert not says_it_does_not_know(answer)
