# expect: passed — one program per row walks it in tiles with a FlashAttention-style online
# (m, s) recurrence guarded on m == -inf (rescale against 0, write zeros for a fully masked
# row); the mask is added to x * scale, so -inf removes a column and finite values shift it
#
# Written from scratch, not from the reference: the running-statistics loop of
# FlashAttention's forward kernel (m_i, l_i and the rescale alpha = exp(m_i - m_new), with
# its -inf guard), applied to one row of scores at a time.
"""Fused scale -> additive mask -> softmax, tiled the way FlashAttention tiles its rows.

z[j] = x[j] * scale + mask[j] (and -inf for j > row under causal). The mask is ADDITIVE:
0 keeps a column, -inf removes it (exp(-inf) = 0 drops it from numerator and denominator),
and any finite value simply shifts that logit.

Pass 1, per tile: the tile's max raises the running max to m_new; the running sum is moved
onto it by alpha = exp(m - m_new) and the tile's exp(z - m_new) are added. This is the
(m_i, l_i) bookkeeping of FlashAttention, with the same guard: while every column seen so
far is masked, m and m_new are both -inf and m - m_new = -inf - (-inf) = NaN. So the
rescale uses m_safe = 0 whenever m_new == -inf: alpha = exp(-inf - 0) = 0 and the empty
sum stays 0. Testing s == 0 instead would be too late: the NaN is in alpha already.

Pass 2: y = exp(z - m) / s. A row with no visible column ends with m == -inf and s == 0;
again guarded on m, it is written as zeros (the statement's choice), never 0/0.

Masked columns of x are not even loaded: the mask (or the causal test) is read first, and
x only where the logit can be finite.
"""

import torch
import triton
import triton.language as tl

NEG_INF = tl.constexpr(float("-inf"))
MAX_TILE = 2048


@triton.jit
def _scores(x_row, mask_row, row, cols, n_cols, scale,
            HAS_MASK: tl.constexpr, CAUSAL: tl.constexpr):
    """One tile of z = x * scale + mask, -inf where a column is out of the row or masked."""
    keep = cols < n_cols
    if CAUSAL:
        keep = keep & (cols <= row)
    bias = tl.zeros(cols.shape, tl.float32)
    if HAS_MASK:
        bias = tl.load(mask_row + cols, mask=keep, other=0.0)
        keep = keep & (bias != NEG_INF)  # a -inf column: skip its x entirely
    x = tl.load(x_row + cols, mask=keep, other=0.0)
    return tl.where(keep, x * scale + bias, NEG_INF)


@triton.jit
def _masked_softmax_kernel(x_ptr, mask_ptr, y_ptr, n_cols, x_row_stride, mask_row_stride,
                           y_row_stride, scale,
                           HAS_MASK: tl.constexpr, CAUSAL: tl.constexpr, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # int64: row * stride may pass 2**31
    x_row = x_ptr + row * x_row_stride
    mask_row = mask_ptr + row * mask_row_stride  # stride 0: a [1, C] mask, shared by all rows
    y_row = y_ptr + row * y_row_stride
    offs = tl.arange(0, TILE)

    # Pass 1: running (m, s) over the row, one tile at a time; start empty: (-inf, 0).
    m = tl.full([], NEG_INF, tl.float32)
    s = tl.full([], 0.0, tl.float32)
    for start in tl.range(0, n_cols, TILE):
        z = _scores(x_row, mask_row, row, start + offs, n_cols, scale, HAS_MASK, CAUSAL)
        m_new = tl.maximum(m, tl.max(z, axis=0))
        m_safe = tl.where(m_new == NEG_INF, 0.0, m_new)  # the guard: never -inf - (-inf)
        alpha = tl.exp(m - m_safe)                       # <= 1; 0 while the row is empty
        s = s * alpha + tl.sum(tl.exp(z - m_safe), axis=0)
        m = m_new

    # A fully masked row (m == -inf, s == 0) must come out as zeros: guard on m, not on s.
    # With m_safe = 0 every exp(z - m_safe) is exp(-inf) = 0, and dividing by 1 keeps 0.
    empty = m == NEG_INF
    m_safe = tl.where(empty, 0.0, m)
    inv_s = 1.0 / tl.where(empty, 1.0, s)

    # Pass 2: normalise; masked columns have z = -inf and come out exactly 0.
    for start in tl.range(0, n_cols, TILE):
        cols = start + offs
        z = _scores(x_row, mask_row, row, cols, n_cols, scale, HAS_MASK, CAUSAL)
        tl.store(y_row + cols, tl.exp(z - m_safe) * inv_s, mask=cols < n_cols)


def masked_softmax(x, scale: float, mask=None, causal: bool = False):
    """softmax(x * scale + mask) by rows (plus -inf for j > i under causal); x float32
    [R, C]; mask None or additive float32 [R, C] / [1, C]. Returns a new [R, C] tensor."""
    if x.ndim != 2 or x.dtype != torch.float32:
        raise ValueError("x must be a 2-D float32 tensor")
    n_rows, n_cols = x.shape
    if mask is not None:
        if mask.ndim != 2 or mask.shape[1] != n_cols or mask.shape[0] not in (1, n_rows):
            raise ValueError("mask must be [R, C] or [1, C]")
        # Broadcast a [1, C] mask by a row stride of 0: no copy is made.
        mask_row_stride = mask.stride(0) if mask.shape[0] == n_rows and n_rows > 1 else 0
    else:
        mask_row_stride = 0
    y = torch.empty_like(x)
    if n_rows == 0 or n_cols == 0:
        return y
    tile = min(MAX_TILE, triton.next_power_of_2(n_cols))
    _masked_softmax_kernel[(n_rows,)](
        x, mask if mask is not None else x, y, n_cols, x.stride(0), mask_row_stride,
        y.stride(0), float(scale),
        HAS_MASK=mask is not None, CAUSAL=bool(causal), TILE=tile,
        num_warps=4 if tile <= 1024 else 8)
    return y
