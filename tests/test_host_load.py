"""Issue 43: a grading's lanes from the gradings its host runs at once
(graders/service/host_load.py)."""

from __future__ import annotations

import multiprocessing

import pytest
from conftest import REPO

from graders.shared.vocabulary import Verdict

from graders.service.host_load import BusyMarks, lanes_for


def test_a_grading_alone_gets_four_lanes_and_a_busy_host_gives_each_two():
    # the H200's 16 cores: the quickest answer alone, more gradings an hour when busy
    assert [lanes_for(busy, 16) for busy in (1, 2, 3, 4, 6, 12)] == [4, 4, 3, 2, 2, 2]
    assert lanes_for(1, 2) == 2  # never fewer than two: one lane takes over 10 s
    assert lanes_for(1, 64) == 4  # never more than four
    assert lanes_for(0, 16) == 4  # a count of none is this one


def _hold(folder, name, started, release):
    marks = BusyMarks(folder, name)
    with marks.busy():
        started.set()
        release.wait(30)


def test_busy_marks_count_the_slots_grading_now_in_any_process(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    started, release = ctx.Event(), ctx.Event()
    other = ctx.Process(target=_hold, args=(tmp_path, "other", started, release))
    other.start()
    try:
        assert started.wait(30)
        mine = BusyMarks(tmp_path, "mine")
        with mine.busy() as busy:
            assert busy == 2  # the other slot's grading, and this one
        with mine.busy() as busy:
            assert busy == 2
    finally:
        release.set()
        other.join(30)
    # the other process's mark went with it: its file is left, its lock is not
    with BusyMarks(tmp_path, "mine").busy() as busy:
        assert busy == 1
    idle = BusyMarks(tmp_path, "idle")
    assert idle.count() == 1  # nothing held, and never fewer than one


def test_a_folder_that_cannot_be_made_counts_each_grading_alone(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with BusyMarks(blocker / "sub", "x").busy() as busy:
        assert busy == 1


# -- a burst: the sender's queue tells each slot what its neighbours have not yet marked --

def test_a_slot_sizes_its_lanes_by_the_larger_of_its_own_count_and_the_senders(tmp_path,
                                                                                monkeypatch):
    from types import SimpleNamespace

    from graders.service import slots
    from graders.shared.vocabulary import Device

    lanes_given, lanes_now = [], []

    class RecordingGrader:
        def __init__(self, exercise, submission, device, pool=None, lanes=None, **kwargs):
            lanes_given.append(lanes)
            lanes_now.append(kwargs.get("lanes_now"))
            self.grading = SimpleNamespace(lanes=lanes)
            self.close_report = None

        def answer(self):
            return SimpleNamespace(phases={})

        def finish(self, result=None):
            return None

    monkeypatch.setattr(slots, "Grader", RecordingGrader)
    monkeypatch.setattr(slots, "host_cores", lambda: 16)
    slot = slots.Slot.__new__(slots.Slot)
    slot.name, slot.device, slot.pool, slot.healthy = "gpu-0", Device.CUDA, None, True
    slot.shares_gpu, slot.gpu_baseline_mib = True, None
    slot.marks = BusyMarks(tmp_path, "gpu-0")

    alone = slot.grade(None, tmp_path / "s.py")
    burst = slot.grade(None, tmp_path / "s.py", host_gradings=4)
    said_less = slot.grade(None, tmp_path / "s.py", host_gradings=1)
    # the H200's 16 cores: alone, four lanes; four gradings starting together, two each
    assert lanes_given == [4, 2, 4]
    assert [r.phases["host_gradings"] for r in (alone, burst, said_less)] == [1, 4, 1]

    # between parts the grading asks again, from the marks: the host alone, then three
    # other slots grading beside it (asked here after the grading, the slot's own mark file
    # still counts: count() counts it whether or not its lock is held)
    from contextlib import ExitStack

    ask = lanes_now[0]
    assert ask() == 4
    with ExitStack() as others:
        for name in ("gpu-0-1", "gpu-0-2", "gpu-0-3"):
            others.enter_context(BusyMarks(tmp_path, name).busy())
        assert ask() == 2
    assert ask() == 4
    slot.grade(None, tmp_path / "s.py", lanes=3)  # lanes given: as given throughout
    assert lanes_given[-1] == 3 and lanes_now[-1] is None


def test_a_worker_job_passes_the_host_gradings_on_and_ignores_a_bad_count(tmp_path):
    from types import SimpleNamespace

    from graders.service.worker import handle

    path = tmp_path / "s.py"
    path.write_text("x = 1\n")
    heard = {}

    class RecordingSlot:
        healthy, problem = True, ""

        def grade(self, exercise, submission, **kwargs):
            heard.update(kwargs)
            return SimpleNamespace(to_json=lambda: {"verdict": "passed"})

    job = {"id": 1, "exercise": "safe_softmax", "file": str(path)}
    assert handle(RecordingSlot(), dict(job, host_gradings=3))["result"] == {"verdict": "passed"}
    assert heard["host_gradings"] == 3
    handle(RecordingSlot(), job)
    assert heard["host_gradings"] is None  # not said: the slot counts alone
    # a hint, not the job: a bad one is graded as if unsaid (a refused job would be a
    # grader fault, tried again and then given up on)
    for bad in (0, -2, "4", 2.5, True):
        heard.clear()
        assert handle(RecordingSlot(), dict(job, host_gradings=bad))["result"] is not None
        assert heard["host_gradings"] is None


def test_the_slot_worker_sends_the_host_gradings_in_the_job_line(tmp_path):
    import sys

    from graders.service.worker_client import SlotWorker

    echo = ("import json, sys\nprint(json.dumps({'ready': True}), flush=True)\n"
            "for line in sys.stdin:\n    job = json.loads(line)\n"
            "    print(json.dumps({'id': job['id'], 'result': {'verdict': 'passed', 'score': 1.0,"
            " 'said': job.get('host_gradings', 'none sent')}}), flush=True)\n"
            "    print(json.dumps({'id': job['id'], 'settled': True}), flush=True)\n")
    worker = SlotWorker([sys.executable, "-c", echo], timeout_s=30)
    try:
        path = tmp_path / "s.py"
        path.write_text("")
        assert worker.grade("safe_softmax", path, host_gradings=3).result["said"] == 3
        assert worker.grade("safe_softmax", path).result["said"] == "none sent"
    finally:
        worker.stop()


class BarrierClient:
    """A grader that holds its first ``hold`` gradings until all of them have started, and
    notes what each was told."""

    def __init__(self, hold: int):
        import threading

        self.told: list[int | None] = []
        self.lock = threading.Lock()
        self.hold = hold
        self.together = threading.Barrier(hold, timeout=30)

    def warm_up(self, *args, **kwargs):
        pass

    def grade(self, exercise, language, source, device, gpu_index, on_check=None,
              params=None, slot=None, share_gpu=False, gpu_slots=None, host_gradings=None):
        from server.grading.graders_client import GradeOutcome

        with self.lock:
            self.told.append(host_gradings)
            number = len(self.told)
        if number <= self.hold:
            self.together.wait()
        return GradeOutcome({"verdict": "passed", "score": 100.0, "params": params or {}})

    def settle(self, *args, **kwargs):
        return True, ""

    def close(self):
        pass


@pytest.mark.parametrize("new, regrades, slots, told", [
    (4, 0, 4, [4, 4, 4, 4]),  # a burst the size of the host: each told every slot
    (2, 0, 4, [2, 2]),  # two gradings on a host of four: each told two, itself and the other
    (1, 1, 4, [2, 2]),  # a regrade waiting is work to come like new work
    (3, 0, 2, [2, 2]),  # never more than the slots; the third is counted when claimed
])
def test_a_burst_tells_each_slot_how_many_gradings_its_host_is_about_to_run(
        database_url, new, regrades, slots, told):
    """The gradings waiting when the slots start: each of the first is told the host is
    about to run all of them that its slots can take (they start within milliseconds of
    each other, before their busy marks are there to count)."""
    import time

    from test_server_api import ADMIN, NoDispatch, _graded, add_students, auth, running, submit

    from server.domain.models import Status, Submission
    from server.grading.local_pool import LocalPool, SlotSpec

    with running(database_url, dispatcher=NoDispatch()) as client:
        names = [f"s{i}" for i in range(new + regrades)]
        tokens = add_students(client, *names)
        state = client.app.state
        for name in names[new:]:
            with state.sessionmaker.begin() as db:  # graded before: a regrade of it waits
                _graded(db, name, 50.0)
        if regrades:
            r = client.post("/api/admin/regrade", headers=auth(ADMIN),
                            json={"exercise": "safe_softmax"})
            assert r.status_code in (200, 202), r.text
        for name in names[:new]:
            assert submit(client, tokens[name]).status_code == 202
        fake = BarrierClient(hold=min(slots, new + regrades))
        pool = LocalPool(state.sessionmaker, fake, state.settings,
                         slots=[SlotSpec(f"cpu-{i}", "cpu", None) for i in range(slots)])
        pool.start()
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with state.sessionmaker() as db:
                    if db.query(Submission).filter(
                            (Submission.status != Status.GRADED)
                            | Submission.regrade_pending).count() == 0:
                        break
                time.sleep(0.1)
        finally:
            pool.stop()
    assert fake.told[:len(told)] == told


# -- a lane gives itself back when the host has grown busier (graders.engine.lanes) ------

def test_a_lane_past_what_the_host_gives_now_leaves_and_the_verdict_stands(grade_source):
    """Three lanes given, two allowed by the time the third would join: it never takes a
    runner, the other two grade every check, and the result is the three-lane one's."""
    reference = (REPO / "reference_solutions" / "safe_softmax" / "solution.py").read_text()
    asked = []

    def two_now():
        asked.append(1)
        return 2

    shed = grade_source("safe_softmax", reference, lanes=3, lanes_now=two_now)
    assert shed.verdict is Verdict.PASSED and asked
    assert shed.phases["lanes_shed"] == 1
    assert {t[0] for t in shed.phases["timeline"]} <= {0, 1}  # lane 2 did no part
    assert {c.name for c in shed.checks} == set(shed.phases["checks"])

    import threading

    askers = set()

    def broken():
        askers.add(threading.current_thread().name)
        raise OSError("the lock folder is gone")

    kept = grade_source("safe_softmax", reference, lanes=3, lanes_now=broken)
    # lane 2 asked, the count failed, and it was not shed (lane 0 never asks)
    assert "lane-2" in askers and "lane-0" not in askers
    assert kept.verdict is Verdict.PASSED and "lanes_shed" not in kept.phases


def test_the_lane_that_compiled_the_timed_shapes_is_never_shed():
    import threading
    from types import SimpleNamespace

    from graders.engine.lanes import LaneSet

    lanes = LaneSet.__new__(LaneSet)
    lanes.g = SimpleNamespace(lanes_now=lambda: 2,
                              state=SimpleNamespace(lock=threading.Lock(), stop=None))
    lanes.shed, lanes.todo = set(), ["a part", "another"]
    assert not lanes._shed(3, SimpleNamespace(warmed=True))
    assert not lanes._shed(1, SimpleNamespace(warmed=False))
    assert lanes._shed(2, SimpleNamespace(warmed=False)) and lanes._shed(3, None)
    assert lanes.shed == {2, 3}
    lanes.g.lanes_now = lambda: 0  # whatever the count, lane 0 takes parts until none is left
    assert not lanes._shed(0, None)
    lanes.g.lanes_now, lanes.shed = (lambda: 2), set()
    lanes.todo = []  # nothing left to take: a lane that leaves is not counted as shed
    assert not lanes._shed(3, None) and lanes.shed == set()
    lanes.todo = ["a part"]
    lanes.g.lanes_now = None  # lanes fixed (the CLI, the selftest): nothing is shed
    assert not lanes._shed(3, None)


def test_a_shed_lane_closes_its_runner_at_once_unless_it_is_the_last_out():
    from test_last_lane import _lane, _lanes

    lanes, warmed, closed = _lanes()
    lanes._warmed = None  # the timed shapes still compiling on lane 0
    lanes.shed = {2}
    lanes._leave(_lane("shed"), 2, last=False)
    lanes._leave(_lane("not shed"), 1, last=False)
    assert closed == ["shed"]  # it holds a CUDA context the burst's gradings need
    assert [lane.process for lane in lanes.kept] == ["not shed"]
