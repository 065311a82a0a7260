"""What the pieces of one grading share: its settings (``Grading``), the state its lanes
change under one lock (``RunState``), a lane (one runner with the submission loaded), and
the signals the pieces pass each other (``LaneLost``, ``LaneStopped``, ``CompiledOnly``).

The pieces: ``plan`` (which checks, parts and lanes), ``lanes`` (the runners and their
threads), ``calls`` (one check over one lane), ``timing`` (the graded shapes timed),
``outcome`` (parts into checks, checks into a verdict and a score); ``checker`` puts them
in order.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import zlib
from pathlib import Path
from typing import Any, Callable

import numpy as np

from graders.engine.results import CheckResult
from graders.engine.spec import GPU_HOLD_S, CheckSpec, ExerciseSpec
from graders.isolation import (CloseReport, Launcher, ReadyRunner, RunnerPool, RunnerProcess,
                               RunStopped, Session)
from graders.shared.vocabulary import Device, Language, Verdict


class RunState:
    """What the lanes of one grading share, each change under ``lock``: the first stop,
    the runners lost by cause, the raise each failed check would have ended the run with,
    the runners open, and what the closed ones left (close reports, output)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stop: RunStopped | None = None
        self.compiled_only: CompiledOnly | None = None
        # runners lost to a call, by cause (graders.engine.lanes.count_lost)
        self.lost = {"overrun": 0, "gpu_overrun": 0, "crash": 0}
        # checks that failed because a call raised or crashed: how the run would have ended
        # before, kept in case every check did (then the verdict is that, not `failed`)
        self.raised: dict[str, RunStopped] = {}
        self.open: list[RunnerProcess] = []
        self.closing: list[RunnerProcess] = []  # out of ``open``, their close not yet done
        self._closers: list[threading.Thread] = []  # closes not waited for (close_later)
        self.outputs: list[str] = []
        self.dropped = 0
        self.reports: list[CloseReport] = []
        self.compile_s: dict[str, float] = {}  # per check, as the runners report it
        # what each lane did when, for the operator's breakdown (phases["timeline"]):
        # [lane, what, start s after the grading began, seconds, compile s the runner reported]
        self.timeline: list[list[Any]] = []

    @property
    def stopped(self) -> bool:
        with self.lock:
            return self.stop is not None

    def stop_all(self, stop: RunStopped) -> None:
        """The first stop wins; every other runner is killed at once."""
        with self.lock:
            if self.stop is None:
                self.stop = stop
            victims = list(self.open)
        for process in victims:
            process.kill()

    def opened(self, process: RunnerProcess) -> bool:
        """Counts a runner in; False if the run has stopped meanwhile."""
        with self.lock:
            self.open.append(process)
            return self.stop is None

    def close(self, process: RunnerProcess) -> None:
        """Closes a runner and waits until its processes are gone. Not through the GPU gate:
        on the H200 a timed copy and softmax beside runners closed four at a time, each
        with a 3 GiB context, read the same as alone (docs/experiments/timing_disturbers.py,
        docs/benchmarks.md), and a timing would wait for every close in flight."""
        with self.lock:
            if process not in self.open:
                return
            self.open.remove(process)
            self.closing.append(process)
        report = CloseReport(0, False)  # a close that raised: its processes not known gone
        try:
            report = process.close()
        finally:
            text = process.output.text() if process.output is not None else None
            with self.lock:  # one step: output_now counts each runner once, closed or not
                self.closing.remove(process)
                self.reports.append(report)
                if process.output is not None:
                    self.outputs.append(text)
                    self.dropped += process.output.dropped

    def close_later(self, processes: list[RunnerProcess],
                    on_closed: Callable[[float, float], None] | None = None) -> None:
        """Starts closing these runners and returns: ``close_all`` waits for them. A runner
        exits in ~0.2 s on a GPU (its CUDA context torn down), and the student's answer
        does not wait for that; the slot does, before its next job. ``on_closed`` hears
        when each close began and ended (monotonic)."""
        def close(process: RunnerProcess) -> None:
            began = time.monotonic()
            self.close(process)
            if on_closed is not None:
                on_closed(began, time.monotonic())

        threads = [threading.Thread(target=close, args=(p,), name="close", daemon=True)
                   for p in processes]
        for t in threads:
            t.start()
        with self.lock:
            self._closers.extend(threads)

    def close_rest_later(self) -> None:
        """Starts closing every runner still open, each on a thread of its own (a close
        waits ~0.15 s for its processes to be gone, and a grading's lanes closed one by
        one waited for each in turn: 0.45 s of four lanes)."""
        with self.lock:
            still_open = list(self.open)
        self.close_later(still_open)

    def close_all(self) -> CloseReport:
        """Every runner still open closed, and every close started earlier done; what all
        of them left, summed."""
        self.close_rest_later()
        with self.lock:
            closers, self._closers = self._closers, []
        for t in closers:
            t.join()
        return CloseReport(sum(r.leftover_processes for r in self.reports),
                           all(r.all_killed for r in self.reports))

    def note_raised(self, check: str, stop: RunStopped) -> None:
        with self.lock:
            self.raised.setdefault(check, stop)

    def add_compile_s(self, check: str, seconds: float) -> None:
        with self.lock:
            self.compile_s[check] = round(self.compile_s.get(check, 0.0) + seconds, 3)

    def note_span(self, lane: int, what: str, began: float, started: float, ended: float,
                  compile_s: float = 0.0) -> None:
        with self.lock:
            self.timeline.append([lane, what, round(began - started, 3),
                                  round(ended - began, 3), round(compile_s, 3)])

    def output_text(self) -> str:
        """What the runners printed, once every one is closed."""
        return "\n".join(dict.fromkeys(o for o in self.outputs if o))

    def output_now(self) -> tuple[str, int]:
        """What the runners printed, some of them still open or exiting, and the bytes
        dropped: each of those flushed before its last reply, and its pipe is read up to
        that (graders.isolation.launch.CappedOutput.settled_text)."""
        with self.lock:
            outputs = list(self.outputs)
            running = [p.output for p in (*self.open, *self.closing) if p.output is not None]
            dropped = self.dropped
        outputs += [output.settled_text() for output in running]
        dropped += sum(output.dropped for output in running)
        return "\n".join(dict.fromkeys(o for o in outputs if o)), dropped

    def sorted_timeline(self) -> list[list[Any]]:
        with self.lock:
            return sorted(self.timeline, key=lambda t: t[2])


@dataclasses.dataclass
class Grading:
    """One grading's settings, fixed before its first runner, and its shared state."""

    exercise: ExerciseSpec
    params: dict[str, Any]  # the student's parameters, resolved against the spec
    submission: Path
    language: Language
    device: Device  # resolved: cuda or cpu
    checks: list[CheckSpec]  # those this language is graded on, scaled to 100 points
    launcher: Launcher
    pool: RunnerPool
    lanes: int
    timeout_s: float  # the run's wall clock, the last backstop
    budget_s: float  # one call's
    seed: int
    time_it: bool  # False: correctness only (selftest, many jobs on one GPU)
    on_check: Callable[[CheckResult], None] | None = None
    # the lanes the host gives this grading now, asked between parts: a lane numbered at or
    # past it leaves (graders.engine.lanes.LaneSet._shed); None: ``lanes`` throughout
    lanes_now: Callable[[], int] | None = None
    started: float = 0.0  # monotonic; set when the run starts
    deadline: float = 0.0  # monotonic; set when the run starts
    state: RunState = dataclasses.field(default_factory=RunState)

    def rng(self, purpose: str) -> np.random.Generator:
        return np.random.default_rng([self.seed, zlib.crc32(purpose.encode())])

    @property
    def gpu_hold_s(self) -> float | None:
        """How long a call may hold the GPU gate at a stretch (spec.GPU_HOLD_S); on the
        CPU interpreter there is no GPU to share, and a call's interpreting holds it."""
        return GPU_HOLD_S if self.device is Device.CUDA else None


@dataclasses.dataclass
class Lane:
    """One runner of a grading, with the submission loaded."""

    ready: ReadyRunner
    session: Session
    attributes: dict[str, Any]
    warmed: bool = False  # the timed shapes' kernels are compiled in this runner

    @property
    def process(self) -> RunnerProcess:
        return self.ready.process


class LaneLost(Exception):
    """A check's call cost its runner (``cause``: "overrun", past its budget;
    "gpu_overrun", holding the shared GPU past its hold; "crash", the
    runner died or its device broke): the check has failed, the runner is thrown away."""

    def __init__(self, result: CheckResult, cause: str):
        super().__init__(result.message)
        self.result, self.cause = result, cause


def gpu_overrun_stop(what: str) -> RunStopped:
    """The run ended by a call that held the shared GPU past its hold."""
    return RunStopped(
        Verdict.TIMEOUT, f"{what}; the run was stopped at once, since every other grading "
        "on this GPU waits while a kernel holds it, and the checks already passed keep "
        "their points")


class LaneStopped(Exception):
    """Another lane stopped the run; this one leaves quietly."""


class CompiledOnly(Exception):
    """HIP without a GPU: the file compiled, and nothing can run."""

    def __init__(self, warnings: list[Any]):
        super().__init__("compiled only")
        self.warnings = warnings
