"""The fake OpenAI-compatible server the tests and the benchmarks share (one testing module):
``server`` serves it, ``payloads`` holds what it says (canned replies, faults, bodies)."""

from evaluation.fake_openai.payloads import DEFAULT_REPLIES, Fault, pseudo_embedding
from evaluation.fake_openai.server import FakeOpenAI, RequestRecord

__all__ = ["DEFAULT_REPLIES", "FakeOpenAI", "Fault", "RequestRecord", "pseudo_embedding"]
