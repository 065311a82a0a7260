"""A07 exercise 2: fused scale -> mask -> softmax in Triton. Read statement.md, then fill
in the TODOs.

y[i, :] = softmax(x[i, :] * scale + mask[i, :]), plus -inf where j > i when causal.
A fully masked row returns zeros.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _masked_softmax_kernel(
    x_ptr, mask_ptr, y_ptr, n_rows, n_cols, x_row_stride, mask_row_stride, y_row_stride,
    scale,
    HAS_MASK: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """One program per row (a starting point: short rows packed per program and rows
    longer than one block are yours to add)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)  # BLOCK_N is a power of two >= n_cols
    # TODO: decide which positions are kept: cols < n_cols, and cols <= row if CAUSAL.
    # TODO: load x, z = x * scale; if HAS_MASK add the mask row (mask_row_stride is 0
    #       for a [1, C] mask); set every position not kept to -inf.
    # TODO: m = max(z). A fully masked row has m == -inf: z - m would be NaN. Guard it.
    # TODO: p = exp(z - m); s = sum(p); a fully masked row must come out as zeros.
    # TODO: store p / s (float32), masked to cols < n_cols.
    pass


def masked_softmax(x, scale: float, mask=None, causal: bool = False):
    """Row softmax of x * scale + mask (+ causal mask); x float32 [R, C]; mask None or an
    additive float32 mask of shape [R, C] or [1, C]. Returns a new float32 [R, C] tensor."""
    # TODO: allocate the output (torch.empty_like(x) is allowed; torch math is not).
    # TODO: mask_row_stride = mask.stride(0) for an [R, C] mask, 0 for a [1, C] mask.
    #       When mask is None, pass any tensor as mask_ptr and HAS_MASK=False.
    # TODO: launch _masked_softmax_kernel[(n_rows,)](...) with
    #       BLOCK_N = triton.next_power_of_2(n_cols).
    # TODO: rows too long for one block: tile them, merging running (max, sum) pairs,
    #       and guard that merge against max == -inf.
    raise NotImplementedError("TODO: implement masked_softmax with a Triton kernel")
