import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# pytest-xdist runs the tests in several processes at once: each takes job uids from a range of its
# own (graders/isolation/jobuids.py reads this at import), so a test that looks for processes a
# grading left behind under "the job uids" never sees another process's gradings, and one worker's
# release of a uid never kills the other's runner. Set, not setdefault: the workers inherit the
# controller's environment, and the controller imports this file first (with setdefault both
# workers had 61000, and the fork-bomb and daemon tests failed 1 run in 3)
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "").removeprefix("gw")
if _WORKER.isdigit():
    os.environ["GRADERS_JOB_UID_BASE"] = str(61000 + 1000 * (int(_WORKER) % 4))

# the servers the tests start keep unstored results in an outbox (server/grading/outbox.py):
# by default var/outbox/ of the repository for PostgreSQL, which a test run must not leave
# behind. One folder for the whole run: inside it each database has its own
if "OUTBOX_DIR" not in os.environ:
    import tempfile

    os.environ["OUTBOX_DIR"] = tempfile.mkdtemp(prefix="autograder-test-outbox-")

from graders.engine.checker import grade  # noqa: E402
from graders.engine.registry import get_exercise  # noqa: E402
from graders.proof.mutants import get_mutant, materialise  # noqa: E402
from graders.shared.vocabulary import Device  # noqa: E402


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        return False


HAS_CUDA = _has_cuda()


# the course's mutants are patches (graders/proof/mutants.py): tests grade them written out here,
# a folder other uids may read (a sandboxed runner, a job uid)
_MUTANTS = Path(tempfile.mkdtemp(prefix="test-mutants-"))
_MUTANTS.chmod(0o755)
atexit.register(shutil.rmtree, _MUTANTS, ignore_errors=True)


def mutant_file(exercise: str, name: str) -> Path:
    """A course mutant as a file: ``mutant_file("safe_softmax", "naive_unsafe_exp")``
    (``"naive_unsafe_exp.hip"`` for the HIP one), its patch applied to the reference; or a
    wrong kernel written from scratch (``"row_per_program"``), as it is in from_scratch/."""
    scratch = REPO / "reference_solutions" / exercise / "from_scratch"
    whole = scratch / (name if "." in name else f"{name}.py")
    if whole.is_file():
        return whole
    (_MUTANTS / exercise).mkdir(mode=0o755, exist_ok=True)  # job uids read it (o+rx)
    return materialise(get_mutant(exercise, name), _MUTANTS)


ATTACK_TABLE: list[tuple[str, str, float, str]] = []


def pytest_runtest_logreport(report):
    """test_attacks.py records each case's row as a property of its report: reports reach
    the process that prints the summary also when pytest-xdist runs the tests elsewhere."""
    if report.when == "call":
        ATTACK_TABLE.extend(tuple(value) for key, value in report.user_properties
                            if key == "attack_row")


def pytest_terminal_summary(terminalreporter):
    if ATTACK_TABLE:
        terminalreporter.section("attack suite: each hostile submission and its verdict")
        for name, verdict, seconds, message in ATTACK_TABLE:
            terminalreporter.write_line(f"{name:<34} {verdict:<14} {seconds:5.1f} s  {message}")


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip)


def _broken_one_byte_strings() -> list[int]:
    return [i for i in range(256) if bytes([i])[0] != i or ord(chr(i)) != i]


@pytest.fixture(autouse=True)
def one_byte_strings_intact():
    """CPython shares one object per one-byte bytes (and per Latin-1 character); C code
    that writes into a buffer it was handed can change it for the whole process, and a
    later, unrelated test fails (graders/hip/nvrtc.py once turned every b" " into a NUL).
    This names the test that did it."""
    yield
    assert _broken_one_byte_strings() == [], "this test overwrote CPython's shared bytes"


@pytest.fixture
def grade_source(tmp_path):
    """Write a submission into its own folder and grade it on the CPU interpreter."""

    def run(exercise: str, source: str, name: str = "submission.py", **kwargs):
        folder = tmp_path / "sub"
        folder.mkdir(exist_ok=True)
        path = folder / name
        path.write_text(source)
        return grade(get_exercise(exercise), path, Device.CPU, **kwargs)

    return run


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graders", *args], cwd=REPO, text=True,
                          capture_output=True, timeout=timeout, env={**os.environ})


# -- the server's tests: each runs on SQLite and on a throwaway PostgreSQL ----------------

@pytest.fixture(scope="session")
def postgres():
    from postgres import ThrowawayPostgres, find_bindir

    if find_bindir() is None:
        if os.environ.get("CI"):
            pytest.fail("CI must test PostgreSQL: install postgresql (scripts/setup does)")
        pytest.skip("no PostgreSQL server binaries here")
    server = ThrowawayPostgres()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'autograder.db'}"
    return request.getfixturevalue("postgres").new_database()
