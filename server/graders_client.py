"""The server's only way to the graders: their command line and its JSON.

``python -m graders list --json`` describes the exercises; ``python -m graders
grade EXERCISE FILE --json`` grades one file in its sandbox. Nothing from
``graders`` is imported here, so the web process holds no torch, no triton and
no student code.
"""

from __future__ import annotations

import ctypes
import json
import os
import shlex
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .settings import REPO_ROOT, Settings

SUFFIX = {"triton": ".py", "hip": ".hip"}
LANGUAGE_BY_SUFFIX = {".py": "triton", ".cpp": "hip", ".hip": "hip"}


@dataclass(frozen=True)
class ExerciseInfo:
    name: str
    title: str
    summary: str
    languages: list[str]
    entry_points: list[str]
    deadline: str | None
    statement: str
    skeletons: dict[str, dict[str, str]]
    checks: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class GradeOutcome:
    result: dict[str, Any] | None  # the grader's JSON, when it produced one
    fault: str = ""  # why there is no result (a grader fault, never the student's)
    slot_healthy: bool = True
    slot_problem: str = ""


def _die_with_parent() -> None:
    """A grader outlives no server: if the server is killed, so is the grader."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class GradersClient:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.base = (shlex.split(settings.grader_command) if settings.grader_command
                     else [settings.grader_python, "-m", "graders"])

    def exercises(self) -> dict[str, ExerciseInfo]:
        proc = subprocess.run(self.base + ["list", "--json"], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"`graders list --json` failed: {proc.stderr.strip()[-2000:]}")
        return {e["name"]: ExerciseInfo(**e) for e in json.loads(proc.stdout)["exercises"]}

    def grade(self, exercise: str, language: str, source: str, device: str,
              gpu_index: int | None) -> GradeOutcome:
        with tempfile.TemporaryDirectory(prefix="autograder-job-") as tmp:
            path = Path(tmp) / f"submission{SUFFIX.get(language, '.txt')}"
            path.write_text(source)
            os.chmod(tmp, 0o755)
            os.chmod(path, 0o644)  # readable by the sandbox's uid
            argv = self.base + ["grade", exercise, str(path), "--json", "--device", device]
            if gpu_index is not None:
                argv += ["--gpu-index", str(gpu_index)]
            try:
                proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True,
                                        start_new_session=True, preexec_fn=_die_with_parent)
            except OSError as exc:
                return GradeOutcome(None, f"could not start the grader: {exc}")
            try:
                out, err = proc.communicate(timeout=self.settings.grader_timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                return GradeOutcome(None, f"the grader ran past {self.settings.grader_timeout_s} s")
        try:
            result = json.loads(out)
            assert isinstance(result, dict) and "verdict" in result and "score" in result
        except (ValueError, AssertionError):
            return GradeOutcome(None, f"the grader exited {proc.returncode} without a result: "
                                      f"{err.strip()[-1000:]}")
        slot = result.pop("slot", {}) or {}
        return GradeOutcome(result, slot_healthy=bool(slot.get("healthy", True)),
                            slot_problem=str(slot.get("problem", "")))
