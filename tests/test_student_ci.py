"""docs/student-ci.md's workflow, run as GitHub would run it.

The workflow's yaml block is parsed and its one job is run here for one entry of its
matrix at a time (run_job below), step by step, in a temporary folder laid out like a
student's repository: the job's `env` with `${{ matrix.* }}` filled in from the entry; a
step runs when no step before it failed and its `if:` holds; `$GITHUB_OUTPUT` is read back
into `steps.<id>.outputs`; `$GITHUB_STEP_SUMMARY`, `$RUNNER_TEMP` and `$GITHUB_WORKSPACE`
are what a runner gives a step. Every `run:` step runs as written, the install step
included, with `bash --noprofile --norc -eo pipefail`, which is what `shell: bash` means on
GitHub's runners.

What GitHub's actions do (the `uses:` steps), the test stands in for (STAND_INS below):

- "Check out my work" (actions/checkout): the temporary folder, with the student's file.
- "Get the graders" (actions/checkout of the course's repository into .grader): a link to
  this working tree, which is that repository.
- "Set up Python" (actions/setup-python): a fresh virtual environment of this Python
  (`python -m venv`: nothing in it but pip), made once for the session, first on PATH.
  The first job's install step installs everything into it; a later job's finds it all
  there. Its pip cache (`cache: pip`) is not stood in for: it keeps pip's downloads
  between runs, which changes where the wheels come from, not what is installed; the
  stand-in checks that the file its key is made from (`cache-dependency-path`) is there,
  as setup-python fails when it is not.

Where the install step's packages come from is stood in for too: the step runs against
two local package indexes (file: URLs the test builds), through the overrides it honours:
TORCH_INDEX_URL (where torch comes from where it is set; a runner points it at PyTorch's
CPU wheel index, else pip's configured index serves torch) and pip's own PIP_INDEX_URL
(pip's configured index, where triton and numpy come from). They hold the
wheels of the versions this repository's .venv has (torch, its dependencies, triton and
numpy), fetched by `pip download` from this machine's configured package mirror, and no
others: pip's configuration files are off for the job (PIP_CONFIG_FILE=/dev/null). torch
there is the real CPU build, installed in full; the gradings run in what the step
installed (the first job, install and grading, took 48 s here beside the other pytest
process; 2 GB on disk until the session ends). Where .venv's torch is not the CPU build
(a GPU machine's), the jobs are not run.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest
import yaml
from conftest import mutant_file

from graders.engine.registry import all_exercises

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "student-ci.md"
REFERENCE = REPO / "reference_solutions/safe_softmax/solution.py"
SYNTAX_ERROR = REPO / "tests/fixtures/syntax_error.py"  # compile_error on line 4
STAND_INS = {"Check out my work", "Get the graders", "Set up Python"}  # see _stand_in
RUN = {"Find my file", "Install the graders (CPU only)", "Grade"}


# -- the workflow as the doc gives it ---------------------------------------------------------

def workflow() -> dict:
    blocks = re.findall(r"^```yaml\n(.*?)^```", DOC.read_text(), re.S | re.M)
    assert len(blocks) == 1, "docs/student-ci.md must hold exactly one yaml block"
    return yaml.safe_load(blocks[0])


def the_job() -> dict:
    (job,) = workflow()["jobs"].values()
    return job


def step(name: str) -> dict:
    return next(s for s in the_job()["steps"] if s["name"] == name)


def entry(exercise: str) -> dict:
    """The doc's matrix entry for an exercise."""
    return next(e for e in the_job()["strategy"]["matrix"]["include"]
                if e["exercise"] == exercise)


def requirement_pins() -> dict[str, str]:
    text = (REPO / "requirements.txt").read_text()
    return dict(re.findall(r"^(torch|triton|numpy)==([0-9][0-9.]*)$", text, re.M))


# -- a runner for one job of the matrix ------------------------------------------------------

@dataclass
class Job:
    outcomes: dict[str, str] = field(default_factory=dict)  # success, failure, skipped
    returncodes: dict[str, int] = field(default_factory=dict)
    stdout: str = ""
    stderr: str = ""
    summary: str = ""  # every step's $GITHUB_STEP_SUMMARY, as the run's page shows them

    def lines(self, prefix: str) -> list[str]:
        return [line for line in self.stdout.splitlines() if line.startswith(prefix)]


@dataclass
class Runner:
    """A machine to run jobs on: a fresh Python (setup-python's stand-in) and the local
    package indexes the install step reads, all under ``root``."""
    root: Path

    @property
    def python(self) -> Path:
        return self.root / "python"

    @property
    def environment(self) -> dict[str, str]:
        """Where packages come from, as a runner's environment would say it."""
        return {"TORCH_INDEX_URL": (self.root / "torch-index").as_uri() + "/",
                "PIP_INDEX_URL": (self.root / "pypi").as_uri() + "/",
                "PIP_CONFIG_FILE": os.devnull,  # none of this machine's mirrors
                "PIP_CACHE_DIR": str(self.root / "pip-cache"),
                "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


_MATRIX = re.compile(r"\$\{\{\s*matrix\.(\w+)\s*\}\}")
_IF = re.compile(r"steps\.(\w+)\.outputs\.(\w+) == '([^']*)'")


def _fill(value, matrix: dict) -> str:
    """`${{ matrix.NAME }}` filled in as GitHub does (empty when the entry lacks it); any
    other expression is one this runner does not know, and fails the test."""
    filled = _MATRIX.sub(lambda m: str(matrix.get(m.group(1), "")), str(value))
    assert "${{" not in filled, f"an expression the test cannot evaluate: {value}"
    return filled


def _holds(condition: str, outputs: dict[str, dict[str, str]]) -> bool:
    found = _IF.fullmatch(condition.strip())
    assert found, f"an if: the test cannot evaluate: {condition}"
    step_id, name, value = found.groups()
    return outputs.get(step_id, {}).get(name, "") == value


def _stand_in(name: str, spec: dict, runner: Runner, work: Path, matrix: dict,
              submission: Path | None, env: dict[str, str]) -> None:
    """What the action of a `uses:` step does to the job, done here (STAND_INS)."""
    given = spec.get("with", {})
    if name == "Check out my work":
        if submission is not None:
            shutil.copy(submission, work / matrix["file"])
    elif name == "Get the graders":
        assert given["path"] == ".grader"
        (work / ".grader").symlink_to(REPO, target_is_directory=True)
    elif name == "Set up Python":
        assert given["python-version"] == f"{sys.version_info.major}.{sys.version_info.minor}"
        assert given["cache"] == "pip"
        # setup-python refuses to cache when the key's file is not there
        assert (work / given["cache-dependency-path"]).is_file(), given
        env["PATH"] = f"{runner.python / 'bin'}{os.pathsep}{env['PATH']}"
    else:
        raise AssertionError(f"no stand-in for the step {name!r} ({spec['uses']})")


def run_job(runner: Runner, base: Path, matrix: dict, submission: Path | None) -> Job:
    """The workflow's job for one matrix entry, with ``submission`` as the entry's file
    (None: the student has no such file yet)."""
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="student-repo-", dir=base))
    temp = Path(tempfile.mkdtemp(prefix="runner-temp-", dir=base))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "PYTHON", "PIP_", "VIRTUAL_ENV"))}
    env.update(CI="true", GITHUB_ACTIONS="true", GITHUB_WORKSPACE=str(work),
               RUNNER_TEMP=str(temp))
    env.update(runner.environment)
    job = the_job()
    env.update({k: _fill(v, matrix) for k, v in job.get("env", {}).items()})
    outputs: dict[str, dict[str, str]] = {}
    result = Job()
    failed = False
    for number, spec in enumerate(job["steps"]):
        name = spec["name"]
        if failed or ("if" in spec and not _holds(spec["if"], outputs)):
            result.outcomes[name] = "skipped"
            continue
        if "uses" in spec:
            _stand_in(name, spec, runner, work, matrix, submission, env)
            result.outcomes[name] = "success"
            continue
        output, summary = temp / f"output-{number}", temp / f"summary-{number}"
        output.touch()
        summary.touch()
        script = temp / f"step-{number}.sh"
        script.write_text(spec["run"])
        step_env = dict(env, GITHUB_OUTPUT=str(output), GITHUB_STEP_SUMMARY=str(summary))
        step_env.update({k: _fill(v, matrix) for k, v in spec.get("env", {}).items()})
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail",
                               str(script)], cwd=work, env=step_env, text=True,
                              capture_output=True, timeout=600)
        result.stdout += done.stdout
        result.stderr += done.stderr
        result.summary += summary.read_text()
        result.returncodes[name] = done.returncode
        result.outcomes[name] = "success" if done.returncode == 0 else "failure"
        failed = done.returncode != 0
        if "id" in spec:  # name=value lines (this workflow writes no multi-line values)
            outputs[spec["id"]] = dict(line.split("=", 1)
                                       for line in output.read_text().splitlines() if line)
    return result


# -- the runner, made once for the session (pytest-xdist's processes share it) ----------------

def _local_index(wheels: Path, index: Path) -> set[str]:
    """A PEP 503 index of a folder of wheels, as pip reads one from a file: URL."""
    projects = set()
    for wheel in sorted(wheels.glob("*.whl")):
        project = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
        (index / project).mkdir(parents=True, exist_ok=True)
        with (index / project / "index.html").open("a") as page:
            page.write(f'<a href="{wheel.as_uri()}">{wheel.name}</a>\n')
        projects.add(project)
    return projects


def _make_runner(root: Path) -> Runner:
    runner = Runner(root)
    installed = {d.metadata["Name"].lower(): d.version
                 for d in importlib.metadata.distributions() if d.metadata["Name"]}
    # torch's dependencies at the versions .venv has too, where the mirror has them
    constraints = root / "venv-versions.txt"
    constraints.write_text("".join(f"{name}=={version}\n"
                                   for name, version in sorted(installed.items())))
    wanted = {"torch-wheels": [f"torch=={installed['torch']}"],
              "pypi-wheels": [f"{name}=={installed[name]}" for name in ("triton", "numpy")]}
    for folder, requirements in wanted.items():
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary",
                        ":all:", "--dest", str(root / folder), "-c", str(constraints),
                        *requirements], check=True, timeout=600)
    torch_index = _local_index(root / "torch-wheels", root / "torch-index")
    pypi = _local_index(root / "pypi-wheels", root / "pypi")
    # PyPI's torch is the CUDA build: the step must take torch from the other index
    assert "torch" in torch_index and "torch" not in pypi
    assert {"triton", "numpy"} <= pypi and not {"triton", "numpy"} & torch_index
    subprocess.run([sys.executable, "-m", "venv", str(runner.python)], check=True,
                   timeout=300)
    return runner


@dataclass
class Session:
    runner: Runner
    first: Job  # the first job run: safe_softmax's reference, which installed everything


@contextlib.contextmanager
def _locked(root: Path):
    with (root / "lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def session(tmp_path_factory):
    """The runner, made by the first test process that needs it; pytest-xdist's other
    process waits for it and shares it. The last one done removes it (about 2 GB)."""
    torch = importlib.metadata.version("torch")
    if not torch.endswith("+cpu"):  # a GPU machine's .venv: no CPU wheel to serve
        pytest.skip(f"this .venv's torch is {torch}, not the CPU build the workflow installs")
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # one folder for all of this session's processes
    root = root / "student-ci"
    root.mkdir(exist_ok=True)
    first, users = root / "first-job.json", root / "users"
    with _locked(root):
        if not first.exists():
            runner = _make_runner(root)
            job = run_job(runner, root / "first-job", entry("safe_softmax"), REFERENCE)
            first.write_text(json.dumps(asdict(job)))
        users.write_text(str(int(users.read_text() if users.exists() else 0) + 1))
        session = Session(Runner(root), Job(**json.loads(first.read_text())))
    yield session
    with _locked(root):
        left = int(users.read_text()) - 1
        users.write_text(str(left))
        if left == 0:
            for path in root.iterdir():
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                elif path.name != "lock":
                    path.unlink()


# -- what the workflow is --------------------------------------------------------------------

def test_every_step_is_either_stood_in_for_or_run():
    """A step added to the doc must be thought about here, not silently skipped."""
    job = the_job()
    names = [s["name"] for s in job["steps"]]
    assert set(names) == STAND_INS | RUN, names
    assert {s["name"] for s in job["steps"] if "uses" in s} == STAND_INS
    assert {s["name"] for s in job["steps"] if "run" in s} == RUN
    assert job["defaults"]["run"]["shell"] == "bash"


def test_it_only_reads_and_its_actions_run_on_node_24():
    """Node 20 actions are deprecated on GitHub's runners: checkout v5 and setup-python v6
    are the first majors on Node 24, and v7 of both the current ones (2026-07)."""
    assert workflow()["permissions"] == {"contents": "read"}
    current = {"actions/checkout": 7, "actions/setup-python": 7}
    for s in the_job()["steps"]:
        if "uses" in s:
            action, major = re.fullmatch(r"([\w-]+/[\w-]+)@v(\d+)", s["uses"]).groups()
            assert int(major) >= current[action], s["uses"]
        if s.get("uses", "").startswith("actions/checkout@"):
            assert s["with"]["persist-credentials"] is False  # no token left behind


def test_each_exercise_is_a_job_of_its_own():
    """GitHub shows each job's annotations and summary apart: one per exercise."""
    job = the_job()
    strategy = job["strategy"]
    assert strategy["fail-fast"] is False  # a failing exercise does not cancel the others
    include = strategy["matrix"]["include"]
    assert sorted(e["exercise"] for e in include) == sorted(all_exercises())
    for e in include:
        assert set(e) == {"exercise", "file", "options"}
        assert e["file"] == f"{e['exercise']}_skeleton.py"
    assert "${{ matrix.exercise }}" in job["name"]
    assert job["env"] == {"EXERCISE": "${{ matrix.exercise }}", "FILE": "${{ matrix.file }}",
                          "OPTIONS": "${{ matrix.options }}"}


def test_the_install_reads_the_courses_pins_and_the_pip_cache_is_keyed_on_them():
    """The versions are the grader's requirements.txt's, read at the ref the student
    checks out, so they cannot drift from it; the cache's key is the same file."""
    install = step("Install the graders (CPU only)")["run"]
    assert ".grader/requirements.txt" in install
    assert not re.search(r"==\s*[0-9]", install), "versions are read, not repeated"
    assert not re.search(r"https?://", install), "no package host is named (issue 38)"
    assert set(requirement_pins()) == {"torch", "triton", "numpy"}
    given = step("Set up Python")["with"]
    assert (given["cache"], given["cache-dependency-path"]) == ("pip",
                                                                ".grader/requirements.txt")


@pytest.mark.parametrize("index", [None, "file:///srv/torch-index/"], ids=["unset", "set"])
def test_the_install_takes_torch_from_torch_index_url_else_pips_own_index(tmp_path, index):
    """The install step as written, with a `python` that logs what pip is asked for: torch
    with --index-url only where TORCH_INDEX_URL is set; the rest from pip's own index."""
    (tmp_path / ".grader").symlink_to(REPO, target_is_directory=True)
    stubs = tmp_path / "bin"
    stubs.mkdir()
    log = tmp_path / "pip.log"
    (stubs / "python").write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    (stubs / "python").chmod(0o755)
    (tmp_path / "step.sh").write_text(step("Install the graders (CPU only)")["run"])
    env = {"PATH": f"{stubs}:/usr/bin:/bin"}
    if index is not None:
        env["TORCH_INDEX_URL"] = index
    subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail",
                    str(tmp_path / "step.sh")], cwd=tmp_path, env=env, check=True, timeout=30)
    pins = requirement_pins()
    torch = ["--index-url", index] if index else []
    assert log.read_text().splitlines() == [
        " ".join(["-m pip install --no-compile", *torch, f"torch=={pins['torch']}"]),
        f"-m pip install --no-compile triton=={pins['triton']} numpy=={pins['numpy']}"]


def test_the_grade_step_grades_once_on_the_cpu_without_the_sandbox():
    """Why each flag is there is in the doc; that they are there is checked here."""
    run = step("Grade")["run"]
    assert run.count("python -m graders grade ") == 1  # marks and summary row from one
    assert "--device cpu" in run and "--no-sandbox" in run and "--format github" in run


# -- the workflow run ------------------------------------------------------------------------

def test_the_install_step_installs_the_courses_pins_with_a_cpu_torch(session):
    first = session.first
    assert first.outcomes["Install the graders (CPU only)"] == "success", \
        first.stdout + first.stderr
    show = ("import importlib.metadata as m, json; print(json.dumps({n: m.version(n) "
            "for n in ('torch', 'triton', 'numpy')}))")
    versions = json.loads(subprocess.run(
        [str(session.runner.python / "bin" / "python"), "-c", show], check=True, text=True,
        capture_output=True).stdout)
    pins = requirement_pins()
    assert versions["torch"] == f"{pins['torch']}+cpu", versions  # from TORCH_INDEX_URL's
    assert (versions["triton"], versions["numpy"]) == (pins["triton"], pins["numpy"])


def test_a_passing_submission_gets_a_notice_a_score_row_and_exit_0(session):
    first = session.first
    assert set(first.outcomes.values()) == {"success"}, first.stdout + first.stderr
    assert ("::notice file=safe_softmax_skeleton.py,title=safe_softmax%3A passed::verdict "
            "passed, score 100/100, 8 of 8 checks passed") in first.stdout.splitlines()
    assert not first.lines("::error") and not first.lines("::warning")
    assert first.summary == ("| exercise | verdict | score | failed checks |\n"
                             "|---|---|---|---|\n"
                             "| safe_softmax | passed | 100/100 | none |\n")


def test_a_file_not_there_yet_gets_a_warning_and_nothing_is_installed(session, tmp_path):
    job = run_job(session.runner, tmp_path, entry("masked_softmax"), None)
    assert job.outcomes["Find my file"] == "success", job.stderr
    assert {name for name, outcome in job.outcomes.items() if outcome == "skipped"} == \
        {"Get the graders", "Set up Python", "Install the graders (CPU only)", "Grade"}
    assert job.lines("::warning") == ["::warning title=masked_softmax::"
                                      "masked_softmax_skeleton.py is not in this repository "
                                      "yet: not graded"]
    assert job.summary == ""


def test_a_failing_submission_marks_each_failed_check_and_fails_the_step(session, tmp_path):
    job = run_job(session.runner, tmp_path, entry("safe_softmax"),
                  mutant_file("safe_softmax", "naive_unsafe_exp"))
    assert job.returncodes["Grade"] == 1, job.stdout + job.stderr
    errors = job.lines("::error ")
    titles = sorted(re.search(r"title=safe_softmax%3A (\w+) ", e).group(1) for e in errors)
    assert titles == ["poisoned_row", "underflow"], errors
    assert all(e.startswith("::error file=safe_softmax_skeleton.py,") for e in errors)
    assert job.lines("::notice file=safe_softmax_skeleton.py,title=safe_softmax%3A failed::")
    assert job.summary.splitlines()[-1] == \
        "| safe_softmax | failed | 70/100 | poisoned_row (0/20), underflow (0/10) |"
    assert "::group::the full report" in job.stdout  # the worst rows, in the log


def test_a_file_that_does_not_import_is_marked_on_its_line(session, tmp_path):
    job = run_job(session.runner, tmp_path, entry("safe_softmax"), SYNTAX_ERROR)
    assert job.returncodes["Grade"] == 1, job.stdout + job.stderr
    (error,) = job.lines("::error ")
    assert error.startswith("::error file=safe_softmax_skeleton.py,line=4,title=safe_softmax"
                            "%3A compile_error::IndentationError"), error
    row = job.summary.splitlines()[-1]
    assert row.startswith("| safe_softmax | compile_error | 0/100 | IndentationError"), row
    assert "(line 4 of your file)" in row


def test_options_reach_the_grader_and_a_usage_error_fails_with_2(session, tmp_path):
    """The entry's options are passed on (--params, for an exercise that has them); a
    grader that refuses says why in the log, and the step fails with its exit 2."""
    matrix = dict(entry("safe_softmax"), options="--params nonsense=1")
    job = run_job(session.runner, tmp_path, matrix, REFERENCE)
    assert job.returncodes["Grade"] == 2, job.stdout + job.stderr
    assert "--params" in job.stderr
    assert job.summary == ""  # nothing graded: no row
