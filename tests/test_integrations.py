"""Gradescope and PrairieLearn: the bundles, and their entry points run as the platforms run
them (a temporary root laid out like /autograder or /grade, the repo's interpreter standing in
for the image's), grading real files on the CPU interpreter."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from conftest import mutant_file

REPO = Path(__file__).resolve().parent.parent
REFS = REPO / "reference_solutions" / "safe_softmax"
REFERENCE = REFS / "solution.py"
NAIVE = mutant_file("safe_softmax", "naive_unsafe_exp")  # from its patch, graders/mutants.py
ROW_PER_PROGRAM = mutant_file("safe_softmax", "row_per_program")
CHECKS = {"random_rows", "poisoned_row", "half_precision_overflow", "non_power_of_two_cols",
          "long_rows", "tiny_rows", "underflow", "fresh_inputs"}
# what each file must fail on the CPU (reference_solutions' own `# expect:` lines)
EXPECTED_FAILURES = [(REFERENCE, set()), (NAIVE, {"poisoned_row", "underflow"}),
                     (ROW_PER_PROGRAM, {"long_rows"})]
PYTHON_DIR = os.path.dirname(sys.executable)


def _package(platform: str, out: Path) -> None:
    subprocess.run([sys.executable, "-m", "graders", "package", platform, "safe_softmax",
                    "--out", str(out)], cwd=REPO, check=True, capture_output=True, timeout=60)


@pytest.fixture
def world_readable_dir():
    """A folder other uids can enter (pytest's tmp_path is 0700 under /tmp/pytest-of-root):
    where no bubblewrap runs, the submission runs as a job uid that must read the bundle."""
    made = []

    def make() -> Path:
        path = Path(tempfile.mkdtemp(prefix="graders-integration-"))
        os.chmod(path, 0o755)
        made.append(path)
        return path
    yield make
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def gradescope_zip(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gradescope") / "autograder.zip"
    _package("gradescope", out)
    return out


@pytest.fixture(scope="module")
def prairielearn_course(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("prairielearn") / "course"
    _package("prairielearn", out)
    return out


def _autograder_root(base: Path, bundle: Path, submission: Path | None,
                     name: str = "solution.py") -> Path:
    """/autograder as Gradescope lays it out: source/ (the zip), submission/, results/."""
    root = base / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "submission").mkdir()
    (root / "results").mkdir()
    with zipfile.ZipFile(bundle) as zf:
        zf.extractall(root / "source")
    if submission is not None:
        shutil.copyfile(submission, root / "submission" / name)
    return root


def _run_gradescope(root: Path, python: str = sys.executable, path: str | None = None,
                    prefix: list[str] | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    env = {"PATH": path or os.environ["PATH"], "GRADESCOPE_ROOT": str(root),
           "GRADERS_PYTHON": python, "LANG": "C.UTF-8"}
    proc = subprocess.run([*(prefix or []), "/bin/bash", str(root / "source" / "run_autograder")],
                          env=env, capture_output=True, text=True, timeout=180, cwd=root)
    results = root / "results" / "results.json"
    assert results.is_file(), proc.stderr[-3000:]
    return proc, json.loads(results.read_text())


def _assert_gradescope_schema(results: dict) -> None:
    assert isinstance(results["score"], float) and isinstance(results["output"], str)
    for test in results["tests"]:
        assert set(test) >= {"name", "score", "max_score", "status", "output"}
        assert test["status"] in ("passed", "failed")
        assert (test["status"] == "passed") == (test["score"] == test["max_score"])


# --- Gradescope --------------------------------------------------------------------------

def test_gradescope_zip_holds_the_engine_and_one_exercise_only(gradescope_zip):
    with zipfile.ZipFile(gradescope_zip) as zf:
        names = zf.namelist()
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in zf.infolist()}
    assert "setup.sh" in names and "run_autograder" in names
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert "graders/integrations/gradescope.py" in names
    assert "exercises/safe_softmax/checks.py" in names
    tops = {n.split("/")[0] for n in names}
    assert tops == {"setup.sh", "run_autograder", "graders", "exercises"}
    assert {n.split("/")[1] for n in names if n.startswith("exercises/")} == {"safe_softmax"}
    assert not [n for n in names if "reference_solutions" in n or "__pycache__" in n
                or n.startswith("server/") or "/mutants/" in n]


def test_gradescope_setup_sh_is_valid_bash_and_pins_the_toolchain(gradescope_zip, tmp_path):
    with zipfile.ZipFile(gradescope_zip) as zf:
        setup = zf.read("setup.sh").decode()
    (tmp_path / "setup.sh").write_text(setup)
    check = subprocess.run(["bash", "-n", str(tmp_path / "setup.sh")], capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stderr
    pinned = dict(re.findall(r"^(torch|triton|numpy)==(\S+)",
                             (REPO / "requirements.txt").read_text(), re.M))
    assert set(pinned) == {"torch", "triton", "numpy"}
    for name, version in pinned.items():
        assert f"{name}=={version}" in setup
    assert "--index-url https://download.pytorch.org/whl/cpu torch==" in setup
    assert re.search(r"apt-get install .*\bbubblewrap\b", setup)
    assert "set -euo pipefail" in setup


@pytest.mark.parametrize("submission,failing", EXPECTED_FAILURES,
                         ids=["reference", "naive_unsafe_exp", "row_per_program"])
def test_gradescope_grades_the_reference_and_mutants(gradescope_zip, world_readable_dir,
                                                     submission, failing):
    root = _autograder_root(world_readable_dir(), gradescope_zip, submission)
    proc, results = _run_gradescope(root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _assert_gradescope_schema(results)
    by_name = {t["name"]: t for t in results["tests"]}
    assert set(by_name) == CHECKS
    assert {n for n, t in by_name.items() if t["status"] == "failed"} == failing
    assert sum(t["max_score"] for t in by_name.values()) == pytest.approx(100)
    expected = 100 - sum(by_name[n]["max_score"] for n in failing)
    assert results["score"] == pytest.approx(expected)
    assert results["score"] == pytest.approx(sum(t["score"] for t in by_name.values()))
    assert "leaderboard" not in results  # no timing on the CPU interpreter
    assert "CPU interpreter" in results["output"] and "confined" in results["output"]
    for name in failing:  # the engine's words for the bug reach the student
        assert by_name[name]["output"] and by_name[name]["output"] != "passed"


def test_gradescope_run_ending_verdict_is_the_top_level_output(gradescope_zip,
                                                              world_readable_dir, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import triton\n\ndef softmax(x)\n    return x\n")
    root = _autograder_root(world_readable_dir(), gradescope_zip, broken)
    proc, results = _run_gradescope(root)
    assert proc.returncode == 0
    assert results["score"] == 0
    assert results["output"].startswith("compile_error: 0/100")
    assert "line 3" in results["output"]
    assert all(t["status"] == "failed" for t in results["tests"])


def test_gradescope_refuses_an_ambiguous_submission(gradescope_zip, world_readable_dir):
    root = _autograder_root(world_readable_dir(), gradescope_zip, NAIVE, name="mine.py")
    shutil.copyfile(REFERENCE, root / "submission" / "other.py")
    proc, results = _run_gradescope(root)
    assert proc.returncode == 0  # the student's to fix, not the autograder's
    assert results["score"] == 0 and results["tests"] == []
    assert "solution.py" in results["output"] and "mine.py" in results["output"]


def _no_bwrap_path(base: Path) -> str:
    """A PATH with the interpreter's folder and no bwrap on it."""
    assert shutil.which("bwrap", path=PYTHON_DIR) is None
    return PYTHON_DIR


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists(),
                    reason="needs root and util-linux's setpriv to drop CAP_SETUID")
def test_gradescope_writes_cannot_confine_and_runs_nothing(gradescope_zip, world_readable_dir,
                                                          tmp_path):
    """No bwrap on PATH, and root without CAP_SETUID/CAP_SETGID (setpriv drops them from the
    bounding set), so no job uid either: the container that Gradescope could give us at
    worst. The submission would leave a mark if any of it ran."""
    marks = world_readable_dir()
    os.chmod(marks, 0o777)
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(marks / 'ran')!r}, 'w').write('ran')\n"
                    + REFERENCE.read_text())
    root = _autograder_root(world_readable_dir(), gradescope_zip, evil)
    proc, results = _run_gradescope(
        root, path=_no_bwrap_path(root),
        prefix=["/usr/bin/setpriv", "--bounding-set", "-setuid,-setgid",
                "--inh-caps", "-setuid,-setgid", "--"])
    assert proc.returncode != 0
    assert results["score"] == 0 and results["tests"] == []
    assert "could not confine your submission" in results["output"]
    assert "bubblewrap is not installed" in results["output"]
    assert "Operation not permitted" in results["output"]  # the uid switch, really refused
    assert not (marks / "ran").exists()


def _system_python_venv(base: Path) -> str | None:
    """An interpreter other uids may run: this repo's own may live under a 0700 home
    (pyenv in /root). A venv of the system's Python of the same version, seeing the repo's
    packages through a .pth file; None where there is no such Python."""
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if not system.exists() or not _others_may_read(_site_packages()):
        return None
    venv = base / "venv"
    subprocess.run([str(system), "-m", "venv", "--without-pip", str(venv)], check=True,
                   capture_output=True, timeout=60)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "repo_packages.pth").write_text("\n".join(_site_packages()) + "\n")
    return str(venv / "bin" / "python")


def _site_packages() -> list[str]:
    import site

    return site.getsitepackages()


def _others_may_read(folders: list[str]) -> bool:
    """Whether another uid can reach these folders: every folder above them passable
    (o+x). A clone inside a 0700 folder (mktemp -d) is not, and then the job uid cannot
    import torch: that is the deployment's to arrange (docs/deploy.md), not this test's."""
    for folder in folders:
        path = Path(folder).resolve()
        for step in [path, *path.parents]:
            if not os.stat(step).st_mode & 0o001:
                return False
    return True


@pytest.mark.skipif(os.geteuid() != 0, reason="job uids need root")
def test_gradescope_without_bwrap_runs_the_submission_as_a_job_uid(gradescope_zip,
                                                                  world_readable_dir, tmp_path):
    """Gradescope's containers may forbid user namespaces: then the submission runs as an
    unprivileged uid of its own. It is graded as under bubblewrap, and it can neither write
    the results nor change the grader."""
    python = _system_python_venv(world_readable_dir())
    if python is None:
        pytest.skip("no system Python of this version, or the repo's packages lie in a "
                    "folder other uids cannot pass (a clone under mktemp -d's 0700)")
    root = _autograder_root(world_readable_dir(), gradescope_zip, None)
    engine = root / "source" / "graders" / "__init__.py"
    before = engine.read_text()
    attack = (
        "import os\n"
        f"for path in ({str(root / 'results' / 'forged.json')!r}, {str(engine)!r}):\n"
        "    try:\n"
        "        open(path, 'a').write('score = 1000\\n')\n"
        "    except OSError:\n"
        "        pass\n")
    (root / "submission" / "solution.py").write_text(attack + REFERENCE.read_text())
    proc, results = _run_gradescope(root, python=python, path=os.path.dirname(python))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "unprivileged user of its own" in results["output"]
    assert results["score"] == pytest.approx(100)
    assert not (root / "results" / "forged.json").exists()
    assert engine.read_text() == before


# --- PrairieLearn ------------------------------------------------------------------------

def test_prairielearn_snippet_is_a_question_and_its_grader(prairielearn_course):
    question = prairielearn_course / "questions" / "safe_softmax"
    info = json.loads((question / "info.json").read_text())
    assert info["gradingMethod"] == "External"
    options = info["externalGradingOptions"]
    assert options["enabled"] is True and options["image"] and options["timeout"] >= 300
    assert options["serverFilesCourse"] == ["softmax_autograder/"]
    entry = options["entrypoint"]
    assert entry.startswith("/grade/serverFilesCourse/softmax_autograder/")
    local_entry = prairielearn_course / entry.removeprefix("/grade/")
    assert local_entry.is_file() and os.access(local_entry, os.X_OK)
    html = (question / "question.html").read_text()
    assert 'file-name="solution.py"' in html and "pl-external-grader-results" in html
    assert (question / "clientFilesQuestion" / "skeleton.py").read_text() == \
        (REPO / "exercises" / "safe_softmax" / "skeleton.py").read_text()
    grader = prairielearn_course / "serverFilesCourse" / "softmax_autograder"
    assert sorted(p.name for p in (grader / "exercises").iterdir()) == ["safe_softmax"]
    assert not list(prairielearn_course.rglob("reference_solutions"))
    assert not (grader / "server").exists()
    assert subprocess.run(["bash", "-n", str(grader / "install_toolchain.sh")]).returncode == 0


def _grade_root(base: Path, course: Path, submission: Path) -> Path:
    """/grade as PrairieLearn lays it out for an external grader."""
    root = base / "grade"
    shutil.copytree(course / "serverFilesCourse", root / "serverFilesCourse")
    (root / "student").mkdir(parents=True)
    (root / "data").mkdir()
    shutil.copyfile(submission, root / "student" / "solution.py")
    contents = base64.b64encode(submission.read_bytes()).decode()
    (root / "data" / "data.json").write_text(json.dumps(
        {"params": {}, "correct_answers": {},
         "submitted_answers": {"_files": [{"name": "solution.py", "contents": contents}]}}))
    return root


@pytest.mark.parametrize("submission,failing", EXPECTED_FAILURES,
                         ids=["reference", "naive_unsafe_exp", "row_per_program"])
def test_prairielearn_grades_the_reference_and_mutants(prairielearn_course, world_readable_dir,
                                                       submission, failing):
    root = _grade_root(world_readable_dir(), prairielearn_course, submission)
    entry = root / "serverFilesCourse" / "softmax_autograder" / "grade_safe_softmax"
    proc = subprocess.run(["/bin/bash", str(entry)], capture_output=True, text=True, timeout=180,
                          env={"PATH": os.environ["PATH"], "PRAIRIELEARN_GRADE_ROOT": str(root),
                               "GRADERS_PYTHON": sys.executable, "LANG": "C.UTF-8"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["gradable"] is True and isinstance(results["message"], str)
    tests = {t["name"]: t for t in results["tests"]}
    assert set(tests) == CHECKS
    for test in tests.values():
        assert set(test) >= {"name", "points", "max_points", "output", "message"}
    assert {n for n, t in tests.items() if t["points"] < t["max_points"]} == failing
    lost = sum(tests[n]["max_points"] for n in failing)
    assert 0.0 <= results["score"] <= 1.0
    assert results["score"] == pytest.approx((100 - lost) / 100)


def test_a_failed_check_that_dumps_values_not_a_row_still_gives_results_json():
    # online_softmax's answer checks (judge.compare_values) dump an index and two values,
    # not a row's columns: the platforms' output once raised KeyError there, and the
    # student got no results.json at all
    from graders.integrations import formats
    check = {"name": "byte_count_answers", "points": 0.0, "max_points": 10.0,
             "passed": False, "ran": True, "message": "bytes_1pass is wrong",
             "dump": {"index": 1, "expected": 134217728, "got": 1}}
    result = {"verdict": "failed", "score": 90.0, "max_score": 100.0, "checks": [check],
              "device": "cpu"}
    assert formats.gradescope(result, "bubblewrap")["tests"][0]["output"] == \
        "bytes_1pass is wrong"
    assert formats.prairielearn(result, "bubblewrap")["tests"][0]["output"] == \
        "bytes_1pass is wrong"
