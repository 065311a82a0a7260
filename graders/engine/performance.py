"""The trusted side of timing: ask for timed calls, then judge the figures and the rows.

The runner times (graders/runner/timing.py); nothing it says is taken on trust:
* the raw per-call times come back, and the median, spread and GB/s are computed here;
* the checker picks, after the timing and from its own secret generator, one row of
  every timed call and a row of every input still in the pool, recomputes those rows
  of the inputs from the shared seed recipe, and judges them against its float64
  reference: a timed call that computed something else (a replay, a shortcut taken
  only when timed, a mutated input) is ``rejected`` and flagged;
* a GB/s above 1.05× the copy of the same bytes, measured beside it, is impossible:
  timed once more, and if it holds, ``rejected`` and flagged for an instructor.
Performance points = points × geometric mean over the graded shapes of min(fraction, 1).
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

import numpy as np

from graders.engine.judge import compare_rows
from graders.engine.kernel_words import kernel_words
from graders.engine.spec import PerformanceSpec, PerfShape, Tolerance
from graders.isolation import CHECKER_NICE, CallOverrun, lower_this_thread
from graders.shared import gpuinfo, perfinputs
from graders.shared.stats import interquartile_spread

BELIEVABLE_FRACTION = 1.05
# repetitions: at least 10, at most 100, stopping at the first one after which the median
# of the submission's times is known to ±1 % (its ~95 % interval, graders.shared.stats
# .median_interval). At 10 repetitions that is an interquartile spread of 1.74 %. The rule
# before was a 2 % spread at any count, and a kernel whose times spread 3 % (on the H200,
# three to five of the first reference's eight shapes, ~36 µs calls) ran to the cap of
# 100, 0.4-0.7 s a shape, though its median was known to ±1 % after about 30
TIMING = {"min_reps": 10, "max_reps": 100, "target_interval": 0.01, "budget_s": 4.0}
# a timed shape's budget is a call's plus this: the repetitions themselves, and the copy
TIMING_BUDGET_S = 10.0
# threads judging one shape's timed rows side by side (PerformanceRun._judge_rows): a long
# row's float64 work is numpy's, which runs without the GIL
ROW_THREADS = 4
METHOD = ("CUDA-event times of 10-100 calls (until their median is known to ±1 %); L2 flushed and a 1 ms GPU head start before "
          "each (doubled after a call the host queued late, whose time is left out); inputs made fresh for every call from a pool larger than L2; a "
          "device-to-device copy of the same bytes timed beside every call; fraction = median "
          "of the per-call (copy time ÷ call time); bytes = the least the algorithm must move")


class PerformanceRejected(Exception):
    """The timed run cannot be believed; ends the grading as ``rejected`` and flags it."""

    def __init__(self, message: str, line: int | None = None, flag: bool = True):
        super().__init__(message)
        self.message, self.line, self.flag = message, line, flag


@dataclass
class ShapeFigures:
    label: str
    fn: str
    rows: int
    cols: int
    dtype: str
    bytes: int
    ms: float
    gbs: float
    copy_gbs: float
    fraction: float
    spread: float
    copy_spread: float
    reps: int
    retimed_from: float | None = None  # the first run's fraction, when it read above the copy

    def to_json(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items()
                if v is not None}


ELEMENT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
AT_THE_CEILING = 0.9  # from here a kernel is said to move about the least it must
# the module's traffic table (section 5), in traversals of an x-sized tensor
DESIGNS = ((2, "a fused single pass (1 read + 1 write)"),
           (3, "the 2-pass design (statistics, then normalise: 2 reads + 1 write)"),
           (4, "the textbook 3-pass design (max, sum, normalise: 3 reads + 1 write)"))


def speed_diagnosis(f: ShapeFigures, designs: tuple[tuple[float, str], ...] = DESIGNS
                    ) -> dict[str, Any]:
    """What a shape's time says, in the traffic table's terms (issue 30): the bytes per
    element a kernel at the copy's speed would have moved in that time, against the least
    the shape needs. ``designs`` is the entry point's own table when its spec gives one
    (``[performance.designs]``). Words only: never part of the score, computed here from
    the figures the checker itself derived."""
    elements = f.rows * f.cols
    size = ELEMENT_BYTES.get(f.dtype)
    if not elements or size is None or f.fraction <= 0:
        return {}
    least = f.bytes / elements
    like = least / f.fraction
    passes = like / size
    out = {"bytes_per_element": round(like, 1), "least_bytes_per_element": round(least, 1),
           "traversals": round(passes, 1), "least_traversals": round(least / size, 2)}
    if f.fraction >= AT_THE_CEILING:
        out["text"] = (f"at the copy ceiling: about the least this shape must move, "
                       f"{least:.0f} B an element")
        return out
    nearest = min(designs, key=lambda d: abs(d[0] - passes))
    design = f"like {nearest[1]}" if abs(nearest[0] - passes) <= 0.5 else (
        "more than any design of the traffic table moves"
        if passes > max(d[0] for d in designs) + 0.5 else "")
    out["text"] = (f"ran in the time of {like:.0f} B an element at the copy's speed, "
                   f"{passes:.1f} traversals of x, where {least:.0f} B ({least / size:.2g}) is "
                   f"the least" + (f": {design}" if design else "") +
                   ". Either the kernel moves that much (a pass more than needed: fuse it), or "
                   "its time goes elsewhere (programs waiting on each other, too few programs "
                   "for the SMs, registers spilled)")
    return out


def _numbers(values: Any, n: int | None = None) -> list[float]:
    if not isinstance(values, list) or not values or (n is not None and len(values) != n):
        raise PerformanceRejected("the timed run's report does not add up")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise PerformanceRejected(f"the timed run reported an impossible time ({v!r})")
        out.append(float(v))
    return out


MIN_ON_TIME_REPS = 5  # fewer than this queued on time: every repetition counts, as before


def _on_time(ms: list[float], copy_ms: list[float], late: Any
             ) -> tuple[list[float], list[float]]:
    """The repetitions the host queued before the GPU reached their start event. A late one
    timed the GPU waiting for a host slowed by a busy machine: on the H100's load bench the
    online reference's 256×262144 shape, 20 of 32 repetitions late, scored 110 points
    against 194 in the same file's other grading. Left out while enough remain."""
    if late is None:
        return ms, copy_ms
    if not isinstance(late, list) or any(isinstance(i, bool) or not isinstance(i, int)
                                         or not 0 <= i < len(ms) for i in late):
        raise PerformanceRejected("the timed run's report does not add up")
    late = set(late)
    keep = [i for i in range(len(ms)) if i not in late]
    if len(keep) < MIN_ON_TIME_REPS:
        return ms, copy_ms
    return [ms[i] for i in keep], [copy_ms[i] for i in keep]


def _decode_value(value: Any, names: dict[str, int]) -> Any:
    if isinstance(value, str) and value.startswith("@"):
        return {"a": names[value[1:]]}
    if isinstance(value, float) and not math.isfinite(value):
        return {"f": repr(value)}
    return value


def timing_request(shape: PerfShape, seed: int) -> dict[str, Any]:
    """What the runner needs to time one shape (the ``perf`` op, less its name)."""
    names = {r.name: i for i, r in enumerate(shape.inputs)}
    return {"fn": shape.fn, "seed": seed, "inputs": [r.to_json() for r in shape.inputs],
            "args": [_decode_value(v, names) for v in shape.args],
            "kwargs": {k: _decode_value(v, names) for k, v in shape.kwargs.items()},
            "bytes": shape.bytes_moved, **TIMING}


def figures(shape: PerfShape, ms: list[float], copy_ms: list[float], copy_bytes: int
            ) -> ShapeFigures:
    """A shape's figures from the raw per-call times of it and of the copy beside it."""
    median, copy_median = statistics.median(ms), statistics.median(copy_ms)
    # each repetition times the copy and the call back to back: the median of the
    # per-pair ratios cancels slow drifts (clocks, temperature) that a ratio of two
    # medians would keep
    fraction = statistics.median(c / t for c, t in zip(copy_ms, ms))
    return ShapeFigures(shape.label, shape.fn, shape.rows, shape.cols, shape.dtype,
                        shape.bytes_moved, median, shape.bytes_moved / median / 1e6,
                        copy_bytes / copy_median / 1e6, fraction, interquartile_spread(ms),
                        interquartile_spread(copy_ms), len(ms))


@dataclass
class FetchedRows:
    """One timed run's rows the checker picked, fetched from the runner but not yet judged:
    fetching needs the runner (and the GPU), judging needs only the host, so it runs beside
    the timing of the next shapes and ends after the GPU is let go (``RowJudge``)."""

    shape: PerfShape
    seed: int
    during: str
    out_picks: list[tuple[int, int]]
    in_picks: list[tuple[int, int, int]]
    arrays: list[Any]
    problem: str | None = None  # a fault of the report found while timing, raised after the rows


class RowJudge:
    """Judges fetched rows on a thread of its own, in the order they came, while the next
    shapes are timed: the host's float64 work overlaps the runner's timing, and what is
    left when the measuring ends is short. The first fault is kept (raised by ``result``)
    and the rows after it are not judged."""

    def __init__(self, judge_one: Callable[[FetchedRows], None]):
        self._judge_one = judge_one
        self._pool: ThreadPoolExecutor | None = None
        self._futures: list[Any] = []
        self._fault: BaseException | None = None
        self._lock = threading.Lock()

    def add(self, rows: FetchedRows) -> None:
        if self._pool is None:
            # behind the runner that times, whose host the GPU waits on
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="timed-rows",
                                            initializer=lower_this_thread,
                                            initargs=(CHECKER_NICE,))
        self._futures.append(self._pool.submit(self._one, rows))

    def _one(self, rows: FetchedRows) -> None:
        with self._lock:
            if self._fault is not None:
                return
        try:
            self._judge_one(rows)
            rows.arrays = []  # judged: the host memory goes back
            if rows.problem is not None:  # found while timing, raised after its rows
                raise PerformanceRejected(rows.problem)
        except Exception as fault:  # noqa: BLE001 - raised again in the grading's thread
            with self._lock:
                self._fault = fault

    def abandon(self) -> None:
        """The grading goes on without these rows (its measuring failed): the rows queued
        are dropped and the thread lets go, without waiting for the row being judged."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    @property
    def failed(self) -> bool:
        with self._lock:
            return self._fault is not None

    def result(self) -> None:
        """Waits for every row added; raises the first fault."""
        for future in self._futures:
            future.result()
        if self._pool is not None:
            self._pool.shutdown()
        if self._fault is not None:
            raise self._fault


class PerformanceRun:
    """Times the graded shapes of ``spec`` through one runner session: ``measure`` (under
    the GPU gate) times every shape and fetches the secret rows, which a thread of their
    own judges meanwhile (``RowJudge``); ``judge`` (after the gate) waits for the rest of
    that judging and returns the figures. A fault found while measuring is raised by
    ``judge`` after the rows of the shapes timed before it, the order the checks had when
    each shape's rows were judged at once."""

    def __init__(self, spec: PerformanceSpec, tolerances: dict[str, Tolerance],
                 checks_module: ModuleType, session, rng: np.random.Generator,
                 gpu_index: int | None, budget_s: float | None = None,
                 on_shape: Callable[[str, float, float], None] | None = None):
        self.spec, self.tolerances, self.checks = spec, tolerances, checks_module
        self.on_shape = on_shape  # (label, began, ended), monotonic: the grading's timeline
        self.session, self.rng, self.gpu_index = session, rng, gpu_index
        self.budget_s = budget_s  # per timed shape, its compiles included
        # per shape label: the runner's report of its compiled kernels and the GPU's limits
        self.compiled: dict[str, tuple[Any, Any]] = {}
        self.timed: list[ShapeFigures] = []
        self.fetched: list[FetchedRows] = []  # in the order timed
        self.judging = RowJudge(self._judge_rows)  # judges them meanwhile, in that order
        self.stop: BaseException | None = None  # what ended the measuring early
        self.clocks: Any = None
        self.fill: str | None = None  # how the runner says it made the inputs (shown only)
        # the rows of a shape, judged side by side; its threads start at its first rows, and
        # once it is shut down (judged, or abandoned) nothing starts them again
        self._rows = ThreadPoolExecutor(ROW_THREADS, thread_name_prefix="timed-row",
                                        initializer=lower_this_thread, initargs=(CHECKER_NICE,))

    def run(self) -> dict[str, Any]:
        """Both steps at once (where nothing else shares the GPU)."""
        self.measure()
        return self.judge()

    def measure(self) -> None:
        """Times each shape in turn and fetches its rows; stops at the first fault (kept
        for ``judge``: a rejection, or a call over its budget)."""
        for shape in self.spec.shapes:
            if self.judging.failed:  # a wrong row already decides the verdict
                break
            try:
                self.timed.append(self.shape(shape))
            except (PerformanceRejected, CallOverrun) as stop:
                self.stop = stop
                break
        # read while the GPU is still this grading's alone (as before the split)
        self.clocks = gpuinfo.clocks(self.gpu_index)

    def judge(self) -> dict[str, Any]:
        """Every fetched row judged (the first wrong one rejects), then what stopped the
        measuring, if anything, then the figures."""
        try:
            self.judging.result()
        finally:
            self._rows.shutdown(cancel_futures=True)
        if self.stop is not None:
            raise self.stop
        spec, timed = self.spec, self.timed
        capped = [min(f.fraction, 1.0) for f in timed]
        geomean = math.exp(sum(math.log(max(c, 1e-9)) for c in capped) / len(capped))
        gbs_mean = math.exp(sum(math.log(f.gbs) for f in timed) / len(timed))
        return {
            "fraction_of_copy": round(geomean, 4),
            "gbs": round(gbs_mean, 1),
            "points": round(spec.points * geomean, 2),
            "max_points": spec.points,
            "shapes": [{**f.to_json(), "diagnosis": self.diagnosis(f)} for f in timed],
            "clocks": self.clocks,
            "method": METHOD,
            # the runner's word, shown to operators: the checker recomputes the rows anyway
            "fill": self.fill,
        }

    def diagnosis(self, f: ShapeFigures) -> dict[str, Any]:
        """The time in the traffic table's terms, then what the compiled kernels say."""
        kernels, limits = self.compiled.get(f.label, (None, None))
        return {**speed_diagnosis(f, self.spec.designs.get(f.fn, DESIGNS)),
                **kernel_words(kernels, limits, at_ceiling=f.fraction >= AT_THE_CEILING,
                               elements=f.rows * f.cols)}

    def shape(self, shape: PerfShape) -> ShapeFigures:
        """A shape's figures. One run above the copy is timed again before it is refused:
        a kernel at the copy's own speed (the references reach 1.03 on the H200) can read
        above 1.05 once, when something else on the host (a runner being made touching
        the driver) slows the copies of that run; a kernel that is not doing the work
        stays above on the second run too."""
        believable = shape.believable or BELIEVABLE_FRACTION
        began = time.monotonic()
        try:
            return self._shape(shape, believable)
        finally:
            if self.on_shape is not None:
                self.on_shape(shape.label, began, time.monotonic())

    def _shape(self, shape: PerfShape, believable: float) -> ShapeFigures:
        result = self._time_once(shape)
        if result.fraction > believable:
            first = result.fraction
            result = self._time_once(shape)
            result.retimed_from = round(first, 4)
        if result.fraction > believable:
            raise PerformanceRejected(
                f"{shape.fn} at {shape.label} reported {result.gbs:.0f} GB/s, "
                f"{result.fraction:.2f}× the {result.copy_gbs:.0f} GB/s of a plain copy of the "
                "same bytes measured beside it (and timed again, "
                f"{result.retimed_from:.2f}× the first time): faster than moving the bytes is "
                "impossible, so the timing is not believed")
        return result

    def _time_once(self, shape: PerfShape) -> ShapeFigures:
        seed = int(self.rng.integers(0, 2**31))
        # The runner empties torch's cache before the first shape and after the last only:
        # between them the next shape's buffers come from what the last one freed. Each empty
        # and the allocations after it are trips to the driver, made while this grading holds
        # the GPU alone, and on a busy host each took up to ~0.1 s (docs/benchmarks.md,
        # issue 43). Within the timing's memory cap torch frees cached blocks itself.
        header = {"op": "perf", **timing_request(shape, seed), "first_shape": not self.fetched}
        during = f"while timing {shape.fn} at {shape.label}"
        reply = self.session.request(header, during=during, budget_s=self.budget_s).header
        if reply.get("violations"):
            raise PerformanceRejected(
                f"torch computed part of the result ({reply['violations'][0]}) {during}: "
                "timed calls run under the same rules as the checks",
                reply.get("violation_line"), flag=False)
        if reply.get("foreign_streams"):
            raise PerformanceRejected(f"a kernel was launched on a side stream {during}: launch on "
                                      "the current stream, where the timer runs")
        reps = reply.get("reps")
        if not isinstance(reps, int) or reps < 5:
            raise PerformanceRejected(f"the timed run returned {reps!r} repetitions {during}")
        ms = _numbers(reply.get("ms"), reps)
        copy_ms = _numbers(reply.get("copy_ms"), reps)
        launches = reply.get("launches")
        if not isinstance(launches, list) or len(launches) < reps or min(launches) < 1:
            raise PerformanceRejected(f"a timed call returned without launching a Triton "
                                      f"kernel {during}", flag=False)
        ms, copy_ms = _on_time(ms, copy_ms, reply.get("late_reps"))
        if isinstance(reply.get("fill"), str):
            self.fill = reply["fill"][:300]
        fetching = time.monotonic()
        rows = self._fetch_rows(shape, seed, reps, int(reply.get("pool", 0)), during,
                                last=shape is self.spec.shapes[-1])
        if self.on_shape is not None:  # in the timeline beside the shape's whole span
            self.on_shape(f"{shape.label}: its rows fetched", fetching, time.monotonic())
        self.compiled[shape.label] = (reply.get("kernels"), reply.get("device_limits"))
        copy_bytes = reply.get("copy_bytes")
        if not isinstance(copy_bytes, int) or abs(copy_bytes - shape.bytes_moved) > 2:
            # raised by judge(), after these rows (the order of the checks before the split)
            rows.problem = f"the copy beside the timed calls moved the wrong bytes {during}"
        self.fetched.append(rows)
        self.judging.add(rows)
        if rows.problem is not None:
            raise PerformanceRejected(rows.problem)
        return figures(shape, ms, copy_ms, copy_bytes)

    def _check_rows(self, shape: PerfShape, seed: int, reps: int, pool: int, during: str) -> None:
        """Fetch and judge at once (the two steps of a timed run's rows, for a test)."""
        self._judge_rows(self._fetch_rows(shape, seed, reps, pool, during))

    def _fetch_rows(self, shape: PerfShape, seed: int, reps: int, pool: int, during: str,
                    last: bool = True) -> FetchedRows:
        """One secret row of every timed call's output, and of each input left in the pool,
        picked now (the generator's order is the checks' order) and fetched. ``last``: the
        timing's last shape, after which the runner gives its cached memory back."""
        out_picks = [(i, int(self.rng.integers(0, shape.rows))) for i in range(reps)]
        pool = max(1, min(pool, reps))
        in_picks = [(c, j, int(self.rng.integers(0, shape.rows)))
                    for c in range(reps - pool, reps) for j in range(len(shape.inputs))]
        reply = self.session.request({"op": "perf_rows", "outputs": [list(p) for p in out_picks],
                                      "inputs": [list(p) for p in in_picks],
                                      "last_shape": last}, during=during,
                                     budget_s=self.budget_s)
        if len(reply.arrays) != len(out_picks) + len(in_picks):
            raise PerformanceRejected(f"the timed run's rows do not add up {during}")
        return FetchedRows(shape, seed, during, out_picks, in_picks, list(reply.arrays))

    def _judge_rows(self, fetched: FetchedRows) -> None:
        """The fetched rows against the inputs recomputed from the seed recipe and the float64
        reference: host work only, done after the GPU is let go. The rows are judged side by
        side (``ROW_THREADS``: numpy lets the GIL go for a row's arrays), the first wrong one
        in the order picked decides. A 1048576-column row for every timed call took 0.45-0.69 s
        one after another, after the timing, on the H200."""
        shape, seed, during = fetched.shape, fetched.seed, fetched.during
        out_picks, in_picks = fetched.out_picks, fetched.in_picks
        got_out, got_in = fetched.arrays[:len(out_picks)], fetched.arrays[len(out_picks):]

        def input_row(item) -> str | None:
            (c, j, row), got = item
            recipe = shape.inputs[j]
            want = perfinputs.host_rows(recipe, perfinputs.call_seed(seed, c, j), np.array([row]))
            if got.dtype != recipe.dtype or not np.array_equal(got.data.reshape(-1), want.data[0]):
                return (f"timed call {c} changed its input `{recipe.name}` (row {row}) {during}: "
                        "inputs must not be modified")
            return None

        tol = self.tolerances[shape.output_dtype]

        def output_row(item) -> str | None:
            (c, row), got = item
            inputs = {r.name: perfinputs.host_rows(r, perfinputs.call_seed(seed, c, j),
                                                   np.array([row])).to_f64()
                      for j, r in enumerate(shape.inputs)}
            expected = self.checks.performance_reference(shape, inputs, np.array([row]))
            failure = compare_rows(type(got)(got.data.reshape(1, -1), got.dtype), expected, tol,
                                   dtype=shape.output_dtype,
                                   probabilities=self.spec.probabilities)
            if failure is None:
                return None
            return (f"the output of timed call {c + 1} is wrong {during} (row {row}: "
                    f"{failure.text}), though the checks passed: timed calls must compute the "
                    "same result as the checked ones")

        for judge, items in ((input_row, zip(in_picks, got_in)),
                             (output_row, zip(out_picks, got_out))):
            for message in self._rows.map(judge, items):  # in the order picked
                if message is not None:
                    raise PerformanceRejected(message)

    def abandon(self) -> None:
        """The measuring failed and nothing will be judged: every judging thread lets go."""
        self.judging.abandon()
        self._rows.shutdown(wait=False, cancel_futures=True)
