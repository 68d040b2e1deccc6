"""Tokens, keyword sets, query keywords, lexical vectors and fact normalization."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.text import (
    STOPWORDS,
    keyword_set,
    lexical_vector,
    normalize_fact,
    query_keywords,
    stem,
    tokenize,
)


def test_tokenize_drops_stopwords_and_lowercases() -> None:
    assert tokenize("The Cat sat on THE mat") == ["cat", "sat", "mat"]


def test_tokenize_keeps_numbers_of_any_length() -> None:
    assert tokenize("I ran 5 km on 7 May 2023") == ["ran", "5", "km", "7", "may", "2023"]


def test_tokenize_drops_single_letters_and_underscores() -> None:
    assert tokenize("a b c snake_case x") == ["snake", "case"]


def test_tokenize_is_unicode_aware() -> None:
    assert tokenize("Café in Zürich, ÉCOLE") == ["café", "zürich", "école"]
    assert tokenize("\uff26\uff55\uff4c\uff4c") == ["full"]  # fullwidth "Full"


def test_tokenize_empty() -> None:
    assert tokenize("") == []
    assert tokenize("the and of, it!") == []


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("trips", "trip"),
        ("tripping", "trip"),
        ("boxes", "box"),
        ("classes", "class"),
        ("stories", "story"),
        ("studied", "study"),
        ("visited", "visit"),
        ("hiking", "hike"),
        ("hiked", "hike"),
        ("hikes", "hike"),
        ("planned", "plan"),
        ("falling", "fall"),
        ("need", "need"),
        ("bus", "bus"),
        ("thing", "thing"),
        ("played", "play"),
        ("naïve", "naïve"),
    ],
)
def test_stem(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_variants_of_one_word_meet() -> None:
    assert tokenize("hike hikes hiked hiking") == ["hike"] * 4


@given(st.from_regex(r"[a-z]{1,12}", fullmatch=True))
def test_stemming_a_stem_changes_nothing(word: str) -> None:
    assert stem(stem(word)) == stem(word)


@given(st.text(max_size=60))
def test_tokenizing_tokens_gives_them_back(text: str) -> None:
    tokens = tokenize(text)
    assert tokenize(" ".join(tokens)) == tokens
    assert not STOPWORDS & set(tokens)


def test_keyword_set_lets_phrases_overlap() -> None:
    assert keyword_set(["Business trip", "Paris"]) == {"business", "trip", "paris"}
    assert keyword_set(["Business trip"]) & keyword_set(["trips"]) == {"trip"}
    assert keyword_set([]) == set()
    assert keyword_set(["the", ""]) == set()


def test_query_keywords_by_frequency_then_first_occurrence() -> None:
    text = "paris museum trip; trip to paris; louvre trip"
    assert query_keywords(text) == ["trip", "paris", "museum", "louvre"]
    assert query_keywords(text, limit=2) == ["trip", "paris"]
    assert query_keywords(text, limit=0) == []
    assert query_keywords("zeta alpha mid") == ["zeta", "alpha", "mid"]


def test_lexical_vector_by_hand() -> None:
    def index(token: str) -> int:
        return zlib.crc32(token.encode()) & 0x7FFFFFFF

    vector = lexical_vector("Trip trip trips to Paris")
    # BM25 term weight tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avgdl)), length 4
    norm = 1.2 * (1 - 0.75 + 0.75 * 4 / 24)
    assert vector == pytest.approx(
        {index("trip"): 3 * 2.2 / (3 + norm), index("paris"): 1 * 2.2 / (1 + norm)}
    )
    assert lexical_vector("the of and") == {}


@given(st.text(max_size=80))
def test_lexical_vector_fits_qdrant_sparse(text: str) -> None:
    vector = lexical_vector(text)
    assert all(0 <= index < 2**31 for index in vector)
    assert all(0.0 < value < 1.2 + 1 for value in vector.values())  # saturates below k1 + 1
    assert vector == lexical_vector(text)


def test_normalize_fact() -> None:
    assert normalize_fact("  I like   Jazz.  ") == "i like jazz"
    assert normalize_fact("I like jazz!!!") == "i like jazz"
    assert normalize_fact("I live in Straße 5\n") == "i live in strasse 5"
    assert normalize_fact("Version 2.0 is out") == "version 2.0 is out"
    assert normalize_fact(" . ") == ""


@given(st.text(max_size=60))
def test_normalize_fact_is_idempotent(text: str) -> None:
    once = normalize_fact(text)
    assert normalize_fact(once) == once
