"""Issue 23: where an autotuned one-block-per-row softmax spends a grading on the GPU.

attorch's design (one program per row, ``@triton.autotune`` over num_warps 1 to 32, keyed on
the row length) took 57 s to grade on the H200: every config compiles and is benchmarked
the first time a call meets a new key. For each row length and dtype the safe-softmax GPU
checks send, and each num_warps, this prints the cold compile seconds (``warmup`` with an
empty Triton cache), the registers and spills of the compiled kernel, and the seconds the
autotuner's own benchmark (``triton.testing.do_bench``, its defaults) spends on it.

    python3 docs/experiments/autotune_cost.py          # on a GPU machine, ~1-2 min
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="autotune-cost-"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.testing import do_bench  # noqa: E402


@triton.jit
def _softmax_row(y_ptr, x_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=float("-inf"))
    x = x.to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * n_cols + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty),
             mask=cols < n_cols)


def main() -> int:
    rows = 64
    print(f"{'dtype':<9} {'cols':>6} {'warps':>5} {'compile s':>9} {'regs':>5} {'spills':>6} "
          f"{'bench s':>8} {'ms':>8}")
    totals = {"compile": 0.0, "bench": 0.0}
    for dtype in (torch.float32, torch.bfloat16):
        for cols in (1000, 4096, 8192, 32768):
            block = triton.next_power_of_2(cols)
            x = torch.randn(rows, cols, device="cuda", dtype=dtype)
            y = torch.empty_like(x)
            for warps in (1, 2, 4, 8, 16, 32):
                started = time.monotonic()
                handle = _softmax_row.warmup(y, x, cols, BLOCK_SIZE=block, num_warps=warps,
                                             grid=(rows,))
                handle._init_handles()
                compile_s = time.monotonic() - started
                started = time.monotonic()
                ms = do_bench(lambda: _softmax_row[(rows,)](y, x, cols, BLOCK_SIZE=block,
                                                            num_warps=warps),
                              quantiles=(0.5, 0.2, 0.8))[0]
                bench_s = time.monotonic() - started
                totals["compile"] += compile_s
                totals["bench"] += bench_s
                print(f"{str(dtype).replace('torch.', ''):<9} {cols:>6} {warps:>5} "
                      f"{compile_s:>9.2f} {handle.n_regs:>5} {handle.n_spills:>6} "
                      f"{bench_s:>8.2f} {ms:>8.4f}", flush=True)
    print(f"total: compile {totals['compile']:.1f} s, benchmark {totals['bench']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
