"""Outcomes into a result: parts into checks, checks into a verdict, the run into a score.

A check cut into parts (one shape each) has failed if any part did, and the first failed
part speaks for it. After the lanes: every check failed by raising means nothing of the
submission works, and the first raise is the verdict; otherwise `failed` or `passed`.
A timeout, or a run ended by calls that crashed, keeps what the checks before it earned;
other stops score 0 (nothing ran, or nothing may count).
"""

from __future__ import annotations

import threading

from graders.engine.context import CompiledOnly, RunState
from graders.engine.plan import Part
from graders.engine.results import CheckResult, GradeResult
from graders.engine.spec import CheckSpec, ExerciseSpec
from graders.shared.vocabulary import Device, Verdict

# the verdicts whose run keeps the points its checks (and its timing) earned
KEEPS_POINTS = (Verdict.PASSED, Verdict.FAILED, Verdict.TIMEOUT, Verdict.RUNTIME_ERROR)


class PartResults:
    """The parts' outcomes, gathered into one result per check as each check's last part
    comes in; also the seconds each check took, summed over its parts."""

    def __init__(self, parts: list[Part], result: GradeResult, lock: threading.Lock):
        self.result, self.lock = result, lock
        self.left: dict[int, int] = {}
        for part in parts:
            self.left[part.index] = self.left.get(part.index, 0) + 1
        self.outcomes: dict[int, dict[int, CheckResult]] = {}
        self.done: dict[int, CheckResult] = {}

    def finish(self, part: Part, outcome: CheckResult, seconds: float) -> CheckResult | None:
        """Record a part; the check's result once its last part is in."""
        with self.lock:
            self.outcomes.setdefault(part.index, {})[part.number] = outcome
            checks = self.result.phases.setdefault("checks", {})
            checks[part.check.name] = round(checks.get(part.check.name, 0.0) + seconds, 3)
            self.left[part.index] -= 1
            if self.left[part.index]:
                return None
            outcomes = [self.outcomes[part.index][j] for j in sorted(self.outcomes[part.index])]
            failed = [o for o in outcomes if not o.passed]
            self.done[part.index] = failed[0] if failed else outcomes[0]
            return self.done[part.index]

    def checks(self) -> list[CheckResult]:
        """The checks finished, in the spec's order."""
        return [self.done[i] for i in sorted(self.done)]


def conclude_checks(state: RunState, result: GradeResult) -> list[CheckResult]:
    """The verdict the checks give, once every lane has ended (raises the run's stop, or
    the raise every check failed by); the checks that failed."""
    if state.compiled_only is not None:
        raise state.compiled_only
    if state.stop is not None:
        raise state.stop
    failed = [c for c in result.checks if not c.passed]
    if failed and len(failed) == len(result.checks) and \
            all(c.name in state.raised for c in failed):
        # every check raised: nothing of the submission works, and the first raise
        # says why (a skeleton's NotImplementedError, a kernel that never compiles)
        raise state.raised[result.checks[0].name]
    result.verdict = Verdict.FAILED if failed else Verdict.PASSED
    if failed:
        result.message = f"{len(failed)} of {len(result.checks)} checks failed: " + ", ".join(
            c.name for c in failed)
    return failed


def compiled_only(result: GradeResult, compiled: CompiledOnly) -> None:
    """HIP without a GPU: the verdict `compiled`, with the compiler's first warnings."""
    result.verdict = Verdict.COMPILED
    result.device_name = "no GPU: NVRTC compile only"
    result.message = ("it compiles (NVRTC, compute_90); without a GPU nothing was run, "
                      "so no check was made" + "".join(
                          f"\nwarning, line {w.get('line')}: {w.get('message')}"
                          for w in compiled.warnings[:20] if isinstance(w, dict)))


def mark_unrun(result: GradeResult, checks: list[CheckSpec],
               stopped_in: str | None = None) -> None:
    """Every check the run did not reach, listed as not run (with the verdict that ended
    it), all in the spec's order. The check whose call ended the run (``stopped_in``: torch
    computed the result there, say) is one of them, marked as the one that found it."""
    done = {c.name for c in result.checks}
    for check in checks:
        if check.name == stopped_in and check.name not in done:
            result.checks.append(CheckResult(
                check.name, False, f"{result.verdict.value}: the run stopped in this check",
                0.0, check.points, ran=False, line=result.line, stopped=True))
        elif check.name not in done:
            result.checks.append(CheckResult(check.name, False, f"not run: {result.verdict.value}",
                                             0.0, check.points, ran=False))
    order = {c.name: i for i, c in enumerate(checks)}
    result.checks.sort(key=lambda c: order.get(c.name, len(order)))


def score(result: GradeResult, exercise: ExerciseSpec, timed: bool) -> None:
    """The score the verdict keeps, and the most a GPU run could have scored."""
    if result.verdict in KEEPS_POINTS:
        result.score = round(sum(c.points for c in result.checks), 2)
        if result.performance and "points" in result.performance:
            result.score = round(result.score + result.performance["points"], 2)
    if result.device == Device.CUDA.value and exercise.performance and timed:
        result.max_score = 100 + exercise.performance.points
