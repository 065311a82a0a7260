"""Find the student's file in a platform's submission folder, and grade it, confined.

The student submits one file named ``solution.py`` (Triton) or ``solution.hip`` (HIP;
``solution.cpp`` too). Platforms rename uploads or wrap them in folders (a GitHub
submission on Gradescope), so a folder holding exactly one file of a graded language is
taken as well; anything else is refused with a message that says what to submit. Grading is
the engine's, on the CPU interpreter, and its result is the CLI's JSON (GradeResult.to_json).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checker import Grader
from ..registry import get_exercise
from ..spec import ExerciseSpec
from ..vocabulary import LANGUAGE_BY_SUFFIX, Device, Language
from .confinement import Confinement

EXPECTED_STEM = "solution"  # the platforms' file is solution.<a suffix of its language>


class NoSubmission(Exception):
    """The folder holds no file this exercise can grade (the student's to fix)."""


def expected_names(spec: ExerciseSpec) -> list[str]:
    return [EXPECTED_STEM + suffix for lang in spec.languages
            for suffix, its in LANGUAGE_BY_SUFFIX.items() if its == lang]


def find_submission(folder: Path, spec: ExerciseSpec) -> Path:
    """The one file to grade in ``folder`` (searched recursively; hidden entries skipped)."""
    names = expected_names(spec)
    files = [p for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()
             and not any(part.startswith((".", "__MACOSX"))
                         for part in p.relative_to(folder).parts)]
    graded = [p for p in files if (lang := Language.from_filename(p.name)) is not None
              and lang.value in spec.languages]
    for choice in ([p for p in graded if p.name in names], graded):
        if len(choice) == 1:
            return choice[0]
    found = ", ".join(str(p.relative_to(folder)) for p in graded) or "no such file"
    raise NoSubmission(f"submit one file named {' or '.join(names)} for {spec.name} "
                       f"(found: {found})")


@dataclass
class Graded:
    result: dict[str, Any]  # GradeResult.to_json(), as `graders grade --json` prints it
    confinement: str


def grade_file(exercise: str, submission: Path, confinement: Confinement) -> Graded:
    spec = get_exercise(exercise)
    grader = Grader(spec, submission, Device.CPU, launcher=confinement.launcher,
                    performance=False)
    try:
        result = grader.grade()
    finally:
        grader.pool.close()  # one grading per container: no runner is kept for a next one
    return Graded(result.to_json(), confinement.description)
