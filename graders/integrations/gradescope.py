"""Gradescope: the autograder zip, and what ``run_autograder`` runs for each submission.

Gradescope unpacks the zip into /autograder/source and runs ``setup.sh`` once, as root, to
build the image; for each submission it puts the student's files in
/autograder/submission and their account and earlier results in
/autograder/submission_metadata.json, runs /autograder/run_autograder and uploads
/autograder/results/results.json. ``GRADESCOPE_ROOT`` stands in for /autograder (the tests
lay out a temporary one), ``GRADERS_PYTHON`` for the image's interpreter.

    python -m graders.integrations.gradescope EXERCISE     (what run_autograder runs)
"""

from __future__ import annotations

import json
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from graders.engine import params
from graders.engine.registry import get_exercise
from graders.integrations import entry, formats
from graders.integrations.bundle import (SECRET_NAME, VENV, copy_grader, install_script,
                                         protect_secret, read_secret, write_secret)
from graders.integrations.entry import Outcome, grade_into_results

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
# the job uid that may run a submission must read the graders it imports, and never the key
# of the students' parameters
SETUP_FOOTER = f"""\
SOURCE="${{GRADESCOPE_ROOT:-/autograder}}/source"
chmod -R o+rX "$SOURCE"
[ ! -e "$SOURCE/{SECRET_NAME}" ] || chmod 600 "$SOURCE/{SECRET_NAME}"
"""

# Gradescope's "Manual Docker configuration": an image the course builds and pushes itself,
# pinned, which Gradescope then runs as it is
DOCKERFILE = """\
# A pinned image for Gradescope's manual Docker configuration, from this folder (the zip,
# unpacked):
#   docker build --platform linux/amd64 -t YOUR_DOCKERHUB_USER/{exercise}-autograder .
#   docker push YOUR_DOCKERHUB_USER/{exercise}-autograder
# then give that name on the assignment's "Configure Autograder" page (Manual Docker).
# torch comes from pip's configured index, or from the index given as
#   --build-arg GRADERS_TORCH_INDEX=...   (PyTorch's CPU wheel index: the CPU build)
FROM gradescope/autograder-base:ubuntu-22.04
ARG GRADERS_TORCH_INDEX=
COPY . /autograder/source
RUN bash /autograder/source/setup.sh && rm -rf /root/.cache/pip \\
    && cp /autograder/source/run_autograder /autograder/run_autograder \\
    && chmod 755 /autograder/run_autograder
"""

PARAMS_SOURCE = "derived from your Gradescope account"


def _metadata(root: Path) -> dict[str, Any]:
    try:
        data = json.loads((root / "submission_metadata.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def identity(metadata: dict[str, Any]) -> str | None:
    """Who submitted: the account's email, lowercased (a group's, the first in order)."""
    emails = sorted(str(u.get("email", "")).strip().lower() for u in metadata.get("users", [])
                    if isinstance(u, dict) and u.get("email"))
    return emails[0] if emails else None


def previous_result(metadata: dict[str, Any]) -> dict[str, Any] | None:
    """The results.json of the student's latest earlier submission, if Gradescope gave it."""
    earlier = [s for s in metadata.get("previous_submissions", []) if isinstance(s, dict)
               and isinstance(s.get("results"), dict)]
    earlier.sort(key=lambda s: str(s.get("submission_time", "")))
    return earlier[-1]["results"] if earlier else None


class NoIdentity(Exception):
    """The exercise has parameters, and nothing says whose (or with which key)."""


def student_params(exercise: str, root: Path, metadata: dict[str, Any]) -> dict[str, Any] | None:
    """The submitter's own values of the exercise's parameters (graders.engine.params.derive, the
    server's rule), keyed by the zip's secret; None for an exercise without parameters."""
    spec = get_exercise(exercise)
    if not spec.params:
        return None
    who, secret = identity(metadata), read_secret(root / "source")
    if who is None or secret is None:
        raise NoIdentity(f"{exercise} gives each student parameters of their own, but "
                         + ("submission_metadata.json names no user" if who is None
                            else f"the zip holds no {SECRET_NAME}"))
    return params.derive(secret, who, spec.name, spec.params)


def results_of(outcome: Outcome, previous: dict[str, Any] | None = None) -> dict:
    if outcome.kind == "graded":
        result = outcome.graded.result
        if result.get("verdict") == "grader_error":
            return formats.gradescope_fault(formats.summary(result, outcome.graded.confinement),
                                            previous)
        return formats.gradescope(result, outcome.graded.confinement, PARAMS_SOURCE)
    if outcome.kind == "grader_fault":
        return formats.gradescope_fault(outcome.message, previous)
    return formats.gradescope_refusal(outcome.message)


def run(exercise: str, root: Path) -> Outcome:
    protect_secret(root / "source")  # before anything of the submission runs
    metadata = _metadata(root)
    previous = previous_result(metadata)
    results_for = lambda outcome: results_of(outcome, previous)  # noqa: E731
    try:
        own = student_params(exercise, root, metadata)
    except NoIdentity as exc:
        return entry.report(Outcome("grader_fault", "The autograder could not tell whose "
                                    "parameters to grade with, so it graded nothing.",
                                    detail=str(exc)), root / "results", results_for)
    return grade_into_results(exercise, root / "submission", root / "results", results_for, own)


def build_zip(exercise: str, out: Path, secret: str | None = None) -> Path:
    """The zip course staff upload: setup.sh and run_autograder at its root (and, for an
    exercise with parameters, the key they are derived with)."""
    spec = get_exercise(exercise)
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp)
        copy_grader(exercise, stage)
        (stage / "setup.sh").write_text(SETUP_HEADER + install_script() + SETUP_FOOTER)
        (stage / "run_autograder").write_text(RUN_AUTOGRADER.format(venv=VENV,
                                                                    exercise=exercise))
        (stage / "Dockerfile").write_text(DOCKERFILE.format(exercise=exercise))
        if spec.params:
            write_secret(stage, secret)
        out.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(stage.rglob("*")):
                if path.is_file():
                    info = zipfile.ZipInfo.from_file(path, path.relative_to(stage).as_posix())
                    # executable where Gradescope runs it, the key for root alone; zip keeps
                    # the mode in the upper bits
                    mode = {"setup.sh": 0o755, "run_autograder": 0o755,
                            SECRET_NAME: 0o600}.get(path.name, 0o644)
                    info.external_attr = (0o100000 | mode) << 16
                    info.compress_type = zipfile.ZIP_DEFLATED
                    zf.writestr(info, path.read_bytes())
    return out


def main(argv: list[str] | None = None) -> int:
    return entry.main("graders.integrations.gradescope", ROOT_ENV, "/autograder", run, argv)


if __name__ == "__main__":
    sys.exit(main())
