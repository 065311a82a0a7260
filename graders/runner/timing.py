"""Timed calls, in the runner: the submission beside a copy of the same bytes.

Method (docs/benchmarks.md says it in prose):
* every timed call reads inputs made fresh for it (``graders.shared.perfinputs``, seeded per
  call, made in one kernel by ``graders.runner.fast_fill``), in a pool of buffers that
  together exceed the L2 cache twice over;
* before each timed region the L2 is flushed by writing a buffer of at least
  ``FLUSH_MIN_BYTES`` (and 4× the L2), then the GPU spins for about 1 ms
  (``torch.cuda._sleep``) while Python queues the call: host overhead (the guard, Triton's
  launcher, allocations) is hidden as it is in a pipeline where the GPU runs behind the
  host, and the events time the kernels. A call the host had not all queued when the GPU
  reached its start event (``Event.query``) doubles the spin for the calls after it, and its
  time (the GPU's wait for the host in it) is left out of the figures and the spread rule;
* each repetition times a device-to-device copy moving the same number of bytes
  (half read, half written) and then the submission, both with CUDA events on the
  current stream, so the ceiling is measured beside the submission, under the same
  clocks and temperature;
* the submission runs under the same guard as in the checks (torch math rejected,
  Triton launches counted), and a launch on any other stream is refused: work on a
  side stream would finish after the end event;
* each output is cloned at once, so the checker can ask afterwards for any row of
  any timed call; repetitions continue until the interquartile spread of the
  submission's times is under the target, or the budget is spent.
Nothing here is believed by the checker without checking: it gets the raw times
and the rows it asks for, and judges both.
"""

from __future__ import annotations

import math
import os
import resource
import sys
import time
from typing import Any

from graders.runner import fast_fill, kernel_facts
from graders.shared import perfinputs
from graders.shared.perfinputs import InputRecipe
from graders.shared.stats import known_well_enough

FLUSH_MIN_BYTES = 256 << 20
# The GPU spins this long (about 1 ms) before each timed region, so that the host has
# queued the whole call (Python, the guard, the launches) before the start event fires.
HEADSTART_CYCLES = 2_000_000
# A repetition whose start event the GPU had already passed when the host finished queueing
# the call (a host slowed by a busy machine) timed the GPU waiting for the host: the spin
# doubles for the repetitions after it, up to this (about 64 ms: under the H100's load bench
# a host at nice 0 beside 16 busy cores took up to 54 ms to queue the online reference's
# call). A late repetition's time is left out of the figures (``late_reps``).
HEADSTART_MAX_CYCLES = 128_000_000
KEEP_MAX_BYTES = 8 << 30  # cloned outputs kept for the checker's row picks


def clock(torch) -> tuple:
    """The timer's parts. Taken before any submission code runs, so a submission that
    patches Event.elapsed_time or Tensor.copy_ patches copies nobody here uses."""
    return (torch.cuda.Event, torch.cuda.Event.record, torch.cuda.Event.elapsed_time,
            torch.Tensor.copy_, torch.Tensor.zero_, torch.cuda._sleep)


class KeptOutputs:
    """The timed calls' outputs, kept for the checker's row picks in a few large blocks
    rather than one new block a call.

    A clone of each output holds one more block every repetition, taken from what the
    caching allocator had cached for the next fill's temporaries or the next call's output,
    so every repetition asks the driver for memory (cudaMalloc). On a loaded GPU host (6
    slots, some 60 CUDA contexts being made, closed and allocating) the fills that take 2 ms
    alone took 48-65 ms of host time while the calls between them did not slow
    (docs/benchmarks.md, issue 43). Here a block holds ``first`` outputs, the next as many
    as are kept so far (never past ``most``): 100 repetitions allocate 5 times. An output
    unlike the block's (another dtype or size, or not on ``device``: the checker judges
    what it gets) is cloned as before."""

    def __init__(self, torch, first: int, most: int, device: str = "cuda"):
        self.torch, self.first, self.most = torch, max(1, first), max(1, most)
        self.device = device
        self.outputs: list[Any] = []
        self.block, self.size, self.used, self.room = None, 0, 0, 0

    def keep(self, out) -> None:
        if not (self._fits(out) and (self.used < self.room or self._grow(out))):
            self.outputs.append(out.clone())
            return
        n = self.size
        kept = self.block[self.used * n:(self.used + 1) * n].view(out.shape)
        kept.copy_(out)
        self.outputs.append(kept)
        self.used += 1

    def _fits(self, out) -> bool:
        """Whether ``out`` may go in a block: on ``device``, not empty, and once a block is
        made, of its dtype and size (one kind of output: the first one's)."""
        if out.device.type != self.device or out.numel() == 0:
            return False
        return self.block is None or (out.dtype, out.numel()) == (self.block.dtype, self.size)

    def _grow(self, out) -> bool:
        """A new block for ``first`` outputs, then as many as are kept so far, never past
        ``most``; False when no more may be kept in blocks."""
        kept = len(self.outputs)
        room = min(self.first if self.block is None else kept, self.most - kept)
        if room < 1:
            return False
        self.block = self.torch.empty(room * out.numel(), dtype=out.dtype, device=out.device)
        self.size, self.used, self.room = out.numel(), 0, room
        return True


class TimedRun:
    """The outputs and inputs of one shape's timed calls, kept until the checker looks."""

    def __init__(self, recipes: list[InputRecipe], pool: list[list[Any]], outputs: list[Any]):
        self.recipes, self.pool, self.outputs = recipes, pool, outputs


def measure(runner, header: dict[str, Any], decode, guarded: bool = True,
            began: float | None = None) -> tuple[dict[str, Any], TimedRun | None]:
    """``guarded=False`` only for trusted baselines (``graders bench`` timing torch itself).
    ``began``: when the request started (time.perf_counter), for the probe's setup figure."""
    began = time.perf_counter() if began is None else began
    torch = runner.torch
    probing = bool(os.environ.get("GRADERS_RUNNER_PROFILE")
                   or os.environ.get("GRADERS_TIMING_PROBE"))
    costs = _costs(torch) if probing else None  # before the setup's allocations
    guard = runner.guard
    fn = getattr(runner.module, header["fn"])
    recipes = [InputRecipe.from_json(d) for d in header["inputs"]]
    base_seed = int(header["seed"])
    min_reps, max_reps = int(header.get("min_reps", 10)), int(header.get("max_reps", 50))
    target = float(header.get("target_interval", 0.01))
    budget_s = float(header.get("budget_s", 4.0))
    warmup = int(header.get("warmup", 2))

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = int(getattr(props, "L2_cache_size", 64 << 20) or (64 << 20))
    input_bytes = sum(r.nbytes for r in recipes)
    out_bytes = recipes[0].nbytes  # the output is shaped like the first input
    pool_size = max(2, min(8, math.ceil(2 * l2 / max(1, input_bytes))))
    max_reps = max(min_reps, min(max_reps, KEEP_MAX_BYTES // max(1, out_bytes)))

    pool = [[torch.empty(r.shape, dtype=perfinputs.torch_dtype(torch, r.dtype),
                         device="cuda") for r in recipes] for _ in range(pool_size)]
    flush = torch.empty(max(FLUSH_MIN_BYTES, 4 * l2) // 4, dtype=torch.int32, device="cuda")
    # the copy moves what the checker says the algorithm must: half read, half written
    copy_bytes = int(header.get("bytes", input_bytes + out_bytes)) // 2
    copy_src = torch.zeros(copy_bytes, dtype=torch.uint8, device="cuda")
    copy_dst = torch.empty_like(copy_src)
    stream = torch.cuda.current_stream()
    # bound when the runner started (clock(), before the submission was imported)
    Event, record, elapsed, copy, zero, gpu_sleep = runner.clock

    def fill(slot: int, call_index: int) -> None:
        for j, (r, t) in enumerate(zip(recipes, pool[slot])):
            fast_fill.fill(torch, t, r, perfinputs.call_seed(base_seed, call_index, j))

    def call(slot: int, state) -> Any:
        args = [decode(v, pool[slot]) for v in header.get("args", [])]
        kwargs = {k: decode(v, pool[slot]) for k, v in header.get("kwargs", {}).items()}
        if not guarded:
            return fn(*args, **kwargs)
        with guard.guarded_call(state, "cuda"):
            return fn(*args, **kwargs)

    state = guard.CallGuard(runner.submission, stream=stream.cuda_stream)
    probe = _Probe(torch, Event, record, stream, began, costs) if probing else None
    times, copies, launches = [], [], []
    kept = KeptOutputs(torch, min_reps, max_reps)
    outputs = kept.outputs
    events, kernels = [], []
    try:
        for w in range(warmup):  # compiles and autotunes; untimed, unchecked
            fill(0, -1 - w)
            call(0, state)
        torch.cuda.synchronize()
    except Exception:
        if not state.violations:
            raise
    if probe:
        probe.mark("warmup")
    started = time.monotonic()
    headstart, late = HEADSTART_CYCLES, []
    for i in range(0 if state.violations else max_reps):
        slot = i % pool_size
        if probe:
            probe.mark("other")
        fill(slot, i)
        if probe:
            probe.mark("fill")
        c0, c1, e0, e1 = (Event(enable_timing=True) for _ in range(4))
        zero(flush)
        gpu_sleep(headstart)
        record(c0, stream)
        copy(copy_dst, copy_src)
        record(c1, stream)
        zero(flush)
        gpu_sleep(headstart)
        before = state.launches
        record(e0, stream)
        try:
            # the first timed call's kernels, for the speed words (never the score)
            with kernel_facts.watching(enabled=i == 0) as seen:
                out = call(slot, state)
            kernels.extend(seen)  # empty after the first call
        except Exception:
            if not state.violations:
                raise
            break
        if e0.query():  # the GPU was at the start event before the call was all queued
            late.append(i)  # its time is the GPU's wait for the host as much as the call's
            headstart = min(2 * headstart, HEADSTART_MAX_CYCLES)
        record(e1, stream)
        if probe:
            probe.mark("call")
        launches.append(state.launches - before)
        if state.violations or state.foreign_streams:
            break
        if not isinstance(out, torch.Tensor):
            return ({"ok": False, "error": {"kind": "runtime_error", "line": None,
                                            "message": f"{header['fn']} returned "
                                                       f"{type(out).__name__} in a timed call, "
                                                       "expected a torch.Tensor"}}, None)
        kept.keep(out)
        events.append((c0, c1, e0, e1))
        if probe:
            probe.mark("clone")
        if i + 1 >= min_reps:  # stop as soon as the median is known to within ``target``
            torch.cuda.synchronize()
            times = [elapsed(a, b) for k, (_, _, a, b) in enumerate(events) if k not in late]
            if (known_well_enough(times, min_reps, target)
                    or time.monotonic() - started > budget_s):
                break
    torch.cuda.synchronize()
    times = [elapsed(e0, e1) for _, _, e0, e1 in events]
    copies = [elapsed(c0, c1) for c0, c1, _, _ in events]
    del flush, copy_src, copy_dst
    if probe:
        probe.report(header, len(times), time.monotonic() - started, elapsed, len(late))

    reply = {
        "ok": True,
        "reps": len(times),
        "ms": times,
        "copy_ms": copies,
        "copy_bytes": 2 * copy_bytes,
        "launches": launches,
        "violations": [v.op for v in state.violations],
        "violation_line": state.violations[0].line if state.violations else None,
        "foreign_streams": state.foreign_streams,
        "pool": pool_size,
        # repetitions the host queued late: the GPU reached the start event first, so their
        # times hold its wait for the host; the checker leaves them out of the figures
        "late": len(late),
        "late_reps": late,
        "l2_bytes": l2,
        "fill": fast_fill.state["fill"],  # "triton", or torch's fill and why
        "kernels": kernels,
        "device_limits": kernel_facts.device_limits(props),
        "output": {"shape": list(outputs[0].shape) if outputs else [],
                   "dtype": str(outputs[0].dtype).replace("torch.", "") if outputs else ""},
    }
    return reply, TimedRun(recipes, pool, outputs)


class _Probe:
    """``GRADERS_RUNNER_PROFILE=1`` or ``GRADERS_TIMING_PROBE=1`` only (an operator's
    breakdown, never in service; the probe alone costs four events a repetition): where a
    shape's timed loop spends its wall time on the host (making inputs, the call with its
    flushes and head starts, cloning the output, the rest: waiting on the GPU, the spread
    rule), what came before the loop (``setup``: buffers allocated; ``warmup``: the untimed
    calls), and the GPU time of each part from events recorded between them. Printed on
    the runner's output, beside its cProfile."""

    def __init__(self, torch, Event, record, stream,  # noqa: N803 - the timer's own parts
                 began: float, costs: dict[str, float]):
        self.Event, self.record, self.stream = Event, record, stream
        self.torch, self.costs = torch, costs
        self.host: dict[str, float] = {}
        self.slowest: dict[str, float] = {}
        self.marks: list[tuple[str, Any]] = []
        self.last = time.perf_counter()
        # the request before the loop: the cache emptied, the cap set, pools, flush and copy
        # buffers allocated (then ``warmup``: the untimed calls)
        self.host["setup"] = self.last - began
        self.mark("start")

    def mark(self, part: str) -> None:
        now = time.perf_counter()
        self.host[part] = self.host.get(part, 0.0) + now - self.last
        self.slowest[part] = max(self.slowest.get(part, 0.0), now - self.last)
        self.last = now
        event = self.Event(enable_timing=True)
        self.record(event, self.stream)
        self.marks.append((part, event))

    def report(self, header: dict[str, Any], reps: int, wall_s: float, elapsed,
               late: int) -> None:
        gpu: dict[str, float] = {}
        for (_, a), (part, b) in zip(self.marks, self.marks[1:]):
            gpu[part] = gpu.get(part, 0.0) + elapsed(a, b)
        first = header["inputs"][0]
        shape = f"{first['rows']}×{first['cols']} {first['dtype']}"
        print(f"timing probe {header['fn']} {shape}: {reps} reps in {wall_s:.3f} s, {late} "
              "late; host s "
              + ", ".join(f"{k} {v:.3f}" for k, v in self.host.items() if k != "start")
              + "; GPU ms " + ", ".join(f"{k} {v:.1f}" for k, v in gpu.items())
              + "; counts " + ", ".join(f"{k} {v:.3g}" for k, v in self.counts().items()),
              file=sys.stderr, flush=True)

    def counts(self) -> dict[str, float]:
        """Since the request began: this thread's CPU-seconds and its context switches (a
        thread short of CPU is switched out involuntarily; one waiting on the driver or a
        lock, voluntarily), the allocator's trips to the driver, and the slowest fill."""
        now = _costs(self.torch)
        out = {k: now[k] - self.costs[k] for k in now}
        out["fill_max_s"] = self.slowest.get("fill", 0.0)
        return out


def _costs(torch) -> dict[str, float]:
    """What a probed request costs besides wall time (see ``_Probe.counts``)."""
    use = resource.getrusage(resource.RUSAGE_THREAD)
    stats = torch.cuda.memory_stats()
    return {"cpu_s": time.thread_time(), "switches_voluntary": use.ru_nvcsw,
            "switches_forced": use.ru_nivcsw,
            "device_mallocs": stats.get("num_device_alloc", 0),
            "device_frees": stats.get("num_device_free", 0),
            "alloc_retries": stats.get("num_alloc_retries", 0)}


def warm_up(runner, header: dict[str, Any], decode) -> dict[str, Any]:
    """Compile what the timed shapes need, ahead of timing and untimed: the submission is
    called on each shape's inputs (under the same guard) and nothing is kept. A failure
    here is only counted: timing, if it comes, calls the same way and reports it."""
    torch, guard = runner.torch, runner.guard
    fn = getattr(runner.module, header["fn"])
    recipes = [InputRecipe.from_json(d) for d in header["inputs"]]
    inputs: list[Any] = []
    try:
        # the inputs inside the try too: where another job has filled the GPU they may fail
        # to allocate, and an exception out of here ended the runner (exit status 1) and
        # the grading as a runtime error, for memory another job took
        inputs = [torch.empty(r.shape, dtype=perfinputs.torch_dtype(torch, r.dtype),
                              device="cuda") for r in recipes]
        for j, (r, t) in enumerate(zip(recipes, inputs)):
            # the fast fill's first use, and its check against torch's, here: off the timing
            fast_fill.fill(torch, t, r, perfinputs.call_seed(int(header["seed"]), -1, j))
        args = [decode(v, inputs) for v in header.get("args", [])]
        kwargs = {k: decode(v, inputs) for k, v in header.get("kwargs", {}).items()}
        with guard.guarded_call(guard.CallGuard(runner.submission), "cuda"):
            fn(*args, **kwargs)
        torch.cuda.synchronize()
    except BaseException as exc:  # noqa: BLE001 - reported by the timing proper
        if isinstance(exc, KeyboardInterrupt):
            raise
        return {"ok": True, "warmed": False, "error": type(exc).__name__}
    finally:
        inputs.clear()
        args = kwargs = None
        torch.cuda.empty_cache()
    return {"ok": True, "warmed": True}


def rows_of(runner, run: TimedRun, header: dict[str, Any]):
    """The rows the checker picked: outputs of timed calls, and inputs still in the pool."""
    picked = []
    for call_index, row in header.get("outputs", []):
        picked.append(run.outputs[int(call_index)][int(row)])
    n = len(run.outputs)
    for call_index, j, row in header.get("inputs", []):
        slot = int(call_index) % len(run.pool)
        if not n - len(run.pool) <= int(call_index) < n:
            raise ValueError("that call's inputs are no longer in the pool")
        picked.append(run.pool[slot][int(j)][int(row)])
    return [runner.to_host(t) for t in on_host_together(runner.torch, picked)]


def on_host_together(torch, rows: list[Any]) -> list[Any]:
    """``rows`` with those on the GPU brought to the host in one copy for each kind of row
    (dtype and shape) rather than one copy a row: each copy is a trip through the driver and
    a wait for the GPU, and a timed shape's 10-100 rows are fetched while the grading holds
    the GPU alone (under the load bench, 10.5 of the 38 s that timings held it)."""
    out = list(rows)
    kinds: dict[tuple, list[int]] = {}
    for i, t in enumerate(rows):
        if t.device.type != "cpu":
            kinds.setdefault((t.device, t.dtype, tuple(t.shape)), []).append(i)
    for index in kinds.values():
        if len(index) > 1:
            together = torch.stack([rows[i] for i in index]).to("cpu")
            for i, row in zip(index, together):
                out[i] = row
    return out
