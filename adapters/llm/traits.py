"""The user-trait dimensions of the paper's "Detailed User Traits Analysis" prompt.

Transcribed from the appendix (arXiv 2506.06326, appendix A) in its three groups, names and
one-line explanations exactly as printed. The paper's text and the prompt itself speak of "90
defined dimensions", but the appendix lists only the 51 below (16 + 8 + 27); we keep what is
written rather than invent the missing 39, and the prompt says "90" because the paper's does.
"""

from __future__ import annotations

import re

PSYCHOLOGICAL = "Psychological Model (Basic Needs & Personality)"
AI_ALIGNMENT = "AI Alignment Dimensions"
CONTENT_INTERESTS = "Content Platform Interest Tags"

TRAIT_GROUPS: dict[str, dict[str, str]] = {
    PSYCHOLOGICAL: {
        "Extraversion": "Degree of preference for social activities.",
        "Openness": "Degree of acceptance of new things and ideas.",
        "Agreeableness": "Tendency towards friendliness and cooperation.",
        "Conscientiousness": "Sense of responsibility and organizational planning ability.",
        "Neuroticism": "Emotional stability and degree of sensitivity.",
        "Physiological Needs": (
            "Degree of focus on physiological comfort and satisfaction of basic needs."
        ),
        "Safety Needs": "Degree of emphasis on safety and stability.",
        "Belongingness Needs": "Pursuit of a sense of group belonging.",
        "Esteem Needs": "Need for respect and recognition.",
        "Cognitive Needs": "Desire for knowledge and understanding.",
        "Aesthetic Pursuit": "Degree of appreciation for beauty and art.",
        "Self-Actualization Needs": "Pursuit of realizing one's own potential.",
        "Order Needs": "Preference for environmental cleanliness and organization.",
        "Independence Needs": "Preference for autonomous decision-making and action.",
        "Dominance Needs": "Willingness to influence or control others.",
        "Achievement Needs": "Degree of emphasis on achieving success.",
    },
    AI_ALIGNMENT: {
        "Helpfulness": "Whether the AI response is practically helpful to the user.",
        "Honesty": "Whether the AI response is truthful and credible.",
        "Safety (Harmlessness)": "Avoidance of sensitive content and negative information.",
        "Instruction Following": "Strict adherence to the user's explicit instructions.",
        "Truthfulness": "Accuracy and authenticity of the response content.",
        "Coherence": "Clarity of expression logic and consistency.",
        "Complexity": "Preference for detailed and complex information.",
        "Conciseness": "Preference for simple and clear response methods.",
    },
    CONTENT_INTERESTS: {
        "Science Interest": "Interest in topics in the field of science.",
        "Education Interest": "Focus on education and learning.",
        "Psychology Interest": "Interest in psychology topics.",
        "Family Focus": "Concern for family and parenting education.",
        "Fashion Interest": "Love for the field of fashion.",
        "Art Interest": "Attention to and participation in the field of art.",
        "Health Focus": "Concern for physical health and lifestyle.",
        "Financial Management Interest": "Focus on financial management and finance topics.",
        "Sports Interest": "Interest in sports activities and exercise.",
        "Foodie Interest": "Enthusiasm for cooking and gastronomy.",
        "Travel Interest": "Interest in traveling and exploring new places.",
        "Music Interest": "Interest in music appreciation or creation.",
        "Literature Interest": "Focus on literature and reading.",
        "Movie Interest": "Preference for movies and television.",
        "Social Media Activity": "Frequency of use and interactivity on social media.",
        "Technology Interest": "Degree of attention to technological developments.",
        "Environmental Focus": "Concern for environmental protection and sustainable development.",
        "History Interest": "Interest in historical knowledge and topics.",
        "Political Focus": "Attention to political events and social issues.",
        "Religious Interest": "Interest in religious beliefs and spiritual topics.",
        "Gaming Interest": "Preference for video games and board games.",
        "Animal Focus": "Concern for animal welfare and pets.",
        "Emotional Expression": ("Preference for direct emotional expression versus restraint."),
        "Sense of Humor": "Tendency towards a humorous or serious communication style.",
        "Information Density": (
            "Preference for detailed and rich information versus concise and clear information."
        ),
        "Language Style": (
            "Preference for formal and rigorous language versus casual and relaxed."
        ),
        "Practicality": (
            "Preference for practical and concrete advice versus theoretical discussion."
        ),
    },
}

TRAIT_DIMENSIONS: dict[str, str] = {
    name: explanation for group in TRAIT_GROUPS.values() for name, explanation in group.items()
}


def _fold(name: str) -> str:
    # Models vary case, markdown and punctuation ("**Safety (harmlessness)**", "safety"), so
    # dimensions are compared on their letters only.
    return re.sub(r"[^a-z]", "", name.lower())


_BY_FOLDED = {_fold(name): name for name in TRAIT_DIMENSIONS}
_BY_FOLDED[_fold("Safety")] = "Safety (Harmlessness)"
_BY_FOLDED[_fold("Harmlessness")] = "Safety (Harmlessness)"


def canonical_dimension(name: str) -> str | None:
    """The appendix spelling of ``name``, or None when it is not one of the dimensions."""
    return _BY_FOLDED.get(_fold(name))
