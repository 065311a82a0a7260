"""The trusted side of timing, against a fake GPU runner that may lie (no GPU needed).

The real timing loop runs on the H200 (tests/test_gpu.py); here the checker's judging
is exercised: figures above the copy ceiling, replayed outputs, mutated inputs, work
on a side stream and torch math in a timed call are all refused, and an honest run's
points are the geometric mean of its fractions, gated by correctness.
"""

import dataclasses
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from test_grading import GOOD, FakeRunnerLauncher

from graders.engine.checker import grade
from graders.engine.registry import get_exercise
from graders.engine.spec import PerformanceSpec, PerfShape
from graders.shared import perfinputs
from graders.shared.perfinputs import InputRecipe
from graders.shared.vocabulary import Device, Verdict


def FakeGpuLauncher(mode):  # noqa: N802 - reads like the class it stands for
    """tests/fake_gpu_runner.py in place of the runner: right answers, timings that may lie."""
    return FakeRunnerLauncher(mode, script="fake_gpu_runner.py")


def small_exercise():
    """safe_softmax with one small check and two small timed shapes: the judging is the
    same, the fake runner's numpy softmax stays quick."""
    spec = get_exercise("safe_softmax")
    check = next(c for c in spec.checks if c.name == "random_rows")
    params = dict(check.params)
    params[Device.CUDA] = {"shapes": [[8, 64]], "dtypes": ["float32", "bfloat16"]}
    check = dataclasses.replace(check, points=100.0, params=params)
    shapes = tuple(PerfShape("softmax", (InputRecipe("x", "uniform", r, c, d),), ("@x",), {},
                             f"{r}×{c} {d}") for r, c, d in [(64, 512, "float32"),
                                                             (32, 1000, "bfloat16")])
    return dataclasses.replace(spec, checks=(check,),
                               performance=PerformanceSpec(points=100.0, shapes=shapes))


def grade_with(mode, tmp_path, exercise=None):
    path = tmp_path / "submission.py"
    path.write_text(GOOD)
    return grade(exercise or small_exercise(), path, Device.CUDA,
                 launcher=FakeGpuLauncher(mode), timeout_s=60)


def test_an_honest_run_scores_the_geometric_mean_of_its_fractions(tmp_path):
    result = grade_with("honest", tmp_path)
    assert result.verdict is Verdict.PASSED, result.message
    perf = result.performance
    assert [s["label"] for s in perf["shapes"]] == ["64×512 float32", "32×1000 bfloat16"]
    for s in perf["shapes"]:
        # 0.125 ms against a 0.100 ms copy of the same bytes: 80 % of copy
        assert s["fraction"] == pytest.approx(0.8, abs=0.002)
        assert s["bytes"] == 2 * s["rows"] * s["cols"] * (4 if s["dtype"] == "float32" else 2)
        assert s["gbs"] == pytest.approx(s["bytes"] / (s["ms"] * 1e6), rel=1e-3)
        assert s["reps"] == 12 and 0 <= s["spread"] < 0.01
    assert perf["fraction_of_copy"] == pytest.approx(0.8, abs=0.002)
    assert perf["points"] == pytest.approx(80, abs=0.2)
    assert result.max_score == 200 and result.score == pytest.approx(180, abs=0.2)
    assert result.flag is None


def test_calls_the_host_queued_late_are_left_out_of_the_figures(tmp_path):
    """Half the calls queued after the GPU reached their start event (a host slowed by a
    busy machine), their times 0.4 ms longer for the wait: the figures are those of the
    calls on time, as an idle host's would be, and the rows of every call are still judged."""
    result = grade_with("late_host", tmp_path)
    assert result.verdict is Verdict.PASSED, result.message
    for s in result.performance["shapes"]:
        assert s["fraction"] == pytest.approx(0.8, abs=0.002) and s["reps"] == 6
    assert result.performance["points"] == pytest.approx(80, abs=0.2)


def test_a_late_call_the_runner_names_out_of_range_rejects_the_report():
    from graders.engine.performance import PerformanceRejected, _on_time

    ms = [0.125] * 8
    assert _on_time(ms, ms, [0, 2]) == ([0.125] * 6, [0.125] * 6)
    assert _on_time(ms, ms, list(range(5))) == (ms, ms)  # 3 on time: all of them count
    for bad in ([8], [-1], ["0"], [True], 3):
        with pytest.raises(PerformanceRejected):
            _on_time(ms, ms, bad)


def test_a_time_faster_than_copying_the_bytes_is_rejected_and_flagged(tmp_path):
    result = grade_with("too_fast", tmp_path)
    assert result.verdict is Verdict.REJECTED
    assert "1.25× the" in result.message and "not believed" in result.message
    assert "timed again, 1.25× the first time" in result.message
    assert result.flag and result.score == 0


def test_one_run_above_the_copy_is_timed_again_and_believed_if_the_second_is_not(tmp_path):
    """A kernel at the copy's speed can read above 1.05 once when the host disturbs the
    copies; timed again, its real figure counts, and the first is kept beside it."""
    result = grade_with("fast_once", tmp_path)
    assert result.verdict is Verdict.PASSED, result.message
    first, second = result.performance["shapes"]
    assert first["retimed_from"] == pytest.approx(1.25, abs=0.01)
    assert first["fraction"] == pytest.approx(0.8, abs=0.002) and "retimed_from" not in second
    assert result.flag is None


@pytest.mark.parametrize("mode, words, flagged", [
    ("replay", "output of timed call", True),
    ("mutates_input", "changed its input", True),
    ("side_stream", "side stream", True),
    ("torch_when_timed", "torch computed part of the result (aten._softmax)", False),
])
def test_a_timed_run_that_cheats_is_rejected(tmp_path, mode, words, flagged):
    result = grade_with(mode, tmp_path)
    assert result.verdict is Verdict.REJECTED, result.message
    assert words in result.message
    assert bool(result.flag) is flagged


def test_correctness_gates_performance(tmp_path):
    result = grade_with("fails_checks", tmp_path)
    assert result.verdict is Verdict.FAILED
    assert result.performance["points"] == 0 and "correctness gates" in result.performance["skipped"]
    assert result.score == 0 and result.max_score == 200


def test_the_graded_shapes_are_the_issues(tmp_path):
    labels = {name: [s.label for s in get_exercise(name).performance.shapes]
              for name in ("safe_softmax", "masked_softmax", "online_softmax")}
    assert labels["safe_softmax"] == [f"{s} {d}" for d in ("float32", "bfloat16") for s in
                                      ("4096×4096", "32768×1024", "65536×256", "1024×32768")]
    assert labels["masked_softmax"] == ["4096×4096 float32 causal",
                                        "16384×1024 float32 padding mask"]
    assert labels["online_softmax"] == ["256×262144 float32", "64×1048576 float32"]
    causal, padding = get_exercise("masked_softmax").performance.shapes
    # the least a kernel must move: y written, and x read only where it is not masked
    assert causal.bytes_moved == 4 * 4096 * 4096 + 4 * 4096 * 4097 // 2
    assert padding.bytes_moved == 2 * 4 * 16384 * 1024 + 4 * 16384 * 1025 // 2
    assert get_exercise("safe_softmax").performance.shapes[0].bytes_moved == 2 * 4 * 4096 * 4096
    assert math.isclose(get_exercise("online_softmax").performance.points, 100)


def test_causal_block_skip_counts_only_the_bytes_the_causal_structure_requires():
    """y written whole + x read only where row i sees it, n_i = min(C, max(0, i + offset + 1)):
    a kernel that loads the whole row moves more, so it cannot reach the copy ceiling."""
    for shape in get_exercise("causal_block_skip").performance.shapes:
        size = {"float32": 4, "bfloat16": 2}[shape.dtype]
        offset, rows, cols = shape.kwargs["offset"], shape.rows, shape.cols
        seen = sum(min(cols, max(0, i + offset + 1)) for i in range(rows))
        assert shape.bytes_moved == size * (rows * cols + seen), shape.label
        assert shape.bytes_moved <= 0.8 * 2 * size * rows * cols, shape.label


def test_a_runner_being_made_ready_keeps_the_gpu_free_while_it_compiles(tmp_path):
    """Timing waits for warm runners only while they touch the GPU (the CUDA context, one
    small launch), not while they compile and import: on the H200 a burst's gradings
    waited ~4 s each at the gate while their replacements compiled."""
    import threading
    import time

    from graders.isolation.pool import GpuGate, prepare

    gate = GpuGate()
    made = {}
    preparer = threading.Thread(target=lambda: made.update(
        ready=prepare(Device.CUDA, FakeGpuLauncher("slow_warm"), gate)))
    preparer.start()
    time.sleep(0.5)  # the runner is started and in its 3 s warm-up
    asked = time.monotonic()
    with gate.exclusive():
        waited = time.monotonic() - asked
        time.sleep(0.5)
    preparer.join(timeout=30)
    ready = made["ready"]
    ready.process.close()
    assert waited < 1.0, f"timing waited {waited:.1f} s for a runner that was compiling"
    assert ready.phases["warm_s"] >= 3.0


def test_host_work_keeps_off_the_gpu_gate(tmp_path, monkeypatch):
    """Under load every slot's checks wait while one grading holds the GPU alone, and that
    grading waits for every call in flight: so the gate covers only what touches the GPU.
    A check's judging runs with the gate let go; the timed rows are judged beside the
    timing (a thread of their own) and what is left of it after the gate is let go, never
    keeping the gate held. The runner's calls, the timing and the rows' fetch run under it."""
    import time as clock
    from graders.engine import casekit, performance
    from graders.isolation.pool import GpuGate, RunnerPool

    gate = GpuGate()
    seen = {"check": [], "timed": []}

    def watching(real, where):
        def compare(*args, **kwargs):
            seen[where].append((gate._sharing, gate._exclusive))
            if where == "timed":
                clock.sleep(0.02)  # host work slower than the (fake) timing
            return real(*args, **kwargs)
        return compare

    monkeypatch.setattr(casekit, "compare_rows", watching(casekit.compare_rows, "check"))
    monkeypatch.setattr(performance, "compare_rows",
                        watching(performance.compare_rows, "timed"))
    path = tmp_path / "submission.py"
    path.write_text(GOOD)
    pool = RunnerPool(Device.CUDA, FakeGpuLauncher("honest"), gate=gate)
    try:
        result = grade(small_exercise(), path, Device.CUDA, pool=pool, timeout_s=60)
    finally:
        pool.close()
    assert result.verdict is Verdict.PASSED, result.message
    assert seen["check"] and seen["timed"]  # both judges ran
    assert set(seen["check"]) == {(0, False)}
    assert seen["timed"][-1] == (0, False)  # the gate was let go before the judging ended
    assert result.phases["timing_judge_s"] > 0.05 and "timing_s" in result.phases
    assert any(span[1] == "timed rows judged" for span in result.phases["timeline"])


class _LateOverrun:
    """A runner session whose first shape's timed outputs are wrong, and whose second shape
    runs over its budget: what a cheat that also stalls would do."""

    def __init__(self, shape):
        self.shape, self.perfs = shape, 0

    def request(self, header, arrays=(), during="", budget_s=None, **_):
        from graders.isolation import CallOverrun
        from graders.shared.arrays import from_f64

        if header["op"] == "perf":
            self.perfs += 1
            if self.perfs > 1:
                raise CallOverrun(budget_s or 1.0, None, during)
            reps = 6
            return type("Reply", (), {"header": {
                "reps": reps, "ms": [1.0] * reps, "copy_ms": [0.5] * reps,
                "launches": [1] * reps, "pool": 2, "copy_bytes": self.shape.bytes_moved},
                "arrays": []})()
        cols = self.shape.cols
        rows = [from_f64(np.full(cols, 1.0 / cols), "float32") for _ in header["outputs"]]
        rows[0] = from_f64(np.full(cols, 0.5), "float32")  # not a softmax row
        inputs = [perfinputs.host_rows(self.shape.inputs[j], perfinputs.call_seed(
            self._seed, c, j), np.array([r])) for c, j, r in header["inputs"]]
        return type("Reply", (), {"header": {}, "arrays": rows + [
            type(x)(x.data[0].copy(), x.dtype) for x in inputs]})()


def test_a_wrong_timed_row_is_named_before_a_later_shapes_overrun():
    """The rows are judged after the measuring, so a fault found later (a later shape over
    its budget) must not hide a wrong row found earlier: the verdict is the one the checks
    gave when each shape's rows were judged at once."""
    from graders.engine.performance import PerformanceRejected, PerformanceRun
    from graders.engine.plan import load_checks_module
    from graders.isolation import CallOverrun

    exercise = small_exercise()
    first = exercise.performance.shapes[0]
    session = _LateOverrun(first)
    rng = np.random.default_rng(5)
    session._seed = int(np.random.default_rng(5).integers(0, 2**31))  # the run's first draw
    run = PerformanceRun(exercise.performance, exercise.tolerances,
                         load_checks_module(exercise), session, rng, None)
    measured = threading.Event()  # the judging held back until the measuring has ended
    judge_rows = run._judge_rows
    run.judging._judge_one = lambda rows: (measured.wait(10), judge_rows(rows))
    run.measure()
    measured.set()
    assert isinstance(run.stop, CallOverrun) and len(run.fetched) == 1
    with pytest.raises(PerformanceRejected, match="output of timed call 1 is wrong"):
        run.judge()


def test_a_wrong_timed_row_stops_the_timing_of_the_shapes_after_it():
    """The verdict is decided once a timed row is wrong: the shapes after it are not timed
    (a cheat does not hold the GPU alone for the rest of its shapes)."""
    from graders.engine.performance import PerformanceRejected, PerformanceRun
    from graders.engine.plan import load_checks_module

    exercise = small_exercise()
    session = _LateOverrun(exercise.performance.shapes[0])
    session._seed = int(np.random.default_rng(5).integers(0, 2**31))
    run = PerformanceRun(exercise.performance, exercise.tolerances,
                         load_checks_module(exercise), session, np.random.default_rng(5), None)
    add = run.judging.add

    def judged_at_once(rows):  # as when the judging keeps up with the timing
        add(rows)
        run.judging._futures[-1].result()

    run.judging.add = judged_at_once
    run.measure()
    assert session.perfs == 1 and run.stop is None and len(run.timed) == 1
    with pytest.raises(PerformanceRejected, match="output of timed call 1 is wrong"):
        run.judge()


def _small_submission(tmp_path):
    path = tmp_path / "submission.py"
    path.write_text(GOOD)
    return path


def test_a_timing_waits_for_kernels_in_flight_not_for_compiles(tmp_path):
    """A call holds the GPU gate (shared) only while it may run GPU work: the runner gives it
    back when a compile starts and asks again before its launch (graders.runner.gpu_gate).
    Another slot's timing, taking the gate alone while this grading's calls compile (0.4 s
    each, in the fake runner), waits for their launches, not for their compiles."""
    import time as clock

    from graders.isolation.pool import GpuGate, RunnerPool

    gate = GpuGate()
    pool = RunnerPool(Device.CUDA, FakeGpuLauncher("compiles"), gate=gate)
    waits, done = [], threading.Event()

    def another_slots_timings():
        while not done.is_set():
            asked = clock.monotonic()
            with gate.exclusive():
                waits.append(clock.monotonic() - asked)
                clock.sleep(0.01)
            clock.sleep(0.02)

    timer = threading.Thread(target=another_slots_timings)
    try:
        timer.start()
        result = grade(small_exercise(), _small_submission(tmp_path), Device.CUDA, pool=pool,
                       timeout_s=60, lanes=1)
    finally:
        done.set()
        timer.join()
        pool.close()
    assert result.verdict is Verdict.PASSED, result.message
    assert len(waits) > 10
    # held for a whole call, the gate kept a timing waiting up to a compile (0.4 s)
    assert max(waits) < 0.2, sorted(waits)[-3:]


def test_a_call_kept_waiting_for_the_gpu_is_not_charged_for_the_wait(tmp_path):
    """The runner asks for the gate from within its call; while another slot's timing
    keeps it waiting, the call's budget stands still: a 1 s budget is not spent by 2.5 s
    of someone else's timing."""
    import time as clock

    from graders.isolation.pool import GpuGate, RunnerPool

    gate = GpuGate()
    pool = RunnerPool(Device.CUDA, FakeGpuLauncher("honest"), warm=1, gate=gate)
    try:
        pool.fill()
        assert pool.wait_filled() == ""  # made before the timing holds the GPU
        with gate.exclusive():
            worker = threading.Thread(target=lambda: results.append(grade(
                small_exercise(), _small_submission(tmp_path), Device.CUDA, pool=pool,
                timeout_s=60, lanes=1, call_budget_s=1.0, performance=False)))
            results: list = []
            worker.start()
            clock.sleep(2.5)
        worker.join(30)
    finally:
        pool.close()
    result = results[0]
    assert result.verdict is Verdict.PASSED, result.message
    assert result.duration_s > 2.4  # it did wait for the timing


def test_the_real_runner_asks_for_the_gate_before_its_gpu_work(tmp_path):
    """The runner's side (graders/runner/gpu_gate.py), on the CPU interpreter: each call asks
    for the gate before it touches the device, waits while a timing holds it, and is not
    charged for the wait; the checker lets the gate go with each reply."""
    import time as clock

    from graders.isolation.pool import GpuGate, RunnerPool
    from graders.isolation.sandbox import DirectLauncher

    gate = GpuGate()
    pool = RunnerPool(Device.CPU, DirectLauncher(), warm=1, gate=gate)
    spec = get_exercise("safe_softmax")
    check = next(c for c in spec.checks if c.name == "random_rows")
    params = {**check.params, Device.CPU: {"shapes": [[4, 32]], "dtypes": ["float32"]}}
    spec = dataclasses.replace(spec, checks=(dataclasses.replace(check, points=100.0,
                                                                 params=params),))
    results: list = []
    try:
        pool.fill()
        assert pool.wait_filled() == ""
        with gate.exclusive():
            worker = threading.Thread(target=lambda: results.append(grade(
                spec, _small_submission(tmp_path), Device.CPU, pool=pool, timeout_s=120,
                lanes=1, call_budget_s=2.0)))
            worker.start()
            clock.sleep(4.0)
            assert not results  # the call waits for the GPU
        worker.join(60)
        # the runner made to replace the one the grading took holds the gate shared while
        # it proves itself (prepare's known answer): asked too soon, that holding shows
        pool.wait_idle()
    finally:
        pool.close()
    result = results[0]
    assert result.verdict is Verdict.PASSED, result.message
    assert result.duration_s > 3.9
    assert gate._sharing == 0 and not gate._exclusive  # let go with the reply


def two_check_exercise():
    """``small_exercise`` and a second small check after it."""
    spec = small_exercise()
    second = next(c for c in get_exercise("safe_softmax").checks if c.name == "underflow")
    second = dataclasses.replace(second, params={**second.params, Device.CUDA: {
        "shapes": [[8, 300]], "dtypes": ["float32"]}})
    return dataclasses.replace(spec, checks=(spec.checks[0], second))


def test_an_endless_kernel_holds_the_gpu_for_its_gpu_budget_and_ends_the_run_at_once(
        tmp_path, monkeypatch):
    """A call may hold the GPU gate GPU_HOLD_S at a stretch: every timing on the GPU waits
    for it, and every other check behind that timing. A kernel that never ends is stopped
    there, not at the call's budget (20 s, for compiles), and the run ends with it: a fresh
    runner would only hold the GPU again (the mix's endless kernel did, three and four times
    a grading on the H200). The student reads why, and keeps nothing it did not earn."""
    import time as clock

    from graders.engine import context
    from graders.isolation.pool import GpuGate, RunnerPool

    monkeypatch.setattr(context, "GPU_HOLD_S", 0.5)
    spec = two_check_exercise()
    gate = GpuGate()
    pool = RunnerPool(Device.CUDA, FakeGpuLauncher("endless_kernel"), gate=gate)
    started = clock.monotonic()
    try:
        result = grade(spec, _small_submission(tmp_path), Device.CUDA, pool=pool,
                       timeout_s=60, lanes=1)
    finally:
        pool.close()
    assert clock.monotonic() - started < 10  # lost at 0.5 s, not at the call's 20 s
    assert result.verdict is Verdict.TIMEOUT, (result.verdict, result.message)
    assert "kept the GPU busy for more than 0.5 s" in result.message, result.message
    assert "stopped at once" in result.message, result.message
    first, after = result.checks
    assert not first.passed and "kept the GPU busy for more than 0.5 s" in first.message
    assert not after.ran and result.score == 0  # no second runner held the GPU again


def test_an_endless_kernel_on_a_timed_shape_ends_the_run_while_it_compiles_for_timing(
        tmp_path, monkeypatch):
    """The timed shapes' warm-up (one lane, beside the checks) holds the GPU as a check's
    call does: a kernel that never ends there ends the run too, rather than be timed (and
    hold the GPU alone) after a fresh runner is made for it."""
    from graders.engine import context
    from graders.isolation.pool import GpuGate, RunnerPool

    monkeypatch.setattr(context, "GPU_HOLD_S", 0.5)
    spec = two_check_exercise()
    pool = RunnerPool(Device.CUDA, FakeGpuLauncher("endless_when_timed"), gate=GpuGate(),
                      warm=2)
    try:
        pool.fill()  # a lane beyond the first joins only on a ready runner
        assert pool.wait_filled() == ""
        result = grade(spec, _small_submission(tmp_path), Device.CUDA, pool=pool,
                       timeout_s=60, lanes=2)
    finally:
        pool.close()
    assert result.verdict is Verdict.TIMEOUT, (result.verdict, result.message)
    assert "64×512 float32 kept the GPU busy for more than 0.5 s" in result.message
    assert "stopped at once" in result.message and result.performance is None


def test_the_checks_and_the_timed_rows_host_work_runs_behind_the_runner_that_times(
        tmp_path, monkeypatch):
    """Each lane's thread and the timed rows' judge run at CHECKER_NICE (5): behind another
    slot's runner that times (0), whose host the GPU waits on, ahead of compiles (10)."""
    import os

    from graders.engine import calls, performance
    from graders.isolation import CHECKER_NICE

    seen = {}

    def nice_here(label, inner):
        def wrapped(*args, **kwargs):
            seen.setdefault(label, os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
            return inner(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(calls.CheckDriver, "run", nice_here("check", calls.CheckDriver.run))
    monkeypatch.setattr(performance.PerformanceRun, "_judge_rows",
                        nice_here("rows", performance.PerformanceRun._judge_rows))
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    result = grade_with("honest", tmp_path)
    assert result.verdict is Verdict.PASSED, result.message
    assert seen == {"check": max(mine, CHECKER_NICE), "rows": max(mine, CHECKER_NICE)}
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine  # its own


def test_a_failed_check_stops_the_timed_shapes_warm_up(tmp_path):
    """Nothing is timed once a check fails: the lane compiling the timed shapes (1.5 s
    each here) stops after the shape in hand and goes on to the checks, its CPU not spent
    on shapes nobody will time."""
    from graders.isolation.pool import GpuGate, RunnerPool

    pool = RunnerPool(Device.CUDA, FakeGpuLauncher("fails_checks_slow_compiles"),
                      gate=GpuGate(), warm=2)
    try:
        pool.fill()  # a lane beyond the first joins only on a ready runner
        assert pool.wait_filled() == ""
        result = grade(two_check_exercise(), _small_submission(tmp_path), Device.CUDA,
                       pool=pool, timeout_s=60, lanes=2)
    finally:
        pool.close()
    assert result.verdict is Verdict.FAILED, result.message
    warmed = [span[1] for span in result.phases["timeline"]
              if span[1].startswith("compile for timing")]
    # the shape in hand when the check failed, or none if it failed first; never both
    assert warmed in ([], ["compile for timing 64×512 float32"]), result.phases["timeline"]


def test_the_runner_empties_its_cache_before_the_first_shape_and_after_the_last_only():
    """Between one timing's shapes the runner keeps torch's cache (the next shape's buffers
    come from what the last one freed): each empty and the allocations after it went to the
    driver while the grading held the GPU alone. The first ``perf`` and the last
    ``perf_rows`` say so; the others do not."""
    from graders.engine.performance import PerformanceRun
    from graders.engine.plan import load_checks_module

    exercise = small_exercise()
    third = dataclasses.replace(exercise.performance.shapes[0], label="128×256 float32")
    spec = dataclasses.replace(exercise.performance,
                               shapes=exercise.performance.shapes + (third,))

    class Recording:
        def __init__(self):
            self.headers = []

        def request(self, header, arrays=(), during="", budget_s=None, **_):
            self.headers.append(header)
            if header["op"] == "perf":
                reps = 6
                return type("Reply", (), {"header": {
                    "reps": reps, "ms": [1.0] * reps, "copy_ms": [0.5] * reps,
                    "launches": [1] * reps, "pool": 2, "copy_bytes": header["bytes"]},
                    "arrays": []})()
            n = len(header["outputs"]) + len(header["inputs"])
            return type("Reply", (), {"header": {}, "arrays": [None] * n})()

    session = Recording()
    run = PerformanceRun(spec, exercise.tolerances, load_checks_module(exercise), session,
                         np.random.default_rng(5), None)
    run.judging.add = lambda rows: None  # the flags only: no rows judged
    run.measure()
    perfs = [h["first_shape"] for h in session.headers if h["op"] == "perf"]
    rows = [h["last_shape"] for h in session.headers if h["op"] == "perf_rows"]
    assert perfs == [True, False, False] and rows == [False, False, True]


def test_rows_judged_side_by_side_name_the_first_wrong_call_in_the_order_picked():
    """A shape's rows are judged on several threads (PerformanceRun._judge_rows); of two
    wrong calls the verdict names the one picked first, whichever thread finished first, and
    the pool's inputs are judged before the outputs."""
    from graders.engine.performance import FetchedRows, PerformanceRejected, PerformanceRun
    from graders.engine.plan import load_checks_module
    from graders.shared.arrays import HostArray

    exercise = small_exercise()
    shape = exercise.performance.shapes[0]
    checks = load_checks_module(exercise)
    run = PerformanceRun(exercise.performance, exercise.tolerances, checks, None,
                         np.random.default_rng(1), None)
    seed, rows = 77, [3, 1, 4, 1, 5, 9, 2, 6]

    def right(c, row):
        x = {r.name: perfinputs.host_rows(r, perfinputs.call_seed(seed, c, j), np.array([row]))
             .to_f64() for j, r in enumerate(shape.inputs)}
        return HostArray(checks.performance_reference(shape, x, np.array([row]))
                         .astype(np.float32), "float32")

    def fetched(wrong_calls, wrong_input=False, ones=()):
        cols = shape.inputs[0].cols
        out = [HostArray(np.zeros((1, cols), np.float32), "float32") if c in wrong_calls else
               HostArray(np.ones((1, cols), np.float32), "float32") if c in ones else
               right(c, row) for c, row in enumerate(rows)]
        kept = perfinputs.host_rows(shape.inputs[0], perfinputs.call_seed(seed, 7, 0),
                                    np.array([2]))
        if wrong_input:
            kept = HostArray(kept.data + 1, kept.dtype)
        return FetchedRows(shape, seed, "while timing", list(enumerate(rows)), [(7, 0, 2)],
                           [*out, kept])

    run._judge_rows(fetched(()))  # all right: nothing raised
    import graders.engine.performance as performance

    compare = performance.compare_rows

    def zeros_judged_last(got, *args, **kwargs):  # call 3's zeros finish after call 7's ones
        if not got.data.any():
            time.sleep(0.3)
        return compare(got, *args, **kwargs)

    monkey = pytest.MonkeyPatch()
    monkey.setattr(performance, "compare_rows", zeros_judged_last)
    try:
        for _ in range(2):
            with pytest.raises(PerformanceRejected, match="output of timed call 3 is wrong"):
                run._judge_rows(fetched({2}, ones={6}))
    finally:
        monkey.undo()
    with pytest.raises(PerformanceRejected, match="timed call 7 changed its input"):
        run._judge_rows(fetched({2}, wrong_input=True))
    run._rows.shutdown()


def test_an_abandoned_timing_lets_its_judging_threads_go():
    """A measuring that fails with anything but a fault of the timing (a runner lost, the
    deadline) leaves no thread judging rows after the grading has returned."""
    from graders.engine.performance import PerformanceRun
    from graders.engine.plan import load_checks_module

    exercise = small_exercise()
    run = PerformanceRun(exercise.performance, exercise.tolerances,
                         load_checks_module(exercise), None, np.random.default_rng(1), None)
    run._rows.submit(lambda: None).result()  # its threads started, as by a shape's rows
    run.judging._pool = ThreadPoolExecutor(1)  # as the first fetched shape makes it
    run.abandon()
    with pytest.raises(RuntimeError):
        run._rows.submit(lambda: None)  # nothing starts them again
    with pytest.raises(RuntimeError):
        run.judging._pool.submit(lambda: None)  # shut down
