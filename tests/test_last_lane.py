"""Which lanes close as they run out of parts (graders.engine.lanes.LaneSet._leave): on a
GPU with a timing to follow, the last lane to finish keeps its runner, idle, until the
timing is done: its close (0.13-0.33 s on the H200) was the timing's wait. The others close
at once, while lanes still check, and the timing waits for those closes; without a timing
to follow every lane closes, and nothing waits for its exit (the answer is given first)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from graders.engine.lanes import LaneSet
from graders.shared.vocabulary import Device


def _lanes(device=Device.CUDA, timed=True, failed=False, stopped=False):
    closed: list = []  # closes waited for; closes started and not waited for: "later: …"
    state = SimpleNamespace(lock=threading.Lock(), stop="stopped" if stopped else None,
                            close=closed.append, note_span=lambda *args: None,
                            close_later=lambda processes, on_closed=None: closed.extend(
                                f"later: {p}" for p in processes))
    lanes = LaneSet.__new__(LaneSet)
    lanes.g = SimpleNamespace(state=state, device=device, started=0.0)
    lanes.timed = object() if timed else None
    lanes.parts = SimpleNamespace(outcomes={0: {0: SimpleNamespace(passed=not failed)}})
    lanes.kept, lanes.shed = [], set()
    warmed = SimpleNamespace(warmed=True, process="runner that times")
    lanes._warmed = warmed
    return lanes, warmed, closed


def _lane(name):
    return SimpleNamespace(warmed=False, process=name)


def test_the_last_lane_out_stays_open_for_the_timing_and_the_others_close():
    lanes, warmed, closed = _lanes()
    lanes._leave(_lane("first out"), 1, last=False)
    lanes._leave(warmed, 0, last=False)
    last = _lane("last out")
    lanes._leave(last, 2, last=True)
    assert closed == ["first out"]
    assert lanes.kept == [warmed, last]  # closed by time_submission, after the timing


@pytest.mark.parametrize("why", ["cpu", "no timing", "a check failed", "stopped"])
def test_without_a_timing_to_follow_the_last_lane_closes_too(why):
    lanes, _, closed = _lanes(device=Device.CPU if why == "cpu" else Device.CUDA,
                              timed=why != "no timing", failed=why == "a check failed",
                              stopped=why == "stopped")
    lanes._leave(_lane("first out"), 2, last=False)
    lanes._leave(_lane("last out"), 1, last=True)
    assert closed == ["later: first out", "later: last out"] and lanes.kept == []
