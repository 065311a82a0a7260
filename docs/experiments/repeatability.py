"""Issue 16, repeatability: is the spread between gradings in the kernel's time or in the
copy's, and does a copy over the call's own buffers cancel it?

One process times the safe-softmax reference as the runner does (graders/runner/timing.py:
L2 flushed, a 1 ms head start, a copy of the same bytes before each call) and, beside it,
two other ceilings:
  fixed - the grader's copy: one source and one destination for the whole run;
  slot  - a copy that reads the very input buffer the call reads (the pool rotates) and
          writes a destination shaped like the output: the call's own addresses.
Run it in several processes (``--processes N`` starts them) and compare the medians
between processes: a quantity fixed per process shows up as a spread there.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHAPES = [(4096, 4096, "bfloat16"), (65536, 256, "bfloat16"), (32768, 1024, "float32")]


def one_process(reps: int) -> dict:
    import torch
    spec = importlib.util.spec_from_file_location(
        "reference", REPO / "reference_solutions/safe_softmax/solution.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(max(256 << 20, 4 * l2) // 4, dtype=torch.int32, device="cuda")
    out = {}
    for rows, cols, dtype in SHAPES:
        dt = getattr(torch, dtype)
        nbytes = rows * cols * dt.itemsize
        pool_size = max(2, min(8, math.ceil(2 * l2 / nbytes)))
        pool = [torch.randn(rows, cols, device="cuda").to(dt) for _ in range(pool_size)]
        slot_dst = [torch.empty_like(p) for p in pool]
        src = torch.zeros(nbytes, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        for _ in range(2):
            module.softmax(pool[0])
        torch.cuda.synchronize()
        fixed, slot, kernel = [], [], []
        for i in range(reps):
            s = i % pool_size
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(6)]
            for (a, b, work) in ((0, 1, lambda: dst.copy_(src)),
                                 (2, 3, lambda: module.softmax(pool[s])),
                                 (4, 5, lambda: slot_dst[s].copy_(pool[s]))):
                flush.zero_()
                torch.cuda._sleep(2_000_000)
                ev[a].record()
                work()
                ev[b].record()
            torch.cuda.synchronize()
            fixed.append(ev[0].elapsed_time(ev[1]))
            kernel.append(ev[2].elapsed_time(ev[3]))
            slot.append(ev[4].elapsed_time(ev[5]))
        out[f"{rows}x{cols} {dtype}"] = {
            "kernel_us": 1000 * statistics.median(kernel),
            "fixed_us": 1000 * statistics.median(fixed),
            "slot_us": 1000 * statistics.median(slot),
            "fraction_fixed": statistics.median(c / k for c, k in zip(fixed, kernel)),
            "fraction_slot": statistics.median(c / k for c, k in zip(slot, kernel)),
        }
        del pool, slot_dst, src, dst
        torch.cuda.empty_cache()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=0)
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    if not args.processes:
        print(json.dumps(one_process(args.reps)))
        return
    runs = []
    for _ in range(args.processes):
        done = subprocess.run([sys.executable, __file__, "--reps", str(args.reps)],
                              capture_output=True, text=True, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    for shape in runs[0]:
        print(shape)
        for key in runs[0][shape]:
            values = [r[shape][key] for r in runs]
            scale = 100 if key.startswith("fraction") else 1
            shown = ", ".join(f"{scale * v:.1f}" for v in values)
            spread = scale * (max(values) - min(values))
            print(f"  {key:15s} {shown}   range {spread:.1f}")


if __name__ == "__main__":
    main()
