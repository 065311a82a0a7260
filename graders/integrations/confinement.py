"""How a submission is confined inside a platform's container, decided at run time.

The container is per submission and the grader is root there, but it is still where the
results are written and where the grader's own code lives, so the submission must not run
as the grader. Two ways, in order:

1. **bubblewrap**, the engine's own sandbox (graders/isolation/sandbox.py), where the container
   lets it build one (user namespaces; Docker's default seccomp profile usually forbids them).
   Its process cap is a job cgroup or a job uid, as the engine decides.
2. **a job uid without bubblewrap**: the engine's root-without-cgroup path
   (graders/isolation/jobuids.py) on its own. The launch shim drops the runner to an unprivileged
   uid of its own, held by RLIMIT_NPROC, RLIMIT_AS, RLIMIT_CPU, RLIMIT_FSIZE, and killed by uid
   when the run ends. It cannot write results/, read root's files of mode 0600 or signal the
   grader; unlike bubblewrap it still sees the container's filesystem and network. That is
   acceptable only because the container is thrown away after this one submission and holds no
   other student's work and no reference solution.

Neither possible (no bwrap, and no way to switch users: not root, or CAP_SETUID dropped)
raises CannotConfine: the caller writes a results.json that says so and grades nothing.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from graders.isolation import jobuids
from graders.isolation.jobuids import JobUids, NoJobUid
from graders.isolation.launch import _SHIM, RunnerJob
from graders.isolation.sandbox import BwrapLauncher, DirectLauncher, Limits, SandboxUnavailable
from graders.shared.paths import REPO_ROOT

log = logging.getLogger(__name__)


class CannotConfine(Exception):
    """No way to confine the submission here; nothing may run."""


class JobUidLauncher(DirectLauncher):
    """The runner as a plain process, dropped by the launch shim to a job uid of its own.

    ``job_uids`` is what graders/launch.start_runner looks for: with no job cgroup it takes
    a uid from it, puts RLIMIT_NPROC on it and kills by uid at the end. ``sandboxed`` stays
    False: no bwrap stands between, so the runner's exit status is its own."""

    def __init__(self, gpu_index: int | None = None, limits: Limits | None = None):
        super().__init__(gpu_index=gpu_index, limits=limits)
        self.job_uids = JobUids()

    def command(self, job: RunnerJob) -> tuple[list[str], dict[str, str]]:
        args, env = super().command(job)
        # the work dir belongs to root (0755); the runner's uid is only known later, so its
        # home and Triton cache go in a sticky world-writable folder inside it
        home = Path(job.workdir) / "home"
        home.mkdir(exist_ok=True)
        os.chmod(home, 0o1777)
        env.update(HOME=str(home), TMPDIR=str(home), TRITON_CACHE_DIR=str(home / ".triton"))
        return args, env


@dataclass
class Confinement:
    launcher: object  # a graders.isolation.launch.Launcher
    description: str  # said in the results, so staff and students see how the code ran


def _probe_job_uid(uids: JobUids) -> None:
    """Run what a runner runs first as a job uid, through the engine's own launch shim:
    the uid switch must work and the uid must read the Python environment and graders."""
    try:
        uid = uids.acquire()
    except (NoJobUid, OSError) as exc:
        raise CannotConfine(f"no job uid could be taken ({exc})") from None
    try:
        probe = [sys.executable, "-I", "-c",
                 f"import os, sys; sys.path.insert(0, {str(REPO_ROOT)!r}); "
                 f"import numpy, graders.shared.protocol; assert os.getuid() == {uid}"]
        limits = f"RLIMIT_NPROC={Limits().max_pids}"
        proc = subprocess.run([sys.executable, "-I", "-c", _SHIM, "0", limits, str(uid), *probe],
                              capture_output=True, text=True, timeout=120, cwd="/")
    finally:
        uids.release(uid)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise CannotConfine(f"a job uid ({uid}) could not be used: {last[:300]}")


def choose() -> Confinement:
    """bubblewrap where it works, else a job uid; CannotConfine where neither does."""
    try:
        return Confinement(BwrapLauncher(gpu_index=None),
                           "bubblewrap sandbox (no network, read-only system, private /tmp)")
    except (SandboxUnavailable, NoJobUid, OSError, subprocess.SubprocessError) as exc:
        log.warning("no bubblewrap sandbox here: %s", exc)
        # the engine's own words are for operators; the results say it shortly
        bwrap_why = ("bubblewrap is not installed" if shutil.which("bwrap") is None else
                     "bubblewrap cannot build its sandbox here (user namespaces forbidden?)")
    if not jobuids.needed():
        raise CannotConfine(f"{bwrap_why}, and the grader is not root, so it cannot "
                            "run the submission as a user of its own")
    try:
        _probe_job_uid(JobUids())
    except CannotConfine as exc:
        raise CannotConfine(f"{bwrap_why}, and {exc}") from None
    # a job cgroup would take the place of the job uid in start_runner and leave the runner
    # root: here the uid is the confinement, so the engine is told there is no cgroup
    os.environ["GRADERS_NO_CGROUP"] = "1"
    log.warning("%s: each runner runs as a job uid instead", bwrap_why)
    return Confinement(JobUidLauncher(gpu_index=None),
                       "an unprivileged user of its own, with process, memory, CPU-time and "
                       "file-size limits (this container cannot run bubblewrap)")
