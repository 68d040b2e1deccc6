"""A broker gone away: each kind of broker-client error once per interval, with a count."""

from __future__ import annotations

import logging

from streams.log_rate import RateLimit


def record(
    name: str, msg: str, level: int = logging.ERROR, args: tuple[object, ...] = ()
) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


def test_repeated_broker_client_errors_pass_once_per_interval_with_the_count() -> None:
    now = [0.0]
    limit = RateLimit(10.0, clock=lambda: now[0])
    passed = []
    for second in range(25):  # 100 a second for 25 s
        now[0] = float(second)
        for _ in range(100):
            line = record("aiokafka.conn", 'Unable connect to "%s": %s')
            if limit.filter(line):
                passed.append(line.getMessage() if line.args else str(line.msg))
    assert len(passed) == 3  # at 0, 10 and 20 s
    assert passed[1].endswith("(999 more like this in the last 10 s)")
    assert limit.filter(record("memoryos.stack", "something else"))  # ours always pass
    assert limit.filter(record("aiokafka", "info", logging.INFO))


def test_a_crash_with_its_traceback_and_each_agents_line_always_pass() -> None:
    limit = RateLimit(10.0, clock=lambda: 0.0)
    crashes = [record("faust.agents.agent", "Agent %r crashed", args=(name,)) for name in "abc"]
    assert all(limit.filter(crash) for crash in crashes)  # three agents, three lines
    with_trace = record("faust.agents.agent", "Agent %r crashed", args=("a",))
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        import sys

        with_trace.exc_info = sys.exc_info()
    assert limit.filter(with_trace)
