"""The graded shapes timed: on a GPU only, after every check passed, on one runner alone.

While the other lanes check, one lane compiles the timed shapes' kernels (``warm_up``).
When the checks are done, that lane times (``time_submission``) holding the GPU gate
exclusive: other slots' checks and warm runners being made keep off the GPU meanwhile.
What the runner measures is checked and scored by ``graders.engine.performance``, the
secret rows fetched under the gate and judged after it is let go.
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Callable

from graders.engine.context import Grading, Lane, gpu_overrun_stop
from graders.engine.loading import open_lane
from graders.engine.performance import (TIMING_BUDGET_S, PerformanceRejected, PerformanceRun,
                                        timing_request)
from graders.engine.results import GradeResult
from graders.engine.spec import PerformanceSpec
from graders.isolation import TIMING_NICE, CallOverrun, RunStopped, overrun_message
from graders.shared.vocabulary import Verdict


def warm_up(g: Grading, lane: Lane, spec: PerformanceSpec, result: GradeResult,
            lane_number: int = 0, wanted: Callable[[], bool] = lambda: True) -> Lane | None:
    """Compile the timed shapes' kernels in this lane while the others check. A runner
    that overruns here is replaced (None); the overrun counts only when timing repeats it,
    unless it held the shared GPU past its hold: that ends the run, as in a check.
    ``wanted`` is asked before each shape: once a check has failed nothing will be timed,
    and the lane goes on to the checks unwarmed (a failing file's timed-shape compiles were
    CPU-seconds of a busy host for nothing)."""
    started = time.monotonic()
    rng = g.rng("warmup")
    for shape in spec.shapes:
        if not wanted():
            return lane
        request = {"op": "perf_warmup", **timing_request(shape, int(rng.integers(0, 2**31)))}
        began = time.monotonic()
        try:  # it runs the kernel once: the gate held for that, not for the compile
            lane.session.request(request, during=f"while compiling for {shape.label}",
                                 budget_s=g.budget_s, gate=g.pool.gpu_gate,
                                 gate_hold_s=g.gpu_hold_s)
        except CallOverrun as over:
            if over.on_gpu:
                g.state.stop_all(gpu_overrun_stop(overrun_message(over, shape.label)))
            g.state.close(lane.process)
            return None
        finally:
            g.state.note_span(lane_number, f"compile for timing {shape.label}", began, g.started,
                              time.monotonic())
    lane.warmed = True
    with g.state.lock:
        result.phases["timing_warmup_s"] = round(time.monotonic() - started, 3)
    return lane


def time_submission(g: Grading, kept: list[Lane], spec: PerformanceSpec, module: ModuleType,
                    result: GradeResult) -> None:
    """Times ``spec``'s shapes on the lane that compiled them (or a fresh one). The other
    lanes kept stay idle meanwhile (a runner that holds no call holds nothing of the GPU but
    its memory; one being closed slowed the timing's first shape, 0.9 s against 0.46 s on
    the H100); they and the timing's runner are closed once its rows are fetched, while the
    rows are judged. Where the lane that compiled them was lost, every lane that finished
    meanwhile was kept (graders.engine.lanes.LaneSet._leave): a live one, the submission
    loaded, times before a fresh runner is taken."""
    kept.sort(key=lambda k: not k.warmed)
    lane = next((k for k in kept if k.process.proc.poll() is None), None)
    if lane is None:
        lane = open_lane(g, result)
    # its host side ahead of every lane's compiles on this host: the GPU waits on it
    result.phases["timing_prioritized"] = lane.process.set_priority(TIMING_NICE)
    run = PerformanceRun(spec, g.exercise.tolerances, module, lane.session, g.rng("performance"),
                         getattr(g.launcher, "gpu_index", None),
                         budget_s=g.budget_s + TIMING_BUDGET_S,
                         on_shape=lambda label, began, ended: g.state.note_span(
                             -1, f"timing {label}", began, g.started, ended))
    started = time.monotonic()
    try:
        # only now, the lanes' threads joined: none of this grading holds the gate shared
        # (a thread asking exclusive while one of its own held it would wait for ever).
        # Warm runners being made, and other slots' checks on this GPU, keep off it.
        with g.pool.gpu_gate.exclusive():
            result.phases["timing_gate_wait_s"] = round(time.monotonic() - started, 3)
            with lane.session.timing_memory():  # the GPU's one timing reserve, beside the cap
                run.measure()
    except BaseException:  # a runner lost, the deadline: no rows will be judged
        run.abandon()
        raise
    finally:
        result.phases["timing_s"] = round(time.monotonic() - started, 3)
    # every runner of this grading closed beside the judging: it has nothing more to ask
    # them, and the answer does not wait for their exits (Grader.finish does)
    g.state.close_later([lane.process, *(other.process for other in kept if other is not lane)])
    # the rows judged on the host with the GPU let go: every other slot's checks wait
    # while a grading holds it alone, and a long row's float64 reference is host seconds
    judging = time.monotonic()
    try:
        _judge(run, spec, result)
    finally:
        result.phases["timing_judge_s"] = round(time.monotonic() - judging, 3)
        g.state.note_span(-1, "timed rows judged", judging, g.started, time.monotonic())


def _judge(run: PerformanceRun, spec: PerformanceSpec, result: GradeResult) -> None:
    try:
        result.performance = run.judge()
    except PerformanceRejected as bad:
        result.flag = bad.message if bad.flag else None
        raise RunStopped(Verdict.REJECTED, bad.message, bad.line) from None
    except CallOverrun as over:
        result.performance = {
            "skipped": overrun_message(over, over.during.removeprefix("while timing ")),
            "points": 0.0, "max_points": spec.points}
