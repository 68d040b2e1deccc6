"""Facts as records: extraction, supersession, edits (pure core)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory.fact_book import current, fit
from memory.fact_keys import attribute_of
from memory.facts import Found, PageText, add_id, edited, extracted, provenance
from memory.ids import fact_id
from memory.persona import FactKind
from schemas.facts import FactBook, FactEdit, FactSource

T0 = datetime(2026, 1, 1, tzinfo=UTC)
USER = FactKind.USER


def page(n: int, text: str) -> PageText:
    return PageText(page_id=f"p{n}", turn_id=f"t{n}", text=text)


def learn(book: FactBook, *texts: str, n: int = 1, at: datetime = T0, capacity: int = 100):
    pages = [page(n + i, text) for i, text in enumerate(texts)]
    return extracted(book, USER, [Found(t) for t in texts], None, pages, at, capacity)


def texts(book: FactBook, kind: FactKind = USER) -> list[str]:
    return [fact.text for fact in current(book, kind)]


def edit(book: FactBook, op: str, fid: str, edit_id: str = "e1", **fields: object):
    change = FactEdit(user_id=book.user_id, edit_id=edit_id, op=op, fact_id=fid, at=0.0, **fields)
    return edited(book, change, T0 + timedelta(hours=1), 100)


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("My name is Ann.", "My name is Annabel."),
        ("I live in Lyon.", "We moved to Paris."),
        ("I am from Oslo.", "I'm from Bergen."),
        ("I work as a nurse.", "I work as a pilot."),
        ("I am 31 years old.", "I'm 32 years old."),
        ("My email is a@b.org.", "My e-mail address is c@d.org."),
        ("My dog is called Miso.", "My dog is called Rex."),
        ("My dog is called Miso.", "My dog's name is Rex."),
        ("My favourite colour is blue.", "My favorite colour is green."),
    ],
)
def test_a_newer_statement_of_the_same_attribute_supersedes_the_older(older, newer):
    book, _ = learn(FactBook(user_id="u"), older)
    book, delta = learn(book, newer, n=2, at=T0 + timedelta(days=1))
    assert texts(book) == [newer]
    old = next(f for f in book.facts if f.text == older)
    assert old.superseded_by == fact_id("u", USER, newer)
    assert old.superseded_at == T0 + timedelta(days=1)
    assert [f.text for f in delta.unstored] == [older]
    assert [change.change for change in book.history[old.fact_id]] == ["extracted", "superseded"]


def test_facts_about_different_things_both_stay():
    book, _ = learn(FactBook(user_id="u"), "My dog is called Miso.", "My cat is called Rex.")
    book, _ = learn(book, "I like hiking.", "I like chess.", n=3)
    assert len(texts(book)) == 4
    assert attribute_of("My dog is very cute.") is None  # not a name: no supersession


def test_the_llm_can_name_the_facts_a_new_one_updates():
    book, _ = learn(FactBook(user_id="u"), "I drink coffee every morning.")
    old_id = book.facts[0].fact_id
    book, _ = extracted(
        book, USER, [Found("I switched to tea.", (old_id,))], None, [page(2, "tea")], T0, 100
    )
    assert texts(book) == ["I switched to tea."]


def test_ids_are_deterministic_and_a_replay_changes_nothing():
    first, delta = learn(FactBook(user_id="u"), "I live in Lyon.", "We moved to Paris.")
    assert [f.text for f in delta.stored] == ["We moved to Paris."]  # Lyon never current
    again, delta = learn(first, "I live in Lyon.", "We moved to Paris.")
    assert again.facts == first.facts
    assert not delta.stored
    assert not delta.unstored


def test_a_superseded_fact_comes_back_only_when_said_again_in_new_pages():
    book, _ = learn(FactBook(user_id="u"), "I live in Lyon.")
    book, _ = learn(book, "We moved to Paris.", n=2)
    book, _ = learn(book, "I live in Lyon.", n=1)  # the same page read again
    assert texts(book) == ["We moved to Paris."]
    book, _ = learn(book, "I live in Lyon.", n=9)  # said again later: moved back
    assert texts(book) == ["I live in Lyon."]


def test_pinned_facts_are_never_superseded_nor_aged_out():
    book, _ = learn(FactBook(user_id="u"), "I live in Lyon.")
    book, _ = edit(book, "edit", book.facts[0].fact_id, pinned=True)
    book, _ = learn(book, "We moved to Paris.", n=2)
    assert texts(book) == ["I live in Lyon.", "We moved to Paris."]
    book, _ = learn(book, *(f"I own {n} bikes." for n in range(5)), n=3, capacity=2)
    assert texts(book) == ["I live in Lyon.", "I own 3 bikes.", "I own 4 bikes."]


def test_a_deleted_fact_is_never_extracted_again():
    book, _ = learn(FactBook(user_id="u"), "I am allergic to nuts.")
    fid = book.facts[0].fact_id
    book, delta = edit(book, "delete", fid)
    assert texts(book) == []
    assert [f.fact_id for f in delta.unstored] == [fid]
    book, _ = learn(book, "I am allergic to nuts.", n=5)
    assert texts(book) == []
    assert [c.change for c in book.history[fid]] == ["extracted", "deleted"]


def test_an_edit_keeps_the_id_and_survives_re_extraction():
    book, _ = learn(FactBook(user_id="u"), "I am allergic to nuts.")
    fid = book.facts[0].fact_id
    book, delta = edit(book, "edit", fid, text="I am allergic to peanuts.")
    assert [f.text for f in delta.stored] == ["I am allergic to peanuts."]
    assert [f.text for f in delta.unstored] == ["I am allergic to nuts."]
    book, _ = learn(book, "I am allergic to nuts.", n=1)
    book, _ = learn(book, "I am allergic to peanuts.", n=7)  # its new text: the same fact
    assert [(f.fact_id, f.text) for f in current(book, USER)] == [
        (fid, "I am allergic to peanuts.")
    ]


def test_a_re_sent_edit_changes_nothing():
    book, _ = learn(FactBook(user_id="u"), "I like jazz.")
    fid = book.facts[0].fact_id
    book, _ = edit(book, "delete", fid, edit_id="x")
    book, _ = edit(
        book, "add", "0" * 36, edit_id="y", text="I like jazz.", fact_kind="user_knowledge"
    )
    assert texts(book) == ["I like jazz."]
    again, delta = edit(book, "delete", fid, edit_id="x")
    assert again == book
    assert not delta.unstored


def test_an_added_fact_has_the_api_as_source_and_supersedes_too():
    book, _ = learn(FactBook(user_id="u"), "I live in Lyon.")
    book, _ = edit(book, "add", "0" * 36, text="I live in Paris.", fact_kind="user_knowledge")
    (fact,) = current(book, USER)
    assert fact.source == "api"
    assert fact.fact_id == fact_id("u", USER, "I live in Paris.")


def test_agent_traits_are_kept_per_assistant():
    pages = [page(1, "x")]
    book, _ = extracted(
        FactBook(user_id="u"), FactKind.AGENT, [Found("My name is Sam.")], "a1", pages, T0, 100
    )
    book, _ = extracted(book, FactKind.AGENT, [Found("My name is Max.")], "a2", pages, T0, 100)
    assert [f.text for f in current(book, FactKind.AGENT, "a1")] == ["My name is Sam."]
    assert [f.text for f in current(book, FactKind.AGENT, "a2")] == ["My name is Max."]


def test_provenance_names_the_page_that_said_it():
    pages = [page(1, "User: I have a dog"), page(2, "User: my sister lives in Rome")]
    assert provenance("My sister lives in Rome.", pages) == FactSource(
        turn_ids=["t2"], page_ids=["p2"]
    )
    assert provenance("Unrelated words entirely.", pages).page_ids == ["p1", "p2"]


# --- what an attack on the first version found ---


def edit_at(book: FactBook, op: str, fid: str, edit_id: str, at: float, **fields: object):
    change = FactEdit(user_id=book.user_id, edit_id=edit_id, op=op, fact_id=fid, at=at, **fields)
    return edited(book, change, T0, 100)


def test_an_older_edit_sent_again_after_a_newer_one_changes_nothing():
    book, _ = learn(FactBook(user_id="u"), "I am allergic to nuts.")
    fid = book.facts[0].fact_id
    book, _ = edit_at(book, "edit", fid, "second", 20.0, text="Allergic to peanuts, final.")
    book, delta = edit_at(book, "edit", fid, "first", 10.0, text="First correction.")
    assert texts(book) == ["Allergic to peanuts, final."]
    assert not delta.stored
    book, _ = edit_at(book, "delete", fid, "del", 30.0)
    book, _ = edit_at(book, "add", "0" * 36, "old-add", 5.0, text="I am allergic to nuts.",
                      fact_kind="user_knowledge")  # fmt: skip
    assert texts(book) == [], "an add older than the delete does not bring it back"


def test_a_job_read_again_leaves_what_a_later_job_superseded():
    pages = [page(0, "User: I live in Lyon."), page(1, "User: my shoes are worn out")]
    job = [Found("I live in Lyon."), Found("My shoes are worn out.")]
    book, _ = extracted(FactBook(user_id="u"), USER, job, None, pages, T0, 100)
    book, _ = learn(book, "We moved to Paris.", n=5)
    again, _ = extracted(book, USER, job, None, pages, T0, 100)  # job 1 delivered again
    assert "I live in Lyon." not in texts(again)
    assert "We moved to Paris." in texts(again)


def test_two_current_facts_never_say_the_same():
    book, _ = learn(FactBook(user_id="u"), "I like tea.", "I like jazz.")
    tea, jazz = (f.fact_id for f in book.facts)
    book, _ = edit(book, "edit", tea, text="I like jazz.")
    assert [f.fact_id for f in current(book, USER)] == [tea]
    assert next(f for f in book.facts if f.fact_id == jazz).superseded_by == tea


def test_adding_the_old_text_of_a_corrected_fact_makes_a_fact_of_its_own():
    book, _ = learn(FactBook(user_id="u"), "I live in Lyon.")
    lyon = book.facts[0].fact_id
    book, _ = edit_at(book, "edit", lyon, "e1", 1.0, text="I like tea.")
    add = add_id(book, USER, "I live in Lyon.", None)
    assert add != lyon
    book, _ = edit_at(
        book, "add", add, "e2", 2.0, text="I live in Lyon.", fact_kind="user_knowledge"
    )
    assert sorted(texts(book)) == ["I like tea.", "I live in Lyon."]


def test_adding_a_pinned_fact_again_without_pinned_keeps_it_pinned():
    book, _ = edit_at(FactBook(user_id="u"), "add", "0" * 36, "e1", 1.0, text="I ski.",
                      fact_kind="user_knowledge", pinned=True)  # fmt: skip
    book, _ = edit_at(book, "add", "0" * 36, "e2", 2.0, text="I ski.", fact_kind="user_knowledge")
    assert current(book, USER)[0].pinned


def test_a_book_past_its_bound_is_trimmed_and_says_which_current_facts_went():
    book = FactBook(user_id="u")
    for round_ in range(30):
        book, _ = learn(book, *(f"I own bike number {n} of {round_}." for n in range(40)), n=round_)
    big = len(book.model_dump_json())
    trimmed, dropped = fit(book, max_bytes=big // 4)
    assert len(trimmed.model_dump_json()) <= big // 4
    assert {f.fact_id for f in dropped} <= {f.fact_id for f in current(book, USER)}
    assert not set(f.fact_id for f in dropped) & {f.fact_id for f in trimmed.facts}
    assert fit(trimmed, max_bytes=big // 4) == (trimmed, [])


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("My husband is allergic to nuts.", "My husband is John."),
        ("My phone number is 555-1234.", "My phone number is not working since Monday."),
        ("My address is 3 Rue X, Lyon.", "My address is wrong on the invoice."),
        ("My favourite colour is blue.", "My favourite colour is not available in size 42."),
        ("My name is Ann.", "Call me Tomorrow if possible."),
        ("My name is Ann and I am allergic to penicillin.", "My name is Annabel."),
        ("My car is a blue Golf.", "My car is in the garage for repairs."),
    ],
)
def test_a_statement_that_is_not_an_update_supersedes_nothing(older, newer):
    book, _ = learn(FactBook(user_id="u"), older)
    book, _ = learn(book, newer, n=2)
    assert older in texts(book)


def test_an_edit_of_another_fact_is_never_stale_whatever_the_clocks():
    """Edits of different facts are ordered by the user's stream, not by their times: a replica
    whose clock is behind (or a copy re-sent late) still changes the fact it names."""
    book, _ = learn(FactBook(user_id="u"), "I like tea.", "I like jazz.")
    tea, jazz = (f.fact_id for f in book.facts)
    book, _ = edit_at(book, "edit", tea, "e1", 30.0, text="I like green tea.")
    book, _ = edit_at(book, "edit", jazz, "e2", 1.0, text="I like bebop.")
    book, _ = edit_at(book, "add", "0" * 36, "e3", 2.0, text="My dog is called Rex.",
                      fact_kind="user_knowledge")  # fmt: skip
    assert sorted(texts(book)) == ["I like bebop.", "I like green tea.", "My dog is called Rex."]


def test_adding_a_text_again_and_again_after_corrections_always_adds_it():
    book = FactBook(user_id="u")
    for n, other in enumerate(("I like coffee.", "I like juice.", "I like milk.")):
        book, _ = edit_at(book, "add", "0" * 36, f"a{n}", 10.0 * n, text="I like tea.",
                          fact_kind="user_knowledge")  # fmt: skip
        tea = next(f.fact_id for f in current(book, USER) if f.text == "I like tea.")
        book, _ = edit_at(book, "edit", tea, f"e{n}", 10.0 * n + 1, text=other)
    book, _ = edit_at(book, "add", "0" * 36, "last", 99.0, text="I like tea.",
                      fact_kind="user_knowledge")  # fmt: skip
    assert sorted(texts(book)) == ["I like coffee.", "I like juice.", "I like milk.", "I like tea."]
