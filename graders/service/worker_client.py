"""Driving ``python -m graders worker`` from another process: the server's local slots
(server/grading/graders_client.py) and a remote Celery worker (graders/service/remote_worker.py) both.

The standard library alone: the web process imports this without torch or triton.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import queue
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from graders.shared import gpu_sizing
from graders.shared.paths import REPO_ROOT

log = logging.getLogger("graders.service.worker_client")
SUFFIX = {"triton": ".py", "hip": ".hip"}
WORKER_START_S = 300.0  # a worker's first runners (CUDA contexts, kernels) are ready by then
# a job's runners exit and the slot's health is judged within this after its answer: a close
# waits at most 17 s for a runner, and the GPU's figures settle within 10 s each, an
# nvidia-smi that hangs given 20 s more (graders.service.slots)
WORKER_SETTLE_S = 120.0
WORKER_EXIT_S = 30.0  # a worker that found its slot unfit closes its warm runners, then exits


@dataclass(frozen=True)
class GradeOutcome:
    result: dict[str, Any] | None  # the grader's JSON, when it produced one
    fault: str = ""  # why there is no result (a grader fault, never the student's)
    slot_healthy: bool = True
    slot_problem: str = ""


def slots_per_gpu(cores: int, gpus: int, gpu_total_bytes: int | None) -> int:
    """How many worker processes (slots) to drive on each GPU of a host with ``cores`` CPU
    cores and ``gpus`` GPUs of ``gpu_total_bytes`` each (None: unknown): the graders' own
    sizing (graders/shared/gpu_sizing.py; docs/deploy.md has the arithmetic)."""
    return gpu_sizing.slots_per_gpu(cores, gpus, gpu_total_bytes)


def die_with_parent() -> None:
    """A grader outlives no server: if the server is killed, so is the grader."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def write_submission(tmp: str, language: str, source: str) -> Path:
    path = Path(tmp) / f"submission{SUFFIX.get(language, '.txt')}"
    path.write_text(source)
    os.chmod(tmp, 0o755)
    os.chmod(path, 0o644)  # readable by the sandbox's uid
    return path


def outcome_of(result: Any, why_not: str) -> GradeOutcome:
    if not (isinstance(result, dict) and "verdict" in result and "score" in result):
        return GradeOutcome(None, why_not)
    slot = result.pop("slot", {}) or {}
    return GradeOutcome(result, slot_healthy=bool(slot.get("healthy", True)),
                        slot_problem=str(slot.get("problem", "")))


class SlotWorker:
    """One ``graders worker`` process for one slot: started on first use, and again
    after it dies or overruns; a job that gets no answer is a grader fault (retried)."""

    def __init__(self, argv: list[str], timeout_s: float, env: dict[str, str] | None = None):
        """``env``: what the worker's environment adds to this process's (its GPU's slots
        and memory cap: graders/service/worker.py)."""
        self.argv, self.timeout_s, self.env = argv, timeout_s, dict(env or {})
        self.proc: subprocess.Popen | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.jobs = 0
        self._unsettled: int | None = None  # the job answered, its settled line not yet read

    def _start(self) -> str:
        try:
            self.proc = subprocess.Popen(self.argv, cwd=REPO_ROOT, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True, bufsize=1,
                                         start_new_session=True, preexec_fn=die_with_parent,
                                         env={**os.environ, **self.env} if self.env else None)
        except OSError as exc:
            return f"could not start the grader worker: {exc}"
        self.lines = queue.Queue()
        self._unsettled = None
        threading.Thread(target=self._read, args=(self.proc, self.lines), daemon=True,
                         name="grader-worker-reader").start()
        first = self._next_line(WORKER_START_S)
        if first is None or not first.get("ready"):
            self.stop()
            why = f": {first['problem']}" if first and first.get("problem") else ""
            return f"the grader worker did not become ready{why}"
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

    def grade(self, exercise: str, path: Path,
              on_check: "Callable[[dict[str, Any]], None] | None" = None,
              params: dict[str, Any] | None = None,
              host_gradings: int | None = None) -> GradeOutcome:
        """Grade one file; ``on_check`` hears of each check as it ends. ``params``: the
        exercise's per-student values (graders/engine/params.py), its defaults when None.
        ``host_gradings``: the gradings its host is about to run, this one included, as the
        caller knows them (its queue); the worker takes the larger of it and its own count."""
        fit, unfit = self.settle()
        if not fit:  # never sent to a slot found unfit: a grader fault, tried again elsewhere
            return GradeOutcome(None, f"the grader worker's slot went out of service after "
                                      f"its last job: {unfit}", slot_healthy=False,
                                slot_problem=unfit)
        problem = self.warm_up()
        if problem:
            return GradeOutcome(None, problem)
        self.jobs += 1
        job_id = self.jobs
        try:
            job = {"id": job_id, "exercise": exercise, "file": str(path)}
            if params:
                job["params"] = params
            if host_gradings is not None:
                job["host_gradings"] = host_gradings
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
        except OSError as exc:
            self.stop()
            return GradeOutcome(None, f"the grader worker is gone: {exc}")
        deadline = time.monotonic() + self.timeout_s
        while True:
            answer = self._next_line(max(deadline - time.monotonic(), 0.0))
            if answer is None or "check" not in answer or answer.get("id") != job_id:
                break
            if on_check is not None and isinstance(answer["check"], dict):
                try:
                    on_check(answer["check"])
                except Exception:  # noqa: BLE001 - progress is a courtesy, the grading goes on
                    log.exception("a progress listener failed")
        if answer is None or answer.get("id") != job_id:
            self.stop()
            return GradeOutcome(None, f"the grader worker gave no answer within "
                                      f"{self.timeout_s:g} s")
        self._unsettled = job_id  # its runners exit after the answer: settle() waits for them
        if answer.get("result") is None:
            return GradeOutcome(None, str(answer.get("error") or "no result"))
        result = answer["result"]
        if isinstance(result, dict):
            result["slot"] = answer.get("slot") or {}
        return outcome_of(result, "the grader worker's answer holds no result")

    def settle(self) -> tuple[bool, str]:
        """Waits for the worker to say its last job's runners are gone and its slot judged
        (graders/service/worker.py answers first, then settles): whether the slot is fit,
        and if not why. A slot found unfit is stopped once its worker has closed its warm
        runners. Called by :meth:`grade` before each job; a caller that knows it is about
        to take more work calls it first, so that the work goes to a slot ready for it."""
        job_id, self._unsettled = self._unsettled, None
        proc = self.proc  # stop() on another thread (the server stopping) may clear it
        if job_id is None or proc is None:
            return True, ""
        deadline = time.monotonic() + WORKER_SETTLE_S
        while True:
            line = self._next_line(max(deadline - time.monotonic(), 0.0))
            if line is None:
                # gone, or silent past any close and health check's worst: not known fit (a
                # worker started again would take whatever the GPU still holds as its
                # baseline)
                log.error("grader worker %d did not settle job %s within %g s: stopped",
                          proc.pid, job_id, WORKER_SETTLE_S)
                self.stop()
                return False, (f"the grader worker did not say its last job's runners were "
                               f"gone within {WORKER_SETTLE_S:g} s")
            if line.get("id") == job_id and line.get("settled"):
                break
        slot = line.get("slot") if isinstance(line.get("slot"), dict) else {}
        if slot.get("healthy", True) is not False:
            return True, ""
        try:
            proc.wait(WORKER_EXIT_S)
        except subprocess.TimeoutExpired:
            pass
        self.stop()
        return False, str(slot.get("problem") or "no reason given")

    def stop(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            self.proc = None
