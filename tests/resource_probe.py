"""What one kernel of the Triton tutorial's design comes to on this machine's device, a case
at a time: the compiled figures occupancy code reads, or the launch's refusal.

``python tests/resource_probe.py cpu|cuda`` prints one JSON line per case of ``CASES``.
On ``cpu`` it runs the grader's runner set-up for the interpreter (graders.runner.launches,
blocks, gpu_figures), so the figures are those the CPU path hands a submission; on
``cuda`` Triton compiles and loads the kernel on the GPU. tests/test_resource_rules.py
holds both to the H200's figures.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

DEVICE = sys.argv[1] if len(sys.argv) > 1 else "cpu"
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from graders.runner import blocks, launches  # noqa: E402

launches.install(DEVICE)
blocks.install()
if DEVICE == "cpu":
    from graders.runner import gpu_figures

    gpu_figures.install()

# (case, rows, columns, dtype, num_warps, num_stages): the rule each shows
CASES = [
    ("shared memory by stages: 4 over a 32768 float32 row", 32, 32768, "float32", 8, 4),
    ("no shared memory: a 1-column float16 block", 4096, 1, "float16", 8, 4),
    ("registers and shared memory: 4096 float32, 4 warps, 2 stages", 64, 4096, "float32", 4, 2),
    ("spills: an 8192 float32 block on one warp", 8, 8192, "float32", 1, 1),
    ("one stage: a 32768 float32 row in shared memory for the reduction only", 32, 32768,
     "float32", 8, 1),
    ("block elements: a 131072-column row in one block", 2, 100003, "float32", 8, 1),
]


@triton.jit
def persistent_softmax(y_ptr, x_ptr, x_row_stride, y_row_stride, n_rows, n_cols,
                       BLOCK_SIZE: tl.constexpr, NUM_STAGES: tl.constexpr):
    cols = tl.arange(0, BLOCK_SIZE)
    in_row = cols < n_cols
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=NUM_STAGES):
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=in_row, other=float("-inf"))
        x = x.to(tl.float32)
        numerator = tl.exp(x - tl.max(x, axis=0))
        y = numerator / tl.sum(numerator, axis=0)
        tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=in_row)


def probe(rows, cols, dtype, num_warps, num_stages) -> dict:
    device = "cuda" if DEVICE == "cuda" else "cpu"
    x = torch.randn(rows, cols, dtype=getattr(torch, dtype), device=device)
    y = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    try:
        kernel = persistent_softmax.warmup(y, x, x.stride(0), y.stride(0), rows, cols,
                                           BLOCK_SIZE=block, NUM_STAGES=num_stages,
                                           num_warps=num_warps, num_stages=num_stages,
                                           grid=(1,))
        kernel._init_handles()
    except Exception as exc:  # noqa: BLE001 - the refusal is what this case shows
        refusal = blocks.take_refusal()
        return {"raised": type(exc).__name__ if refusal is None else "BlockTooLarge",
                "message": str(exc).splitlines()[0][:300]}
    return {"shared": int(kernel.metadata.shared), "n_regs": int(kernel.n_regs),
            "n_spills": int(kernel.n_spills), "num_warps": int(kernel.metadata.num_warps)}


if __name__ == "__main__":
    for name, *shape in CASES:
        print(json.dumps({"case": name, **probe(*shape)}), flush=True)
