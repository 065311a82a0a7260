"""What on a busy grading host slows a timing that holds the GPU "alone" (issue 43).

Under the load bench's 6 slots a grading's timing took 4-6 s at p50 against 0.1-1.5 s
alone, though the GPU gate keeps every other check off the GPU meanwhile, and running the
timing runner at a higher priority than the compiles did not change it. What else touches
the GPU or the driver while a timing runs: runners being closed (CUDA contexts torn down,
their memory freed), runners being made (contexts created), the memory watch's NVML and
nvidia-smi readings, idle contexts, and the compiles' CPU load. This times the same
memory-bound work (a copy and a softmax of 64×1048576 float32, 256 MiB, as the timed
online shape) the way graders/runner/timing.py does (L2 flushed, a GPU head start, CUDA
events), first alone, then beside each of those in turn, and prints per condition the
median and spread of each, their ratio, and the host's wall per repetition.

Usage on a GPU machine: python3 docs/experiments/timing_disturbers.py [--seconds 8]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time

import torch

CHILD = {
    # a runner closed: a context with a few GiB allocated and written, then the process exits
    "teardown": "import torch; x = torch.empty(3 << 30, dtype=torch.uint8, device='cuda'); "
                "x.fill_(1); torch.cuda.synchronize()",
    # a runner made: a context and a small launch, then exit
    "create": "import torch; torch.ones(1, device='cuda').add_(1); torch.cuda.synchronize()",
    # a runner that checks: GPU work of its own (the gate keeps this off a timing: a control)
    "busy": "import torch, time; x = torch.empty(1 << 28, device='cuda'); t = time.time()\n"
            "while time.time() - t < 600: x.mul_(1.0001)",
    # contexts that sit idle with memory held (warm runners, lanes waiting at the gate)
    "idle": "import torch, time; x = torch.empty(2 << 30, dtype=torch.uint8, device='cuda'); "
            "x.fill_(1); torch.cuda.synchronize(); time.sleep(600)",
    # the compiles: CPU at nice 10, as the runners are
    "cpu": "import os, time; os.nice(10); t = time.time()\nwhile time.time() - t < 600: pass",
}


def loop(code: str, forever: bool) -> subprocess.Popen:
    """One child running ``code``, or a shell starting it again and again."""
    if not forever:
        return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    script = f'while true; do {sys.executable} -c "$0"; done'
    return subprocess.Popen(["bash", "-c", script, code], start_new_session=True)


def smi_loop() -> subprocess.Popen:
    script = ("while true; do nvidia-smi --id=0 --query-compute-apps=pid,used_memory "
              "--format=csv,noheader,nounits >/dev/null; done")
    return subprocess.Popen(["bash", "-c", script], start_new_session=True)


def nvml_loop() -> subprocess.Popen:
    code = ("import pynvml, time; pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0)\n"
            "while True:\n pynvml.nvmlDeviceGetComputeRunningProcesses(h); "
            "pynvml.nvmlDeviceGetMemoryInfo(h); time.sleep(0.05)")
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def measure(seconds: float) -> dict:
    """Copy and softmax of one 64×1048576 float32 tensor, timed per repetition."""
    x = torch.randn(64, 1 << 20, device="cuda")
    y = torch.empty_like(x)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    copies, calls, walls = [], [], []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        began = time.perf_counter()
        c0, c1, e0, e1 = (torch.cuda.Event(enable_timing=True) for _ in range(4))
        flush.zero_()
        torch.cuda._sleep(2_000_000)
        c0.record()
        y.copy_(x)
        c1.record()
        flush.zero_()
        torch.cuda._sleep(2_000_000)
        e0.record()
        out = torch.softmax(x, dim=1)
        e1.record()
        kept = out.clone()  # as the runner keeps each output for the checker's rows
        torch.cuda.synchronize()
        del kept
        copies.append(c0.elapsed_time(c1))
        calls.append(e0.elapsed_time(e1))
        walls.append(time.perf_counter() - began)

    def spread(v):
        q = statistics.quantiles(v, n=4)
        return (q[2] - q[0]) / statistics.median(v)
    ratios = [c / t for c, t in zip(copies, calls)]
    return {"reps": len(calls), "copy_ms": statistics.median(copies),
            "call_ms": statistics.median(calls), "call_p90_ms": statistics.quantiles(calls, n=10)[8],
            "call_spread": spread(calls), "fraction": statistics.median(ratios),
            "fraction_spread": spread(ratios), "wall_ms": 1000 * statistics.median(walls),
            "wall_p90_ms": 1000 * statistics.quantiles(walls, n=10)[8]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    conditions = {
        "alone": lambda: [],
        "runners closed (4 loops: 3 GiB context, exit)": lambda: [loop(CHILD["teardown"], True)
                                                                 for _ in range(4)],
        "runners made (4 loops: context, exit)": lambda: [loop(CHILD["create"], True)
                                                         for _ in range(4)],
        "24 idle contexts holding 2 GiB": lambda: [loop(CHILD["idle"], False) for _ in range(24)],
        "nvidia-smi, 4 loops": lambda: [smi_loop() for _ in range(4)],
        "NVML in process, 6 readers at 20/s": lambda: [nvml_loop() for _ in range(6)],
        f"{cores} CPU spinners at nice 10": lambda: [loop(CHILD["cpu"], False)
                                                     for _ in range(cores)],
        "control: another process's kernels": lambda: [loop(CHILD["busy"], False)],
    }
    torch.ones(1, device="cuda")
    measure(2.0)  # warm
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {cores} cores; "
          f"{args.seconds:g} s a condition")
    print("| condition | reps | copy ms | softmax ms | p90 | spread | fraction | its spread | "
          "wall/rep ms | p90 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, start in conditions.items():
        if args.only and not any(o in name for o in args.only):
            continue
        procs = start()
        try:
            # the children past their imports (24 torch imports at once take a while)
            time.sleep(0.0 if not procs else 15.0 if len(procs) > 8 else 5.0)
            r = measure(args.seconds)
        finally:
            for p in procs:  # each loop and the child it runs: a process group of their own
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for p in procs:
                p.wait()
        print(f"| {name} | {r['reps']} | {r['copy_ms']:.3f} | {r['call_ms']:.3f} | "
              f"{r['call_p90_ms']:.3f} | {100 * r['call_spread']:.1f} % | {r['fraction']:.3f} | "
              f"{100 * r['fraction_spread']:.1f} % | {r['wall_ms']:.1f} | {r['wall_p90_ms']:.1f} |",
              flush=True)
        time.sleep(1.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
