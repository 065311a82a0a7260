"""The trusted side of a grading run: ``grade`` and ``Grader``.

It takes runners whose toolchain is proven (graders.isolation.pool), has each load the
submission, then drives the checks of the exercise over them: each check makes inputs
from a fresh secret seed and keeps the float64 reference; the runners only ever see
inputs. Every reply is validated: outputs are judged, inputs must come back unchanged, at
least one Triton kernel must have launched. Every call has a budget
(graders.isolation.session); then, on a GPU and only if every check passed, the graded
shapes are timed on one runner alone (graders.engine.performance).

The run, in its pieces (docs/architecture.md): ``plan`` → ``lanes`` (each running
``calls``) → ``outcome`` → ``timing`` → ``outcome.score``.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from graders.engine import outcome
from graders.engine.context import CompiledOnly, Grading
from graders.engine.lanes import LaneSet
from graders.engine.plan import (applicable_checks, default_lanes, grading_device,
                                 load_checks_module, refuse_unparsable, timed_spec)
from graders.engine.results import CheckResult, GradeResult
from graders.engine.spec import ExerciseSpec
from graders.engine.timing import time_submission
from graders.isolation import CloseReport, Launcher, RunnerPool, RunStopped, default_launcher
from graders.shared.vocabulary import Device, Language, Verdict


class Grader:
    """Grades one submission: its checks spread over a few runners, then its timing.

    Every call has a budget (compile and run). A call past it fails its check, the
    runner is replaced and the other checks go on; the second overrun ends the run as
    ``timeout``, with the points already earned, and so does the first call that holds
    the shared GPU past its hold (GPU_HOLD_S). The run's wall clock stays as the last
    backstop.
    """

    def __init__(self, exercise: ExerciseSpec, submission: Path, device: Device,
                 launcher: Launcher | None = None, timeout_s: float | None = None,
                 seed: int | None = None, performance: bool = True,
                 pool: RunnerPool | None = None, lanes: int | None = None,
                 on_check: Callable[[CheckResult], None] | None = None,
                 call_budget_s: float | None = None, params: dict[str, Any] | None = None,
                 lanes_now: Callable[[], int] | None = None):
        submission = submission.resolve()
        language = Language.from_filename(submission.name) or Language.TRITON
        device = grading_device(device)
        if pool is not None:
            launcher = pool.launcher
        else:  # the sandbox by default; raises SandboxUnavailable where bwrap is missing
            launcher = launcher or default_launcher(sandbox=True)
        on = Device.CUDA if device == Device.CUDA else Device.CPU
        self.grading = Grading(
            exercise=exercise,
            # before any runner starts: values that do not fit the spec are a ParamError
            params=exercise.resolve_params(params),
            submission=submission, language=language, device=device,
            checks=applicable_checks(exercise, language),
            launcher=launcher, pool=pool or RunnerPool(device, launcher),
            lanes=lanes or default_lanes(device),
            timeout_s=timeout_s or exercise.run_limit_s(on),
            budget_s=call_budget_s or exercise.call_budgets_s[on],
            seed=secrets.randbits(63) if seed is None else seed,
            time_it=performance, on_check=on_check, lanes_now=lanes_now)
        self.close_report: CloseReport | None = None

    @property
    def pool(self) -> RunnerPool:
        return self.grading.pool

    def grade(self) -> GradeResult:
        """The result, every runner closed (its processes gone)."""
        try:
            result = self.answer()
        except BaseException:
            self.finish()  # no runner outlives the grading, whatever went wrong
            raise
        self.finish(result)
        return result

    def answer(self) -> GradeResult:
        """The result, the grading's last runners possibly still exiting: a runner's exit
        takes ~0.2 s on a GPU (its CUDA context torn down), time the student need not
        wait. :meth:`finish` waits for them; call it before anything else runs on this
        grading's slot (its health is judged from what they left)."""
        g = self.grading
        started = time.monotonic()
        g.started, g.deadline = started, started + g.timeout_s
        result = GradeResult(exercise=g.exercise.name, language=g.language.value,
                             device=g.device.value, verdict=Verdict.GRADER_ERROR, score=0.0,
                             sandboxed=g.launcher.sandboxed, params=dict(g.params))
        try:
            module = load_checks_module(g.exercise)
        except Exception as exc:  # noqa: BLE001 - a broken exercise folder is the grader's fault
            result.message = f"exercise {g.exercise.name} is broken: {exc}"
            return result
        stopped_in = None
        try:
            refuse_unparsable(g.submission, g.language)
            self._run(module, result)
        except RunStopped as stop:
            result.verdict, result.message, result.line = stop.verdict, stop.message, stop.line
            stopped_in = stop.check
        except CompiledOnly as compiled:
            outcome.compiled_only(result, compiled)
        finally:
            g.state.close_rest_later()
            result.output, result.output_dropped_bytes = g.state.output_now()
            result.duration_s = round(time.monotonic() - started, 3)
            result.phases["total_s"] = result.duration_s
            if g.state.timeline:
                result.phases["timeline"] = g.state.sorted_timeline()
        outcome.mark_unrun(result, g.checks, stopped_in)
        outcome.score(result, g.exercise, g.time_it)
        return result

    def finish(self, result: GradeResult | None = None) -> CloseReport:
        """Waits until every runner of the grading is gone; what they left (also
        ``close_report``). ``result``: its output made whole (what the runners printed as
        they exited, a runner profile's say) and the wait noted as ``close_s``."""
        closing = time.monotonic()
        self.close_report = self.grading.state.close_all()
        if result is not None:
            result.phases["close_s"] = round(time.monotonic() - closing, 3)
            result.output = self.grading.state.output_text()
            result.output_dropped_bytes = self.grading.state.dropped
            if self.grading.state.timeline:  # with the closes that ended after the answer
                result.phases["timeline"] = self.grading.state.sorted_timeline()
        return self.close_report

    def _run(self, module: ModuleType, result: GradeResult) -> None:
        """The checks over the lanes, their verdict, then (on a GPU, all passed) the timing."""
        g = self.grading
        timed = timed_spec(g.exercise, g.device, g.language, g.time_it)
        kept = LaneSet(g, module, result, timed).run()
        failed = outcome.conclude_checks(g.state, result)
        if timed is None or result.device != Device.CUDA.value:
            return
        if failed:
            result.performance = {"skipped": "a check failed, and correctness gates performance",
                                  "points": 0.0, "max_points": timed.points}
            return
        time_submission(g, kept, timed, module, result)


def grade(exercise: ExerciseSpec, submission: Path, device: Device = Device.AUTO, **kwargs
          ) -> GradeResult:
    return Grader(exercise, submission, device, **kwargs).grade()
