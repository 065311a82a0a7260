"""The module's lab kernels, in Triton, for the traffic table (A07 §5).

Four ways to compute one row-wise softmax, one program per row, tiled over the row:
naive unsafe (sum pass, write pass: 2 reads + 1 write), safe 3-pass (max, sum, write:
3 reads + 1 write), online 2-pass ((max, sum) in one pass, write: 2 reads + 1 write) and
online 1-pass (the row held in registers: 1 read + 1 write). Then scale → causal mask →
softmax unfused (three torch ops, 7 traversals) against one fused kernel (2 traversals).
These are timing subjects, not exercises: the naive kernel is wrong on purpose.
"""

import torch
import triton
import triton.language as tl

TILE = 1024


@triton.jit
def _naive_unsafe(x_ptr, y_ptr, n_cols, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * n_cols
    s = tl.zeros([TILE], tl.float32)
    for off in range(0, n_cols, TILE):
        cols = off + tl.arange(0, TILE)
        s += tl.exp(tl.load(x_ptr + row + cols, mask=cols < n_cols, other=float("-inf")))
    total = tl.sum(s, axis=0)
    for off in range(0, n_cols, TILE):
        cols = off + tl.arange(0, TILE)
        x = tl.load(x_ptr + row + cols, mask=cols < n_cols, other=float("-inf"))
        tl.store(y_ptr + row + cols, tl.exp(x) / total, mask=cols < n_cols)


@triton.jit
def _safe_3pass(x_ptr, y_ptr, n_cols, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * n_cols
    m = tl.full([TILE], float("-inf"), tl.float32)
    for off in range(0, n_cols, TILE):
        cols = off + tl.arange(0, TILE)
        m = tl.maximum(m, tl.load(x_ptr + row + cols, mask=cols < n_cols, other=float("-inf")))
    row_max = tl.max(m, axis=0)
    s = tl.zeros([TILE], tl.float32)
    for off in range(0, n_cols, TILE):
        cols = off + tl.arange(0, TILE)
        x = tl.load(x_ptr + row + cols, mask=cols < n_cols, other=float("-inf"))
        s += tl.exp(x - row_max)
    total = tl.sum(s, axis=0)
    for off in range(0, n_cols, TILE):
        cols = off + tl.arange(0, TILE)
        x = tl.load(x_ptr + row + cols, mask=cols < n_cols, other=float("-inf"))
        tl.store(y_ptr + row + cols, tl.exp(x - row_max) / total, mask=cols < n_cols)


@triton.jit
def _online_2pass(x_ptr, y_ptr, n_cols, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * n_cols
    m = tl.full([TILE], float("-inf"), tl.float32)
    s = tl.zeros([TILE], tl.float32)
    for off in range(0, n_cols, TILE):
        cols = off + tl.arange(0, TILE)
        x = tl.load(x_ptr + row + cols, mask=cols < n_cols, other=float("-inf"))
        m_new = tl.maximum(m, x)
        ref = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - ref) + tl.exp(x - ref)
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp(m - row_max), axis=0)
    for off in range(0, n_cols, TILE):
        cols = off + tl.arange(0, TILE)
        x = tl.load(x_ptr + row + cols, mask=cols < n_cols, other=float("-inf"))
        tl.store(y_ptr + row + cols, tl.exp(x - row_max) / total, mask=cols < n_cols)


@triton.jit
def _online_1pass(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * n_cols
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row + cols, mask=cols < n_cols, other=float("-inf"))
    p = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row + cols, p / tl.sum(p, axis=0), mask=cols < n_cols)


@triton.jit
def _fused_scale_causal(x_ptr, y_ptr, n_cols, scale, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    row = r.to(tl.int64) * n_cols
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row + cols, mask=cols < n_cols, other=float("-inf"))
    z = tl.where(cols <= r, x * scale, float("-inf"))  # the whole row is loaded, as in the lab
    p = tl.exp(z - tl.max(z, axis=0))
    tl.store(y_ptr + row + cols, p / tl.sum(p, axis=0), mask=cols < n_cols)


def _rows(kernel, x, **meta):
    y = torch.empty_like(x)
    kernel[(x.shape[0],)](x, y, x.shape[1], **meta)
    return y


def naive_unsafe(x):
    return _rows(_naive_unsafe, x, TILE=TILE, num_warps=4)


def safe_3pass(x):
    return _rows(_safe_3pass, x, TILE=TILE, num_warps=4)


def online_2pass(x):
    return _rows(_online_2pass, x, TILE=TILE, num_warps=4)


def online_1pass(x):
    return _rows(_online_1pass, x, BLOCK=triton.next_power_of_2(x.shape[1]), num_warps=16)


SCALE = 0.125


def unfused_scale_mask_softmax(x, causal_mask):
    z = x * SCALE                       # read x, write z: 2 traversals
    z = z + causal_mask                 # read z and the additive mask, write z: 3
    return torch.softmax(z, dim=-1)     # read z, write y: 2 (7 in all)


def fused_scale_mask_softmax(x, causal_mask=None):
    y = torch.empty_like(x)
    _fused_scale_causal[(x.shape[0],)](x, y, x.shape[1], SCALE,
                                       BLOCK=triton.next_power_of_2(x.shape[1]), num_warps=16)
    return y


# (name, function, traversals of the R×C tensor the module predicts)
TRAFFIC = [
    ("naive unsafe", naive_unsafe, 3),
    ("safe 3-pass", safe_3pass, 4),
    ("online 2-pass", online_2pass, 3),
    ("online 1-pass", online_1pass, 2),
]
FUSION = [
    ("unfused scale+mask+softmax", unfused_scale_mask_softmax, 7),
    ("fused scale+mask+softmax", fused_scale_mask_softmax, 2),
]
