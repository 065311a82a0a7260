"""Safe softmax, one program per row, two loops over the row in tiles.

Loop 1 carries the online (max, sum) recurrence lane by lane: lane k keeps the max and the
sum of exp(x - max) of the columns k, k + TILE, ... it has seen, rescaling its sum by
exp(m_old - m_new) whenever its max grows. The lanes are merged once after the loop.
Loop 2 reads the row again and writes exp(x - m) / s. No tensor holds more than TILE
elements, so rows of any length are covered.
"""

import torch
import triton
import triton.language as tl

MAX_TILE = 4096


@triton.jit
def _softmax_online_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_stride
    y_row = y_ptr + row * y_stride
    lanes = tl.arange(0, TILE)

    m_vec = tl.full([TILE], float("-inf"), tl.float32)
    s_vec = tl.zeros([TILE], tl.float32)
    for start in range(0, n_cols, TILE):
        cols = start + lanes
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m_vec, x)
        # a lane that has seen only -inf must not compute exp(-inf - (-inf)) = NaN
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        s_vec = s_vec * tl.exp(m_vec - m_safe) + tl.exp(x - m_safe)
        m_vec = m_new

    m = tl.max(m_vec, axis=0)
    s = tl.sum(s_vec * tl.exp(m_vec - m), axis=0)  # a row holds a finite value, so m > -inf
    inv_s = 1.0 / s

    for start in range(0, n_cols, TILE):
        cols = start + lanes
        ok = cols < n_cols
        x = tl.load(x_row + cols, mask=ok, other=float("-inf")).to(tl.float32)
        tl.store(y_row + cols, (tl.exp(x - m) * inv_s).to(y_ptr.dtype.element_ty), mask=ok)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    if n_rows == 0 or n_cols == 0:
        return y
    tile = min(MAX_TILE, triton.next_power_of_2(n_cols))
    num_warps = 4 if tile <= 1024 else 8
    _softmax_online_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0),
                                      TILE=tile, num_warps=num_warps)
    return y
