# expect: passed — tiled with a guarded per-lane online (max, sum); under causal, row i only
# loops over columns 0..i, so the tiles entirely right of the diagonal are never loaded (they
# are just written as zeros), and any additive mask is added to x * scale
#
# Written from scratch, not from the reference: the causal tile skipping of FlashAttention-
# style kernels (the loop over key blocks stops at the diagonal instead of masking the
# blocks past it), applied to one row of a fused scale/mask/softmax per program.
"""Fused scale -> additive mask -> softmax that skips the causal upper triangle.

Under causal, row i sees columns 0..i only. Loading the whole row and then setting
j > i to -inf is correct but reads (and exponentiates) the masked half of the matrix for
nothing. Attention kernels instead stop their loop at the diagonal: here the statistics
loop and the normalise loop run over the first n_visible = min(n_cols, i + 1) columns, and
the tiles entirely past the diagonal are written as zeros without being read. Only the
tile that straddles the diagonal needs the j <= i test lane by lane.

The mask is ADDITIVE: z = x * scale + mask; 0 keeps, -inf removes (exp(-inf) = 0), and a
finite value shifts the logit. A [1, C] mask arrives with a row stride of 0.

Statistics are per lane: lane k keeps (m_k, s_k) over its columns k, k + TILE, ... and the
lanes are merged after the loop. A lane that has seen only masked columns has m_k = -inf,
and rescaling by exp(m_k - m_new) would be exp(-inf - (-inf)) = NaN: it is guarded on
m == -inf (rescale against 0), not on s == 0. A fully masked row ends with m = -inf and
is written as zeros.
"""

import torch
import triton
import triton.language as tl

NEG_INF = tl.constexpr(float("-inf"))
MAX_TILE = 2048


@triton.jit
def _masked_softmax_kernel(x_ptr, mask_ptr, y_ptr, n_cols, x_row_stride, mask_row_stride,
                           y_row_stride, scale,
                           HAS_MASK: tl.constexpr, CAUSAL: tl.constexpr, TILE: tl.constexpr):
    pid = tl.program_id(0)
    row = pid.to(tl.int64)  # int64: row * stride may pass 2**31
    x_row = x_ptr + row * x_row_stride
    mask_row = mask_ptr + row * mask_row_stride
    y_row = y_ptr + row * y_row_stride
    offs = tl.arange(0, TILE)

    # Columns past the diagonal are never visible: stop the loops there.
    n_visible = n_cols
    if CAUSAL:
        n_visible = tl.minimum(n_cols, pid + 1)

    # Pass 1: per-lane online (max, sum) over the visible columns only.
    m_vec = tl.full([TILE], NEG_INF, tl.float32)
    s_vec = tl.zeros([TILE], tl.float32)
    for start in tl.range(0, n_visible, TILE):
        cols = start + offs
        keep = cols < n_visible  # the end of the row, or the diagonal under causal
        z = tl.load(x_row + cols, mask=keep, other=0.0) * scale
        if HAS_MASK:
            z += tl.load(mask_row + cols, mask=keep, other=0.0)
        z = tl.where(keep, z, NEG_INF)
        m_new = tl.maximum(m_vec, z)
        m_ref = tl.where(m_new == NEG_INF, 0.0, m_new)  # the guard: never -inf - (-inf)
        s_vec = s_vec * tl.exp(m_vec - m_ref) + tl.exp(z - m_ref)
        m_vec = m_new

    # Merge the lanes (same guard), then make a fully masked row come out as zeros.
    m = tl.max(m_vec, axis=0)
    m_ref = tl.where(m == NEG_INF, 0.0, m)
    s = tl.sum(s_vec * tl.exp(m_vec - m_ref), axis=0)
    inv_s = 1.0 / tl.where(m == NEG_INF, 1.0, s)  # every exp(z - 0) is 0 in that case

    # Pass 2a: normalise the visible tiles (the straddling tile stores its own zeros).
    for start in tl.range(0, n_visible, TILE):
        cols = start + offs
        keep = cols < n_visible
        z = tl.load(x_row + cols, mask=keep, other=0.0) * scale
        if HAS_MASK:
            z += tl.load(mask_row + cols, mask=keep, other=0.0)
        z = tl.where(keep, z, NEG_INF)
        tl.store(y_row + cols, tl.exp(z - m_ref) * inv_s, mask=cols < n_cols)

    # Pass 2b: the tiles wholly right of the diagonal are zeros; nothing is read for them.
    if CAUSAL:
        first_hidden = tl.cdiv(n_visible, TILE) * TILE
        for start in tl.range(first_hidden, n_cols, TILE):
            cols = start + offs
            tl.store(y_row + cols, tl.zeros([TILE], tl.float32), mask=cols < n_cols)


def masked_softmax(x, scale: float, mask=None, causal: bool = False):
    """softmax(x * scale + mask) by rows (plus -inf for j > i under causal); x float32
    [R, C]; mask None or additive float32 [R, C] / [1, C]. Returns a new [R, C] tensor."""
    if x.ndim != 2 or x.dtype != torch.float32:
        raise ValueError("x must be a 2-D float32 tensor")
    n_rows, n_cols = x.shape
    mask_row_stride = 0  # also the [1, C] case: every row reads the same mask row
    if mask is not None:
        if mask.ndim != 2 or mask.shape[1] != n_cols or mask.shape[0] not in (1, n_rows):
            raise ValueError("mask must be [R, C] or [1, C]")
        if mask.shape[0] == n_rows and n_rows > 1:
            mask_row_stride = mask.stride(0)
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
