"""``python -m graders selftest``: the graders grade the course's own kernels.

Every reference solution must pass. Every mutant (a known-wrong kernel from the
course) must fail, on the check its first line names::

    # expect: poisoned_row — naive exp without the max subtraction

or with the verdict it names (``# expect: rejected``). Anything else exits 1.
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

_EXPECT = re.compile(r"^(?:#|//)\s*expect:\s*([a-z_]+)\s*(?:[—-]+\s*(.*))?$")
SUBMISSION_SUFFIXES = (".py", ".hip", ".cpp")


@dataclass
class Case:
    exercise: ExerciseSpec
    path: Path
    expect: str  # "passed", a check name, or a verdict
    why: str = ""

    @property
    def label(self) -> str:
        return f"{self.exercise.name}/{self.path.relative_to(references_root() / self.exercise.name)}"


def read_expectation(path: Path) -> tuple[str, str]:
    first = path.read_text().splitlines()[0] if path.read_text() else ""
    match = _EXPECT.match(first.strip())
    if not match:
        raise ValueError(f"{path}: the first line must be '# expect: CHECK — why'")
    return match.group(1), (match.group(2) or "").strip()


def collect(only: list[str] | None = None) -> list[Case]:
    cases = []
    for name, exercise in all_exercises().items():
        if only and name not in only:
            continue
        folder = references_root() / name
        refs = sorted(p for p in folder.iterdir() if p.suffix in SUBMISSION_SUFFIXES)
        if not refs:
            raise ValueError(f"exercise {name} has no reference solution under {folder}")
        cases += [Case(exercise, p, "passed") for p in refs]
        for path in sorted(p for p in (folder / "mutants").iterdir()
                           if p.suffix in SUBMISSION_SUFFIXES):
            expect, why = read_expectation(path)
            known = {c.name for c in exercise.checks} | {v.value for v in Verdict}
            if expect not in known:
                raise ValueError(f"{path}: expects {expect!r}, which is neither a check nor a verdict")
            cases.append(Case(exercise, path, expect, why))
    return cases


def judge(case: Case, result: GradeResult) -> bool:
    failed = {c.name for c in result.checks if c.ran and not c.passed}
    if case.path.suffix != ".py" and result.device == Device.CPU.value:
        # HIP without a GPU is compile-only: every reference and mutant must compile
        return result.verdict is Verdict.COMPILED
    if case.expect == "passed":
        return result.verdict is Verdict.PASSED
    if case.expect in {v.value for v in Verdict}:
        return result.verdict.value == case.expect
    return result.verdict is Verdict.FAILED and case.expect in failed


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

    def run(case: Case) -> tuple[Case, GradeResult]:
        return case, grade(case.exercise, case.path, device, launcher=launcher,
                           performance=False)  # verdicts only; bench times

    wrong = 0
    width = max(len(c.label) for c in cases)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for case, result in pool.map(run, cases):
            ok = judge(case, result)
            wrong += not ok
            mark = "ok   " if ok else "WRONG"
            print(f"{mark} {case.label:<{width}}  expect {case.expect:<26} got {describe(result)}"
                  f"  [{result.duration_s:.1f} s]", flush=True)
            if not ok:
                print("      " + result.message.replace("\n", "\n      "))
                for check in result.checks:
                    if check.ran and not check.passed:
                        print(f"      {check.name}: {check.message}")
    device_name = result.device_name if cases else device.value
    print(f"{len(cases) - wrong} of {len(cases)} as expected on {device_name} "
          f"in {time.monotonic() - started:.0f} s")
    return 0 if wrong == 0 else 1
