"""What both platforms' entry points do, in the order that matters.

Confinement is decided first: a container that cannot confine code grades nothing, whatever
was submitted. Then the file is found, then graded. Every way this ends is an ``Outcome``
the platform turns into its results.json; an unexpected fault of the grader becomes one
too, so the platform always has a results.json to show, and the entry point then exits 0:
PrairieLearn's grader host reads results.json only after an exit status of 0, and a
Gradescope run that wrote one has nothing more to say with its status. What staff must
see (a fault, a container that cannot confine) goes to the log (stderr).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import stat
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graders.engine.registry import get_exercise
from graders.integrations.confinement import CannotConfine, choose
from graders.integrations.grading import Graded, NoSubmission, find_submission, grade_file
from graders.shared.paths import REPO_ROOT

log = logging.getLogger(__name__)

CANNOT_CONFINE = ("The autograder could not confine your submission, so it did not run it "
                  "(it never runs submitted code unconfined). Your score is 0 for now; this is "
                  "not your fault, and course staff must fix the autograder's container: {why}")


@dataclass
class Outcome:
    kind: str  # "graded", "cannot_confine", "no_submission", "grader_fault"
    message: str = ""  # what the student reads
    graded: Graded | None = None
    detail: str = ""  # what staff read in the log, where it says more than ``message``

    @property
    def for_staff(self) -> str | None:
        """What the log says when the autograder, not the student, needs attention."""
        if self.kind == "graded":
            result = self.graded.result
            if result.get("verdict") == "grader_error":
                return f"GRADER ERROR: {result.get('message', '')}"
            return None
        if self.kind in ("cannot_confine", "grader_fault"):
            return f"{self.kind.upper().replace('_', ' ')}: {self.detail or self.message}"
        return None


def _open_to_job_uids() -> None:
    """Where the submission runs as a job uid, that uid imports the runner from graders/:
    a platform may have unpacked it readable by root alone. Best effort; the confinement
    probe that follows says plainly if the uid still cannot read it."""
    for folder, dirs, files in os.walk(REPO_ROOT / "graders"):
        for name in [folder, *(os.path.join(folder, f) for f in files)]:
            try:
                mode = os.stat(name).st_mode
                os.chmod(name, mode | 0o004 | (0o001 if stat.S_ISDIR(mode) else 0))
            except OSError:
                pass


def grade_folder(exercise: str, folder: Path, params: dict[str, Any] | None = None) -> Outcome:
    try:
        spec = get_exercise(exercise)
        _open_to_job_uids()
        try:
            confinement = choose()
        except CannotConfine as exc:
            return Outcome("cannot_confine", CANNOT_CONFINE.format(why=exc))
        try:
            submission = find_submission(folder, spec)
        except NoSubmission as exc:
            return Outcome("no_submission", str(exc))
        return Outcome("graded", graded=grade_file(exercise, submission, confinement, params))
    except Exception:  # noqa: BLE001 - the platform must still get a results.json
        log.error("grader fault:\n%s", traceback.format_exc())
        return Outcome("grader_fault", "The autograder failed before it could grade your file. "
                                       "This is not your fault; course staff have the log.")


def _results_folder(results: Path) -> None:
    results.mkdir(parents=True, exist_ok=True)
    os.chmod(results, 0o755)  # the grader's alone to write, whatever runs as the job uid


def write_results(results: Path, data: dict) -> None:
    """``results/results.json``, written beside and renamed: the platform never reads half
    a file."""
    _results_folder(results)
    with tempfile.NamedTemporaryFile("w", dir=results, delete=False, suffix=".tmp") as fh:
        fh.write(json.dumps(data, indent=2))
    os.replace(fh.name, results / "results.json")
    os.chmod(results / "results.json", 0o644)


def report(outcome: Outcome, results: Path, results_of: Callable[[Outcome], dict]) -> Outcome:
    """The outcome as the platform's results.json, and in the log what staff must see."""
    write_results(results, results_of(outcome))
    if outcome.for_staff:
        log.error("%s", outcome.for_staff)
    return outcome


def grade_into_results(exercise: str, submission: Path, results: Path,
                       results_of: Callable[[Outcome], dict],
                       params: dict[str, Any] | None = None) -> Outcome:
    """Grade ``submission`` and write the platform's ``results/results.json``."""
    _results_folder(results)  # before anything of the submission runs
    return report(grade_folder(exercise, submission, params), results, results_of)


def main(module: str, root_env: str, default_root: str, run: Callable[[str, Path], Outcome],
         argv: Sequence[str] | None = None) -> int:
    """``python -m graders.integrations.PLATFORM EXERCISE``: the platform's folder from
    ``root_env`` (the tests lay out a temporary one) or its usual place. Exit status 0
    once results.json is written, whatever it says (the module's docstring says why)."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    p = argparse.ArgumentParser(prog=f"python -m {module}")
    p.add_argument("exercise")
    args = p.parse_args(argv)
    outcome = run(args.exercise, Path(os.environ.get(root_env, default_root)))
    print(f"{outcome.kind}: results.json written", file=sys.stderr)
    return 0
