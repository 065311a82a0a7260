"""Dispatching submissions to graders. The database is the queue and the truth.

``Dispatcher`` is the small interface the API talks to; ``LocalPool`` is the
embedded default: one worker thread per slot (SLOTS_PER_GPU per visible GPU, pinned
to it, else one CPU-interpreter slot), each claiming the oldest queued submission
with a guarded UPDATE, grading it through the slot's ``graders worker`` process
(warm runners between jobs) and storing the result in one transaction. A distributed task engine for many GPU hosts slots
in behind the same interface.

Crash safety (issue 39): a submission is committed before it is acknowledged. A slot
claims, renews and stores through the pool's own connections (grading_db.py), never behind
the requests'. A finished result is written to the outbox before it is stored and the slot
tries until it is stored (outbox.py); a result is stored only while its submission is still
``running`` under the same attempt, so a submission ends graded exactly once per grading
request. While a slot holds a job the reaper renews its lease, and any server process's
reaper (reaper.py) puts a job back without a restart: at once when its holder was a process
of the same machine that is gone (holders.py), else when its lease has run out (its slot, or
its server on another host, died). On a clean stop the jobs still being graded are put back
at once.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from ..core.clock import utcnow
from ..core.settings import Settings
from ..domain.exercises import ExerciseInfo
from ..domain.models import Status, Submission
from ..domain.progress import record_check
from ..domain.student_params import params_for
from . import grading_db, holders
from .graders_client import GradeOutcome, GradersClient
from .jobs import Claimer, Job, database_away, release, store
from .outbox import Outbox, folder_for
from .reaper import Reaper
from .slot_sizing import sized_slots_per_gpu

log = logging.getLogger("server.queue")


class Dispatcher(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def notify(self) -> None: ...  # new work was committed
    # (slots whose worker is warm, slots), or None where the grading happens elsewhere
    def readiness(self) -> tuple[int, int] | None: ...


@dataclass
class SlotSpec:
    name: str
    device: str  # cpu | cuda
    gpu_index: int | None
    in_service: bool = True
    shares_gpu: bool = False  # other slots grade on its GPU (SLOTS_PER_GPU > 1)
    gpu_slots: int = 1  # the slots on its GPU, this one included (each runner's memory cap)


def visible_gpus() -> list[int]:
    """The indices of the /dev/nvidiaN nodes."""
    return sorted(int(m.group(1)) for p in Path("/dev").glob("nvidia*")
                  if (m := re.fullmatch(r"nvidia(\d+)", p.name)))


def default_slots(settings: Settings) -> list[SlotSpec]:
    """CPU: GRADING_SLOTS slots (at least one). GPU: SLOTS_PER_GPU slots on each visible
    GPU, or on the first GRADING_SLOTS of them; a GPU's first slot is gpu-N, the others
    gpu-N-1, gpu-N-2... SLOTS_PER_GPU unset (0): sized from the host (slot_sizing.py)."""
    gpus = visible_gpus()
    if settings.grader_device == "cpu" or (settings.grader_device == "auto" and not gpus):
        count = max(1, settings.grading_slots)
        return [SlotSpec(f"cpu-{i}", "cpu", None) for i in range(count)]
    gpus = gpus or [0]
    if settings.grading_slots:
        gpus = gpus[: settings.grading_slots]
    per_gpu = settings.slots_per_gpu if settings.slots_per_gpu > 0 else \
        sized_slots_per_gpu(gpus)
    return [SlotSpec(f"gpu-{i}" + (f"-{k}" if k else ""), "cuda", i, shares_gpu=per_gpu > 1,
                     gpu_slots=per_gpu)
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
        # a connection for each slot and one for the reaper, apart from the requests'
        self.grading = grading_db.grading_sessions(sessions, settings, len(self.slots) + 1)
        self.outbox = Outbox(folder_for(grading_db.database_url(sessions, settings),
                                        settings.outbox_dir))
        self._wake = threading.Condition()
        self.claimer = Claimer(self.grading)
        self._stopping = False
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []
        # what each slot holds, by slot name: a job being graded, or one whose result it is
        # storing; the reaper renews their leases
        self._grading: dict[str, Job] = {}
        self._storing: dict[str, Job] = {}
        self._held_lock = threading.Lock()
        self._claiming = threading.Lock()  # a claim and its count of the host's gradings
        self._warmed: set[str] = set()  # the slots whose worker answered its warm-up
        self.reaper = Reaper(self.grading, settings, live=self._held, outbox=self.outbox,
                             store=self._store, gone=self._gone, on_put_back=self.notify)

    def start(self) -> None:
        # no requeue of everything `running` here: another server process on the same
        # database may be grading it. The reaper's first round stores what a killed server
        # left in the outbox and puts back what a dead process of this machine held; what
        # nobody renews it puts back when its lease has run out
        self.reaper.start()
        for slot in self.slots:
            thread = threading.Thread(target=self._work, args=(slot,), name=f"slot-{slot.name}",
                                      daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        self._stopped.set()
        self._put_back_unfinished()
        self.reaper.stop()
        self.client.close()
        self.outbox.tidy()
        grading_db.close(self.grading, self.sessions)

    def notify(self) -> None:
        with self._wake:
            self._wake.notify_all()

    def readiness(self) -> tuple[int, int]:
        """(slots warm, slots): a slot is warm once its worker has answered the warm-up,
        every runner it keeps ready started (or, where they cannot start, its error
        logged). /api/ready says ready when every slot is."""
        with self._held_lock:
            return len(self._warmed), len(self.slots)

    def _host_gradings(self, job: Job) -> int:  # called with _held_lock held
        """The gradings this pool is about to run as ``job`` starts, itself included: its
        slots' running ones, and as many waiting ones as its other slots can claim (a slot
        still warming up counts: it claims once warm, and its warming is CPU work too;
        graders/service/host_load.py says why a slot's own count misses a burst). The queue
        is the database's: where several servers grade from it, this may count jobs another
        host takes, and its gradings get fewer lanes than their host could give."""
        serving = sum(1 for s in self.slots if s.in_service)
        return max(1, min(serving, len(self._grading) + job.waiting))

    def _held(self) -> list[tuple[int, int]]:
        with self._held_lock:
            return [(j.id, j.attempt) for j in [*self._grading.values(),
                                                *self._storing.values()]]

    def _gone(self) -> list[tuple[int, int]]:
        """Running jobs whose holder was a server process of this machine that is gone."""
        with self.grading() as db:
            rows = db.execute(select(Submission.id, Submission.attempts, Submission.worker)
                              .where(Submission.status == Status.RUNNING,
                                     Submission.worker.contains(f"@{holders.machine()}:")))
            return holders.gone_here(rows.all())

    def _put_back_unfinished(self) -> None:
        """A clean stop: the jobs still being graded here wait again at once, rather than
        for their leases to run out (a result already finished stays in the outbox, and
        the next start stores it)."""
        with self._held_lock:
            jobs = list(self._grading.values())
        if not jobs:
            return
        try:
            with self.grading.begin() as db:
                for job in jobs:
                    release(db, (Submission.id == job.id) & (Submission.attempts == job.attempt))
            log.info("put back %d jobs being graded at stop: %s", len(jobs),
                     [j.id for j in jobs])
        except Exception as exc:  # noqa: BLE001 - their leases run out instead
            if not database_away(exc):
                raise
            log.warning("could not put back the jobs being graded at stop: %s", exc)

    def _store(self, job_id: int, attempt: int, outcome: GradeOutcome) -> str:
        return store(self.grading, self.settings, job_id, attempt, outcome, self.notify,
                     self.exercises)

    # -- a slot's loop ----------------------------------------------------------------
    def _work(self, slot: SlotSpec) -> None:
        # a worker process per slot (by name): two slots on one GPU are two processes
        self.client.warm_up(slot.device, slot.gpu_index, slot=slot.name,
                            share_gpu=slot.shares_gpu, gpu_slots=slot.gpu_slots)
        with self._held_lock:
            self._warmed.add(slot.name)
        while not self._stopping and slot.in_service:
            try:
                claimed = self._claim(slot)
            except Exception:  # noqa: BLE001 - a database hiccup must not kill the slot
                log.exception("claiming work failed")
                claimed = None
            if claimed is None:
                with self._wake:
                    if not self._stopping:
                        self._wake.wait(timeout=2.0)
                continue
            try:
                self._grade(slot, *claimed)
            finally:  # a slot that fails here holds nothing: its lease runs out
                with self._held_lock:
                    self._grading.pop(slot.name, None)
                    self._storing.pop(slot.name, None)

    def _claim(self, slot: SlotSpec) -> tuple[Job, int] | None:
        """The next job for ``slot``, held as this slot's, and the gradings this host is
        about to run as it starts. One slot at a time: a neighbour's claim must be counted
        among the gradings before the next slot counts them."""
        with self._claiming:
            # the lease starts with the claim: the reaper renews it from here on
            now = utcnow()
            job = self.claimer.claim(started_at=now, heartbeat_at=now,
                                     worker=holders.holder(slot.name), count_waiting=True)
            if job is None:
                return None
            with self._held_lock:
                self._grading[slot.name] = job
                return job, self._host_gradings(job)

    def _grade(self, slot: SlotSpec, job: Job, host_gradings: int) -> None:
        outcome = self.client.grade(job.exercise, job.language, job.source, slot.device,
                                    slot.gpu_index,
                                    on_check=lambda c, j=job: record_check(
                                        self.grading, j.id, j.attempt, c),
                                    params=params_for(self.settings, self.exercises or {},
                                                      job.exercise, job.username),
                                    slot=slot.name, share_gpu=slot.shares_gpu,
                                    gpu_slots=slot.gpu_slots, host_gradings=host_gradings)
        with self._held_lock:
            self._storing[slot.name] = self._grading.pop(slot.name)
        # The slot claims no new work until its result is stored. While the database cannot
        # take a result it cannot hand out work either, so going on would gain nothing and
        # pile up results that only this host's disk holds; and its lease, renewed while it
        # waits, keeps the job from being graded again elsewhere meanwhile
        self.outbox.until_stored(job.id, job.attempt, outcome, self._store,
                                 self._stopped.wait)
        fit, problem = outcome.slot_healthy, outcome.slot_problem
        if fit:
            # the student has the answer; the job's runners are still exiting. The slot
            # claims nothing until they are gone and its health is judged, so that the next
            # job goes to a slot that is ready (another, if one is idle) and never to one
            # found unfit
            fit, problem = self.client.settle(slot.device, slot.gpu_index, slot=slot.name,
                                              share_gpu=slot.shares_gpu,
                                              gpu_slots=slot.gpu_slots)
        if not fit:
            slot.in_service = False
            log.error("slot %s taken out of service: %s", slot.name, problem)
