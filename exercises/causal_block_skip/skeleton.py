"""A07 stretch: the fused causal softmax that skips fully masked blocks. Read statement.md,
then fill in the TODOs.

Row i sees the columns j <= i + offset: y[i, :] is the softmax of x[i, :] * scale over
them, zeros elsewhere; a row with i + offset < 0 returns zeros, never NaN.
"""

import torch
import triton
import triton.language as tl

# TODO: the traffic question, for the R, C, offset and dtype on your exercise page.
ANSWERS = {
    "bytes_fused": None,   # TODO: int, the fused kernel loading the whole row (1 read + 1 write)
    "bytes_causal": None,  # TODO: int, x read only where visible + all of y written
}


@triton.jit
def _causal_softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, offset, scale,
                           TILE: tl.constexpr):
    """One program per row, walking it in tiles of TILE columns."""
    row = tl.program_id(0)
    offs = tl.arange(0, TILE)
    # TODO: n_visible = min(n_cols, max(0, row + offset + 1)): the columns this row sees.
    # TODO: pass 1, over the tiles up to the one that straddles the diagonal only
    #       (tl.range(0, tl.cdiv(n_visible, TILE) * TILE, TILE)): load x where
    #       cols <= row + offset (and cols < n_cols), convert it to float32, z = x * scale,
    #       -inf elsewhere; carry a running (max, sum) per lane:
    #           m_new = max(m, z); s = s * exp(m - m_new) + exp(z - m_new)
    #       THE TRAP: while a lane has seen only -inf, m_new is -inf and m - m_new is NaN:
    #       rescale against 0 where m_new == -inf.
    # TODO: merge the lanes (the same guard); a fully masked row ends with max -inf: make it
    #       come out as zeros.
    # TODO: pass 2, over the same tiles: store exp(z - max) / sum in y's dtype (masked lanes
    #       of the straddling tile are exp(-inf) = 0).
    # TODO: pass 3, the tiles wholly right of the diagonal: store zeros, never load x.
    pass


def causal_softmax(x, offset: int = 0, scale: float = 1.0):
    """Row softmax of x * scale where row i sees columns j <= i + offset (zeros elsewhere).
    x: 2-D float32, float16 or bfloat16. Returns a new tensor of x's shape and dtype."""
    # TODO: allocate the output (torch.empty_like(x) is allowed; torch math is not).
    # TODO: launch _causal_softmax_kernel[(n_rows,)](...) with a power-of-two TILE (at most
    #       65536 elements a program).
    # TODO (speed): rows that fit in one block can be held whole in registers, with the load
    #       masked by cols <= row + offset: one read of the visible part and one write.
    raise NotImplementedError("TODO: implement causal_softmax with a Triton kernel")
