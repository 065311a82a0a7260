# expect: passed — @triton.heuristics picks BLOCK = min(4096, next_pow2(n_cols)) and num_warps
# from the arguments; one program per row walks it in tiles with a guarded online (max, sum)
# recurrence, so no block exceeds 4096 lanes however long the row is
#
# Written from scratch, not from the reference: the design of Triton kernels that choose
# their meta-parameters with @triton.heuristics (as in the Triton tutorials and many
# kernel libraries), a looped one-program-per-row softmax.
"""Tiled safe softmax whose block size and warp count come from @triton.heuristics.

`@triton.heuristics({name: fn})` computes a meta-parameter from the launch arguments just
before the launch: the wrapper does not pass BLOCK or num_warps, the decorator fills them in
from n_cols. Each distinct BLOCK value is a separate compiled kernel, so capping it at 4096
keeps the number of compiles (and each program's registers) small.

One program per row, two loops over the row in tiles of BLOCK columns:
  1. online statistics: a running max m and a running sum s of exp(x - m). When a tile
     raises the max to m', the old sum is moved onto the new max by s * exp(m - m'), which
     is <= 1, so nothing overflows. The recurrence is kept per lane (vectors m_vec, s_vec)
     and the lanes are merged once after the loop;
  2. normalise: y = exp(x - m) / s for every tile, stored in the input's dtype.
The row is read twice and written once, whatever its length.
"""

import torch
import triton
import triton.language as tl

NEG_INF = tl.constexpr(float("-inf"))  # a global used inside a kernel must be a constexpr


def _block(args):
    # Small rows get a block just big enough; long rows are looped over 4096 at a time.
    return min(4096, triton.next_power_of_2(args["n_cols"]))


def _warps(args):
    # More warps for wider tiles, so each thread holds a handful of elements.
    block = _block(args)
    return 4 if block <= 1024 else (8 if block <= 2048 else 16)


@triton.heuristics({"BLOCK": _block, "num_warps": _warps})
@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # int64: row * stride may pass 2**31
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    offs = tl.arange(0, BLOCK)

    # Pass 1: per-lane online (max, sum). Every lane starts at the identity (-inf, 0).
    m_vec = tl.full([BLOCK], NEG_INF, tl.float32)
    s_vec = tl.zeros([BLOCK], tl.float32)
    for start in tl.range(0, n_cols, BLOCK):
        cols = start + offs
        # Lanes past the end read -inf: the identity of max, and exp(-inf) = 0 for the sum.
        x = tl.load(x_row + cols, mask=cols < n_cols, other=NEG_INF).to(tl.float32)
        m_new = tl.maximum(m_vec, x)
        # A lane that has only seen padding still has max -inf, and -inf - (-inf) is NaN:
        # rescale against 0 there instead (exp(-inf - 0) = 0, the empty sum stays 0).
        m_ref = tl.where(m_new == NEG_INF, 0.0, m_new)
        s_vec = s_vec * tl.exp(m_vec - m_ref) + tl.exp(x - m_ref)
        m_vec = m_new

    # Merge the lanes: the row max, then each lane's sum moved onto it. Some lane holds a
    # real element (n_cols >= 1), so m is finite and s >= 1.
    m = tl.max(m_vec, axis=0)
    s = tl.sum(s_vec * tl.exp(m_vec - m), axis=0)
    inv_s = 1.0 / s

    # Pass 2: normalise, tile by tile, and store in the output's dtype.
    for start in tl.range(0, n_cols, BLOCK):
        cols = start + offs
        ok = cols < n_cols
        x = tl.load(x_row + cols, mask=ok, other=NEG_INF).to(tl.float32)
        y = tl.exp(x - m) * inv_s
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=ok)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Row softmax of a 2-D contiguous float32/float16/bfloat16 tensor; x is unchanged."""
    if x.ndim != 2:
        raise ValueError("softmax expects a 2-D tensor")
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    if n_rows == 0 or n_cols == 0:
        return y
    # BLOCK and num_warps are not passed: the heuristics compute them from n_cols.
    _softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0))
    return y
