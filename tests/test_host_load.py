"""Issue 43: a grading's lanes from the gradings its host runs at once
(graders/service/host_load.py)."""

from __future__ import annotations

import multiprocessing

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
