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


# the half-width of a median's ~95 % interval, in interquartile ranges over sqrt(n), for
# times spread about normally: the median's standard error is 1.2533 sigma / sqrt(n), an
# IQR is 1.349 sigma, and 1.96 * 1.2533 / 1.349 = 1.82 (box plots' notches use 1.57, the
# interval for telling two medians apart)
MEDIAN_NOTCH = 1.82


def median_interval(values: list[float]) -> float:
    """The half-width of the median's ~95 % interval, as a fraction of the median:
    1.82 * IQR / sqrt(n) / median. It narrows as repetitions are added, where the
    interquartile spread itself does not: a kernel whose times spread 3 % spreads 3 % at
    10 repetitions and at 100, but its median is known to ±1 % after about 30."""
    return MEDIAN_NOTCH * interquartile_spread(values) / len(values) ** 0.5 if values else float("inf")


def known_well_enough(times: list[float], min_reps: int, target: float) -> bool:
    """The timed loop's stop (graders/runner/timing.py): at least ``min_reps`` times, and
    their median known to within ``target`` (a fraction)."""
    return len(times) >= min_reps and median_interval(times) <= target
