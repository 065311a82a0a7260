"""Each job's GPU memory cap (issue 43): how large it is, how it is watched, and whose
fault a CUDA out-of-memory is.

Several slots grade on one GPU (SLOTS_PER_GPU), each grading over a few runners. Without a
cap one job that allocates until the GPU is full (graders/bench/mix/hostile/memory_hog.py)
makes the checks of every job beside it run out of memory, and they failed `memory_limit`
for it. So every runner has a cap, in two layers:

- **in the runner** (graders/runner/memory_cap.py): before its first allocation the runner
  sets ``torch.cuda.set_per_process_memory_fraction`` to the cap its launcher passed
  (``graders.shared.protocol.GPU_MEMORY_CAP_ENV``); past it torch raises its out-of-memory
  error in that process alone, and the job fails `memory_limit`. The submission runs in that
  process and could lift the fraction, and Triton's and the driver's own allocations bypass
  torch's allocator: this layer is a courtesy to honest code, believed by nobody;
- **outside it** (``watch``, from the runner's process watch, graders/isolation/launch.py):
  while a call runs, what the driver reports for the job's processes (NVML in this process,
  graders/shared/nvml.py, or ``nvidia-smi --query-compute-apps``) is held to the cap plus a
  CUDA context; past it
  the runner is killed and the job fails `memory_limit`. This is the layer a submission
  cannot talk its way out of.

When a runner does report a CUDA out-of-memory, ``oom_verdict`` decides whose it is from
what the trusted side saw: a job within its cap on a GPU that was full is not at fault
(`grader_error`: the server grades it again, and it counts against nobody), anything else
is the job's own `memory_limit`, as before.

Sizing (graders/shared/gpu_sizing.py ``size_cap``; docs/deploy.md has the arithmetic): the
GPU's memory less a margin, less a CUDA context for every runner the GPU's slots keep alive,
less one timing's buffers (timing has the GPU alone, so one reserve serves all), shared by
every runner that checks at once (slots × lanes). The runner that times gets its cap plus
that reserve while it times.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Iterable, Mapping

# the sizes, shared with the server's and the worker's sizing of slots
from graders.shared.gpu_sizing import (CONTEXT_BYTES, GIB, MIB, driver_limit,  # noqa: F401
                                       size_cap, timing_cap)
from graders.shared import nvml
from graders.shared.protocol import GPU_MEMORY_CAP_ENV

log = logging.getLogger(__name__)

DEVICE_FULL_BYTES = 1 * GIB  # a GPU with less free than this is full
PEAK_SLACK_BYTES = 32 * MIB  # torch's reserved figure against its fraction: rounding only
SAMPLE_MAX_AGE_S = 0.5  # a sample of the driver's figures serves every runner this long
WATCH_EVERY_S = 1.0  # how often a running call's job is held to its cap
FULL_REMEMBERED_S = 10.0  # a GPU seen full this recently explains a job's out-of-memory


def cap_env(cap: int) -> dict[str, str]:
    """What tells a runner its cap (graders/runner/memory_cap.py sets it before its first
    allocation); nothing without one."""
    return {GPU_MEMORY_CAP_ENV: str(cap)} if cap else {}


# -- what the driver reports ------------------------------------------------------------
@dataclass(frozen=True)
class Sample:
    """One reading of the driver's figures for one GPU, at ``at`` (time.monotonic)."""

    at: float
    by_pid: Mapping[int, int] | None  # bytes per process; None: the driver would not say
    used: int | None = None
    total: int | None = None

    @property
    def free(self) -> int | None:
        return None if self.used is None or self.total is None else self.total - self.used


def _smi_rows(args: list[str]) -> list[list[str]] | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, *args, "--format=csv,noheader,nounits"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return [[v.strip() for v in line.split(",")] for line in out.stdout.splitlines()
            if line.strip()]


def parse_apps(rows: list[list[str]] | None) -> dict[int, int] | None:
    """``--query-compute-apps=pid,used_memory`` rows (MiB) as bytes per pid; a process the
    driver will not measure ("[N/A]", "[Not Supported]") is left out."""
    if rows is None:
        return None
    out: dict[int, int] = {}
    for row in rows:
        try:
            pid, mib = int(row[0]), int(row[1])
        except (IndexError, ValueError):
            continue
        out[pid] = out.get(pid, 0) + mib * MIB
    return out


def read_sample(gpu_index: int) -> Sample:
    """The driver's figures now: memory per process, and the GPU's used and total. Through
    NVML in this process where it loads (graders/shared/nvml.py: no process started per
    reading), else nvidia-smi."""
    now = time.monotonic()
    apps, whole = nvml.compute_apps(gpu_index), nvml.memory(gpu_index)
    if apps is not None and whole is not None:
        return Sample(now, apps, *whole)
    apps = parse_apps(_smi_rows([f"--id={gpu_index}", "--query-compute-apps=pid,used_memory"]))
    whole = _smi_rows([f"--id={gpu_index}", "--query-gpu=memory.used,memory.total"])
    used = total = None
    try:
        used, total = (int(v) * MIB for v in whole[0][:2])
    except (TypeError, IndexError, ValueError):
        pass
    return Sample(now, apps, used, total)


def total_bytes(gpu_index: int) -> int | None:
    """The GPU's memory as the driver reports it; None without NVML and nvidia-smi."""
    whole = nvml.memory(gpu_index)
    if whole is not None:
        return whole[1]
    rows = _smi_rows([f"--id={gpu_index}", "--query-gpu=memory.total"])
    try:
        return int(rows[0][0]) * MIB
    except (TypeError, IndexError, ValueError):
        return None


class _Samples:
    """One reading serves every runner of this process on a GPU for SAMPLE_MAX_AGE_S (each
    is a few NVML calls, or an nvidia-smi of ~0.1 s), and the last time each GPU was seen
    full is kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[int, Sample] = {}
        self.full_at: dict[int, float] = {}

    def get(self, gpu_index: int) -> Sample:
        with self._lock:
            last = self._last.get(gpu_index)
            if last is not None and time.monotonic() - last.at < SAMPLE_MAX_AGE_S:
                return last
            sample = read_sample(gpu_index)
            self._last[gpu_index] = sample
            if sample.free is not None and sample.free < DEVICE_FULL_BYTES:
                self.full_at[gpu_index] = sample.at
            return sample

    def full_recently(self, gpu_index: int, within_s: float = FULL_REMEMBERED_S) -> bool:
        with self._lock:
            at = self.full_at.get(gpu_index)
        return at is not None and time.monotonic() - at <= within_s

    def forget(self) -> None:
        with self._lock:
            self._last.clear()
            self.full_at.clear()


SAMPLES = _Samples()


# -- the decisions: pure, so that the CPU's tests hold them ---------------------------------
def job_usage(by_pid: Mapping[int, int] | None, pids: Iterable[int]) -> int | None:
    """What the driver reports for the job's processes together; None when it reports
    none of them (no figures, or pids it counts in another namespace: a container)."""
    if not by_pid:
        return None
    mine = [by_pid[p] for p in pids if p in by_pid]
    return sum(mine) if mine else None


def over_cap(used: int | None, cap: int) -> bool:
    """Whether a job the driver reports ``used`` bytes for is past its cap (a context
    allowed beside it). Unknown usage, or no cap, is never over."""
    return bool(cap) and used is not None and used > driver_limit(cap)


def oom_verdict(cap: int, own_used: int | None, device_full: bool) -> str:
    """Whose is a CUDA out-of-memory that a runner reported: ``"grader_error"`` when the
    trusted side saw the GPU full (now or within FULL_REMEMBERED_S) while the job itself
    was within its cap (the driver's figure for its processes), so another job took the
    memory; else ``"memory_limit"``, the job's own (over its cap, or asking for more than
    it; or nothing the trusted side saw clears it, as before the caps)."""
    if not cap or own_used is None or not device_full:
        return "memory_limit"
    return "memory_limit" if over_cap(own_used, cap) else "grader_error"


def describe(nbytes: int) -> str:
    return f"{nbytes / GIB:.1f} GiB"


def over_cap_message(used: int, limit: int, during: str) -> str:
    """``limit``: the cap as the figure ``used`` is counted against (the driver's: with a
    CUDA context, ``driver_limit``; torch's: the cap itself)."""
    return (f"the submission held {describe(used)} of GPU memory {during}, over its cap of "
            f"{describe(limit)} (one job's share of the GPU), and was stopped: free what you "
            "no longer need, and allocate only the outputs").replace("  ", " ")


def not_yours_message(during: str) -> str:
    return (f"the GPU ran out of memory {during} while this job was within its cap: another "
            "job held it; graded again").replace("  ", " ")
