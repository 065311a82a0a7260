"""The sandbox every untrusted runner runs in: bubblewrap, plus limits.

``BwrapLauncher`` turns the runner's command into a bwrap command: every
namespace unshared (so no network), uid/gid 65534, a new session, no
capabilities, no nested user namespaces, dies with its parent. It sees
read-only binds of exactly what it needs (the system's /usr, the Python
environment, the runner's own code under /grader, the runner's inbox
as /sandbox, where its one submission is put), a private size-capped /tmp as its work dir, a fresh
/proc and a minimal /dev, and on a GPU only the assigned GPU's device node
plus nvidiactl and nvidia-uvm. No database, no other submission, no reference
solution, no exercise folder, no environment secrets.

``Limits`` are applied around it by ``graders.isolation.launch``: a cgroup for memory and
process count where the host has one (never an address-space limit on a GPU,
which breaks CUDA), rlimits for CPU time, file size and core dumps, a wall
clock, and a cap on what the runner may print.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

from graders.isolation import jobuids
from graders.isolation.bytecode import SANDBOX_BYTECODE, SANDBOX_ROOT
from graders.isolation.cgroups import cgroups_disabled, cgroups_usable
from graders.isolation.gpu_memory import cap_env
from graders.isolation.jobuids import JobUids
from graders.isolation.launch import _SHIM, RunnerJob
from graders.isolation.limits import Limits
from graders.shared.gpuinfo import cuda_visible_devices
from graders.shared.protocol import SEED_CACHE_ENV

log = logging.getLogger(__name__)
# SANDBOX_ROOT: the graders package, read-only (named in graders.isolation.bytecode, which
# compiles the runner's code as the sandbox names it)
SANDBOX_INBOX = "/sandbox"  # the runner's inbox, read-only: the submission arrives here
SANDBOX_TMP = "/tmp"
SANDBOX_SEED_CACHE = f"{SANDBOX_ROOT}/seed-cache"  # the grader's own kernel, compiled (read-only)

INSTALL_HINT = (
    "bubblewrap (bwrap) is not installed, and the grader never runs untrusted code without its "
    "sandbox: install Debian's package `bubblewrap` (apt-get install bubblewrap). To grade your "
    "own code on your own machine only, pass --no-sandbox."
)


class SandboxUnavailable(Exception):
    """bwrap is missing or cannot create namespaces here."""


def find_bwrap() -> str:
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxUnavailable(INSTALL_HINT)
    return path


_BASE_FLAGS = ["--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534",
               "--new-session", "--die-with-parent", "--cap-drop", "ALL"]
# no user namespaces inside the sandbox (a kernel attack surface); some kernels and
# gVisor cannot do this, and the sandbox then goes without it, with a log line
_NO_NESTED_USERNS = ["--disable-userns"]


@lru_cache(maxsize=None)
def _probe(bwrap: str) -> tuple[str, ...]:
    """Find the flags this host supports, once; refuse with a clear message if none work."""
    error = ""
    for extra in (_NO_NESTED_USERNS, []):
        flags = [*_BASE_FLAGS, *extra]
        proc = subprocess.run([bwrap, *flags, "--ro-bind", "/", "/", "true"], capture_output=True,
                              text=True, timeout=30)
        if proc.returncode == 0:
            if not extra:
                log.warning("bwrap cannot --disable-userns here (%s); sandboxing without it", error)
            return tuple(flags)
        error = proc.stderr.strip()
    raise SandboxUnavailable(
        f"bubblewrap is installed but cannot build its sandbox here: {error} (user namespaces "
        "may be disabled: sysctl kernel.unprivileged_userns_clone=1, or run the grader as root)")


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for etc in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives"):
        if os.path.exists(etc):
            args += ["--ro-bind", etc, etc]
    return args


def _python_binds() -> list[str]:
    """The interpreter and its packages, wherever they live (a venv, pyenv, /opt)."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.realpath(sys.prefix),
             os.path.dirname(os.path.realpath(sys.executable))}
    paths |= {p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p}
    args = []
    for path in sorted(paths):
        if os.path.isdir(path) and not path.startswith("/usr/"):
            args += ["--ro-bind", path, path]
    return args


def _gpu_binds(gpu_index: int) -> list[str]:
    nodes = [f"/dev/nvidia{gpu_index}", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    args = []
    for node in nodes:
        if os.path.exists(node):
            args += ["--dev-bind", node, node]
    # CUDA reads device topology from /sys; it holds no secrets of ours
    args += ["--ro-bind", "/sys", "/sys"]
    return args


NO_PROCESS_CAP = (
    "the grader has no way to cap a job's processes here, and it runs no submission without "
    "one: it cannot make a job cgroup with the pids controller ({why}), and it is not root, so "
    "it cannot run each job as a uid of its own. Run it as root (each runner then gets a uid "
    "of its own, held by RLIMIT_NPROC), or delegate a cgroup v2 subtree with the memory and "
    "pids controllers to it (systemd: Delegate=yes). --no-sandbox grades your own code only."
)


def _process_cap(launcher: "BwrapLauncher") -> JobUids | None:
    """How a job's processes are capped here: None for a job cgroup (pids.max), else the
    job uids (graders/isolation/jobuids.py), proven to run the sandbox. Refuses where neither
    works."""
    if cgroups_usable():
        return None
    if not jobuids.needed():
        why = ("GRADERS_NO_CGROUP is set" if cgroups_disabled()
               else "no writable cgroup with the memory and pids controllers")
        raise SandboxUnavailable(NO_PROCESS_CAP.format(why=why))
    uids = JobUids()
    _probe_as_job_uid(launcher, uids)
    return uids


def _probe_as_job_uid(launcher: "BwrapLauncher", uids: JobUids) -> None:
    """Start the sandbox as a job uid once, with the real binds, and import what the runner
    imports first: the uid must be able to read the Python environment and the graders."""

    uid = uids.acquire()
    try:
        with tempfile.TemporaryDirectory(prefix="graders-probe-") as tmp:
            os.chmod(tmp, 0o755)
            gpu = launcher.gpu_index is not None and os.path.exists("/dev/nvidiactl")
            job = RunnerJob(python=sys.executable, device="cuda" if gpu else "cpu", fds=(0, 1),
                            workdir=Path(tmp),
                            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
            job.inbox.mkdir()
            os.chmod(job.inbox, 0o755)
            args, env = launcher.sandbox_args(job)
            # on a GPU the uid must also open the device nodes (CUDA would fail later,
            # in every grading, with a far vaguer error)
            nodes = [n for n in ("/dev/nvidiactl", f"/dev/nvidia{launcher.gpu_index}",
                                 "/dev/nvidia-uvm") if gpu and os.path.exists(n)]
            probe = [sys.executable, "-I", "-c", f"import os, sys; sys.path.insert(0, "
                     f"{SANDBOX_ROOT!r}); import numpy, graders.shared.protocol; "
                     f"[os.close(os.open(n, os.O_RDWR)) for n in {nodes!r}]"]
            proc = subprocess.run([sys.executable, "-I", "-c", _SHIM, "0", "", str(uid),
                                   *args, *probe], env=env, capture_output=True, text=True,
                                  timeout=120, cwd=tmp)
    finally:
        uids.release(uid)
    if proc.returncode != 0:
        raise SandboxUnavailable(
            f"the sandbox does not start as a job uid ({uid}): {proc.stderr.strip()[-600:]}. "
            "The grader runs each job as a uid of its own where it has no job cgroup; that uid "
            "must be able to create user namespaces, read the graders' Python environment "
            "and repository (chmod o+rx on their folders) and, on a GPU, open /dev/nvidia* "
            "(mode 0666); or give the grader a cgroup with the pids controller")


class BwrapLauncher:
    """Runs the runner inside bubblewrap. ``gpu_index`` None means no GPU at all."""

    sandboxed = True

    def __init__(self, gpu_index: int | None = None, limits: Limits | None = None):
        self.bwrap = find_bwrap()
        self.flags = _probe(self.bwrap)
        self.gpu_index = gpu_index
        self.limits = limits or Limits()
        self.seed_cache: Path | None = None
        # None: job cgroups cap processes; else each runner runs as a uid of its own
        self.job_uids: JobUids | None = _process_cap(self)

    def command(self, job: RunnerJob) -> tuple[list[str], dict[str, str]]:
        args, env = self.sandbox_args(job)
        bytecode = SANDBOX_BYTECODE if job.bytecode else None
        return args + job.runner_argv(SANDBOX_ROOT, bytecode), env

    def sandbox_args(self, job: RunnerJob) -> tuple[list[str], dict[str, str]]:
        """The bubblewrap command up to the program it runs, and its environment."""
        from graders.shared.paths import REPO_ROOT

        # torch and triton look up the user's name: give uid 65534 one, and nothing more
        (Path(job.workdir) / "passwd").write_text("nobody:x:65534:65534:nobody:/tmp:/usr/sbin/nologin\n")
        (Path(job.workdir) / "group").write_text("nogroup:x:65534:\n")
        # the private /tmp first: binds after it stay visible even when the Python
        # environment itself lives under the host's /tmp (a CI clone, say)
        args = [self.bwrap, *self.flags, "--proc", "/proc", "--dev", "/dev",
                "--size", str(self.limits.tmp_bytes), "--tmpfs", SANDBOX_TMP,
                *_system_binds(), *_python_binds(),
                "--ro-bind", str(Path(job.workdir) / "passwd"), "/etc/passwd",
                "--ro-bind", str(Path(job.workdir) / "group"), "/etc/group",
                "--ro-bind", str(REPO_ROOT / "graders"), f"{SANDBOX_ROOT}/graders",
                "--ro-bind", str(job.inbox), SANDBOX_INBOX,
                "--chdir", SANDBOX_TMP]
        env = dict(job.env, HOME=SANDBOX_TMP, TMPDIR=SANDBOX_TMP,
                   TRITON_CACHE_DIR=f"{SANDBOX_TMP}/.triton")
        if self.gpu_index is not None and job.device != "cpu":
            args += _gpu_binds(self.gpu_index)
            env["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices(self.gpu_index)
            env.update(cap_env(self.limits.gpu_memory_bytes))
        else:
            env["CUDA_VISIBLE_DEVICES"] = ""
        if self.seed_cache is not None:
            args += ["--ro-bind", str(self.seed_cache), SANDBOX_SEED_CACHE]
            env[SEED_CACHE_ENV] = SANDBOX_SEED_CACHE
        if job.bytecode is not None:  # the grader's, read by every runner: never writable
            args += ["--ro-bind", str(job.bytecode), SANDBOX_BYTECODE]
        return args, env

    def inbox_path(self, job: RunnerJob, filename: str) -> str:
        return f"{SANDBOX_INBOX}/{filename}"


class DirectLauncher:
    """No sandbox: a separate process in its own session, with the same limits.

    For grading your own code from the CLI (``--no-sandbox``); the server never uses it.
    """

    sandboxed = False

    def __init__(self, gpu_index: int | None = None, limits: Limits | None = None):
        self.gpu_index = gpu_index
        self.limits = limits or Limits()
        self.seed_cache: Path | None = None

    def command(self, job: RunnerJob) -> tuple[list[str], dict[str, str]]:
        from graders.shared.paths import REPO_ROOT

        env = dict(job.env, HOME=str(job.workdir), TMPDIR=str(job.workdir),
                   TRITON_CACHE_DIR=str(Path(job.workdir) / ".triton"))
        if job.device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
        elif self.gpu_index is not None:
            env["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices(self.gpu_index)
            env.update(cap_env(self.limits.gpu_memory_bytes))
        if self.seed_cache is not None:
            env[SEED_CACHE_ENV] = str(self.seed_cache)
        # never the grader's bytecode folder: this runner runs as the grader's own user and
        # could write into it what every sandboxed runner then imports
        return job.runner_argv(str(REPO_ROOT)), env

    def inbox_path(self, job: RunnerJob, filename: str) -> str:
        return str(job.inbox / filename)


def default_launcher(sandbox: bool = True, gpu_index: int | None = 0,
                     limits: Limits | None = None):
    return (BwrapLauncher if sandbox else DirectLauncher)(gpu_index=gpu_index, limits=limits)
