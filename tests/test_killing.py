"""How long a job's kill waits (graders.isolation.killing): as long as its processes keep dying."""

import time

from graders.isolation.killing import kill_until_gone


def _dying(count: int, every_s: float):
    """A job of ``count`` processes of which one goes away every ``every_s`` once killed."""
    state = {"killed_at": None}

    def alive():
        if state["killed_at"] is None:
            return list(range(count))
        gone = int((time.monotonic() - state["killed_at"]) / every_s)
        return list(range(max(0, count - gone)))

    def kill(pids):
        if state["killed_at"] is None:
            state["killed_at"] = time.monotonic()
    return alive, kill


def test_a_job_that_takes_longer_than_the_wait_to_die_is_waited_for():
    """Teardown of hundreds of processes took over 5 s on a loaded CI host: as long as
    their number falls, the kill is not a failure (a fixed 5 s wait called it one)."""
    alive, kill = _dying(count=20, every_s=0.05)  # 1 s in all, never 0.3 s without progress
    started = time.monotonic()
    assert kill_until_gone(alive, kill, stall_s=0.3)
    assert time.monotonic() - started >= 0.9


def test_processes_that_do_not_die_fail_after_the_wait_without_progress():
    kills = []
    started = time.monotonic()
    assert not kill_until_gone(lambda: [1, 2, 3], kills.append, stall_s=0.3)
    # the stall ends it, not the 60 s cap (the bound leaves room for a loaded CI host)
    assert 0.3 <= time.monotonic() - started < 5.0
    assert len(kills) > 3  # killed again on every look


def test_no_wait_kills_once_and_looks_once_more():
    kills = []
    assert not kill_until_gone(lambda: [7], kills.append, stall_s=0)
    assert kills == [[7]]
    assert kill_until_gone(lambda: [], kills.append, stall_s=0) and kills == [[7]]


def test_even_steady_dying_stops_at_the_cap():
    alive, kill = _dying(count=1000, every_s=0.01)
    started = time.monotonic()
    assert not kill_until_gone(alive, kill, stall_s=0.3, cap_s=0.5)
    assert time.monotonic() - started < 5.0  # the cap ends it: 1000 × 0.01 s would be 10 s
