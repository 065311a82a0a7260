"""Statistics both sides of the trust boundary use: the runner stops timing on it, the
checker reports it. Standard library only: the runner (untrusted) and the checker (trusted)
may both import this, and it imports neither."""

from __future__ import annotations

import statistics


def interquartile_spread(values: list[float]) -> float:
    """(Q3 - Q1) / median: the runner stops on it and the checker reports it."""
    if len(values) < 4:
        return float("inf")
    q1, med, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return (q3 - q1) / med if med > 0 else float("inf")
