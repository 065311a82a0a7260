"""``python -m graders selftest``: the graders grade the course's own kernels.

Every reference solution must pass. Every mutant (a known-wrong kernel from the
course, kept as a patch of its reference: graders/proof/mutants.py) must fail, on the
check its patch's header names first::

    # expect: poisoned_row — naive exp without the max subtraction

or on every one of the checks it names, separated by commas::

    # expect: poisoned_row, long_rows — naive exp, and one block per whole row

(the verdict must be ``failed`` and each named check among the failed ones; other
checks may fail too; with ``(only)`` after the names, no other check may:
``# expect: long_rows (only) — ...``), or with the verdict it names, alone
(``# expect: rejected``).
A wrong kernel written from scratch rather than from the reference (the Triton
tutorial's one program per row, say) is a whole file in ``from_scratch/``, with the
same ``# expect:`` line at its top.
On the CPU a HIP file is only compiled, so there every reference and mutant must
come out ``compiled``. A patch that no longer applies to its reference is a wrong
case that names the patch and the hunk. Anything else exits 1.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from graders.engine.checker import grade
from graders.engine.registry import all_exercises, references_root
from graders.engine.results import GradeResult
from graders.engine.spec import ExerciseSpec
from graders.isolation.sandbox import default_launcher
from graders.proof.mutants import ONLY, Mutant, PatchError, list_mutants, materialise
from graders.proof.mutants import read_expectation as read_header_expectation
from graders.proof.mutants import split_patch
from graders.shared.vocabulary import LANGUAGE_BY_SUFFIX, Device, Verdict

SUBMISSION_SUFFIXES = tuple(LANGUAGE_BY_SUFFIX)
FROM_SCRATCH = "from_scratch"  # whole wrong files, not patches of the reference


@dataclass
class Case:
    exercise: ExerciseSpec
    path: Path  # a reference solution, a mutant's patch, or a from_scratch file
    expect: tuple[str, ...]  # ("passed",), one verdict, or check names that must all fail
    why: str = ""
    mutant: Mutant | None = None  # graded as its patch applied to a temporary copy

    @property
    def suffix(self) -> str:
        """The graded file's suffix, which picks its language."""
        return self.mutant.suffix if self.mutant else self.path.suffix

    @property
    def label(self) -> str:
        return f"{self.exercise.name}/{self.path.relative_to(references_root() / self.exercise.name)}"


def read_expectation(path: Path) -> tuple[tuple[str, ...], str]:
    """The names in a mutant patch's header (a verdict, or checks that must all fail) and why."""
    return read_header_expectation(split_patch(path.read_text(), str(path))[0], str(path))


def read_file_expectation(path: Path) -> tuple[tuple[str, ...], str]:
    """A from_scratch file's expectation: the file's first line and the comments under it,
    read as a patch's header is."""
    return read_header_expectation(path.read_text(), str(path))


def validate_expectation(path: Path, expect: tuple[str, ...], checks: set[str]) -> None:
    """Every name must be one of the exercise's checks, or a verdict standing alone."""
    verdicts = {v.value for v in Verdict}
    if expect and expect[-1] == ONLY:
        expect = expect[:-1]
        if not expect or verdicts & set(expect):
            raise ValueError(f"{path}: (only) follows checks, not a verdict")
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
        for mutant in list_mutants(name):
            expect, why = read_expectation(mutant.patch)
            validate_expectation(mutant.patch, expect, {c.name for c in exercise.checks})
            cases.append(Case(exercise, mutant.patch, expect, why, mutant))
        scratch = folder / FROM_SCRATCH
        for path in sorted(scratch.iterdir()) if scratch.is_dir() else ():
            if path.suffix in SUBMISSION_SUFFIXES:
                expect, why = read_file_expectation(path)
                validate_expectation(path, expect, {c.name for c in exercise.checks})
                cases.append(Case(exercise, path, expect, why))
    return cases


def judge(case: Case, result: GradeResult) -> bool:
    failed = {c.name for c in result.checks if c.ran and not c.passed}
    if case.suffix != ".py" and result.device == Device.CPU.value:
        # HIP without a GPU is compile-only: every reference and mutant must compile
        return result.verdict is Verdict.COMPILED
    if len(case.expect) == 1 and case.expect[0] in {v.value for v in Verdict}:
        return result.verdict.value == case.expect[0]  # "passed" included
    if case.expect[-1] == ONLY:
        return result.verdict is Verdict.FAILED and set(case.expect[:-1]) == failed
    return result.verdict is Verdict.FAILED and set(case.expect) <= failed


def _shown(expect: tuple[str, ...]) -> str:
    """An expectation as its header writes it."""
    if expect and expect[-1] == ONLY:
        return ", ".join(expect[:-1]) + " " + ONLY
    return ", ".join(expect)


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

    def run(case: Case, work: Path) -> tuple[Case, GradeResult | str]:
        path = case.path
        if case.mutant is not None:
            try:
                path = materialise(case.mutant, work)
            except PatchError as exc:
                return case, str(exc)  # a patch that does not apply is a wrong case
        return case, grade(case.exercise, path, device, launcher=launcher,
                           performance=False, lanes=lanes)  # verdicts only; bench times

    wrong = 0
    result: GradeResult | str | None = None
    width = max(len(c.label) for c in cases)
    expect_width = max(len(_shown(c.expect)) for c in cases)
    with tempfile.TemporaryDirectory(prefix="selftest-mutants-") as tmp, \
            ThreadPoolExecutor(max_workers=jobs) as pool:
        for case, result in pool.map(lambda c: run(c, Path(tmp)), cases):
            expect = _shown(case.expect)
            if isinstance(result, str):
                wrong += 1
                print(f"WRONG {case.label:<{width}}  expect {expect:<{expect_width}}  "
                      f"got a patch that does not apply\n      {result}", flush=True)
                continue
            ok = judge(case, result)
            wrong += not ok
            mark = "ok   " if ok else "WRONG"
            print(f"{mark} {case.label:<{width}}  expect {expect:<{expect_width}}  "
                  f"got {describe(result)}  [{result.duration_s:.1f} s]", flush=True)
            if not ok:
                print("      " + result.message.replace("\n", "\n      "))
                for check in result.checks:
                    if check.ran and not check.passed:
                        print(f"      {check.name}: {check.message}")
    device_name = result.device_name if isinstance(result, GradeResult) else device.value
    print(f"{len(cases) - wrong} of {len(cases)} as expected on {device_name} "
          f"in {time.monotonic() - started:.0f} s")
    return 0 if wrong == 0 else 1
