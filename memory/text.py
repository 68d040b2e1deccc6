"""Model-free text handling: tokens, keyword sets, lexical vectors and fact normalization.

The same ``tokenize`` feeds the keyword Jaccard of the paper's F-score and the sparse
(lexical) vectors, so an LLM keyword phrase, a query and a page agree on what a word is.
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

_WORD = re.compile(r"[^\W_]+")  # letters and digits of any script, no underscore
_SPACES = re.compile(r"\s+")
# after NFKC, fullwidth ,;:!? are ASCII and "…" is "..."; the ideographic stops stay
_SENTENCE_END = ".,;:!?\u3002\u3001"
_VOWELS = frozenset("aeiou")

_STOPWORD_TEXT = """
    a about above after again against all am an and any are aren as at be because been
    before being below between both but by can cannot could couldn did didn do does doesn
    doing don down during each few for from further had hadn has hasn have haven having he
    her here hers herself him himself his how i if in into is isn it its itself just ll me
    might more most must mustn my myself no nor not now of off on once only or other ought
    our ours ourselves out over own re same shall shan she should shouldn so some such than
    that the their theirs them themselves then there these they this those through to too
    under until up ve very was wasn we were weren what when where which while who whom why
    will with won would wouldn you your yours yourself yourselves also yes oh ok okay
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def tokenize(text: str) -> list[str]:
    """Lowercase content-word tokens of ``text``, in order, repeats kept.

    Letters of any script and digits count; stopwords and one-letter tokens are dropped
    (a token with a digit is kept whatever its length: dates and amounts matter). English
    words are lightly stemmed so that "trips", "tripping" and "trip" meet.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    tokens: list[str] = []
    for raw in _WORD.findall(folded):
        if raw in STOPWORDS:
            continue
        token = raw if any(ch.isdigit() for ch in raw) else stem(raw)
        if token in STOPWORDS or (len(token) < 2 and not token.isdigit()):
            continue
        tokens.append(token)
    return tokens


def stem(word: str) -> str:
    """A light, deterministic English suffix stripper (plural s/es/ies, -ed, -ing).

    A small subset of Porter's steps 1a and 1b, repeated until nothing changes so that
    stemming a stem gives the stem back. Words that are not plain ASCII letters pass through.
    """
    # cached: a user's vocabulary repeats and every retrieve re-stems it; long words (rare,
    # or hostile) are not kept, so the cache stays small
    return _cached_stem(word) if len(word) <= MAX_CACHED_WORD else _stem(word)


MAX_CACHED_WORD = 32


@lru_cache(maxsize=1 << 16)
def _cached_stem(word: str) -> str:
    return _stem(word)


def _stem(word: str) -> str:
    if not (word.isascii() and word.isalpha()):
        return word
    previous = None
    while word != previous:
        previous = word
        word = _strip_ed_ing(_strip_plural(word))
    return word


def _strip_plural(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"  # stories -> story (but ties -> tie below)
    if word.endswith(("sses", "xes", "zes", "ches", "shes")):
        return word[:-2]  # classes -> class, boxes -> box, wishes -> wish
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        return word[:-1]
    return word


def _strip_ed_ing(word: str) -> str:
    if word.endswith("ied") and len(word) > 4:
        return word[:-3] + "y"  # studied -> study
    if word.endswith("eed"):
        return word  # need, speed, agreed: the "ed" is part of the word
    for suffix in ("ing", "ed"):
        if word.endswith(suffix):
            base = word[: -len(suffix)]
            if len(base) >= 3 and _VOWELS & set(base):
                return _repair(base)
    return word


def _repair(base: str) -> str:
    """Undo what -ed/-ing did to the base: doubled consonant, dropped final e (Porter 1b)."""
    if len(base) >= 2 and base[-1] == base[-2] and base[-1] not in _VOWELS | set("lsz"):
        return base[:-1]  # planned -> plan, running -> run
    if base.endswith(("at", "bl", "iz")) or _is_short(base):
        return base + "e"  # hiking -> hike, created -> create
    return base


def _is_short(base: str) -> bool:
    """One consonant-vowel-consonant group, the last not w, x or y: "hik", "shin", "car"."""
    pattern = "".join("v" if ch in _VOWELS else "c" for ch in base)
    return re.fullmatch(r"c+v+c", pattern) is not None and base[-1] not in "wxy"


@lru_cache(maxsize=1 << 14)
def phrase_tokens(keywords: tuple[str, ...]) -> frozenset[str]:
    """``keyword_set`` of a segment's stored keywords, cached: retrieval scores the same
    segments' keywords over and over, and tokenizing them each time was a large share of a
    retrieve's time."""
    return frozenset(keyword_set(keywords))


def keyword_set(keywords: Iterable[str]) -> set[str]:
    """The union of the tokens of each keyword phrase.

    LLM keywords are phrases ("Business trip", "trip to Paris"); comparing their tokens lets
    "Business trip" and "trip" overlap in the Jaccard term instead of counting as disjoint.
    """
    result: set[str] = set()
    for phrase in keywords:
        result.update(tokenize(phrase))
    return result


def query_keywords(text: str, limit: int = 10) -> list[str]:
    """The ``limit`` most frequent content tokens of ``text``; ties go to the first seen.

    Model-free and deterministic, so a query's keywords cost no LLM call on the hot path.
    """
    if limit <= 0:
        return []
    tokens = tokenize(text)
    first_seen = {token: index for index, token in reversed(list(enumerate(tokens)))}
    counts = Counter(tokens)
    ranked = sorted(counts, key=lambda token: (-counts[token], first_seen[token]))
    return ranked[:limit]


# Words that shape a question but name nothing it asks about (stems, as ``tokenize`` gives).
_QUESTION_TEXT = (
    "what when where who whom whose which why how would could does did kind type likely"
)
QUESTION_WORDS = frozenset(_QUESTION_TEXT.split())


def query_terms(text: str) -> list[str]:
    """The tokens of a query without question words: the words the answer's page may hold."""
    return [token for token in tokenize(text) if token not in QUESTION_WORDS]


def token_index(token: str) -> int:
    """A stable 31-bit index for a token (crc32 is the same in every process, unlike hash())."""
    return zlib.crc32(token.encode("utf-8")) & 0x7FFFFFFF


BM25_K1 = 1.2
BM25_B = 0.75
BM25_AVGDL = 24.0


def lexical_vector(text: str) -> dict[int, float]:
    """A sparse BM25 term-weight vector of ``text`` for a Qdrant sparse vector.

    The collection's sparse vector uses Qdrant's IDF modifier, which computes the inverse
    document frequency server-side over the stored points; we supply BM25's saturated term
    frequency, tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avgdl)), with a fixed average
    length since a page cannot know the collection's. On LoCoMo this found more evidence than
    1 + log(tf) (docs/architecture.md, "What it implements"). Two tokens whose indices collide
    share one entry (their counts add up).
    """
    counts = Counter(token_index(token) for token in tokenize(text))
    length = sum(counts.values())
    norm = BM25_K1 * (1 - BM25_B + BM25_B * length / BM25_AVGDL)
    return {i: c * (BM25_K1 + 1) / (c + norm) for i, c in sorted(counts.items())}


def normalize_fact(text: str) -> str:
    """The form two spellings of the same fact share: casefolded, one space, no final stop."""
    collapsed = _SPACES.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()
    return collapsed.rstrip(_SENTENCE_END + " ")
