"""docs/authoring.md, proven: a new exercise built from the guide alone, in a folder of its
own, is listed, served and self-tested by an engine that names no exercise.

The files come out of the guide's code blocks marked ``file=PATH``; the mutant is made by the
guide's own ``mutant-diff`` command line. The registry is pointed at the temporary folder
with GRADERS_EXERCISES and GRADERS_REFERENCES, as a course keeping its exercises in its own
repository would.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

GUIDE = REPO / "docs" / "authoring.md"
TOY = "row_scale_add"


def _guide() -> str:
    return GUIDE.read_text()


def _files() -> dict[str, str]:
    """PATH -> text of every ```LANG file=PATH block of the guide."""
    blocks = re.findall(r"^```\w+ file=(\S+)\n(.*?)^```$", _guide(), re.M | re.S)
    return dict(blocks)


def _course(root: Path) -> dict[str, str]:
    """The environment of a course whose folders are under ``root``."""
    return {**os.environ, "GRADERS_EXERCISES": str(root / "exercises"),
            "GRADERS_REFERENCES": str(root / "reference_solutions")}


def _graders(args: list[str], env: dict[str, str], timeout: float = 120
             ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graders", *args], cwd=REPO, env=env,
                          text=True, capture_output=True, timeout=timeout)


@pytest.fixture
def course(tmp_path) -> Path:
    """The guide's exercise, written where the guide says, under a course root of its own."""
    files = _files()
    assert set(files) == {f"exercises/{TOY}/spec.toml", f"exercises/{TOY}/checks.py",
                          f"reference_solutions/{TOY}/solution.py"}
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    # the statement and the skeleton: any text does for grading (the guide says what they hold)
    (tmp_path / "exercises" / TOY / "statement.md").write_text("# Row scale and add\n")
    reference = (tmp_path / "reference_solutions" / TOY / "solution.py").read_text()
    (tmp_path / "exercises" / TOY / "skeleton.py").write_text(
        reference.replace("y = x * a + b", "y = x  # TODO: y = a·x + b"))

    # the mutant, as the guide makes it: copy, put the bug in, and its mutant-diff line
    edit = re.search(r"# edit /tmp/(\w+\.py): `(.+?)` becomes `(.+?)`", _guide())
    assert edit, "the guide says how to edit the copy"
    copy = tmp_path / edit.group(1)
    assert edit.group(2) in reference
    copy.write_text(reference.replace(edit.group(2), edit.group(3)))
    line = next(l for l in _guide().splitlines()
                if l.startswith(f"python -m graders mutant-diff {TOY} /tmp/"))
    argv = shlex.split(line.replace("/tmp/", f"{tmp_path}/"))[3:]  # after `python -m graders`
    made = _graders(argv, _course(tmp_path))
    assert made.returncode == 0, made.stderr
    patch = tmp_path / "reference_solutions" / TOY / "mutants" / "forgets_shift.patch"
    assert patch.read_text().startswith("# expect: random_rows — y = a·x: b is never added\n")
    assert sum(l[:1] in "+-" for l in patch.read_text().splitlines()[3:]) == 2  # one line
    return tmp_path


def test_the_guides_exercise_is_listed_and_its_mutant_fails_on_its_check(course):
    env = _course(course)
    listed = _graders(["list"], env)
    assert listed.returncode == 0 and listed.stdout.split()[0] == TOY, listed.stderr

    proc = _graders(["selftest", "--device", "cpu", "--exercise", TOY], env, timeout=900)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert re.search(rf"^ok    {TOY}/solution\.py +expect passed +got passed \(100\)", out, re.M)
    assert re.search(rf"^ok    {TOY}/mutants/forgets_shift\.patch +expect random_rows +"
                     r"got failed: random_rows", out, re.M), out
    assert out.rstrip().splitlines()[-1].startswith("2 of 2 as expected")


def test_the_servers_exercise_list_follows_the_setting(course, monkeypatch):
    """The server lists what `graders list --json` lists, with the course's folder made
    absolute for graders processes that run from the repository root."""
    from server.core.settings import Settings
    from server.grading.graders_client import GradersClient

    monkeypatch.chdir(course)
    monkeypatch.setenv("GRADERS_EXERCISES", "exercises")  # relative to where the server starts
    monkeypatch.setenv("GRADERS_REFERENCES", "reference_solutions")
    exercises = GradersClient(Settings()).exercises()
    assert list(exercises) == [TOY]
    assert exercises[TOY].entry_points == ["scale_add"]
    assert "y = x  # TODO" in exercises[TOY].skeletons["triton"]["source"]
    assert os.environ["GRADERS_EXERCISES"] == str(course / "exercises")


def test_the_engine_names_no_exercise():
    """Adding an exercise changes nothing under graders/: no file there may name one (the
    course's, or the guide's). graders/bench/ is left out: it is this course's benchmark
    (its lab kernels, its mix of submissions, its published figures), not on the way of a
    grading."""
    names = {p.name for p in (REPO / "exercises").iterdir() if (p / "spec.toml").is_file()}
    assert {"safe_softmax", "masked_softmax", "online_softmax"} <= names
    names.add(TOY)
    offenders = []
    for path in sorted((REPO / "graders").rglob("*")):
        relative = path.relative_to(REPO / "graders")
        if not path.is_file() or relative.parts[0] == "bench" or "__pycache__" in relative.parts:
            continue
        text = path.read_text(errors="replace")
        offenders += [f"graders/{relative}: {name}" for name in sorted(names) if name in text]
    assert not offenders, offenders
