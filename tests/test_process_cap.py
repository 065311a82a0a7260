"""A root grader without a job cgroup (issue 12): each runner gets a uid of its own.

The H200 machine runs the grader as root with no delegated cgroup; there a fork bomb ran
its full 300 s and starved everything beside it. These tests force that path here
(GRADERS_NO_CGROUP=1) and grade a fork bomb next to the reference.
"""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO
from test_grading import GOOD, SAFE_KERNEL

from graders.engine.checker import grade
from graders.engine.registry import get_exercise
from graders.isolation import jobuids
from graders.isolation.sandbox import BwrapLauncher, SandboxUnavailable, default_launcher
from graders.shared.vocabulary import Device, Verdict

FORK_BOMB = SAFE_KERNEL + "\n\ndef softmax(x):\n    import os\n    while True:\n        os.fork()\n"
MARKER = "graders-uid-daemon-31337"
DAEMON = SAFE_KERNEL + f'''

def softmax(x):
    import os
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv("/bin/sleep", ["sleep", "{MARKER}"])
        os._exit(0)
    return x.clone()
'''

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="job uids need a root grader")


def _traversable(paths):
    """Give other users passage (o+x) through the folders above ``paths``; what to undo.

    The job uid must read the graders' Python environment and the repository. On CI they
    live under /root (0700); a deployment installs them where others may read.
    """
    changed = {}
    for path in paths:
        for folder in [Path(path), *Path(path).parents]:
            try:
                mode = folder.stat().st_mode
            except OSError:
                continue
            if folder.is_dir() and not mode & 0o001 and folder not in changed:
                changed[folder] = mode
                os.chmod(folder, mode | 0o001)
    return changed


@pytest.fixture
def no_cgroup(monkeypatch, tmp_path):
    monkeypatch.setenv("GRADERS_NO_CGROUP", "1")
    monkeypatch.setattr(jobuids, "LOCK_DIR", tmp_path / "uid-locks")
    changed = _traversable([sys.prefix, sys.base_prefix, os.path.realpath(sys.executable),
                            str(REPO), str(tmp_path)])
    yield
    for folder, mode in changed.items():
        os.chmod(folder, mode & 0o7777)


def _uid_processes() -> list[int]:
    return [pid for uid in range(jobuids.UID_BASE, jobuids.UID_BASE + jobuids.UID_COUNT)
            for pid in jobuids.processes_of(uid)]


def _bomb_beside(device: Device, good: Path, tmp_path: Path, bomb_args: dict,
                 good_args: dict, join_s: float):
    """A fork bomb and a good file graded at once as job uids; both results, each with its
    time, once the host has shown it can still fork while the bomb is at its cap."""
    launcher = default_launcher(sandbox=True, gpu_index=0 if device is Device.CUDA else None)
    assert launcher.job_uids is not None  # no cgroup here: the uid path
    (tmp_path / "bomb").mkdir()
    bomb = tmp_path / "bomb" / "submission.py"
    bomb.write_text(FORK_BOMB)
    results = {}

    def run(name, path, kwargs):
        started = time.monotonic()
        results[name] = (grade(get_exercise("safe_softmax"), path, device, launcher=launcher,
                               **kwargs), time.monotonic() - started)

    threads = [threading.Thread(target=run, args=("bomb", bomb, bomb_args)),
               threading.Thread(target=run, args=("good", good, good_args))]
    for t in threads:
        t.start()
    time.sleep(3)
    assert subprocess.run(["true"], timeout=10).returncode == 0
    for t in threads:
        t.join(timeout=join_s)
    return results["bomb"], results["good"]


def _assert_contained(bomb_result, bomb_s, good_result) -> None:
    assert good_result.verdict is Verdict.PASSED, good_result.message
    # stopped as soon as its processes are counted (issue 26, item 10), not at its limits
    assert bomb_result.verdict is Verdict.RUNTIME_ERROR, bomb_result.message
    assert "a fork bomb?" in bomb_result.message
    assert bomb_s <= 60
    assert _uid_processes() == [], "a job uid kept processes after its job"


def test_a_fork_bomb_beside_the_reference_is_contained_by_its_uid(no_cgroup, tmp_path):
    (tmp_path / "good").mkdir()
    good = tmp_path / "good" / "submission.py"
    good.write_text(GOOD)
    (bomb_result, bomb_s), (good_result, _) = _bomb_beside(
        Device.CPU, good, tmp_path, {"timeout_s": 60}, {"timeout_s": 60}, join_s=120)
    print(f"\nfork bomb: {bomb_result.verdict.value} in {bomb_s:.1f} s: "
          f"{bomb_result.message[:120]}\nreference beside it: {good_result.verdict.value}")
    _assert_contained(bomb_result, bomb_s, good_result)


@pytest.mark.gpu
def test_on_the_gpu_a_fork_bomb_beside_the_timed_reference_is_contained(no_cgroup, tmp_path):
    """The H200 host: root, no delegated cgroup. Both gradings use the GPU, as in a class."""
    reference = REPO / "reference_solutions" / "safe_softmax" / "solution.py"
    launcher = default_launcher(sandbox=True, gpu_index=0)
    alone = []
    for _ in range(2):  # the second, as the one beside the bomb: caches warm
        started = time.monotonic()
        grade(get_exercise("safe_softmax"), reference, Device.CUDA, launcher=launcher)
        alone.append(time.monotonic() - started)
    (bomb_result, bomb_s), (good_result, good_s) = _bomb_beside(
        Device.CUDA, reference, tmp_path, {"performance": False}, {"performance": True},
        join_s=300)
    autogroup = Path("/proc/sys/kernel/sched_autogroup_enabled")
    print(f"\nfork bomb on cuda: {bomb_result.verdict.value} in {bomb_s:.1f} s: "
          f"{bomb_result.message[:160]}\nreference beside it on cuda, timed: "
          f"{good_result.verdict.value} {good_result.score}/{good_result.max_score} "
          f"in {good_s:.1f} s; alone {alone[0]:.1f} s then {alone[1]:.1f} s: "
          f"{good_s / alone[1]:.2f}x; {os.cpu_count()} cores, sched_autogroup_enabled "
          f"{autogroup.read_text().strip() if autogroup.exists() else 'absent'}")
    _assert_contained(bomb_result, bomb_s, good_result)
    assert good_s < 2 * alone[1]  # it ran nine times as long beside a bomb on the H200


def test_a_zombie_of_a_job_uid_is_not_waited_for(no_cgroup):
    """A killed sandbox's inner bubblewrap becomes a zombie of the host's init, reaped when
    init gets to it. It runs nothing; counting it made every runner's close wait ~2 s."""
    uid = jobuids.UID_BASE + jobuids.UID_COUNT - 1
    pid = os.fork()
    if pid == 0:  # the child becomes the uid and exits at once: a zombie until reaped
        os.setresuid(uid, uid, uid)
        os._exit(0)
    try:
        deadline = time.monotonic() + 5
        while "Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert jobuids.processes_of(uid) == []
        assert jobuids.kill_uid(uid, wait_s=1.0)
    finally:
        os.waitpid(pid, 0)


def test_a_double_forked_daemon_dies_with_its_uid(no_cgroup, tmp_path):
    launcher = default_launcher(sandbox=True, gpu_index=None)
    path = tmp_path / "submission.py"
    path.write_text(DAEMON)
    grade(get_exercise("safe_softmax"), path, Device.CPU, launcher=launcher, timeout_s=60)
    assert _with_marker() == [] and _uid_processes() == []


def _with_marker() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and MARKER.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def test_without_root_or_a_cgroup_the_sandbox_refuses_and_says_what_is_missing(monkeypatch):
    monkeypatch.setenv("GRADERS_NO_CGROUP", "1")
    monkeypatch.setattr(jobuids, "needed", lambda: False)
    with pytest.raises(SandboxUnavailable) as refused:
        BwrapLauncher()
    message = str(refused.value)
    assert "cannot make a job cgroup with the pids controller" in message
    assert "not root" in message and "Delegate=yes" in message


def test_each_test_process_takes_job_uids_from_a_range_of_its_own():
    """Two pytest-xdist workers on one uid range handed out the same uid at once: one
    worker's release killed the other's runner (conftest.py sets the range per worker)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker:
        pytest.skip("not under pytest-xdist")
    assert jobuids.UID_BASE == 61000 + 1000 * (int(worker.removeprefix("gw")) % 4)
