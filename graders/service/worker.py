"""``python -m graders worker``: one grading slot that lives between jobs.

The one-shot ``grade`` command starts its runners when it starts, and that costs
seconds per grading (sandbox, torch, CUDA, the known-answer kernel). A worker keeps a
slot and its warm runners (graders.isolation.pool) and takes jobs one after another, as JSON
lines on its standard input; it answers each with one JSON line on standard output:

    in:  {"id": 7, "exercise": "some_exercise", "file": "/path/submission.py", "timing": true,
          "params": {"rows": 3072}}   (params: the exercise's per-student values, if any)
    out: {"id": 7, "check": {"name": "random_rows", "passed": true, ...}}   (one per check,
         as it ends: progress for the student's page)
    out: {"id": 7, "result": {...the grade --json object...}, "slot": {"healthy": true, ...}}

It prints ``{"ready": true, ...}`` once its first runner is warm (``{"ready": false,
"problem": ...}`` and exit 3 if none can be), and exits at the end of its input, or once
its slot is out of service (after answering). Logs go to standard error. The server keeps
one worker per slot, and a remote worker one per GPU, through graders/service/worker_client.py,
the only reader of these lines.

``--share-gpu`` (or ``GRADERS_SHARE_GPU=1`` in its environment): another worker grades on
the same GPU (graders.service.slots, ``shares_gpu``); the two keep each other off their timings
through the GPU's lock file in ``GRADERS_GPU_LOCK_DIR`` (graders.isolation.pool.GpuGate).
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
from graders.service.slots import Slot
from graders.shared.vocabulary import Device

log = logging.getLogger(__name__)


def default_warm(device: Device) -> int:
    """Warm runners per slot: two gradings' lanes and a spare (graders.engine.lanes), so that
    a grading that follows another at once still finds its runners ready while the first
    one's replacements start (measured on the H200: with one grading's worth, every
    second grading of a burst waited ~10 s for runners)."""
    return 2 * default_lanes(device) + 1


def _answer(out: TextIO, payload: dict[str, Any]) -> None:
    out.write(json.dumps(payload) + "\n")
    out.flush()


def handle(slot: Slot, job: dict[str, Any],
           progress: Callable[[dict[str, Any]], None] = lambda line: None) -> dict[str, Any]:
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
    except (KeyError, ValueError, SpecError) as exc:
        return {"id": job_id, "result": None, "error": f"bad job: {exc}"}
    def on_check(check) -> None:
        progress({"id": job_id, "check": {"name": check.name, "passed": check.passed,
                                          "points": check.points,
                                          "max_points": check.max_points}})

    result = slot.grade(exercise, path, performance=bool(job.get("timing", True)),
                        timeout_s=job.get("timeout_s"), on_check=on_check, params=params)
    return {"id": job_id, "result": result.to_json(),
            "slot": {"healthy": slot.healthy, "problem": slot.problem}}


def share_gpu_from_env() -> bool:
    """``GRADERS_SHARE_GPU=1``: how a remote worker's service says it shares its GPU."""
    return os.environ.get("GRADERS_SHARE_GPU", "").strip().lower() in ("1", "true", "yes")


def run_worker(device: Device, gpu_index: int, sandbox: bool, warm: int | None,
               stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout,
               share_gpu: bool = False) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s worker %(levelname)s %(message)s")
    device = grading_device(device)
    share_gpu = share_gpu or share_gpu_from_env()
    try:
        slot = Slot(f"worker-{device.value}-{gpu_index}{'-shared' if share_gpu else ''}",
                    device, gpu_index=gpu_index, sandbox=sandbox,
                    warm=default_warm(device) if warm is None else warm, shares_gpu=share_gpu)
    except OSError as exc:  # a shared GPU's lock file (GRADERS_GPU_LOCK_DIR) cannot be made
        log.error("the slot could not start: %s", exc)
        _answer(stdout, {"ready": False, "device": device.value,
                         "problem": f"the slot could not start: {exc}"})
        return 3
    # ready only once a runner has proved itself: a worker whose runners cannot start (no
    # GPU, a broken toolchain) said "ready" and then failed every job in seconds (issue 27)
    problem = slot.pool.first_ready() if slot.pool.warm else ""
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
            answer(handle(slot, job, answer))
            if not slot.healthy:
                log.error("slot out of service: %s", slot.problem)
                return 1
    finally:
        slot.close()
    return 0
