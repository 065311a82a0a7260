"""``python -m graders worker``: one grading slot that lives between jobs.

The one-shot ``grade`` command starts its runners when it starts, and that costs
seconds per grading (sandbox, torch, CUDA, the known-answer kernel). A worker keeps a
slot and its warm runners (graders.pool) and takes jobs one after another, as JSON
lines on its standard input; it answers each with one JSON line on standard output:

    in:  {"id": 7, "exercise": "safe_softmax", "file": "/path/submission.py", "timing": true}
    out: {"id": 7, "result": {...the grade --json object...}, "slot": {"healthy": true, ...}}

It prints ``{"ready": true, ...}`` once its first runners are warm, and exits at the
end of its input, or once its slot is out of service (after answering). Logs go to
standard error. The server keeps one worker per slot (server/graders_client.py); it
stays the only reader of these lines, and never imports this package.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any, TextIO

from .checker import default_lanes, resolve_device
from .registry import get_exercise
from .slots import Slot
from .spec import SpecError
from .vocabulary import Device

log = logging.getLogger(__name__)


def default_warm(device: Device) -> int:
    """Warm runners per slot: two gradings' lanes and a spare (graders.checker), so that a
    grading that follows another at once still finds its runners ready while the first
    one's replacements start (measured on the H200: with one grading's worth, every
    second grading of a burst waited ~10 s for runners)."""
    return 2 * default_lanes(device) + 1


def _answer(out: TextIO, payload: dict[str, Any]) -> None:
    out.write(json.dumps(payload) + "\n")
    out.flush()


def handle(slot: Slot, job: dict[str, Any]) -> dict[str, Any]:
    """One job line to one answer line; a bad job is answered, never fatal."""
    job_id = job.get("id")
    try:
        exercise = get_exercise(str(job["exercise"]))
        path = Path(str(job["file"]))
        if not path.is_file():
            raise ValueError(f"{path} is not a file")
    except (KeyError, ValueError, SpecError) as exc:
        return {"id": job_id, "result": None, "error": f"bad job: {exc}"}
    result = slot.grade(exercise, path, performance=bool(job.get("timing", True)),
                        timeout_s=job.get("timeout_s"))
    return {"id": job_id, "result": result.to_json(),
            "slot": {"healthy": slot.healthy, "problem": slot.problem}}


def run_worker(device: Device, gpu_index: int, sandbox: bool, warm: int | None,
               stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s worker %(levelname)s %(message)s")
    device = resolve_device(device)
    slot = Slot(f"worker-{device.value}-{gpu_index}", device, gpu_index=gpu_index,
                sandbox=sandbox, warm=default_warm(device) if warm is None else warm)
    _answer(stdout, {"ready": True, "device": device.value, "warm": slot.pool.ready_count})
    try:
        for line in stdin:
            if not line.strip():
                continue
            try:
                job = json.loads(line)
                if not isinstance(job, dict):
                    raise ValueError("not an object")
            except ValueError as exc:
                _answer(stdout, {"id": None, "result": None, "error": f"bad job line: {exc}"})
                continue
            _answer(stdout, handle(slot, job))
            if not slot.healthy:
                log.error("slot out of service: %s", slot.problem)
                return 1
    finally:
        slot.close()
    return 0
