# expect: underflow — the logits are multiplied by log2(e) before the row max is subtracted, so
# exp2(x·log2 e - m·log2 e) carries the rounding of x·log2 e, which grows with |x|: rows near
# -1000 come out about 5e-5 off in float32, close but outside the tolerance (precision lost
# before the max subtraction, not a missing one)
#
# Written from scratch, not from the reference: the exp2 idiom of flash-attention style
# kernels, with the scaling done one step too early.
"""Safe softmax with exp2, scaled before the max subtraction.

exp(x) = exp2(x · log2 e), and exp2 is the GPU's native instruction, so fast kernels
compute in base 2. Here the whole row is scaled first, z = x · log2 e, then the max of z
is subtracted: mathematically the same softmax. In float32 it is not quite: z is rounded
to 24 bits, an absolute error of about |x| · 6e-8 that the max subtraction does not
remove, and exp2 turns it into a relative error of the same size. For logits near -1000
that is ~5e-5, five times float32's tolerance. Subtract the max first and scale the
difference, exp2((x - m) · log2 e): the difference is exact near the max, so nothing is
lost.
"""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
TILE = 4096


@triton.jit
def _softmax_exp2(y_ptr, x_ptr, n_cols, x_row_stride, y_row_stride, LOG2E: tl.constexpr,
                  TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    # pass 1: the running (max, sum) of z = x·log2 e, in base 2
    m = tl.full([TILE], float("-inf"), tl.float32)
    s = tl.zeros([TILE], tl.float32)
    for start in range(0, n_cols, TILE):
        cols = start + tl.arange(0, TILE)
        z = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32) * LOG2E
        m_new = tl.maximum(m, z)
        ref = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp2(m - ref) + tl.exp2(z - ref)
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp2(m - row_max), axis=0)
    # pass 2: normalise
    for start in range(0, n_cols, TILE):
        cols = start + tl.arange(0, TILE)
        z = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32) * LOG2E
        y = tl.exp2(z - row_max) / total
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    tile = min(TILE, triton.next_power_of_2(n_cols))
    _softmax_exp2[(n_rows,)](y, x, n_cols, x.stride(0), y.stride(0), LOG2E=LOG2E, TILE=tile,
                             num_warps=4 if tile <= 1024 else 8)
    return y
