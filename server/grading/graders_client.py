"""The server's only way to the graders: their command line and its JSON.

``python -m graders list --json`` describes the exercises. Grading goes to one
``python -m graders worker`` per slot, a process that lives between jobs and keeps
warm runners (sandbox up, torch and CUDA initialised), fed one JSON line per job;
``python -m graders grade EXERCISE FILE --json`` (one process per grading) is the
fallback where a stand-in grader command is configured. Only
``graders.service.worker_client`` (the standard library alone) is imported from the graders, so
the web process holds no torch, no triton and no student code.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import subprocess
import tempfile
import threading
from typing import Any, Callable

from graders.service.worker_client import (GradeOutcome, SlotWorker, die_with_parent, outcome_of,
                                           write_submission)

from ..core.settings import REPO_ROOT, Settings
from ..domain.exercises import ExerciseInfo

log = logging.getLogger("server.graders")
# where the graders find the course (graders/engine/registry.py): the server only passes them on
COURSE_FOLDERS = ("GRADERS_EXERCISES", "GRADERS_REFERENCES")


def pass_on_course_folders() -> None:
    """Make the course's folders absolute in this process's environment, which every
    graders process it starts inherits: they run from the repository root, not from where
    the server was started, so a relative folder would point elsewhere for them."""
    for key in COURSE_FOLDERS:
        if os.environ.get(key):
            os.environ[key] = os.path.abspath(os.environ[key])


class GradersClient:
    def __init__(self, settings: Settings):
        self.settings = settings
        pass_on_course_folders()  # `list --json`, the workers and `grade` all follow them
        self.base = (shlex.split(settings.grader_command) if settings.grader_command
                     else [settings.grader_python, "-m", "graders"])
        # a stand-in grader command (the tests' fake) speaks only the one-shot CLI
        self.persistent = not settings.grader_command
        # by slot: two slots on one GPU (SLOTS_PER_GPU) are two worker processes
        self._workers: dict[tuple[str, int | None, str | None], SlotWorker] = {}
        self._workers_lock = threading.Lock()

    def worker_env(self, device: str, gpu_slots: int) -> dict[str, str]:
        """What a slot's worker is told of its GPU: how many slots grade on it (for the
        size of each runner's GPU memory cap) and the cap, where GPU_MEMORY_CAP_MIB sets it
        (graders/service/worker.py)."""
        if device != "cuda":
            return {}
        env = {"GRADERS_GPU_SLOTS": str(max(1, gpu_slots))}
        if self.settings.gpu_memory_cap_mib is not None:
            env["GRADERS_GPU_MEMORY_CAP_MIB"] = str(max(0, self.settings.gpu_memory_cap_mib))
        return env

    def _worker(self, device: str, gpu_index: int | None, slot: str | None = None,
                share_gpu: bool = False, gpu_slots: int | None = None) -> SlotWorker:
        with self._workers_lock:
            key = (device, gpu_index, slot)
            if key not in self._workers:
                argv = self.base + ["worker", "--device", device]
                if gpu_index is not None:
                    argv += ["--gpu-index", str(gpu_index)]
                if share_gpu:
                    argv.append("--share-gpu")
                slots = gpu_slots or (max(2, self.settings.slots_per_gpu) if share_gpu else 1)
                self._workers[key] = SlotWorker(argv, self.settings.grader_timeout_s,
                                                env=self.worker_env(device, slots))
            return self._workers[key]

    def warm_up(self, device: str, gpu_index: int | None, slot: str | None = None,
                share_gpu: bool = False, gpu_slots: int | None = None) -> None:
        """Start a slot's worker ahead of its first job (its runners take seconds).
        ``slot``: the slot's name, its worker's key; ``share_gpu``: other slots grade on
        the same GPU (the worker's ``--share-gpu``); ``gpu_slots``: how many, this one
        included."""
        if self.persistent:
            problem = self._worker(device, gpu_index, slot, share_gpu, gpu_slots).warm_up()
            if problem:
                log.error("slot %s (%s/%s): %s", slot, device, gpu_index, problem)

    def settle(self, device: str, gpu_index: int | None, slot: str | None = None,
               share_gpu: bool = False, gpu_slots: int | None = None) -> tuple[bool, str]:
        """After a slot's answer, before it takes more work: waits until its last job's
        runners are gone and its health judged (the worker answers first); whether it is
        fit, and if not why. The one-shot grader has nothing left running."""
        if not self.persistent:
            return True, ""
        return self._worker(device, gpu_index, slot, share_gpu, gpu_slots).settle()

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
              gpu_index: int | None,
              on_check: Callable[[dict[str, Any]], None] | None = None,
              params: dict[str, Any] | None = None, slot: str | None = None,
              share_gpu: bool = False, gpu_slots: int | None = None,
              host_gradings: int | None = None) -> GradeOutcome:
        """``on_check`` hears of each check as it ends (the slot's worker only; the
        one-shot stand-in grader says nothing until its result). ``params``: the student's
        values of the exercise's parameters (server/domain/student_params.py). ``slot``,
        ``share_gpu`` and ``gpu_slots``: as for ``warm_up``. ``host_gradings``: the
        gradings the host is about to run, this one included (the slot's worker sizes the
        grading's lanes by it; the one-shot grader takes its own)."""
        if self.persistent:
            with tempfile.TemporaryDirectory(prefix="autograder-job-") as tmp:
                path = write_submission(tmp, language, source)
                return self._worker(device, gpu_index, slot, share_gpu, gpu_slots).grade(
                    exercise, path, on_check, params, host_gradings=host_gradings)
        with tempfile.TemporaryDirectory(prefix="autograder-job-") as tmp:
            path = write_submission(tmp, language, source)
            argv = self.base + ["grade", exercise, str(path), "--json", "--device", device]
            if gpu_index is not None:
                argv += ["--gpu-index", str(gpu_index)]
            if params:
                argv += ["--params", json.dumps(params)]
            try:
                proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True,
                                        start_new_session=True, preexec_fn=die_with_parent)
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
        return outcome_of(result, f"the grader exited {proc.returncode} without a result: "
                                f"{err.strip()[-1000:]}")
