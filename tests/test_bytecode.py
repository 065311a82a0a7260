"""The runners' bytecode folder (graders.isolation.bytecode): the grader's own, filled once
for a Python and a toolchain, and refused where anybody else could have written it."""

import shutil
import sys

import pytest

from graders.isolation import bytecode
from graders.isolation.launch import RunnerJob
from graders.isolation.sandbox import BwrapLauncher, DirectLauncher


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """bytecode's module state as in a new process, its folder under ``tmp_path``."""
    monkeypatch.setattr(bytecode.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(bytecode, "_ready", [])
    monkeypatch.setattr(bytecode, "_worker", [])
    made = bytecode.folder()  # its name (one a checkout and Python), then as if never made
    made.rmdir()
    return made


def test_the_fill_runs_once_for_a_toolchain_and_again_when_it_changes(fresh, monkeypatch):
    fills = []

    def fill(where, repo):
        fills.append(where)
        return True

    monkeypatch.setattr(bytecode, "_fill", fill)
    monkeypatch.setattr(bytecode, "fingerprint", lambda repo: "toolchain A")
    bytecode._make_ready()
    assert bytecode.prefix() == fresh and fills == [fresh]

    bytecode._ready.clear()  # a later process, the same toolchain: read, not filled
    bytecode._make_ready()
    assert bytecode.prefix() == fresh and fills == [fresh]

    bytecode._ready.clear()  # an upgrade
    monkeypatch.setattr(bytecode, "fingerprint", lambda repo: "toolchain B")
    bytecode._make_ready()
    assert bytecode.prefix() == fresh and len(fills) == 2


def test_a_failed_fill_leaves_the_runners_without_it(fresh, monkeypatch):
    monkeypatch.setattr(bytecode, "_fill", lambda where, repo: False)
    bytecode._make_ready()
    assert bytecode.prefix() is None and not (fresh / "filled").exists()


@pytest.mark.parametrize("planted", ["group-writable folder", "symlink"])
def test_a_folder_somebody_else_could_have_written_is_refused(fresh, tmp_path, monkeypatch,
                                                              planted):
    if planted == "symlink":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        fresh.symlink_to(elsewhere)
    else:
        fresh.mkdir()
        fresh.chmod(0o777)
    monkeypatch.setattr(bytecode, "_fill", lambda where, repo: pytest.fail("filled"))
    assert bytecode.folder() is None
    bytecode._make_ready()
    assert bytecode.prefix() is None


def test_a_folder_made_under_a_strict_umask_is_opened_to_the_job_uids(fresh):
    """Runners run as job uids of their own on a host without cgroups: a folder they
    cannot enter would keep every runner from starting (bwrap binds it)."""
    fresh.mkdir(mode=0o700)
    fresh.chmod(0o700)
    assert bytecode.folder() == fresh
    assert fresh.stat().st_mode & 0o777 == 0o755


def test_the_fingerprint_follows_the_runners_code(tmp_path):
    (tmp_path / "graders").mkdir()
    module = tmp_path / "graders" / "runner.py"
    module.write_text("A = 1\n")
    before = bytecode.fingerprint(tmp_path)
    assert bytecode.fingerprint(tmp_path) == before
    module.write_text("A = 22\n")
    assert bytecode.fingerprint(tmp_path) != before


def test_a_folder_removed_under_a_running_grader_is_filled_again(fresh, monkeypatch):
    """A cleaner of the temporary folder may remove it while the grader runs: a runner told
    to bind a folder that is gone would not start."""
    fills = []
    monkeypatch.setattr(bytecode, "_fill", lambda where, repo: fills.append(where) or True)
    monkeypatch.setattr(bytecode, "fingerprint", lambda repo: "toolchain A")
    bytecode.begin()
    assert bytecode.wait(timeout_s=30) == fresh
    shutil.rmtree(fresh)
    assert bytecode.prefix() is None
    bytecode.begin()
    assert bytecode.wait(timeout_s=30) == fresh and len(fills) == 2


def test_only_a_sandboxed_runner_is_given_the_folder_and_only_to_read(tmp_path):
    """A runner without the sandbox runs as the grader's own user: given the folder, it
    could write into it what every sandboxed runner imports next."""
    job = RunnerJob(python=sys.executable, device="cpu", fds=(0, 1), workdir=tmp_path,
                    env={}, bytecode=tmp_path / "bytecode")
    job.inbox.mkdir()
    direct, _ = DirectLauncher().command(job)
    assert not any("pycache_prefix" in arg for arg in direct)
    sandboxed, _ = BwrapLauncher().command(job)
    assert f"pycache_prefix={bytecode.SANDBOX_BYTECODE}" in sandboxed
    at = sandboxed.index(str(tmp_path / "bytecode"))
    assert sandboxed[at - 1:at + 2] == ["--ro-bind", str(tmp_path / "bytecode"),
                                        bytecode.SANDBOX_BYTECODE]
