"""The trusted side of a grading run.

It takes runners whose toolchain is proven (graders.pool), has each load the
submission, then drives the checks of the exercise over them: each check makes
inputs from a fresh secret seed and keeps the float64 reference; the runners only
ever see inputs. Every reply is validated here: outputs are judged, inputs must
come back unchanged, at least one Triton kernel must have launched. Every call has
a budget (graders.session); then, on a GPU and only if every check passed, the
graded shapes are timed on one runner alone (graders.performance).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import inspect
import secrets
import threading
import time
import zlib
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import numpy as np

from .arrays import HostArray
from .casekit import Call, CaseContext, CheckFailed
from .judge import Failure
from .launch import CloseReport, Launcher, RunnerProcess
from .performance import TIMING_BUDGET_S, PerformanceRejected, PerformanceRun, timing_request
from .pool import ReadyRunner, RunnerPool
from .results import CheckResult, GradeResult
from .sandbox import default_launcher
from .session import (CallOverrun, CallRefused, RunnerCrashed, RunStopped, Session,
                      fork_bomb_message,
                      overrun_message, run_message)
from .spec import CheckSpec, ExerciseSpec, PerformanceSpec, SpecError
from .vocabulary import Device, Language, Verdict


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


MAX_OVERRUNS = 2  # a second call past its budget ends the run as `timeout`
MAX_CRASHES = 2  # a second call that kills its runner ends the run as `runtime_error`
LOAD_BUDGET_S = 60.0  # importing (or, for HIP, compiling) the submission
# A lane beyond the first joins when a runner becomes ready, while this many checks (or
# parts of one) still wait: a runner taken costs a replacement, worth it for two at least.
JOIN_MIN_PARTS = 2
JOIN_POLL_S = 0.5


def default_lanes(device: Device) -> int:
    """Runners that share one grading's checks. On a GPU the checks are mostly Triton
    compiles, which are CPU work: four runners compile at once. On the CPU interpreter
    the cores are better spent on other gradings."""
    return 4 if device is Device.CUDA else 1


@dataclasses.dataclass
class _Lane:
    """One runner of a grading, with the submission loaded."""

    ready: ReadyRunner
    session: Session
    attributes: dict[str, Any]
    warmed: bool = False  # the timed shapes' kernels are compiled in this runner

    @property
    def process(self) -> RunnerProcess:
        return self.ready.process


@dataclasses.dataclass
class _Part:
    """A check, or one shape of it (``params`` then holds that shape alone)."""

    index: int  # the check's place in the spec
    number: int  # the part's place in the check
    check: CheckSpec
    params: dict[str, Any] | None


class _CompiledOnly(Exception):
    """HIP without a GPU: the file compiled, and nothing can run."""

    def __init__(self, warnings: list[Any]):
        super().__init__("compiled only")
        self.warnings = warnings


# CPython 3.11 keeps ast.parse's recursion count in one per-interpreter struct, so two
# threads parsing at once (a worker grading two files) can corrupt it and raise
# "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905, seen in
# our CI). Parsing takes milliseconds, so one at a time costs nothing.
_PARSE_LOCK = threading.Lock()


def parse_python(source: bytes) -> None:
    """Parses a submission's text (raising SyntaxError with its line); nothing of it runs."""
    with _PARSE_LOCK:
        ast.parse(source, filename="submission.py")


class Grader:
    """Grades one submission: its checks spread over a few runners, then its timing.

    Every call has a budget (compile and run). A call past it fails its check, the
    runner is replaced and the other checks go on; the second overrun ends the run as
    ``timeout``, with the points already earned. The run's wall clock stays as the
    last backstop.
    """

    def __init__(self, exercise: ExerciseSpec, submission: Path, device: Device,
                 launcher: Launcher | None = None, timeout_s: float | None = None,
                 seed: int | None = None, performance: bool = True,
                 pool: RunnerPool | None = None, lanes: int | None = None,
                 on_check: Callable[[CheckResult], None] | None = None,
                 call_budget_s: float | None = None, params: dict[str, Any] | None = None):
        self.exercise = exercise
        # before any runner starts: values that do not fit the spec are a ParamError
        self.params = exercise.resolve_params(params)
        self.time_it = performance  # False: correctness only (selftest, many jobs on one GPU)
        self.submission = submission.resolve()
        self.language = Language.from_filename(self.submission.name) or Language.TRITON
        self.checks = applicable_checks(exercise, self.language)
        self.device = resolve_device(device)
        if pool is not None:
            self.launcher = pool.launcher
        else:  # the sandbox by default; raises SandboxUnavailable where bwrap is missing
            self.launcher = launcher or default_launcher(sandbox=True)
        self.pool = pool or RunnerPool(self.device, self.launcher)
        self.lanes = lanes or default_lanes(self.device)
        self.timeout_s = timeout_s or exercise.run_limit_s(
            Device.CUDA if self.device == Device.CUDA else Device.CPU)
        self.budget_s = call_budget_s or exercise.call_budgets_s[
            Device.CUDA if self.device == Device.CUDA else Device.CPU]
        self.on_check = on_check
        self.close_report: CloseReport | None = None
        self.seed = secrets.randbits(63) if seed is None else seed
        self._lock = threading.Lock()
        self._stop: RunStopped | None = None
        self._lost = {"overrun": 0, "crash": 0}  # runners lost to a call, by cause
        # checks that failed because a call raised or crashed: how the run would have ended
        # before, kept in case every check did (then the verdict is that, not `failed`)
        self._raised: dict[str, RunStopped] = {}
        self._open: list[RunnerProcess] = []
        self._outputs: list[str] = []
        self._dropped = 0
        self._reports: list[CloseReport] = []
        self._compile_s: dict[str, float] = {}  # per check, as the runners report it

    def rng(self, purpose: str) -> np.random.Generator:
        return np.random.default_rng([self.seed, zlib.crc32(purpose.encode())])

    def grade(self) -> GradeResult:
        started = time.monotonic()
        self.deadline = started + self.timeout_s
        result = GradeResult(exercise=self.exercise.name, language=self.language.value,
                             device=self.device.value, verdict=Verdict.GRADER_ERROR, score=0.0,
                             sandboxed=self.launcher.sandboxed, params=dict(self.params))
        try:
            checks_module = load_checks_module(self.exercise)
        except Exception as exc:  # noqa: BLE001 - a broken exercise folder is the grader's fault
            result.message = f"exercise {self.exercise.name} is broken: {exc}"
            return result
        try:
            self._parse()
            self._run(checks_module, result)
        except RunStopped as stop:
            result.verdict, result.message, result.line = stop.verdict, stop.message, stop.line
        except _CompiledOnly as compiled:
            result.verdict = Verdict.COMPILED
            result.device_name = "no GPU: NVRTC compile only"
            result.message = ("it compiles (NVRTC, compute_90); without a GPU nothing was run, "
                              "so no check was made" + "".join(
                                  f"\nwarning, line {w.get('line')}: {w.get('message')}"
                                  for w in compiled.warnings[:20] if isinstance(w, dict)))
        finally:
            for process in list(self._open):
                self._close(process)
            self.close_report = CloseReport(
                sum(r.leftover_processes for r in self._reports),
                all(r.all_killed for r in self._reports))
            result.output = "\n".join(dict.fromkeys(o for o in self._outputs if o))
            result.output_dropped_bytes = self._dropped
            result.duration_s = round(time.monotonic() - started, 3)
            result.phases["total_s"] = result.duration_s
        self._mark_unrun(result)
        # a timeout, or a run ended by calls that crashed, keeps what the checks before it
        # earned; other stops score 0 (nothing ran, or nothing may count)
        if result.verdict in (Verdict.PASSED, Verdict.FAILED, Verdict.TIMEOUT,
                              Verdict.RUNTIME_ERROR):
            result.score = round(sum(c.points for c in result.checks), 2)
            if result.performance and "points" in result.performance:
                result.score = round(result.score + result.performance["points"], 2)
        if result.device == Device.CUDA.value and self.exercise.performance and self.time_it:
            result.max_score = 100 + self.exercise.performance.points
        return result

    def _parse(self) -> None:
        """A Python file that does not parse is answered here, in milliseconds and with its
        line, without a runner. Parsing reads the text; nothing of it runs."""
        if self.language is not Language.TRITON:
            return
        try:
            source = self.submission.read_bytes()
        except OSError:
            return  # the runner's load says what is wrong
        try:
            parse_python(source)
        except SyntaxError as exc:
            line = exc.lineno if isinstance(exc.lineno, int) else None
            where = f" (line {line} of your file)" if line else ""
            raise RunStopped(Verdict.COMPILE_ERROR, f"{type(exc).__name__}: {exc.msg}{where} "
                                                    "while importing your file", line) from None
        except (ValueError, RecursionError, MemoryError):
            return  # null bytes, nesting too deep: the runner's import reports it

    # -- runners --------------------------------------------------------------------------
    def _open_lane(self, result: GradeResult, extra: bool = False,
                   wait_s: float = 0.0) -> _Lane | None:
        """A ready runner, armed with the run's deadline, with the submission loaded.
        ``extra``: a lane beyond the first takes only a runner that is ready now or within
        ``wait_s`` (None if there is none); starting one cold would take longer than the
        checks."""
        ready = self.pool.take_ready(wait_s) if extra and self.pool.warm else self.pool.take()
        if ready is None:
            return None
        process = ready.process
        with self._lock:
            self._open.append(process)
            result.phases["runners"] = result.phases.get("runners", 0) + 1
            stopped = self._stop is not None
        if stopped:
            raise _LaneStopped()
        process.arm(self.deadline - time.monotonic())
        hello = ready.hello
        with self._lock:
            if not result.device_name:
                result.device = str(hello.get("device", result.device))
                result.device_name = str(hello.get("device_name", ""))
                result.versions = dict(hello.get("versions", {}))
                result.phases.update(ready.phases)
        session = Session(process, self.timeout_s, self.launcher.limits, self.launcher.sandboxed)
        path = process.place_submission(self.submission)
        if self.language is Language.HIP:
            hip = self.exercise.hip
            if hip is None or "hip" not in self.exercise.languages:
                raise RunStopped(Verdict.COMPILE_ERROR,
                                 f"{self.exercise.name} takes {', '.join(self.exercise.languages)}"
                                 ", not HIP")
            load = {"op": "load", "path": path, "entry_points": list(hip.kernels),
                    "attributes": [], "hip": {"block": hip.block, "kernels": hip.kernels}}
            during = "while compiling your file"
        else:
            load = {"op": "load", "path": path, "entry_points": list(self.exercise.entry_points),
                    "attributes": list(self.exercise.attributes)}
            during = "while importing your file"
        loading = time.monotonic()
        try:
            loaded = session.request(load, during=during, budget_s=LOAD_BUDGET_S)
        except CallOverrun:
            raise RunStopped(Verdict.TIMEOUT, f"your file was still loading after "
                                              f"{LOAD_BUDGET_S:g} s {during}") from None
        with self._lock:
            result.phases.setdefault("load_s", round(time.monotonic() - loading, 3))
        if loaded.header.get("compiled_only"):
            raise _CompiledOnly(loaded.header.get("warnings") or [])
        return _Lane(ready, session, loaded.header.get("attributes", {}))

    def _close(self, process: RunnerProcess) -> None:
        with self._lock:
            if process not in self._open:
                return
            self._open.remove(process)
        report = process.close()
        with self._lock:
            self._reports.append(report)
            if process.output is not None:
                self._outputs.append(process.output.text())
                self._dropped += process.output.dropped

    def _stop_all(self, stop: RunStopped) -> None:
        """The first stop wins; every other runner is killed at once."""
        with self._lock:
            if self._stop is None:
                self._stop = stop
            victims = list(self._open)
        for process in victims:
            process.kill()

    # -- the run ------------------------------------------------------------------------
    def _parts(self, lanes: int) -> list[_Part]:
        """The units the lanes share. With several lanes, a check over several shapes is
        run one shape at a time (its parts), so that no single check holds the run up;
        with one lane every check is one part, as written."""
        parts = []
        for index, check in enumerate(self.checks):
            params = check.params[self.device]
            shapes = params.get("shapes")
            if lanes > 1 and isinstance(shapes, list) and len(shapes) > 1:
                parts += [_Part(index, j, check, {**params, "shapes": [shape]})
                          for j, shape in enumerate(shapes)]
            else:
                parts.append(_Part(index, 0, check, None))
        return parts

    def _run(self, checks_module: ModuleType, result: GradeResult) -> None:
        lanes = max(1, min(self.lanes, len(self.checks)))
        todo = self._parts(lanes)
        todo.reverse()  # popped from the end: checks start in the spec's order
        parts_left = {i: sum(1 for p in todo if p.index == i) for i in range(len(self.checks))}
        part_results: dict[int, dict[int, CheckResult]] = {}
        done: dict[int, CheckResult] = {}
        kept: list[_Lane] = []
        checks_started = time.monotonic()

        def next_check() -> _Part | None:
            with self._lock:
                if self._stop is not None or not todo:
                    return None
                return todo.pop()

        def finish(part: _Part, outcome: CheckResult, seconds: float) -> CheckResult | None:
            """Record a part; the check's result once its last part is in."""
            with self._lock:
                part_results.setdefault(part.index, {})[part.number] = outcome
                checks = result.phases.setdefault("checks", {})
                checks[part.check.name] = round(checks.get(part.check.name, 0.0) + seconds, 3)
                parts_left[part.index] -= 1
                if parts_left[part.index]:
                    return None
                outcomes = [part_results[part.index][j] for j in sorted(part_results[part.index])]
                failed = [o for o in outcomes if not o.passed]
                done[part.index] = failed[0] if failed else outcomes[0]
                return done[part.index]

        timed = self._timed_spec()
        warm_first = [timed is not None and lanes > 1]  # one lane compiles for the timing

        def work(number: int) -> None:
            lane: _Lane | None = None
            try:
                if number:  # lanes beyond the first run only on runners that are ready,
                    while lane is None:  # or become ready while enough checks still wait
                        with self._lock:
                            if self._stop is not None or len(todo) < JOIN_MIN_PARTS:
                                return
                        lane = self._open_lane(result, extra=True, wait_s=JOIN_POLL_S)
                with self._lock:
                    warm, warm_first[0] = warm_first[0], False
                if warm:
                    lane = lane or self._open_lane(result)
                    lane = self._warm_up(lane, timed, result)
                while (part := next_check()) is not None:
                    check = part.check
                    if lane is None:
                        lane = self._open_lane(result)
                    began = time.monotonic()
                    try:
                        # shared per part: a timing on this GPU (another slot's) waits at
                        # most one part for the GPU, and this part waits for that timing
                        with self.pool.gpu_gate.shared():
                            outcome = self._run_check(lane, checks_module, part)
                    except _LaneLost as lost:
                        outcome = lost.result
                        # a fork bomb's call may answer (EAGAIN) before its processes are
                        # counted: count them now, and end the run rather than start another
                        bomb = lane.process.over_process_cap()
                        self._close(lane.process)
                        lane = None
                        if bomb:
                            raise RunStopped(Verdict.RUNTIME_ERROR,
                                             fork_bomb_message(bomb, f"in check {check.name}"))
                        self._count_lost(lost.cause, outcome)
                    complete = finish(part, outcome, time.monotonic() - began)
                    if complete is not None and self.on_check:
                        self.on_check(complete)
            except _LaneStopped:
                pass
            except (RunStopped, _CompiledOnly) as stop:
                with self._lock:
                    late = self._stop is not None  # killed because another lane stopped
                if not late:
                    if isinstance(stop, _CompiledOnly):
                        with self._lock:
                            self._compiled_only = stop
                        stop = RunStopped(Verdict.COMPILED, "compiled only")
                    self._stop_all(stop)
            except BaseException as exc:  # noqa: BLE001 - a bug of ours: stop, don't hang
                self._stop_all(RunStopped(Verdict.GRADER_ERROR, f"the grader failed: {exc!r}"))
            finally:
                if lane is not None:
                    with self._lock:
                        kept.append(lane)

        self._compiled_only: _CompiledOnly | None = None
        threads = [threading.Thread(target=work, args=(i,), name=f"lane-{i}", daemon=True)
                   for i in range(lanes)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        result.phases["checks_s"] = round(time.monotonic() - checks_started, 3)
        if self._compile_s:
            result.phases["compile_reported"] = dict(self._compile_s)
        result.checks = [done[i] for i in sorted(done)]
        if self._compiled_only is not None:
            raise self._compiled_only
        if self._stop is not None:
            raise self._stop

        failed = [c for c in result.checks if not c.passed]
        if failed and len(failed) == len(result.checks) and \
                all(c.name in self._raised for c in failed):
            # every check raised: nothing of the submission works, and the first raise
            # says why (a skeleton's NotImplementedError, a kernel that never compiles)
            raise self._raised[result.checks[0].name]
        result.verdict = Verdict.FAILED if failed else Verdict.PASSED
        if failed:
            result.message = f"{len(failed)} of {len(result.checks)} checks failed: " + ", ".join(
                c.name for c in failed)
        if timed is None or result.device != Device.CUDA.value:
            return
        if failed:
            result.performance = {"skipped": "a check failed, and correctness gates performance",
                                  "points": 0.0, "max_points": timed.points}
            return
        # the runner that compiled for the timing times; the others leave the GPU first
        kept.sort(key=lambda k: not k.warmed)
        lane = kept[0] if kept else None
        for other in kept[1:]:
            self._close(other.process)
        if lane is None or lane.process.proc.poll() is not None:
            lane = self._open_lane(result)
        timing_started = time.monotonic()
        try:
            # only now, the lanes' threads joined: none of this grading holds the gate shared
            # (a thread asking exclusive while one of its own held it would wait for ever).
            # Warm runners being made, and other slots' checks on this GPU, keep off it.
            with self.pool.gpu_gate.exclusive():
                result.phases["timing_gate_wait_s"] = round(time.monotonic() - timing_started, 3)
                self._time(lane.session, timed, checks_module, result)
        finally:
            result.phases["timing_s"] = round(time.monotonic() - timing_started, 3)

    def _count_lost(self, cause: str, outcome: CheckResult) -> None:
        """A runner lost to one call (it overran its budget, or died): the check failed and
        a fresh runner takes the rest; the second loss of a kind ends the run."""
        with self._lock:
            self._lost[cause] += 1
            lost = self._lost[cause]
        if cause == "overrun" and lost >= MAX_OVERRUNS:
            self._stop_all(RunStopped(
                Verdict.TIMEOUT, f"{lost} calls ran past their {self.budget_s:g} s budget "
                f"(the last: {outcome.message}); the run was stopped, and the checks already "
                "passed keep their points"))
        elif cause == "crash" and lost >= MAX_CRASHES:
            self._stop_all(RunStopped(
                Verdict.RUNTIME_ERROR, f"{lost} calls crashed their runner (the last: "
                f"{outcome.message}); the run was stopped, and the checks already passed keep "
                "their points"))

    def _timed_spec(self) -> PerformanceSpec | None:
        """The graded shapes this submission is timed on, if it is timed at all."""
        spec = self.exercise.performance
        if spec is None or self.device is not Device.CUDA or not self.time_it:
            return None
        if self.language is Language.HIP:  # HIP takes float32 only
            hip_dtypes = self.exercise.hip.dtypes
            shapes = tuple(s for s in spec.shapes if all(r.dtype in hip_dtypes for r in s.inputs))
            if not shapes:
                return None
            spec = dataclasses.replace(spec, shapes=shapes)
        return spec

    def _warm_up(self, lane: _Lane, spec: PerformanceSpec, result: GradeResult) -> _Lane | None:
        """Compile the timed shapes' kernels in this lane while the others check. A runner
        that overruns here is replaced; the overrun counts only when timing repeats it."""
        started = time.monotonic()
        rng = self.rng("warmup")
        for shape in spec.shapes:
            request = {"op": "perf_warmup", **timing_request(shape, int(rng.integers(0, 2**31)))}
            try:
                with self.pool.gpu_gate.shared():  # it runs the kernel once: GPU work
                    lane.session.request(request, during=f"while compiling for {shape.label}",
                                         budget_s=self.budget_s)
            except CallOverrun:
                self._close(lane.process)
                return None
        lane.warmed = True
        with self._lock:
            result.phases["timing_warmup_s"] = round(time.monotonic() - started, 3)
        return lane

    def _time(self, session: Session, spec: PerformanceSpec, checks_module: ModuleType,
              result: GradeResult) -> None:
        """Times ``spec``'s shapes: GPU only, after every check passed."""
        run = PerformanceRun(spec, self.exercise.tolerances, checks_module, session,
                             self.rng("performance"), getattr(self.launcher, "gpu_index", None),
                             budget_s=self.budget_s + TIMING_BUDGET_S)
        try:
            result.performance = run.run()
        except PerformanceRejected as bad:
            result.flag = bad.message if bad.flag else None
            raise RunStopped(Verdict.REJECTED, bad.message, bad.line) from None
        except CallOverrun as over:
            result.performance = {
                "skipped": overrun_message(over, over.during.removeprefix("while timing ")),
                "points": 0.0, "max_points": spec.points}

    def _run_check(self, lane: _Lane, module: ModuleType, part: _Part) -> CheckResult:
        check = part.check
        # compile seconds as the runner reports them: for the operator's breakdown only
        compiled = [0.0]

        def on_progress(event: dict[str, Any]) -> None:
            if event.get("event") == "compiled" and isinstance(event.get("seconds"), (int, float)):
                compiled[0] += min(float(event["seconds"]), 3600.0)

        lane.session.on_progress = on_progress
        try:
            return self._judge_check(lane, module, part)
        finally:
            lane.session.on_progress = None
            if compiled[0]:
                with self._lock:
                    self._compile_s[check.name] = round(
                        self._compile_s.get(check.name, 0.0) + compiled[0], 3)

    def _judge_check(self, lane: _Lane, module: ModuleType, part: _Part) -> CheckResult:
        check = part.check
        device = Device(lane.ready.hello.get("device", self.device.value))
        params = part.params if part.params is not None else check.params[device]
        rng = self.rng(check.name if part.params is None else f"{check.name}/{part.number}")
        ctx = CaseContext(check=check, params=dict(params),
                          tolerances=self.exercise.tolerances, rng=rng,
                          device=device.value, attributes=lane.attributes,
                          data=self.exercise.extra, submission_params=dict(self.params),
                          param_specs={p.name: p for p in self.exercise.params})
        try:
            gen = getattr(module, check.name)(ctx)
            reply = None
            while inspect.isgenerator(gen):  # a plain function judges without calling the runner
                call = gen.send(reply)
                try:
                    reply = self._call(lane.session, ctx, call, check)
                except CallRefused as refused:
                    line = f" (line {refused.line} of your file)" if refused.line else ""
                    if refused.kind == "block_too_large":
                        raise CheckFailed(Failure("block", f"{call.label} {refused.message}"
                                                  f"{line}", line=refused.line)) from None
                    self._note_raise(check, call, refused)
                    failure = Failure("raised", f"{call.label} raised {refused.message}{line}",
                                      line=refused.line)
                    if not refused.healthy:  # the device is broken: a fresh runner goes on
                        raise _LaneLost(self._failed(check, ctx, failure), "crash") from None
                    raise CheckFailed(failure) from None
                except RunnerCrashed as crash:
                    with self._lock:
                        self._raised.setdefault(check.name, crash)
                    raise _LaneLost(self._failed(check, ctx, Failure("crashed", crash.message)),
                                    "crash") from None
                except CallOverrun as over:
                    failure = Failure("budget", overrun_message(over, call.label))
                    raise _LaneLost(self._failed(check, ctx, failure), "overrun") from None
            raise StopIteration
        except StopIteration:
            return CheckResult(check.name, True, "passed", check.points, check.points)
        except CheckFailed as failed:
            return CheckResult(check.name, False, self._message(check, ctx, failed.failure), 0.0,
                               check.points, failed.failure.dump, line=failed.failure.line)
        except (RunStopped, _LaneLost, _LaneStopped):
            raise
        except Exception as exc:  # noqa: BLE001 - a bug in trusted check code
            raise RunStopped(Verdict.GRADER_ERROR,
                             f"check {check.name} raised {type(exc).__name__}: {exc}") from exc

    def _failed(self, check: CheckSpec, ctx: CaseContext, failure: Failure) -> CheckResult:
        return CheckResult(check.name, False, self._message(check, ctx, failure), 0.0,
                           check.points, line=failure.line)

    def _note_raise(self, check: CheckSpec, call: Call, refused: CallRefused) -> None:
        """Keep what a raise would have ended the run with, worded as it was then."""
        message = run_message(refused.message, refused.line,
                              f"in check {check.name}, calling {call.label}", refused.traceback)
        verdict = Verdict.COMPILE_ERROR if refused.kind == "compile_error" else Verdict.RUNTIME_ERROR
        with self._lock:
            self._raised.setdefault(check.name, RunStopped(verdict, message, refused.line))

    def _call(self, session: Session, ctx: CaseContext, call: Call, check: CheckSpec) -> Any:
        args, kwargs, arrays = _encode_args(call)
        during = f"in check {check.name}, calling {call.label}"
        with self._lock:
            if self._stop is not None:
                raise _LaneStopped()
        reply = session.request({"op": "call", "fn": call.fn, "args": args, "kwargs": kwargs},
                                arrays, during=during, budget_s=self.budget_s,
                                raises_fail_check=True)
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
                         "not be modified")
        if header.get("tuple"):
            return tuple(outputs)
        return outputs[0] if outputs else None

    def _message(self, check: CheckSpec, ctx: CaseContext, failure: Failure) -> str:
        text = failure.text
        if failure.notes:
            text += " " + " ".join(failure.notes)
        hint = check.hints.get(failure.symptom) or self.exercise.hints.get(failure.symptom) \
            or check.hint(failure.symptom)
        if hint:
            text += f": {hint}"
        if ctx.last_call is not None and ctx.last_call.label not in failure.text:
            text += f" [{ctx.last_call.label}]"
        return text

    def _mark_unrun(self, result: GradeResult) -> None:
        done = {c.name for c in result.checks}
        for check in self.checks:
            if check.name not in done:
                result.checks.append(CheckResult(check.name, False, f"not run: {result.verdict.value}",
                                                 0.0, check.points, ran=False))
        order = {c.name: i for i, c in enumerate(self.checks)}
        result.checks.sort(key=lambda c: order.get(c.name, len(order)))


class _LaneLost(Exception):
    """A check's call cost its runner (``cause``: "overrun", past its budget; "crash", the
    runner died or its device broke): the check has failed, the runner is thrown away."""

    def __init__(self, result: CheckResult, cause: str):
        super().__init__(result.message)
        self.result, self.cause = result, cause


class _LaneStopped(Exception):
    """Another lane stopped the run; this one leaves quietly."""


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
