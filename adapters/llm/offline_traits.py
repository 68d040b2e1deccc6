"""The offline backend's user-trait heuristic: cues in what the user says, mapped to every
dimension of the paper's appendix (personality and needs, AI alignment, interests).

A small, documented heuristic, not an analysis. Each dimension has cues that raise it and cues
that lower it: "I love hiking" and "the gym" give "Sports Interest: Medium" (three mentions or
more: "High"); "I'm an introvert, I stay home" gives "Extraversion: Low", and so does a raising
cue the user negates ("I don't like parties", "not a fan of travel"). A dimension the user says
nothing about gets nothing: absence is not evidence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from schemas.records import Trait


@dataclass(frozen=True)
class Cues:
    """Space-separated cue words. One ending in "*" is a stem ("politic*" matches
    "political"); the others match as whole words with an optional plural ("art" does not
    fire on "article"). Multi-word cues join their words with "_" ("stay_home")."""

    raising: str
    lowering: str = ""


# Every key is an appendix dimension, and every dimension has cues (tests check both).
TRAIT_CUES: dict[str, Cues] = {
    # Psychological model: basic needs and personality
    "Extraversion": Cues(
        "party parties socializ* outgoing meetup crowd* extrovert* hang_out friends_over",
        "introvert* shy stay_home by_myself quiet_night alone_time",
    ),
    "Openness": Cues(
        "curious try_new new_things experiment* adventur* explore* open-minded",
        "same_routine stick_to familiar_things set_in_my_ways",
    ),
    "Agreeableness": Cues(
        "thank thanks appreciate* kind happy_to_help cooperat* compromise",
        "rude annoy* furious ridiculous unacceptable argu*",
    ),
    "Conscientiousness": Cues(
        "plan* schedule* organiz* deadline* checklist on_time prepared",
        "procrastinat* forgot* disorganiz* last_minute",
    ),
    "Neuroticism": Cues(
        "anxious anxiety worried worry stress* nervous overwhelm* panic* upset",
        "calm relaxed laid-back easygoing unbothered",
    ),
    "Physiological Needs": Cues("hungry tired exhausted sleep* thirsty rest comfort* cold"),
    "Safety Needs": Cues(
        "safe safety secure security insurance stable stability warranty risk*",
        "risk-taker reckless",
    ),
    "Belongingness Needs": Cues(
        "belong* community club team group together lonely",
        "loner on_my_own",
    ),
    "Esteem Needs": Cues("recogni* respect* proud praise* promotion award* appreciated"),
    "Cognitive Needs": Cues(
        "learn* understand* why how_does research* knowledge figure_out",
        "don't_care_how just_tell_me",
    ),
    "Aesthetic Pursuit": Cues("beautiful beauty design* aesthetic* elegant stylish pretty"),
    "Self-Actualization Needs": Cues("potential dream* passion* purpose grow* fulfil* calling"),
    "Order Needs": Cues("tidy clean* neat organiz* declutter* orderly", "messy cluttered"),
    "Independence Needs": Cues(
        "independen* myself my_own_decision freedom self-employed on_my_own",
        "tell_me_what_to_do decide_for_me",
    ),
    "Dominance Needs": Cues("lead* in_charge control* boss manag* command*"),
    "Achievement Needs": Cues("achiev* success* win* accomplish* goal* ambitio* promotion"),
    # AI alignment dimensions: what the user asks of the answers
    "Helpfulness": Cues("helpful useful practical actionable", "useless unhelpful"),
    "Honesty": Cues("honest* be_straight frank* candid", "sugarcoat*"),
    "Safety (Harmlessness)": Cues("safe_for appropriate harmless family-friendly"),
    "Instruction Following": Cues(
        "exactly_as follow_my instruction* as_i_asked as_i_said do_not_add only_answer"
    ),
    "Truthfulness": Cues("accura* fact* source* correct* verif* make_things_up"),
    "Coherence": Cues("clear clarity make_sense step_by_step", "confus* contradict*"),
    "Complexity": Cues(
        "detail* thorough* in-depth elaborate comprehensive", "simple simpler basic_version"
    ),
    "Conciseness": Cues("brief* concise* shorter tl;dr to_the_point", "longer more_detail"),
    # Content platform interest tags
    "Science Interest": Cues(
        "science scientific physics chemistry biology research experiment astronomy"
    ),
    "Education Interest": Cues("school study studying course learning university exam teacher"),
    "Psychology Interest": Cues("psycholog* therapy therapist mental_health mindset behavio*"),
    "Family Focus": Cues("family kid child children son daughter parent* mom dad wife husband"),
    "Fashion Interest": Cues("fashion* clothes dress outfit shoes wardrobe"),
    "Art Interest": Cues("art painting paint drawing museum gallery sculpt*"),
    "Health Focus": Cues("health* doctor sick diet sleep medicine hospital fitness nutrition"),
    "Financial Management Interest": Cues(
        "money budget* invest* stock saving* financ* loan mortgage"
    ),
    "Sports Interest": Cues(
        "sport* football soccer basketball tennis running marathon gym workout hik* yoga swim*"
    ),
    "Foodie Interest": Cues("food* cook* recipe restaurant bak* cuisine dinner chef"),
    "Travel Interest": Cues("travel* trip vacation holiday flight hotel journey abroad tour*"),
    "Music Interest": Cues("music* song guitar piano concert band singing"),
    "Literature Interest": Cues("book novel* reading poem poetry author library"),
    "Movie Interest": Cues("movie film cinema series netflix tv"),
    "Social Media Activity": Cues("instagram tiktok twitter facebook followers posted"),
    "Technology Interest": Cues(
        "tech* software computer gadget programming coding laptop smartphone"
    ),
    "Environmental Focus": Cues("environment* climate recycl* sustainab* pollution"),
    "History Interest": Cues("history historical ancient century centuries"),
    "Political Focus": Cues("politic* election government vote voting policy"),
    "Religious Interest": Cues("church religio* faith pray* spiritual* temple"),
    "Gaming Interest": Cues("game gaming playstation xbox nintendo chess"),
    "Animal Focus": Cues("pet dog cat puppy puppies kitten animal"),
    "Emotional Expression": Cues(
        "i_feel feel_so love hate thrilled heartbroken so_happy so_sad", "keep_it_to_myself"
    ),
    "Sense of Humor": Cues("haha lol funny joke* hilarious kidding", "no_jokes be_serious"),
    "Information Density": Cues(
        "all_the_details everything_about full_picture", "just_the_gist summary_only"
    ),
    "Language Style": Cues("formal* professional* sir madam", "casual* informal* chill"),
    "Practicality": Cues("practical* concrete hands-on how-to real-world", "theor* abstract*"),
}
HIGH_AT = 3  # raising mentions in one dialogue that make a dimension "High"
_RANK = {"Low": 0, "Medium": 1, "High": 2}
# Within a clause, a negator a few words before a raising cue turns it into a lowering one.
_NEGATOR = re.compile(
    (
        r"\b(?:not|never|no|don't|dont|do not|doesn't|didn't|can't stand|hate|dislike"
        r"|not a fan of|not into|isn't|aren't|wasn't|nor|nothing|without)\b(?:\W+\w+){0,2}\W*$"
    ).replace("'", "['\u2019]"),  # "don't" typed or typeset
    re.IGNORECASE,
)


def _pattern(cues: str) -> re.Pattern[str] | None:
    words = [
        (re.escape(cue[:-1]) + r"\w*" if cue.endswith("*") else re.escape(cue) + "(?:e?s)?")
        .replace("_", r"\s+")
        .replace("'", "['\u2019]")
        for cue in cues.split()
    ]
    return re.compile(r"\b(?:" + "|".join(words) + r")\b", re.IGNORECASE) if words else None


_PATTERNS = {
    dimension: (_pattern(cues.raising), _pattern(cues.lowering))
    for dimension, cues in TRAIT_CUES.items()
}
_CLAUSE = re.compile(r"[^.!?\n,;]+")  # "No, I love parties": the "no" is another clause


def detect_traits(user_text: str) -> dict[str, Trait]:
    traits: dict[str, Trait] = {}
    clauses = [m.group(0) for m in _CLAUSE.finditer(user_text)]
    for dimension, (raising, lowering) in _PATTERNS.items():
        up: list[str] = []
        down: list[str] = []
        for clause in clauses:
            for pattern, same, other in ((raising, up, down), (lowering, down, up)):
                for match in pattern.finditer(clause) if pattern is not None else ():
                    # "I don't like parties" lowers; "I'm not shy" raises
                    negated = _NEGATOR.search(clause[: match.start()])
                    start = negated.start() if negated else match.start()
                    (other if negated else same).append(clause[start : match.end()].lower())
        if not up and not down:
            continue
        if len(down) > len(up):
            cited = ", ".join(dict.fromkeys(down))
            traits[dimension] = Trait(level="Low", reason=f"user says {cited}")
        elif len(up) > len(down):
            level = "High" if len(up) - len(down) >= HIGH_AT else "Medium"
            cited = ", ".join(dict.fromkeys(up))
            traits[dimension] = Trait(level=level, reason=f"user mentions {cited}")
    return traits


def merge_traits(known: Mapping[str, Trait], found: Mapping[str, Trait]) -> dict[str, Trait]:
    """Known traits updated by new ones. Counted mentions never lower a level seen before (one
    quiet dialogue is not evidence); a "Low" from what the user says (a lowering cue, a negated
    one) replaces it."""
    merged = dict(known)
    for dimension, trait in found.items():
        previous = merged.get(dimension)
        if previous is None or trait.level == "Low" or _RANK[trait.level] >= _RANK[previous.level]:
            merged[dimension] = trait
    return merged
