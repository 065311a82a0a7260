"""``python -m graders worker``: one grading slot that lives between jobs.

The one-shot ``grade`` command starts its runners when it starts, and that costs
seconds per grading (sandbox, torch, CUDA, the known-answer kernel). A worker keeps a
slot and its warm runners (graders.isolation.pool) and takes jobs one after another, as JSON
lines on its standard input; it answers each with one JSON line on standard output:

    in:  {"id": 7, "exercise": "some_exercise", "file": "/path/submission.py", "timing": true,
          "params": {"rows": 3072}, "host_gradings": 4}   (params: the exercise's per-student
          values, if any; host_gradings: the gradings the sender expects the host to run as
          this one starts, itself included, from its queue; lanes are sized by the larger
          of it and the slots the worker sees busy: graders/service/host_load.py)
    out: {"id": 7, "check": {"name": "random_rows", "passed": true, ...}}   (one per check,
         as it ends: progress for the student's page)
    out: {"id": 7, "result": {...the grade --json object...}, "slot": {"healthy": true, ...}}

A job is answered before its last runners have exited (~0.2 s each on a GPU); the worker
then waits for them, judges its slot's health from what they left, and says so before it
reads the next job:

    out: {"id": 7, "settled": true, "slot": {"healthy": true, "problem": ""}}

A slot found unfit exits 1 after that line (its warm runners closed first).

It prints ``{"ready": true, ...}`` once its first runner is warm (``{"ready": false,
"problem": ...}`` and exit 3 if none can be), and exits at the end of its input, or once
its slot is out of service. Logs go to standard error. The server keeps
one worker per slot, and a remote worker one per GPU, through graders/service/worker_client.py
(docs/experiments/ drives workers directly to measure them).

``--share-gpu`` (or ``GRADERS_SHARE_GPU=1`` in its environment): another worker grades on
the same GPU (graders.service.slots, ``shares_gpu``); the two keep each other off their timings
through the GPU's lock file in ``GRADERS_GPU_LOCK_DIR`` (graders.isolation.pool.GpuGate).

Each runner on a GPU has a GPU memory cap (graders/isolation/gpu_memory.py): sized from the
GPU's memory and ``--gpu-slots`` (``GRADERS_GPU_SLOTS``: how many slots grade on this GPU,
this one included; 2 when it shares its GPU and says no more), or given in MiB with
``--gpu-memory-cap-mib`` (``GRADERS_GPU_MEMORY_CAP_MIB``; 0: no cap).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any, Callable, TextIO

from graders.engine.plan import default_lanes, grading_device
from graders.engine.registry import get_exercise
from graders.engine.spec import SpecError
from graders.isolation import gpu_memory
from graders.isolation.limits import Limits
from graders.service.slots import Slot
from graders.shared.vocabulary import Device

log = logging.getLogger(__name__)


def default_warm(device: Device, lanes: int | None = None) -> int:
    """Warm runners per slot. On a GPU: two gradings' lanes and a spare (graders.engine.lanes),
    so that a grading that follows another at once still finds its runners ready while the
    first one's replacements start (measured on the H200: with one grading's worth, every
    second grading of a burst waited ~10 s for runners, which start in 6-13 s there).
    On the CPU a runner starts in ~1.5 s and a reference grades in 2-3 s, so a replacement
    is ready before the slot's next grading begins: one grading's lanes and a spare (6
    references back to back through `graders worker --device cpu`, each found its runner
    ready with 1, 2 or 3 kept warm; 2 is ready 0.5 s sooner than 3 and holds a torch less)."""
    lanes = lanes or default_lanes(device)
    return 2 * lanes + 1 if device is Device.CUDA else lanes + 1


def _answer(out: TextIO, payload: dict[str, Any]) -> None:
    out.write(json.dumps(payload) + "\n")
    out.flush()


def handle(slot: Slot, job: dict[str, Any],
           progress: Callable[[dict[str, Any]], None] = lambda line: None,
           lanes: int | None = None) -> dict[str, Any]:
    """One job line to one answer line; a bad job is answered, never fatal. Before the
    answer, a ``{"id", "check"}`` line for each check as it ends (its name, passed, points:
    what a student may see while the rest runs)."""
    job_id = job.get("id")
    try:
        exercise = get_exercise(str(job["exercise"]))
        path = Path(str(job["file"]))
        if not path.is_file():
            raise ValueError(f"{path} is not a file")
        params = exercise.resolve_params(job.get("params"))  # a ParamError is a ValueError
        host_gradings = _host_gradings(job.get("host_gradings"))
    except (KeyError, ValueError, SpecError) as exc:
        return {"id": job_id, "result": None, "error": f"bad job: {exc}"}
    def on_check(check) -> None:
        progress({"id": job_id, "check": {"name": check.name, "passed": check.passed,
                                          "points": check.points,
                                          "max_points": check.max_points}})

    result = slot.grade(exercise, path, performance=bool(job.get("timing", True)),
                        timeout_s=job.get("timeout_s"), on_check=on_check, params=params,
                        lanes=lanes, host_gradings=host_gradings, wait_for_exit=False)
    return {"id": job_id, "result": result.to_json(),
            "slot": {"healthy": slot.healthy, "problem": slot.problem}}


def _host_gradings(value: Any) -> int | None:
    """A job's ``host_gradings``: a whole number of at least 1, else None (the slot counts
    alone). A hint for the lanes, not part of the job: a bad one is logged, never refused,
    since a refused job is a grader fault the server tries again and then gives up on."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        log.warning("a job's host_gradings %r is not a whole number of at least 1: ignored",
                    value)
        return None
    return value


def share_gpu_from_env() -> bool:
    """``GRADERS_SHARE_GPU=1``: how a remote worker's service says it shares its GPU."""
    return os.environ.get("GRADERS_SHARE_GPU", "").strip().lower() in ("1", "true", "yes")


def _int_from_env(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    try:
        return int(value) if value else None
    except ValueError:
        log.warning("%s=%r is not a whole number; ignored", name, value)
        return None


def gpu_slots(share_gpu: bool, given: int | None = None) -> int:
    """The slots grading on this worker's GPU, this one included: as given (``--gpu-slots``,
    else ``GRADERS_GPU_SLOTS``), else 2 for a shared GPU and 1 for one of its own."""
    given = given if given is not None else _int_from_env("GRADERS_GPU_SLOTS")
    return max(1, given) if given is not None else (2 if share_gpu else 1)


def gpu_memory_cap(device: Device, gpu_index: int | None, slots: int, warm: int,
                   cap_mib: int | None = None, total: int | None = None,
                   lanes: int | None = None) -> int:
    """One runner's GPU memory cap in bytes (0: none). Given in MiB (``--gpu-memory-cap-mib``,
    else ``GRADERS_GPU_MEMORY_CAP_MIB``; 0 for none), else sized from the GPU's memory
    (``total``, else what the driver reports) and its slots: gpu_memory.size_cap."""
    if device is not Device.CUDA or gpu_index is None:
        return 0
    cap_mib = cap_mib if cap_mib is not None else _int_from_env("GRADERS_GPU_MEMORY_CAP_MIB")
    if cap_mib is not None:
        return max(0, cap_mib) * gpu_memory.MIB
    total = total if total is not None else gpu_memory.total_bytes(gpu_index)
    if not total:
        log.warning("GPU %s reports no memory size (no nvidia-smi?): its runners have no GPU "
                    "memory cap; set GRADERS_GPU_MEMORY_CAP_MIB", gpu_index)
        return 0
    return gpu_memory.size_cap(total, slots, lanes or default_lanes(device), warm)


def run_worker(device: Device, gpu_index: int, sandbox: bool, warm: int | None,
               stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout,
               share_gpu: bool = False, gpu_slots_given: int | None = None,
               gpu_memory_cap_mib: int | None = None, lanes: int | None = None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s worker %(levelname)s %(message)s")
    device = grading_device(device)
    share_gpu = share_gpu or share_gpu_from_env()
    lanes = lanes if lanes is not None else _int_from_env("GRADERS_LANES")
    lanes = max(1, lanes) if lanes is not None else None
    warm = default_warm(device, lanes) if warm is None else warm
    cap = gpu_memory_cap(device, gpu_index, gpu_slots(share_gpu, gpu_slots_given), warm,
                         gpu_memory_cap_mib, lanes=lanes)
    if cap:
        log.info("GPU %s: each runner's GPU memory cap is %s (%s while it times)", gpu_index,
                 gpu_memory.describe(cap), gpu_memory.describe(gpu_memory.timing_cap(cap)))
    try:
        slot = Slot(f"worker-{device.value}-{gpu_index}{'-shared' if share_gpu else ''}",
                    device, gpu_index=gpu_index, sandbox=sandbox, limits=Limits(
                        gpu_memory_bytes=cap), warm=warm, shares_gpu=share_gpu)
    except OSError as exc:  # a shared GPU's lock file (GRADERS_GPU_LOCK_DIR) cannot be made
        log.error("the slot could not start: %s", exc)
        _answer(stdout, {"ready": False, "device": device.value,
                         "problem": f"the slot could not start: {exc}"})
        return 3
    # ready only once a runner has proved itself: a worker whose runners cannot start (no
    # GPU, a broken toolchain) said "ready" and then failed every job in seconds (issue 27);
    # and only once every warm runner is ready, so that the first grading finds its lanes'
    # runners as every later one does (issue 43)
    problem = slot.pool.wait_filled() if slot.pool.warm else ""
    if problem:
        log.error("no runner could be made ready: %s", problem)
        _answer(stdout, {"ready": False, "device": device.value, "problem": problem})
        slot.close()
        return 3
    _answer(stdout, {"ready": True, "device": device.value, "warm": slot.pool.ready_count})
    lock = threading.Lock()  # a job's checks end on its lanes' threads

    def answer(line: dict[str, Any]) -> None:
        with lock:
            _answer(stdout, line)

    try:
        for line in stdin:
            if not line.strip():
                continue
            try:
                job = json.loads(line)
                if not isinstance(job, dict):
                    raise ValueError("not an object")
            except ValueError as exc:
                answer({"id": None, "result": None, "error": f"bad job line: {exc}"})
                continue
            answered = handle(slot, job, answer, lanes)
            answer(answered)
            # the job's runners exit after its answer, and the slot is judged by what they
            # left before it reads another job: the client waits for this line before it
            # sends one (graders.service.worker_client.SlotWorker.settle)
            fit = slot.finish_job()
            answer({"id": answered["id"], "settled": True,
                    "slot": {"healthy": fit, "problem": slot.problem}})
            if not fit:
                log.error("slot out of service: %s", slot.problem)
                return 1
    finally:
        slot.close()
    return 0
