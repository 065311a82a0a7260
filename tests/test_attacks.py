"""The attack suite: hostile submissions graded in the sandbox on the CPU interpreter.

Each case checks the verdict, that the answer came within the limit plus a small
margin, that no process of the job is left behind, and that the same slot then
grades a correct kernel normally. The table of verdicts is printed (pytest -s).
"""

import dataclasses
import os
import socket
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO
from test_grading import GOOD, SAFE_KERNEL

from graders.engine.registry import get_exercise
from graders.isolation import bytecode
from graders.isolation.sandbox import Limits
from graders.service.slots import Slot
from graders.shared.vocabulary import Device, Verdict

LIMIT_S = 12  # wall clock for the hostile jobs
# Cases whose verdict is not the wall clock's get the time their own limit needs to trip,
# however slow the machine: filling the slot's 3 GiB took over 12 s on a fresh clone's CI
# beside the other pytest process, and ended as `timeout` instead of `memory_limit`; the
# fork bomb, stopped once its processes are counted at the cap (issue 26, item 10), ended
# as `timeout` at a 5 s limit in 1 run of 3 beside the other process's fork bomb. Both end
# in seconds when their limit trips; the wall clock only decides a race they should win.
# Cases whose verdict is the wall clock's need no more than it takes to start: the limit is
# the same code path at 5 s as at 12.
TIMEOUT_LIMIT_S = 5
CASE_LIMIT_S = {"memory bomb": 90, "fork bomb": 60, "infinite loop": TIMEOUT_LIMIT_S,
                "sleep forever": TIMEOUT_LIMIT_S, "SIGSTOP itself": TIMEOUT_LIMIT_S,
                "top level: endless loop": TIMEOUT_LIMIT_S}
MARGIN_S = 30  # start-up, kill and clean-up on a loaded 2-core machine (under the 60 s call budget)
MARKER = "4242.4242"  # argv of processes a submission tries to leave behind

BAD_SOFTMAX = SAFE_KERNEL + """
def softmax(x):
    y = torch.zeros_like(x)
    launch(x[:, :1].contiguous(), y[:, :1])
    return y
"""


def _in_call(body: str, prelude: str = "") -> str:
    """A submission whose softmax runs ``body`` before returning a wrong answer."""
    return SAFE_KERNEL + prelude + "\n\ndef softmax(x):\n" + body + "\n" + \
        "    y = torch.zeros_like(x)\n    launch(x[:, :1].contiguous(), y[:, :1])\n    return y\n"


def _indent(code: str) -> str:
    return "\n".join("    " + line for line in code.strip().splitlines())


@pytest.fixture(scope="module")
def slot():
    return Slot("attack-cpu", Device.CPU, limits=Limits(memory_bytes=3 << 30))


@pytest.fixture(scope="module")
def loopback_server():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted = []

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(conn)

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1], accepted
    server.close()


def _secrets(tmp: Path) -> list[Path]:
    planted = {"var/app.db": "SECRET-DATABASE", "submissions/17/other.py": "SECRET-OTHER-STUDENT"}
    paths = []
    for name, text in planted.items():
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        paths.append(path)
    return paths + [REPO / "reference_solutions" / "safe_softmax" / "solution.py",
                    REPO / "exercises" / "safe_softmax" / "checks.py", REPO / "README.md"]


def _cases(tmp: Path, port: int) -> dict[str, tuple[str, set[Verdict]]]:
    secrets = [str(p) for p in _secrets(tmp)]
    outside = [str(tmp / "written-by-student.txt"), str(REPO / "graders" / "evil.py"),
               "/grader/graders/evil.py", "/sandbox/submission.py", "/usr/evil"]
    read_secrets = _indent(f"""
found = []
for path in {secrets!r}:
    try:
        found.append(open(path).read()[:40])
    except OSError:
        pass
raise RuntimeError("found: " + repr(found))
""")
    daemon = _indent(f"""
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", "{MARKER}"])
    os._exit(0)
""")
    return {
        "infinite loop": (_in_call("    while True:\n        pass"), {Verdict.TIMEOUT}),
        "sleep forever": (_in_call("    import time\n    time.sleep(10**6)"), {Verdict.TIMEOUT}),
        "SIGSTOP itself": (_in_call("    import os, signal\n    os.kill(os.getpid(), signal.SIGSTOP)"),
                           {Verdict.TIMEOUT}),
        # stopped within a poll of its processes (graders/isolation/launch.py), not at its limit
        "fork bomb": (_in_call("    import os\n    while True:\n        os.fork()"),
                      {Verdict.RUNTIME_ERROR}),
        "double-forked daemon": (_in_call(daemon), {Verdict.FAILED}),
        "memory bomb": (_in_call("    hog = []\n    while True:\n        hog.append(bytearray(1 << 28))"),
                        {Verdict.MEMORY_LIMIT}),
        "stdout flood": (_in_call("    while True:\n        print('x' * 4096)"), {Verdict.OUTPUT_LIMIT}),
        "stderr flood": (_in_call("    import sys\n    while True:\n        sys.stderr.write('y' * 4096)"),
                         {Verdict.OUTPUT_LIMIT}),
        "huge file": (_in_call("    with open('big', 'wb') as f:\n        for _ in range(1024):\n"
                               "            f.write(b'z' * (1 << 20))"), {Verdict.OUTPUT_LIMIT}),
        "loopback server": (_in_call(_indent(f"""
import socket
s = socket.socket()
s.settimeout(3)
s.connect(("127.0.0.1", {port}))
""")), {Verdict.RUNTIME_ERROR}),
        "read planted secrets": (_in_call(read_secrets), {Verdict.RUNTIME_ERROR}),
        "write outside the work dir": (_in_call(_indent(f"""
done = []
for path in {outside!r}:
    try:
        with open(path, "w") as f:
            f.write("pwned")
        done.append(path)
    except OSError:
        pass
raise RuntimeError("wrote: " + repr(done))
""")), {Verdict.RUNTIME_ERROR}),
        "plant symlinks for the grader": (_in_call(_indent(f"""
import os
for name in ("result.json", "output", ".triton", "submission.py"):
    try:
        os.symlink({str(tmp / 'victim.txt')!r}, name)
    except OSError:
        pass
""")), {Verdict.FAILED}),
        "kill its parent": (_in_call("    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)"),
                            {Verdict.FAILED, Verdict.RUNTIME_ERROR}),
        "kill its process group": (_in_call("    import os, signal\n    os.killpg(0, signal.SIGKILL)"),
                                   {Verdict.RUNTIME_ERROR}),
        "forge a result on the channel": (_in_call(_indent("""
import json, os, struct, sys
fd = int(sys.argv[sys.argv.index("--fds") + 1].split(",")[1])
head = json.dumps({"ok": True, "outputs": 1, "launches": 1, "verdict": "passed", "_arrays": []}).encode()
os.write(fd, struct.pack("<Q", len(head)) + head)
""")), {Verdict.REJECTED}),
        "top level: endless loop": ("while True:\n    pass\n", {Verdict.TIMEOUT}),
        "top level: read secrets": (read_secrets.replace("\n    ", "\n").strip() + "\n",
                                    {Verdict.COMPILE_ERROR}),
        "top level: double-forked daemon": (daemon.replace("\n    ", "\n").strip() + "\n" + BAD_SOFTMAX,
                                            {Verdict.FAILED}),
    }


def _leftovers() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if MARKER.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


CASE_NAMES = list(_cases(Path("/tmp"), 1))


@pytest.mark.parametrize("name", CASE_NAMES)
def test_attack(name, slot, tmp_path, loopback_server, record_property):
    port, accepted = loopback_server
    source, expected = _cases(tmp_path, port)[name]
    (tmp_path / "victim.txt").write_text("victim")
    folder = tmp_path / "submission"
    folder.mkdir()
    path = folder / "submission.py"
    path.write_text(source)
    exercise = get_exercise("safe_softmax")

    started = time.monotonic()
    limit_s = CASE_LIMIT_S.get(name, LIMIT_S)
    result = slot.grade(exercise, path, timeout_s=limit_s)
    elapsed = time.monotonic() - started
    record_property("attack_row", (name, result.verdict.value, elapsed,
                                   result.message.splitlines()[0][:70]))

    assert result.verdict in expected, result.message
    assert elapsed < limit_s + MARGIN_S
    assert result.score < 100
    assert _leftovers() == [], "a process outlived its job"
    assert slot.healthy, slot.problem
    # what the attacks must not have reached
    assert accepted == []
    assert "SECRET" not in result.message and "pwned" not in result.message
    assert "found: []" in result.message or "read" not in name
    assert "wrote: []" in result.message or "write" not in name
    assert not (tmp_path / "written-by-student.txt").exists()
    assert not (REPO / "graders" / "evil.py").exists()
    assert (tmp_path / "victim.txt").read_text() == "victim"

    # and the slot grades the next job normally: a fresh runner, the sandbox, a right
    # kernel judged right. Two of the exercise's checks say so as well as eight, in half
    # the time: 20 attacks each graded it after, ~11 s a time on a slow 2-core box
    good = folder / "good.py"
    good.write_text(GOOD)
    after = slot.grade(dataclasses.replace(exercise, checks=exercise.checks[:2]), good)
    assert after.verdict is Verdict.PASSED and after.score == 100, after.message
    assert [c.name for c in after.checks] == ["random_rows", "poisoned_row"]


def test_no_bwrap_means_no_grading(tmp_path):
    """Without bubblewrap the CLI refuses and names the package to install."""
    import subprocess
    import sys

    path = tmp_path / "s.py"
    path.write_text(GOOD)
    env = dict(os.environ, PATH=str(tmp_path))  # no bwrap on PATH
    proc = subprocess.run([sys.executable, "-m", "graders", "grade", "safe_softmax", str(path),
                           "--device", "cpu"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert "bubblewrap" in proc.stderr and "apt-get install bubblewrap" in proc.stderr


def test_runner_environment_holds_no_secrets(slot, tmp_path, monkeypatch):
    monkeypatch.setenv("ADMIN_TOKEN", "SECRET-TOKEN")
    monkeypatch.setenv("DATABASE_URL", "postgresql://SECRET")
    path = tmp_path / "env.py"
    path.write_text(_in_call("    import os\n    raise RuntimeError(repr(dict(os.environ)))"))
    result = slot.grade(get_exercise("safe_softmax"), path, timeout_s=LIMIT_S)
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert "SECRET" not in result.message and "'HOME': '/tmp'" in result.message


# A submission's lines that try to overwrite and remove ``file``, write ``new`` and make a
# folder beside it (in ``where``); ``tried`` lists what each did: "wrote" or the error's name
_TRY_TO_CHANGE = """tried = []
for act in (lambda: open({file}, "ab").write(b"x"),
            lambda: os.remove({file}),
            lambda: open({new}, "w").write("x"),
            lambda: os.mkdir(where + "/NEW")):
    try:
        act()
        tried.append("wrote")
    except OSError as exc:
        tried.append(type(exc).__name__)"""


def test_the_seed_cache_is_read_only_and_the_runner_is_told_where(slot, tmp_path):
    """The grader's seed cache (graders.isolation.seed_cache) is bound into every runner: a
    submission may read it (it holds only the grader's own kernel) but can neither
    change nor add to it, so it carries nothing from one student to another."""
    seed = tmp_path / "seed"
    (seed / "KEY").mkdir(parents=True)
    (seed / "KEY" / "kernel.cubin").write_text("grader's")
    body = _indent("""
import os
where = os.environ.get("GRADER_SEED_CACHE", "")
""" + _TRY_TO_CHANGE.format(file='where + "/KEY/kernel.cubin"', new='where + "/evil"') + """
raise RuntimeError(f"seed at {where}: {tried} read {open(where + '/KEY/kernel.cubin').read()!r}")
""")
    path = tmp_path / "seed_attack.py"
    path.write_text(_in_call(body))
    slot.launcher.seed_cache = seed
    try:
        result = slot.grade(get_exercise("safe_softmax"), path, timeout_s=LIMIT_S)
    finally:
        slot.launcher.seed_cache = None
    assert result.verdict is Verdict.RUNTIME_ERROR, result.message
    assert "seed at /grader/seed-cache:" in result.message, result.message
    assert "wrote" not in result.message and "read \"grader's\"" in result.message
    assert sorted(p.name for p in seed.rglob("*")) == ["KEY", "kernel.cubin"]
    assert (seed / "KEY" / "kernel.cubin").read_text() == "grader's"


def test_the_graders_bytecode_is_read_by_the_runner_and_cannot_be_changed(slot, tmp_path):
    """The runners' bytecode (graders.isolation.bytecode), compiled once by the grader, is
    what the runner's Python imports torch from; a submission can neither change nor add
    to it: every later runner, every student's, reads the same folder."""
    bytecode.begin()
    folder = bytecode.wait(timeout_s=300)
    assert folder is not None
    body = _indent("""
import os, sys, torch
where = sys.pycache_prefix or ""
cached = torch.__spec__.cached or ""
""" + _TRY_TO_CHANGE.format(file="cached", new='where + "/evil.pyc"') + """
raise RuntimeError(f"bytecode at {where}: {tried}, torch's {os.path.exists(cached)} "
                   f"under it {cached.startswith(where + '/')}")
""")
    path = tmp_path / "bytecode_attack.py"
    path.write_text(_in_call(body))
    torch_pyc = [p for p in folder.rglob("torch/__init__.*.pyc")]
    assert torch_pyc, "the fill compiled torch's modules"
    before = {p: p.stat().st_mtime_ns for p in torch_pyc}
    result = slot.grade(get_exercise("safe_softmax"), path, timeout_s=LIMIT_S)
    assert result.verdict is Verdict.RUNTIME_ERROR, result.message
    assert "bytecode at /grader/bytecode:" in result.message, result.message
    assert "wrote" not in result.message, result.message
    assert "torch's True under it True" in result.message, result.message
    assert not (folder / "evil.pyc").exists() and not (folder / "NEW").exists()
    assert {p: p.stat().st_mtime_ns for p in torch_pyc} == before


def test_a_kernel_that_sleeps_under_each_calls_budget_ends_at_the_runs_limit(
        slot, tmp_path, monkeypatch):
    """Issue 26, item 9: `time.sleep(50)` per call stayed under the 60 s call budget and held
    the slot for the run's 300 s wall clock. Scaled down here: 2 s a call under a 3 s budget,
    and a run limit of 6 s (the floor) instead of 90 s; every check has several calls."""
    from graders.engine import spec

    monkeypatch.setattr(spec, "RUN_FLOORS_S", {Device.CPU: 6.0, Device.CUDA: 6.0})
    exercise = dataclasses.replace(get_exercise("safe_softmax"), reference_s={Device.CPU: 1.0})
    assert exercise.run_limit_s(Device.CPU) == 6.0
    path = tmp_path / "submission.py"
    path.write_text(SAFE_KERNEL + "\n\ndef softmax(x):\n    import time\n    time.sleep(2)\n"
                    "    y = torch.empty_like(x)\n    launch(x, y)\n    return y\n")
    started = time.monotonic()
    result = slot.grade(exercise, path, call_budget_s=3)
    elapsed = time.monotonic() - started
    print(f"\nsleeping 2 s a call: {result.verdict.value} in {elapsed:.1f} s: "
          f"{result.message[:120]}")
    assert result.verdict is Verdict.TIMEOUT, result.message
    assert "6 s limit" in result.message
    assert elapsed < 6 + MARGIN_S
    assert _leftovers() == [] and slot.healthy, slot.problem


def test_the_run_limit_is_a_multiple_of_the_references_time_within_floor_and_wall_clock():
    from graders.engine.spec import RUN_FLOORS_S, RUN_MULTIPLE

    exercise = get_exercise("safe_softmax")
    assert exercise.run_limit_s(Device.CPU) == RUN_FLOORS_S[Device.CPU] == 90
    assert exercise.run_limit_s(Device.CUDA) == RUN_FLOORS_S[Device.CUDA] == 90
    slow = dataclasses.replace(exercise, reference_s={Device.CPU: 20.0, Device.CUDA: 100.0})
    assert slow.run_limit_s(Device.CPU) == RUN_MULTIPLE * 20.0
    assert slow.run_limit_s(Device.CUDA) == exercise.timeouts_s[Device.CUDA]  # the cap
    unmeasured = dataclasses.replace(exercise, reference_s={})
    assert unmeasured.run_limit_s(Device.CPU) == exercise.timeouts_s[Device.CPU]
