# expect: passed — short rows are packed several per program in a 2-D [BLOCK_M, BLOCK_N] block
# (padding lanes -inf, per-row max/sum along axis 1, masked stores); rows longer than 4096
# columns fall back to a one-row-per-program kernel that tiles the row with an online max/sum
#
# Written from scratch, not from the reference: the multi-row design of attorch's softmax
# (a [BLOCK_SIZE_BATCH, BLOCK_SIZE_FEAT] block of several rows) with the single-block /
# looped split of Liger-Kernel's softmax (rows held whole when short, tiled when long).
"""Safe softmax that packs several short rows into one program, and tiles long rows.

A row of 64 columns in a program of its own wastes most of the program: 4 warps are 128
threads for 64 elements, and there are as many programs as rows. Packing BLOCK_M rows into
a [BLOCK_M, BLOCK_N] block gives each program a useful amount of work; the reductions run
along axis 1, so every row still gets its own max and sum.

  * n_cols <= SINGLE_BLOCK_LIMIT: `_multi_row_kernel`, BLOCK_N = next_pow2(n_cols) and
    BLOCK_M rows, with BLOCK_M * BLOCK_N about 4096 elements. Both the rows past n_rows and
    the columns past n_cols are masked; padding lanes read -inf, so a padded row (all -inf)
    is computed but never stored.
  * longer rows: `_tiled_row_kernel`, one program per row, looping over the row in tiles of
    SINGLE_BLOCK_LIMIT columns with a per-lane online (max, sum), then normalising.
No block ever holds more than 4096 elements, whatever the row length.
"""

import torch
import triton
import triton.language as tl

NEG_INF = tl.constexpr(float("-inf"))
SINGLE_BLOCK_LIMIT = 4096  # widest row held whole; also the tile of the long-row kernel
BLOCK_ELEMS = 4096         # target elements per program in the multi-row kernel


@triton.jit
def _multi_row_kernel(x_ptr, y_ptr, n_rows, n_cols, x_row_stride, y_row_stride,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # int64 row indices: row * stride may pass 2**31.
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    ok = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)

    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=ok, other=NEG_INF)
    x = x.to(tl.float32)
    m = tl.max(x, axis=1)                        # [BLOCK_M]: one max per row
    # A row past n_rows is all -inf: -inf - (-inf) is NaN there, but it is never stored.
    # Real rows have a finite max, so their padding lanes give exp(-inf) = 0.
    p = tl.exp(x - m[:, None])
    s = tl.sum(p, axis=1)
    y = p / s[:, None]
    tl.store(y_ptr + rows[:, None] * y_row_stride + cols[None, :],
             y.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _tiled_row_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    offs = tl.arange(0, TILE)

    # Pass 1: per-lane online (max, sum); lanes start empty, (-inf, 0).
    m_vec = tl.full([TILE], NEG_INF, tl.float32)
    s_vec = tl.zeros([TILE], tl.float32)
    for start in tl.range(0, n_cols, TILE):
        cols = start + offs
        x = tl.load(x_row + cols, mask=cols < n_cols, other=NEG_INF).to(tl.float32)
        m_new = tl.maximum(m_vec, x)
        m_ref = tl.where(m_new == NEG_INF, 0.0, m_new)  # padding-only lane: no -inf - -inf
        s_vec = s_vec * tl.exp(m_vec - m_ref) + tl.exp(x - m_ref)
        m_vec = m_new
    m = tl.max(m_vec, axis=0)
    inv_s = 1.0 / tl.sum(s_vec * tl.exp(m_vec - m), axis=0)

    # Pass 2: normalise.
    for start in tl.range(0, n_cols, TILE):
        cols = start + offs
        ok = cols < n_cols
        x = tl.load(x_row + cols, mask=ok, other=NEG_INF).to(tl.float32)
        tl.store(y_row + cols, (tl.exp(x - m) * inv_s).to(y_ptr.dtype.element_ty), mask=ok)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Row softmax of a 2-D contiguous float32/float16/bfloat16 tensor; x is unchanged."""
    if x.ndim != 2:
        raise ValueError("softmax expects a 2-D tensor")
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    if n_rows == 0 or n_cols == 0:
        return y
    if n_cols <= SINGLE_BLOCK_LIMIT:
        block_n = triton.next_power_of_2(n_cols)
        # As many rows as fit in BLOCK_ELEMS, but no more than the tensor has.
        block_m = min(BLOCK_ELEMS // block_n, triton.next_power_of_2(n_rows))
        grid = (triton.cdiv(n_rows, block_m),)
        _multi_row_kernel[grid](x, y, n_rows, n_cols, x.stride(0), y.stride(0),
                                BLOCK_M=block_m, BLOCK_N=block_n, num_warps=8)
    else:
        _tiled_row_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0),
                                     TILE=SINGLE_BLOCK_LIMIT, num_warps=16)
    return y
