# expect: passed — exp computed as tl.exp2((x - m) * LOG2E), the max subtracted FIRST and only
# then scaled by log2(e) (the fast-exp idiom of flash-attention style kernels); the row is
# tiled with an online (max, sum), so long rows work and nothing overflows
#
# Written from scratch, not from the reference: the exp2 idiom of FlashAttention-style
# Triton kernels (exp(z) = 2**(z * log2 e)), in a looped one-program-per-row softmax.
"""Tiled safe softmax that exponentiates with exp2, as FlashAttention-style kernels do.

GPUs have a hardware instruction for 2**z (ex2); exp(z) is computed as 2**(z * log2 e).
Writing exp2 yourself lets the compiler fold the log2(e) factor into a multiply you already
do (in attention, the softmax scale), so flash-attention kernels keep their statistics in
the base-2 domain.

The order of operations matters:
  * exp2((x - m) * LOG2E): subtract first, then scale. x - m is <= 0 (and exact when x is
    near m, where it matters most), so the argument is <= 0 and the result lies in
    (0, 1]; the max element gives exactly 2**0 = 1.
  * exp2(x * LOG2E - m * LOG2E) is the same mathematically but rounds x * LOG2E and
    m * LOG2E separately: for logits near +-1000 the products are near 1443 in magnitude,
    where a float32 rounding error is up to 6e-5, and the difference keeps it: a relative
    error of ~1e-4 in y, ten times the float32 tolerance (the grader's `underflow` check,
    rows of -1000 + randn, catches it). Scaling before the subtraction is only safe when
    the max itself is taken of the scaled values (as attention kernels do).

One program per row, tiles of TILE columns: pass 1 keeps a per-lane online (max, sum),
merging the lanes at the end; pass 2 normalises and stores in the input's dtype.
"""

import torch
import triton
import triton.language as tl

NEG_INF = tl.constexpr(float("-inf"))
LOG2E = tl.constexpr(1.4426950408889634)  # log2(e): exp(z) == exp2(z * LOG2E)
MAX_TILE = 4096


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # int64: row * stride may pass 2**31
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    offs = tl.arange(0, TILE)

    # Pass 1: per-lane online (max, sum); each lane starts at the identity (-inf, 0).
    m_vec = tl.full([TILE], NEG_INF, tl.float32)
    s_vec = tl.zeros([TILE], tl.float32)
    for start in tl.range(0, n_cols, TILE):
        cols = start + offs
        x = tl.load(x_row + cols, mask=cols < n_cols, other=NEG_INF).to(tl.float32)
        m_new = tl.maximum(m_vec, x)
        # A lane that has seen only padding has max -inf; rescale against 0 there so that
        # -inf - (-inf) = NaN never reaches exp2 (exp2(-inf) = 0 keeps its sum at 0).
        m_ref = tl.where(m_new == NEG_INF, 0.0, m_new)
        s_vec = s_vec * tl.exp2((m_vec - m_ref) * LOG2E) + tl.exp2((x - m_ref) * LOG2E)
        m_vec = m_new

    # Merge the lanes onto the row max (finite: the row has at least one element).
    m = tl.max(m_vec, axis=0)
    s = tl.sum(s_vec * tl.exp2((m_vec - m) * LOG2E), axis=0)
    inv_s = 1.0 / s  # s >= 1: the max element contributed exactly 1

    # Pass 2: normalise, subtracting the max before the log2(e) scale.
    for start in tl.range(0, n_cols, TILE):
        cols = start + offs
        ok = cols < n_cols
        x = tl.load(x_row + cols, mask=ok, other=NEG_INF).to(tl.float32)
        y = tl.exp2((x - m) * LOG2E) * inv_s
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=ok)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Row softmax of a 2-D contiguous float32/float16/bfloat16 tensor; x is unchanged."""
    if x.ndim != 2:
        raise ValueError("softmax expects a 2-D tensor")
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    if n_rows == 0 or n_cols == 0:
        return y
    tile = min(MAX_TILE, triton.next_power_of_2(n_cols))
    num_warps = 4 if tile <= 1024 else (8 if tile <= 2048 else 16)
    _softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0),
                               TILE=tile, num_warps=num_warps)
    return y
