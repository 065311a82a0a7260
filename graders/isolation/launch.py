"""Starting, confining and stopping the runner process.

The checker owns both pipes of the channel and drains the runner's stdout and
stderr into a capped buffer that nobody parses. Around whatever command the
launcher builds (bubblewrap, or a plain process with ``--no-sandbox``), a small
shim joins the job's cgroup and sets rlimits before anything untrusted starts.
A runner is started before its submission is known: the submission is copied into
the runner's inbox (a folder the sandbox sees read-only) when the runner is put to
work, and ``arm`` starts the run's wall clock then. Two watchdogs kill the process
group: the run's deadline (the last backstop) and the budget of the call in flight
(``begin_call``); ``close`` kills whatever is left in the cgroup and reports it, so a
slot can tell it is clean.
"""

from __future__ import annotations

import fcntl
import logging
import os
import queue
import resource
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Protocol

from graders.isolation import bytecode, gpu_memory, jobuids
from graders.isolation.cgroups import JobCgroup, cgroups_disabled
from graders.isolation.limits import Limits
from graders.shared import autogroup, protocol
from graders.shared.protocol import BOOT

log = logging.getLogger(__name__)

# variables a runner may inherit; everything else (tokens, database URLs) stays out
_PASSTHROUGH_ENV = ("PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "NCCL_NVLS_ENABLE",
                    "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
                    "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                    # an operator's profile of the runners (graders/runner/main.py), and of
                    # their timed loops alone (graders/runner/timing.py, no cProfile)
                    "GRADERS_RUNNER_PROFILE", "GRADERS_TIMING_PROBE")

# A runner's CPU priority (nice): below the grader's, and below the one runner that times,
# which is raised to TIMING_NICE (``RunnerProcess.set_priority``). Timing holds the GPU alone
# while every other slot's checks wait; on the H200 with 6 slots its host side (Python, the
# guard, the launches) competed with every lane's compiles and took 4.2 s at p50 instead of
# 1.3 s, and the whole GPU waited for it (docs/benchmarks.md, issue 43).
RUNNER_NICE = 10
TIMING_NICE = 0
# A runner a pool makes ahead, until its imports are done: below every runner that grades.
# At a burst's start on the H200 the four slots' first gradings took 13 warm runners at
# once, and their 13 replacements (3.5 CPU-seconds each, mostly importing torch) were made
# at RUNNER_NICE beside those gradings' checks: the checks took 7.3-7.6 s against 2.2-2.9 s
# back to back, and three references went past 10 s (docs/benchmarks.md, issue 43). A
# runner is raised to RUNNER_NICE before its first GPU work (``pool.prepare``), so that it
# never holds the GPU's gate at this priority while a timing waits for it; where it cannot
# be raised (no CAP_SYS_NICE) runners are made at RUNNER_NICE, as before.
AHEAD_NICE = 19
# The grader's own threads that check (each lane's inputs, float64 references, judging) and
# judge timed rows: behind the runner that times, ahead of the compiles. On the H100 with 6
# slots (load 25 on 16 cores) the timing runner's host took 54 ms to queue a call it queues
# in 1.4 ms alone, and 88 ms to make inputs it makes in 1 ms, though the compiles run at
# RUNNER_NICE: what competed with it at the same priority was the slots' own threads.
CHECKER_NICE = 5


def lower_this_thread(nice: int) -> None:
    """This thread (Linux: a nice value is a thread's own) to ``nice``, or left where it is
    if it already runs behind that: lowering a priority needs no privilege."""
    tid = threading.get_native_id()
    try:
        if os.getpriority(os.PRIO_PROCESS, tid) < nice:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
    except OSError:
        pass

CAP_SYS_NICE = 23  # linux/capability.h


def can_raise_priority() -> bool:
    """Whether this process may give another process a lower nice than it has (a runner
    made at AHEAD_NICE back to RUNNER_NICE, the timing runner to TIMING_NICE): root with
    CAP_SYS_NICE in its effective set (a container's root may lack it)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> CAP_SYS_NICE & 1)
    except (OSError, ValueError):
        pass
    return False


def ahead_nice() -> int:
    """The nice a pool makes its runners at until they are raised: AHEAD_NICE, or an
    operator's ``GRADERS_AHEAD_NICE`` (RUNNER_NICE to 19; RUNNER_NICE makes them as
    before); RUNNER_NICE where they could not be raised again."""
    if not can_raise_priority():
        return RUNNER_NICE
    try:
        wanted = int(os.environ.get("GRADERS_AHEAD_NICE", AHEAD_NICE))
    except ValueError:
        wanted = AHEAD_NICE
    return min(19, max(RUNNER_NICE, wanted))


def threads_of(pid: int) -> list[int]:
    """The ids of ``pid``'s threads (each has a nice of its own); [pid] where it is gone."""
    try:
        return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return [pid]


def _shim(nice: int) -> str:
    """Runs between the launcher and the runner: joins the cgroup, sets rlimits and its
    priority, becomes the job's own uid where there is one (graders/isolation/jobuids.py),
    execs."""
    return (
    "import os, resource, sys\n"
    f"os.setpriority(os.PRIO_PROCESS, 0, {int(nice)})\n"
    "n = int(sys.argv[1]); files = sys.argv[2:2 + n]; limits = sys.argv[2 + n]\n"
    "uid = sys.argv[3 + n]\n"
    "for f in files:\n"
    "    try:\n"
    "        with open(f, 'w') as fh: fh.write(str(os.getpid()))\n"
    "    except OSError as e: print('graders: could not join', f, e, file=sys.stderr)\n"
    "for item in filter(None, limits.split(',')):\n"
    "    name, value = item.split('=')\n"
    "    resource.setrlimit(getattr(resource, name), (int(value), int(value)))\n"
    "if uid:\n"
    "    u = int(uid); os.setgroups([]); os.setresgid(u, u, u); os.setresuid(u, u, u)\n"
    "os.execvp(sys.argv[4 + n], sys.argv[4 + n:])\n"
    )


_SHIM = _shim(RUNNER_NICE)


@dataclass
class RunnerJob:
    """What the runner needs, before a launcher decides where it really runs."""

    python: str
    device: str
    fds: tuple[int, int]
    workdir: Path
    env: dict[str, str]
    # the grader's compiled bytecode for the runner's imports (graders.isolation.bytecode),
    # once there is one: the launcher binds it and names it to the runner's Python
    bytecode: Path | None = None

    @property
    def inbox(self) -> Path:
        """Where the submission is put once known; the runner reads it, never writes."""
        return self.workdir / "inbox"

    def runner_argv(self, root: str, bytecode: str | None = None) -> list[str]:
        """``bytecode``: the folder the runner's Python reads compiled modules from, as the
        runner sees it (None: beside each module, as Python does by default)."""
        flags = ["-X", f"pycache_prefix={bytecode}"] if bytecode else []
        return [self.python, "-I", *flags, "-c", BOOT, root, "--device", self.device,
                "--fds", f"{self.fds[0]},{self.fds[1]}"]


class Launcher(Protocol):
    sandboxed: bool
    limits: Limits
    gpu_index: int | None
    # the grader's read-only Triton cache to copy (graders.isolation.seed_cache)
    seed_cache: Path | None

    def command(self, job: RunnerJob) -> tuple[list[str], dict[str, str]]: ...

    def inbox_path(self, job: RunnerJob, filename: str) -> str:
        """The path under which the runner sees ``job.inbox / filename``."""


class CappedOutput:
    """Keeps the first ``keep`` bytes of a stream; past ``stop_at`` calls ``on_flood`` once.

    Read on a thread of its own, one chunk at a time under a lock and only once the pipe
    is readable, so that :meth:`settled_text` can tell that nothing written so far is left
    unread: a grading answers its student before its last runners have exited (their
    exits, ~0.2 s each on a GPU, are the slot's to wait for), and a runner flushes what
    the submission printed before each reply (graders/runner/main.py)."""

    def __init__(self, stream: BinaryIO, keep: int, stop_at: int, on_flood: Callable[[], None]):
        self.keep, self.stop_at, self.on_flood = keep, stop_at, on_flood
        self.kept = bytearray()
        self.total = 0
        self.flooded = False
        self._stream = stream
        self._lock = threading.Lock()
        self._ended = False
        self._thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self._thread.start()

    def _drain(self, stream: BinaryIO) -> None:
        fd = stream.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while True:
            poller.poll()
            with self._lock:
                try:
                    chunk = os.read(fd, 65536)  # readable: it does not block
                except OSError:
                    chunk = b""
                if not chunk:
                    self._ended = True
                    return
                room = max(self.keep - len(self.kept), 0)
                self.kept += chunk[:room]
                self.total += len(chunk)
                flood = self.total > self.stop_at and not self.flooded
                if flood:
                    self.flooded = True
            if flood:
                self.on_flood()

    @property
    def dropped(self) -> int:
        return self.total - len(self.kept)

    def text(self) -> str:
        """Everything the runner wrote, once it has exited (its pipe at its end)."""
        self._thread.join(timeout=2)
        return self.kept.decode("utf-8", "replace")

    def settled_text(self, wait_s: float = 0.1) -> str:
        """What the runner has written so far, with nothing of it left in the pipe: for an
        answer given while the runner is still running or exiting. Waits at most
        ``wait_s`` for a runner still printing (a flood keeps its first bytes anyway)."""
        deadline = time.monotonic() + wait_s
        while True:
            with self._lock:  # no chunk is being read, and every chunk read is kept
                if self._ended or _unread_bytes(self._stream) == 0 \
                        or time.monotonic() >= deadline:
                    return self.kept.decode("utf-8", "replace")
            time.sleep(0.002)


def _unread_bytes(stream: BinaryIO) -> int:
    try:
        return struct.unpack("i", fcntl.ioctl(stream.fileno(), termios.FIONREAD,
                                              b"\0\0\0\0"))[0]
    except (OSError, ValueError):  # closed: nothing more will be read from it
        return 0


@dataclass
class CloseReport:
    leftover_processes: int  # processes still in the job's cgroup after the runner ended
    all_killed: bool


PROCESS_POLL_S = 0.2  # how often an armed runner's job has its processes counted
# how old a scan of the host's processes one watch may share with the others: every armed
# runner's watch scanning /proc itself cost 1.6 CPU-seconds a grading on the H200
SHARED_SCAN_AGE_S = 0.1


def _start_timer(seconds: float, action: Callable[[], None]) -> threading.Timer:
    timer = threading.Timer(seconds, action)
    timer.daemon = True  # a watchdog never keeps the grader alive
    timer.start()
    return timer


@dataclass(eq=False)  # one process, one object: compared by identity
class RunnerProcess:
    proc: subprocess.Popen
    to_runner: BinaryIO
    from_runner: BinaryIO
    workdir: tempfile.TemporaryDirectory
    job: RunnerJob
    launcher: Launcher
    cgroup: JobCgroup | None
    job_uid: int | None = None  # the runner's own uid, where no cgroup caps its processes
    output: CappedOutput | None = None
    killed_at_deadline: bool = False
    over_budget: bool = False  # killed because the call in flight outran its budget
    forked_too_much: bool = False  # killed for more processes than a kernel needs
    max_processes: int = 0  # 0: not watched (no cgroup and no job uid to count by)
    # the GPU memory the job may hold (graders/isolation/gpu_memory.py), as torch counts it
    # in the runner; the driver's figure for its processes may add a CUDA context. 0: none.
    # Raised for a timing (the GPU's one timing reserve), and put back after it
    gpu_cap: int = 0
    gpu_over: int = 0  # what the driver reported when the job was killed over its cap
    _gpu_checked_at: float = field(default=0.0, repr=False)
    _watchdog: threading.Timer | None = field(default=None, repr=False)
    _call_timer: threading.Timer | None = field(default=None, repr=False)
    _call_left_s: float = field(default=0.0, repr=False)  # the call's budget, less its time
    _call_since: float = field(default=0.0, repr=False)  # ... counted until then
    _watch_over: threading.Event | None = field(default=None, repr=False)
    # set as close begins: its job uid goes back to be handed to another runner, whose
    # priority a late set_priority by uid must not change
    _closing: bool = field(default=False, repr=False)

    def send(self, header: dict, arrays=None) -> None:
        protocol.send(self.to_runner, header, arrays)

    def receive(self) -> protocol.Message:
        return protocol.receive(self.from_runner)

    @property
    def flooded_output(self) -> bool:
        return bool(self.output and self.output.flooded)

    @property
    def out_of_memory(self) -> bool:
        return bool(self.cgroup and self.cgroup.oom_killed())

    def kill(self) -> None:
        """Kill the launcher's process group; bwrap's death takes its pid namespace along."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.cgroup:
            self.cgroup.kill_all(wait_s=0)
        if self.job_uid is not None:
            jobuids.kill_uid(self.job_uid, wait_s=0)

    def _on_deadline(self) -> None:
        self.killed_at_deadline = True
        self.kill()

    def arm(self, timeout_s: float) -> None:
        """Start the run's wall clock: the runner is killed ``timeout_s`` from now."""
        if self._watchdog:
            self._watchdog.cancel()
        self._watchdog = _start_timer(max(timeout_s, 0.0), self._on_deadline)
        self._start_watching()

    def disarm(self) -> None:
        """No wall clock: a warm runner waits, running only trusted code, for its job."""
        if self._watchdog:
            self._watchdog.cancel()
            self._watchdog = None
        self._stop_watching()

    def place_submission(self, submission: Path) -> str:
        """Copy the submission into the inbox; the path the runner sees it under."""
        name = "submission" + submission.suffix
        target = self.job.inbox / name
        shutil.copyfile(submission, target)
        os.chmod(target, 0o644)  # readable by the sandbox's uid
        return self.launcher.inbox_path(self.job, name)

    def begin_call(self, budget_s: float | None) -> None:
        """Kill the runner unless the call now sent is answered within ``budget_s``."""
        self.end_call()
        if budget_s:
            self._call_left_s, self._call_since = budget_s, time.monotonic()
            self._call_timer = _start_timer(budget_s, self._on_budget)

    def pause_call(self) -> None:
        """The call's budget stops while the checker, not the submission, keeps it waiting
        (for the GPU gate, mid-call); ``resume_call`` starts what is left of it."""
        if self._call_timer:
            self._call_timer.cancel()
            self._call_timer = None
            self._call_left_s -= time.monotonic() - self._call_since

    def resume_call(self) -> None:
        if self._call_timer is None and self._call_left_s > 0 and not self.over_budget:
            self._call_since = time.monotonic()
            self._call_timer = _start_timer(self._call_left_s, self._on_budget)

    def end_call(self) -> None:
        self._call_left_s = 0.0
        if self._call_timer:
            self._call_timer.cancel()
            self._call_timer = None

    def _start_watching(self) -> None:
        """Count the job's processes from now until the run ends (``_stop_watching``): a
        fork bomb's children outlive the call that made them, which returned at once."""
        self._stop_watching()
        if self._countable:
            self._watch_over = threading.Event()
            threading.Thread(target=self._watch_processes, args=(self._watch_over,),
                             daemon=True, name="process-watch").start()

    def _stop_watching(self) -> None:
        if self._watch_over is not None:
            self._watch_over.set()
            self._watch_over = None

    @property
    def _countable(self) -> bool:
        """Whether the job's processes can be counted and held to a cap: by its cgroup, or
        by its job uid."""
        return bool(self.max_processes) and (self.cgroup is not None or self.job_uid is not None)

    def _job_pids(self, max_age: float = 0.0) -> list[int]:
        if self.cgroup:
            return self.cgroup.pids()
        # zombies too: a bomb's children that failed to fork exit at once, and lie unreaped
        return jobuids.processes_of(self.job_uid, zombies=True, max_age=max_age)

    def set_priority(self, nice: int) -> bool:
        """Every process of this runner to ``nice`` (lower runs first); False where that is
        not allowed: running ahead of the rest needs root (CAP_SYS_NICE), which a host with
        job uids has. False once the runner is being closed."""
        if self._closing:
            return False
        try:
            if self.job_uid is not None:  # every process of the uid, at once
                os.setpriority(os.PRIO_USER, self.job_uid, nice)
                pids = set(self._job_pids())
            else:
                pids = set(self._job_pids() if self.cgroup else
                           jobuids.descendants_of(self.proc.pid))
                for pid in pids:
                    # a nice is a thread's own: each of the process's threads (torch's
                    # pools, the runner's own), not only the one its pid names
                    for tid in threads_of(pid):
                        try:
                            os.setpriority(os.PRIO_PROCESS, tid, nice)
                        except ProcessLookupError:
                            pass  # ended meanwhile
        except OSError:
            return False
        # and their sessions' groups, where the kernel shares the CPU by session first
        # (graders/shared/autogroup.py): else the nice orders nothing against other runners
        return all([autogroup.set_nice(pid, nice) for pid in pids])

    def _job_processes(self, max_age: float = 0.0) -> int:
        return len(self._job_pids(max_age))

    @property
    def gpu_index(self) -> int | None:
        return self.launcher.gpu_index if self.job.device != "cpu" else None

    def gpu_usage(self) -> int | None:
        """What the driver reports for this job's processes on its GPU (a sample at most
        SAMPLE_MAX_AGE_S old); None where it reports none of them."""
        if self.gpu_index is None or not self._countable:
            return None
        sample = gpu_memory.SAMPLES.get(self.gpu_index)
        # the job's pids as old as the driver's figures may be, or fresher
        return gpu_memory.job_usage(sample.by_pid, {self.proc.pid, *self._job_pids(
            SHARED_SCAN_AGE_S)})

    def over_gpu_cap(self) -> int:
        """The bytes the driver reported, if this job holds (or held) more GPU memory than
        its cap allows; else 0. A job over it is killed."""
        if not self.gpu_over and self.gpu_cap:
            used = self.gpu_usage()
            if gpu_memory.over_cap(used, self.gpu_cap):
                self.gpu_over = used
                self.kill()
        return self.gpu_over

    def over_process_cap(self, max_age: float = 0.0) -> int:
        """The cap, if this runner's job holds (or held) more processes than it; else 0. A
        job over it is killed. ``max_age``: how old a view of the host's processes may
        count them (0: a scan made now; graders.isolation.jobuids.ProcessTable)."""
        if not self.forked_too_much and self._countable and \
                self._job_processes(max_age) > self.max_processes:
            self.forked_too_much = True
            self.kill()
        return self.max_processes if self.forked_too_much else 0

    def _watch_processes(self, over: threading.Event) -> None:
        """A fork bomb reaches the job's task cap (RLIMIT_NPROC or pids.max) in
        milliseconds, and its hundreds of spinning processes then slowed the grading beside
        it on the H200, a host without cgroups, for as long as the run lasted (the call that
        forked returns at once, with EAGAIN). It is stopped within a poll instead (issue 26,
        item 10)."""
        while not over.wait(PROCESS_POLL_S):
            if self.over_process_cap(SHARED_SCAN_AGE_S):
                return
            # and its GPU memory, less often (NVML, or an nvidia-smi of ~0.1 s): a job that takes the
            # GPU's memory past its cap by the driver's own calls, which torch's fraction in
            # the runner never sees, is stopped within a second (issue 43)
            if self.gpu_cap and time.monotonic() - self._gpu_checked_at >= \
                    gpu_memory.WATCH_EVERY_S:
                self._gpu_checked_at = time.monotonic()
                if self.over_gpu_cap():
                    return

    def _on_budget(self) -> None:
        self.over_budget = True
        self.kill()

    def close(self) -> CloseReport:
        self._closing = True
        if self._watchdog:
            self._watchdog.cancel()
        self._stop_watching()
        self.end_call()
        for stream in (self.to_runner, self.from_runner):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)  # a runner told nothing more exits on its own
        except subprocess.TimeoutExpired:
            pass
        self.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.error("runner %d did not die", self.proc.pid)
        report = CloseReport(0, True)
        if self.cgroup:
            deadline = time.monotonic() + 2.0  # dying processes linger in the group briefly
            while (leftovers := self.cgroup.pids()) and time.monotonic() < deadline:
                time.sleep(0.05)
            report = CloseReport(len(leftovers), self.cgroup.kill_all())
            if leftovers:
                log.warning("job left %d processes behind; killed: %s", len(leftovers),
                            report.all_killed)
            self.cgroup.remove()
        elif self.job_uid is not None:
            deadline = time.monotonic() + 2.0  # dying processes linger briefly
            while (leftovers := jobuids.processes_of(self.job_uid)) and \
                    time.monotonic() < deadline:
                time.sleep(0.05)
            report = CloseReport(len(leftovers), self.launcher.job_uids.release(self.job_uid))
            if leftovers:
                log.warning("job uid %d left %d processes behind; killed: %s", self.job_uid,
                            len(leftovers), report.all_killed)
        self.workdir.cleanup()
        return report


def _rlimits(limits: Limits, timeout_s: float, device: str, has_cgroup: bool,
             job_uid: int | None = None) -> str:
    items = {
        "RLIMIT_CPU": int(timeout_s) + limits.cpu_seconds_margin,
        "RLIMIT_FSIZE": limits.file_bytes,
        "RLIMIT_CORE": 0,
    }
    if not has_cgroup:
        if device == "cpu":  # never on a GPU: an address-space limit breaks CUDA
            items["RLIMIT_AS"] = limits.memory_bytes * 2
        if job_uid is not None:  # the uid is the runner's alone: the cgroup's task cap
            items["RLIMIT_NPROC"] = limits.max_pids
        elif os.geteuid() != 0:  # root is not held by RLIMIT_NPROC at all
            soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
            items["RLIMIT_NPROC"] = soft if soft != resource.RLIM_INFINITY else 4096
    return ",".join(f"{k}={v}" for k, v in items.items())


class _Spawner:
    """Starts every runner from one long-lived thread.

    bwrap's --die-with-parent (PR_SET_PDEATHSIG) fires when the *thread* that forked it
    ends, not the process: a runner started from a grading's lane thread was killed as
    soon as that thread finished, before it could flush what the submission printed.
    """

    def __init__(self) -> None:
        self._jobs: "queue.Queue[tuple[tuple, dict, Future]]" = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _loop(self) -> None:
        while True:
            args, kwargs, future = self._jobs.get()
            try:
                future.set_result(subprocess.Popen(*args, **kwargs))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                future.set_exception(exc)

    def popen(self, *args, **kwargs) -> subprocess.Popen:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, daemon=True,
                                                name="runner-spawner")
                self._thread.start()
        future: Future = Future()
        self._jobs.put((args, kwargs, future))
        return future.result()


_spawn = _Spawner().popen


def runner_env() -> dict[str, str]:
    """What a runner inherits of the grader's environment, before its launcher adds its own."""
    return {k: os.environ[k] for k in _PASSTHROUGH_ENV if k in os.environ} | {
        "PYTHONDONTWRITEBYTECODE": "1"}


def start_runner(device: str, timeout_s: float, launcher: Launcher,
                 python: str | None = None, nice: int = RUNNER_NICE) -> RunnerProcess:
    """Start a runner for one submission, not yet known. ``timeout_s`` bounds its CPU
    time (RLIMIT_CPU); its wall clock starts with ``arm``; it starts at ``nice``."""
    limits = launcher.limits
    workdir = tempfile.TemporaryDirectory(prefix="graders-run-")
    to_runner_r, to_runner_w = os.pipe()
    from_runner_r, from_runner_w = os.pipe()
    job = RunnerJob(
        python=python or sys.executable, device=device,
        fds=(to_runner_r, from_runner_w), workdir=Path(workdir.name),
        env=runner_env(), bytecode=bytecode.prefix(),
    )
    job.inbox.mkdir()
    os.chmod(job.workdir, 0o755)
    os.chmod(job.inbox, 0o755)
    command, env = launcher.command(job)
    cgroup = None if cgroups_disabled() else JobCgroup.create(limits.memory_bytes,
                                                               limits.max_pids)
    uids = getattr(launcher, "job_uids", None)
    job_uid = uids.acquire() if cgroup is None and uids is not None else None
    procs = cgroup.procs_files if cgroup else []
    shim = [sys.executable, "-I", "-c", _shim(nice), str(len(procs)), *procs,
            _rlimits(limits, timeout_s, device, cgroup is not None, job_uid),
            "" if job_uid is None else str(job_uid)]
    try:
        proc = _spawn(
            shim + command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, pass_fds=job.fds, cwd=workdir.name, env=env,
            start_new_session=True,
        )
    except BaseException:
        for fd in (to_runner_r, to_runner_w, from_runner_r, from_runner_w):
            os.close(fd)
        if cgroup:
            cgroup.remove()
        if job_uid is not None:
            uids.release(job_uid)
        workdir.cleanup()
        raise
    os.close(to_runner_r)
    os.close(from_runner_w)
    runner = RunnerProcess(
        proc=proc,
        to_runner=os.fdopen(to_runner_w, "wb", buffering=1 << 20),
        from_runner=os.fdopen(from_runner_r, "rb", buffering=1 << 20),
        workdir=workdir,
        job=job,
        launcher=launcher,
        cgroup=cgroup,
        job_uid=job_uid,
        max_processes=limits.max_processes,
        gpu_cap=limits.gpu_memory_bytes if device != "cpu" else 0,
    )
    runner.output = CappedOutput(proc.stdout, limits.output_keep_bytes, limits.output_max_bytes,
                                 on_flood=runner.kill)
    return runner
