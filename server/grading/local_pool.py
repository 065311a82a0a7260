"""Dispatching submissions to graders. The database is the queue and the truth.

``Dispatcher`` is the small interface the API talks to; ``LocalPool`` is the
embedded default: one worker thread per slot (SLOTS_PER_GPU per visible GPU, pinned
to it, else one CPU-interpreter slot), each claiming the oldest queued submission
with a guarded UPDATE, grading it through the slot's ``graders worker`` process
(warm runners between jobs) and storing the result in one transaction. A distributed task engine for many GPU hosts slots
in behind the same interface.

Crash safety: a submission is committed before it is acknowledged; on start,
whatever was left ``running`` by a crash is queued again; a result is stored
only while its submission is still ``running`` under the same attempt, so a
submission ends graded exactly once per grading request.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Protocol

from sqlalchemy.orm import Session, sessionmaker

from ..core.clock import utcnow
from ..core.settings import Settings
from ..domain.exercises import ExerciseInfo
from ..domain.progress import record_check
from ..domain.student_params import params_for
from .graders_client import GradersClient
from .jobs import Claimer, requeue_interrupted, store

log = logging.getLogger("server.queue")


class Dispatcher(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def notify(self) -> None: ...  # new work was committed


@dataclass
class SlotSpec:
    name: str
    device: str  # cpu | cuda
    gpu_index: int | None
    in_service: bool = True
    shares_gpu: bool = False  # other slots grade on its GPU (SLOTS_PER_GPU > 1)


def visible_gpus() -> list[int]:
    """The indices of the /dev/nvidiaN nodes."""
    return sorted(int(m.group(1)) for p in Path("/dev").glob("nvidia*")
                  if (m := re.fullmatch(r"nvidia(\d+)", p.name)))


def default_slots(settings: Settings) -> list[SlotSpec]:
    """CPU: GRADING_SLOTS slots (at least one). GPU: SLOTS_PER_GPU slots on each visible
    GPU, or on the first GRADING_SLOTS of them; a GPU's first slot is gpu-N, the others
    gpu-N-1, gpu-N-2..."""
    gpus = visible_gpus()
    if settings.grader_device == "cpu" or (settings.grader_device == "auto" and not gpus):
        count = max(1, settings.grading_slots)
        return [SlotSpec(f"cpu-{i}", "cpu", None) for i in range(count)]
    gpus = gpus or [0]
    if settings.grading_slots:
        gpus = gpus[: settings.grading_slots]
    per_gpu = max(1, settings.slots_per_gpu)
    return [SlotSpec(f"gpu-{i}" + (f"-{k}" if k else ""), "cuda", i, shares_gpu=per_gpu > 1)
            for i in gpus for k in range(per_gpu)]


class LocalPool:
    def __init__(self, sessions: sessionmaker[Session], client: GradersClient, settings: Settings,
                 slots: list[SlotSpec] | None = None,
                 exercises: Mapping[str, ExerciseInfo] | None = None):
        self.sessions = sessions
        self.client = client
        self.settings = settings
        # their parameter declarations, for each student's (None: every grading uses the
        # exercises' defaults, and results are not held to a student's own)
        self.exercises = exercises
        self.slots = slots or default_slots(settings)
        self._wake = threading.Condition()
        self.claimer = Claimer(sessions)
        self._stopping = False
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        n = requeue_interrupted(self.sessions)
        if n:
            log.warning("requeued %d submissions left running by a previous process", n)
        for slot in self.slots:
            thread = threading.Thread(target=self._work, args=(slot,), name=f"slot-{slot.name}",
                                      daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        self.client.close()

    def notify(self) -> None:
        with self._wake:
            self._wake.notify_all()

    # -- a slot's loop ----------------------------------------------------------------
    def _work(self, slot: SlotSpec) -> None:
        # a worker process per slot (by name): two slots on one GPU are two processes
        self.client.warm_up(slot.device, slot.gpu_index, slot=slot.name,
                            share_gpu=slot.shares_gpu)
        while not self._stopping and slot.in_service:
            try:
                job = self.claimer.claim(started_at=utcnow())
            except Exception:  # noqa: BLE001 - a database hiccup must not kill the slot
                log.exception("claiming work failed")
                job = None
            if job is None:
                with self._wake:
                    if not self._stopping:
                        self._wake.wait(timeout=2.0)
                continue
            outcome = self.client.grade(job.exercise, job.language, job.source, slot.device,
                                        slot.gpu_index,
                                        on_check=lambda c, j=job: record_check(
                                            self.sessions, j.id, j.attempt, c),
                                        params=params_for(self.settings, self.exercises or {},
                                                          job.exercise, job.username),
                                        slot=slot.name, share_gpu=slot.shares_gpu)
            try:
                store(self.sessions, self.settings, job.id, job.attempt, outcome, self.notify,
                      self.exercises)
            except Exception:  # noqa: BLE001
                log.exception("storing the result of submission %d failed", job.id)
            if not outcome.slot_healthy:
                slot.in_service = False
                log.error("slot %s taken out of service: %s", slot.name, outcome.slot_problem)
