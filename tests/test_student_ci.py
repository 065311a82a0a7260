"""docs/student-ci.md's workflow, run as GitHub would run its shell steps.

The workflow's yaml block is parsed and its `run:` steps are run with bash, in a temporary
folder laid out like a student's repository. What GitHub's actions do there, the test
stands in for, step by step (SUBSTITUTED below):

- "Check out my work" (actions/checkout): the temporary folder, with the student's file.
- "Get the graders" (actions/checkout of the course's repository into .grader): a link to
  this working tree, which is that repository.
- "Set up Python" (actions/setup-python): the repository's .venv first on PATH.
- "Install the graders (CPU only)": not run. Its index, PyTorch's CPU wheels, cannot be
  reached from here (no network but PyPI), and .venv holds the same pins already:
  test_the_workflow_pins_what_the_course_grades_with checks that they are the same.

The step "Grade" runs as written, with `bash --noprofile --norc -eo pipefail`, which is
what `shell: bash` means on GitHub's runners.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from conftest import mutant_file

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "student-ci.md"
SUBSTITUTED = {"Check out my work", "Get the graders", "Set up Python",
               "Install the graders (CPU only)"}


def workflow() -> dict:
    blocks = re.findall(r"^```yaml\n(.*?)^```", DOC.read_text(), re.S | re.M)
    assert len(blocks) == 1, "docs/student-ci.md must hold exactly one yaml block"
    return yaml.safe_load(blocks[0])


def steps() -> list[dict]:
    (job,) = workflow()["jobs"].values()
    return job["steps"]


def test_every_step_is_either_substituted_or_run():
    """A step added to the doc must be thought about here, not silently skipped."""
    names = [s["name"] for s in steps()]
    assert set(names) == SUBSTITUTED | {"Grade"}, names
    (job,) = workflow()["jobs"].values()
    assert job["defaults"]["run"]["shell"] == "bash"


def _pins(text: str) -> dict[str, str]:
    return dict(re.findall(r"\b(torch|triton|numpy)==([0-9][0-9.]*)", text))


def test_the_workflow_pins_what_the_course_grades_with():
    install = next(s for s in steps() if s["name"] == "Install the graders (CPU only)")["run"]
    assert _pins(install) == _pins((REPO / "requirements.txt").read_text())
    assert set(_pins(install)) == {"torch", "triton", "numpy"}
    assert "--index-url https://download.pytorch.org/whl/cpu torch==" in install


def _run_workflow(tmp_path: Path, submission: Path,
                  grade: dict | None = None) -> subprocess.CompletedProcess:
    student = tmp_path / "student-repo"
    student.mkdir()
    shutil.copy(submission, student / "safe_softmax_skeleton.py")  # "Check out my work"
    (student / ".grader").symlink_to(REPO, target_is_directory=True)  # "Get the graders"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PYTHON"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # setup-python
    env["GITHUB_WORKSPACE"] = str(student)
    env["CI"] = "true"
    grade = grade or next(s for s in steps() if s["name"] == "Grade")
    env.update({k: str(v) for k, v in grade.get("env", {}).items()})
    script = tmp_path / "grade.sh"
    script.write_text(grade["run"])
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                          cwd=student, env=env, text=True, capture_output=True, timeout=600)


def test_a_passing_submission_gets_a_notice_and_exit_0(tmp_path):
    run = _run_workflow(tmp_path, REPO / "reference_solutions/safe_softmax/solution.py")
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert ("::notice file=safe_softmax_skeleton.py,title=safe_softmax%3A passed::verdict "
            "passed, score 100/100, 8 of 8 checks passed") in lines
    assert not [line for line in lines if line.startswith("::error")]
    # the other two exercises' files are not in this repository: a warning each, no failure
    assert sum(line.startswith("::warning title=") for line in lines) == 2


def test_a_failing_submission_marks_each_failed_check_and_fails_the_step(tmp_path):
    mutant = mutant_file("safe_softmax", "naive_unsafe_exp")
    run = _run_workflow(tmp_path, mutant)
    assert run.returncode == 1, run.stdout + run.stderr
    errors = [line for line in run.stdout.splitlines() if line.startswith("::error ")]
    titles = sorted(re.search(r"title=safe_softmax%3A (\w+) ", e).group(1) for e in errors)
    assert titles == ["poisoned_row", "underflow"], errors
    assert all(e.startswith("::error file=safe_softmax_skeleton.py,") for e in errors)
    assert "::notice file=safe_softmax_skeleton.py,title=safe_softmax%3A failed::" in run.stdout


def test_the_grade_step_grades_on_the_cpu_without_the_sandbox():
    """Why each flag is there is in the doc; that they are there is checked here."""
    run = next(s for s in steps() if s["name"] == "Grade")["run"]
    assert "--device cpu" in run and "--no-sandbox" in run and "--format github" in run


def test_options_on_a_line_reach_the_grader_and_a_usage_error_fails_with_2(tmp_path):
    """The words after the file are passed on (--params, for an exercise that has them);
    a grader's refusal (exit 2) outranks a later file's exit 0."""
    (job,) = workflow()["jobs"].values()
    grade = next(s for s in job["steps"] if s["name"] == "Grade")
    grade["env"]["GRADE"] = ("safe_softmax safe_softmax_skeleton.py --params nonsense=1\n"
                             "safe_softmax safe_softmax_skeleton.py\n")
    run = _run_workflow(tmp_path, REPO / "reference_solutions/safe_softmax/solution.py",
                        grade)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "--params" in run.stderr
    assert "title=safe_softmax%3A passed::" in run.stdout  # the second line still graded
