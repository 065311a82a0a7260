"""PrairieLearn: a course-directory snippet, and the external grader's entry point.

PrairieLearn copies the question's ``serverFilesCourse`` entries to /grade/serverFilesCourse,
the student's files to /grade/student and the submission's data to /grade/data/data.json,
runs the question's ``entrypoint`` in the course's image, and reads
/grade/results/results.json. ``PRAIRIELEARN_GRADE_ROOT`` stands in for /grade (tests).

    python -m graders.integrations.prairielearn EXERCISE     (what the entry point runs)
"""

from __future__ import annotations

import html
import json
import logging
import shutil
import sys
import uuid
from pathlib import Path

from ..registry import get_exercise
from . import entry, formats
from .bundle import VENV, copy_grader, install_script
from .entry import Outcome, grade_into_results

ROOT_ENV = "PRAIRIELEARN_GRADE_ROOT"
GRADER_DIR = "softmax_autograder"  # under serverFilesCourse/, shared by every exercise's question
IMAGE = "YOUR_DOCKERHUB_USER/softmax-autograder-cpu:latest"  # staff build it from the Dockerfile
TIMEOUT_S = 600  # the engine's own wall clock is 300 s; start-up and imports take the rest

ENTRY = """\
#!/usr/bin/env bash
# PrairieLearn's entry point for {exercise}: it runs in the course's image, as root, with the
# course's serverFilesCourse/{grader_dir} copied to /grade/serverFilesCourse/{grader_dir}.
ROOT="${{PRAIRIELEARN_GRADE_ROOT:-/grade}}"
PYTHON="${{GRADERS_PYTHON:-{venv}/bin/python}}"
cd "$ROOT/serverFilesCourse/{grader_dir}" || exit 2
exec "$PYTHON" -m graders.integrations.prairielearn {exercise}
"""

DOCKERFILE = """\
# The external grader's image: Ubuntu 24.04, bubblewrap and the graders' pinned CPU toolchain.
# docker build -t {image} . && docker push {image}
FROM ubuntu:24.04
COPY install_toolchain.sh /tmp/install_toolchain.sh
RUN bash /tmp/install_toolchain.sh && rm /tmp/install_toolchain.sh
"""


def results_of(outcome: Outcome) -> dict:
    if outcome.kind == "graded":
        return formats.prairielearn(outcome.graded.result, outcome.graded.confinement)
    # the student's own mistake uses an attempt; a broken grader must not
    return formats.prairielearn_refusal(outcome.message, gradable=outcome.kind == "no_submission")


def _submitted_names(root: Path) -> list[str]:
    """The file names data.json says were submitted (for the log; the files are in student/)."""
    try:
        data = json.loads((root / "data" / "data.json").read_text())
        return [f.get("name", "?") for f in data.get("submitted_answers", {}).get("_files", [])]
    except (OSError, ValueError, AttributeError):
        return []


def run(exercise: str, root: Path) -> int:
    logging.getLogger(__name__).info("submitted: %s", ", ".join(_submitted_names(root)) or "?")
    return grade_into_results(exercise, root / "student", root / "results",
                              results_of).exit_status


def _question_html(spec) -> str:
    title, summary = html.escape(spec.title), html.escape(spec.summary)
    return f"""\
<pl-question-panel>
  <p><strong>{title}.</strong> {summary}</p>
  <p>Write your Triton kernel in <code>solution.py</code>; the entry points are
  <code>{html.escape(", ".join(spec.entry_points))}</code>. The full statement:
  <a href="{{{{options.client_files_question_url}}}}/statement.md">statement.md</a>.
  It is graded on Triton's CPU interpreter: correctness only, no timing.</p>
</pl-question-panel>

<pl-file-editor file-name="solution.py" ace-mode="ace/mode/python"
                directory="clientFilesQuestion" source-file-name="skeleton.py"></pl-file-editor>

<pl-submission-panel>
  <pl-external-grader-results></pl-external-grader-results>
  <pl-file-preview></pl-file-preview>
</pl-submission-panel>
"""


def _info_json(spec) -> dict:
    return {
        # a name-based uuid: building the snippet again gives the question the same identity
        "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"softmax-autograder/{spec.name}")),
        "title": spec.title, "topic": "Softmax & Fused Kernels", "tags": ["triton", "A07"],
        "type": "v3", "singleVariant": True, "gradingMethod": "External",
        "externalGradingOptions": {
            "enabled": True, "image": IMAGE,
            "entrypoint": f"/grade/serverFilesCourse/{GRADER_DIR}/grade_{spec.name}",
            "serverFilesCourse": [f"{GRADER_DIR}/"], "timeout": TIMEOUT_S,
        },
    }


def build_course_snippet(exercise: str, out: Path) -> Path:
    """``out``/questions/<exercise>/ and ``out``/serverFilesCourse/softmax_autograder/, to
    merge into a course directory (several exercises share the grader folder)."""
    spec = get_exercise(exercise)
    question = out / "questions" / spec.name
    grader = out / "serverFilesCourse" / GRADER_DIR
    if question.exists():
        shutil.rmtree(question)
    for sub in ("graders", f"exercises/{spec.name}"):
        if (grader / sub).exists():
            shutil.rmtree(grader / sub)
    (question / "clientFilesQuestion").mkdir(parents=True)
    (question / "info.json").write_text(json.dumps(_info_json(spec), indent=2) + "\n")
    (question / "question.html").write_text(_question_html(spec))
    shutil.copyfile(spec.skeleton_path("triton"), question / "clientFilesQuestion" / "skeleton.py")
    shutil.copyfile(spec.statement_path, question / "clientFilesQuestion" / "statement.md")
    grader.mkdir(parents=True, exist_ok=True)
    copy_grader(exercise, grader)
    entry = grader / f"grade_{spec.name}"
    entry.write_text(ENTRY.format(exercise=spec.name, grader_dir=GRADER_DIR, venv=VENV))
    entry.chmod(0o755)
    (grader / "install_toolchain.sh").write_text("#!/usr/bin/env bash\n" + install_script())
    (grader / "Dockerfile").write_text(DOCKERFILE.format(image=IMAGE))
    return out


def main(argv: list[str] | None = None) -> int:
    return entry.main("graders.integrations.prairielearn", ROOT_ENV, "/grade", run, argv)


if __name__ == "__main__":
    sys.exit(main())
