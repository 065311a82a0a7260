"""Per-student exercise parameters (issue 15, item 5): online_softmax's traffic answers.

Each student's shape is derived from the course secret and their username; the grader
judges ANSWERS against the shape it is given, and answers right for another shape fail
with a message that says so. Through the CLI (``--params``), the worker's and the Celery
task's job, the API and the exercise page.
"""

from __future__ import annotations

import json
import re
import sys

import pytest
from conftest import REPO, run_cli
from test_server_api import NoDispatch, add_students, auth, running, submit, wait_done

from graders.engine.params import ParamError, parse_cli
from server.domain.exercises import ExerciseInfo
from server.domain.student_params import derive

SECRET = "test-course-secret-0123456789"
# independent of the exercise's checks.py: module §5's count, by hand
ELEMENT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
DEFAULTS = {"rows": 4096, "cols": 4096, "dtype": "float32"}


@pytest.fixture(scope="module")
def online_softmax() -> ExerciseInfo:
    """The exercise as the server sees it: through ``graders list --json``."""
    listed = json.loads(run_cli("list", "--json", timeout=120).stdout)["exercises"]
    return {e["name"]: ExerciseInfo(**e) for e in listed}["online_softmax"]


def counts(params: dict) -> tuple[int, int]:
    tensor = ELEMENT_BYTES[params["dtype"]] * params["rows"] * params["cols"]
    return 4 * tensor, 2 * tensor  # 3 reads + 1 write; 1 read + 1 write


def shape(params: dict) -> str:
    return f"R = {params['rows']}, C = {params['cols']} {params['dtype']}"


# -- the derivation --------------------------------------------------------------------

def test_two_students_get_different_params_deterministically(online_softmax):
    ada, grace = derive(SECRET, "ada", online_softmax), derive(SECRET, "grace", online_softmax)
    assert ada == derive(SECRET, "ada", online_softmax)  # the same student, the same numbers
    assert set(ada) == {"rows", "cols", "dtype"} and ada != grace
    assert counts(ada) != counts(grace)  # and so different answers (the CLI test needs it)
    declared = {p["name"]: p["choices"] for p in online_softmax.params}
    many = [derive(SECRET, f"student{i}", online_softmax) for i in range(300)]
    assert all(p[k] in declared[k] for p in many for k in p)
    assert DEFAULTS not in many  # the statement's example is nobody's own shape
    assert len({tuple(p.values()) for p in many}) > 60  # spread over the 146 combinations
    # another course's secret gives other numbers: without it nobody can compute them
    other = [derive("another-course-secret-0000", f"student{i}", online_softmax)
             for i in range(20)]
    assert other != many[:20]


def test_an_exercise_without_params_derives_none():
    plain = ExerciseInfo(name="safe_softmax", title="", summary="", languages=["triton"],
                         entry_points=[], deadline=None, statement="", skeletons={})
    assert derive(SECRET, "ada", plain) == {}


# -- grading through the CLI with --params ------------------------------------------------

def submission_for(tmp_path, name: str, params: dict):
    """The reference solution with ANSWERS replaced by the right numbers for ``params``."""
    source = (REPO / "reference_solutions" / "online_softmax" / "solution.py").read_text()
    three, one = counts(params)
    answers = (f'ANSWERS = {{"bytes_3pass": {three}, "bytes_1pass": {one}, '
               f'"fp16_overflow_logit": 11.09}}\n')
    replaced, n = re.subn(r"^ANSWERS = \{.*?^\}\n", answers, source, flags=re.S | re.M)
    assert n == 1, "the reference's ANSWERS block moved"
    path = tmp_path / f"{name}.py"
    path.write_text(replaced)
    return path


def grade(path, params: dict | None):
    argv = ["grade", "online_softmax", str(path), "--device", "cpu", "--json"]
    if params is not None:
        argv += ["--params", ",".join(f"{k}={v}" for k, v in params.items())]
    proc = run_cli(*argv)
    result = json.loads(proc.stdout)
    return proc.returncode, result, {c["name"]: c for c in result["checks"]}


def test_each_students_answers_pass_for_them_and_fail_for_the_other(tmp_path, online_softmax):
    ada, grace = derive(SECRET, "ada", online_softmax), derive(SECRET, "grace", online_softmax)
    files = {"ada": submission_for(tmp_path, "ada", ada),
             "grace": submission_for(tmp_path, "grace", grace)}
    for who, own, other in (("ada", ada, grace), ("grace", grace, ada)):
        code, result, checks = grade(files[who], own)
        assert code == 0 and result["verdict"] == "passed", checks["byte_count_answers"]
        assert result["params"] == own  # the result records the parameters it used

        code, result, checks = grade(files[who], other)
        check = checks["byte_count_answers"]
        assert code == 1 and not check["passed"]
        named = re.search(r"different shape \(R = (\d+), C = (\d+) (\w+)", check["message"])
        assert named, check["message"]  # a shape whose counts these are: own's, or its size
        assert counts(dict(zip(("rows", "cols", "dtype"),
                               (int(named[1]), int(named[2]), named[3])))) == counts(own)
        assert f"not for your shape, {shape(other)}" in check["message"], check["message"]
        # every other check is about the kernels, which are right whatever the shape
        assert all(c["passed"] for name, c in checks.items() if name != "byte_count_answers")


def test_the_reference_passes_on_the_defaults_and_fails_a_students_shape(online_softmax):
    reference = REPO / "reference_solutions" / "online_softmax" / "solution.py"
    code, result, _ = grade(reference, None)
    assert code == 0 and result["params"] == DEFAULTS
    ada = derive(SECRET, "ada", online_softmax)
    code, _, checks = grade(reference, ada)
    assert code == 1 and "different shape (R = 4096, C = 4096 float32" in \
        checks["byte_count_answers"]["message"]
    # the readable report says which values it judged against
    text = run_cli("grade", "online_softmax", str(reference), "--device", "cpu", "--params",
                   json.dumps(ada)).stdout
    assert "params: " + ",".join(f"{k}={v}" for k, v in ada.items()) in text


@pytest.mark.parametrize("params, says", [
    ("size=3", "online_softmax has no parameter 'size' (its parameters: rows, cols, dtype)"),
    ('{"rows": 3000}', "rows = 3000 is not allowed: choose one of 1024, 2048"),
    ("dtype=float64", "dtype = 'float64' is not allowed"),
    ('{"rows": 4096.0}', "rows = 4096.0 is not allowed"),  # JSON's float is not the int
    ("rows", "'rows' is not name=value"),
    ("[1, 2]", "'[1' is not name=value"),
    ('{"rows": ', "not valid JSON"),
])
def test_the_cli_refuses_a_parameter_that_does_not_fit(params, says):
    proc = run_cli("grade", "online_softmax",
                   str(REPO / "reference_solutions" / "online_softmax" / "solution.py"),
                   "--device", "cpu", "--params", params, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("error: --params: ") and says in proc.stderr, proc.stderr


def test_an_exercise_without_params_takes_none():
    proc = run_cli("grade", "safe_softmax",
                   str(REPO / "reference_solutions" / "safe_softmax" / "solution.py"),
                   "--device", "cpu", "--params", "rows=4096", timeout=60)
    assert proc.returncode == 2 and "safe_softmax has no parameter 'rows' (it takes none)" \
        in proc.stderr


def test_cli_forms_read_alike():
    assert parse_cli("rows=3072, cols=5120") == {"rows": "3072", "cols": "5120"}
    assert parse_cli('{"rows": 3072}') == {"rows": 3072}
    with pytest.raises(ParamError, match="given twice"):
        parse_cli("rows=1024,rows=2048")


# -- the jobs: the worker's JSON line, the Celery task ---------------------------------

def test_a_worker_job_with_bad_params_is_answered_not_graded(tmp_path):
    from graders.service.worker import handle

    path = tmp_path / "s.py"
    path.write_text("x = 1\n")
    # no slot at all: a job that does not fit is refused before any grading starts
    answer = handle(None, {"id": 4, "exercise": "online_softmax", "file": str(path),
                           "params": {"rows": 3}})
    assert answer["result"] is None and "bad job: rows = 3 is not allowed" in answer["error"]


FAKE_WORKER = """
import json, sys
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    job = json.loads(line)
    print(json.dumps({"id": job["id"], "result": {"verdict": "passed", "score": 100.0,
                      "params": job.get("params", "none sent")}}), flush=True)
    print(json.dumps({"id": job["id"], "settled": True, "slot": {"healthy": True}}), flush=True)
"""


def test_the_slot_worker_sends_the_params_in_the_job_line(tmp_path):
    from graders.service.worker_client import SlotWorker

    worker = SlotWorker([sys.executable, "-c", FAKE_WORKER], timeout_s=30)
    try:
        path = tmp_path / "s.py"
        path.write_text("")
        assert worker.grade("online_softmax", path, params={"rows": 2048}).result["params"] \
            == {"rows": 2048}
        assert worker.grade("online_softmax", path).result["params"] == "none sent"
    finally:
        worker.stop()


class RecordingCelery:
    def __init__(self):
        self.tasks = []

    def send_task(self, name, args, queue, task_id):
        self.tasks.append(args[0])


def test_the_celery_task_carries_the_students_params(tmp_path):
    from server.grading.celery_dispatch import CeleryDispatcher

    with running(f"sqlite:///{tmp_path / 'db'}", dispatcher=NoDispatch(),
                 course_secret=SECRET) as client:
        tokens = add_students(client, "ada")
        assert submit(client, tokens["ada"], exercise="online_softmax").status_code == 202
        state = client.app.state
        celery = RecordingCelery()
        dispatcher = CeleryDispatcher(state.sessionmaker, state.settings.model_copy(
            update={"task_secret": "task-secret-for-this-test"}), celery=celery,
            exercises=state.exercises)
        assert dispatcher._publish_some() == 1
        assert celery.tasks[0]["params"] == derive(SECRET, "ada",
                                                   state.exercises["online_softmax"])


def test_a_result_graded_with_other_params_is_not_the_students_grade(tmp_path):
    from server.domain.models import Submission
    from server.grading.graders_client import GradeOutcome
    from server.grading.jobs import Claimer, store

    with running(f"sqlite:///{tmp_path / 'db'}", dispatcher=NoDispatch(),
                 course_secret=SECRET, max_grader_attempts=2) as client:
        token = add_students(client, "ada")["ada"]
        sid = submit(client, token, exercise="online_softmax").json()["id"]
        state = client.app.state
        ada = derive(SECRET, "ada", state.exercises["online_softmax"])

        def grade_with(params):
            job = Claimer(state.sessionmaker).claim()
            passed = {"verdict": "passed", "score": 100.0, "params": params}
            return store(state.sessionmaker, state.settings, job.id, job.attempt,
                         GradeOutcome(passed), exercises=state.exercises)

        # a worker that dropped the parameters graded the defaults: a fault, graded again
        assert grade_with(DEFAULTS) == "retry"
        assert grade_with(ada) == "stored"
        with state.sessionmaker() as db:
            assert db.get(Submission, sid).verdict == "passed"


def test_a_remote_worker_grades_with_the_tasks_params(monkeypatch):
    from graders.service import remote_worker
    from graders.service.worker_client import GradeOutcome

    heard = {}

    class Slot:
        def grade(self, exercise, path, on_check=None, params=None):
            heard["params"] = params
            return GradeOutcome({"verdict": "passed", "score": 100.0, "params": params})

        def settle(self):
            return True, ""

    class Server:
        def post(self, url, json, headers, timeout):
            return type("R", (), {"status_code": 200})()

    monkeypatch.setattr(remote_worker, "SLOT", Slot())
    task = {"id": 1, "attempt": 1, "exercise": "online_softmax", "language": "triton",
            "source": "", "token": "t", "params": {"rows": 1024}}
    assert remote_worker.run_task(task, client=Server()) == "stored"
    assert heard["params"] == {"rows": 1024}


# -- the server: the page, the API, the grading -------------------------------------------

def test_a_student_sees_their_own_params_and_their_gradings_use_them(tmp_path):
    from test_web_pages import sign_in

    with running(f"sqlite:///{tmp_path / 'db'}", course_secret=SECRET) as client:
        tokens = add_students(client, "ada", "grace")
        info = client.app.state.exercises["online_softmax"]
        ada, grace = derive(SECRET, "ada", info), derive(SECRET, "grace", info)

        api = client.get("/api/exercises/online_softmax", headers=auth(tokens["ada"])).json()
        assert api["params"] == ada
        assert client.get("/api/exercises/online_softmax").json()["params"] is None
        assert client.get("/api/exercises/safe_softmax",
                          headers=auth(tokens["ada"])).json()["params"] == {}

        signed_out = client.get("/exercises/online_softmax").text
        assert "Your parameters" in signed_out and "to see your own values" in signed_out
        sign_in(client, tokens["ada"])
        page = client.get("/exercises/online_softmax").text
        mine = ",".join(f"{k}={v}" for k, v in ada.items())
        assert f"--params {mine}" in page
        for k, v in ada.items():
            assert f"{k} = {v}" in page
        assert f"--params {','.join(f'{k}={v}' for k, v in grace.items())}" not in page
        assert "Your parameters" not in client.get("/exercises/safe_softmax").text

        # her grading is sent her parameters (the stand-in grader echoes them back)
        sid = submit(client, tokens["ada"], exercise="online_softmax").json()["id"]
        assert wait_done(client, tokens["ada"], sid)["result"]["params"] == ada
        sid = submit(client, tokens["grace"], exercise="online_softmax").json()["id"]
        assert wait_done(client, tokens["grace"], sid)["result"]["params"] == grace


def test_the_development_secret_is_warned_about(caplog):
    from server.core.settings import Settings
    from server.domain.student_params import warn_if_development_secret

    with caplog.at_level("WARNING", logger="server.student_params"):
        assert warn_if_development_secret(Settings())
        assert "COURSE_SECRET is not set" in caplog.text
        assert not warn_if_development_secret(Settings(course_secret=SECRET))
    with pytest.raises(ValueError, match="5 characters, fewer than 16"):
        Settings(course_secret="short")
