# expect: passed — one guarded @triton.jit combine for the (m, s) pair does all the merging:
# elementwise in combine, folded over tiles lane by lane, and across lanes and across a
# row's chunks through tl.reduce((m, s), 0, combine); long rows are split over a 2-D grid
#
# Written from scratch, not from the reference: the "softmax statistics as a monoid reduced
# by tl.reduce with a custom combine function" design (Milakov & Gimelshein's online
# normaliser, expressed the way Triton's tuple reductions and scans are written).
"""Online softmax where a single combine function is the whole algorithm.

The pair (m, s) -- a set's max and the sum of exp(x - m) over it -- merges as
    combine((m_a, s_a), (m_b, s_b)) = (m, s_a * exp(m_a - m) + s_b * exp(m_b - m)),
    m = max(m_a, m_b),
with the empty set (-inf, 0) as identity. The merge is associative and commutative, so
Triton may apply it in any tree: `tl.reduce((m_vec, s_vec), axis, _combine)` reduces a
tuple of tensors with a @triton.jit function that takes two flattened tuples
(m_a, s_a, m_b, s_b) and returns one. The same function serves
  * `combine`: elementwise over four tensors;
  * the tile loop: each lane merges the partial (x, 1) of its new element;
  * the end of a chunk: tl.reduce over the lanes;
  * the second kernel of online_softmax: tl.reduce over a row's chunk partials.

The guard: merging two empty partials computes exp(-inf - (-inf)) = exp(NaN), and
0 * NaN is NaN. Padding lanes and padding partials are empty, so this happens all the time
inside the reduction tree; the rescale uses 0 instead of m when m == -inf.

row_stats is one kernel, one program per row (a "chunk" the size of the row).
online_softmax splits each row into chunks over a 2-D grid (row, chunk): kernel 1 writes
the chunks' partials, kernel 2 reduces a row's partials and normalises one chunk.
"""

import math

import torch
import triton
import triton.language as tl

NEG_INF = tl.constexpr(float("-inf"))
TILE = 1024       # columns per loop step
CHUNK = 16384     # columns per program in online_softmax (a multiple of TILE)

ANSWERS = {  # for the statement's example R = C = 4096, float32 (4 bytes an element)
    "bytes_3pass": 268435456,   # read for max, read for sum, read to normalise, write: 4x
    "bytes_1pass": 134217728,   # one read and one write: 2 x 4 * 4096 * 4096
    "fp16_overflow_logit": math.log(65504.0),  # ~11.09; exp overflows fp16 above it
}


@triton.jit
def _combine(m_a, s_a, m_b, s_b):
    """Guarded merge of two (max, sum) partials; two empty ones give (-inf, 0), not NaN."""
    m = tl.maximum(m_a, m_b)
    m_ref = tl.where(m == NEG_INF, 0.0, m)
    return m, s_a * tl.exp(m_a - m_ref) + s_b * tl.exp(m_b - m_ref)


@triton.jit
def _combine_kernel(ma_ptr, sa_ptr, mb_ptr, sb_ptr, m_ptr, s_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    m, s = _combine(tl.load(ma_ptr + offs, mask=ok), tl.load(sa_ptr + offs, mask=ok),
                    tl.load(mb_ptr + offs, mask=ok), tl.load(sb_ptr + offs, mask=ok))
    tl.store(m_ptr + offs, m, mask=ok)
    tl.store(s_ptr + offs, s, mask=ok)


@triton.jit
def _chunk_stats_kernel(x_ptr, m_ptr, s_ptr, n_cols, x_row_stride, chunk, n_chunks,
                        TILE: tl.constexpr):
    """(m, s) of columns [c * chunk, (c + 1) * chunk) of one row, stored at [row, c]."""
    row = tl.program_id(0).to(tl.int64)  # int64: row * stride may pass 2**31
    c = tl.program_id(1)
    end = tl.minimum(c * chunk + chunk, n_cols)
    m_vec = tl.full([TILE], NEG_INF, tl.float32)  # every lane starts as the identity
    s_vec = tl.zeros([TILE], tl.float32)
    for start in tl.range(c * chunk, end, TILE):
        cols = start + tl.arange(0, TILE)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < end, other=NEG_INF)
        m_vec, s_vec = _combine(m_vec, s_vec, x, tl.where(cols < end, 1.0, 0.0))
    m, s = tl.reduce((m_vec, s_vec), 0, _combine)  # merge the lanes
    tl.store(m_ptr + row * n_chunks + c, m)
    tl.store(s_ptr + row * n_chunks + c, s)


@triton.jit
def _chunk_normalize_kernel(x_ptr, y_ptr, mp_ptr, sp_ptr, n_cols, x_row_stride, y_row_stride,
                            chunk, n_chunks, CHUNKS: tl.constexpr, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1)
    k = tl.arange(0, CHUNKS)  # partials past n_chunks load as the identity (-inf, 0)
    m_p = tl.load(mp_ptr + row * n_chunks + k, mask=k < n_chunks, other=NEG_INF)
    s_p = tl.load(sp_ptr + row * n_chunks + k, mask=k < n_chunks, other=0.0)
    m, s = tl.reduce((m_p, s_p), 0, _combine)  # the whole row's (max, sum)
    inv_s = 1.0 / s
    end = tl.minimum(c * chunk + chunk, n_cols)
    for start in tl.range(c * chunk, end, TILE):
        cols = start + tl.arange(0, TILE)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < end, other=NEG_INF)
        tl.store(y_ptr + row * y_row_stride + cols, tl.exp(x - m) * inv_s, mask=cols < end)


def combine(m_a, s_a, m_b, s_b):
    """Elementwise guarded merge of two (max, sum) partials; two new float32 tensors."""
    m, s = torch.empty_like(m_a), torch.empty_like(s_a)
    n = m_a.numel()
    _combine_kernel[(triton.cdiv(n, 1024),)](m_a, s_a, m_b, s_b, m, s, n, BLOCK=1024)
    return m, s


def row_stats(x):
    """Per-row max m and s = sum exp(x - m) of a float32 [R, C] tensor, in one pass."""
    n_rows, n_cols = x.shape
    m = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    s = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    # one chunk per row: the whole row is one program's tile loop
    _chunk_stats_kernel[(n_rows, 1)](x, m, s, n_cols, x.stride(0), n_cols, 1, TILE=TILE)
    return m, s


def online_softmax(x):
    """Row softmax of a float32 [R, C] tensor, rows up to 1,048,576 columns."""
    n_rows, n_cols = x.shape
    n_chunks = triton.cdiv(n_cols, CHUNK)  # at most 64 for 2**20 columns
    mp = torch.empty((n_rows, n_chunks), dtype=torch.float32, device=x.device)
    sp = torch.empty((n_rows, n_chunks), dtype=torch.float32, device=x.device)
    y = torch.empty_like(x)
    _chunk_stats_kernel[(n_rows, n_chunks)](x, mp, sp, n_cols, x.stride(0), CHUNK, n_chunks,
                                            TILE=TILE)
    _chunk_normalize_kernel[(n_rows, n_chunks)](
        x, y, mp, sp, n_cols, x.stride(0), y.stride(0), CHUNK, n_chunks,
        CHUNKS=triton.next_power_of_2(n_chunks), TILE=TILE)
    return y
