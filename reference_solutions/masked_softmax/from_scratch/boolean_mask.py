# expect: additive_bias (only) — the mask is read as a boolean (any nonzero value masks the
# position out) instead of being added: right for masks of 0 and -inf, wrong for an attention
# bias, a soft -1e4 mask or a +100 bias, which the contract says are added to x·scale
#
# Written from scratch, not from the reference: a tiled one-program-per-row kernel in the
# style of attention code that takes the mask to be a keep/drop pattern.
"""Masked softmax that treats the mask as "keep where 0, drop elsewhere".

Many attention kernels take a boolean padding mask, and a student who has only seen masks
of 0 and -inf may read the additive mask the same way: ``keep = mask == 0``. For those
masks it is exactly right. The contract's mask is additive, though: its values are added
to x·scale, so a bias of +2.5 or -3.0 shifts a logit, and a row whose mask is -20
everywhere is simply softmax(x·scale). Here both come out wrong: the biased positions
vanish, and the all -20 row comes out as zeros (fully masked).

The rest is a sound design: each row is walked in tiles with a running (max, sum) guarded
on max == -inf, then normalised in a second pass.
"""

import torch
import triton
import triton.language as tl

NEG_INF = tl.constexpr(float("-inf"))
TILE = 1024


@triton.jit
def _logits(x_row, mask_row, row, cols, n_cols, scale, HAS_MASK: tl.constexpr,
            CAUSAL: tl.constexpr):
    keep = cols < n_cols
    if CAUSAL:
        keep = keep & (cols <= row)
    if HAS_MASK:
        keep = keep & (tl.load(mask_row + cols, mask=keep, other=0.0) == 0.0)  # the bug
    x = tl.load(x_row + cols, mask=keep, other=0.0)
    return tl.where(keep, x * scale, NEG_INF)


@triton.jit
def _masked_softmax(x_ptr, mask_ptr, y_ptr, n_cols, mask_row_stride, scale,
                    HAS_MASK: tl.constexpr, CAUSAL: tl.constexpr, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    mask_row = mask_ptr + row * mask_row_stride
    m = tl.full([TILE], NEG_INF, tl.float32)
    s = tl.zeros([TILE], tl.float32)
    for start in range(0, n_cols, TILE):
        z = _logits(x_row, mask_row, row, start + tl.arange(0, TILE), n_cols, scale,
                    HAS_MASK, CAUSAL)
        m_new = tl.maximum(m, z)
        ref = tl.where(m_new == NEG_INF, 0.0, m_new)  # a lane that has only seen -inf
        s = s * tl.exp(m - ref) + tl.exp(z - ref)
        m = m_new
    row_max = tl.max(m, axis=0)
    ref = tl.where(row_max == NEG_INF, 0.0, row_max)
    total = tl.sum(s * tl.exp(m - ref), axis=0)
    inv = tl.where(total == 0.0, 0.0, 1.0 / total)  # a fully masked row: zeros
    for start in range(0, n_cols, TILE):
        cols = start + tl.arange(0, TILE)
        z = _logits(x_row, mask_row, row, cols, n_cols, scale, HAS_MASK, CAUSAL)
        tl.store(y_ptr + row * n_cols + cols, tl.exp(z - ref) * inv, mask=cols < n_cols)


def masked_softmax(x, scale, mask=None, causal=False):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    has_mask = mask is not None
    mask_row_stride = (0 if mask.shape[0] == 1 else n_cols) if has_mask else 0
    tile = min(TILE, triton.next_power_of_2(n_cols))
    _masked_softmax[(n_rows,)](x, mask if has_mask else x, y, n_cols, mask_row_stride,
                               float(scale), HAS_MASK=has_mask, CAUSAL=bool(causal), TILE=tile)
    return y
