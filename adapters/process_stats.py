"""Another process's memory and CPU: the embedded broker's and the model's own process's."""

from __future__ import annotations

import psutil  # type: ignore[import-untyped]


def rss_bytes(pid: int | None) -> int:
    """Resident memory of process ``pid``; 0 if there is none (stopped, or not ours)."""
    if pid is None:
        return 0
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


def cpu_seconds(pid: int) -> float:
    """The CPU (user and system) ``pid`` has used; 0 once it is gone."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)
