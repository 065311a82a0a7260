"""GPU runs of the same graders, in the sandbox (skipped without an NVIDIA GPU).

On the H200: a reference graded in the sandbox passes, the selftest passes, and the
GPU attack cases behave: an endless kernel times out, exhausting GPU memory is a
memory_limit, a job sees no GPU it was not given, and the slot stays healthy.
"""

import json
import os
import re
import subprocess
import sys
import time

import pytest
from conftest import REPO, mutant_file, run_cli
from test_grading import ROW_PER_PROGRAM, SAFE_KERNEL

from graders.engine.performance import AT_THE_CEILING
from graders.engine.registry import get_exercise
from graders.isolation.launch import RunnerJob
from graders.isolation.sandbox import BwrapLauncher
from graders.service.slots import Slot
from graders.shared.vocabulary import Device, Verdict

# the reference, not a one-block-per-row kernel: a block of 2**19 lanes for the 300007-column
# check would take the GPU compiler minutes
GOOD = (REPO / "reference_solutions" / "safe_softmax" / "solution.py").read_text()

PATCHED_TIMER = GOOD + '''

# at import, before any timing: claim every kernel took 0.1 µs
torch.cuda.Event.elapsed_time = lambda self, end: 1e-4
torch.Tensor.zero_ = lambda self: self  # and skip the grader's L2 flush
'''

SIDE_STREAM = GOOD.replace("def softmax(", "def _softmax(") + '''

_side = None


def softmax(x):
    # the work on another stream: a timer on the current stream would stop before it ends
    global _side
    _side = _side or torch.cuda.Stream()
    with torch.cuda.stream(_side):
        return _softmax(x)
'''

pytestmark = pytest.mark.gpu

# issue 23: launches captured in a CUDA graph count when the graph is replayed. One graph
# per shape and dtype, over static buffers: each call copies its input in, replays, and
# returns a copy of the static output (torch copies are allowed; the kernel does the work).
GRAPH_REPLAY = SAFE_KERNEL + '''

_graphs = {}


def softmax(x):
    key = (tuple(x.shape), x.dtype)
    if key not in _graphs:
        static_x, static_y = torch.empty_like(x), torch.empty_like(x)
        static_x.copy_(x)
        launch(static_x, static_y)  # compile before capturing
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            launch(static_x, static_y)
        _graphs[key] = (graph, static_x, static_y)
    graph, static_x, static_y = _graphs[key]
    static_x.copy_(x)
    graph.replay()
    return static_y.clone()
'''

ENDLESS_KERNEL = SAFE_KERNEL + '''

@triton.jit
def _spin(x_ptr, y_ptr, n):
    acc = tl.load(x_ptr)
    for i in range(0, n):  # 2**31 iterations in every program: effectively endless
        acc = acc * 1.0000001 + 1e-7
    tl.store(y_ptr, acc)


def softmax(x):
    y = torch.empty_like(x)
    _spin[(100000,)](x, y, 2**31 - 1)
    return y
'''

GPU_MEMORY_HOG = SAFE_KERNEL + '''

def softmax(x):
    hog = [torch.empty(16 << 30, dtype=torch.uint8, device=x.device) for _ in range(64)]
    y = torch.empty_like(x)
    launch(x, y)
    return y
'''

SEES_DEVICES = SAFE_KERNEL + '''
import os


def softmax(x):
    nodes = sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))
    raise RuntimeError(f"device={x.device} cuda={torch.cuda.is_available()} "
                       f"count={torch.cuda.device_count()} nodes={nodes}")
'''


@pytest.fixture(scope="module")
def slot():
    return Slot("gpu-0", Device.CUDA, gpu_index=0)


def _grade(slot, tmp_path, name, source, performance=False, **kwargs):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return slot.grade(get_exercise("safe_softmax"), path, performance=performance, **kwargs)


def _print_performance(title, perf):
    print(f"\n{title}: {perf['points']} points, {perf['fraction_of_copy']:.3f} of copy")
    for s in perf["shapes"]:
        print(f"  {s['label']:<22} {s['ms']:.4f} ms {s['gbs']:7.0f} GB/s copy {s['copy_gbs']:6.0f}"
              f" fraction {s['fraction']:.3f} spread {s['spread']:.3f} reps {s['reps']}")


def test_reference_passes_in_the_sandbox_on_cuda_with_timing():
    ref = REPO / "reference_solutions" / "safe_softmax" / "solution.py"
    proc = run_cli("grade", "safe_softmax", str(ref), "--device", "cuda", "--json")
    result = json.loads(proc.stdout)
    print(f"\nreference on cuda: {result['verdict']} {result['score']}/{result['max_score']} "
          f"{result['device_name']} sandboxed={result['sandboxed']} {result['duration_s']} s")
    assert result["verdict"] == "passed" and result["device"] == "cuda", proc.stdout[-2000:]
    assert result["sandboxed"] is True
    perf = result["performance"]
    _print_performance("reference timed", perf)
    for s in perf["shapes"]:  # the speed words: what Triton compiled, and any warning
        print("".join(f"    {s['label']}: {k['text']}\n" for k in s["diagnosis"].get("kernels", [])) +
              "".join(f"    warning: {w}\n" for w in s["diagnosis"].get("warnings", [])), end="")
    assert len(perf["shapes"]) == 8
    for s in perf["shapes"]:
        assert 0.2 < s["fraction"] <= 1.05 and s["copy_gbs"] > 1000
    # the inputs made by the one-kernel fill, its rows the same as torch's (fast_fill)
    print(f"timed inputs made by: {perf['fill']}")
    assert perf["fill"] == "triton"
    assert result["score"] == pytest.approx(100 + perf["points"]) and result["max_score"] == 200


SPEED = REPO / "tests" / "fixtures" / "speed"


def _timed_shapes(exercise: str, path) -> dict:
    proc = run_cli("grade", exercise, str(path), "--device", "cuda", "--json")
    result = json.loads(proc.stdout)
    assert result["verdict"] == "passed", proc.stdout[-2000:]
    shapes = {s["label"]: s for s in result["performance"]["shapes"]}
    print(f"\n{path.name}: {result['score']}/{result['max_score']}")
    for label, s in shapes.items():
        said = s.get("diagnosis") or {}
        print(f"  {label}: {s['fraction']:.3f} of copy; {said.get('text')}")
        print("".join(f"    compiled: {k['text']}\n" for k in said.get("kernels", [])) +
              "".join(f"    warning: {w}\n" for w in said.get("warnings", [])), end="")
    return shapes


def test_the_speed_words_name_what_slows_each_known_kernel():
    """Issue 30: three correct kernels, each slow for a known reason, graded as a student's
    would be; the speed words must name the reason (tests/fixtures/speed/README.md)."""
    three = _timed_shapes("safe_softmax", SPEED / "three_kernels.py")
    said = three["1024×32768 float32"]["diagnosis"]  # 128 MiB: every pass from memory
    assert 3.5 <= said["traversals"] <= 4.5, said
    assert "like the textbook 3-pass design" in said["text"]
    assert {k["name"] for k in said["kernels"]} == {"_row_max_kernel", "_row_sum_kernel",
                                                     "_normalize_kernel"}

    spilling = _timed_shapes("safe_softmax", SPEED / "spilling.py")
    for label in ("1024×32768 float32", "1024×32768 bfloat16"):
        said = spilling[label]["diagnosis"]
        (whole_row,) = [k for k in said["kernels"] if k["name"] == "_whole_row_kernel"]
        assert whole_row["spill_bytes"] > 0 and whole_row["registers"] == 255, whole_row
        assert any("spills" in w and "num_warps" in w for w in said["warnings"]), said
    short = spilling["4096×4096 float32"]["diagnosis"]["kernels"]
    assert [k["spill_bytes"] for k in short] == [0]  # 32 values a thread: nothing spilled
    # a program a 256-column row: 2 elements for each of its 128 threads. Words only where
    # the shape is below the copy ceiling: the float32 one read 0.904 of copy on an H100
    # (at the ceiling, nothing to fix) and below it on the H200; bfloat16 ~0.6 on both
    thin = [spilling[f"65536×256 {dtype}"] for dtype in ("float32", "bfloat16")]
    below = [s for s in thin if s["fraction"] < AT_THE_CEILING]
    assert below, [s["fraction"] for s in thin]
    for s in below:
        assert any("2 elements a thread" in w for w in s["diagnosis"]["warnings"]), s

    rows = _timed_shapes("online_softmax", SPEED / "row_per_program.py")
    said = rows["64×1048576 float32"]["diagnosis"]
    assert [k["programs"] for k in said["kernels"]] == [64]
    assert any(re.search(r"ran 64 programs for \d+ SMs: \d+ SMs had nothing to do", w)
               for w in said["warnings"]), said
    wide = rows["256×262144 float32"]["diagnosis"]["warnings"]
    assert not any("SMs had nothing to do" in w for w in wide)  # 256 programs: every SM busy


def test_a_hip_kernel_gets_the_same_words_from_the_drivers_attributes():
    """The HIP reference: one block of 256 threads a row, its registers from the driver."""
    shapes = _timed_shapes("safe_softmax", REPO / "reference_solutions" / "safe_softmax" /
                           "solution.hip")
    for label, shape in shapes.items():
        (k,) = shape["diagnosis"]["kernels"]
        assert (k["name"], k["num_warps"], k["programs"]) == ("softmax", 8, shape["rows"]), k
        assert 0 < k["registers"] <= 255 and k["spill_bytes"] >= 0, k
    # one block of 256 threads a 256-column row: the time goes to each block's fixed costs
    assert any("1 element a thread" in w for w in shapes["65536×256 float32"]["diagnosis"]
               ["warnings"])


def test_a_patched_timer_is_not_the_timer(slot, tmp_path):
    result = _grade(slot, tmp_path, "patched", PATCHED_TIMER, performance=True, timeout_s=300)
    assert result.verdict is Verdict.PASSED, result.message
    _print_performance("patched Event.elapsed_time", result.performance)
    assert all(s["fraction"] <= 1.05 for s in result.performance["shapes"])


SLOW_HOST = GOOD.replace("def softmax(", "def _softmax(") + '''

import time as _time


def softmax(x):
    _time.sleep(0.004)  # a host slow to queue the call, as a busy machine's can be
    return _softmax(x)
'''


def test_a_host_slow_to_queue_its_call_is_not_timed_waiting(slot, tmp_path):
    """A timed call is timed from a start event the GPU reaches after a 1 ms spin; a host
    that takes longer to queue the call (here 4 ms of Python before the launch, as a busy
    machine's would) would be timed with the GPU waiting for it. The spin doubles after
    each late repetition, so the kernel's own time is what the median reads."""
    good = _grade(slot, tmp_path, "good", GOOD, performance=True, timeout_s=300)
    slow = _grade(slot, tmp_path, "slow", SLOW_HOST, performance=True, timeout_s=300)
    assert good.verdict is Verdict.PASSED and slow.verdict is Verdict.PASSED, slow.message
    _print_performance("the same kernel", good.performance)
    _print_performance("the same kernel, 4 ms of Python before each launch", slow.performance)
    for g, s in zip(good.performance["shapes"], slow.performance["shapes"]):
        assert s["fraction"] > 0.85 * g["fraction"], (g["label"], g["fraction"], s["fraction"])


def test_work_on_a_side_stream_is_rejected(slot, tmp_path):
    result = _grade(slot, tmp_path, "side", SIDE_STREAM, performance=True, timeout_s=300)
    print(f"\nside stream: {result.verdict.value}: {result.message[:200]}")
    assert result.verdict is Verdict.REJECTED and "side stream" in result.message
    assert result.flag


def test_a_cuda_graph_replay_counts_as_a_launch(slot, tmp_path):
    result = _grade(slot, tmp_path, "graph", GRAPH_REPLAY, timeout_s=300)
    print(f"\nCUDA graph replay: {result.verdict.value} {result.score}: {result.message[:200]}")
    assert result.verdict is Verdict.PASSED, [c.message for c in result.checks if not c.passed]


def test_exhausting_gpu_memory_is_a_memory_limit(slot, tmp_path):
    result = _grade(slot, tmp_path, "hog", GPU_MEMORY_HOG, timeout_s=120)
    print(f"\nGPU memory hog: {result.verdict.value}: {result.message[:160]}")
    assert result.verdict is Verdict.MEMORY_LIMIT
    assert slot.healthy, slot.problem
    assert _grade(slot, tmp_path, "good2", GOOD, timeout_s=120).verdict is Verdict.PASSED


def test_a_sandbox_given_no_gpu_sees_none(tmp_path):
    # (a full CPU-interpreter grading can't run here: the image's numpy breaks the interpreter)
    launcher = BwrapLauncher(gpu_index=None)
    job = RunnerJob(python=sys.executable, device="cpu", fds=(0, 1), workdir=tmp_path,
                    env={"PATH": os.environ["PATH"]})
    job.inbox.mkdir()
    command, env = launcher.command(job)
    tail = len(job.runner_argv("/grader"))
    probe = ("import os, torch; print(sorted(n for n in os.listdir('/dev') if 'nvidia' in n), "
             "torch.cuda.is_available())")
    proc = subprocess.run(command[:-tail] + [sys.executable, "-I", "-c", probe], env=env,
                          capture_output=True, text=True, timeout=120)
    print(f"\nno-GPU sandbox: {proc.stdout.strip()} {proc.stderr.strip()[-200:]}")
    assert proc.stdout.strip() == "[] False"


def test_a_job_sees_only_the_gpu_it_was_given(slot, tmp_path):
    gpu = _grade(slot, tmp_path, "gpu_sees", SEES_DEVICES, timeout_s=120)
    print(f"GPU job: {gpu.message.splitlines()[0]}")
    assert "count=1" in gpu.message
    others = [n for n in os.listdir("/dev") if n.startswith("nvidia") and n[6:].isdigit()
              and n != "nvidia0"]
    for node in others:
        assert f"'{node}'" not in gpu.message


def test_selftest_on_cuda_in_the_sandbox():
    proc = run_cli("selftest", "--device", "cuda", "--jobs", "8", timeout=1800)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


@pytest.mark.parametrize("name", sorted(ROW_PER_PROGRAM))
def test_a_row_per_program_kernel_fails_long_rows_in_seconds_with_its_points(name):
    """Issue 11: the tutorial's design asks for a 524288-wide block on 300007 columns; the
    block limit refuses it at once, and the checks it passed keep their points."""
    path = mutant_file("safe_softmax", name.removesuffix(".py"))
    started = time.monotonic()
    proc = run_cli("grade", "safe_softmax", str(path), "--device", "cuda", "--json",
                   "--no-timing")
    elapsed = time.monotonic() - started
    result = json.loads(proc.stdout)
    failed = {c["name"] for c in result["checks"] if not c["passed"]}
    long_rows = next(c for c in result["checks"] if c["name"] == "long_rows")
    print(f"\n{name}: {result['verdict']} {result['score']} in {elapsed:.1f} s "
          f"(grading {result['duration_s']} s); failed {sorted(failed)}\n  long_rows: "
          f"{long_rows['message'][:300]}")
    assert result["verdict"] == "failed"
    assert failed == ROW_PER_PROGRAM[name]  # the same checks as on the CPU (test_grading)
    assert result["score"] == pytest.approx(sum(c["max_points"] for c in result["checks"]
                                                if c["name"] not in failed))
    assert "asked for a block of" in long_rows["message"]  # 131072 columns, or 300007
    assert result["duration_s"] <= 20


# last: if the GPU cannot stop the killed kernel, nothing after it could use the GPU
def test_endless_kernel_times_out_within_a_minute_and_the_next_grading_passes(tmp_path):
    # its own warm slot, like the server's: every call has a budget, the second overrun ends
    # the run (issue 11); the whole-run clock stays at its 300 s default
    slot = Slot("gpu-0-endless", Device.CUDA, gpu_index=0, warm=5)
    started = time.monotonic()
    result = _grade(slot, tmp_path, "endless", ENDLESS_KERNEL)
    elapsed = time.monotonic() - started
    print(f"\nendless kernel: {result.verdict.value} after {elapsed:.1f} s "
          f"(grading {result.duration_s} s): {result.message[:300]}\n  slot healthy: "
          f"{slot.healthy} {slot.problem}")
    assert result.verdict is Verdict.TIMEOUT and result.duration_s <= 60
    assert slot.healthy, slot.problem
    after = _grade(slot, tmp_path, "good", GOOD, performance=True)
    print(f"next grading on the same slot: {after.verdict.value} {after.score} in "
          f"{after.duration_s} s")
    assert after.verdict is Verdict.PASSED
    slot.close()


def test_runners_made_after_the_seed_cache_compile_nothing_of_their_own():
    """The slot compiles its known-answer kernel once (graders.isolation.seed_cache); runners made
    after that copy it and find the kernel compiled ("hit"), and still prove it right."""
    warm = Slot("gpu-seed", Device.CUDA, gpu_index=0, warm=1)
    try:
        assert warm.pool.seed_cache() is not None, "the seed cache was not made"
        first = warm.pool.take()  # possibly made before the seed existed
        first.process.close()
        later = warm.pool.take_ready(wait_s=120)
        assert later is not None
        print(f"\nrunner after the seed: seed cache {later.seed_cache}, ready in "
              f"{later.prepare_s:.2f} s")
        assert later.seed_cache == "hit"
        later.process.close()
    finally:
        warm.close()


@pytest.mark.skipif(len([n for n in os.listdir("/dev") if n.startswith("nvidia") and n[6:].isdigit()])
                    < 2, reason="needs a host with two GPUs")
def test_a_slot_on_the_second_gpu_grades_there_and_sees_it_alone(tmp_path):
    """Worker 2 of a two-GPU host (issue 13): its runners see their one GPU, and grade."""
    second = Slot("gpu-1", Device.CUDA, gpu_index=1)
    try:
        seen = _grade(second, tmp_path, "gpu_sees", SEES_DEVICES, timeout_s=120)
        print(f"\nGPU 1 job: {seen.message.splitlines()[0]}")
        assert "count=1" in seen.message and "'nvidia1'" in seen.message
        assert "'nvidia0'" not in seen.message
        ref = REPO / "reference_solutions" / "safe_softmax" / "solution.py"
        result = second.grade(get_exercise("safe_softmax"), ref, performance=True)
        print(f"GPU 1 reference: {result.verdict.value} {result.score}")
        assert result.verdict is Verdict.PASSED, result.message
    finally:
        second.close()


def test_a_call_gives_the_gpu_gate_back_while_its_kernel_compiles(tmp_path):
    """A call holds the GPU gate while it runs GPU work, not while Triton compiles
    (graders/runner/gpu_gate.py): another slot's timing that asks for the GPU alone when
    the call starts compiling a kernel this runner has never built gets it before the call
    answers, and the call's answer is still right."""
    import threading

    import numpy as np

    from graders.isolation.pool import GpuGate
    from graders.isolation.session import Session
    from graders.shared.arrays import from_f64

    path = tmp_path / "submission.py"
    path.write_text(SAFE_KERNEL + "\n\ndef softmax(x):\n    y = torch.empty_like(x)\n"
                    "    launch(x, y)\n    return y\n")
    gate, got, timings = GpuGate(), [], []
    warm = Slot("gpu-gate", Device.CUDA, gpu_index=0, warm=1)
    try:
        ready = warm.pool.take()
        process = ready.process

        def another_slots_timing():
            with gate.exclusive():
                got.append(time.monotonic())

        def on_progress(event):
            if event.get("event") == "compile" and not timings:
                timings.append(threading.Thread(target=another_slots_timing))
                timings[0].start()

        process.arm(120)
        session = Session(process, 120, warm.pool.launcher.limits,
                          warm.pool.launcher.sandboxed, on_progress=on_progress)
        loaded = session.request({"op": "load", "path": process.place_submission(path),
                                  "entry_points": ["softmax"], "attributes": []})
        assert loaded.header.get("ok"), loaded.header
        x = np.random.default_rng(0).standard_normal((64, 1000))
        reply = session.request({"op": "call", "fn": "softmax", "args": [{"a": 0}],
                                 "kwargs": {}}, [from_f64(x, "float32")], budget_s=60,
                                gate=gate)
        answered = time.monotonic()
        process.close()
    finally:
        warm.close()
    assert timings, "the runner reported no compile"
    timings[0].join(10)
    assert got and got[0] < answered, "the timing waited for the whole call"
    y = reply.arrays[0].to_f64()
    want = np.exp(x - x.max(axis=1, keepdims=True))
    assert np.allclose(y, want / want.sum(axis=1, keepdims=True), atol=1e-5)
    print(f"\nthe timing had the GPU {answered - got[0]:.3f} s before the compiling call answered")
