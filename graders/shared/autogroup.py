"""A session's share of the CPU, where Linux shares it between sessions first (autogroup).

With ``kernel.sched_autogroup_enabled`` = 1 (the default of most distributions' kernels,
and of this project's machines) the scheduler puts each session in a group of its own and
divides the CPU between the groups before the threads inside them: a nice value then orders
threads only within their own session. Every runner is a session of its own (the shim is
started with ``start_new_session``, and bubblewrap's ``--new-session`` makes another), and
so is every slot's worker: RUNNER_NICE, TIMING_NICE and CHECKER_NICE
(graders/isolation/launch.py) ordered nothing between them. On this project's 2-core CPU
machine, one spinning process beside six spinners at nice 19, each in its own session, got
0.78 CPU-s in 3 s; all in one session, 2.75; each in its own session with its group at
nice 19, 2.74 (``docs/experiments/autogroup_share.py``). The kernel groups sessions only
for processes in the root of the CPU controller's hierarchy: on the H100 device (a
container, autogroup enabled) the same experiment gave 3.03 CPU-s all three ways, so there
nice values always counted, and this changes nothing.

A group's weight is its own nice (``/proc/PID/autogroup``, "/autogroup-N nice K"), which
any process may raise for its own group and only a privileged one lower. Without
CAP_SYS_ADMIN the kernel allows one change every 0.1 s, machine-wide, and answers EAGAIN
to the others: hence the retries.
"""

from __future__ import annotations

import errno
import os
import re
import threading
import time

_NICE = re.compile(rb"\bnice\s+(-?\d+)")
RETRY_S = 0.1  # the kernel's pause between unprivileged changes
RETRIES = 20
# a runner's own change, from a thread of its own that nothing waits for: a host's slots
# start their warm runners at once (4 slots keep 36 ready), one change every 0.1 s for all
# of them, so 2 s of tries left some groups at nice 0 beside the gradings
FOLLOW_RETRIES = 300


def _path(pid: int | str) -> str:
    return f"/proc/{pid}/autogroup"


def nice_of(pid: int | str = "self") -> int | None:
    """The nice of ``pid``'s session group, or None where there is none (autogroup off or
    not built, the process gone)."""
    try:
        with open(_path(pid), "rb") as f:
            found = _NICE.search(f.read())
    except OSError:
        return None
    return int(found.group(1)) if found else None


def set_nice(pid: int | str, nice: int, retries: int = RETRIES) -> bool:
    """Give ``pid``'s session group ``nice``; True if it has it now, or there is no group
    to give it to (the kernel groups no sessions, or the process is gone: its own nice, or
    none, is all that counts)."""
    if nice_of(pid) is None:
        return True
    for _ in range(retries + 1):
        done = _write_once(pid, nice)
        if done is not None:
            return done
        time.sleep(RETRY_S)
    return False


def _write_once(pid: int | str, nice: int) -> bool | None:
    """One try at ``pid``'s group nice: True once written, None where the kernel says wait
    (EAGAIN), else whether there is no group to give it to."""
    try:
        fd = os.open(_path(pid), os.O_WRONLY)
        try:
            os.write(fd, str(nice).encode())
        finally:
            os.close(fd)
        return True
    except OSError as exc:
        if exc.errno == errno.EAGAIN:
            return None
        # lowering without the privilege, another uid's; or gone meanwhile
        return nice_of(pid) is None


# A runner made ahead at nice 19 is raised by the grader (its threads, then its group)
# once it has answered "warm". Its own group change, still waiting its turn, must not put
# the group back to 19 after that: the runner stops it (``stop_following``) before it
# answers, and a change is read and written under this lock, so none is half done then.
_following = threading.Lock()
_stopped = False


def follow_own_nice() -> bool:
    """Give this process's session group the process's own nice, where that is lower
    priority than the group has: what a process in a session of its own calls first, so
    that the nice it was started at orders it against other sessions too."""
    for _ in range(FOLLOW_RETRIES + 1):
        with _following:
            if _stopped:
                return False
            mine = os.getpriority(os.PRIO_PROCESS, 0)
            group = nice_of("self")
            if group is None or group >= mine:
                return True
            done = _write_once("self", mine)
            if done is not None:
                return done
        time.sleep(RETRY_S)  # the kernel's turn, outside the lock
    return False


def stop_following() -> None:
    """No group change by ``follow_own_nice`` after this returns (one in progress is
    finished first)."""
    global _stopped
    with _following:
        _stopped = True
