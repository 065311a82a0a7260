# expect: fully_masked_row — the tiled online merge computes exp(m_old - m_new) without guarding
# m_new == -inf, so a fully masked row (or a fully masked leading tile) computes exp(-inf -
# (-inf)) = NaN
#
# Written from scratch, not from the reference: a tiled online (max, sum)
# recurrence, one row per program, whose merge is unguarded.
"""Fused scale -> mask -> softmax with a tiled online (max, sum) recurrence, one row per
program: pass 1 walks the row tile by tile keeping a running (max, sum), rescaling the
sum whenever the max grows; pass 2 normalises. Masked positions are -inf."""

import torch
import triton
import triton.language as tl

NEG_INF = tl.constexpr(float("-inf"))
MAX_TILE = 4096


@triton.jit
def _logits(x_ptr, mask_ptr, row, cols, in_bounds, x_row_stride, mask_row_stride, scale,
            HAS_MASK: tl.constexpr, CAUSAL: tl.constexpr):
    keep = in_bounds
    if CAUSAL:
        keep = keep & (cols <= row)
    z = tl.load(x_ptr + row * x_row_stride + cols, mask=keep, other=0.0) * scale
    if HAS_MASK:
        z += tl.load(mask_ptr + row * mask_row_stride + cols, mask=keep, other=0.0)
    return tl.where(keep, z, NEG_INF)


@triton.jit
def _online_masked_softmax_kernel(
    x_ptr, mask_ptr, y_ptr, n_cols, x_row_stride, mask_row_stride, y_row_stride, scale,
    HAS_MASK: tl.constexpr, CAUSAL: tl.constexpr, TILE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)

    # Pass 1: running max m and running sum s of exp(z - m), merged tile by tile.
    m = tl.full([], NEG_INF, tl.float32)
    s = tl.full([], 0.0, tl.float32)
    for off in tl.range(0, n_cols, TILE):
        cols = off + tl.arange(0, TILE)
        z = _logits(x_ptr, mask_ptr, row, cols, cols < n_cols,
                    x_row_stride, mask_row_stride, scale, HAS_MASK, CAUSAL)
        m_new = tl.maximum(m, tl.max(z, axis=0))
        # merge: rescale the old sum onto the new max, add this tile's terms
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(z - m_new), axis=0)
        m = m_new

    # A fully masked row has s == 0: write zeros instead of 0/0.
    inv_s = 1.0 / tl.where(s == 0.0, 1.0, s)

    # Pass 2: normalise.
    for off in tl.range(0, n_cols, TILE):
        cols = off + tl.arange(0, TILE)
        ok = cols < n_cols
        z = _logits(x_ptr, mask_ptr, row, cols, ok,
                    x_row_stride, mask_row_stride, scale, HAS_MASK, CAUSAL)
        tl.store(y_ptr + row * y_row_stride + cols, tl.exp(z - m) * inv_s, mask=ok)


def masked_softmax(x, scale: float, mask=None, causal: bool = False):
    if x.ndim != 2 or x.dtype != torch.float32:
        raise ValueError("x must be a 2-D float32 tensor")
    n_rows, n_cols = x.shape
    has_mask = mask is not None
    if has_mask:
        if mask.shape[1] != n_cols or mask.shape[0] not in (1, n_rows):
            raise ValueError("mask shape does not fit x")
        mask_row_stride = mask.stride(0) if mask.shape[0] == n_rows else 0
        mask_arg = mask
    else:
        mask_row_stride = 0
        mask_arg = x
    y = torch.empty((n_rows, n_cols), dtype=torch.float32, device=x.device)
    if n_rows == 0 or n_cols == 0:
        return y
    tile = min(triton.next_power_of_2(n_cols), MAX_TILE)
    _online_masked_softmax_kernel[(n_rows,)](
        x, mask_arg, y, n_cols, x.stride(0), mask_row_stride, y.stride(0), float(scale),
        HAS_MASK=has_mask, CAUSAL=bool(causal), TILE=tile, num_warps=8 if tile >= 2048 else 4,
    )
    return y
