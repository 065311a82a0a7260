"""A grading slot: one device (the CPU interpreter or one GPU) taking one job at a time.

A slot keeps ``warm`` runners ready (graders.isolation.pool), so a grading starts at once;
the CLI's one-shot ``grade`` keeps none. After each job the slot checks itself: no
process of the job left alive, and on a GPU its memory back to where it was when
the slot's warm runners were last all in place. A slot that fails the check is
taken out of service with a log line; the pool (the server's queue) stops giving
it jobs.

A slot may share its GPU with other slots (``shares_gpu``: one worker process each, the
server's ``SLOTS_PER_GPU``): their checks run side by side, and the GPU's gate
(graders.isolation.pool.GpuGate, a lock file per GPU) keeps every timing on it alone.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from pathlib import Path

from graders.engine.checker import Grader
from graders.engine.results import GradeResult
from graders.engine.spec import ExerciseSpec
from graders.isolation.launch import CloseReport
from graders.isolation.pool import GpuGate, RunnerPool, gpu_lock_dir
from graders.isolation.sandbox import Limits, default_launcher
from graders.service.host_load import BusyMarks, host_cores, lanes_for
from graders.shared.vocabulary import Device

log = logging.getLogger(__name__)
GPU_MEMORY_SLACK_MIB = 256
GPU_MEMORY_SETTLE_S = 10.0
GPU_BUSY_PERCENT = 20  # utilization left on an idle slot's GPU above this means a stuck kernel


class SlotOutOfService(Exception):
    pass


def _smi(index: int, field: str) -> int | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, f"--query-gpu={field}", "--format=csv,noheader,nounits",
                              "-i", str(index)], capture_output=True, text=True, timeout=20)
        return int(out.stdout.strip().splitlines()[0])
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return None


def gpu_memory_used_mib(index: int) -> int | None:
    return _smi(index, "memory.used")


def gpu_utilization_percent(index: int) -> int | None:
    return _smi(index, "utilization.gpu")


class Slot:
    _finishing: Grader | None = None  # the job answered, its runners not yet waited for

    def __init__(self, name: str, device: Device, gpu_index: int | None = None,
                 sandbox: bool = True, limits: Limits | None = None, warm: int = 0,
                 shares_gpu: bool = False):
        if device is Device.AUTO:
            raise ValueError("a slot has a definite device")
        self.name = name
        self.device = device
        self.gpu_index = gpu_index if device is Device.CUDA else None
        self.shares_gpu = shares_gpu and self.gpu_index is not None
        self.launcher = default_launcher(sandbox=sandbox, gpu_index=self.gpu_index, limits=limits)
        # sharing needs the gate across processes: without its lock file, refuse to start
        gate = GpuGate.for_gpu(self.gpu_index, required=True) if self.shares_gpu else None
        self.pool = RunnerPool(device, self.launcher, warm=warm, gate=gate)
        # this slot's busy mark beside every other slot's of the host (the gates' folder)
        self.marks = BusyMarks(gpu_lock_dir(), name)
        self.healthy = True
        self.problem = ""
        self.gpu_baseline_mib: int | None = None
        self.pool.fill()
        self._settle()

    def _settle(self) -> None:
        """Wait for the warm runners, then take the GPU's memory as the baseline: they
        hold their CUDA contexts, and after each job as many of them are waiting again."""
        self.pool.wait_idle()
        if self.gpu_index is not None and not self.shares_gpu:
            self.gpu_baseline_mib = gpu_memory_used_mib(self.gpu_index)

    def grade(self, exercise: ExerciseSpec, submission: Path, lanes: int | None = None,
              host_gradings: int | None = None, wait_for_exit: bool = True,
              **kwargs) -> GradeResult:
        """One job on this slot. ``lanes`` None: on a GPU, as many as the host's cores give
        each grading running now (graders.service.host_load); on the CPU, the default.
        ``host_gradings``: the gradings the caller expects on the host as this one starts
        (its queue knows a burst before the other slots have marked themselves busy).
        ``wait_for_exit`` False: the result as soon as it is known, the job's last runners
        possibly still exiting (~0.2 s each on a GPU): the caller answers its student, then
        calls :meth:`finish_job` (the next job calls it first in any case)."""
        self.finish_job()
        if not self.healthy:
            raise SlotOutOfService(f"slot {self.name} is out of service: {self.problem}")
        with self.marks.busy() as marked:
            busy = max(marked, host_gradings or 0)
            lanes_now = None
            if lanes is None and self.device is Device.CUDA:
                cores = host_cores()
                lanes = lanes_for(busy, cores)
                # between parts, the host counted again: a grading that started as the
                # host's only one gives back the lanes a burst arriving after it needs
                lanes_now = lambda: lanes_for(self.marks.count(), cores)  # noqa: E731
            grader = Grader(exercise, submission, self.device, pool=self.pool, lanes=lanes,
                            lanes_now=lanes_now, **kwargs)
            self._finishing = grader
            result = grader.answer()
        result.phases["lanes"] = grader.grading.lanes
        result.phases["host_gradings"] = busy
        result.phases["host_marked"] = marked  # the slots it saw busy itself
        if wait_for_exit:
            self.finish_job(result)
        return result

    def finish_job(self, result: GradeResult | None = None) -> bool:
        """The last job's runners gone, and this slot's health judged from what they left;
        whether it is healthy. ``result``: that job's, its output made whole and the waits
        noted (``close_s``, ``health_s``). No waiting for the pool's replacements: while
        some are still starting, the GPU holds less than the baseline (taken with all of
        them in place), never more."""
        grader, self._finishing = self._finishing, None
        if grader is None:
            return self.healthy
        report = grader.finish(result)
        checking = time.monotonic()
        self.check_health(report)
        if result is not None:
            result.phases["health_s"] = round(time.monotonic() - checking, 3)
        return self.healthy

    def close(self) -> None:
        self.finish_job()
        self.pool.close()
        self.marks.remove()

    def check_health(self, report: CloseReport | None) -> bool:
        problems = []
        if report is not None and not report.all_killed:
            problems.append(f"{report.leftover_processes} processes of the last job survive")
        # The GPU-wide figures (memory used, utilization) are the whole GPU's: on a shared
        # GPU they include the other slots' runners and running jobs, so they would take a
        # healthy slot out of service. A shared slot has no baseline and skips them (what
        # they catch, a killed job's kernel still busy or memory not freed, goes unseen
        # there); the job's surviving processes are still checked above.
        if self.gpu_baseline_mib is not None and not self.shares_gpu:
            used = self._settled_gpu_memory()
            if used is not None and used > self.gpu_baseline_mib + GPU_MEMORY_SLACK_MIB:
                problems.append(f"GPU {self.gpu_index} holds {used} MiB, "
                                f"{used - self.gpu_baseline_mib} MiB above its baseline")
            busy = self._settled_gpu_utilization()
            if busy is not None and busy > GPU_BUSY_PERCENT:
                # seen on the H200: a killed job's endless kernel can keep the GPU busy
                problems.append(f"GPU {self.gpu_index} is still {busy}% busy with no job on it")
        if problems:
            self.healthy = False
            self.problem = "; ".join(problems)
            log.error("slot %s taken out of service: %s", self.name, self.problem)
        return self.healthy

    def _settled_gpu_utilization(self) -> int | None:
        deadline = time.monotonic() + GPU_MEMORY_SETTLE_S
        while True:
            busy = gpu_utilization_percent(self.gpu_index)
            if busy is None or busy <= GPU_BUSY_PERCENT or time.monotonic() > deadline:
                return busy
            time.sleep(0.5)

    def _settled_gpu_memory(self) -> int | None:
        """The driver frees a dead context's memory shortly after; give it a few seconds."""
        deadline = time.monotonic() + GPU_MEMORY_SETTLE_S
        while True:
            used = gpu_memory_used_mib(self.gpu_index)
            if used is None or used <= self.gpu_baseline_mib + GPU_MEMORY_SLACK_MIB \
                    or time.monotonic() > deadline:
                return used
            time.sleep(0.5)
