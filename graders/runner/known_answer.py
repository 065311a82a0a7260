"""A known-answer kernel, run before any submission is imported.

If Triton (or its CPU interpreter) computes this wrong, the run is a
``grader_error``: a broken toolchain must never read as a student's failure.
It exercises what the exercises rely on: a ``for`` loop whose bound is a
kernel argument (numpy 2.4 breaks exactly that in triton 3.6's interpreter),
masked loads with -inf, max, exp, sum and a store.

Run as a program (``python -m graders.runner.known_answer ROWS COLS``, with
``TRITON_CACHE_DIR`` set), it compiles the kernel into that cache and exits: the grader's own seed
cache (graders.isolation.seed_cache), which every runner of a slot copies before warming. The
timed inputs' fill (graders.runner.fast_fill) is compiled into it too.
"""

from __future__ import annotations

import os
import shutil
import sys
import time

import torch
import triton
import triton.language as tl


@triton.jit
def _row_logsumexp(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=float("-inf"))
        m_new = tl.maximum(m, x)
        safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - safe) + tl.exp(x - safe)
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(tl.where(m == float("-inf"), 0.0, s * tl.exp(m - row_max)), axis=0)
    tl.store(out_ptr + row, row_max + tl.log(total))


def compile_ahead(rows: int, cols: int) -> None:
    """Compile for the GPU, for the shape the checker will send, without allocating or
    launching: Triton's warmup takes dtypes in place of tensors. The launch in
    ``row_logsumexp`` then finds the kernel compiled."""
    _row_logsumexp.warmup(torch.float32, torch.float32, cols, BLOCK=64, grid=(rows,))


def compile_from_seed(rows: int, cols: int, seed: str | None, cache: str | None) -> dict:
    """``compile_ahead``, after copying the grader's seed cache (read-only, made by the
    grader from this same kernel) into this runner's own cache. Says whether the seed
    held the kernel ("hit": nothing was compiled here) and how long it took. A seed that
    misses costs nothing but the copy: the kernel compiles as it would without one."""
    started = time.monotonic()
    state = "none"
    if seed and cache and os.path.isdir(seed):
        shutil.copytree(seed, cache, dirs_exist_ok=True)
        state = "copied"
    before = set(os.listdir(cache)) if cache and os.path.isdir(cache) else set()
    compile_ahead(rows, cols)
    if state == "copied":  # a kernel compiled here is a miss; the host stubs always build
        compiled = [name for name in set(os.listdir(cache)) - before
                    if any(f.endswith((".cubin", ".hsaco")) for f in os.listdir(f"{cache}/{name}"))]
        state = "miss" if compiled else "hit"
    return {"seed": state, "compile_s": round(time.monotonic() - started, 3)}


def row_logsumexp(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    out = torch.empty(rows, dtype=torch.float32, device=x.device)
    _row_logsumexp[(rows,)](x, out, cols, BLOCK=64)
    return out


if __name__ == "__main__":  # the seed cache: TRITON_CACHE_DIR is set by the caller
    compile_ahead(int(sys.argv[1]), int(sys.argv[2]))
    try:  # the timed inputs' fill too, for the runner that times; a runner compiles it without
        from graders.runner import fast_fill

        fast_fill.compile_ahead()
    except Exception as exc:  # noqa: BLE001 - the known-answer kernel is the seed's purpose
        print(f"the timed inputs' fill was not compiled ahead: {exc!r}", file=sys.stderr)
    sys.exit(0)
