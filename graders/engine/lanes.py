"""The lanes of a grading: runners with the submission loaded, each on a thread, taking
the plan's parts until none is left or the run stops.

A lane beyond the first joins only on a runner that is ready (starting one cold would
take longer than the checks). A call past its budget, or one that kills its runner, fails
its check; a fresh runner takes the rest, and the second loss of a kind ends the run.
A lane's runner holds the GPU gate shared only while a call runs GPU work (it gives it
back while Triton compiles: graders.runner.gpu_gate), so that another slot's timing waits
for kernels in flight, not for compiles.
"""

from __future__ import annotations

import threading
import time
from types import ModuleType

from graders.engine.calls import CheckDriver
from graders.engine.context import (CompiledOnly, Grading, Lane, LaneLost, LaneStopped,
                                    gpu_overrun_stop)
from graders.engine.loading import open_lane
from graders.engine.outcome import PartResults
from graders.engine.plan import CompileGuess, Part, pick_part, plan_parts, timed_guesses
from graders.engine.results import CheckResult, GradeResult
from graders.engine.spec import PerformanceSpec
from graders.engine.timing import warm_up
from graders.isolation import CHECKER_NICE, RunStopped, fork_bomb_message, lower_this_thread
from graders.shared.vocabulary import Device, Verdict

MAX_OVERRUNS = 2  # a second call past its budget ends the run as `timeout`
# A call that held the shared GPU past its hold (GPU_HOLD_S) ends the run at the first:
# every timing on the GPU waited for it, and every check of the class behind that timing.
# On the H200's load bench the endless kernel's gradings made three and four such calls
# (two lanes and the timed shapes' warm-up), 5 s each, some of them one after another.
MAX_GPU_OVERRUNS = 1
MAX_CRASHES = 2  # a second call that kills its runner ends the run as `runtime_error`
# A lane beyond the first joins when a runner becomes ready, while this many checks (or
# parts of one) still wait: a runner taken costs a replacement, worth it for two at least.
JOIN_MIN_PARTS = 2
JOIN_POLL_S = 0.5


def count_lost(g: Grading, cause: str, outcome: CheckResult) -> None:
    """A runner lost to one call (it overran its budget, or died): the check failed and
    a fresh runner takes the rest; the second loss of a kind ends the run, the first
    of a call that held the shared GPU too long (``gpu_overrun``) does."""
    with g.state.lock:
        g.state.lost[cause] += 1
        lost = g.state.lost[cause]
    if cause == "gpu_overrun" and lost >= MAX_GPU_OVERRUNS:
        g.state.stop_all(gpu_overrun_stop(outcome.message))
    elif cause == "overrun" and lost >= MAX_OVERRUNS:
        g.state.stop_all(RunStopped(
            Verdict.TIMEOUT, f"{lost} calls ran past their {g.budget_s:g} s budget "
            f"(the last: {outcome.message}); the run was stopped, and the checks already "
            "passed keep their points"))
    elif cause == "crash" and lost >= MAX_CRASHES:
        g.state.stop_all(RunStopped(
            Verdict.RUNTIME_ERROR, f"{lost} calls crashed their runner (the last: "
            f"{outcome.message}); the run was stopped, and the checks already passed keep "
            "their points"))


class LaneSet:
    """The lanes of one grading over the plan's parts; what they leave: the checks'
    results on the result, and the lanes still open (one of them may time)."""

    def __init__(self, g: Grading, module: ModuleType, result: GradeResult,
                 timed: PerformanceSpec | None):
        self.g, self.result, self.timed = g, result, timed
        self.count = max(1, min(g.lanes, len(g.checks)))
        self.todo = plan_parts(g.checks, g.device, self.count)  # in the spec's order
        self.parts = PartResults(self.todo, result, g.state.lock)
        # what each lane's runner has compiled, as plan.compile_guesses guesses it; on the
        # CPU interpreter nothing is compiled, and the lanes take the parts in order
        self.compiled: list[set[CompileGuess]] = [set() for _ in range(self.count)]
        self._by_compiles = self.count > 1 and g.device is Device.CUDA
        self.driver = CheckDriver(g, module)
        self.kept: list[Lane] = []
        # one lane compiles the timed shapes while the others check
        self._warm_first = timed is not None and self.count > 1
        self._warmed: Lane | None = None  # that lane, while its runner lives
        self._working = self.count  # lanes whose thread has not yet finished
        self.shed: set[int] = set()  # lanes that left early, the host grown busier

    def run(self) -> list[Lane]:
        started = time.monotonic()
        threads = [threading.Thread(target=self._work, args=(i,), name=f"lane-{i}", daemon=True)
                   for i in range(self.count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.result.phases["checks_s"] = round(time.monotonic() - started, 3)
        if self.g.state.compile_s:
            self.result.phases["compile_reported"] = dict(self.g.state.compile_s)
        if self.shed:
            self.result.phases["lanes_shed"] = len(self.shed)
        self.result.checks = self.parts.checks()
        return self.kept

    def _next_part(self, number: int) -> Part | None:
        """The part lane ``number`` takes next: in the spec's order, or on a GPU with
        several lanes, the one plan.pick_part prefers for the kernels its runner compiled."""
        with self.g.state.lock:
            if self.g.state.stop is not None or not self.todo:
                return None
            if not self._by_compiles:
                part = self.todo.pop(0)
            else:
                others: set[CompileGuess] = set()
                for lane, compiled in enumerate(self.compiled):
                    if lane != number:
                        others |= compiled
                part = self.todo.pop(pick_part(self.todo, self.compiled[number], others))
            self.compiled[number] |= part.compiles
            return part

    def _work(self, number: int) -> None:
        """One lane's thread: its runner, then parts until none is left. A stop ends every
        lane: the first stop is kept, later ones (runners killed by it) are quiet."""
        lane: Lane | None = None
        # the host work of checking behind the runner that times (another slot's, holding
        # the GPU alone) and ahead of the compiles (graders.isolation.launch.CHECKER_NICE)
        lower_this_thread(CHECKER_NICE)
        try:
            if number:
                lane = self._join(number)
                if lane is None:
                    return
            lane = self._warm_if_first(lane, number)
            while not self._shed(number, lane) and (part := self._next_part(number)) is not None:
                if lane is None:
                    lane = open_lane(self.g, self.result)
                lane = self._run_part(lane, part, number)
        except LaneStopped:
            pass
        except (RunStopped, CompiledOnly) as stop:
            if not self.g.state.stopped:  # else: killed because another lane stopped
                if isinstance(stop, CompiledOnly):
                    with self.g.state.lock:
                        self.g.state.compiled_only = stop
                    stop = RunStopped(Verdict.COMPILED, "compiled only")
                self.g.state.stop_all(stop)
        except BaseException as exc:  # noqa: BLE001 - a bug of ours: stop, don't hang
            self.g.state.stop_all(RunStopped(Verdict.GRADER_ERROR, f"the grader failed: {exc!r}"))
        finally:
            with self.g.state.lock:
                self._working -= 1
                last = self._working == 0
            if lane is not None:
                self._leave(lane, number, last)

    def _leave(self, lane: Lane, number: int, last: bool) -> None:
        """A lane out of parts: kept if it may time; else its runner is closed now, while
        the other lanes still check. Closed at the end, the lanes' runners made the timing
        wait for them (0.4–0.7 s with four: the driver tears CUDA contexts down one at a
        time), and timing must not start while they are going. The last lane to finish is
        kept too where a timing follows: its close would be the timing's wait (0.13-0.33 s
        a grading on the H200's back-to-back bench), and an idle runner holds nothing of the
        GPU's but its memory; it is closed with the one that timed, once the timing is done
        (graders.engine.timing.time_submission). Where nothing will be timed (the CPU, a
        failed check, a stop), a lane's close is started and not waited for."""
        with self.g.state.lock:
            closing = not lane.warmed and (self.timed is None or self._warmed is not None
                                           or self._nothing_to_time()
                                           or number in self.shed)  # given back: closed now
            timing_follows = self._timing_follows()
            if closing and last and timing_follows:
                closing = False
            if not closing:
                self.kept.append(lane)
        if closing and not timing_follows:
            # nothing will be timed: the answer need not wait for this runner's exit
            # (graders.engine.checker.Grader.finish does)
            self.g.state.close_later([lane.process], on_closed=lambda began, ended: (
                self.g.state.note_span(number, "runner closed", began, self.g.started, ended)))
        elif closing:
            began = time.monotonic()
            self.g.state.close(lane.process)
            self.g.state.note_span(number, "runner closed", began, self.g.started,
                                   time.monotonic())

    def _join(self, number: int) -> Lane | None:
        """Lanes beyond the first run only on runners that are ready, or become ready
        while enough parts still wait."""
        while True:
            with self.g.state.lock:
                if self.g.state.stop is not None or len(self.todo) < JOIN_MIN_PARTS:
                    return None
            if self._shed(number, None):
                return None
            lane = open_lane(self.g, self.result, extra=True, wait_s=JOIN_POLL_S)
            if lane is not None:
                return lane

    def _shed(self, number: int, lane: Lane | None) -> bool:
        """Whether lane ``number`` leaves before its next part (or before it joins): the
        host's gradings have grown since this one started, and the lanes they give it now
        (``Grading.lanes_now``) stop short of this one. A burst's first gradings start
        within milliseconds of each other, each counting the host nearly idle: on the load
        bench three of four took 3 and 4 lanes, whose compiles filled the host while the
        next gradings started, and those were the class's slowest. A lane that compiled the
        timed shapes stays (its runner times), and so does lane 0, whatever the count: it
        takes parts until none is left, so that none is left unrun."""
        if number == 0 or self.g.lanes_now is None or (lane is not None and lane.warmed):
            return False
        with self.g.state.lock:  # nothing left to take: leaving is not shedding
            if not self.todo or self.g.state.stop is not None:
                return False
        try:
            shed = number >= self.g.lanes_now()
        except Exception:  # noqa: BLE001 - a count that fails leaves the lanes as they are
            return False
        if shed:
            with self.g.state.lock:
                self.shed.add(number)
        return shed

    def _warm_if_first(self, lane: Lane | None, number: int) -> Lane | None:
        with self.g.state.lock:
            warm, self._warm_first = self._warm_first, False
        if not warm:
            return lane
        lane = lane or open_lane(self.g, self.result)
        with self.g.state.lock:  # the timed shapes' kernels: this lane's to compile
            self.compiled[number] |= timed_guesses(self.timed)
        lane = warm_up(self.g, lane, self.timed, self.result, number,
                       wanted=lambda: not self._timing_ruled_out())
        with self.g.state.lock:
            self._warmed = lane if lane is not None and lane.warmed else None
            if lane is None:  # its runner was lost: the next one has compiled nothing
                self.compiled[number] = set()
        return lane

    def _timing_follows(self) -> bool:  # called with the state's lock held
        return (self.timed is not None and self.g.device is Device.CUDA
                and self.g.state.stop is None and not self._nothing_to_time())

    def _nothing_to_time(self) -> bool:  # called with the state's lock held
        return any(not outcome.passed for parts in self.parts.outcomes.values()
                   for outcome in parts.values())

    def _timing_ruled_out(self) -> bool:
        """A part has failed: its check fails, and a submission that fails a check is not
        timed (correctness gates performance)."""
        with self.g.state.lock:
            return self.g.state.stop is not None or self._nothing_to_time()

    def _run_part(self, lane: Lane, part: Part, number: int) -> Lane | None:
        """One part on this lane; the lane, or None if the part cost its runner."""
        began = time.monotonic()
        try:
            # the GPU gate is held shared within a runner call (``CheckDriver._call``), not
            # per part: the check's own host work (inputs, the float64 reference, the
            # judging) and the compiles do not keep another slot's timing waiting
            outcome = self.driver.run(lane, part, number)
        except RunStopped as stop:  # the result names the check that found it
            stop.check = stop.check or part.check.name
            raise
        except LaneLost as lost:
            outcome = lost.result
            # a fork bomb's call may answer (EAGAIN) before its processes are counted:
            # count them now, and end the run rather than start another
            bomb = lane.process.over_process_cap()
            self.g.state.close(lane.process)
            with self.g.state.lock:
                if self._warmed is lane:  # timing will compile on whichever lane is left
                    self._warmed = None
                self.compiled[number] = set()  # the next runner has compiled nothing
            lane = None
            if bomb:
                raise RunStopped(Verdict.RUNTIME_ERROR,
                                 fork_bomb_message(bomb, f"in check {part.check.name}"))
            count_lost(self.g, lost.cause, outcome)
        complete = self.parts.finish(part, outcome, time.monotonic() - began)
        if complete is not None and self.g.on_check:
            self.g.on_check(complete)
        return lane
