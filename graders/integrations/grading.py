"""Find the student's file in a platform's submission folder, and grade it, confined.

The student submits one Triton file named ``solution.py``. Platforms rename uploads or wrap
them in folders (a GitHub submission on Gradescope), so a folder holding exactly one
``.py`` file is taken as well; anything else is refused with a message that says what to
submit. A HIP file is refused with its own message: without a GPU it could only be
compiled (the verdict ``compiled``, no score), so the platforms' CPU containers do not take
it; the course's GPU server grades HIP. Grading is the engine's, on the CPU interpreter,
with a wall clock the platform's own timeout leaves room for; its result is the CLI's JSON
(GradeResult.to_json).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graders.engine.checker import Grader
from graders.engine.registry import get_exercise
from graders.engine.spec import ExerciseSpec
from graders.integrations.confinement import Confinement
from graders.shared.vocabulary import Device, Language

EXPECTED_NAME = "solution.py"  # the one file a platform's student submits
# The run's wall clock in a platform's container. The slowest file of the course's corpus
# took 30 s to grade on this CPU (reduce_online_pairs.py, docs/verification.md); four times
# that leaves room for a slower host, and PrairieLearn's timeout adds start-up on top.
PLATFORM_TIMEOUT_S = 120
HIP_ELSEWHERE = ("{name} is HIP: this autograder runs on the CPU, where a HIP file can only be "
                 "compiled, not run or scored. Submit your HIP kernel to the course's GPU "
                 "server, and here a Triton file named solution.py.")


class NoSubmission(Exception):
    """The folder holds no file this exercise can grade (the student's to fix)."""


def find_submission(folder: Path, spec: ExerciseSpec) -> Path:
    """The one file to grade in ``folder`` (searched recursively; hidden entries skipped)."""
    files = [p for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()
             and not any(part.startswith((".", "__MACOSX"))
                         for part in p.relative_to(folder).parts)]
    graded = [p for p in files if Language.from_filename(p.name) is Language.TRITON]
    for choice in ([p for p in graded if p.name == EXPECTED_NAME], graded):
        if len(choice) == 1:
            return choice[0]
    hip = [p for p in files if Language.from_filename(p.name) is Language.HIP]
    if not graded and hip:
        raise NoSubmission(HIP_ELSEWHERE.format(name=hip[0].relative_to(folder)))
    found = ", ".join(str(p.relative_to(folder)) for p in graded) or "no such file"
    raise NoSubmission(f"submit one file named {EXPECTED_NAME} for {spec.name} "
                       f"(found: {found})")


@dataclass
class Graded:
    result: dict[str, Any]  # GradeResult.to_json(), as `graders grade --json` prints it
    confinement: str


def grade_file(exercise: str, submission: Path, confinement: Confinement,
               params: dict[str, Any] | None = None) -> Graded:
    """``params``: the student's own values of the exercise's parameters (the platform
    derives them: graders.engine.params.derive); a value outside the spec's choices is a fault of
    the autograder's set-up (ParamError), never the student's."""
    spec = get_exercise(exercise)
    grader = Grader(spec, submission, Device.CPU, launcher=confinement.launcher,
                    performance=False, timeout_s=PLATFORM_TIMEOUT_S, params=params)
    try:
        result = grader.grade()
    finally:
        grader.pool.close()  # one grading per container: no runner is kept for a next one
    return Graded(result.to_json(), confinement.description)
