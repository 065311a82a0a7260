"""Issue 43: runners run below the grader, and the one that times runs ahead of the rest
(under load its host side competed with every lane's compiles while the GPU waited)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from graders.isolation import TIMING_NICE, RunnerPool, default_launcher
from graders.isolation.jobuids import descendants_of
from graders.isolation import pool as pool_module
from graders.isolation.launch import AHEAD_NICE, RUNNER_NICE, can_raise_priority, threads_of
from graders.shared import autogroup
from graders.shared.vocabulary import Device
from services import until


def _priorities(process) -> dict[int, int]:
    """The nice of every thread of the runner's processes (a nice is a thread's own)."""
    pids = process._job_pids() if process.cgroup else descendants_of(process.proc.pid)
    found = {}
    for pid in pids:
        for tid in threads_of(pid):
            try:
                found[tid] = os.getpriority(os.PRIO_PROCESS, tid)
            except OSError:
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


def _start_and_look(seen: list, wait_s: float = 1.0):
    """``start_runner`` as the pool calls it, noting the runner's priorities a moment into
    its start (its torch import)."""
    real = pool_module.start_runner

    def start_runner(*args, **kwargs):
        process = real(*args, **kwargs)
        time.sleep(wait_s)
        seen.append((threading.current_thread().name, kwargs.get("nice"), process,
                     _priorities(process)))
        return process
    return start_runner


@pytest.mark.skipif(not can_raise_priority(), reason="raising a priority needs CAP_SYS_NICE")
def test_a_runner_made_ahead_imports_below_the_graders_and_is_raised_before_the_gpu(
        monkeypatch):
    """At a burst's start the runners made to replace those taken (3.5 CPU-s each) ran at
    the nice of the runners checking, and the first gradings' checks took 2.5x as long.
    A pool now makes them at AHEAD_NICE, and raises each to RUNNER_NICE, its session's
    group too, before its first GPU work: a timing waits at the gate for whoever is past it,
    and a runner at nice 19 there would hold it up."""
    seen: list = []
    monkeypatch.setattr(pool_module, "start_runner", _start_and_look(seen))
    at_the_gate: list = []

    class WatchedGate(pool_module.GpuGate):
        """Notes the priorities of the runners made ahead as one passes into the gate."""

        def shared(self):
            at_the_gate.append([_priorities(p) for _, nice, p, _ in seen if nice == AHEAD_NICE])
            return super().shared()

    pool = RunnerPool(Device.CPU, default_launcher(sandbox=True), warm=3, gate=WatchedGate())
    assert pool.ahead_nice == AHEAD_NICE > RUNNER_NICE and pool.reserve == 1
    pool.fill()
    try:
        assert pool.wait_filled() == ""
        # an empty pool's first runners are wanted soon: made at the runners' nice
        assert [nice for _, nice, _, _ in seen] == [RUNNER_NICE] * 3
        pool.take_ready().process.close()  # two left: its replacement is made ahead
        assert until(lambda: len(seen) == 4, 60) and pool.wait_filled() == ""
        thread, nice, made_ahead, early = seen[3]
        assert thread == "runner-prep" and nice == AHEAD_NICE
        assert early and set(early.values()) == {AHEAD_NICE}, early  # while it imported
        # raised before its first GPU work: at the gate it was at the runners' nice
        at_gate = [found for found in at_the_gate if found]
        assert at_gate and set(at_gate[0][0].values()) == {RUNNER_NICE}, at_the_gate
        now = _priorities(made_ahead)
        assert now and set(now.values()) == {RUNNER_NICE}, now
        groups = _runner_groups(made_ahead)
        assert set(groups.values()) <= {RUNNER_NICE, None}, groups
        # a runner made on the spot, for a grading waiting on it, is never made below
        spot = pool_module.prepare(Device.CPU, pool.launcher)
        on_the_spot = [found for thread, _, _, found in seen if thread == "MainThread"]
        assert on_the_spot and set(on_the_spot[0].values()) == {RUNNER_NICE}, seen
        spot.process.close()
    finally:
        pool.close()


def test_where_a_runner_cannot_be_raised_again_the_pool_makes_it_at_the_runners_nice(
        monkeypatch):
    from graders.isolation import launch

    monkeypatch.setattr(launch, "can_raise_priority", lambda: False)
    pool = RunnerPool(Device.CPU, default_launcher(sandbox=True), warm=1)
    assert pool.ahead_nice == RUNNER_NICE
    pool.close()
    monkeypatch.setattr(launch, "can_raise_priority", lambda: True)
    for given, made_at in (("", AHEAD_NICE), ("10", RUNNER_NICE), ("15", 15), ("-5", RUNNER_NICE),
                           ("junk", AHEAD_NICE)):
        monkeypatch.setenv("GRADERS_AHEAD_NICE", given)
        assert launch.ahead_nice() == made_at, given


def test_a_runner_raised_while_its_own_group_change_waits_keeps_the_raise(monkeypatch):
    """The runner's own thread puts its session group at its nice, and unprivileged it may
    wait seconds for the kernel's turn; the grader raises a runner made ahead meanwhile. The
    thread reads its nice at each try, and does not put the group back to 19."""
    import errno

    state = {"nice": AHEAD_NICE, "group": 0, "tries": 0, "writes": []}

    def write(fd, data):
        state["tries"] += 1
        if state["tries"] == 3:  # the grader raises it (process and group) meanwhile
            state["nice"] = state["group"] = RUNNER_NICE
        if state["tries"] <= 5:
            raise OSError(errno.EAGAIN, "try again")
        state["writes"].append(int(data))
        state["group"] = int(data)
        return len(data)

    monkeypatch.setattr(autogroup, "nice_of", lambda pid="self": state["group"])
    monkeypatch.setattr(autogroup.os, "getpriority", lambda which, who: state["nice"])
    monkeypatch.setattr(autogroup.os, "open", lambda path, flags: 99)
    monkeypatch.setattr(autogroup.os, "close", lambda fd: None)
    monkeypatch.setattr(autogroup.os, "write", write)
    monkeypatch.setattr(autogroup.time, "sleep", lambda s: None)
    assert autogroup.follow_own_nice()
    assert state["group"] == RUNNER_NICE and state["writes"] == [], state


def test_a_pool_makes_runners_ahead_below_only_while_it_holds_a_gradings_worth(monkeypatch):
    """Below the runners' nice only while the pool still holds one grading's runners
    (``reserve``); once fewer are ready, the ones still being made are raised and the next
    are made at the runners' nice: the next grading waits for them. (On the 2-core box,
    every runner made at 19 left a grading in 22 starting its own on the spot, 3 s.)"""

    made: list[int] = []
    raised: list[int] = []
    release = threading.Semaphore(0)

    class Process:
        def __init__(self, number):
            self.number = number

        def set_priority(self, nice):
            raised.append(self.number)
            return True

        def close(self):
            pass

    numbers = iter(range(1000))
    numbering = threading.Lock()

    def fake_prepare(device, launcher, gate=None, nice=RUNNER_NICE, on_started=None):
        with numbering:
            process = Process(next(numbers))
            on_started(process)  # before it counts as made: the test waits on ``made``
            made.append(nice)
        release.acquire()
        return pool_module.ReadyRunner(process, {}, 0.0)

    monkeypatch.setattr(pool_module, "prepare", fake_prepare)
    monkeypatch.setattr(pool_module.bytecode, "begin", lambda: None)
    pool = RunnerPool(Device.CPU, default_launcher(sandbox=False), warm=4)
    pool.ahead_nice = AHEAD_NICE
    assert pool.reserve == 2

    def settle(ready: int) -> None:
        assert until(lambda: pool.ready_count == ready, 10), pool.ready_count

    def started(count: int) -> None:
        assert until(lambda: len(made) == count, 10), made

    pool.fill()
    started(4)
    for _ in range(4):
        release.release()
    settle(4)
    assert made == [RUNNER_NICE] * 4  # an empty pool's first runners are wanted soon
    pool.take_ready()  # 3 left: its replacement is made below
    pool.take_ready()  # 2 left: still one grading's worth
    started(6)
    assert made[4:] == [AHEAD_NICE, AHEAD_NICE] and raised == []
    pool.take_ready()  # 1 left: the two being made are wanted now, and so is the next
    started(7)
    assert until(lambda: sorted(raised) == [4, 5], 10), raised  # raised off this thread
    assert made[6] == RUNNER_NICE
    for _ in range(3):
        release.release()
    settle(4)
    pool.close()


def test_a_runner_makes_no_group_change_of_its_own_once_it_answers_warm(monkeypatch):
    """The grader raises a runner made ahead once it has answered "warm"; the runner stops
    its own group change first (graders/runner/main.py), so a change still waiting its turn
    cannot put the group back to 19 after the raise."""
    import errno

    writes: list[bytes] = []

    def busy_kernel(fd, data):
        writes.append(data)
        raise OSError(errno.EAGAIN, "try again")

    monkeypatch.setattr(autogroup, "_stopped", False)
    monkeypatch.setattr(autogroup, "nice_of", lambda pid="self": 0)
    monkeypatch.setattr(autogroup.os, "getpriority", lambda which, who: AHEAD_NICE)
    monkeypatch.setattr(autogroup.os, "open", lambda path, flags: 99)
    monkeypatch.setattr(autogroup.os, "close", lambda fd: None)
    monkeypatch.setattr(autogroup.os, "write", busy_kernel)
    # the runner answers "warm" while its change waits for the kernel's turn
    monkeypatch.setattr(autogroup.time, "sleep", lambda s: autogroup.stop_following())
    assert autogroup.follow_own_nice() is False
    assert len(writes) == 1  # the one try before; none after
