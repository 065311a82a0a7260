"""Reference solution: A07 exercise 3, the online (max, sum) recurrence in Triton.

The math
--------
Track, over the elements seen so far, m = their max and s = sum of exp(x - m).

* Adding one element x. The new max is m' = max(m, x). The old sum was measured against
  m; multiplying it by exp(m - m') moves it onto m', because
      s * exp(m - m') = sum exp(x_k - m) * exp(m - m') = sum exp(x_k - m').
  So  s' = s * exp(m - m') + exp(x - m').  Both exponents are <= 0: nothing overflows.
* Merging two partials (m_a, s_a), (m_b, s_b) of disjoint sets: the same argument on each
  side gives  m = max(m_a, m_b),  s = s_a * exp(m_a - m) + s_b * exp(m_b - m).
  Adding one element is merging with the partial (x, 1).
* This merge is commutative and associative (up to float rounding: the merged pair is
  just the max and the sum over the union, whatever the grouping), so partials can be
  reduced in any order or tree: across the lanes of a program, across programs, tiles.
* Identity: the empty set, (-inf, 0): max(-inf, m_b) = m_b and 0 * exp(..) adds nothing.
* Why the guard: merging two empty partials gives m = -inf and the rescale
  exp(-inf - (-inf)) = exp(NaN) = NaN, and 0 * NaN is still NaN. The NaN is born in the
  rescale factor, before the zero sum can cancel it, so testing s == 0 does not help: the
  guard must be on m == -inf. We rescale against 0 instead of m there: exp(-inf - 0) = 0.
* Equal to the multi-pass result: by induction every partial holds exactly the max and the
  max-shifted sum of its elements, so the final (m, s) is the 3-pass max and sum.

Traffic for R = C = 4096 float32 (one traversal = 4*R*C bytes = 64 MiB), module section 5:
* safe 3-pass: read for max, read for sum, read to normalise, write: 4 traversals
  = 16*R*C = 268435456 bytes;
* online 1-pass (row kept in registers): 1 read + 1 write = 8*R*C = 134217728 bytes.
fp16's largest finite value is 65504, so exp(x) overflows for x > ln(65504) ~ 11.09.

The kernels
-----------
* combine: the merge rule, elementwise, as a Triton kernel;
* row_stats: one read of x; each row is cut into chunks handled by separate programs,
  each running the recurrence lane-wise over its chunk, then the chunk partials of every
  row are merged with the guarded rule;
* online_softmax: the same first pass, then a second kernel in which every program merges
  its row's chunk partials and normalises its chunk: 2 reads + 1 write, for rows of any
  length (a row of 2**20 float32 is 4 MiB: it cannot live in one program's registers);
  on a GPU, long rows instead take a persistent kernel whose programs keep their chunk in
  registers and wait for the rest of their row's partials: 1 read + 1 write.
"""

import math

import torch
import triton
import triton.language as tl

# Tuning knobs, to be re-measured on the target GPU.
COMBINE_BLOCK = 1024  # elements per program in the elementwise combine kernel
TILE = 1024           # columns per loop iteration in the row kernels
MIN_CHUNK = 4096      # fewest columns of a row given to one program
MAX_SPLITS = 64       # most programs one row is split across
MERGE_ROWS = 16       # rows per program when merging chunk partials in row_stats

NEG_INF = tl.constexpr(float("-inf"))  # a global read inside kernels must be a constexpr
EMPTY_WORD = tl.constexpr(0xFF800000)  # (m, s) = (-inf, 0) packed as one int64 (_pack)

_R = _C = 4096
ANSWERS = {
    "bytes_3pass": 4 * (4 * _R * _C),   # 3 reads + 1 write of 4-byte elements = 268435456
    "bytes_1pass": 2 * (4 * _R * _C),   # 1 read + 1 write = 134217728
    "fp16_overflow_logit": math.log(65504.0),  # ~11.09
}


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
def _combine(m_a, s_a, m_b, s_b):
    """The merge rule for two (max, sum) partials, guarded against m == -inf."""
    m = tl.maximum(m_a, m_b)
    m_ref = tl.where(m == NEG_INF, 0.0, m)  # both empty: rescale against 0, not -inf
    s = s_a * tl.exp(m_a - m_ref) + s_b * tl.exp(m_b - m_ref)
    return m, s


@triton.jit
def _combine_kernel(ma_ptr, sa_ptr, mb_ptr, sb_ptr, m_ptr, s_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    m_a = tl.load(ma_ptr + offs, mask=ok)
    s_a = tl.load(sa_ptr + offs, mask=ok)
    m_b = tl.load(mb_ptr + offs, mask=ok)
    s_b = tl.load(sb_ptr + offs, mask=ok)
    m, s = _combine(m_a, s_a, m_b, s_b)
    tl.store(m_ptr + offs, m, mask=ok)
    tl.store(s_ptr + offs, s, mask=ok)


@triton.jit
def _merge_stats(m_vec, s_vec, axis: tl.constexpr):
    """Merge many partials along `axis` at once: the overall max, then every sum rescaled
    onto it and added. Same rule and same guard as _combine, but as two native reductions
    (max, sum) rather than a tree of pairwise combines."""
    m = tl.max(m_vec, axis=axis)
    m_ref = tl.where(m == NEG_INF, 0.0, m)
    s = tl.sum(s_vec * tl.exp(m_vec - tl.expand_dims(m_ref, axis)), axis=axis)
    return m, s


@triton.jit
def _chunk_stats_kernel(
    x_ptr, m_part_ptr, s_part_ptr, n_cols, x_row_stride, chunk, n_splits,
    TILE: tl.constexpr,
):
    """Pass 1: (max, sum) of one chunk of one row, reading it once.

    Lane k runs the recurrence over columns k, k + TILE, ... of the chunk: the old sum is
    rescaled by exp(m_old - m_new), then the new term exp(x - m_new) is added. No lane
    waits for another inside the loop; they are merged once at the end.
    """
    row = tl.program_id(0).to(tl.int64)  # int64: row * stride can pass 2**31
    split = tl.program_id(1)
    start = split * chunk
    end = tl.minimum(start + chunk, n_cols)

    m_vec = tl.full([TILE], NEG_INF, tl.float32)  # identity (-inf, 0) in every lane
    s_vec = tl.zeros([TILE], tl.float32)
    for off in tl.range(start, end, TILE):
        cols = off + tl.arange(0, TILE)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < end, other=NEG_INF)
        m_new = tl.maximum(m_vec, x)
        # Lanes past the end of a short chunk only ever see -inf: guard the rescale.
        m_ref = tl.where(m_new == NEG_INF, 0.0, m_new)
        s_vec = s_vec * tl.exp(m_vec - m_ref) + tl.exp(x - m_ref)
        m_vec = m_new

    m, s = _merge_stats(m_vec, s_vec, 0)
    tl.store(m_part_ptr + row * n_splits + split, m)
    tl.store(s_part_ptr + row * n_splits + split, s)


@triton.jit
def _merge_partials_kernel(
    m_part_ptr, s_part_ptr, m_ptr, s_ptr, n_rows, n_splits,
    BLOCK_R: tl.constexpr, SPLITS_POW2: tl.constexpr,
):
    """row_stats, pass 2 (only when rows were split): merge each row's chunk partials."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    k = tl.arange(0, SPLITS_POW2)
    ok = (rows[:, None] < n_rows) & (k[None, :] < n_splits)
    offs = rows[:, None] * n_splits + k[None, :]
    m_p = tl.load(m_part_ptr + offs, mask=ok, other=NEG_INF)  # missing = identity
    s_p = tl.load(s_part_ptr + offs, mask=ok, other=0.0)
    m, s = _merge_stats(m_p, s_p, 1)
    tl.store(m_ptr + rows, m, mask=rows < n_rows)
    tl.store(s_ptr + rows, s, mask=rows < n_rows)


@triton.jit
def _chunk_normalize_kernel(
    x_ptr, y_ptr, m_part_ptr, s_part_ptr, n_cols, x_row_stride, y_row_stride,
    chunk, n_splits,
    TILE: tl.constexpr, SPLITS_POW2: tl.constexpr,
):
    """online_softmax, pass 2: merge the row's chunk partials, normalise one chunk."""
    row = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)

    # Each program of the row repeats this small merge (<= MAX_SPLITS partials, from L2)
    # rather than waiting for a separate merge kernel.
    k = tl.arange(0, SPLITS_POW2)
    m_p = tl.load(m_part_ptr + row * n_splits + k, mask=k < n_splits, other=NEG_INF)
    s_p = tl.load(s_part_ptr + row * n_splits + k, mask=k < n_splits, other=0.0)
    m, s = _merge_stats(m_p, s_p, 0)
    inv_s = 1.0 / s

    start = split * chunk
    end = tl.minimum(start + chunk, n_cols)
    for off in tl.range(start, end, TILE):
        cols = off + tl.arange(0, TILE)
        ok = cols < end
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=ok, other=NEG_INF)
        tl.store(y_ptr + row * y_row_stride + cols, tl.exp(x - m) * inv_s, mask=ok)


# ----------------------------------------------------------------------------------
# The one-read path for a few very long rows (GPU only)
# ----------------------------------------------------------------------------------
# The two kernels above read x twice: at most 2/3 of copy bandwidth. On a GPU the row
# can instead be cut into chunks that stay in registers: each program reads its chunk
# once, publishes the chunk's (m, s), waits until every chunk of its row has published,
# merges the row's partials (the combine above, over all chunks at once) and writes its
# chunk from the registers. One read, one write: graded on an H200 at 0.92 of copy for
# 256×262144 and 0.84 for 64×1048576 float32, against 0.59 for the two kernels.
#
# A program publishes its (m, s) as one 64-bit word, the two float32 bit patterns side by
# side, with one atomic exchange into a slot that starts as -1 (all bits set). The word is
# its own "ready" flag: the row is complete when none of its slots reads -1 any more (-1
# would need s to be a NaN with its sign bit set, which no arithmetic here produces). A
# separate counter would need a release fence between the partial and the count, and on
# an H200 that fence first waits for the program's earlier y stores to reach memory:
# it cost 3 to 5 points of copy (docs/experiments/ceiling_sweep.py).
#
# The wait is a grid-wide dependency, so it is safe only when all programs of a row run
# at the same time. The grid is persistent: G programs, no more than the GPU holds at
# once (from the compiled kernel's register use), G a multiple of the chunks per row,
# and program p takes tasks p, p + G, ... so a row's chunks are all in one iteration.
PERSISTENT_CHUNK = 8192   # columns per task, held in registers (64 per thread at 4 warps)
PERSISTENT_WARPS = 4      # the best of 2-16 warps × 4096-16384 columns on the H200
PERSISTENT_MIN_COLS = 65536  # shorter rows: the two kernels keep enough programs busy
MAX_SPINS = 1 << 22       # a wait that long means co-residency failed: give up (the
                          # -1 slots it reads turn the row into NaN, which fails the checks)
MAX_BLOCKS_PER_SM = 32
REGS_PER_WARP_UNIT = 256  # registers are given to warps in units of 256


@triton.jit
def _pack(m, s):
    """(m, s) as one int64: m's float32 bits low, s's high."""
    m_bits = m.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF
    return m_bits | (s.to(tl.int32, bitcast=True).to(tl.int64) << 32)


@triton.jit
def _unpack(word):
    m = word.to(tl.int32).to(tl.float32, bitcast=True)  # int64 -> int32 keeps the low half
    s = (word >> 32).to(tl.int32).to(tl.float32, bitcast=True)
    return m, s


@triton.jit(do_not_specialize=["n_tasks", "G"])
def _persistent_softmax_kernel(
    x_ptr, y_ptr, slot_ptr, n_cols, x_row_stride, y_row_stride, n_splits, n_tasks, G,
    CHUNK: tl.constexpr, SPLITS_POW2: tl.constexpr, MAX_SPINS: tl.constexpr,
    EVEN: tl.constexpr,
):
    """Task t = (row t // n_splits, chunk t % n_splits); program p runs t = p, p + G, ..."""
    offs = tl.arange(0, CHUNK)
    k = tl.arange(0, SPLITS_POW2)
    for t in range(tl.program_id(0), n_tasks, G):
        row = t // n_splits
        split = t - row * n_splits
        row64 = row.to(tl.int64)
        cols = split * CHUNK + offs
        ok = cols < n_cols

        # the one read: the chunk's exponentials stay in registers until the write
        # (EVEN: every chunk is full, and unmasked accesses cost fewer registers)
        if EVEN:
            x = tl.load(x_ptr + row64 * x_row_stride + cols).to(tl.float32)
        else:
            x = tl.load(x_ptr + row64 * x_row_stride + cols, mask=ok, other=NEG_INF)
            x = x.to(tl.float32)
        m = tl.max(x, axis=0)
        m_ref = tl.where(m == NEG_INF, 0.0, m)  # an all -inf chunk: (-inf, 0), no NaN
        e = tl.exp(x - m_ref)
        s = tl.sum(e, axis=0)

        # publish (m, s) in the chunk's slot, then read the row's slots until all are set
        # (volatile: from L2 every time, never a stale copy in this SM's L1). Slots past
        # n_splits read as (-inf, 0), the identity.
        slots = slot_ptr + row64 * n_splits
        tl.atomic_xchg(slots + split, _pack(m, s), sem="relaxed", scope="gpu")
        words = tl.load(slots + k, mask=k < n_splits, other=EMPTY_WORD, volatile=True)
        spins = 0
        while (tl.sum((words == -1).to(tl.int32), axis=0) > 0) & (spins < MAX_SPINS):
            words = tl.load(slots + k, mask=k < n_splits, other=EMPTY_WORD, volatile=True)
            spins += 1

        # merge the row's partials
        m_p, s_p = _unpack(words)
        big_m = tl.max(m_p, axis=0)
        big_m_ref = tl.where(big_m == NEG_INF, 0.0, big_m)
        big_s = tl.sum(s_p * tl.exp(m_p - big_m_ref), axis=0)

        # the one write: y = exp(x - M) / S = e · exp(m - M) / S
        y = e * (tl.exp(m_ref - big_m_ref) / big_s)
        if EVEN:
            tl.store(y_ptr + row64 * y_row_stride + cols, y.to(y_ptr.dtype.element_ty))
        else:
            tl.store(y_ptr + row64 * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=ok)


_RESIDENT = {}  # (device, chunk, splits_pow2, warps, even) -> programs one SM holds at once


def _programs_per_sm(args, device, chunk, splits_pow2, even):
    """How many programs of the compiled kernel fit on one SM at once (0: unknown)."""
    key = (str(device), chunk, splits_pow2, PERSISTENT_WARPS, even)
    if key not in _RESIDENT:
        try:
            kernel = _persistent_softmax_kernel.warmup(
                *args, 1, CHUNK=chunk, SPLITS_POW2=splits_pow2, MAX_SPINS=MAX_SPINS,
                EVEN=even, num_warps=PERSISTENT_WARPS, num_stages=1, grid=(1,))
            kernel._init_handles()  # fills n_regs, as in Triton's fused-softmax tutorial
            props = torch.cuda.get_device_properties(device)
            warp_regs = -(-kernel.n_regs * 32 // REGS_PER_WARP_UNIT) * REGS_PER_WARP_UNIT
            regs = getattr(props, "regs_per_multiprocessor", 65536)  # sm_80 .. sm_90 values
            threads = getattr(props, "max_threads_per_multi_processor", 2048)
            smem = getattr(props, "shared_memory_per_multiprocessor", 228 << 10)
            by_regs = regs // (warp_regs * PERSISTENT_WARPS)
            by_threads = threads // (32 * PERSISTENT_WARPS)
            by_smem = smem // (kernel.metadata.shared + 1024)  # 1 KiB reserved per block
            _RESIDENT[key] = max(0, min(by_regs, by_threads, by_smem, MAX_BLOCKS_PER_SM))
        except Exception:  # noqa: BLE001 - unknown occupancy: never gamble on co-residency
            _RESIDENT[key] = 0
    return _RESIDENT[key]


def _persistent_softmax(x, y):
    """One read + one write of x on a GPU; False if co-residency cannot be guaranteed."""
    n_rows, n_cols = x.shape
    n_splits = triton.cdiv(n_cols, PERSISTENT_CHUNK)
    splits_pow2 = triton.next_power_of_2(n_splits)
    slots = torch.full((n_rows, n_splits), -1, dtype=torch.int64, device=x.device)  # unset
    args = (x, y, slots, n_cols, x.stride(0), y.stride(0), n_splits, n_rows * n_splits)
    even = n_cols % PERSISTENT_CHUNK == 0
    per_sm = _programs_per_sm(args, x.device, PERSISTENT_CHUNK, splits_pow2, even)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    grid = min((per_sm * sms // n_splits) * n_splits, n_rows * n_splits)
    if grid < n_splits:
        return False
    _persistent_softmax_kernel[(grid,)](
        *args, grid, CHUNK=PERSISTENT_CHUNK, SPLITS_POW2=splits_pow2, MAX_SPINS=MAX_SPINS,
        EVEN=even, num_warps=PERSISTENT_WARPS, num_stages=1)
    return True


# ----------------------------------------------------------------------------------
# Entry points
# ----------------------------------------------------------------------------------
def combine(m_a, s_a, m_b, s_b):
    """Elementwise merge of two (max, sum) partials; returns new tensors (m, s)."""
    n = m_a.shape[0]
    for t in (m_a, s_a, m_b, s_b):
        if t.ndim != 1 or t.shape[0] != n or t.dtype != torch.float32:
            raise ValueError("combine expects four 1-D float32 tensors of equal length")
        if n > 1 and t.stride(0) != 1:
            raise ValueError("combine expects contiguous tensors")
    m = torch.empty_like(m_a)
    s = torch.empty_like(s_a)
    if n > 0:
        grid = (triton.cdiv(n, COMBINE_BLOCK),)
        _combine_kernel[grid](m_a, s_a, m_b, s_b, m, s, n, BLOCK=COMBINE_BLOCK, num_warps=4)
    return m, s


def _check_rows(x):
    if x.ndim != 2 or x.dtype != torch.float32:
        raise ValueError("x must be a 2-D float32 tensor")
    if x.shape[1] > 1 and x.stride(1) != 1:
        raise ValueError("each row of x must be contiguous in memory")


def _split_plan(n_cols):
    # Split long rows across programs so that even a few rows keep many programs busy;
    # at most MAX_SPLITS chunks so that merging the partials stays cheap.
    chunk = max(MIN_CHUNK, triton.next_power_of_2(triton.cdiv(n_cols, MAX_SPLITS)))
    return chunk, triton.cdiv(n_cols, chunk)


def _chunk_stats(x, chunk, n_splits):
    n_rows, n_cols = x.shape
    m_part = torch.empty((n_rows, n_splits), dtype=torch.float32, device=x.device)
    s_part = torch.empty((n_rows, n_splits), dtype=torch.float32, device=x.device)
    _chunk_stats_kernel[(n_rows, n_splits)](
        x, m_part, s_part, n_cols, x.stride(0), chunk, n_splits,
        TILE=TILE, num_warps=_num_warps(TILE),
    )
    return m_part, s_part


def row_stats(x):
    """Per-row max m and s = sum(exp(x - m)), float32 [R] each, from one read of x."""
    _check_rows(x)
    n_rows, n_cols = x.shape
    if n_rows == 0 or n_cols == 0:
        empty = torch.empty((n_rows,), dtype=torch.float32, device=x.device)
        return empty, torch.empty_like(empty)
    chunk, n_splits = _split_plan(n_cols)
    m_part, s_part = _chunk_stats(x, chunk, n_splits)
    if n_splits == 1:
        # One chunk per row: the partials already are the row statistics.
        return m_part.view(n_rows), s_part.view(n_rows)
    m = torch.empty((n_rows,), dtype=torch.float32, device=x.device)
    s = torch.empty((n_rows,), dtype=torch.float32, device=x.device)
    _merge_partials_kernel[(triton.cdiv(n_rows, MERGE_ROWS),)](
        m_part, s_part, m, s, n_rows, n_splits,
        BLOCK_R=MERGE_ROWS, SPLITS_POW2=triton.next_power_of_2(n_splits), num_warps=4,
    )
    return m, s


def online_softmax(x):
    """Row softmax of a float32 [R, C] tensor, for rows of any length."""
    _check_rows(x)
    n_rows, n_cols = x.shape
    y = torch.empty((n_rows, n_cols), dtype=torch.float32, device=x.device)
    if n_rows == 0 or n_cols == 0:
        return y
    # On a GPU, long rows take the one-read path (under the CPU interpreter programs run
    # one after another, so a program waiting for its row's other chunks would wait forever)
    if x.is_cuda and n_cols >= PERSISTENT_MIN_COLS and _persistent_softmax(x, y):
        return y
    chunk, n_splits = _split_plan(n_cols)
    m_part, s_part = _chunk_stats(x, chunk, n_splits)
    _chunk_normalize_kernel[(n_rows, n_splits)](
        x, y, m_part, s_part, n_cols, x.stride(0), y.stride(0), chunk, n_splits,
        TILE=TILE, SPLITS_POW2=triton.next_power_of_2(n_splits), num_warps=_num_warps(TILE),
    )
    return y
