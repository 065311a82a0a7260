"""Safe softmax with two kernels chosen by row length.

Short rows (up to 2048 columns): several whole rows per program in one 2-D block of about
4096 elements, each row read once and written once.
Long rows: one program per row walks it in tiles of 2048; each tile's (max, sum) is folded
into the row's running pair (m, s) as a whole (m_new = max(m, tile max), s rescaled by
exp(m - m_new)), then a second walk writes the result.
"""

import torch
import triton
import triton.language as tl

SHORT_MAX_COLS = 2048
BLOCK_ELEMS = 4096
LONG_TILE = 2048


@triton.jit
def _short_rows_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    ok = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * x_stride + cols[None, :], mask=ok,
                other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=1)
    # rows past the end are all -inf: shift them by 0 so they give 0/.. and no NaN warnings
    m = tl.where(m == float("-inf"), 0.0, m)
    p = tl.exp(x - m[:, None])
    s = tl.sum(p, axis=1)
    s = tl.where(s == 0.0, 1.0, s)
    y = p / s[:, None]
    tl.store(y_ptr + rows[:, None] * y_stride + cols[None, :], y.to(y_ptr.dtype.element_ty),
             mask=ok)


@triton.jit
def _long_rows_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_stride
    lanes = tl.arange(0, TILE)
    # fp32 scalars, the types the loop carries (a Python float would not be one)
    m = tl.max(tl.full([TILE], float("-inf"), tl.float32), axis=0)
    s = tl.sum(tl.zeros([TILE], tl.float32), axis=0)
    for start in range(0, n_cols, TILE):
        cols = start + lanes
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))  # finite after the first (full) tile
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    inv_s = 1.0 / s
    for start in range(0, n_cols, TILE):
        cols = start + lanes
        ok = cols < n_cols
        x = tl.load(x_row + cols, mask=ok, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * y_stride + cols, (tl.exp(x - m) * inv_s).to(y_ptr.dtype.element_ty),
                 mask=ok)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    if n_rows == 0 or n_cols == 0:
        return y
    if n_cols <= SHORT_MAX_COLS:
        block_n = triton.next_power_of_2(n_cols)
        block_m = min(BLOCK_ELEMS // block_n, triton.next_power_of_2(n_rows))
        _short_rows_kernel[(triton.cdiv(n_rows, block_m),)](
            x, y, n_rows, n_cols, x.stride(0), y.stride(0),
            BLOCK_M=block_m, BLOCK_N=block_n, num_warps=8)
    else:
        _long_rows_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0),
                                     TILE=LONG_TILE, num_warps=8)
    return y
