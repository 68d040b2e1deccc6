"""The offline LLM's keywords and summaries in a process of its own (``text_process``): the
same answers as in this process, a failed request answered as an LLM error and the next one
served, a dead child replaced, and no child left behind by a killed parent."""

from __future__ import annotations

import asyncio
import os
import signal
import textwrap

import pytest

from adapters.llm.offline_llm import OfflineLLM
from adapters.llm.offline_text import InlineText
from adapters.llm.text_process import TextHost
from schemas.errors import LLMError
from tests.support.stacks import child_outlives_killed_parent

DIALOGUES = [
    "User: I adopted a beagle named Miso last week.\nAssistant: Congratulations on Miso!\n"
    "User: We also booked a trip to Lisbon in June 2024.\nAssistant: Lisbon in June is lovely.",
    "User: hey\nAssistant: hi",
    "Time: 2024-05-01\nUser: order 1234 arrived broken 😞\nAssistant: Sorry, a refund is sent.",
    "",
]


@pytest.mark.parametrize("mode", ["yake", "content"])
async def test_the_process_answers_what_this_process_answers(mode: str) -> None:
    host = TextHost()
    here = OfflineLLM(announce=False, keyword_mode=mode, text=InlineText())  # type: ignore[arg-type]
    there = OfflineLLM(announce=False, keyword_mode=mode, text=host)  # type: ignore[arg-type]
    try:
        assert await there.topics_many(DIALOGUES) == await here.topics_many(DIALOGUES)
        for dialogue in DIALOGUES:
            assert await there.topics(dialogue) == await here.topics(dialogue)
            assert await there.topics_summary(dialogue, "Earlier: a parcel.") == (
                await here.topics_summary(dialogue, "Earlier: a parcel.")
            )
            assert await there.segment_summary("", dialogue) == await here.segment_summary(
                "", dialogue
            )
        assert host.pid is not None, "the work ran in the child"
    finally:
        await there.close()
    assert host.pid is None, "close stops the child"


async def test_a_failing_request_raises_its_own_type_and_the_next_is_answered() -> None:
    """A programming error in the text work keeps its type, so the stage's policy dead-letters
    it as a bug at once, as it did when the work ran in this process."""
    host = TextHost()
    try:
        with pytest.raises(AttributeError, match="topics: AttributeError"):
            await host.run("topics", 42, "yake")  # not a dialogue
        with pytest.raises(KeyError, match="nonsense"):
            await host.run("nonsense")  # an unknown operation
        assert await host.run("segment_summary", "", "User: I moved to Porto.") == (
            "User: I moved to Porto."
        )
    finally:
        await host.close()


async def test_a_killed_child_fails_its_request_as_an_llm_error_and_is_replaced() -> None:
    host = TextHost()
    try:
        await host.run("topics", DIALOGUES[0], "yake")
        first = host.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        # the request written to the dead child fails (the stage retries it), or, when the
        # death was seen first, a new child answers it
        outcome: object
        try:
            outcome = await host.run("topics", DIALOGUES[0], "yake")
        except LLMError as exc:
            outcome = exc
        assert not isinstance(outcome, LLMError) or "offline text process" in str(outcome)
        inline = await InlineText().run("topics", DIALOGUES[1], "yake")
        assert await host.run("topics", DIALOGUES[1], "yake") == [list(row) for row in inline]
        assert host.pid not in (None, first)
    finally:
        await host.close()


async def test_a_stopped_child_is_killed_at_the_deadline_and_the_next_request_served() -> None:
    """A child that stops answering (SIGSTOP here; a pathological input, a loop) held every
    later request, a user's DELETE queued behind one among them: past the deadline it is
    killed, the request it held fails as an LLM error (the stage retries it), the one queued
    behind it goes to a new child and is answered, and so is the next."""
    host = TextHost()
    host.deadline_s = 0.5
    try:
        await host.run("topics", DIALOGUES[0], "yake")
        stuck = host.pid
        assert stuck is not None
        os.kill(stuck, signal.SIGSTOP)
        queued = [host.run("topics", dialogue, "yake") for dialogue in DIALOGUES[:2]]
        outcomes = await asyncio.wait_for(asyncio.gather(*queued, return_exceptions=True), 10)
        assert isinstance(outcomes[0], LLMError), outcomes
        assert "did not answer within 0.5" in str(outcomes[0])
        inline = await InlineText().run("topics", DIALOGUES[1], "yake")
        assert outcomes[1] == [list(row) for row in inline], "queued behind: the next child's"
        assert await host.run("topics", DIALOGUES[1], "yake") == [list(row) for row in inline]
        assert host.pid not in (None, stuck)
    finally:
        await host.close()


async def test_a_slow_queue_within_the_deadline_is_not_cut_short() -> None:
    """The deadline is a request's time at the head of the queue, not its time queued: many
    requests behind each other, each quick, all get their answers."""
    host = TextHost()
    host.deadline_s = 1.5
    try:
        texts = [DIALOGUES[0] * 40] * 30  # about 3 s of work in all, each about 0.1 s
        answers = await asyncio.gather(*(host.run("topics", t, "yake") for t in texts))
        assert len(answers) == len(texts)
        assert all(answers), "each answered"
    finally:
        await host.close()


def test_no_child_outlives_a_parent_killed_by_sigkill() -> None:
    script = textwrap.dedent(
        """
        import asyncio
        from adapters.llm.text_process import TextHost

        async def main():
            host = TextHost()
            await host.run("segment_summary", "", "User: hello")
            print(host.pid, flush=True)
            await asyncio.sleep(600)

        asyncio.run(main())
        """
    )
    assert not child_outlives_killed_parent(script), "the text process outlived its killed parent"


@pytest.mark.parametrize("name", ["UnicodeDecodeError", "MemoryError", "StopIteration"])
def test_a_child_error_of_another_type_is_an_llm_error(name: str) -> None:
    """Only the plain programming errors keep their type: one that cannot be made from a
    message alone, or that is the child's own trouble, must not break reading the answer."""
    assert isinstance(TextHost().failure(f"topics: {name}: from the child"), LLMError)
    assert isinstance(TextHost().failure("topics: KeyError: 'x'"), KeyError)
