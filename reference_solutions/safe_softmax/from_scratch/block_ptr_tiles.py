# expect: passed — loads and stores through tl.make_block_ptr / tl.advance with boundary_check;
# the zero padding of out-of-bounds lanes is replaced by -inf with tl.where before the max, and
# the row is tiled (online max/sum), so long rows and odd widths both work
#
# Written from scratch, not from the reference: the block-pointer style of Triton's
# block-pointer matmul tutorial and of kernels built on tl.make_block_ptr, applied to a
# looped one-program-per-row softmax.
"""Tiled safe softmax that addresses memory through block pointers.

A block pointer (`tl.make_block_ptr`) describes a tile of a tensor: the tensor's shape and
strides, where the tile starts and how big it is. `tl.advance` moves it along; loading with
`boundary_check=(0,)` masks the lanes that fall outside the tensor's shape on axis 0.

The catch: out-of-bounds lanes come back as ZERO (padding_option="zero", or unspecified),
not -inf. A zero is a real value to tl.max (it beats a row of negative numbers) and adds
exp(0 - m) to the sum. So this kernel rebuilds the in-bounds mask from the column index and
sets the padded lanes to -inf with tl.where before any statistic. Stores through a block
pointer with boundary_check simply drop the out-of-bounds lanes.

Block pointers take 32-bit offsets, so the 64-bit part (row * stride) goes into the base
pointer, and each block pointer is a 1-D window of TILE columns on one row.

One program per row, tiles of TILE columns: pass 1 keeps a per-lane online (max, sum)
and merges the lanes at the end; pass 2 normalises and stores.
"""

import torch
import triton
import triton.language as tl

NEG_INF = tl.constexpr(float("-inf"))
MAX_TILE = 2048


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # int64: row * stride may pass 2**31
    x_row = x_ptr + row * x_row_stride   # the 64-bit offset lives in the base pointer
    y_row = y_ptr + row * y_row_stride
    offs = tl.arange(0, TILE)

    # A TILE-wide window on this row of n_cols elements, starting at column 0.
    x_blk = tl.make_block_ptr(base=x_row, shape=(n_cols,), strides=(1,), offsets=(0,),
                              block_shape=(TILE,), order=(0,))

    # Pass 1: per-lane online (max, sum), starting from the identity (-inf, 0).
    m_vec = tl.full([TILE], NEG_INF, tl.float32)
    s_vec = tl.zeros([TILE], tl.float32)
    for start in tl.range(0, n_cols, TILE):
        x = tl.load(x_blk, boundary_check=(0,)).to(tl.float32)
        # Out-of-bounds lanes were padded with 0.0: make them -inf before the max.
        x = tl.where(start + offs < n_cols, x, NEG_INF)
        m_new = tl.maximum(m_vec, x)
        m_ref = tl.where(m_new == NEG_INF, 0.0, m_new)  # padding-only lane: no -inf - -inf
        s_vec = s_vec * tl.exp(m_vec - m_ref) + tl.exp(x - m_ref)
        m_vec = m_new
        x_blk = tl.advance(x_blk, (TILE,))

    # Merge the lanes: the row max, then every lane's sum rescaled onto it.
    m = tl.max(m_vec, axis=0)
    s = tl.sum(s_vec * tl.exp(m_vec - m), axis=0)
    inv_s = 1.0 / s

    # Pass 2: fresh block pointers back at column 0; normalise and store.
    x_blk = tl.make_block_ptr(base=x_row, shape=(n_cols,), strides=(1,), offsets=(0,),
                              block_shape=(TILE,), order=(0,))
    y_blk = tl.make_block_ptr(base=y_row, shape=(n_cols,), strides=(1,), offsets=(0,),
                              block_shape=(TILE,), order=(0,))
    for start in tl.range(0, n_cols, TILE):
        x = tl.load(x_blk, boundary_check=(0,)).to(tl.float32)
        # Padded lanes give exp(0 - m) here, but the store drops them: no tl.where needed.
        y = tl.exp(x - m) * inv_s
        tl.store(y_blk, y.to(y_ptr.dtype.element_ty), boundary_check=(0,))
        x_blk = tl.advance(x_blk, (TILE,))
        y_blk = tl.advance(y_blk, (TILE,))


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Row softmax of a 2-D contiguous float32/float16/bfloat16 tensor; x is unchanged."""
    if x.ndim != 2:
        raise ValueError("softmax expects a 2-D tensor")
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    if n_rows == 0 or n_cols == 0:
        return y
    tile = min(MAX_TILE, triton.next_power_of_2(n_cols))
    num_warps = 4 if tile <= 1024 else 8
    _softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0),
                               TILE=tile, num_warps=num_warps)
    return y
