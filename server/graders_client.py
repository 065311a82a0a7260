"""The server's only way to the graders: their command line and its JSON.

``python -m graders list --json`` describes the exercises. Grading goes to one
``python -m graders worker`` per slot, a process that lives between jobs and keeps
warm runners (sandbox up, torch and CUDA initialised), fed one JSON line per job;
``python -m graders grade EXERCISE FILE --json`` (one process per grading) is the
fallback where a stand-in grader command is configured. Nothing from ``graders`` is
imported here, so the web process holds no torch, no triton and no student code.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import queue
import shlex
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .settings import REPO_ROOT, Settings

log = logging.getLogger("server.graders")
SUFFIX = {"triton": ".py", "hip": ".hip"}
WORKER_START_S = 300.0  # a worker's first runners (CUDA contexts, kernels) are ready by then
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


def _write_submission(tmp: str, language: str, source: str) -> Path:
    path = Path(tmp) / f"submission{SUFFIX.get(language, '.txt')}"
    path.write_text(source)
    os.chmod(tmp, 0o755)
    os.chmod(path, 0o644)  # readable by the sandbox's uid
    return path


def _outcome(result: Any, why_not: str) -> GradeOutcome:
    if not (isinstance(result, dict) and "verdict" in result and "score" in result):
        return GradeOutcome(None, why_not)
    slot = result.pop("slot", {}) or {}
    return GradeOutcome(result, slot_healthy=bool(slot.get("healthy", True)),
                        slot_problem=str(slot.get("problem", "")))


class SlotWorker:
    """One ``graders worker`` process for one slot: started on first use, and again
    after it dies or overruns; a job that gets no answer is a grader fault (retried)."""

    def __init__(self, argv: list[str], timeout_s: float):
        self.argv, self.timeout_s = argv, timeout_s
        self.proc: subprocess.Popen | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.jobs = 0

    def _start(self) -> str:
        try:
            self.proc = subprocess.Popen(self.argv, cwd=REPO_ROOT, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True, bufsize=1,
                                         start_new_session=True, preexec_fn=_die_with_parent)
        except OSError as exc:
            return f"could not start the grader worker: {exc}"
        self.lines = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc, self.lines), daemon=True,
                         name="grader-worker-reader").start()
        first = self._next_line(WORKER_START_S)
        if first is None or not first.get("ready"):
            self.stop()
            return "the grader worker did not become ready"
        log.info("grader worker %d ready: %s", self.proc.pid, first)
        return ""

    @staticmethod
    def _read(proc: subprocess.Popen, lines: "queue.Queue[str | None]") -> None:
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)  # the worker is gone

    def _next_line(self, timeout_s: float) -> dict[str, Any] | None:
        try:
            line = self.lines.get(timeout=timeout_s)
        except queue.Empty:
            return None
        if line is None:
            return None
        try:
            value = json.loads(line)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def warm_up(self) -> str:
        if self.proc is None or self.proc.poll() is not None:
            return self._start()
        return ""

    def grade(self, exercise: str, path: Path) -> GradeOutcome:
        problem = self.warm_up()
        if problem:
            return GradeOutcome(None, problem)
        self.jobs += 1
        job_id = self.jobs
        try:
            self.proc.stdin.write(json.dumps({"id": job_id, "exercise": exercise,
                                              "file": str(path)}) + "\n")
            self.proc.stdin.flush()
        except OSError as exc:
            self.stop()
            return GradeOutcome(None, f"the grader worker is gone: {exc}")
        answer = self._next_line(self.timeout_s)
        if answer is None or answer.get("id") != job_id:
            self.stop()
            return GradeOutcome(None, f"the grader worker gave no answer within "
                                      f"{self.timeout_s:g} s")
        if answer.get("result") is None:
            return GradeOutcome(None, str(answer.get("error") or "no result"))
        result = answer["result"]
        if isinstance(result, dict):
            result["slot"] = answer.get("slot") or {}
        return _outcome(result, "the grader worker's answer holds no result")

    def stop(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            self.proc = None


class GradersClient:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.base = (shlex.split(settings.grader_command) if settings.grader_command
                     else [settings.grader_python, "-m", "graders"])
        # a stand-in grader command (the tests' fake) speaks only the one-shot CLI
        self.persistent = not settings.grader_command
        self._workers: dict[tuple[str, int | None], SlotWorker] = {}
        self._workers_lock = threading.Lock()

    def _worker(self, device: str, gpu_index: int | None) -> SlotWorker:
        with self._workers_lock:
            key = (device, gpu_index)
            if key not in self._workers:
                argv = self.base + ["worker", "--device", device]
                if gpu_index is not None:
                    argv += ["--gpu-index", str(gpu_index)]
                self._workers[key] = SlotWorker(argv, self.settings.grader_timeout_s)
            return self._workers[key]

    def warm_up(self, device: str, gpu_index: int | None) -> None:
        """Start a slot's worker ahead of its first job (its runners take seconds)."""
        if self.persistent:
            problem = self._worker(device, gpu_index).warm_up()
            if problem:
                log.error("slot %s/%s: %s", device, gpu_index, problem)

    def close(self) -> None:
        with self._workers_lock:
            workers, self._workers = list(self._workers.values()), {}
        for worker in workers:
            worker.stop()

    def exercises(self) -> dict[str, ExerciseInfo]:
        proc = subprocess.run(self.base + ["list", "--json"], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"`graders list --json` failed: {proc.stderr.strip()[-2000:]}")
        return {e["name"]: ExerciseInfo(**e) for e in json.loads(proc.stdout)["exercises"]}

    def grade(self, exercise: str, language: str, source: str, device: str,
              gpu_index: int | None) -> GradeOutcome:
        if self.persistent:
            with tempfile.TemporaryDirectory(prefix="autograder-job-") as tmp:
                path = _write_submission(tmp, language, source)
                return self._worker(device, gpu_index).grade(exercise, path)
        with tempfile.TemporaryDirectory(prefix="autograder-job-") as tmp:
            path = _write_submission(tmp, language, source)
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
        except ValueError:
            result = None
        return _outcome(result, f"the grader exited {proc.returncode} without a result: "
                                f"{err.strip()[-1000:]}")
