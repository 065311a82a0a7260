"""A grading is answered before its last runners have exited (issue 43): a runner's exit
takes ~0.2 s on a GPU, its CUDA context torn down, and the student need not wait for it.
What the answer must still hold: everything the submission printed. What the slot must
still do before its next job: wait for those runners and judge its health by them."""

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time

import pytest
from test_grading import safe

from graders.engine.registry import get_exercise
from graders.isolation import launch
from graders.isolation.launch import CappedOutput
from graders.service.worker_client import SlotWorker
from graders.shared.vocabulary import Device, Verdict


def test_settled_text_holds_everything_written_before_the_writer_said_so():
    """The runner flushes and then replies; what it printed is read before the answer,
    even where the reading thread is behind (held here until after the reply)."""
    reply_r, reply_w = os.pipe()
    writer = ("import os, sys, time\n"
              "sys.stdin.buffer.read(1)\n"
              "os.write(1, b'a' * 1000 + b'END')\n"
              f"os.write({reply_w}, b'x')\n"
              "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", writer], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, pass_fds=(reply_w,))
    os.close(reply_w)
    try:
        output = CappedOutput(proc.stdout, keep=2_000_000, stop_at=10_000_000,
                              on_flood=proc.kill)
        output._lock.acquire()  # the reading thread falls behind the writer
        proc.stdin.write(b"g")
        proc.stdin.flush()
        assert os.read(reply_r, 1) == b"x"
        threading.Timer(0.3, output._lock.release).start()
        text = output.settled_text(wait_s=5)
        assert len(text) == 1003 and text.endswith("END")
    finally:
        proc.kill()
        proc.wait()
        os.close(reply_r)
    assert output.text().endswith("END")  # and once it has exited, the same


def test_settled_text_gives_up_on_a_runner_that_never_stops_printing():
    proc = subprocess.Popen([sys.executable, "-c", "while True: print('x' * 4000, flush=True)"],
                            stdout=subprocess.PIPE)
    try:
        output = CappedOutput(proc.stdout, keep=10_000, stop_at=1 << 40, on_flood=proc.kill)
        time.sleep(0.2)
        started = time.monotonic()
        text = output.settled_text(wait_s=0.3)
        assert time.monotonic() - started < 3
        assert len(text) == 10_000  # its first bytes, as kept
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def held_closes(monkeypatch):
    """Every runner's close held until the test lets it go."""
    release = threading.Event()
    closing = []
    original = launch.RunnerProcess.close

    def held(self):
        closing.append(self)
        assert release.wait(120), "the closes were never let go"
        return original(self)

    monkeypatch.setattr(launch.RunnerProcess, "close", held)
    return release, closing


def test_a_slot_answers_before_its_runners_exit_and_waits_for_them_before_the_next_job(
        tmp_path, held_closes):
    from graders.service.slots import Slot

    release, closing = held_closes
    exercise = get_exercise("safe_softmax")
    exercise = dataclasses.replace(exercise, checks=exercise.checks[:2])
    path = tmp_path / "submission.py"
    path.write_text(safe("    print('the wrapper ran on', tuple(x.shape))\n"
                         "    y = torch.empty_like(x)\n    launch(x, y)\n    return y\n"))
    slot = Slot("answer-first", Device.CPU, warm=1)
    try:
        answered = {}
        grading = threading.Thread(target=lambda: answered.update(
            result=slot.grade(exercise, path, wait_for_exit=False)), daemon=True)
        grading.start()
        grading.join(180)
        # answered with its runner's close still held: the answer did not wait for it
        assert not grading.is_alive(), "the answer waited for the runner's exit"
        result = answered["result"]
        assert result.verdict is Verdict.PASSED, result.message
        assert closing and all(p.proc.poll() is None for p in closing)
        # what the submission printed is in the answer, its runner still alive
        assert "the wrapper ran on" in result.output
        assert "close_s" not in result.phases

        finished = {}
        waiting = threading.Thread(target=lambda: finished.update(fit=slot.finish_job()),
                                   daemon=True)
        waiting.start()
        time.sleep(0.5)
        assert waiting.is_alive(), "the slot did not wait for the runner's exit"
        release.set()
        waiting.join(60)
        assert finished == {"fit": True}
        assert all(p.proc.poll() is not None for p in closing)
    finally:
        release.set()
        slot.close()


def test_grade_still_waits_and_its_output_is_whole(tmp_path):
    """The CLI's and the packages' grade: the runners gone when it returns."""
    from graders.engine.checker import Grader

    exercise = get_exercise("safe_softmax")
    exercise = dataclasses.replace(exercise, checks=exercise.checks[:1])
    path = tmp_path / "submission.py"
    path.write_text(safe("    print('printed in a call')\n"
                         "    y = torch.empty_like(x)\n    launch(x, y)\n    return y\n"))
    grader = Grader(exercise, path, Device.CPU)
    result = grader.grade()
    assert result.verdict is Verdict.PASSED, result.message
    assert "printed in a call" in result.output
    assert "close_s" in result.phases
    assert grader.close_report is not None and grader.close_report.all_killed
    assert not grader.grading.state.open and not grader.grading.state.closing


# -- the worker settles after its answer: its runners gone, its slot judged -----------------

SETTLING_WORKER = """
import json, sys, time
healthy = sys.argv[1] == "healthy"
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    job = json.loads(line)
    print(json.dumps({"id": job["id"], "result": {"verdict": "passed", "score": 1.0},
                      "slot": {"healthy": True, "problem": ""}}), flush=True)
    time.sleep(float(sys.argv[2]))  # its runners exiting
    if sys.argv[2] == "999":
        continue
    print(json.dumps({"id": job["id"], "settled": True, "slot": {
        "healthy": healthy, "problem": "" if healthy else "2 processes of the last job survive"}}),
        flush=True)
    if not healthy:
        time.sleep(0.5)  # its warm runners closed
        sys.exit(1)
"""


def test_the_client_answers_at_once_and_sends_the_next_job_only_once_the_slot_settled(tmp_path):
    worker = SlotWorker([sys.executable, "-c", SETTLING_WORKER, "healthy", "3"], timeout_s=30)
    path = tmp_path / "s.py"
    path.write_text("")
    try:
        assert worker.warm_up() == ""
        pid = worker.proc.pid
        started = time.monotonic()
        assert worker.grade("safe_softmax", path).result["verdict"] == "passed"
        assert time.monotonic() - started < 2.5  # the answer, not the 3 s of settling after it
        assert worker.settle() == (True, "")
        assert time.monotonic() - started >= 3  # settle waited for the line
        assert worker.settle() == (True, "")  # nothing left to settle
        second = worker.grade("safe_softmax", path)  # settles the first by itself
        assert second.result["verdict"] == "passed"
        assert worker.jobs == 2 and worker.proc.pid == pid  # one worker all along
    finally:
        worker.stop()


def test_a_worker_that_never_settles_is_not_taken_for_fit(tmp_path, monkeypatch):
    from graders.service import worker_client

    monkeypatch.setattr(worker_client, "WORKER_SETTLE_S", 1.0)
    worker = SlotWorker([sys.executable, "-c", SETTLING_WORKER, "healthy", "999"],
                        timeout_s=30)
    path = tmp_path / "s.py"
    path.write_text("")
    try:
        assert worker.grade("safe_softmax", path).result["verdict"] == "passed"
        fit, problem = worker.settle()
        assert not fit and "did not say its last job's runners were gone" in problem
        assert worker.proc is None
    finally:
        worker.stop()


@pytest.mark.parametrize("settled_by", ["the caller", "the next job"])
def test_a_slot_found_unfit_after_its_answer_is_let_close_and_takes_no_more_jobs(
        tmp_path, settled_by):
    worker = SlotWorker([sys.executable, "-c", SETTLING_WORKER, "unfit", "0.5"], timeout_s=30)
    path = tmp_path / "s.py"
    path.write_text("")
    try:
        first = worker.grade("safe_softmax", path)
        assert first.result["verdict"] == "passed" and first.slot_healthy
        proc = worker.proc
        if settled_by == "the caller":
            assert worker.settle() == (False, "2 processes of the last job survive")
        else:  # a job never sent: a grader fault, tried again elsewhere
            second = worker.grade("safe_softmax", path)
            assert second.result is None and not second.slot_healthy
            assert second.slot_problem == "2 processes of the last job survive"
            assert "out of service" in second.fault
        assert proc.returncode == 1  # it closed its runners and left; it was not killed
        assert worker.proc is None and worker.jobs == 1
    finally:
        worker.stop()


class _FakePool:
    warm, ready_count = 0, 0


def _fake_slot(fit_after: list[bool], out):
    class FakeSlot:
        def __init__(self, *args, **kwargs):
            self.pool, self.healthy, self.problem = _FakePool(), True, ""

        def grade(self, *args, wait_for_exit=True, **kwargs):
            assert wait_for_exit is False  # the worker answers first
            from graders.engine.results import GradeResult
            return GradeResult(exercise="safe_softmax", language="triton", device="cpu",
                               verdict=Verdict.PASSED, score=100.0)

        def finish_job(self):
            # the job's answer is out before its runners are waited for
            last = json.loads(out.getvalue().splitlines()[-1])
            assert "result" in last and "settled" not in last
            self.healthy = fit_after.pop(0)
            self.problem = "" if self.healthy else "GPU 0 holds 900 MiB above its baseline"
            return self.healthy

        def close(self):
            pass

    return FakeSlot


@pytest.mark.parametrize("fit_after", [[True, True, True], [True, False, True]])
def test_the_worker_settles_each_job_after_its_answer(monkeypatch, fit_after):
    import io

    from graders.service import worker as worker_module

    out = io.StringIO()
    monkeypatch.setattr(worker_module, "Slot", _fake_slot(list(fit_after), out))
    jobs = "".join(json.dumps({"id": i, "exercise": "safe_softmax", "file": __file__}) + "\n"
                   for i in (1, 2, 3))
    rc = worker_module.run_worker(Device.CPU, 0, sandbox=False, warm=0,
                                  stdin=io.StringIO(jobs), stdout=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()][1:]
    answered = 3 if all(fit_after) else 2  # job 3 is never read from a slot found unfit
    assert [(line["id"], "settled" in line) for line in lines] == \
        [(i, settled) for i in range(1, answered + 1) for settled in (False, True)]
    assert all(line["result"]["verdict"] == "passed" for line in lines[::2])
    assert [line["slot"]["healthy"] for line in lines[1::2]] == fit_after[:answered]
    assert rc == (0 if all(fit_after) else 1)
    if not all(fit_after):
        assert lines[-1]["slot"]["problem"] == "GPU 0 holds 900 MiB above its baseline"


class SettlingClient:
    """A grader whose slot is found unfit after its first answer."""

    def __init__(self):
        self.graded, self.settled = [], []

    def warm_up(self, *args, **kwargs):
        pass

    def grade(self, exercise, language, source, device, gpu_index, **kwargs):
        from server.grading.graders_client import GradeOutcome

        self.graded.append(kwargs.get("slot"))
        return GradeOutcome({"verdict": "passed", "score": 100.0})

    def settle(self, device, gpu_index, slot=None, **kwargs):
        self.settled.append(slot)
        return False, "2 processes of the last job survive"

    def close(self):
        pass


def test_the_servers_slot_settles_before_it_claims_and_an_unfit_one_claims_nothing(
        database_url):
    from test_server_api import add_students, running, submit, NoDispatch

    from server.domain.models import Status, Submission
    from server.grading.local_pool import LocalPool, SlotSpec

    with running(database_url, dispatcher=NoDispatch()) as client:
        tokens = add_students(client, "s0", "s1")
        state = client.app.state
        for name in ("s0", "s1"):
            assert submit(client, tokens[name]).status_code == 202
        fake = SettlingClient()
        pool = LocalPool(state.sessionmaker, fake, state.settings,
                         slots=[SlotSpec("cpu-0", "cpu", None)])
        pool.start()
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not fake.settled:
                time.sleep(0.05)
            time.sleep(1.0)  # time enough for a claim that should not happen
        finally:
            pool.stop()
        with state.sessionmaker() as db:
            statuses = sorted(s.status for s in db.query(Submission))
    # the first graded and stored; its slot then found unfit: the second never handed to
    # it, and never counted an attempt against it
    assert fake.graded == ["cpu-0"] and fake.settled == ["cpu-0"]
    assert statuses.count(Status.GRADED) == 1
    assert pool.slots[0].in_service is False


def test_a_remote_worker_posts_its_slots_health_as_settled_and_stops_if_unfit(monkeypatch):
    """A remote worker's result carries its slot's health (the server's view of its
    workers), so it settles before it posts; a slot found unfit then stops the worker."""
    from graders.service import remote_worker
    from graders.service.worker_client import GradeOutcome

    events, posted = [], {}

    class Slot:
        def grade(self, exercise, path, on_check=None, params=None):
            events.append("graded")
            return GradeOutcome({"verdict": "passed", "score": 100.0})

        def settle(self):
            events.append("settled")
            return False, "2 processes of the last job survive"

        def stop(self):
            events.append("stopped")

    class Server:
        def post(self, url, json, headers, timeout):
            if url.endswith("/result"):
                events.append("posted")
                posted.update(json)
            return type("R", (), {"status_code": 200})()

    class Exited(Exception):
        pass

    def exit_(code):
        raise Exited(code)

    monkeypatch.setattr(remote_worker, "SLOT", Slot())
    monkeypatch.setattr(remote_worker.os, "_exit", exit_)
    task = {"id": 1, "attempt": 1, "exercise": "safe_softmax", "language": "triton",
            "source": "", "token": "t"}
    with pytest.raises(Exited):
        remote_worker.run_task(task, client=Server())
    assert events == ["graded", "settled", "posted", "stopped"]
    assert posted["result"]["verdict"] == "passed"  # the student's result stands
    assert posted["slot_healthy"] is False
    assert posted["slot_problem"] == "2 processes of the last job survive"
