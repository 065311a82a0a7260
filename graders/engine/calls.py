"""One check (or part of one) driven over one lane.

The exercise's check function is a generator: it makes inputs from the part's own seed,
yields each call, and judges what comes back against its float64 answer. Every reply is
validated here before the check sees it: a Triton kernel must have launched, the reply
must add up, inputs must come back unchanged. What a call cost (a raise, a crash, an
overrun) becomes the check's failure, worded in the course's words.
"""

from __future__ import annotations

import inspect
import time
from types import ModuleType
from typing import Any

import numpy as np

from graders.engine.casekit import Call, CaseContext, CheckFailed
from graders.engine.context import Grading, Lane, LaneLost, LaneStopped
from graders.engine.judge import Failure
from graders.engine.plan import Part
from graders.engine.results import CheckResult
from graders.engine.spec import CheckSpec
from graders.isolation import (CallOverrun, CallRefused, RunnerCrashed, RunStopped, Session,
                               overrun_message, run_message)
from graders.shared.arrays import HostArray
from graders.shared.vocabulary import Device, Verdict


def encode_args(call: Call) -> tuple[list[Any], dict[str, Any], list[HostArray]]:
    """A call's arguments as the runner reads them: arrays sent beside the header, by
    index; infinities and NaN spelled out (JSON has none)."""
    arrays: list[HostArray] = []

    def enc(v: Any) -> Any:
        if isinstance(v, HostArray):
            arrays.append(v)
            return {"a": len(arrays) - 1}
        if isinstance(v, float) and not np.isfinite(v):
            return {"f": repr(v)}
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        raise TypeError(f"cannot send {type(v).__name__} to the runner")

    args = [enc(a) for a in call.args]
    kwargs = {k: enc(v) for k, v in call.kwargs.items()}
    return args, kwargs, arrays


def changed_row(before: HostArray, after: HostArray) -> int | None:
    """The first row whose bytes a call changed (0 if the shape or dtype changed)."""
    if before.shape != after.shape or before.dtype != after.dtype:
        return 0
    a = before.data.view(np.uint8).reshape(before.shape[0] if before.data.ndim else 1, -1)
    b = after.data.view(np.uint8).reshape(a.shape)
    # a row's bytes compared as the widest words they divide into: 8 bytes at a time, not 1
    # (every call's inputs are compared, on the checker's CPU)
    if a.flags.c_contiguous and b.flags.c_contiguous:
        for word in (np.uint64, np.uint32, np.uint16):
            if a.shape[1] % np.dtype(word).itemsize == 0:
                a, b = a.view(word), b.view(word)
                break
    rows = np.nonzero((a != b).any(axis=1))[0]
    return int(rows[0]) if rows.size else None


class CheckDriver:
    """Runs the parts of one grading's checks, one at a time per lane."""

    def __init__(self, grading: Grading, module: ModuleType):
        self.g = grading
        self.module = module

    def run(self, lane: Lane, part: Part, lane_number: int = 0) -> CheckResult:
        """The part's result; compile seconds the runner reports are added up on the side
        (for the operator's breakdown only), and the part goes on the grading's timeline."""
        compiled = [0.0]

        def on_progress(event: dict[str, Any]) -> None:
            if event.get("event") == "compiled" and isinstance(event.get("seconds"), (int, float)):
                compiled[0] += min(float(event["seconds"]), 3600.0)

        lane.session.on_progress = on_progress
        began = time.monotonic()
        try:
            return self._judge(lane, part)
        finally:
            lane.session.on_progress = None
            if compiled[0]:
                self.g.state.add_compile_s(part.check.name, compiled[0])
            self.g.state.note_span(lane_number, f"{part.check.name}/{part.number}", began,
                                   self.g.started, time.monotonic(), compiled[0])

    def _context(self, lane: Lane, part: Part) -> CaseContext:
        check, exercise = part.check, self.g.exercise
        device = Device(lane.ready.hello.get("device", self.g.device.value))
        params = part.params if part.params is not None else check.params[device]
        rng = self.g.rng(check.name if part.params is None else f"{check.name}/{part.number}")
        return CaseContext(check=check, params=dict(params), tolerances=exercise.tolerances,
                           rng=rng, device=device.value, attributes=lane.attributes,
                           data=exercise.extra, submission_params=dict(self.g.params),
                           param_specs={p.name: p for p in exercise.params})

    def _judge(self, lane: Lane, part: Part) -> CheckResult:
        check = part.check
        ctx = self._context(lane, part)
        try:
            gen = getattr(self.module, check.name)(ctx)
            reply = None
            while inspect.isgenerator(gen):  # a plain function judges without calling the runner
                call = gen.send(reply)
                reply = self._call_judged(lane.session, ctx, call, check)
            raise StopIteration
        except StopIteration:
            return CheckResult(check.name, True, "passed", check.points, check.points)
        except CheckFailed as failed:
            return CheckResult(check.name, False, self._message(check, ctx, failed.failure), 0.0,
                               check.points, failed.failure.dump, line=failed.failure.line)
        except (RunStopped, LaneLost, LaneStopped):
            raise
        except Exception as exc:  # noqa: BLE001 - a bug in trusted check code
            raise RunStopped(Verdict.GRADER_ERROR,
                             f"check {check.name} raised {type(exc).__name__}: {exc}") from exc

    def _call_judged(self, session: Session, ctx: CaseContext, call: Call,
                     check: CheckSpec) -> Any:
        """One call's reply, or what the call cost as the check's failure: a refusal fails
        the check (a broken device also costs the runner); a crash or an overrun costs the
        runner (``LaneLost``)."""
        try:
            return self._call(session, ctx, call, check)
        except CallRefused as refused:
            line = f" (line {refused.line} of your file)" if refused.line else ""
            if refused.kind == "block_too_large":
                raise CheckFailed(Failure("block", f"{call.label} {refused.message}{line}",
                                          line=refused.line)) from None
            self._note_raise(check, call, refused)
            failure = Failure("raised", f"{call.label} raised {refused.message}{line}",
                              line=refused.line)
            if not refused.healthy:  # the device is broken: a fresh runner goes on
                raise LaneLost(self._failed(check, ctx, failure), "crash") from None
            raise CheckFailed(failure) from None
        except RunnerCrashed as crash:
            self.g.state.note_raised(check.name, crash)
            raise LaneLost(self._failed(check, ctx, Failure("crashed", crash.message)),
                           "crash") from None
        except CallOverrun as over:
            failure = Failure("budget", overrun_message(over, call.label))
            raise LaneLost(self._failed(check, ctx, failure),
                           "gpu_overrun" if over.on_gpu else "overrun") from None

    def _call(self, session: Session, ctx: CaseContext, call: Call, check: CheckSpec) -> Any:
        args, kwargs, arrays = encode_args(call)
        during = f"in check {check.name}, calling {call.label}"
        if self.g.state.stopped:
            raise LaneStopped()
        # the GPU gate held shared while the call runs GPU work, not while it compiles (the
        # runner asks, graders.runner.gpu_gate): a timing on this GPU (another slot's) waits
        # for the kernels in flight, not for the compiles, and this call waits for it
        reply = session.request({"op": "call", "fn": call.fn, "args": args,
                                 "kwargs": kwargs}, arrays, during=during,
                                budget_s=self.g.budget_s, raises_fail_check=True,
                                gate=self.g.pool.gpu_gate, gate_hold_s=self.g.gpu_hold_s)
        header = reply.header
        if not isinstance(header.get("launches"), int) or header["launches"] < 1:
            raise RunStopped(Verdict.REJECTED,
                             f"{call.fn} returned without launching a Triton kernel {during}: "
                             "the work must be done in Triton kernels")
        n_out = header.get("outputs")
        if header.get("output_problem"):
            ctx.fail("type", f"{call.fn} {header['output_problem']}")
        if not isinstance(n_out, int) or len(reply.arrays) != n_out + len(arrays):
            raise RunStopped(Verdict.REJECTED, f"the runner's reply does not add up {during}")
        outputs, after = reply.arrays[:n_out], reply.arrays[n_out:]
        for i, (before, now) in enumerate(zip(arrays, after)):
            row = changed_row(before, now)
            if row is not None:
                ctx.fail("input_changed",
                         f"{call.fn} changed its input (argument {i + 1}, row {row}): inputs must "
                         "not be modified")
        if header.get("tuple"):
            return tuple(outputs)
        return outputs[0] if outputs else None

    def _failed(self, check: CheckSpec, ctx: CaseContext, failure: Failure) -> CheckResult:
        return CheckResult(check.name, False, self._message(check, ctx, failure), 0.0,
                           check.points, line=failure.line)

    def _note_raise(self, check: CheckSpec, call: Call, refused: CallRefused) -> None:
        """Keep what a raise would have ended the run with, worded as it was then."""
        message = run_message(refused.message, refused.line,
                              f"in check {check.name}, calling {call.label}", refused.traceback)
        verdict = Verdict.COMPILE_ERROR if refused.kind == "compile_error" \
            else Verdict.RUNTIME_ERROR
        self.g.state.note_raised(check.name, RunStopped(verdict, message, refused.line))

    def _message(self, check: CheckSpec, ctx: CaseContext, failure: Failure) -> str:
        """The failure in the course's words: the check's hint for its symptom (or the
        exercise's, or the check's default), and the call it was seen in."""
        text = failure.text
        if failure.notes:
            text += " " + " ".join(failure.notes)
        hint = check.hints.get(failure.symptom) or self.g.exercise.hints.get(failure.symptom) \
            or check.hint(failure.symptom)
        if hint:
            text += f": {hint}"
        if ctx.last_call is not None and ctx.last_call.label not in failure.text:
            text += f" [{ctx.last_call.label}]"
        return text
