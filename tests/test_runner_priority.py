"""Issue 43: runners run below the grader, and the one that times runs ahead of the rest
(under load its host side competed with every lane's compiles while the GPU waited)."""

from __future__ import annotations

import os

import pytest

from graders.isolation import TIMING_NICE, RunnerPool, default_launcher
from graders.isolation.jobuids import descendants_of
from graders.isolation.launch import RUNNER_NICE
from graders.shared import autogroup
from graders.shared.vocabulary import Device


def _priorities(process) -> dict[int, int]:
    pids = process._job_pids() if process.cgroup else descendants_of(process.proc.pid)
    found = {}
    for pid in pids:
        try:
            found[pid] = os.getpriority(os.PRIO_PROCESS, pid)
        except OSError:  # gone meanwhile
            pass
    return found


def _runner_groups(process) -> dict[int, int | None]:
    """The session-group nice of each of the runner's Python processes (the sandbox's own
    processes, bubblewrap's, are in other sessions and only wait)."""
    found = {}
    for pid in descendants_of(process.proc.pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if not os.path.basename(argv[0]).startswith(b"python"):
                continue
        except OSError:
            continue
        found[pid] = autogroup.nice_of(pid)
    return found


def test_a_runner_starts_below_the_grader_and_is_raised_to_time():
    assert RUNNER_NICE > TIMING_NICE >= os.getpriority(os.PRIO_PROCESS, 0)
    pool = RunnerPool(Device.CPU, default_launcher(sandbox=True), warm=0)
    ready = pool.take()
    try:
        before = _priorities(ready.process)
        assert before and set(before.values()) == {RUNNER_NICE}, before
        raised = ready.process.set_priority(TIMING_NICE)
        assert raised is (os.geteuid() == 0)  # raising needs root, as on a GPU host
        if raised:
            after = _priorities(ready.process)
            assert after.keys() == before.keys() and set(after.values()) == {TIMING_NICE}
        # the runner still answers after it
        assert ready.process.proc.poll() is None
    finally:
        ready.process.close()
        pool.close()


@pytest.mark.skipif(autogroup.nice_of() is None, reason="this kernel groups no sessions")
def test_a_runners_session_group_has_its_nice_where_the_cpu_is_shared_by_session():
    """Each runner is a session of its own, and with autogroup on the kernel shares the CPU
    between sessions before nice orders threads: a runner's nice 10 in a group of nice 0
    weighed what the timing runner's nice 0 did (graders/shared/autogroup.py)."""
    pool = RunnerPool(Device.CPU, default_launcher(sandbox=True), warm=0)
    ready = pool.take()
    try:
        groups = _runner_groups(ready.process)
        assert groups and set(groups.values()) == {RUNNER_NICE}, groups
        if os.geteuid() == 0:  # raising a group needs the privilege, as raising a nice does
            assert ready.process.set_priority(TIMING_NICE)
            assert set(_runner_groups(ready.process).values()) == {TIMING_NICE}
    finally:
        ready.process.close()
        pool.close()


def test_a_runner_keeps_asking_for_its_groups_nice_while_the_kernel_says_wait(monkeypatch):
    """Unprivileged, the kernel takes one autogroup change every 0.1 s for the whole machine
    and answers EAGAIN to the rest: 36 warm runners starting at once wait their turn for up to
    3.6 s. A runner's own change (a thread nothing waits for) keeps asking past the 2 s the
    trusted side's calls try for."""
    import errno

    tries = {"n": 0}

    def busy_kernel(fd, data):
        tries["n"] += 1
        if tries["n"] <= 40:  # 4 s of other runners' changes first
            raise OSError(errno.EAGAIN, "try again")
        return len(data)

    monkeypatch.setattr(autogroup, "nice_of", lambda pid="self": 0)
    monkeypatch.setattr(autogroup.os, "getpriority", lambda which, who: 10)
    monkeypatch.setattr(autogroup.os, "open", lambda path, flags: 99)
    monkeypatch.setattr(autogroup.os, "close", lambda fd: None)
    monkeypatch.setattr(autogroup.os, "write", busy_kernel)
    monkeypatch.setattr(autogroup.time, "sleep", lambda s: None)
    assert autogroup.follow_own_nice()
    assert tries["n"] == 41
    tries["n"] = 0
    assert not autogroup.set_nice("self", 10)  # the trusted side's calls stop at 2 s
    assert tries["n"] == autogroup.RETRIES + 1
