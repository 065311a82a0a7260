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
NAIVE = mutant_file("safe_softmax", "naive_unsafe_exp")  # from its patch, graders/proof/mutants.py
ROW_PER_PROGRAM = mutant_file("safe_softmax", "row_per_program")
CHECKS = {"random_rows", "poisoned_row", "half_precision_overflow", "non_power_of_two_cols",
          "long_rows", "tiny_rows", "underflow", "fresh_inputs"}
# what each file must fail on the CPU (reference_solutions' own `# expect:` lines)
EXPECTED_FAILURES = [(REFERENCE, set()), (NAIVE, {"poisoned_row", "underflow"}),
                     (ROW_PER_PROGRAM, {"long_rows"})]
PYTHON_DIR = os.path.dirname(sys.executable)


IMAGE = "course/softmax-autograder-cpu:2026"


def _package(platform: str, out: Path, exercise: str = "safe_softmax", *options: str) -> None:
    image = ["--image", IMAGE] if platform == "prairielearn" else []
    subprocess.run([sys.executable, "-m", "graders", "package", platform, exercise,
                    "--out", str(out), *image, *options], cwd=REPO, check=True,
                   capture_output=True, timeout=60)


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
    """run_autograder as Gradescope runs it; it must always leave a results.json and exit 0."""
    env = {"PATH": path or os.environ["PATH"], "GRADESCOPE_ROOT": str(root),
           "GRADERS_PYTHON": python, "LANG": "C.UTF-8"}
    proc = subprocess.run([*(prefix or []), "/bin/bash", str(root / "source" / "run_autograder")],
                          env=env, capture_output=True, text=True, timeout=180, cwd=root)
    results = root / "results" / "results.json"
    assert results.is_file(), proc.stderr[-3000:]
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, json.loads(results.read_text())


GRADESCOPE_FORMATS = {"text", "html", "simple_format", "md", "ansi"}
GRADESCOPE_VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}


def _assert_gradescope_schema(results: dict) -> None:
    """Gradescope's results.json, field by field as its autograder specification has it,
    and every text field declared text (its default for `output` renders HTML)."""
    assert isinstance(results["score"], float) and isinstance(results["output"], str)
    assert results["output_format"] == results["test_output_format"] == \
        results["test_name_format"] == "text"
    assert results["visibility"] in GRADESCOPE_VISIBILITY
    assert results["stdout_visibility"] in GRADESCOPE_VISIBILITY
    numbers = []
    for test in results["tests"]:
        assert set(test) >= {"name", "score", "max_score", "status", "output", "number",
                             "tags", "visibility"}
        assert test["status"] in ("passed", "failed")
        assert (test["status"] == "passed") == (test["score"] == test["max_score"])
        assert test["output_format"] == test["name_format"] == "text"
        assert test["visibility"] in GRADESCOPE_VISIBILITY and isinstance(test["tags"], list)
        numbers.append(test["number"])
    assert numbers == [str(i) for i in range(1, len(numbers) + 1)]
    if results["tests"]:
        assert sum(t["max_score"] for t in results["tests"]) == 100  # exactly


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
    assert tops == {"setup.sh", "run_autograder", "Dockerfile", "graders", "exercises"}
    assert {n.split("/")[1] for n in names if n.startswith("exercises/")} == {"safe_softmax"}
    assert not [n for n in names if "reference_solutions" in n or "__pycache__" in n
                or n.startswith("server/") or "/mutants/" in n]


def test_gradescope_setup_sh_is_valid_bash_and_pins_the_toolchain(gradescope_zip, tmp_path):
    with zipfile.ZipFile(gradescope_zip) as zf:
        setup = zf.read("setup.sh").decode()
        dockerfile = zf.read("Dockerfile").decode()
    (tmp_path / "setup.sh").write_text(setup)
    check = subprocess.run(["bash", "-n", str(tmp_path / "setup.sh")], capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stderr
    pinned = dict(re.findall(r"^(torch|triton|numpy)==(\S+)",
                             (REPO / "requirements.txt").read_text(), re.M))
    assert set(pinned) == {"torch", "triton", "numpy"}
    for name, version in pinned.items():
        assert f"{name}=={version}" in setup
    assert re.search(r"apt-get install .*\bbubblewrap\b", setup)
    assert "set -euo pipefail" in setup
    # no package host is written (issue 38): pip's configured index, or GRADERS_TORCH_INDEX
    assert not re.search(r"https?://", setup)
    assert "\nARG GRADERS_TORCH_INDEX=\n" in dockerfile  # --build-arg reaches setup.sh
    assert _torch_installs(setup, tmp_path, None) == [f"-m pip install torch=={pinned['torch']}"]
    assert _torch_installs(setup, tmp_path, "file:///srv/torch-index/") == [
        f"-m pip install --index-url file:///srv/torch-index/ torch=={pinned['torch']}"]


def _torch_installs(script: str, tmp_path: Path, index: str | None) -> list[str]:
    """What the script's torch step asks pip for, run with GRADERS_TORCH_INDEX set to
    ``index`` (None: unset), the venv's python a stand-in that logs its arguments."""
    (block,) = re.findall(r'^if \[ -n "\$\{GRADERS_TORCH_INDEX:-\}" \]; then\n.*?^fi\n',
                          script, re.S | re.M)
    venv = tmp_path / f"venv-{'unset' if index is None else 'set'}"
    (venv / "bin").mkdir(parents=True)
    log = venv / "pip.log"
    (venv / "bin" / "python").write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    (venv / "bin" / "python").chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "VENV": str(venv)}
    if index is not None:
        env["GRADERS_TORCH_INDEX"] = index
    subprocess.run(["bash", "-euo", "pipefail", "-c", block], env=env, check=True, timeout=30)
    return log.read_text().splitlines()


@pytest.mark.parametrize("submission,failing", EXPECTED_FAILURES,
                         ids=["reference", "naive_unsafe_exp", "row_per_program"])
def test_gradescope_grades_the_reference_and_mutants(gradescope_zip, world_readable_dir,
                                                     submission, failing):
    root = _autograder_root(world_readable_dir(), gradescope_zip, submission)
    proc, results = _run_gradescope(root)
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
    _assert_gradescope_schema(results)
    assert results["score"] == 0
    assert results["output"].startswith("compile_error: 0/100")
    assert "line 3" in results["output"]
    assert all(t["status"] == "failed" for t in results["tests"])


def test_gradescope_refuses_an_ambiguous_submission(gradescope_zip, world_readable_dir):
    root = _autograder_root(world_readable_dir(), gradescope_zip, NAIVE, name="mine.py")
    shutil.copyfile(REFERENCE, root / "submission" / "other.py")
    proc, results = _run_gradescope(root)
    assert results["score"] == 0 and results["tests"] == []  # the student's to fix
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
    assert "CANNOT CONFINE" in proc.stderr  # staff read the log; the student, the results
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
    assert options["enabled"] is True and options["image"] == IMAGE
    # the engine's own wall clock in a platform, plus start-up: under PrairieLearn's 600 s
    from graders.integrations.grading import PLATFORM_TIMEOUT_S
    assert PLATFORM_TIMEOUT_S + 30 <= options["timeout"] < 600
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
    build = (grader / "build_image.sh").read_text()
    # the caller's GRADERS_TORCH_INDEX, where set, reaches install_toolchain.sh
    assert f"docker build --platform linux/amd64 --build-arg GRADERS_TORCH_INDEX -t {IMAGE} ." \
        in build
    assert "\nARG GRADERS_TORCH_INDEX=\n" in (grader / "Dockerfile").read_text()
    assert subprocess.run(["bash", "-n", str(grader / "build_image.sh")]).returncode == 0
    assert not (prairielearn_course / "serverFilesCourse" / "softmax_params").exists()
    assert info["singleVariant"] is True  # no parameters: nothing to vary


def test_prairielearn_snippet_needs_the_image_name(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "graders", "package", "prairielearn",
                           "safe_softmax", "--out", str(tmp_path / "c")], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--image" in proc.stderr
    assert not (tmp_path / "c").exists()


def _grade_root(base: Path, course: Path, submission: Path | None,
                params: dict | None = None) -> Path:
    """/grade as PrairieLearn lays it out for an external grader: the question's
    serverFilesCourse entries (softmax_autograder/ alone), the student's file, data.json."""
    root = base / "grade"
    shutil.copytree(course / "serverFilesCourse" / "softmax_autograder",
                    root / "serverFilesCourse" / "softmax_autograder")
    (root / "student").mkdir(parents=True)
    (root / "data").mkdir()
    files = []
    if submission is not None:
        shutil.copyfile(submission, root / "student" / "solution.py")
        files = [{"name": "solution.py",
                  "contents": base64.b64encode(submission.read_bytes()).decode()}]
    (root / "data" / "data.json").write_text(json.dumps(
        {"params": params or {}, "correct_answers": {}, "submitted_answers": {"_files": files}}))
    return root


def _run_prairielearn(root: Path, exercise: str = "safe_softmax", prefix: list[str] | None = None,
                      path: str | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    """The entry point as PrairieLearn's grader host runs it: results.json is read only
    after an exit status of 0, so every outcome must exit 0 with one written."""
    entry = root / "serverFilesCourse" / "softmax_autograder" / f"grade_{exercise}"
    proc = subprocess.run([*(prefix or []), "/bin/bash", str(entry)], capture_output=True,
                          text=True, timeout=180,
                          env={"PATH": path or os.environ["PATH"],
                               "PRAIRIELEARN_GRADE_ROOT": str(root),
                               "GRADERS_PYTHON": sys.executable, "LANG": "C.UTF-8"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((root / "results" / "results.json").read_text())
    assert isinstance(results["gradable"], bool) and isinstance(results["message"], str)
    assert 0.0 <= results["score"] <= 1.0
    return proc, results


@pytest.mark.parametrize("submission,failing", EXPECTED_FAILURES,
                         ids=["reference", "naive_unsafe_exp", "row_per_program"])
def test_prairielearn_grades_the_reference_and_mutants(prairielearn_course, world_readable_dir,
                                                       submission, failing):
    root = _grade_root(world_readable_dir(), prairielearn_course, submission)
    proc, results = _run_prairielearn(root)
    assert results["gradable"] is True
    tests = {t["name"]: t for t in results["tests"]}
    assert set(tests) == CHECKS
    for test in tests.values():
        assert set(test) >= {"name", "description", "points", "max_points", "output", "message"}
    assert tests["poisoned_row"]["description"].startswith("float32 rows holding 100.0")
    assert {n for n, t in tests.items() if t["points"] < t["max_points"]} == failing
    lost = sum(tests[n]["max_points"] for n in failing)
    assert results["score"] == pytest.approx((100 - lost) / 100)


def test_prairielearn_what_the_student_must_fix_first_costs_no_attempt(
        prairielearn_course, world_readable_dir, tmp_path):
    """A syntax error, no file, or a HIP file here are format errors (gradable: false,
    with format_errors); a file that parses and breaks the contract is graded."""
    broken = tmp_path / "broken.py"
    broken.write_text("import triton\n\ndef softmax(x)\n    return x\n")
    proc, results = _run_prairielearn(_grade_root(world_readable_dir(), prairielearn_course,
                                                  broken))
    assert results["gradable"] is False and results["tests"] == []
    assert results["format_errors"] and "line 3" in results["format_errors"][0]
    proc, results = _run_prairielearn(_grade_root(world_readable_dir(), prairielearn_course,
                                                  None))
    assert results["gradable"] is False and "solution.py" in results["format_errors"][0]
    root = _grade_root(world_readable_dir(), prairielearn_course, None)
    shutil.copyfile(REFS / "solution.hip", root / "student" / "solution.hip")
    proc, results = _run_prairielearn(root)
    assert results["gradable"] is False and "HIP" in results["format_errors"][0]
    no_entry = tmp_path / "no_entry.py"
    no_entry.write_text("import torch\n\ndef soft_max(x):\n    return x\n")
    proc, results = _run_prairielearn(_grade_root(world_readable_dir(), prairielearn_course,
                                                  no_entry))
    assert results["gradable"] is True and results["score"] == 0
    assert "`softmax`" in results["message"]


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists(),
                    reason="needs root and util-linux's setpriv to drop CAP_SETUID")
def test_prairielearn_a_container_that_cannot_confine_still_leaves_results_read(
        prairielearn_course, world_readable_dir):
    root = _grade_root(world_readable_dir(), prairielearn_course, REFERENCE)
    proc, results = _run_prairielearn(
        root, path=_no_bwrap_path(root),
        prefix=["/usr/bin/setpriv", "--bounding-set", "-setuid,-setgid",
                "--inh-caps", "-setuid,-setgid", "--"])
    assert results["gradable"] is False and "could not confine" in results["message"]
    assert "CANNOT CONFINE" in proc.stderr


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
    assert formats.prairielearn(result, "bubblewrap", {})["tests"][0]["output"] == \
        "bytes_1pass is wrong"


# --- Gradescope's own image: Ubuntu 22.04, whose python3 is 3.10 ----------------------------

def _python_310() -> str | None:
    """A real Python 3.10 to stand in for Ubuntu 22.04's python3, where this host has one."""
    found = shutil.which("python3.10") or next(iter(sorted(
        Path("/root/.pyenv/versions").glob("3.10.*/bin/python3.10"))), None)
    return str(found) if found else None


def _ubuntu_2204_bin(folder: Path, log: Path) -> Path:
    """Stand-ins for what setup.sh calls on Gradescope's default image: apt-get (logged,
    nothing installed: Debian's packages are here already), apt-cache (python3.11-venv is in
    22.04's universe), python3 (3.10: a real one where this host has it, else one that only
    answers the version check as 3.10 does) and python3.11 (the real one here, which
    22.04's package would install)."""
    folder.mkdir()
    (folder / "apt-get").write_text(f'#!/bin/sh\necho "apt-get $*" >> {log}\n')
    (folder / "apt-cache").write_text(
        f'#!/bin/sh\necho "apt-cache $*" >> {log}\n[ "$1 $2" = "show python3.11-venv" ]\n')
    old = _python_310()
    (folder / "python3").write_text(f'#!/bin/sh\nexec {old} "$@"\n' if old else
                                    "#!/bin/sh\nexit 1  # Python 3.10 fails the 3.11 check\n")
    newer = "/usr/bin/python3.11" if Path("/usr/bin/python3.11").exists() else \
        os.path.realpath(sys._base_executable)
    (folder / "python3.11").write_text(f'#!/bin/sh\nexec {newer} "$@"\n')
    for tool in folder.iterdir():
        tool.chmod(0o755)
    return folder


def test_gradescope_setup_sh_builds_on_ubuntu_22_04_and_grades_there(gradescope_zip,
                                                                      world_readable_dir,
                                                                      tmp_path):
    """setup.sh as Gradescope runs it on its default image, where python3 is 3.10: it takes
    the image's python3.11 package and installs the toolchain into a venv of it (for real,
    with no GRADERS_TORCH_INDEX: everything from pip's configured index and links, which on
    this host put torch's CPU wheel in a wheel folder of its own). The zip then grades
    there."""
    base = world_readable_dir()
    log = tmp_path / "apt.log"
    stubs = _ubuntu_2204_bin(tmp_path / "bin", log)
    root = _autograder_root(base, gradescope_zip, None)
    venv = base / "opt" / "venv"
    env = {**{k: v for k, v in os.environ.items() if k.startswith("PIP_")},
           "PATH": f"{stubs}:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "GRADESCOPE_ROOT": str(root), "GRADERS_VENV": str(venv)}
    setup = subprocess.run(["bash", str(root / "source" / "setup.sh")], env=env,
                           capture_output=True, text=True, timeout=600)
    assert setup.returncode == 0, setup.stdout[-2000:] + setup.stderr[-3000:]
    assert "apt-get install -y --no-install-recommends python3.11 python3.11-venv" in \
        log.read_text()
    assert "toolchain: 2.13.0" in setup.stdout
    python = str(venv / "bin" / "python")
    version = subprocess.run([python, "-c", "import sys; print(sys.version_info[:2])"],
                             capture_output=True, text=True).stdout
    assert version.strip() == "(3, 11)"
    broken = tmp_path / "broken.py"
    broken.write_text("import triton\n\ndef softmax(x)\n    return x\n")
    for submission, verdict, failing in [(REFERENCE, "passed", set()),
                                         (NAIVE, "failed", {"poisoned_row", "underflow"}),
                                         (broken, "compile_error", CHECKS)]:
        shutil.copyfile(submission, root / "submission" / "solution.py")
        proc, results = _run_gradescope(root, python=python)
        _assert_gradescope_schema(results)
        assert results["extra_data"]["verdict"] == verdict, results["output"][:500]
        assert {t["name"] for t in results["tests"] if t["status"] == "failed"} == failing


# --- what students print is text on every platform ----------------------------------------

PRINTS_HTML = "<img src=x onerror=alert(1)>"


def test_printed_html_is_text_on_gradescope_and_prairielearn(gradescope_zip, prairielearn_course,
                                                           world_readable_dir, tmp_path):
    loud = tmp_path / "loud.py"
    loud.write_text(f"print({PRINTS_HTML!r})\n" + REFERENCE.read_text())
    root = _autograder_root(world_readable_dir(), gradescope_zip, loud)
    proc, results = _run_gradescope(root)
    _assert_gradescope_schema(results)  # every output declared text, none HTML
    assert PRINTS_HTML in results["output"]
    proc, results = _run_prairielearn(_grade_root(world_readable_dir(), prairielearn_course,
                                                  loud))
    # PrairieLearn's results element escapes what it shows: the characters go as they are
    assert PRINTS_HTML in results["output"] and "&lt;" not in results["output"]


# --- HIP: the platforms' CPU containers refuse it, with why --------------------------------

def test_gradescope_refuses_a_hip_file_with_where_to_send_it(gradescope_zip, world_readable_dir):
    root = _autograder_root(world_readable_dir(), gradescope_zip, REFS / "solution.hip",
                            name="solution.hip")
    proc, results = _run_gradescope(root)
    assert results["score"] == 0 and results["tests"] == []
    assert "HIP" in results["output"] and "GPU server" in results["output"]


# --- each student's own parameters ----------------------------------------------------------

ONLINE_REFERENCE = REPO / "reference_solutions" / "online_softmax" / "solution.py"
ELEMENT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def _answers_for(values: dict, tmp_path: Path, name: str) -> Path:
    """The online reference with ANSWERS counted for ``values`` (R, C, dtype)."""
    tensor = ELEMENT_BYTES[values["dtype"]] * values["rows"] * values["cols"]
    path = tmp_path / f"{name}.py"
    path.write_text(ONLINE_REFERENCE.read_text() + (
        f"\nANSWERS = {{'bytes_3pass': {4 * tensor}, 'bytes_1pass': {2 * tensor}, "
        "'fp16_overflow_logit': 11.09}\n"))
    return path


def _byte_counts(results_tests: list[dict], key: str) -> str:
    return next(t for t in results_tests if t["name"] == "byte_count_answers")[key]


def test_two_students_get_their_own_parameters_on_gradescope(world_readable_dir, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("a course secret of some length\n")
    bundle = tmp_path / "online.zip"
    _package("gradescope", bundle, "online_softmax", "--secret-file", str(secret))
    with zipfile.ZipFile(bundle) as zf:
        assert "params_secret" in zf.namelist()
    from graders.engine import params
    from graders.engine.registry import get_exercise
    spec = get_exercise("online_softmax")
    mine = {who: params.derive(secret.read_text().strip(), who, "online_softmax", spec.params)
            for who in ("ada@uni.edu", "grace@uni.edu")}
    assert mine["ada@uni.edu"] != mine["grace@uni.edu"]
    ada_answers = _answers_for(mine["ada@uni.edu"], tmp_path, "ada")
    for who in mine:
        root = _autograder_root(world_readable_dir(), bundle, ada_answers)
        (root / "submission_metadata.json").write_text(json.dumps(
            {"users": [{"email": who.upper(), "id": 1, "name": who}], "previous_submissions": []}))
        proc, results = _run_gradescope(root)
        _assert_gradescope_schema(results)
        assert results["extra_data"]["params"] == mine[who]
        answered = next(t for t in results["tests"] if t["name"] == "byte_count_answers")
        assert (answered["status"] == "passed") == (who == "ada@uni.edu"), answered["output"]
        assert "Your parameters (derived from your Gradescope account)" in results["output"]
    assert (root / "source" / "params_secret").stat().st_mode & 0o077 == 0


def test_gradescope_keeps_the_previous_result_when_the_autograder_fails(world_readable_dir,
                                                                       tmp_path):
    bundle = tmp_path / "online.zip"
    _package("gradescope", bundle, "online_softmax")
    root = _autograder_root(world_readable_dir(), bundle, ONLINE_REFERENCE)
    earlier = {"score": 87.0, "output": "failed: 87/100", "tests": [
        {"name": "byte_count_answers", "score": 0.0, "max_score": 10.0, "status": "failed",
         "output": "bytes_3pass is wrong"}]}
    # no user: whose parameters to grade with cannot be told, a fault of the autograder's
    (root / "submission_metadata.json").write_text(json.dumps(
        {"users": [], "previous_submissions": [
            {"submission_time": "2026-12-01T10:00:00", "score": 87.0, "results": earlier}]}))
    proc, results = _run_gradescope(root)
    assert "GRADER FAULT" in proc.stderr
    assert results["score"] == 87.0 and results["tests"] == earlier["tests"]
    assert results["output"].startswith("The autograder failed on this submission")
    assert results["output_format"] == "text"


def test_two_variants_get_their_own_parameters_on_prairielearn(world_readable_dir, tmp_path):
    course = tmp_path / "course"
    _package("prairielearn", course, "online_softmax")
    question = course / "questions" / "online_softmax"
    info = json.loads((question / "info.json").read_text())
    assert info["singleVariant"] is False
    # the grader gets softmax_autograder/ alone: the key in softmax_params/ stays on the server
    assert info["externalGradingOptions"]["serverFilesCourse"] == ["softmax_autograder/"]
    assert (course / "serverFilesCourse" / "softmax_params" / "secret").stat().st_mode & 0o077 == 0
    assert "{{params.rows}}" in (question / "question.html").read_text()

    def generate(seed: int) -> dict:
        """server.py's generate() for one variant, as PrairieLearn calls it."""
        data = {"params": {}, "correct_answers": {}, "variant_seed": seed,
                "options": {"question_path": str(question),
                            "server_files_course_path": str(course / "serverFilesCourse")}}
        run = subprocess.run([sys.executable, "-c",
                              "import json, runpy, sys; data = json.loads(sys.argv[2]); "
                              "runpy.run_path(sys.argv[1])['generate'](data); "
                              "print(json.dumps(data['params']))",
                              str(question / "server.py"), json.dumps(data)],
                             capture_output=True, text=True, timeout=60, cwd=tmp_path,
                             env={"PATH": os.environ["PATH"]})  # not the repo: server.py alone
        assert run.returncode == 0, run.stderr
        return json.loads(run.stdout)

    def tensor_bytes(values: dict) -> int:
        return ELEMENT_BYTES[values["dtype"]] * values["rows"] * values["cols"]

    # two variants whose answers differ: the course's key is random, and two different
    # shapes can hold the same number of bytes (2048 x 4096 and 4096 x 2048)
    first = generate(1234)
    assert generate(1234) == first  # a variant's seed fixes its parameters
    variants = [first, next(v for v in map(generate, range(1, 20))
                            if tensor_bytes(v) != tensor_bytes(first))]
    answers = _answers_for(variants[0], tmp_path, "first")
    for i, values in enumerate(variants):
        root = _grade_root(world_readable_dir(), course, answers, params=values)
        proc, results = _run_prairielearn(root, "online_softmax")
        answered = next(t for t in results["tests"] if t["name"] == "byte_count_answers")
        assert (answered["points"] == answered["max_points"]) == (i == 0), answered["output"]
    root = _grade_root(world_readable_dir(), course, answers, params={})
    proc, results = _run_prairielearn(root, "online_softmax")  # no server.py's params
    assert results["gradable"] is False and "GRADER FAULT" in proc.stderr
