"""Reference solution: A07 exercise 1, safe (max-subtracted) row softmax in Triton.

    softmax(x)[i, j] = exp(x[i, j] - m_i) / sum_k exp(x[i, k] - m_i),   m_i = max_k x[i, k]

Subtracting the row max m_i changes nothing mathematically (exp(-m_i) cancels top and
bottom), but it makes every exponent <= 0, so exp() can no longer overflow: without it
exp(100.0) is +inf in float32 (exp(12.0) already is in float16) and one such element
turns the whole row into NaN.

Softmax does a handful of FLOPs per element, so its cost is the bytes it moves. The
ideal is to read x once and write y once. How close we get depends on the row length:

* rows up to ONE_PASS_MAX_COLS columns: a whole row (or several short rows) fits in one
  program's registers, so we load it once, take the max, exponentiate, sum, divide and
  store: 1 read + 1 write, the minimum possible;
* longer rows do not fit, so each row is cut into chunks handled by different programs:
  a first kernel computes each chunk's (max, sum) with the online recurrence (one read);
  a second kernel merges the chunk statistics of its row and normalises its chunk
  (a second read and the write). Two reads + one write, still one read fewer than the
  textbook max pass / sum pass / normalise pass.
* on a GPU, long bfloat16 rows (16384 to 32768 columns) are held as bfloat16 pairs, half
  the registers of float32, and the arithmetic is cut to what hides behind the loads (the
  kernel's comments say how).

Statistics are always computed in float32, even for float16/bfloat16 inputs: the input
is converted right after the load and the result converted back right before the store.
"""

import torch
import triton
import triton.language as tl

# ----------------------------------------------------------------------------------
# Tuning knobs. These are starting points, to be re-measured on the target GPU.
# ----------------------------------------------------------------------------------
ONE_PASS_MAX_COLS = 32768  # widest row held whole in registers (single-pass kernel);
                           # on an H200 this one-read kernel ran at 92-97 % of copy
                           # bandwidth up to 32768 float32 columns, the two-read
                           # tiled path at ~55 %
ONE_PASS_MAX_COLS_CPU = 8192  # under the CPU interpreter registers cost nothing, but a
                              # lower limit means CPU tests also run the tiled path
ROW_TILE_ELEMS = 1024     # elements per program in the single-pass kernel: short rows
                          # are packed several per program so each program does real work
                          # (on the H200, 1024 did as well as or better than 2048 and 4096
                          # for 256- and 1024-column rows: docs/experiments/ceiling_sweep.py)
GPU_MIN_PROGRAMS = 1024   # on a GPU, stop packing rows once fewer programs than this
                          # would be left (roughly 8 per SM on a 132-SM H200)
TILE = 1024               # columns per loop iteration in the long-row kernels
MIN_CHUNK = 4096          # fewest columns of a long row given to one program
MAX_SPLITS = 64           # most programs one long row is split across


def _num_warps(block_elems):
    # Enough threads that each holds a modest number of elements (registers stay low and
    # loads are wide), but not so many that tiny blocks leave threads idle.
    if block_elems <= 1024:
        return 4
    if block_elems <= 4096:
        return 8
    return 16


def _rows_warps(block_elems):
    # The single-pass kernel: one warp per 1024 elements of the block, 2 to 16 warps, so
    # each thread holds about 32 values (16 in a 1024-element block). Measured on the H200
    # against 2 to 16 warps on the graded shapes of 256 to 4096 columns
    # (docs/experiments/ceiling_sweep.py), this is the best or within the noise of it; more
    # warps lost up to 35 points of copy: their threads finish their few loads early, then
    # wait on block-wide reductions. (32768-column rows keep 16 warps, as before.)
    return max(2, min(16, block_elems // 1024))


# ----------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------
@triton.jit
def _merge_stats(m_vec, s_vec):
    """Merge a vector of partial statistics (m = max, s = sum of exp(x - m)) into one.

    Pairwise, two partials merge as m = max(m_a, m_b), s = s_a*exp(m_a - m) + s_b*exp(m_b - m).
    Merging n of them at once is the same thing done in one step: take the overall max,
    rescale every partial sum onto it, add. That is two native reductions (max, sum)
    instead of a tree of custom pairs.

    Guard: if every partial is empty (all m = -inf) then the max is -inf and the rescale
    exp(-inf - (-inf)) = exp(NaN) would poison the result. Rescaling against 0 instead gives
    exp(-inf - 0) = 0, so the merge returns the identity (-inf, 0), never NaN.
    """
    m = tl.max(m_vec, axis=0)
    m_ref = tl.where(m == float("-inf"), 0.0, m)
    s = tl.sum(s_vec * tl.exp(m_vec - m_ref), axis=0)
    return m, s


@triton.jit
def _softmax_rows_kernel(
    x_ptr, y_ptr, n_rows, n_cols, x_row_stride, y_row_stride,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """Single pass: BLOCK_M whole rows per program, each row read once and written once."""
    pid = tl.program_id(0)
    # int64 row indices: row * stride overflows int32 once a tensor passes 2**31 elements.
    rows = pid.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    # Rows past the end re-read the last real row instead of being special-cased: they
    # compute a harmless copy of it and the store mask drops the result.
    rows_in = tl.minimum(rows, n_rows - 1)
    col_ok = cols[None, :] < n_cols

    # BLOCK_N is a power of two >= n_cols. The tail lanes are loaded as -inf, the identity
    # of max, and exp(-inf - m) = 0 keeps them out of the sum too. (Loading them as 0.0
    # would be wrong twice: 0.0 can beat a row of negative numbers in the max, and every
    # tail lane would add exp(0 - m) to the denominator.)
    x = tl.load(x_ptr + rows_in[:, None] * x_row_stride + cols[None, :],
                mask=col_ok, other=float("-inf"))
    x = x.to(tl.float32)  # statistics in float32 whatever the storage type

    m = tl.max(x, axis=1)                 # the safe shift: every exponent becomes <= 0
    p = tl.exp(x - m[:, None])            # in (0, 1]; the max element gives exactly 1
    s = tl.sum(p, axis=1)                 # >= 1, so the division below is safe
    y = p * (1.0 / s)[:, None]            # one reciprocal per row, a multiply per element

    out_ok = (rows[:, None] < n_rows) & col_ok
    tl.store(y_ptr + rows[:, None] * y_row_stride + cols[None, :],
             y.to(y_ptr.dtype.element_ty), mask=out_ok)


@triton.jit
def _chunk_stats_kernel(
    x_ptr, m_part_ptr, s_part_ptr, n_cols, x_row_stride, chunk, n_splits,
    TILE: tl.constexpr,
):
    """Long rows, pass 1: (max, sum) of one chunk of one row, in a single read.

    The online recurrence runs lane-wise: lane k keeps the running max and sum of the
    elements it has seen (columns k, k + TILE, k + 2*TILE, ...). When a bigger value
    arrives, the sum so far was measured against the old max, so it is rescaled by
    exp(m_old - m_new) before the new term is added. Lanes never talk to each other inside
    the loop (no reductions, no barriers); they are merged once at the end.
    """
    row = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    start = split * chunk
    end = tl.minimum(start + chunk, n_cols)
    x_row = x_ptr + row * x_row_stride

    m_vec = tl.full([TILE], float("-inf"), tl.float32)  # identity (-inf, 0)
    s_vec = tl.zeros([TILE], tl.float32)
    for off in tl.range(start, end, TILE):
        cols = off + tl.arange(0, TILE)
        x = tl.load(x_row + cols, mask=cols < end, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m_vec, x)
        # A lane that has only seen -inf (a tail lane of a short last chunk) has
        # m_new = -inf; rescaling against -inf would compute exp(-inf + inf) = NaN.
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
        s_vec = s_vec * tl.exp(m_vec - m_ref) + tl.exp(x - m_ref)
        m_vec = m_new

    # Merge the lanes once, with the same guarded rule.
    m, s = _merge_stats(m_vec, s_vec)
    tl.store(m_part_ptr + row * n_splits + split, m)
    tl.store(s_part_ptr + row * n_splits + split, s)


@triton.jit
def _chunk_normalize_kernel(
    x_ptr, y_ptr, m_part_ptr, s_part_ptr, n_cols, x_row_stride, y_row_stride,
    chunk, n_splits,
    TILE: tl.constexpr, SPLITS_POW2: tl.constexpr,
):
    """Long rows, pass 2: merge the row's chunk statistics, then normalise one chunk."""
    row = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)

    # Every program of the row redoes this tiny merge (at most MAX_SPLITS pairs, read
    # from L2) instead of paying for a third kernel launch.
    k = tl.arange(0, SPLITS_POW2)
    m_p = tl.load(m_part_ptr + row * n_splits + k, mask=k < n_splits, other=float("-inf"))
    s_p = tl.load(s_part_ptr + row * n_splits + k, mask=k < n_splits, other=0.0)
    m, s = _merge_stats(m_p, s_p)
    inv_s = 1.0 / s

    start = split * chunk
    end = tl.minimum(start + chunk, n_cols)
    for off in tl.range(start, end, TILE):
        cols = off + tl.arange(0, TILE)
        ok = cols < end
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=ok, other=float("-inf"))
        y = tl.exp(x.to(tl.float32) - m) * inv_s
        tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=ok)


# ----------------------------------------------------------------------------------
# Long bfloat16 rows on a GPU: the row held as bfloat16 pairs (issue 29)
# ----------------------------------------------------------------------------------
# A 32768-column row converted to float32 takes ~80 registers a thread at 16 warps, so one
# program fits on an SM, and at one program an SM even a copy that holds its row reaches
# only 0.86 of copy bandwidth: while a program reduces, its SM reads nothing. Loaded as
# int32 words (two bfloat16 each) the row takes half the registers (a copy held that way
# at two programs an SM: 0.98; docs/experiments/packed_bf16.py), and then the arithmetic
# is what costs. Five ideas keep both small:
# * the max is taken on the packed words, max.bf16x2 (one instruction for two values),
#   and only the row's final pair is unpacked;
# * unpacking is exact and cheap: a bfloat16 is the top half of a float32, so the low value
#   is the word shifted up 16 and the high one the word with its low half cleared;
# * that unpacking is inline PTX marked impure, so the compiler redoes it where needed
#   rather than keep the unpacked float32 values alive across the sum's reduction;
# * each exponential is computed once, as 2**((x - m)·log2 e) in one ex2 instruction, and
#   kept as bfloat16 pairs in place of the words x came in (y = p / s then rounds once
#   more: within 2**-8 relative, under bfloat16's tolerance; the ex2 flushes results below
#   2**-126, far under any tolerance's absolute floor);
# * two float32 become a word of two bfloat16 in one cvt.rn.bf16x2 instruction.
# 32 warps, 16 words a thread (55 registers): one program an SM, the most threads to share
# the arithmetic. H200, 1024×32768 bfloat16: 0.76-0.78 of copy with the float32 kernel,
# 0.93 with this.
PACKED_MIN_COLS = 16384   # narrower rows fit the float32 kernel at two programs an SM
PACKED_WARPS = 32
LOG2E = tl.constexpr(1.4426950408889634)
TWO_NEG_INF = tl.constexpr(-8323200)  # 0xFF80FF80: a word of two bfloat16 -inf


@triton.jit
def _low_bf16(word):
    """The low bfloat16 of each word, as float32 (impure: recomputed, never kept live)."""
    bits = tl.inline_asm_elementwise("shl.b32 $0, $1, 16;", "=r,r", [word], dtype=tl.int32,
                                     is_pure=False, pack=1)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _high_bf16(word):
    """The high bfloat16 of each word, as float32 (impure, as above)."""
    bits = tl.inline_asm_elementwise("and.b32 $0, $1, 0xFFFF0000;", "=r,r", [word],
                                     dtype=tl.int32, is_pure=False, pack=1)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _max_bf16_pairs(a, b):
    """The larger of each half of two words of bfloat16 pairs, in one instruction."""
    return tl.inline_asm_elementwise("max.bf16x2 $0, $1, $2;", "=r,r,r", [a, b],
                                     dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def _exp2_ftz(x):
    """2**x in one instruction (Triton's exp wraps it in a fix-up for tiny results)."""
    return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x],
                                     dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def _to_bf16_pairs(high, low):
    """Two float32 -> one word of two bfloat16, rounded to nearest even."""
    return tl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $1, $2;", "=r,f,f", [high, low],
                                     dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def _softmax_packed_bf16_kernel(x_ptr, y_ptr, n_words, x_row_stride, y_row_stride,
                                WORDS: tl.constexpr):
    """One row per program, as int32 words; strides and n_words count words."""
    row = tl.program_id(0).to(tl.int64)
    k = tl.arange(0, WORDS)
    ok = k < n_words
    word = tl.load(x_ptr + row * x_row_stride + k, mask=ok, other=TWO_NEG_INF)
    pair = tl.reduce(word, 0, _max_bf16_pairs)  # the max of each half, still packed
    m = tl.maximum((pair << 16).to(tl.float32, bitcast=True),
                   (pair & -65536).to(tl.float32, bitcast=True))  # -65536: 0xFFFF0000
    m_log2 = m * LOG2E
    p_low = _exp2_ftz(_low_bf16(word) * LOG2E - m_log2)
    p_high = _exp2_ftz(_high_bf16(word) * LOG2E - m_log2)
    p = _to_bf16_pairs(p_high, p_low)  # before the sum: the float32 p die before its barrier
    inv_s = 1.0 / tl.sum(p_low + p_high, axis=0)
    y = _to_bf16_pairs(_high_bf16(p) * inv_s, _low_bf16(p) * inv_s)
    tl.store(y_ptr + row * y_row_stride + k, y, mask=ok)


def _packed_bf16_fits(x: torch.Tensor) -> bool:
    """The pairs path: a GPU (inline PTX), bfloat16, long rows seen as whole int32 words."""
    n_cols = x.shape[1]
    return (x.is_cuda and x.dtype == torch.bfloat16 and x.shape[0] > 0
            and PACKED_MIN_COLS <= n_cols <= ONE_PASS_MAX_COLS and n_cols % 2 == 0
            and x.stride(0) % 2 == 0 and x.storage_offset() % 2 == 0)


def _softmax_packed_bf16(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    words_x, words_y = x.view(torch.int32), y.view(torch.int32)
    n_words = x.shape[1] // 2
    _softmax_packed_bf16_kernel[(x.shape[0],)](
        words_x, words_y, n_words, words_x.stride(0), words_y.stride(0),
        WORDS=triton.next_power_of_2(n_words), num_warps=PACKED_WARPS)
    return y


# ----------------------------------------------------------------------------------
# Entry point
# ----------------------------------------------------------------------------------
def softmax(x: torch.Tensor) -> torch.Tensor:
    """Row-wise softmax of a 2-D float32/float16/bfloat16 tensor; returns a new tensor."""
    if x.ndim != 2:
        raise ValueError(f"expected a 2-D tensor, got shape {tuple(x.shape)}")
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"unsupported dtype {x.dtype}")
    n_rows, n_cols = x.shape
    if n_cols > 1 and x.stride(1) != 1:
        raise ValueError("each row must be contiguous in memory")

    if _packed_bf16_fits(x):  # long bfloat16 rows on a GPU: held as pairs (above)
        return _softmax_packed_bf16(x)
    # A fresh output every call; x is only ever read.
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows == 0 or n_cols == 0:
        return y

    one_pass_max = ONE_PASS_MAX_COLS if x.is_cuda else ONE_PASS_MAX_COLS_CPU
    if n_cols <= one_pass_max:
        block_n = triton.next_power_of_2(n_cols)
        # Pack short rows so a program moves ~ROW_TILE_ELEMS elements: one row of 64
        # columns per program would spend its time on launch and reduction overhead.
        block_m = min(max(1, ROW_TILE_ELEMS // block_n), triton.next_power_of_2(n_rows))
        if x.is_cuda:
            # ...but keep enough programs to fill the GPU when there are few rows.
            while block_m > 1 and triton.cdiv(n_rows, block_m) < GPU_MIN_PROGRAMS:
                block_m //= 2
        grid = (triton.cdiv(n_rows, block_m),)
        _softmax_rows_kernel[grid](
            x, y, n_rows, n_cols, x.stride(0), y.stride(0),
            BLOCK_M=block_m, BLOCK_N=block_n, num_warps=_rows_warps(block_m * block_n),
        )
        return y

    # Long rows: split every row into `n_splits` chunks so that even a handful of rows
    # keeps many programs busy, capped so that merging the chunk statistics stays cheap.
    chunk = max(MIN_CHUNK, triton.next_power_of_2(triton.cdiv(n_cols, MAX_SPLITS)))
    n_splits = triton.cdiv(n_cols, chunk)
    m_part = torch.empty((n_rows, n_splits), dtype=torch.float32, device=x.device)
    s_part = torch.empty((n_rows, n_splits), dtype=torch.float32, device=x.device)
    grid = (n_rows, n_splits)  # rows on axis 0 (up to 2**31 - 1); splits <= MAX_SPLITS
    _chunk_stats_kernel[grid](
        x, m_part, s_part, n_cols, x.stride(0), chunk, n_splits,
        TILE=TILE, num_warps=_num_warps(TILE),
    )
    _chunk_normalize_kernel[grid](
        x, y, m_part, s_part, n_cols, x.stride(0), y.stride(0), chunk, n_splits,
        TILE=TILE, SPLITS_POW2=triton.next_power_of_2(n_splits), num_warps=_num_warps(TILE),
    )
    return y
