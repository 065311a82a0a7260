"""The plan of a grading, made before any runner starts: where it runs, which checks the
submission's language is graded on, how they are cut into parts for the lanes, which
shapes are timed. A file that does not parse is answered here. Nothing here runs anything
of the submission.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from graders.engine.spec import CheckSpec, ExerciseSpec, PerformanceSpec, SpecError
from graders.isolation import RunStopped
from graders.shared.vocabulary import Device, Language, Verdict


def grading_device(device: Device) -> Device:
    """The device a grading runs on: auto -> cuda where an NVIDIA device node exists, else
    the CPU interpreter."""
    if device is not Device.AUTO:
        return device
    return Device.CUDA if Path("/dev/nvidiactl").exists() and Path("/dev/nvidia0").exists() \
        else Device.CPU


def default_lanes(device: Device) -> int:
    """Runners that share one grading's checks. On a GPU the checks are mostly Triton
    compiles, which are CPU work: four runners compile at once. On the CPU interpreter
    the cores are better spent on other gradings."""
    return 4 if device is Device.CUDA else 1


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


# What a Triton kernel is likely compiled for, as a lane can guess it before the call: the
# input's dtype, the power of two that holds its row (a block sized by
# triton.next_power_of_2), and the integer specialisations Triton makes of a row length and
# a row count (equal to 1, divisible by 16). A guess only steers which part a lane takes.
CompileGuess = tuple[str | None, int, bool, bool, bool]


def _guess(rows: int, cols: int, dtype: str | None) -> CompileGuess:
    block = 1 << max(0, int(cols) - 1).bit_length()
    return (dtype, block, cols % 16 == 0, rows == 1, rows % 16 == 0)


def compile_guesses(params: dict[str, Any]) -> frozenset[CompileGuess]:
    """The compiles a check's ``params`` (its shapes, [rows, ..., cols], and dtypes) likely
    need; none where it names no shapes."""
    shapes = params.get("shapes")
    dtypes = params.get("dtypes") or [None]
    if not isinstance(shapes, list):
        return frozenset()
    return frozenset(_guess(shape[0], shape[-1], dtype) for shape in shapes
                     if isinstance(shape, list) and len(shape) >= 2
                     and all(isinstance(n, int) for n in shape) for dtype in dtypes)


def timed_guesses(timed: PerformanceSpec | None) -> frozenset[CompileGuess]:
    """The compiles the timed shapes likely need (their first input's rows and dtype)."""
    if timed is None:
        return frozenset()
    return frozenset(_guess(s.rows, s.cols, s.dtype) for s in timed.shapes)


@dataclasses.dataclass(frozen=True)
class Part:
    """A check, or one shape of it (``params`` then holds that shape alone)."""

    index: int  # the check's place in the spec
    number: int  # the part's place in the check
    check: CheckSpec
    params: dict[str, Any] | None
    compiles: frozenset[CompileGuess] = frozenset()  # compile_guesses of its params


def plan_parts(checks: list[CheckSpec], device: Device, lanes: int) -> list[Part]:
    """The units the lanes share. With several lanes, a check over several shapes is
    run one shape at a time (its parts), so that no single check holds the run up;
    with one lane every check is one part, as written."""
    parts = []
    for index, check in enumerate(checks):
        params = check.params[device]
        shapes = params.get("shapes")
        if lanes > 1 and isinstance(shapes, list) and len(shapes) > 1:
            for j, shape in enumerate(shapes):
                own = {**params, "shapes": [shape]}
                parts.append(Part(index, j, check, own, compile_guesses(own)))
        else:
            parts.append(Part(index, 0, check, None, compile_guesses(params)))
    return parts


def pick_part(todo: list[Part], mine: set[CompileGuess], others: set[CompileGuess]) -> int:
    """Which of ``todo`` (in the spec's order) a lane takes next, ``mine`` what its runner
    has compiled (or is compiling), ``others`` what the grading's other lanes have.

    Each lane's runner compiles the submission's kernels for itself (a Triton cache is a
    process's own), so a part whose kernels another lane compiled costs those compiles
    again: the part that repeats fewest of them, among those the one that reuses most of
    this lane's, then the spec's order. A lane never waits for another to compile."""
    def cost(i: int) -> tuple[int, int, int]:
        wanted = todo[i].compiles
        return (len((wanted & others) - mine), -len(wanted & mine), i)
    return min(range(len(todo)), key=cost)


def timed_spec(exercise: ExerciseSpec, device: Device, language: Language,
               time_it: bool) -> PerformanceSpec | None:
    """The graded shapes this submission is timed on, if it is timed at all."""
    spec = exercise.performance
    if spec is None or device is not Device.CUDA or not time_it:
        return None
    if language is Language.HIP:  # HIP takes float32 only
        hip_dtypes = exercise.hip.dtypes
        shapes = tuple(s for s in spec.shapes if all(r.dtype in hip_dtypes for r in s.inputs))
        if not shapes:
            return None
        spec = dataclasses.replace(spec, shapes=shapes)
    return spec


def load_checks_module(exercise: ExerciseSpec) -> ModuleType:
    """The exercise's trusted check functions (its checks.py), each one the spec names."""
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


# CPython 3.11 keeps ast.parse's recursion count in one per-interpreter struct, so two
# threads parsing at once (a worker grading two files) can corrupt it and raise
# "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905, seen in
# our CI). Parsing takes milliseconds, so one at a time costs nothing.
_PARSE_LOCK = threading.Lock()


def parse_python(source: bytes) -> None:
    """Parses a submission's text (raising SyntaxError with its line); nothing of it runs."""
    with _PARSE_LOCK:
        ast.parse(source, filename="submission.py")


def refuse_unparsable(submission: Path, language: Language) -> None:
    """A Python file that does not parse is answered here, in milliseconds and with its
    line, without a runner (``RunStopped``, compile_error). Parsing reads the text; nothing
    of it runs."""
    if language is not Language.TRITON:
        return
    try:
        source = submission.read_bytes()
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
