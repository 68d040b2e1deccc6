"""The offline backend's user-trait heuristic: cue words mapped to appendix dimensions.

A deliberately small, documented heuristic, not an analysis: a user who mentions travel words
gets "Travel Interest: Medium", three or more mentions give "High". Absence of a cue is not
evidence, so it never assigns "Low", and it covers only dimensions that words reveal (the
interest tags and the two answer-length preferences), not personality.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from schemas.records import Trait

# Space-separated cues per dimension. A cue ending in "*" is a stem ("politic*" matches
# "political"); others match as whole words with an optional plural, so "art" does not fire on
# "article". Every key is an appendix dimension (tests check it).
TRAIT_CUES: dict[str, str] = {
    "Travel Interest": "travel* trip vacation holiday flight hotel journey abroad tour*",
    "Sports Interest": (
        "sport* football soccer basketball tennis running marathon gym workout hik* yoga swim*"
    ),
    "Foodie Interest": "food* cook* recipe restaurant bak* cuisine dinner chef",
    "Music Interest": "music* song guitar piano concert band singing",
    "Literature Interest": "book novel* reading poem poetry author library",
    "Movie Interest": "movie film cinema series netflix tv",
    "Technology Interest": "tech* software computer gadget programming coding laptop smartphone",
    "Health Focus": "health* doctor sick diet sleep medicine hospital fitness",
    "Financial Management Interest": "money budget* invest* stock saving* financ* loan mortgage",
    "Family Focus": "family kid child children son daughter parent* mom dad wife husband",
    "Animal Focus": "pet dog cat puppy puppies kitten animal",
    "Gaming Interest": "game gaming playstation xbox nintendo chess",
    "Art Interest": "art painting paint drawing museum gallery sculpt*",
    "Education Interest": "school study studying course learning university exam teacher",
    "Science Interest": (
        "science scientific physics chemistry biology research experiment astronomy"
    ),
    "Fashion Interest": "fashion* clothes dress outfit shoes",
    "Environmental Focus": "environment* climate recycl* sustainab* pollution",
    "History Interest": "history historical ancient century centuries",
    "Political Focus": "politic* election government vote voting policy",
    "Religious Interest": "church religio* faith pray* spiritual* temple",
    "Psychology Interest": "psycholog* therapy therapist anxiety mental",
    "Social Media Activity": "instagram tiktok twitter facebook followers",
    "Conciseness": "brief* concise* shorter tl;dr",
    "Complexity": "detail* thorough* in-depth elaborate",
}
HIGH_AT = 3  # mentions in one dialogue that make a dimension "High"
_RANK = {"Low": 0, "Medium": 1, "High": 2}


def _pattern(cues: str) -> re.Pattern[str]:
    words = [
        re.escape(cue[:-1]) + r"\w*" if cue.endswith("*") else re.escape(cue) + "(?:e?s)?"
        for cue in cues.split()
    ]
    return re.compile(r"\b(?:" + "|".join(words) + r")\b", re.IGNORECASE)


_PATTERNS = {dimension: _pattern(cues) for dimension, cues in TRAIT_CUES.items()}


def detect_traits(user_text: str) -> dict[str, Trait]:
    traits: dict[str, Trait] = {}
    for dimension, pattern in _PATTERNS.items():
        hits = [match.group(0).lower() for match in pattern.finditer(user_text)]
        if hits:
            level = "High" if len(hits) >= HIGH_AT else "Medium"
            cited = ", ".join(dict.fromkeys(hits))
            traits[dimension] = Trait(level=level, reason=f"user mentions {cited}")
    return traits


def merge_traits(known: Mapping[str, Trait], found: Mapping[str, Trait]) -> dict[str, Trait]:
    """Known traits updated by new ones; a heuristic never lowers a level it saw before."""
    merged = dict(known)
    for dimension, trait in found.items():
        previous = merged.get(dimension)
        if previous is None or _RANK[trait.level] >= _RANK[previous.level]:
            merged[dimension] = trait
    return merged
