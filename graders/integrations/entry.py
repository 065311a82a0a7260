"""What both platforms' entry points do, in the order that matters.

Confinement is decided first: a container that cannot confine code grades nothing, whatever
was submitted. Then the file is found, then graded. Every way this ends is an ``Outcome``
the platform turns into its results.json; an unexpected fault of the grader becomes one
too, so the platform always has a results.json to show.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import stat
import tempfile
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..registry import REPO_ROOT, get_exercise
from .confinement import CannotConfine, choose
from .grading import Graded, NoSubmission, find_submission, grade_file

log = logging.getLogger(__name__)

CANNOT_CONFINE = ("The autograder could not confine your submission, so it did not run it "
                  "(it never runs submitted code unconfined). Your score is 0 for now; this is "
                  "not your fault, and course staff must fix the autograder's container: {why}")


@dataclass
class Outcome:
    kind: str  # "graded", "cannot_confine", "no_submission", "grader_fault"
    message: str = ""
    graded: Graded | None = None

    @property
    def exit_status(self) -> int:
        """0 when the student's work was judged (any verdict); else the platform's log and
        its failed-run marker tell staff the autograder needs them."""
        if self.kind == "graded":
            return 2 if self.graded.result.get("verdict") == "grader_error" else 0
        return 0 if self.kind == "no_submission" else 3


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


def grade_folder(exercise: str, folder: Path) -> Outcome:
    try:
        spec = get_exercise(exercise)
        _open_to_job_uids()
        try:
            confinement = choose()
        except CannotConfine as exc:
            log.error("cannot confine: %s", exc)
            return Outcome("cannot_confine", CANNOT_CONFINE.format(why=exc))
        try:
            submission = find_submission(folder, spec)
        except NoSubmission as exc:
            return Outcome("no_submission", str(exc))
        return Outcome("graded", graded=grade_file(exercise, submission, confinement))
    except Exception:  # noqa: BLE001 - the platform must still get a results.json
        log.error("grader fault:\n%s", traceback.format_exc())
        return Outcome("grader_fault", "The autograder failed before it could grade your file. "
                                       "This is not your fault; course staff have the log.")


def grade_into_results(exercise: str, submission: Path, results: Path,
                       results_of: Callable[[Outcome], dict]) -> Outcome:
    """Grade ``submission`` and write the platform's ``results/results.json``."""
    results.mkdir(parents=True, exist_ok=True)
    os.chmod(results, 0o755)  # the grader's alone to write, whatever runs as the job uid
    outcome = grade_folder(exercise, submission)
    # written beside, then renamed: the platform never reads half a file
    with tempfile.NamedTemporaryFile("w", dir=results, delete=False, suffix=".tmp") as fh:
        fh.write(json.dumps(results_of(outcome), indent=2))
    os.replace(fh.name, results / "results.json")
    os.chmod(results / "results.json", 0o644)
    return outcome


def main(module: str, root_env: str, default_root: str, run: Callable[[str, Path], int],
         argv: Sequence[str] | None = None) -> int:
    """``python -m graders.integrations.PLATFORM EXERCISE``: the platform's folder from
    ``root_env`` (the tests lay out a temporary one) or its usual place."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    p = argparse.ArgumentParser(prog=f"python -m {module}")
    p.add_argument("exercise")
    args = p.parse_args(argv)
    return run(args.exercise, Path(os.environ.get(root_env, default_root)))
