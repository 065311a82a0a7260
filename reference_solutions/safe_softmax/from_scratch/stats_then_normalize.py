# expect: passed — two kernels per call: a statistics kernel (one program per row, tiled online
# max/sum) writes each row's max and sum to float32 buffers, then a normalise kernel over a 2-D
# grid of row x column tiles reads them; no block exceeds 4096 lanes
#
# Written from scratch, not from the reference: the "reduction kernel, then elementwise
# kernel" split of unfused two-launch softmax implementations, with the reduction done as
# a tiled online (max, sum).
"""Safe softmax in two launches: row statistics first, then an elementwise normalise.

Kernel 1, `_row_stats_kernel`, one program per row: walks the row in tiles carrying a
per-lane online (max, sum) -- the old sum is moved onto a new max by exp(m_old - m_new) --
merges the lanes and writes m[row] and s[row] to two float32 buffers of length n_rows.

Kernel 2, `_normalize_kernel`, a 2-D grid (row, column tile): each program reads its row's
m and s (two floats, cached) and writes y = exp(x - m) / s for one tile. The grid has far
more programs than there are rows, so even a handful of very long rows keeps the whole GPU
busy in this pass -- the price is a second launch and an extra tiny read of m and s.

The buffers are float32 whatever the input dtype: the statistics are always float32, only
y is stored in the input's dtype.
"""

import torch
import triton
import triton.language as tl

NEG_INF = tl.constexpr(float("-inf"))
STATS_TILE = 4096  # columns per loop step of the statistics kernel (at most)
NORM_TILE = 1024   # columns per program of the normalise kernel (at most)


@triton.jit
def _row_stats_kernel(x_ptr, m_ptr, s_ptr, n_cols, x_row_stride, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # int64: row * stride may pass 2**31
    x_row = x_ptr + row * x_row_stride
    offs = tl.arange(0, TILE)

    m_vec = tl.full([TILE], NEG_INF, tl.float32)  # per-lane identity (-inf, 0)
    s_vec = tl.zeros([TILE], tl.float32)
    for start in tl.range(0, n_cols, TILE):
        cols = start + offs
        x = tl.load(x_row + cols, mask=cols < n_cols, other=NEG_INF).to(tl.float32)
        m_new = tl.maximum(m_vec, x)
        m_ref = tl.where(m_new == NEG_INF, 0.0, m_new)  # padding-only lane: avoid -inf - -inf
        s_vec = s_vec * tl.exp(m_vec - m_ref) + tl.exp(x - m_ref)
        m_vec = m_new

    m = tl.max(m_vec, axis=0)
    s = tl.sum(s_vec * tl.exp(m_vec - m), axis=0)
    tl.store(m_ptr + row, m)
    tl.store(s_ptr + row, s)


@triton.jit
def _normalize_kernel(x_ptr, y_ptr, m_ptr, s_ptr, n_cols, x_row_stride, y_row_stride,
                      TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    tile = tl.program_id(1)
    cols = tile * TILE + tl.arange(0, TILE)
    ok = cols < n_cols

    m = tl.load(m_ptr + row)
    inv_s = 1.0 / tl.load(s_ptr + row)  # s >= 1: the max element contributed exactly 1
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=ok, other=NEG_INF).to(tl.float32)
    y = tl.exp(x - m) * inv_s
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=ok)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Row softmax of a 2-D contiguous float32/float16/bfloat16 tensor; x is unchanged."""
    if x.ndim != 2:
        raise ValueError("softmax expects a 2-D tensor")
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    if n_rows == 0 or n_cols == 0:
        return y
    # Statistics buffers: float32 always (allocation only, no torch math).
    m = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    s = torch.empty(n_rows, dtype=torch.float32, device=x.device)

    stats_tile = min(STATS_TILE, triton.next_power_of_2(n_cols))
    _row_stats_kernel[(n_rows,)](x, m, s, n_cols, x.stride(0), TILE=stats_tile,
                                 num_warps=4 if stats_tile <= 1024 else 8)

    norm_tile = min(NORM_TILE, triton.next_power_of_2(n_cols))
    grid = (n_rows, triton.cdiv(n_cols, norm_tile))
    _normalize_kernel[grid](x, y, m, s, n_cols, x.stride(0), y.stride(0), TILE=norm_tile,
                            num_warps=4)
    return y
