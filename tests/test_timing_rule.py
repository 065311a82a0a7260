"""When the timed loop stops (graders/runner/timing.py, graders/shared/stats.py): once the
median of the times is known to ±1 %, never before 10 repetitions nor past 100."""

from __future__ import annotations

import random

from graders.engine.performance import TIMING
from graders.shared.stats import MEDIAN_NOTCH, interquartile_spread, known_well_enough


def _stops_at(times: list[float]) -> int:
    """The repetition the loop stops after (the cap where the rule never holds)."""
    for n in range(1, TIMING["max_reps"] + 1):
        if n >= TIMING["min_reps"] and known_well_enough(times[:n], TIMING["min_reps"],
                                                          TIMING["target_interval"]):
            return n
    return TIMING["max_reps"]


def _times(spread: float, seed: int = 7, n: int = 100) -> list[float]:
    """Times around 36 µs whose interquartile spread is about ``spread`` (a normal's IQR
    is 1.349 of its standard deviation)."""
    rng = random.Random(seed)
    return [rng.gauss(0.036, 0.036 * spread / 1.349) for _ in range(n)]


def test_at_ten_repetitions_the_rule_is_about_the_old_two_percent_spread():
    assert TIMING["min_reps"] == 10 and TIMING["max_reps"] == 100
    # at n = 10, "median known to ±1 %" is "interquartile spread ≤ 1.74 %" (the old rule:
    # 2 % at any count)
    assert 0.0173 < TIMING["target_interval"] * 10 ** 0.5 / MEDIAN_NOTCH < 0.0175
    tight = _times(0.005)
    assert _stops_at(tight) == 10


def test_a_kernel_whose_times_spread_three_percent_stops_well_before_the_cap():
    """On the H200 three to five of safe_softmax's eight shapes spread ~3 % and ran to 100
    repetitions under the old rule (spread ≤ 2 % at any count), 0.4-0.7 s a shape."""
    for seed in range(20):
        times = _times(0.03, seed)
        assert interquartile_spread(times) > 0.02  # the old rule would have gone to 100
        stopped = _stops_at(times)
        assert stopped <= 45, (seed, stopped)
        # and the median it stops on is within ~1 % of the median of all 100
        med = sorted(times[:stopped])[stopped // 2]
        whole = sorted(times)[50]
        assert abs(med - whole) / whole < 0.02, (seed, stopped, med, whole)


def test_times_too_noisy_to_know_run_to_the_cap():
    assert _stops_at(_times(0.12)) == TIMING["max_reps"]
    assert not known_well_enough([0.036] * 9, 10, 0.01)  # never under 10
