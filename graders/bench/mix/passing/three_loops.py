"""Safe softmax the textbook way: a max pass, a sum pass and a write pass over each row.

One program per row; each pass walks the row in tiles of at most 2048 columns, so a row
of any length is covered and no tensor grows past one tile. Three reads and one write per
element: slower than the online version, but every step is the definition.
"""

import torch
import triton
import triton.language as tl

MAX_TILE = 2048


@triton.jit
def _three_pass_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_stride
    y_row = y_ptr + row * y_stride
    lanes = tl.arange(0, TILE)

    # pass 1: the row max (padding lanes as -inf, the identity of max)
    m_vec = tl.full([TILE], float("-inf"), tl.float32)
    for start in range(0, n_cols, TILE):
        cols = start + lanes
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf"))
        m_vec = tl.maximum(m_vec, x.to(tl.float32))
    m = tl.max(m_vec, axis=0)

    # pass 2: the sum of exp(x - m); padding lanes give exp(-inf) = 0
    s_vec = tl.zeros([TILE], tl.float32)
    for start in range(0, n_cols, TILE):
        cols = start + lanes
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf"))
        s_vec += tl.exp(x.to(tl.float32) - m)
    inv_s = 1.0 / tl.sum(s_vec, axis=0)

    # pass 3: write
    for start in range(0, n_cols, TILE):
        cols = start + lanes
        ok = cols < n_cols
        x = tl.load(x_row + cols, mask=ok, other=0.0)
        y = tl.exp(x.to(tl.float32) - m) * inv_s
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=ok)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    if n_rows == 0 or n_cols == 0:
        return y
    tile = min(MAX_TILE, triton.next_power_of_2(n_cols))
    _three_pass_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), TILE=tile,
                                  num_warps=4 if tile <= 512 else 8)
    return y
