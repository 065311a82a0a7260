"""Gradescope: the autograder zip, and what ``run_autograder`` runs for each submission.

Gradescope unpacks the zip into /autograder/source and runs ``setup.sh`` once, as root, to
build the image; for each submission it puts the student's files in
/autograder/submission, runs /autograder/run_autograder and uploads
/autograder/results/results.json. ``GRADESCOPE_ROOT`` stands in for /autograder (the tests
lay out a temporary one), ``GRADERS_PYTHON`` for the image's interpreter.

    python -m graders.integrations.gradescope EXERCISE     (what run_autograder runs)
"""

from __future__ import annotations

import sys
import tempfile
import zipfile
from pathlib import Path

from . import entry, formats
from .bundle import VENV, copy_grader, install_script
from .entry import Outcome, grade_into_results

ROOT_ENV = "GRADESCOPE_ROOT"

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this for each submission, as root, in a fresh container, from /autograder.
# It only starts the graders; they decide how to confine the submission and always write
# results/results.json (docs/integrations.md).
ROOT="${{GRADESCOPE_ROOT:-/autograder}}"
PYTHON="${{GRADERS_PYTHON:-{venv}/bin/python}}"
cd "$ROOT/source" || exit 2
exec "$PYTHON" -m graders.integrations.gradescope {exercise}
"""

SETUP_HEADER = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image. It installs
# Debian's bubblewrap and the graders' pinned CPU toolchain (versions from requirements.txt).
"""
# the job uid that may run a submission must read the graders it imports
SETUP_FOOTER = "chmod -R o+rX /autograder/source\n"


def results_of(outcome: Outcome) -> dict:
    if outcome.kind == "graded":
        return formats.gradescope(outcome.graded.result, outcome.graded.confinement)
    return formats.gradescope_refusal(outcome.message)


def run(exercise: str, root: Path) -> int:
    outcome = grade_into_results(exercise, root / "submission", root / "results", results_of)
    print(f"{outcome.kind}: results.json written", file=sys.stderr)
    return outcome.exit_status


def build_zip(exercise: str, out: Path) -> Path:
    """The zip course staff upload: setup.sh and run_autograder at its root."""
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp)
        copy_grader(exercise, stage)
        (stage / "setup.sh").write_text(SETUP_HEADER + install_script() + SETUP_FOOTER)
        (stage / "run_autograder").write_text(RUN_AUTOGRADER.format(venv=VENV,
                                                                    exercise=exercise))
        out.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(stage.rglob("*")):
                if path.is_file():
                    info = zipfile.ZipInfo.from_file(path, path.relative_to(stage).as_posix())
                    # executable where Gradescope runs it; zip keeps the mode in the upper bits
                    mode = 0o755 if path.name in ("setup.sh", "run_autograder") else 0o644
                    info.external_attr = (0o100000 | mode) << 16
                    info.compress_type = zipfile.ZIP_DEFLATED
                    zf.writestr(info, path.read_bytes())
    return out


def main(argv: list[str] | None = None) -> int:
    return entry.main("graders.integrations.gradescope", ROOT_ENV, "/autograder", run, argv)


if __name__ == "__main__":
    sys.exit(main())
