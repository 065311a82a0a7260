"""The trusted side of a grading run.

It starts the runner, proves the toolchain with a known answer, has the runner
load the submission, then drives each check of the exercise: the check makes
inputs from a fresh secret seed and keeps the float64 reference; the runner
only ever sees inputs. Every reply is validated here: outputs are judged, inputs
must come back unchanged, at least one Triton kernel must have launched.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import secrets
import signal
import time
import zlib
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from . import protocol
from .arrays import HostArray, from_f64
from .casekit import Call, CaseContext, CheckFailed
from .judge import Failure
from .performance import PerformanceRejected, PerformanceRun
from .launch import CloseReport, Launcher, RunnerProcess, start_runner
from .sandbox import Limits, default_launcher
from .results import CheckResult, GradeResult
from .spec import CheckSpec, ExerciseSpec, SpecError
from .vocabulary import Device, Language, Verdict

KNOWN_ANSWER_RTOL = 1e-5


class RunStopped(Exception):
    """A problem that ends the whole run with a verdict (not just one check)."""

    def __init__(self, verdict: Verdict, message: str, line: int | None = None):
        super().__init__(message)
        self.verdict, self.message, self.line = verdict, message, line


def load_checks_module(exercise: ExerciseSpec) -> ModuleType:
    path = exercise.checks_module_path
    spec = importlib.util.spec_from_file_location(f"graders_checks_{exercise.name}", path)
    if spec is None or not path.is_file():
        raise SpecError(f"{path} is missing")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for check in exercise.checks:
        if not callable(getattr(module, check.name, None)):
            raise SpecError(f"{path} defines no check function `{check.name}`")
    return module


class Session:
    """One conversation with one runner process."""

    def __init__(self, runner: RunnerProcess, timeout_s: float, limits: Limits, sandboxed: bool):
        self.runner = runner
        self.timeout_s = timeout_s
        self.limits = limits
        self.runner_sandboxed = sandboxed

    def request(self, header: dict[str, Any], arrays: list[HostArray] | None = None,
                during: str = "", trusted: bool = False) -> protocol.Message:
        """One exchange. ``trusted``: no student code has run yet, so a death is ours."""
        try:
            self.runner.send(header, arrays)
            reply = self.runner.receive()
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError, ValueError):
            death = self._death(during)
            if trusted and death.verdict is not Verdict.TIMEOUT:
                tail = self.runner.output.text()[-500:] if self.runner.output else ""
                raise RunStopped(Verdict.GRADER_ERROR,
                                 f"the runner failed {during} ({death.message}): {tail}") from None
            raise death from None
        except protocol.ProtocolError as exc:
            raise RunStopped(Verdict.REJECTED,
                             f"the grader's channel carried a malformed reply ({exc}) {during}: "
                             "submissions must not write to the grader's channel") from None
        if not reply.header.get("ok", False):
            error = reply.header.get("error") or {}
            kind = error.get("kind", "runtime_error")
            verdict = {"compile_error": Verdict.COMPILE_ERROR, "rejected": Verdict.REJECTED,
                       "grader_error": Verdict.GRADER_ERROR, "memory_limit": Verdict.MEMORY_LIMIT,
                       "output_limit": Verdict.OUTPUT_LIMIT}.get(kind, Verdict.RUNTIME_ERROR)
            message = str(error.get("message", "unknown error"))
            line = error.get("line") if isinstance(error.get("line"), int) else None
            if line:
                message += f" (line {line} of your file)"
            if during:
                message += f" {during}"
            if error.get("traceback"):
                message += "\n" + str(error["traceback"])
            raise RunStopped(verdict, message, line)
        return reply

    def _death(self, during: str) -> RunStopped:
        runner = self.runner
        limits = self.limits
        if runner.killed_at_deadline:
            return RunStopped(Verdict.TIMEOUT,
                              f"the run went past its {self.timeout_s:g} s limit {during}: "
                              "an endless loop, or a kernel far too slow?".replace("  ", " "))
        if runner.flooded_output:
            return RunStopped(Verdict.OUTPUT_LIMIT,
                              f"the submission printed more than {limits.output_max_bytes >> 20}"
                              f" MiB {during}; it was stopped (the first "
                              f"{limits.output_keep_bytes >> 10} KiB are kept)")
        try:
            code = runner.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            code = None
        if runner.out_of_memory:
            return RunStopped(Verdict.MEMORY_LIMIT,
                              f"the submission used more than {limits.memory_bytes >> 30} GiB of "
                              f"memory {during} and was killed")
        if code is not None and code > 128 and self.runner_sandboxed:
            code = 128 - code  # bwrap exits 128 + N when its child dies of signal N
        if code is not None and code < 0 and -code == signal.SIGXCPU:
            return RunStopped(Verdict.TIMEOUT, f"the submission used up its CPU time {during}")
        if code is not None and code < 0:
            name = signal.Signals(-code).name
            hint = {"SIGSEGV": "an out-of-bounds load or store?",
                    "SIGKILL": "killed, perhaps for using too much memory",
                    "SIGBUS": "an out-of-bounds access?"}.get(name, "")
            return RunStopped(Verdict.RUNTIME_ERROR, f"the submission crashed with {name} {during}"
                              f"{': ' + hint if hint else ''}")
        return RunStopped(Verdict.RUNTIME_ERROR,
                          f"the submission's process exited (status {code}) {during}")


def _encode_args(call: Call) -> tuple[list[Any], dict[str, Any], list[HostArray]]:
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


def _changed_row(before: HostArray, after: HostArray) -> int | None:
    if before.shape != after.shape or before.dtype != after.dtype:
        return 0
    a = before.data.view(np.uint8).reshape(before.shape[0] if before.data.ndim else 1, -1)
    b = after.data.view(np.uint8).reshape(a.shape)
    rows = np.nonzero((a != b).any(axis=1))[0]
    return int(rows[0]) if rows.size else None


def resolve_device(device: Device) -> Device:
    """auto -> cuda where an NVIDIA device node exists, else the CPU interpreter."""
    if device is not Device.AUTO:
        return device
    return Device.CUDA if Path("/dev/nvidiactl").exists() and Path("/dev/nvidia0").exists() \
        else Device.CPU


class Grader:
    def __init__(self, exercise: ExerciseSpec, submission: Path, device: Device,
                 launcher: Launcher | None = None, timeout_s: float | None = None,
                 seed: int | None = None, performance: bool = True):
        self.exercise = exercise
        self.time_it = performance  # False: correctness only (selftest, many jobs on one GPU)
        self.submission = submission.resolve()
        self.language = Language.from_filename(self.submission.name) or Language.TRITON
        self.checks = applicable_checks(exercise, self.language)
        self.device = resolve_device(device)
        # the sandbox by default; raises SandboxUnavailable where bwrap is missing
        self.launcher = launcher or default_launcher(sandbox=True)
        self.timeout_s = timeout_s
        self.close_report: CloseReport | None = None
        self.seed = secrets.randbits(63) if seed is None else seed

    def rng(self, purpose: str) -> np.random.Generator:
        return np.random.default_rng([self.seed, zlib.crc32(purpose.encode())])

    def grade(self) -> GradeResult:
        started = time.monotonic()
        result = GradeResult(exercise=self.exercise.name, language=self.language.value,
                             device=self.device.value, verdict=Verdict.GRADER_ERROR, score=0.0,
                             sandboxed=self.launcher.sandboxed)
        try:
            checks_module = load_checks_module(self.exercise)
        except Exception as exc:  # noqa: BLE001 - a broken exercise folder is the grader's fault
            result.message = f"exercise {self.exercise.name} is broken: {exc}"
            return result

        # CPU and auto start alike; the runner says which device it got
        timeout = self.timeout_s or self.exercise.timeouts_s[
            Device.CUDA if self.device == Device.CUDA else Device.CPU]
        try:
            runner = start_runner(self.submission, self.device.value, timeout, self.launcher)
        except OSError as exc:
            result.message = f"could not start the runner: {exc}"
            return result
        session = Session(runner, timeout, self.launcher.limits, self.launcher.sandboxed)
        try:
            self._run(session, checks_module, result)
        except RunStopped as stop:
            result.verdict, result.message, result.line = stop.verdict, stop.message, stop.line
        finally:
            self.close_report = runner.close()
            result.output = runner.output.text()
            result.output_dropped_bytes = runner.output.dropped
            result.duration_s = round(time.monotonic() - started, 3)
        self._mark_unrun(result)
        if result.verdict in (Verdict.PASSED, Verdict.FAILED):
            result.score = round(sum(c.points for c in result.checks), 2)
            if result.performance and "points" in result.performance:
                result.score = round(result.score + result.performance["points"], 2)
        if result.device == Device.CUDA.value and self.exercise.performance and self.time_it:
            result.max_score = 100 + self.exercise.performance.points
        return result

    # -- the run ------------------------------------------------------------------------
    def _run(self, session: Session, checks_module: ModuleType, result: GradeResult) -> None:
        hello = session.request({"op": "hello"}, during="while starting", trusted=True)
        result.device = str(hello.header.get("device", result.device))
        result.device_name = str(hello.header.get("device_name", ""))
        result.versions = dict(hello.header.get("versions", {}))
        device = Device(result.device)
        self._known_answer(session)

        if self.language is Language.HIP:
            hip = self.exercise.hip
            if hip is None or "hip" not in self.exercise.languages:
                raise RunStopped(Verdict.COMPILE_ERROR,
                                 f"{self.exercise.name} takes {', '.join(self.exercise.languages)}"
                                 ", not HIP")
            load = {"op": "load", "entry_points": list(hip.kernels), "attributes": [],
                    "hip": {"block": hip.block, "kernels": hip.kernels}}
        else:
            load = {"op": "load", "entry_points": list(self.exercise.entry_points),
                    "attributes": list(self.exercise.attributes)}
        loaded = session.request(load, during="while compiling your file"
                                 if self.language is Language.HIP else "while importing your file")
        attributes = loaded.header.get("attributes", {})
        if loaded.header.get("compiled_only"):
            warnings = loaded.header.get("warnings") or []
            result.verdict = Verdict.COMPILED
            result.device_name = "no GPU: NVRTC compile only"
            result.message = ("it compiles (NVRTC, compute_90); without a GPU nothing was run, "
                              "so no check was made" + "".join(
                                  f"\nwarning, line {w.get('line')}: {w.get('message')}"
                                  for w in warnings[:20] if isinstance(w, dict)))
            return

        for check in self.checks:
            result.checks.append(self._run_check(session, checks_module, check, device, attributes))
        failed = [c for c in result.checks if not c.passed]
        result.verdict = Verdict.FAILED if failed else Verdict.PASSED
        if failed:
            result.message = f"{len(failed)} of {len(result.checks)} checks failed: " + ", ".join(
                c.name for c in failed)
        self._time(session, checks_module, result, device, bool(failed))

    def _time(self, session: Session, checks_module: ModuleType, result: GradeResult,
              device: Device, failed: bool) -> None:
        """GPU only, and only for a submission that passed: correctness gates performance."""
        spec = self.exercise.performance
        if spec is None or device is not Device.CUDA or not self.time_it:
            return
        if self.language is Language.HIP:  # HIP takes float32 only
            hip_dtypes = self.exercise.hip.dtypes
            shapes = tuple(s for s in spec.shapes if all(r.dtype in hip_dtypes for r in s.inputs))
            if not shapes:
                return
            spec = dataclasses.replace(spec, shapes=shapes)
        if failed:
            result.performance = {"skipped": "a check failed, and correctness gates performance",
                                  "points": 0.0, "max_points": spec.points}
            return
        run = PerformanceRun(spec, self.exercise.tolerances, checks_module, session,
                             self.rng("performance"), getattr(self.launcher, "gpu_index", None))
        try:
            result.performance = run.run()
        except PerformanceRejected as bad:
            result.flag = bad.message if bad.flag else None
            raise RunStopped(Verdict.REJECTED, bad.message, bad.line) from None

    def _known_answer(self, session: Session) -> None:
        x = self.rng("known_answer").standard_normal((5, 300)) * 4
        x32 = from_f64(x, "float32")
        reply = session.request({"op": "known_answer"}, [x32], during="in the known-answer kernel",
                                trusted=True)
        ref = x32.to_f64()
        m = ref.max(axis=1)
        expected = m + np.log(np.exp(ref - m[:, None]).sum(axis=1))
        got = reply.arrays[0].to_f64() if reply.arrays else np.full(5, np.nan)
        if got.shape != expected.shape or not np.allclose(got, expected, rtol=KNOWN_ANSWER_RTOL,
                                                          atol=0):
            raise RunStopped(Verdict.GRADER_ERROR,
                             "Triton computed the grader's own known-answer kernel wrong "
                             f"(got {got[:3].tolist()}, expected {expected[:3].tolist()}): the "
                             "toolchain is broken (triton 3.6's interpreter needs numpy < 2.3)")

    def _run_check(self, session: Session, module: ModuleType, check: CheckSpec, device: Device,
                   attributes: dict[str, Any]) -> CheckResult:
        ctx = CaseContext(check=check, params=dict(check.params[device]),
                          tolerances=self.exercise.tolerances, rng=self.rng(check.name),
                          device=device.value, attributes=attributes,
                          data=self.exercise.extra)
        try:
            gen = getattr(module, check.name)(ctx)
            reply = None
            while inspect.isgenerator(gen):  # a plain function judges without calling the runner
                call = gen.send(reply)
                reply = self._call(session, ctx, call, check)
            raise StopIteration
        except StopIteration:
            return CheckResult(check.name, True, "passed", check.points, check.points)
        except CheckFailed as failed:
            return CheckResult(check.name, False, self._message(check, ctx, failed.failure), 0.0,
                               check.points, failed.failure.dump)
        except RunStopped:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug in trusted check code
            raise RunStopped(Verdict.GRADER_ERROR,
                             f"check {check.name} raised {type(exc).__name__}: {exc}") from exc

    def _call(self, session: Session, ctx: CaseContext, call: Call, check: CheckSpec) -> Any:
        args, kwargs, arrays = _encode_args(call)
        during = f"in check {check.name}, calling {call.label}"
        reply = session.request({"op": "call", "fn": call.fn, "args": args, "kwargs": kwargs},
                                arrays, during=during)
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
            row = _changed_row(before, now)
            if row is not None:
                ctx.fail("input_changed",
                         f"{call.fn} changed its input (argument {i + 1}, row {row}): inputs must "
                         "not be modified; write the result to a new tensor")
        if header.get("tuple"):
            return tuple(outputs)
        return outputs[0] if outputs else None

    @staticmethod
    def _message(check: CheckSpec, ctx: CaseContext, failure: Failure) -> str:
        text = failure.text
        if failure.notes:
            text += " " + " ".join(failure.notes)
        hint = check.hint(failure.symptom)
        if hint:
            text += f": {hint}"
        if ctx.last_call is not None:
            text += f" [{ctx.last_call.label}]"
        return text

    def _mark_unrun(self, result: GradeResult) -> None:
        done = {c.name for c in result.checks}
        for check in self.checks:
            if check.name not in done:
                result.checks.append(CheckResult(check.name, False, f"not run: {result.verdict.value}",
                                                 0.0, check.points, ran=False))


def applicable_checks(exercise: ExerciseSpec, language: Language) -> list[CheckSpec]:
    """The checks a submission in ``language`` is graded on, their points scaled to 100.

    A check may name its languages (``combine`` and ``ANSWERS`` are Python); for HIP the
    dtypes of a check are cut to the HIP contract's, and a check left with none is not
    one HIP is graded on (float16 overflow, for one).
    """
    checks = []
    for check in exercise.checks:
        if check.languages is not None and language.value not in check.languages:
            continue
        if language is Language.HIP and exercise.hip is not None:
            params = {}
            for device, p in check.params.items():
                p = dict(p)
                if "dtypes" in p:
                    p["dtypes"] = [d for d in p["dtypes"] if d in exercise.hip.dtypes]
                params[device] = p
            if any("dtypes" in p and not p["dtypes"] for p in params.values()):
                continue
            check = dataclasses.replace(check, params=params)
        checks.append(check)
    total = sum(c.points for c in checks)
    if checks and abs(total - 100) > 1e-9:
        checks = [dataclasses.replace(c, points=round(c.points * 100 / total, 6)) for c in checks]
    return checks


def grade(exercise: ExerciseSpec, submission: Path, device: Device = Device.AUTO, **kwargs
          ) -> GradeResult:
    return Grader(exercise, submission, device, **kwargs).grade()
