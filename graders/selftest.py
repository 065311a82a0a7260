"""``python -m graders selftest``: the graders grade the course's own kernels.

Every reference solution must pass. Every mutant (a known-wrong kernel from the
course) must fail, on the check its first line names::

    # expect: poisoned_row — naive exp without the max subtraction

or on every one of the checks it names, separated by commas::

    # expect: poisoned_row, long_rows — naive exp, and one block per whole row

(the verdict must be ``failed`` and each named check among the failed ones; other
checks may fail too), or with the verdict it names, alone (``# expect: rejected``).
HIP files use ``//`` instead of ``#``. On the CPU a HIP file is only compiled, so
there every reference and mutant must come out ``compiled``. Anything else exits 1.
"""

from __future__ import annotations

import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .checker import grade
from .registry import all_exercises, references_root
from .results import GradeResult
from .sandbox import default_launcher
from .spec import ExerciseSpec
from .vocabulary import Device, Verdict

_NAME = r"[a-z_][a-z0-9_]*"
_EXPECT = re.compile(rf"^(?:#|//)\s*expect:\s*({_NAME}(?:\s*,\s*{_NAME})*)\s*(?:[—-]+\s*(.*))?$")
SUBMISSION_SUFFIXES = (".py", ".hip", ".cpp")


@dataclass
class Case:
    exercise: ExerciseSpec
    path: Path
    expect: tuple[str, ...]  # ("passed",), one verdict, or check names that must all fail
    why: str = ""

    @property
    def label(self) -> str:
        return f"{self.exercise.name}/{self.path.relative_to(references_root() / self.exercise.name)}"


def read_expectation(path: Path) -> tuple[tuple[str, ...], str]:
    """The names on a mutant's first line (a verdict, or checks that must all fail) and why."""
    lines = path.read_text().splitlines()
    match = _EXPECT.match(lines[0].strip()) if lines else None
    if not match:
        raise ValueError(f"{path}: the first line must be '# expect: CHECK[, CHECK...] — why'")
    names = tuple(name.strip() for name in match.group(1).split(","))
    return names, (match.group(2) or "").strip()


def validate_expectation(path: Path, expect: tuple[str, ...], checks: set[str]) -> None:
    """Every name must be one of the exercise's checks, or a verdict standing alone."""
    verdicts = {v.value for v in Verdict}
    for name in expect:
        if name not in checks | verdicts:
            raise ValueError(f"{path}: expects {name!r}, which is neither a check nor a verdict")
    if len(set(expect)) != len(expect):
        raise ValueError(f"{path}: names a check twice in {', '.join(expect)}")
    if len(expect) > 1 and verdicts & set(expect):
        raise ValueError(f"{path}: a verdict must stand alone, not in a list ({', '.join(expect)})")


def collect(only: list[str] | None = None) -> list[Case]:
    cases = []
    for name, exercise in all_exercises().items():
        if only and name not in only:
            continue
        folder = references_root() / name
        refs = sorted(p for p in folder.iterdir() if p.suffix in SUBMISSION_SUFFIXES)
        if not refs:
            raise ValueError(f"exercise {name} has no reference solution under {folder}")
        cases += [Case(exercise, p, ("passed",)) for p in refs]
        for path in sorted(p for p in (folder / "mutants").iterdir()
                           if p.suffix in SUBMISSION_SUFFIXES):
            expect, why = read_expectation(path)
            validate_expectation(path, expect, {c.name for c in exercise.checks})
            cases.append(Case(exercise, path, expect, why))
    return cases


def judge(case: Case, result: GradeResult) -> bool:
    failed = {c.name for c in result.checks if c.ran and not c.passed}
    if case.path.suffix != ".py" and result.device == Device.CPU.value:
        # HIP without a GPU is compile-only: every reference and mutant must compile
        return result.verdict is Verdict.COMPILED
    if len(case.expect) == 1 and case.expect[0] in {v.value for v in Verdict}:
        return result.verdict.value == case.expect[0]  # "passed" included
    return result.verdict is Verdict.FAILED and set(case.expect) <= failed


def describe(result: GradeResult) -> str:
    if result.verdict is Verdict.FAILED:
        failed = [c.name for c in result.checks if c.ran and not c.passed]
        return f"failed: {', '.join(failed)}"
    if result.verdict is Verdict.PASSED:
        return f"passed ({result.score:g})"
    return f"{result.verdict.value}: {result.message.splitlines()[0][:100]}"


def run_selftest(device: Device, jobs: int | None = None, only: list[str] | None = None,
                 sandbox: bool = True) -> int:
    try:
        cases = collect(only)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if jobs is None:
        jobs = 1 if device is Device.CUDA else max(1, os.cpu_count() or 1)
    started = time.monotonic()
    print(f"selftest on {device.value}: {len(cases)} gradings, {jobs} at a time", flush=True)

    launcher = default_launcher(sandbox=sandbox)  # fails early, with the fix, without bwrap

    # gradings already run side by side: one runner each, so the host is not oversubscribed
    lanes = 1 if jobs > 1 else None

    def run(case: Case) -> tuple[Case, GradeResult]:
        return case, grade(case.exercise, case.path, device, launcher=launcher,
                           performance=False, lanes=lanes)  # verdicts only; bench times

    wrong = 0
    width = max(len(c.label) for c in cases)
    expect_width = max(len(", ".join(c.expect)) for c in cases)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for case, result in pool.map(run, cases):
            ok = judge(case, result)
            wrong += not ok
            mark = "ok   " if ok else "WRONG"
            expect = ", ".join(case.expect)
            print(f"{mark} {case.label:<{width}}  expect {expect:<{expect_width}}  "
                  f"got {describe(result)}  [{result.duration_s:.1f} s]", flush=True)
            if not ok:
                print("      " + result.message.replace("\n", "\n      "))
                for check in result.checks:
                    if check.ran and not check.passed:
                        print(f"      {check.name}: {check.message}")
    device_name = result.device_name if cases else device.value
    print(f"{len(cases) - wrong} of {len(cases)} as expected on {device_name} "
          f"in {time.monotonic() - started:.0f} s")
    return 0 if wrong == 0 else 1
