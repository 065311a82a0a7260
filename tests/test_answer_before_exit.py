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


# -- the worker's line for a slot found unfit after its answer --------------------------------

UNFIT_WORKER = """
import json, sys, time
print(json.dumps({"ready": True}), flush=True)
job = json.loads(sys.stdin.readline())
print(json.dumps({"id": job["id"], "result": {"verdict": "passed", "score": 1.0},
                  "slot": {"healthy": True, "problem": ""}}), flush=True)
time.sleep(float(sys.argv[1]))  # its runners exiting
print(json.dumps({"id": None, "slot": {"healthy": False,
                                       "problem": "2 processes of the last job survive"}}),
      flush=True)
"""


@pytest.mark.parametrize("exits_after_s", [0.0, 1.0])
def test_a_slot_found_unfit_after_its_answer_takes_no_more_jobs(tmp_path, exits_after_s):
    """0 s: the worker has said so and gone before the next job; 1 s: the next job is sent
    first, and the line comes instead of its answer. Either way the slot is out of
    service, and the job is a fault (tried again elsewhere), not restarted on it."""
    worker = SlotWorker([sys.executable, "-c", UNFIT_WORKER, str(exits_after_s)], timeout_s=30)
    path = tmp_path / "s.py"
    path.write_text("")
    try:
        first = worker.grade("safe_softmax", path)
        assert first.result["verdict"] == "passed" and first.slot_healthy
        if not exits_after_s:
            worker.proc.wait(10)
            time.sleep(0.2)  # its last line read
        second = worker.grade("safe_softmax", path)
        assert second.result is None and not second.slot_healthy
        assert second.slot_problem == "2 processes of the last job survive"
        assert "out of service" in second.fault
        assert worker.proc is None  # stopped, not started again as if nothing happened
    finally:
        worker.stop()


def test_the_worker_says_its_slot_is_unfit_once_the_jobs_runners_are_gone(monkeypatch):
    import io

    from graders.service import worker as worker_module

    class FakePool:
        warm, ready_count = 0, 0

    class FakeSlot:
        def __init__(self, *args, **kwargs):
            self.pool, self.healthy, self.problem, self.waited = FakePool(), True, "", False

        def grade(self, *args, wait_for_exit=True, **kwargs):
            assert wait_for_exit is False  # the worker answers first
            from graders.engine.results import GradeResult
            return GradeResult(exercise="safe_softmax", language="triton", device="cpu",
                               verdict=Verdict.PASSED, score=100.0)

        def finish_job(self):
            self.waited = True
            self.healthy, self.problem = False, "GPU 0 holds 900 MiB above its baseline"
            return False

        def close(self):
            pass

    monkeypatch.setattr(worker_module, "Slot", FakeSlot)
    jobs = "".join(json.dumps({"id": i, "exercise": "safe_softmax", "file": __file__}) + "\n"
                   for i in (1, 2))
    out = io.StringIO()
    rc = worker_module.run_worker(Device.CPU, 0, sandbox=False, warm=0,
                                  stdin=io.StringIO(jobs), stdout=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert rc == 1
    assert [line.get("id") for line in lines[1:]] == [1, None]  # job 2 never read
    assert lines[1]["result"]["verdict"] == "passed"
    assert lines[2]["slot"] == {"healthy": False,
                                "problem": "GPU 0 holds 900 MiB above its baseline"}
