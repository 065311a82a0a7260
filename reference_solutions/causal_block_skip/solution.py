"""Reference solution: the fused causal softmax that skips the fully masked blocks.

    y[i, j] = softmax_j(x[i, :] * scale)   over the columns j <= i + offset,   0 elsewhere

Row i sees its first n_i = min(C, max(0, i + offset + 1)) columns. Everything right of the
diagonal is masked, so x is never needed there: a kernel that loads it anyway moves bytes
for nothing. This one reads x only up to the diagonal (rounded up to a whole vector of
VEC columns, so that the loads stay vector loads), and writes every column of y once (the
masked ones as zeros). That is FlashAttention's block sparsity applied to one softmax.

* float32 rows up to ONE_PASS_MAX_COLS columns: whole rows in registers, several short rows
  per program, one read of the visible part of x and one write of y. A masked load reads
  nothing from memory: the blocks wholly past the diagonal cost only the store of their zeros.
* Longer rows, and float16/bfloat16 rows: one program per row walks the row in tiles, and
  its loops stop at the tile that straddles the diagonal. Pass 1 keeps the running (max,
  sum) over those tiles, pass 2 normalises them (the straddling tile masked lane by lane),
  pass 3 writes zeros to the tiles wholly past the diagonal without loading x. A whole row
  in registers takes exp of its masked lanes too; with 2-byte elements that arithmetic
  costs more than the bytes it saves (measured below).

The trap is the fully masked row (i + offset < 0): its max is -inf, and x - max is
-inf - (-inf) = NaN. Every place that subtracts a max goes through _shift, which shifts by
0 instead; such a row comes out as zeros (the module's choice, as attention kernels make).
Statistics are float32 whatever x's dtype; only the store is in x's dtype.
"""

import torch
import triton
import triton.language as tl

# The traffic question, for the statement's example (R = C = 4096, offset 0, float32; a
# student answers for the shape on their exercise page). Row i sees i + 1 columns.
_R = _C = 4096
ANSWERS = {
    "bytes_fused": 2 * 4 * _R * _C,  # 1 read + 1 write of the whole tensor = 134217728
    # x where visible, 4·Σ(i + 1) = 4·R(R + 1)/2, + all of y = 33562624 + 67108864 = 100671488
    "bytes_causal": 4 * _R * (_R + 1) // 2 + 4 * _R * _C,
}

# ----------------------------------------------------------------------------------
# Tuning knobs, measured on the H200 (docs/experiments/issue44_speed.py, docs/benchmarks.md):
# 2048×16384 float32 offset 8192, whole rows 96.5 % of copy, tiles at best 84 %; 8192×8192
# bfloat16 offset -2048, tiles of 2048 on 4 warps 93.6 %, whole rows at best 75 %.
# ----------------------------------------------------------------------------------
ONE_PASS_MAX_COLS = 32768     # widest float32 row held whole in registers on a GPU
ONE_PASS_MAX_COLS_CPU = 512   # the interpreter: low, so that the CPU checks run the tiles too
ROW_TILE_ELEMS = 4096         # elements per program on the single-pass path
GPU_MIN_PROGRAMS = 1024       # on a GPU, stop packing rows once fewer programs than this remain
TILE = 2048                   # columns per loop step on the tiled path (GPU)
TILE_WARPS = 4                # warps per program on the tiled path (8 lost 10 points)
TILE_CPU = 512                # the same under the interpreter: several tiles in a 2000-column row
VEC = 16                      # the load bound is rounded up to this many columns

NEG_INF = tl.constexpr(float("-inf"))  # a global read inside kernels must be a constexpr
LOG2E = tl.constexpr(1.4426950408889634)  # exp(z) = exp2(z·log2(e))


def _num_warps(block_elems):
    if block_elems <= 1024:
        return 4
    if block_elems <= 4096:
        return 8
    return 16


# ----------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------
@triton.jit
def _visible_logits(x_ptr, rows, cols, n_rows, n_cols, x_row_stride, offset, scale,
                    VEC: tl.constexpr):
    """z = x * scale where row `rows` sees column `cols` (cols <= rows + offset, inside the
    tensor), -inf elsewhere.

    The load stops at the diagonal rounded up to a multiple of VEC columns. A bound that is
    a multiple of VEC makes the load mask constant over each VEC lanes, so the compiler
    issues vector loads; masking lane by lane at i + offset itself would make every load a
    scalar one (0.58 of copy instead of 0.73 on the bfloat16 shape). At most VEC - 1 masked
    columns a row are read; none of them reaches z.

    `rows` and `cols` broadcast against each other: a [BLOCK_M, 1] by [1, BLOCK_N] block,
    or a scalar row and a [TILE] vector."""
    keep = (rows < n_rows) & (cols < n_cols) & (cols <= rows + offset)
    load_end = (tl.maximum(rows + offset + 1, 0) + (VEC - 1)) // VEC * VEC
    x = tl.load(x_ptr + rows * x_row_stride + cols,
                mask=(rows < n_rows) & (cols < n_cols) & (cols < load_end), other=0.0)
    z = x.to(tl.float32) * scale
    # -inf set explicitly rather than through `other=`: whatever scale is (-inf * 0 = NaN)
    return tl.where(keep, z, NEG_INF)


@triton.jit
def _shift(m):
    """The max to subtract: m itself, or 0 where m = -inf (nothing seen yet, or a fully
    masked row). Then exp(z - shift) is exp(-inf) = 0 for every masked z, never
    exp(-inf - (-inf)) = exp(NaN)."""
    return tl.where(m == NEG_INF, 0.0, m)


@triton.jit(do_not_specialize=["offset"])
def _causal_rows_kernel(
    x_ptr, y_ptr, n_rows, n_cols, x_row_stride, y_row_stride, offset, scale,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, VEC: tl.constexpr,
):
    """Single pass: BLOCK_M whole rows per program; visible x read once, y written once."""
    pid = tl.program_id(0)
    rows = pid.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)  # int64: no overflow
    cols = tl.arange(0, BLOCK_N)
    z = _visible_logits(x_ptr, rows[:, None], cols[None, :], n_rows, n_cols, x_row_stride,
                        offset, scale, VEC)

    m = tl.max(z, axis=1)
    m_ref = _shift(m)
    p = tl.exp(z - m_ref[:, None])  # masked positions: exactly 0
    s = tl.sum(p, axis=1)
    # a fully masked row has s = 0 and p = 0: divide by 1 and store its zeros
    inv_s = 1.0 / tl.where(m == NEG_INF, 1.0, s)
    y = p * inv_s[:, None]

    out = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    tl.store(y_ptr + rows[:, None] * y_row_stride + cols[None, :],
             y.to(y_ptr.dtype.element_ty), mask=out)


@triton.jit(do_not_specialize=["offset"])
def _causal_tiles_kernel(
    x_ptr, y_ptr, n_rows, n_cols, x_row_stride, y_row_stride, offset, scale,
    TILE: tl.constexpr, VEC: tl.constexpr,
):
    """One program per row, its loops stopping at the diagonal. Base 2 throughout:
    z = x·scale·log2(e), so exp2(z - m) is exp(x·scale - max), one exp2 an element."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, TILE)
    y_row = y_ptr + row * y_row_stride
    scale2 = scale * LOG2E

    # The columns this row sees, 0 .. row + offset cut to the row, and the end of the last
    # tile that holds one of them: the tile that straddles the diagonal is read (its masked
    # lanes are -inf), every tile after it is wholly masked and never read.
    n_visible = tl.minimum(tl.maximum(row + offset + 1, 0), n_cols)
    end = tl.cdiv(n_visible, TILE) * TILE

    # Pass 1: the running max of the row (one value) and a sum per lane, rescaled onto the
    # new max whenever a tile raises it, over the tiles up to the diagonal only.
    # num_stages=1: pipelining these loops (3 stages) cost 15 points on the H200.
    m = tl.max(tl.full([TILE], NEG_INF, tl.float32), axis=0)  # the identity (-inf, 0)
    s_vec = tl.zeros([TILE], tl.float32)
    for start in tl.range(0, end, TILE, num_stages=1):
        z = _visible_logits(x_ptr, row, start + offs, n_rows, n_cols, x_row_stride,
                            offset, scale2, VEC)
        m_new = tl.maximum(m, tl.max(z, axis=0))
        m_ref = _shift(m_new)  # while only -inf has been seen, (-inf, 0) stays
        s_vec = s_vec * tl.exp2(m - m_ref) + tl.exp2(z - m_ref)
        m = m_new

    m_ref = _shift(m)
    s = tl.sum(s_vec, axis=0)
    inv_s = 1.0 / tl.where(m == NEG_INF, 1.0, s)  # a fully masked row: zeros

    # Pass 2: normalise the same tiles; the straddling tile stores its masked lanes as 0.
    for start in tl.range(0, end, TILE, num_stages=1):
        cols = start + offs
        z = _visible_logits(x_ptr, row, cols, n_rows, n_cols, x_row_stride, offset, scale2,
                            VEC)
        y = tl.exp2(z - m_ref) * inv_s
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=cols < n_cols)

    # Pass 3: the tiles wholly past the diagonal are zeros; nothing is read for them.
    for start in tl.range(end, n_cols, TILE):
        cols = start + offs
        tl.store(y_row + cols, tl.zeros([TILE], y_ptr.dtype.element_ty), mask=cols < n_cols)


# ----------------------------------------------------------------------------------
# Entry point
# ----------------------------------------------------------------------------------
def causal_softmax(x, offset: int = 0, scale: float = 1.0):
    """Row softmax of x * scale where row i sees columns j <= i + offset (zeros elsewhere;
    a row with i + offset < 0 is all zeros). x: 2-D float32, float16 or bfloat16, rows
    contiguous. Returns a new tensor of x's shape and dtype."""
    if x.ndim != 2 or x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError("x must be a 2-D float32, float16 or bfloat16 tensor")
    n_rows, n_cols = x.shape
    if n_cols > 1 and x.stride(1) != 1:
        raise ValueError("each row of x must be contiguous in memory")
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows == 0 or n_cols == 0:
        return y
    # Past these bounds nothing changes (every row fully masked, or fully visible), and the
    # kernel's row + offset stays far from overflowing.
    offset = max(-n_rows - 1, min(int(offset), n_cols))
    scale = float(scale)

    if not x.is_cuda and n_cols <= ONE_PASS_MAX_COLS_CPU:
        # the interpreter: one block shape for every short row. Each new block shape is
        # also compiled for the H200's figures (graders/runner/gpu_figures.py, ~0.1 s each),
        # while a wider block costs the interpreter next to nothing.
        block_n, block_m = ONE_PASS_MAX_COLS_CPU, ROW_TILE_ELEMS // ONE_PASS_MAX_COLS_CPU
    elif x.is_cuda and x.dtype == torch.float32 and n_cols <= ONE_PASS_MAX_COLS:
        block_n = triton.next_power_of_2(n_cols)
        block_m = min(max(1, ROW_TILE_ELEMS // block_n), triton.next_power_of_2(n_rows))
        while block_m > 1 and triton.cdiv(n_rows, block_m) < GPU_MIN_PROGRAMS:
            block_m //= 2
    else:
        block_n = 0
    if block_n:
        _causal_rows_kernel[(triton.cdiv(n_rows, block_m),)](
            x, y, n_rows, n_cols, x.stride(0), y.stride(0), offset, scale,
            BLOCK_M=block_m, BLOCK_N=block_n, VEC=VEC,
            num_warps=_num_warps(block_m * block_n),
        )
        return y

    tile, warps = (TILE, TILE_WARPS) if x.is_cuda else (TILE_CPU, _num_warps(TILE_CPU))
    _causal_tiles_kernel[(n_rows,)](
        x, y, n_rows, n_cols, x.stride(0), y.stride(0), offset, scale,
        TILE=tile, VEC=VEC, num_warps=warps,
    )
    return y
