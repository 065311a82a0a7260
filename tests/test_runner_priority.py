"""Issue 43: runners run below the grader, and the one that times runs ahead of the rest
(under load its host side competed with every lane's compiles while the GPU waited)."""

from __future__ import annotations

import os

from graders.isolation import TIMING_NICE, RunnerPool, default_launcher
from graders.isolation.jobuids import descendants_of
from graders.isolation.launch import RUNNER_NICE
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
