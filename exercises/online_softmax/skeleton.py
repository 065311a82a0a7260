"""A07 exercise 3: the online (max, sum) recurrence in Triton. Read statement.md, then
fill in the TODOs. Everything is float32.
"""

import math

import torch
import triton
import triton.language as tl

# TODO: your answers to Part 1, question 5, for the R, C and dtype on your exercise page.
ANSWERS = {
    "bytes_3pass": None,          # TODO: int, bytes moved by the safe 3-pass kernel
    "bytes_1pass": None,          # TODO: int, bytes moved by the online 1-pass kernel
    "fp16_overflow_logit": None,  # TODO: float, the logit above which exp overflows fp16
}


@triton.jit
def _combine_kernel(ma_ptr, sa_ptr, mb_ptr, sb_ptr, m_ptr, s_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    # TODO: load the four inputs.
    # TODO: m = max(m_a, m_b); s = s_a * exp(m_a - m) + s_b * exp(m_b - m),
    #       guarded so that m == -inf gives s = 0 instead of NaN.
    # TODO: store m and s.
    pass


@triton.jit
def _row_stats_kernel(x_ptr, m_ptr, s_ptr, n_cols, x_row_stride, TILE: tl.constexpr):
    row = tl.program_id(0)
    # TODO: running (m, s), starting from the identity (-inf, 0).
    # TODO: for each tile of TILE columns: load it (padding lanes as -inf), take the new
    #       max, rescale the old sum onto it, add the tile's exp(x - m_new) terms.
    #       Guard every rescale against m_new == -inf.
    # TODO: store the row's m and s.
    pass


def combine(m_a, s_a, m_b, s_b):
    """Elementwise merge of two (max, sum) partials. Returns two new float32 tensors."""
    # TODO: allocate m, s (torch.empty_like), launch _combine_kernel, return (m, s).
    raise NotImplementedError("TODO: combine")


def row_stats(x):
    """Per-row max m and s = sum(exp(x - m)) of a float32 [R, C] tensor, in one pass."""
    # TODO: allocate m, s of shape [R] (float32) and launch _row_stats_kernel.
    raise NotImplementedError("TODO: row_stats")


def online_softmax(x):
    """Row softmax of a float32 [R, C] tensor with rows up to 1,048,576 columns."""
    # TODO: split each row into chunks handled by different programs; each program
    #       computes its chunk's (m, s); merge the chunks of a row with the guarded
    #       combine; then normalise: y = exp(x - m) / s.
    raise NotImplementedError("TODO: online_softmax")
