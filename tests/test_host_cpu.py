"""docs/experiments/host_cpu.py, the host's CPU-seconds by kind over a load bench's burst
(issue 43): its sums from stand-in samples. A runner made in the window is split into what
making it cost and its work, one alive before is counted from the window's start, and other
processes count their own CPU only (their reaped children are the runners and workers,
counted themselves)."""

import importlib.util

import pytest
from conftest import REPO


def host_cpu():
    spec = importlib.util.spec_from_file_location(
        "host_cpu", REPO / "docs" / "experiments" / "host_cpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_windows_cpu_adds_up_by_kind():
    hc = host_cpu()
    sampler = hc.HostSampler(command_pid=1)
    sampler.kinds = {1: "command", 2: "worker", 3: "runner", 4: "runner"}
    sampler.series = {  # (monotonic s, own CPU-s, reaped children's CPU-s)
        # the bench: at its end it reaps the server, whose CPU it does not spend
        1: [(9.0, 1.0, 0.0), (10.0, 1.5, 0.0), (20.0, 2.0, 30.0)],
        # a slot's worker: it reaps its runners, counted as runners
        2: [(9.0, 5.0, 0.0), (10.0, 6.0, 0.0), (20.0, 9.0, 8.0)],
        # a runner ready before the window: all its CPU since is work (a compile among it)
        3: [(9.0, 4.0, 0.0), (10.0, 4.0, 0.0), (20.0, 7.0, 1.0)],
        # a runner made in the window: ready (standing still) at 3.0 CPU-s, then a grading
        4: [(12.0, 0.5, 0.0), (12.2, 2.5, 0.0), (12.4, 3.0, 0.0), (12.6, 3.0, 0.0),
            (12.8, 3.0, 0.0), (19.0, 5.0, 2.0)],
    }
    out = hc.summarize(sampler, busy_s=20.0, wall_s=10.0, t0=10.0)
    assert out["runners_made"] == pytest.approx(3.0) and out["runners_made_count"] == 1
    assert out["runners_work"] == pytest.approx(4.0 + 4.0)
    assert out["runners_children"] == pytest.approx(1.0 + 2.0)
    assert (out["command"], out["worker"]) == (pytest.approx(0.5), pytest.approx(3.0))
    assert out["rest"] == pytest.approx(20.0 - 3.0 - 8.0 - 0.5 - 3.0)
    assert out["cores_busy"] == 2.0


def test_what_a_process_is_comes_from_its_command_line():
    hc = host_cpu()
    assert hc.kind_of([b"/usr/bin/python3", b"-m", b"graders.runner.main", b"--fds", b"3,4"]) \
        == "runner"
    assert hc.kind_of([b"python3", b"-m", b"graders", b"worker", b"--device", b"cuda"]) \
        == "worker"
    assert hc.kind_of([b".venv/bin/python", b"-m", b"server"]) == "server"
    assert hc.kind_of([b"bwrap", b"--die-with-parent", b"python3", b"--fds"]) is None
    assert hc.kind_of([b"python3", b"-c", b"import os; os.execvp(...)", b"--fds"]) is None
