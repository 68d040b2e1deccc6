"""The offline LLM's keywords and summaries in a child process: ``TextHost`` and the child.

YAKE and the extractive summaries are pure Python, a few milliseconds per page; on the event
loop they ran between every stage's work and every request (docs/benchmarks.md, "The offline
LLM's text work in a process of its own"). The child runs them beside the loop, on the other
core. It is the model process's kind of child (``ProcessHost``: the same start, order, close,
and end with its parent's death), with its own frames: a request is a u32 length and the JSON
``[op, *args]`` of an ``offline_text.OPS`` function; the answer ``V`` holds its JSON result.
The functions are the ones ``InlineText`` runs, so their answers are the same in either place.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from typing import Any

import orjson

from adapters.embedders.model_process import ERROR, READY, VECTORS, Answers, ProcessHost, serve
from adapters.orphans import die_with_parent
from schemas.errors import LLMError

RESULT = VECTORS  # the frame kind of an answer
# the programming errors, each made from a message alone: any other type (UnicodeDecodeError
# takes five arguments, a MemoryError is the child's not ours) comes back as an LLMError
_PLAIN: dict[str, type[Exception]] = {
    kind.__name__: kind
    for kind in (
        TypeError,
        KeyError,
        AttributeError,
        IndexError,
        NameError,
        AssertionError,
        LookupError,
        ValueError,
    )
}


class TextHost(ProcessHost):
    module = __name__
    what = "the offline text process"
    error = LLMError

    def __init__(self) -> None:
        self._open([])

    def decode(self, body: bytes) -> Any:
        return orjson.loads(body)

    def not_ready(self, why: str) -> str:
        return f"the offline text process could not start: {why}"

    def failure(self, why: str) -> Exception:
        """The child's exception as its built-in type (a ``KeyError`` in the text work is the
        programming error the stage's policy dead-letters at once, as in this process); any
        other is an ``LLMError``."""
        _, _, rest = why.partition(": ")
        kind = _PLAIN.get(rest.partition(":")[0])
        return kind(f"in the offline text process: {why}") if kind else LLMError(why)

    async def run(self, op: str, *args: Any) -> Any:
        try:
            body = orjson.dumps([op, *args])
        except TypeError:  # text JSON cannot carry (a lone surrogate): worked out here instead
            from adapters.llm.offline_text import OPS

            return OPS[op](*args)
        return await self.ask(body)


def main() -> int:
    # its stdin's end tells it the parent is gone, but only once it reads: a stopped or busy
    # child, in a session of its own, would outlive a parent killed with SIGKILL
    die_with_parent(signal.SIGKILL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # in its own process group already; belt
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.WARNING, format="text process: %(levelname)s %(message)s")
    answers = Answers(os.fdopen(int(sys.argv[1]), "wb"))  # its own pipe: stdout goes to stderr
    try:
        try:
            from adapters.llm.offline_text import OPS
        except Exception as exc:
            answers.send(ERROR, str(exc).encode())
            return 1
        answers.send(READY, b"")
        serve(answers, lambda request: _work(OPS, request))
    except BrokenPipeError:
        return 0  # the parent is gone: nobody to answer
    return 0


def _work(ops: dict[str, Any], request: list[Any]) -> tuple[bytes, bytes]:
    op = str(request[0]) if isinstance(request, list) and request else "?"
    try:
        result = orjson.dumps(ops[op](*request[1:]))
    except Exception as exc:  # this request fails; the next is answered
        logging.getLogger(__name__).exception("%s failed", op)  # the traceback, on stderr
        return ERROR, f"{op}: {type(exc).__name__}: {exc}".encode()
    return RESULT, result


if __name__ == "__main__":
    sys.exit(main())
