"""A broker gone away: each kind of broker-client error once per interval, with a count."""

from __future__ import annotations

import logging

from streams.log_rate import RateLimit


def record(name: str, msg: str, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, None, None)


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
