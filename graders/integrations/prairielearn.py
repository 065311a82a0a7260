"""PrairieLearn: a course-directory snippet, and the external grader's entry point.

PrairieLearn copies the question's ``serverFilesCourse`` entries to /grade/serverFilesCourse,
the student's files to /grade/student and the submission's data (the variant's ``params``
among it) to /grade/data/data.json, runs the question's ``entrypoint`` in the course's
image, and reads /grade/results/results.json once the entry point has exited 0.
``PRAIRIELEARN_GRADE_ROOT`` stands in for /grade (tests).

An exercise with parameters gets a ``server.py``: PrairieLearn calls its ``generate`` for
each new variant, and it derives the variant's values with the server's rule
(graders.engine.params.derive, the file itself copied beside it) from the variant's seed and a
course key kept in serverFilesCourse/softmax_params/, which is never copied to the grader.

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
from typing import Any

from graders.engine.registry import get_exercise
from graders.integrations import entry, formats
from graders.integrations.bundle import VENV, copy_grader, install_script, write_secret
from graders.integrations.entry import Outcome, grade_into_results
from graders.integrations.grading import PLATFORM_TIMEOUT_S
from graders.shared.paths import REPO_ROOT

ROOT_ENV = "PRAIRIELEARN_GRADE_ROOT"
GRADER_DIR = "softmax_autograder"  # under serverFilesCourse/, shared by every exercise's question
PARAMS_DIR = "softmax_params"  # under serverFilesCourse/: the rule and the key, for server.py
# the job's limit: the engine's own wall clock in a platform, plus the container's start and
# the imports of torch and triton (about 15 s on this CPU), with room for a slower host
TIMEOUT_S = PLATFORM_TIMEOUT_S + 60
PARAMS_SOURCE = "this variant's"
log = logging.getLogger(__name__)

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
# PrairieLearn's graders run linux/amd64 images: build_image.sh builds and pushes it as one.
# torch comes from pip's configured index, or from GRADERS_TORCH_INDEX where build_image.sh
# runs with it set (PyTorch's CPU wheel index: the CPU build)
FROM ubuntu:24.04
ARG GRADERS_TORCH_INDEX=
COPY install_toolchain.sh /tmp/install_toolchain.sh
RUN bash /tmp/install_toolchain.sh && rm /tmp/install_toolchain.sh && rm -rf /root/.cache/pip
"""

BUILD_IMAGE = """\
#!/usr/bin/env bash
# Builds the external grader's image for linux/amd64 (what PrairieLearn's graders run, also
# from an Arm laptop) and pushes it; then sync it into the course: the course's page
# "Sync" -> "Docker images" -> "Sync" (docs/integrations.md).
set -euo pipefail
cd "$(dirname "$0")"
# GRADERS_TORCH_INDEX, where set here, is passed on: the index torch is installed from
docker build --platform linux/amd64 --build-arg GRADERS_TORCH_INDEX -t {image} .
docker push {image}
"""

SERVER_PY = '''\
"""{exercise}: each variant's own values of the exercise's parameters.

PrairieLearn calls generate() for every new variant. The values are derived with the
course's rule (softmax_params/params.py, a copy of the graders' graders/engine/params.py) from the
variant's seed and the key in serverFilesCourse/{params_dir}/secret, which the external
grader never receives: a student cannot compute another variant's values.
"""

import json
import os
import sys


def generate(data):
    folder = os.path.join(data["options"]["server_files_course_path"], "{params_dir}")
    sys.path.insert(0, folder)
    import params as rule

    with open(os.path.join(folder, "secret")) as fh:
        secret = fh.read().strip()
    with open(os.path.join(data["options"]["question_path"], "params.json")) as fh:
        declarations = rule.from_json(json.load(fh))
    data["params"].update(rule.derive(secret, str(data["variant_seed"]), "{exercise}",
                                      declarations))
'''


class MissingParams(Exception):
    """data.json holds none of the variant's parameters (a question without server.py)."""


def results_of(outcome: Outcome, descriptions: dict[str, str]) -> dict:
    if outcome.kind == "graded":
        return formats.prairielearn(outcome.graded.result, outcome.graded.confinement,
                                    descriptions, PARAMS_SOURCE)
    if outcome.kind == "no_submission":  # the student's to fix first: no attempt used
        return formats.prairielearn_refusal(outcome.message, gradable=False,
                                            format_errors=[outcome.message])
    # a broken or unconfinable grader must not cost an attempt either
    return formats.prairielearn_refusal(outcome.message, gradable=False)


def _data(root: Path) -> dict[str, Any]:
    try:
        data = json.loads((root / "data" / "data.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def variant_params(exercise: str, data: dict[str, Any]) -> dict[str, Any] | None:
    """The variant's values of the exercise's parameters, as server.py made them."""
    spec = get_exercise(exercise)
    if not spec.params:
        return None
    given = data.get("params") if isinstance(data.get("params"), dict) else {}
    own = {p.name: given[p.name] for p in spec.params if p.name in given}
    if len(own) != len(spec.params):
        raise MissingParams(f"{exercise} gives each variant parameters of its own, but "
                            "data.json holds none (is the question's server.py there?)")
    return own


def run(exercise: str, root: Path) -> Outcome:
    data = _data(root)
    names = [f.get("name", "?") for f in data.get("submitted_answers", {}).get("_files", [])
             if isinstance(f, dict)]
    log.info("submitted: %s", ", ".join(names) or "?")
    descriptions = {c.name: c.description for c in get_exercise(exercise).checks}
    results_for = lambda outcome: results_of(outcome, descriptions)  # noqa: E731
    try:
        own = variant_params(exercise, data)
    except MissingParams as exc:
        return entry.report(Outcome("grader_fault", "The autograder could not find this "
                                    "variant's parameters, so it graded nothing. This is not "
                                    "your fault; course staff have the log.", detail=str(exc)),
                            root / "results", results_for)
    return grade_into_results(exercise, root / "student", root / "results", results_for, own)


def _question_html(spec) -> str:
    title, summary = html.escape(spec.title), html.escape(spec.summary)
    params = ""
    if spec.params:
        shown = ", ".join(f"{html.escape(p.description or p.name)}: "
                          f"<code>{{{{params.{p.name}}}}}</code>" for p in spec.params)
        params = (f"\n  <p>Your own values for this question ({shown}): your answers are "
                  "graded for these.</p>")
    return f"""\
<pl-question-panel>
  <p><strong>{title}.</strong> {summary}</p>
  <p>Write your Triton kernel in <code>solution.py</code>; the entry points are
  <code>{html.escape(", ".join(spec.entry_points))}</code>. The full statement:
  <a href="{{{{options.client_files_question_url}}}}/statement.md">statement.md</a>.
  It is graded on Triton's CPU interpreter: correctness only, no timing.</p>{params}
</pl-question-panel>

<pl-file-editor file-name="solution.py" ace-mode="ace/mode/python"
                directory="clientFilesQuestion" source-file-name="skeleton.py"></pl-file-editor>

<pl-submission-panel>
  <pl-external-grader-results></pl-external-grader-results>
  <pl-file-preview></pl-file-preview>
</pl-submission-panel>
"""


def _info_json(spec, image: str) -> dict:
    return {
        # a name-based uuid: building the snippet again gives the question the same identity
        "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"softmax-autograder/{spec.name}")),
        "title": spec.title, "topic": "Softmax & Fused Kernels", "tags": ["triton", "A07"],
        # an exercise with parameters has a variant per student (server.py); one without
        # has nothing to vary
        "type": "v3", "singleVariant": not spec.params, "gradingMethod": "External",
        "externalGradingOptions": {
            "enabled": True, "image": image,
            "entrypoint": f"/grade/serverFilesCourse/{GRADER_DIR}/grade_{spec.name}",
            "serverFilesCourse": [f"{GRADER_DIR}/"], "timeout": TIMEOUT_S,
        },
    }


def build_course_snippet(exercise: str, out: Path, image: str, secret: str | None = None) -> Path:
    """``out``/questions/<exercise>/ and ``out``/serverFilesCourse/softmax_autograder/ (and,
    for an exercise with parameters, softmax_params/), to merge into a course directory
    (several exercises share the grader folder). ``image``: where the course pushes the
    grader's image (build_image.sh builds and pushes it)."""
    spec = get_exercise(exercise)
    question = out / "questions" / spec.name
    grader = out / "serverFilesCourse" / GRADER_DIR
    if question.exists():
        shutil.rmtree(question)
    for sub in ("graders", f"exercises/{spec.name}"):
        if (grader / sub).exists():
            shutil.rmtree(grader / sub)
    (question / "clientFilesQuestion").mkdir(parents=True)
    (question / "info.json").write_text(json.dumps(_info_json(spec, image), indent=2) + "\n")
    (question / "question.html").write_text(_question_html(spec))
    shutil.copyfile(spec.skeleton_path("triton"), question / "clientFilesQuestion" / "skeleton.py")
    shutil.copyfile(spec.statement_path, question / "clientFilesQuestion" / "statement.md")
    if spec.params:
        (question / "params.json").write_text(
            json.dumps([p.to_json() for p in spec.params], indent=2) + "\n")
        (question / "server.py").write_text(SERVER_PY.format(exercise=spec.name,
                                                             params_dir=PARAMS_DIR))
        keys = out / "serverFilesCourse" / PARAMS_DIR
        keys.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO_ROOT / "graders" / "engine" / "params.py", keys / "params.py")
        if secret is not None or not (keys / "secret").exists():  # one key for every question
            write_secret(keys, secret, name="secret")
    grader.mkdir(parents=True, exist_ok=True)
    copy_grader(exercise, grader)
    entry_point = grader / f"grade_{spec.name}"
    entry_point.write_text(ENTRY.format(exercise=spec.name, grader_dir=GRADER_DIR, venv=VENV))
    entry_point.chmod(0o755)
    (grader / "install_toolchain.sh").write_text("#!/usr/bin/env bash\n" + install_script())
    (grader / "Dockerfile").write_text(DOCKERFILE)
    build = grader / "build_image.sh"
    build.write_text(BUILD_IMAGE.format(image=image))
    build.chmod(0o755)
    return out


def main(argv: list[str] | None = None) -> int:
    return entry.main("graders.integrations.prairielearn", ROOT_ENV, "/grade", run, argv)


if __name__ == "__main__":
    sys.exit(main())
