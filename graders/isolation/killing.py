"""Killing every process of a job, however many there are and however long they take to die.

A job is killed as a set (a cgroup's processes, or a job uid's): send SIGKILL to all of
them, look again, repeat. How long to keep looking is the question. A fork bomb of 512
processes, each a Python with torch mapped, takes about 3 s to be torn down on two busy
cores (measured 2026-12-01 with graders/isolation/cgroups.py), and over 5 s when the tests ran in
two processes beside it: a fixed 5 s wait then called the processes survivors and took
the slot out of service while they were still dying. So the wait lasts as long as their
number keeps falling, and gives up only after ``stall_s`` with none gone (or ``cap_s``
in all): what is left then does survive.
"""

from __future__ import annotations

import time
from typing import Callable

CAP_S = 60.0  # the longest any kill waits, however steadily the processes die
POLL_S = 0.02


def kill_until_gone(alive: Callable[[], list[int]], kill: Callable[[list[int]], None],
                    stall_s: float, cap_s: float = CAP_S) -> bool:
    """Calls ``kill(pids)`` on what ``alive()`` lists until it lists nothing; True then.
    False once ``stall_s`` passes with no fewer processes than before (a wait of 0 kills
    once and looks once more), or ``cap_s`` in all."""
    started = time.monotonic()
    fewest, progress_at, rounds = None, started, 0
    while True:
        pids = alive()
        if not pids:
            return True
        now = time.monotonic()
        if fewest is None or len(pids) < fewest:
            fewest, progress_at = len(pids), now
        if rounds and (now - progress_at >= stall_s or now - started >= cap_s):
            return False
        kill(pids)
        rounds += 1
        time.sleep(POLL_S)
