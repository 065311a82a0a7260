# expect: passed — the per-lane (max, sum) pairs are merged with tl.reduce((m_vec, s_vec), 0,
# combine) and a user @triton.jit combine guarded on m == -inf (two empty partials give
# (-inf, 0), never NaN); the row is tiled, so long rows work
#
# Written from scratch, not from the reference: the "softmax as one reduction over (max, sum)
# pairs" design (Milakov & Gimelshein's online normaliser, written as a monoid the way
# tl.reduce / associative-scan kernels express it), one program per row.
"""Tiled safe softmax whose statistics are ONE reduction over (max, sum) pairs.

The online normaliser treats the pair (m, s) -- a set's max and sum of exp(x - m) -- as an
element of a monoid:
    combine((m_a, s_a), (m_b, s_b)) = (m, s_a * exp(m_a - m) + s_b * exp(m_b - m)),
    m = max(m_a, m_b),   identity (-inf, 0) (the empty set).
The merge is associative and commutative, so `tl.reduce` may apply it in any tree order.
`tl.reduce` accepts a tuple of tensors and a @triton.jit function taking two such tuples
(flattened: m_a, s_a, m_b, s_b) and returning one.

The guard: merging two empty partials computes exp(-inf - (-inf)) = exp(NaN) = NaN, and
0 * NaN is still NaN. The NaN is born in the rescale factor, so the guard is on m == -inf
(rescale against 0 instead), not on s == 0. Padding lanes are exactly such empty partials.

One program per row. Pass 1 folds each tile into the per-lane running pairs (the same
combine, elementwise, with the tile's elements as the partials (x, 1)); after the loop one
tl.reduce merges the lanes. Pass 2 normalises and stores in the input's dtype.
"""

import torch
import triton
import triton.language as tl

NEG_INF = tl.constexpr(float("-inf"))
MAX_TILE = 2048


@triton.jit
def _combine(m_a, s_a, m_b, s_b):
    """Merge two (max, sum) partials; (-inf, 0) is the identity and two of them give it back."""
    m = tl.maximum(m_a, m_b)
    m_ref = tl.where(m == NEG_INF, 0.0, m)  # both empty: exp(-inf - 0) = 0, not exp(NaN)
    s = s_a * tl.exp(m_a - m_ref) + s_b * tl.exp(m_b - m_ref)
    return m, s


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # int64: row * stride may pass 2**31
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    offs = tl.arange(0, TILE)

    # Pass 1: each lane folds its column of tiles into a running pair.
    m_vec = tl.full([TILE], NEG_INF, tl.float32)
    s_vec = tl.zeros([TILE], tl.float32)
    for start in tl.range(0, n_cols, TILE):
        cols = start + offs
        ok = cols < n_cols
        x = tl.load(x_row + cols, mask=ok, other=NEG_INF).to(tl.float32)
        # An element is the partial (x, 1); a padding lane is the empty partial (-inf, 0).
        m_vec, s_vec = _combine(m_vec, s_vec, x, tl.where(ok, 1.0, 0.0))

    # One reduction over the pairs of all lanes: the row's max and sum.
    m, s = tl.reduce((m_vec, s_vec), 0, _combine)
    inv_s = 1.0 / s  # the row is not empty, so m is finite and s >= 1

    # Pass 2: normalise tile by tile.
    for start in tl.range(0, n_cols, TILE):
        cols = start + offs
        ok = cols < n_cols
        x = tl.load(x_row + cols, mask=ok, other=NEG_INF).to(tl.float32)
        y = tl.exp(x - m) * inv_s
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=ok)


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
